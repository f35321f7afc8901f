/* mlx.h -- the MLX device (docs/MLX.md): lathe programs replayed as mlx::core calls. C++20, the only
 * C++ in lathe (MLX 0.32's headers need C++20); everything else talks to it through the device
 * table that lathe_mlx_device_new returns (src/runtime/device.h).
 *
 * Files: device.cpp (options, memory, the extern "C" entries), replay.cpp (plans, the interpreter,
 * mx::compile segments, control flow), supports.cpp (capabilities), and the lowering of each op
 * family: elementwise.cpp, reduce.cpp, layout.cpp, dot.cpp, conv.cpp, window.cpp, index.cpp,
 * numeric.cpp, fused.cpp. */
#ifndef LATHE_MLX_H
#define LATHE_MLX_H

#include <atomic>
#include <cstdarg>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

/* The engine's headers are C11; their atomics (reference counts, a tensor's ready event) appear
 * here as std::atomic of the same size and alignment, and <stdatomic.h> is kept out. This file
 * only reads those fields' neighbours; atomics are touched through the engine's C functions. */
#define _STDATOMIC_H 1
#define __CLANG_STDATOMIC_H 1
typedef std::atomic<int> atomic_int;
#define _Atomic(T) std::atomic<T>
extern "C" {
#include "../graph/ew.h"
#include "../graph/program.h"
#include "../runtime/runtime.h"
/* src/cpu/device.c: the reference implementation's capabilities (cpu.h is C-only). */
bool lathe_cpu_supports_op(lathe_op op, lathe_dtype dt);
}
#undef _Atomic

#include <mlx/mlx.h>

