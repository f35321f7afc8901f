package lathe

/*
#include "lathe.h"
*/
import "C"

import "github.com/pkg/errors"

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

// ExecutableStats are an executable's counters (lathe_executable_get_stats): its cache of
// compiled programs and, for an AutoSharding program, what the partitioner did
// (docs/ARCHITECTURE.md, "Partitioning AutoSharding programs").
type ExecutableStats struct {
	Compiles, Hits, Evictions int64
	Cached, Capacity          int
	// Partitioned: the program runs as one program of local shapes per device; else
	// PartitionDeclined says why ("" for a program that is not AutoSharding).
	Partitioned          bool
	PartitionDeclined    string
	PartitionFallbacks   int    // ops run whole: on gathered operands for want of a rule, or RNGBitGenerator
	PartitionCollectives int    // collectives the partitioner inserted
	PartitionFallbackOps string // the fallbacks' op names, comma-separated
	ArenaBytes           int64  // the planned arena of one execution (lathe_executable_arena_bytes)
}

// Stats reads the executable's counters. A GoMLX program reaches its executable through
// graph.Graph.Executable (for instance the graph model.Exec.CallWithGraph returns).
func (e *Executable) Stats() (ExecutableStats, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.state == nil {
		return ExecutableStats{}, errors.New("lathe: Stats: executable was finalized")
	}
	var s C.lathe_executable_stats
	if err := toError(C.lathe_executable_get_stats(e.state.c, &s)); err != nil {
		return ExecutableStats{}, err
	}
	var arena C.int64_t
	if err := toError(C.lathe_executable_arena_bytes(e.state.c, &arena)); err != nil {
		return ExecutableStats{}, err
	}
	st := ExecutableStats{Compiles: int64(s.compiles), Hits: int64(s.hits), Evictions: int64(s.evictions),
		Cached: int(s.cached), Capacity: int(s.capacity), Partitioned: bool(s.partitioned),
		PartitionFallbacks: int(s.partition_fallbacks), PartitionCollectives: int(s.partition_collectives),
		ArenaBytes: int64(arena)}
	if s.partition_declined != nil {
		st.PartitionDeclined = C.GoString(s.partition_declined)
	}
	if s.partition_fallback_ops != nil {
		st.PartitionFallbackOps = C.GoString(s.partition_fallback_ops)
	}
	return st, nil
}
