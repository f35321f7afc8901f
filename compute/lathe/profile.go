package lathe

/*
#include "lathe.h"
*/
import "C"

// Profiling (docs/PROFILING.md); the C API under it is tested in tests/unit/test_trace.c and
// tests/unit/test_cuda.c.

// MemoryStats are the device-memory counters of one device, in bytes. On lathe:cpu host memory
// is one pool for the whole process, and on mlx MLX's allocator serves every array of the
// process, so they are the process's (ProcessWide).
type MemoryStats struct {
	Current, Peak, Cached, Allocs int64
	ProcessWide                   bool
}

// TraceFlush writes the backend's trace (option trace=FILE or LATHE_TRACE) to disk as valid
// JSON now; a no-op when it is not tracing.
func (b *Backend) TraceFlush() error {
	c, done, err := b.use("TraceFlush")
	if err != nil {
		return err
	}
	defer done()
	return toError(C.lathe_backend_trace_flush(c))
}

// MemoryStats reads the counters of device (on lathe:cuda, its GPU's caching allocator; on mlx,
// MLX's allocator, which keeps no count of allocations: Allocs is 0).
func (b *Backend) MemoryStats(device int) (MemoryStats, error) {
	c, done, err := b.use("MemoryStats")
	if err != nil {
		return MemoryStats{}, err
	}
	defer done()
	var s C.lathe_memory_stats
	if err := toError(C.lathe_backend_memory_stats(c, C.int(device), &s)); err != nil {
		return MemoryStats{}, err
	}
	return MemoryStats{Current: int64(s.current_bytes), Peak: int64(s.peak_bytes), Cached: int64(s.cached_bytes),
		Allocs: int64(s.n_allocs), ProcessWide: bool(s.process_wide)}, nil
}

// MemoryResetPeak starts device's Peak again from what is in use now (to measure one phase, such
// as a training step after the first).
func (b *Backend) MemoryResetPeak(device int) error {
	c, done, err := b.use("MemoryResetPeak")
	if err != nil {
		return err
	}
	defer done()
	return toError(C.lathe_backend_memory_reset_peak(c, C.int(device)))
}
