/* testing.h -- a small test framework for lathe's C tests.
 *
 * TEST(name) { ... } registers a test (gcc/clang constructor attribute). Inside a test:
 *   CHECK(cond, fmt, ...)            records a failure (the test goes on)
 *   CHECK_OK(status_expr)            the status must be OK (frees it)
 *   CHECK_ERR(status_expr, CODE, "substring")  the status must have CODE and the message
 *                                    must contain substring (the op's name, usually)
 *   SKIP(fmt, ...)                   counts a skip with its reason and returns
 * Each CHECK counts as one case; a test runner prints "N passed, N failed, N skipped" last.
 * Helpers build and run small graphs: see tst_backend(), tst_run().
 *
 * Runners take [-l] [-o OP[,OP...]] [-b CONFIG] [NAME] (tst_main): -l lists the tests' names, NAME
 * picks the tests whose name contains it (=NAME: that one alone); the conformance rows below say
 * what -o and -b do. */
#ifndef LATHE_TESTING_H
#define LATHE_TESTING_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lathe.h"

typedef void (*tst_fn)(void);
void tst_register(const char *name, tst_fn fn);
extern int tst_passed, tst_failed, tst_skipped;
extern const char *tst_current;

#define TEST(name)                                                                  \
  static void name(void);                                                           \
  __attribute__((constructor)) static void tst_reg_##name(void) { tst_register(#name, name); } \
  static void name(void)

/* The counting behind CHECK and SKIP (thread-safe). Under -o a case counts only in a row of a
 * selected op (see "Conformance rows"). */