namespace lathe_mlx {
namespace mx = mlx::core;

/* An error raised while compiling or running: the extern "C" entries turn it into a status. */
struct Error : std::exception {
  lathe_status_code code;
  std::string msg;
  Error(lathe_status_code c, std::string m) : code(c), msg(std::move(m)) {}
  const char *what() const noexcept override { return msg.c_str(); }
};
[[noreturn]] void fail(lathe_status_code code, const char *fmt, ...) LATHE_PRINTF(2, 3);
#define MLX_UNIMPL(...) ::lathe_mlx::fail(LATHE_STATUS_UNIMPLEMENTED, __VA_ARGS__)
#define MLX_INVALID(...) ::lathe_mlx::fail(LATHE_STATUS_INVALID_ARGUMENT, __VA_ARGS__)
#define MLX_INTERNAL(...) ::lathe_mlx::fail(LATHE_STATUS_INTERNAL, __VA_ARGS__)
/* Inside a catch block: the status of the exception being handled, prefixed with where. */
lathe_status_t status_of_exception(const char *where);

/* What a config string selects (device.cpp parses it). */
struct Options {
  bool compiled = true;         /* "mlx": replay inside mx::compile; "dynamic": plain replay */
  bool lazy_contiguous = false; /* outputs may stay strided views until the host reads them */
  bool gpu = false;             /* the MLX device: gpu (CUDA, Metal) or cpu */
};

struct Context {
  Options opt;
  std::string description;
  std::optional<mx::Stream> stream; /* every call of this context runs on it */
  /* on a GPU, the stream of what MLX computes only on the CPU (cpu_step, Float64 copies) */
  std::optional<mx::Stream> cpu_stream;
};

/* The stream for work on an array of dtype dt: the CPU stream for Float64 on a GPU device, else
 * the context's (the default). */
mx::StreamOrDevice stream_for(const Context &c, mx::Dtype dt);
/* mx::eval of arrays, the Float64 ones apart under cpu_stream (where there is one: a GPU
 * device). MLX's eval joins the arrays it is given as inputs of one array on the stream of the
 * first not yet scheduled one, or on the default stream (the GPU) when none is; a GPU array
 * cannot have a Float64 input, so a Float64 array that is already computed, or that comes after
 * a GPU one, made eval throw. */
void eval_arrays(const std::vector<mx::array> &a, const std::optional<mx::Stream> &cpu_stream);

/* The memory of a tensor of this device (lathe_tensor.data): one MLX array, absent until uploaded
 * or computed. Its dtype and shape are the tensor's; it may be a strided view (lazy_contiguous). */
struct Buffer {
  std::optional<mx::array> a;
};

/* One recursive lock around every use of MLX: its graph building and evaluation are not meant
 * to be entered from several threads, and lathe's backends are. Recursive because releasing a
 * tensor inside an execution frees memory through the device again. */
std::recursive_mutex &mlx_lock();

/* ---- dtypes (supports.cpp) ---- */
bool dtype_supported(lathe_dtype dt, const Options &opt);
mx::Dtype mx_dtype(lathe_dtype dt); /* UNIMPLEMENTED for dtypes MLX lacks */
bool op_supported(lathe_op op, lathe_dtype dt, const Options &opt);
/* UNIMPLEMENTED unless every operand and result dtype of n is supported and the op is. */
void check_node(const lathe_node *n, const Options &opt);
/* Whether n runs on MLX's CPU stream although the device is a GPU: MLX's GPUs have no Float64,
 * and their scatters no 8-byte elements (Complex64 sums apart). Never true for control ops,
 * whose callees' steps decide for themselves. */
bool cpu_step(const lathe_node *n, const Options &opt);

/* ---- shapes of one run ---- */
/* Dynamic axis names bound to sizes: from the inputs (mlx:dynamic, where programs keep their
 * dynamic axes), then from DynamicReshape results. Empty for specialised programs. */
struct Binding {
  std::vector<std::pair<std::string, int64_t>> v;
  int64_t get(const char *name) const; /* -1 if unbound */
  void set(const char *name, int64_t size);
};

/* The environment a lowering sees. */
struct Env {
  const Options *opt;
  Binding *bind;
};

/* s's dims with dynamic axes resolved through the binding (INVALID_ARGUMENT when unbound). */
mx::Shape shape_of(const Env &env, const lathe_shape &s);
mx::Shape mx_shape(const int64_t *dims, int rank);

/* A new array holding a copy of nbytes at src (borrowed), in memory from MLX's allocator (aligned
 * as MLX's kernels expect; on a GPU, memory the device reads). */
mx::array array_from_bytes(const void *src, size_t nbytes, const mx::Shape &shape, mx::Dtype dt);

/* ---- helpers shared by the lowerings ---- */
mx::array scalar_i(int64_t v, mx::Dtype dt);  /* an integer (or Bool) scalar of dt */
mx::array scalar_u(uint64_t v, mx::Dtype dt); /* an unsigned scalar of dt */
mx::array scalar_f(double v, mx::Dtype dt);   /* a float scalar of dt */
/* The integer dtype of the same width (unsigned or signed), for bit manipulation through views. */
mx::Dtype uint_of(mx::Dtype dt);
mx::Dtype sint_of(mx::Dtype dt);
/* Bits of an integer keyed so that signed comparison follows IEEE totalOrder (floats). */
mx::array total_order_key(const mx::array &x);
/* The reduction identity of op (REDUCE_SUM/PRODUCT/MAX/MIN...) for dtype dt. */
mx::array reduce_identity(lathe_op op, mx::Dtype dt);
/* x reduced over axes with op (any REDUCE_* op), empty axes allowed. */
mx::array reduce(lathe_op op, const mx::array &x, const std::vector<int> &axes);
/* exp, sin, cos, erf and the logistic function at lathe:cpu's precision: MLX computes them to
 * Float32 accuracy even in Float64, so Float64 goes through MLX's accurate functions (expm1,
 * tan) or, for erf, a series and a continued fraction; erf in Float32 and the halves takes a series
 * below 1 (MLX's is accurate only in absolute terms). Other dtypes use MLX's own. */
mx::array exp_(const mx::array &x);
mx::array sin_(const mx::array &x);
mx::array cos_(const mx::array &x);
mx::array erf_(const mx::array &x);
mx::array logistic_(const mx::array &x);
/* A Complex64 array from its real and imaginary parts (any real dtype; exact for infinities and
 * NaNs, which re + i*im is not). */
mx::array complex_of(const mx::array &re, const mx::array &im);
/* Lathe's float -> integer conversion: truncation, saturation, NaN -> 0. */
mx::array convert(const mx::array &x, lathe_dtype to);
std::vector<int> ints(lathe_ilist l);

/* ---- lowering of one op (not control flow: replay.cpp runs those) ---- */
typedef std::vector<mx::array> Arrays;
/* The results of node n (one per result) from its operands in (n->n_operands of them). */
Arrays lower(Env &env, const lathe_node *n, const Arrays &in);

/* per family */
mx::array lower_elementwise(Env &env, const lathe_node *n, const Arrays &in);
mx::array lower_reduce(Env &env, const lathe_node *n, const Arrays &in);
mx::array lower_scan(Env &env, const lathe_node *n, const Arrays &in);
mx::array lower_layout(Env &env, const lathe_node *n, const Arrays &in);
mx::array lower_dot(Env &env, const lathe_node *n, const Arrays &in);
mx::array dot_general(const mx::array &lhs, const mx::array &rhs, const std::vector<int> &lc, const std::vector<int> &lb,
                      const std::vector<int> &rc, const std::vector<int> &rb, lathe_dtype acc, lathe_dtype out);
mx::array lower_conv(Env &env, const lathe_node *n, const Arrays &in);
mx::array lower_window(Env &env, const lathe_node *n, const Arrays &in);
mx::array lower_index(Env &env, const lathe_node *n, const Arrays &in);
Arrays lower_numeric(Env &env, const lathe_node *n, const Arrays &in);
Arrays lower_fused(Env &env, const lathe_node *n, const Arrays &in);
mx::array lower_dynshape(Env &env, const lathe_node *n, const Arrays &in);

/* ---- plans (replay.cpp) ---- */
struct Plan;
Plan *plan_new(const Context &ctx, const lathe_program *p);
void plan_free(Plan *p);
/* Runs the program's main function on args; resolves the binding first when the program keeps
 * dynamic axes. The results are lazy. */
Arrays plan_run(Plan *p, const Arrays &args, Binding &bind);

}  // namespace lathe_mlx

#endif
