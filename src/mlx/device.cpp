/* device.cpp -- the MLX device table: options, memory (one MLX array per tensor), upload and
 * download, and the extern "C" entries, each of which turns any exception into a status.
 *
 * Buffer management (docs/MLX.md): a tensor's data is a Buffer holding an mx::array. Uploads copy
 * the caller's bytes into a new array; executions hand arrays to the next execution without a
 * copy; downloads evaluate the array, make it row-major if it is a strided view, and copy it out.
 * Memory goes back to MLX's allocator when the last tensor (or lazy graph) using it goes. */
#include <cstdio>
#include <cstring>

#include "mlx.h"

namespace lathe_mlx {

mx::StreamOrDevice stream_for(const Context &c, mx::Dtype dt) {
  if (dt == mx::float64 && c.cpu_stream) return *c.cpu_stream;
  return {};
}

namespace {

/* Every entry runs with MLX's lock held, on the context's device and stream. */
struct Entry {
  std::lock_guard<std::recursive_mutex> g;
  explicit Entry(const Context &c) : g(mlx_lock()) {
    mx::Device d = c.opt.gpu ? mx::Device::gpu : mx::Device::cpu;
    mx::set_default_device(d);
    mx::set_default_stream(*c.stream);
  }
};

uint32_t caps(void *ctx) {
  /* Buffers are MLX arrays (no shared host memory); executions finish before returning. The
   * dynamic mode replays one program on any binding of the dynamic axes. */
  return static_cast<Context *>(ctx)->opt.compiled ? 0 : LATHE_DEVCAP_DYNAMIC_AXES;
}

int num_devices(void *) { return 1; }

const char *description(void *ctx, int) { return static_cast<Context *>(ctx)->description.c_str(); }

bool supports_op(void *ctx, lathe_op op, lathe_dtype dt) { return op_supported(op, dt, static_cast<Context *>(ctx)->opt); }

bool supports_dtype(void *ctx, lathe_dtype dt) { return dtype_supported(dt, static_cast<Context *>(ctx)->opt); }

void destroy(void *ctx) {
  std::lock_guard<std::recursive_mutex> g(mlx_lock());
  delete static_cast<Context *>(ctx);
}

lathe_status_t mem_alloc(void *, int, size_t, void **out) {
  Buffer *b = new (std::nothrow) Buffer;
  if (!b) return LATHE_OOM("mlx: tensor");
  *out = b;
  return nullptr;
}

void mem_free(void *, int, void *mem, size_t) {
  std::lock_guard<std::recursive_mutex> g(mlx_lock());
  delete static_cast<Buffer *>(mem);
}

lathe_status_t upload(void *ctx, lathe_tensor *t, const void *src, size_t nbytes) {
  try {
    Entry e(*static_cast<Context *>(ctx));
    static_cast<Buffer *>(t->data)->a.emplace(
        array_from_bytes(src, nbytes, mx_shape(t->shape.dims, t->shape.rank), mx_dtype(t->shape.dtype)));
    return nullptr;
  } catch (...) {
    return status_of_exception("mlx: BufferFromHost");
  }
}

lathe_status_t download(void *ctx, lathe_tensor *t, void *dst, size_t nbytes) {
  try {
    Entry e(*static_cast<Context *>(ctx));
    Buffer *b = static_cast<Buffer *>(t->data);
    if (!b->a) return lathe_status_new(LATHE_STATUS_FAILED_PRECONDITION, "mlx: BufferToHost: the buffer has no contents");
    mx::array a = *b->a;
    /* a view left strided (lazy_contiguous) becomes row-major only now, and stays so */
    if (!a.flags().row_contiguous) {
      a = mx::contiguous(a, false, stream_for(*static_cast<Context *>(ctx), a.dtype()));
      b->a = a;
    }
    eval_arrays({a}, static_cast<Context *>(ctx)->cpu_stream);
    if (a.nbytes() != nbytes)
      return lathe_status_new(LATHE_STATUS_INTERNAL, "mlx: BufferToHost: the array has %zu bytes, the buffer %zu",
                              a.nbytes(), nbytes);
    if (nbytes) std::memcpy(dst, a.data<uint8_t>(), nbytes);
    return nullptr;
  } catch (...) {
    return status_of_exception("mlx: BufferToHost");
  }
}

void program_options(void *, lathe_program_options *opt) {
  /* MLX fuses by itself (mx::compile) and owns memory: no regions, no arena */
  opt->fuse = false;
  opt->plan_memory = false;
}

lathe_status_t compile(void *ctx, const lathe_program *program, lathe_plan **out) {
  try {
    Entry e(*static_cast<Context *>(ctx));
    *out = reinterpret_cast<lathe_plan *>(plan_new(*static_cast<Context *>(ctx), program));
    return nullptr;
  } catch (...) {
    return status_of_exception("mlx: Compile");
  }
}

void plan_free_entry(void *, lathe_plan *plan) {
  std::lock_guard<std::recursive_mutex> g(mlx_lock());
  plan_free(reinterpret_cast<Plan *>(plan));
}

lathe_status_t execute(void *vctx, lathe_plan *plan, const lathe_launch *l) {
  const Context &c = *static_cast<Context *>(vctx);
  lathe_status_t st = nullptr;
  {
    Entry e(c);
    try {
      Arrays args;
      args.reserve((size_t)l->n_inputs);
      for (int i = 0; i < l->n_inputs; i++) {
        Buffer *b = static_cast<Buffer *>(l->inputs[i]->data);
        if (!b->a) fail(LATHE_STATUS_FAILED_PRECONDITION, "mlx: Execute: input %d has no contents", i);
        args.push_back(*b->a);
      }
      Binding bind;
      Arrays outs = plan_run(reinterpret_cast<Plan *>(plan), args, bind);
      eval_arrays(outs, c.cpu_stream);
      if (!c.opt.lazy_contiguous) { /* views made row-major now (most outputs already are) */
        Arrays views;
        for (auto &o : outs)
          if (!o.flags().row_contiguous) o = mx::contiguous(o, false, stream_for(c, o.dtype())), views.push_back(o);
        if (!views.empty()) eval_arrays(views, c.cpu_stream);
      }
      for (int k = 0; k < l->n_outputs; k++) {
        lathe_tensor *t = l->outputs[k];
        t->data = new Buffer{outs[(size_t)k]};
        for (int d = 0; d < t->shape.rank; d++) t->shape.dims[d] = outs[(size_t)k].shape(d);
        t->nbytes = outs[(size_t)k].nbytes();
      }
    } catch (...) {
      st = status_of_exception("mlx: Execute");
    }
    for (int i = 0; i < l->n_inputs; i++) lathe_tensor_release(l->inputs[i]);
    lathe_collective_release(l->group); /* one device: never an SPMD replica */
  }
  l->release(l->token);
  return st;
}

/* MLX's allocator counts every array of the process (any backend, any thread): process-wide. It
 * keeps no count of allocations. */
lathe_status_t memory_stats(void *, int, bool reset_peak, lathe_memory_stats *out) {
  try {
    if (reset_peak) mx::reset_peak_memory();
    out->current_bytes = (int64_t)mx::get_active_memory();
    out->peak_bytes = (int64_t)mx::get_peak_memory();
    if (out->peak_bytes < out->current_bytes) out->peak_bytes = out->current_bytes; /* after a reset MLX may start at 0 */
    out->cached_bytes = (int64_t)mx::get_cache_memory();
    out->n_allocs = 0;
    out->process_wide = true;
    return nullptr;
  } catch (...) {
    return status_of_exception("mlx: MemoryStats");
  }
}

const lathe_device_i device_table = {
    sizeof(lathe_device_i),
    LATHE_DEVICE_API_VERSION,
    "mlx",
    caps,
    num_devices,
    description,
    supports_op,
    supports_dtype,
    destroy,
    mem_alloc,
    mem_free,
    upload,
    download,
    nullptr, /* copy: one ordinal */
    program_options,
    compile,
    plan_free_entry,
    execute,
    memory_stats,
    nullptr, /* dump_plan: the program's own dump says it all (MLX compiles at the first run) */
};

}  // namespace
}  // namespace lathe_mlx