void tst_pass(void);
void tst_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Counts one skip and prints "SKIP who: message". */
void tst_skipf(const char *who, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints a line of detail about the current row (dropped with the row's cases under -o). */
void tst_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define CHECK(cond, ...)                          \
  do {                                            \
    if (cond) tst_pass();                         \
    else tst_fail(__FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#define CHECK_OK(expr)                                                                 \
  do {                                                                                 \
    lathe_status_t st_ = (expr);                                                       \
    CHECK(st_ == NULL, "%s -> %s: %s", #expr, lathe_status_code_name(lathe_status_code_of(st_)), \
          lathe_status_message(st_));                                                  \
    lathe_status_free(st_);                                                            \
  } while (0)

#define CHECK_ERR(expr, code, substr)                                                              \
  do {                                                                                             \
    lathe_status_t st_ = (expr);                                                                   \
    CHECK(st_ != NULL && lathe_status_code_of(st_) == LATHE_STATUS_##code &&                      \
              strstr(lathe_status_message(st_), (substr)) != NULL,                                \
          "%s: want %s containing \"%s\", got %s: %s", #expr, #code, (substr),                     \
          lathe_status_code_name(lathe_status_code_of(st_)), lathe_status_message(st_));           \
    lathe_status_free(st_);                                                                        \
  } while (0)

#define SKIP(...)                         \
  do {                                    \
    tst_skipf(tst_current, __VA_ARGS__);  \
    return;                               \
  } while (0)

/* The backend every test builds and runs on: lathe:cpu, or the CONFIG of -b (the environment
 * variable LATHE_TEST_BACKEND=CONFIG is the same as -b CONFIG). Created on first use; freed at
 * exit. */
lathe_backend_t tst_backend(void);
/* Whether the backend under test is a lathe:cpu configuration (no -b, or -b lathe:cpu...). */
bool tst_backend_is_cpu(void);
/* Whether the backend under test (-b) multiplies Float32 operands on TF32 tensor cores (tf32=1). */
bool tst_tf32_products(void);
/* The backend under test with extra options appended ("fuse=0"): made once, kept to the end
 * (NULL when the config refuses them). */
lathe_backend_t tst_backend_variant(const char *options);
/* A shape from dims (rank <= 8 via this helper). */
lathe_shape tst_shape(lathe_dtype dt, int rank, const int64_t *dims);
lathe_shape tst_shape0(lathe_dtype dt); /* scalar */
#define TST_SHAPE(dt, ...) tst_shape((dt), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

/* ---- Conformance rows ----
 * A row is one graph a test compiles and runs through tst_run or tst_compile. A row starts at
 * tst_builder, tst_builder_new or tst_row_begin (and at each test's start); its cases are the
 * CHECKs and SKIPs up to the next row's start.
 *
 * -o OP[,OP...] runs the rows whose graph uses one of the ops (GoMLX names; every function of
 * the builder, closures included, counts): cases of other rows are dropped (those rows still
 * run, on the reference under -b, so the test can go on), and so are cases of a row that never
 * compiled a graph (a builder that rejected its operands, a capability query). A test may
 * instead declare the op of what follows with tst_rows_of.
 *
 * -b CONFIG makes CONFIG the backend under test and runs every row also on a reference lathe:cpu
 * (lathe_builder_compile_for), comparing the outputs: integers and Bool bit-exact, floats
 * within the row's tolerance (the tol a test passes to tst_expect_close or tst_expect_tol for
 * that output; tst_tol(dtype) for an output it never states one for), NaN positions equal.
 * A mismatch is a failure naming the row's ops and CONFIG. A row that CONFIG cannot compile or
 * run (UNIMPLEMENTED) while the reference can is a counted, printed skip; its cases are dropped
 * and its outputs come from the reference. */
void tst_row_begin(void);
/* Declares that the test's cases from here (up to the next tst_rows_of or the test's end) are
 * rows of op, whatever their graphs; returns whether they count (false: op is not selected by
 * -o, and the caller may skip them). */
bool tst_rows_of(lathe_op op);
/* Decides the current row from b's graph and counts it as run, for a test that compiles and
 * runs b on its own; returns whether the row counts. */
bool tst_row_graph(lathe_builder_t b);
/* States the row's tolerance for got, an output of tst_run (no-op for other memory): under -b,
 * compares got with the reference output now. tst_expect_close calls it; an output never
 * compared this way is compared with tst_tol when freed (tst_free_output) or at the test's end. */
void tst_expect_tol(const void *got, double tol);

/* A row compiled for the backend under test and, under -b, for the reference. */
typedef struct tst_exec tst_exec;
lathe_status_t tst_compile(lathe_builder_t b, tst_exec **out);
/* The executable that runs on tst_backend() (NULL when the row runs on the reference only). */
lathe_executable_t tst_exec_executable(const tst_exec *x);
/* Uploads in_data[i] (of shapes[i]; NULL shapes: the executable's input shapes) and runs;
 * outs[k] are the output buffers (the caller's). Under -b the reference runs the same inputs
 * and the outputs are compared now with tst_tol. Thread-safe. */
lathe_status_t tst_exec_run(tst_exec *x, const lathe_shape *shapes, const void *const *in_data, int n_in,
                            lathe_buffer_t *outs, int n_out);
void tst_exec_free(tst_exec *x);

/* Compiles main (which must have returned) and runs it on host inputs: in_data[i] holds the
 * bytes of main's parameter i. Outputs are downloaded into fresh malloc'd memory surrounded by
 * guard bytes, which are checked (a CHECK) after download; out_data[k] must be freed with
 * tst_free_output. out_shapes (may be NULL) receives the output shapes. Returns the status of
 * the first failing step (owned by the caller), NULL if all went well. One row (above). */
lathe_status_t tst_run(lathe_builder_t b, const void *const *in_data, int n_in, void **out_data, int n_out,
                       lathe_shape *out_shapes);
void tst_free_output(void *p);

/* Element access as double / complex parts, for comparing any dtype with a reference. */
double tst_get(const void *data, lathe_dtype dt, int64_t i);       /* real part for complex */
double tst_get_imag(const void *data, lathe_dtype dt, int64_t i);  /* 0 for non-complex */
void tst_set(void *data, lathe_dtype dt, int64_t i, double v);     /* packed dtypes too */
void tst_set_complex(void *data, lathe_dtype dt, int64_t i, double re, double im);
/* Fills n elements with deterministic pseudo-random values valid for dt (seeded). */
void tst_fill(void *data, lathe_dtype dt, int64_t n, unsigned seed);
/* Compares got against want (both n elements of dt) with relative/absolute tolerance tol;
 * NaNs must match; reports the first mismatches through CHECK with the label. tol is also the
 * row's tolerance for got under -b (tst_expect_tol). */
void tst_expect_close(const char *label, const void *got, const void *want, lathe_dtype dt, int64_t n, double tol);
/* Default tolerance for a dtype (exact for ints/bool, ~1e-5 f32, 1e-12 f64, 1e-2 f16/bf16). */
double tst_tol(lathe_dtype dt);
void *tst_alloc_for(const lathe_shape *s); /* calloc of the shape's byte size (at least 1 byte) */
/* A TCP port on the loopback that was free a moment ago (-1 if none could be found). */
int tst_free_port(void);

/* Row-major coordinates: the number of elements of dims, the flat index of coordinates c, and the
 * coordinates of flat index i (size-0 axes give 0). */
int64_t tst_numel(int rank, const int64_t *dims);
int64_t tst_ravel(int rank, const int64_t *dims, const int64_t *c);
void tst_unravel(int64_t i, int rank, const int64_t *dims, int64_t *c);

/* Integer wrapping: v modulo 2^bits of integer dtype dt, sign-extended for signed dtypes (Bool:
 * v != 0). tst_wrap_int gives the result's two's-complement bits as int64; tst_wrap_value gives
 * the dtype's value as a double (UInt64 stays unsigned). */
int64_t tst_wrap_int(lathe_dtype dt, uint64_t v);
double tst_wrap_value(lathe_dtype dt, uint64_t v);
/* Stores integer v wrapped to dt's width as element i (packed dtypes too). */
void tst_set_int(void *data, lathe_dtype dt, int64_t i, uint64_t v);
/* Reads element i of an integer tensor exactly (Int64/UInt64 without a trip through double). */
int64_t tst_get_int(const void *data, lathe_dtype dt, int64_t i);

/* Graph fixtures. tst_builder starts a row, creates a builder on tst_backend() (one CHECK) and
 * sets *main_fn to its main function (NULL when creation failed); the builder is the caller's.
 * tst_builder_new does the same without the CHECK, returning the status. */
lathe_builder_t tst_builder(const char *name, lathe_function_t *main_fn);
lathe_status_t tst_builder_new(const char *name, lathe_builder_t *out);
/* Adds a parameter (one CHECK) and returns its value (NULL on failure). */
lathe_value_t tst_param(lathe_function_t fn, const char *name, lathe_shape s);
/* One CHECK that building succeeded ("label: build: message"); on failure frees st and b and
 * returns false. */
bool tst_built(const char *label, lathe_status_t st, lathe_builder_t b);
/* Checks y's inferred shape equals want and returns y from fn (three CHECKs). */
void tst_expect_shape_and_return(const char *label, lathe_function_t fn, lathe_value_t y, const lathe_shape *want);
/* Runs b (one output) on ins, CHECKs the run ("label: run: message") and, when it ran, compares the
 * output's n elements with want (tst_expect_close with tol). */
void tst_run_expect(const char *label, lathe_builder_t b, const void *const *ins, int n_in, const void *want,
                    lathe_dtype dt, int64_t n, double tol);

/* Graph pieces as GoMLX writes them (one CHECK each; NULL on failure): the reduction of v along
 * axis reshaped to `kept` (ReduceAndKeep), and v broadcast to shape `to` of the same rank (its
 * size-1 axes repeated). */
lathe_value_t tst_reduce_keep(lathe_function_t fn, lathe_op op, lathe_value_t v, int axis, const lathe_shape *kept);
lathe_value_t tst_broadcast_same_rank(lathe_function_t fn, lathe_value_t v, const lathe_shape *to);

/* Graphs that form a ROWS region on devices that fuse rows, on backend be: which 0, a layer norm
 * of x [6, n] times gamma g [n] (results y and the [6, 1] inverse deviation); which 1, a softmax
 * over the last axis of s [2, 3, n] plus a mask m [2, 1, n] broadcast over axis 1; which 2, a
 * lone reduction rsqrt(mean((x g)^2)) of x [1200, n], g [n] (a ROWS region where rows_lone <=
 * 1200); which 3, a language model's loss over x [1200, n] with labels l [1200, 1] Int32 (results:
 * each row's softmax cross-entropy [1200, 1] and its gradient by x); which 4, GoMLX's MaskedSoftmax
 * (Where before the max, around the exponentials and after the division) of s [2, 4, n, n] scaled,
 * under a causal mask made from two Iotas. NULL when the builder cannot be made (one CHECK). */
lathe_builder_t tst_rows_graph(lathe_backend_t be, lathe_dtype dt, int which, int64_t n);
/* Column reductions with elementwise work before them over x [4, 96, c] of dt, y [4, 96, c]
 * Float32, g [c] and w [4, 96, 1] of dt: ReduceSum(Convert(x) * y), ReduceSum(s), s = x + x * g
 * (returned too), ReduceMax(x * w - 0.5), each over axes {0, 1} (tests/ops/fusion.c). */
lathe_builder_t tst_colred_graph(lathe_backend_t be, lathe_dtype dt, int64_t c);

/* The reference value of activation a at v (in double). */
double tst_activation_ref(double v, lathe_activation a);
/* dx of the activation from x (from_y false) or y (true; Y-form activations) and g, in double. */
double tst_activation_vjp_ref(double v, double g, lathe_activation a, bool from_y);

/* Every dtype lathe knows, for loops over dtypes. */
extern const lathe_dtype tst_all_dtypes[];
extern const int tst_n_all_dtypes;

/* Runs the registered tests: [-o OP[,OP...]] [-b CONFIG] [NAME] (NAME: tests whose name
 * contains it). Returns the exit status. */
int tst_main(int argc, char **argv);

#endif