using namespace lathe_mlx;

/* mlx's options (docs/MLX.md), parsed by the runtime (runtime/options.c). */
enum { OPT_DYNAMIC, OPT_LAZY, OPT_DEVICE };
extern "C" const lathe_option_spec lathe_mlx_options[] = {
    {"dynamic", LATHE_OPTION_FLAG, nullptr, 0, 0, false, "off (mx::compile, traced per input shape)",
     "replay the op tape on each run's inputs, no tracing; one plan serves every binding of the dynamic axes"},
    {"lazy_contiguous", LATHE_OPTION_FLAG, nullptr, 0, 0, false, "off",
     "outputs that are views stay strided views until the host reads them"},
    {"device", LATHE_OPTION_CHOICE, "cpu|gpu", 0, 0, true, "gpu when MLX has one, else cpu", "MLX's device"},
    LATHE_RUNTIME_OPTION_SPECS, /* the runtime's (trace, dump): compiles, executions, transfers */
};
extern "C" const int lathe_mlx_n_options = sizeof lathe_mlx_options / sizeof lathe_mlx_options[0];

extern "C" lathe_status_t lathe_mlx_device_new(const lathe_option_value *o, const lathe_device_i **out_dev,
                                               void **out_ctx, char **out_config) {
  try {
    std::lock_guard<std::recursive_mutex> g(mlx_lock());
    Options opt;
    opt.compiled = !o[OPT_DYNAMIC].set;
    opt.lazy_contiguous = o[OPT_LAZY].set;
    bool has_gpu = mx::is_available(mx::Device::gpu);
    /* MLX's default: its GPU when it has one */
    opt.gpu = o[OPT_DEVICE].set ? o[OPT_DEVICE].value == 1 : has_gpu;
    if (opt.gpu && !has_gpu)
      return lathe_status_new(LATHE_STATUS_UNAVAILABLE, "mlx: no GPU: this MLX build has no GPU backend or sees no "
                              "device (the mlx-cpu wheel computes on the CPU: use mlx:cpu)");
    auto c = std::make_unique<Context>();
    c->opt = opt;
    /* one stream for every thread that calls in (the lock keeps them apart) */
    c->stream.emplace(mx::new_thread_unsafe_stream(opt.gpu ? mx::Device::gpu : mx::Device::cpu));
    if (opt.gpu) c->cpu_stream.emplace(mx::new_thread_unsafe_stream(mx::Device::cpu));
    std::string conf = opt.gpu ? "gpu" : "cpu";
    if (!opt.compiled) conf += ",dynamic";
    if (opt.lazy_contiguous) conf += ",lazy_contiguous";
    char desc[160];
    snprintf(desc, sizeof desc, "MLX %s on the %s (%s%s)", mx::version(), opt.gpu ? "GPU" : "CPU",
             opt.compiled ? "mx::compile, retraced per shape" : "dynamic: op tape replayed per run",
             opt.lazy_contiguous ? ", lazy contiguous" : "");
    c->description = desc;
    char *cfg = static_cast<char *>(std::malloc(conf.size() + 1));
    if (!cfg) return LATHE_OOM("mlx");
    std::memcpy(cfg, conf.c_str(), conf.size() + 1);
    *out_dev = &device_table;
    *out_ctx = c.release();
    *out_config = cfg;
    return nullptr;
  } catch (...) {
    return status_of_exception("mlx");
  }
}
