/* test_runtime.c -- the device seam: several devices, CopyToDevice, asynchronous execution and
 * its ordering (lathe:cpu,async=late completes every job late on purpose), errors of
 * asynchronous work, lifetimes in any release order, and the specialisation cache. */
#include <pthread.h>
#include <stdatomic.h>

#include "cpu/cpu.h"
#include "testing.h"

static lathe_backend_t backend_of(const char *config) {
  lathe_backend_t b = NULL;
  CHECK_OK(lathe_backend_new(config, &b));
  return b;
}

static lathe_buffer_t f32_buffer(lathe_backend_t b, int device, int64_t n, float first) {
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, n);
  float *v = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) v[i] = first + (float)i;
  lathe_buffer_t buf = NULL;
  CHECK_OK(lathe_buffer_from_host(b, device, &s, v, sizeof(float) * (size_t)n, &buf));
  free(v);
  return buf;
}

/* y = x * 2 + 1 over Float32[n] (a fused region of two members). */
static lathe_executable_t affine(lathe_backend_t b, int64_t n) {
  lathe_builder_t bl;
  CHECK_OK(lathe_builder_new(b, "affine", &bl));
  lathe_function_t fn = lathe_builder_main(bl);
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, n), s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  float two = 2, one = 1;
  lathe_value_t x, c2, c1, t, y;
  CHECK_OK(lathe_parameter(fn, "x", &s, &x));
  CHECK_OK(lathe_constant(fn, &s0, &two, sizeof two, &c2));
  CHECK_OK(lathe_constant(fn, &s0, &one, sizeof one, &c1));
  CHECK_OK(lathe_mul(fn, x, c2, &t));
  CHECK_OK(lathe_add(fn, t, c1, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(bl, &e));
  lathe_builder_free(bl);
  return e;
}

static void expect_f32(const char *label, lathe_buffer_t buf, int64_t n, double first, double scale, double add) {
  float *got = malloc(sizeof(float) * (size_t)n);
  lathe_status_t st = lathe_buffer_to_host(buf, got, sizeof(float) * (size_t)n);
  CHECK(!st, "%s: read back: %s", label, lathe_status_message(st));
  lathe_status_free(st);
  int bad = 0;
  for (int64_t i = 0; !st && i < n && bad < 3; i++)
    if (got[i] != (float)((first + (double)i) * scale + add)) {
      CHECK(false, "%s: element %lld = %g, want %g", label, (long long)i, got[i], (first + (double)i) * scale + add);
      bad++;
    }
  if (!bad) CHECK(true, "%s", label);
  free(got);
}

/* Many short jobs back to back: the job lives on its poster's stack, so a worker must not touch it
 * after its last chunk's increment lets the poster return (ASan caught that read in CI: a
 * stack-use-after-return in run_chunk, once in hundreds of thousands of jobs). */
static void add_range(void *ctx, int64_t b, int64_t e) { atomic_fetch_add((atomic_llong *)ctx, e - b); }

TEST(pool_short_jobs) {
  lathe_pool *p = NULL;
  CHECK_OK(lathe_pool_new(2, &p));
  int64_t bad = 0;
  for (int i = 0; i < 300000; i++) {
    atomic_llong sum;
    atomic_init(&sum, 0);
    lathe_parallel_for(p, 8, 1, add_range, &sum);
    if (atomic_load(&sum) != 8) bad++;
  }
  CHECK(bad == 0, "%lld of 300000 jobs did not cover their range", (long long)bad);
  lathe_pool_free(p);
}

TEST(devices_and_copies) {
  lathe_backend_t b = backend_of("lathe:cpu,devices=2");
  if (!b) return;
  CHECK(lathe_backend_num_devices(b) == 2, "2 devices, got %d", lathe_backend_num_devices(b));
  CHECK(strstr(lathe_backend_device_description(b, 1), "cpu:1") != NULL, "description %s", lathe_backend_device_description(b, 1));
  CHECK(strcmp(lathe_backend_device_description(b, 2), "") == 0, "no device 2");
  CHECK(strstr(lathe_backend_config(b), "devices=2") != NULL, "config %s", lathe_backend_config(b));
  lathe_buffer_t x1 = f32_buffer(b, 1, 100, 0);
  int dev = -1;
  CHECK_OK(lathe_buffer_device(x1, &dev));
  CHECK(dev == 1, "buffer on device 1, got %d", dev);
  lathe_buffer_t x0 = NULL;
  CHECK_OK(lathe_buffer_copy_to_device(x1, 0, &x0));
  CHECK_OK(lathe_buffer_device(x0, &dev));
  CHECK(dev == 0, "copy on device 0, got %d", dev);
  expect_f32("copy 1->0", x0, 100, 0, 1, 0);
  lathe_executable_t e = affine(b, 100);
  lathe_buffer_t y = NULL;
  CHECK_ERR(lathe_executable_execute(e, &x1, NULL, 1, 0, &y, 1), INVALID_ARGUMENT, "is on device 1");
  CHECK_OK(lathe_executable_execute(e, &x1, NULL, 1, 1, &y, 1));
  CHECK_OK(lathe_buffer_device(y, &dev));
  CHECK(dev == 1, "output on device 1, got %d", dev);
  expect_f32("run on device 1", y, 100, 0, 2, 1);
  lathe_buffer_free(y);
  CHECK_ERR(lathe_executable_execute(e, &x0, NULL, 1, 2, &y, 1), INVALID_ARGUMENT, "device 2 out of range");
  CHECK_ERR(lathe_buffer_copy_to_device(x1, 5, &y), INVALID_ARGUMENT, "device 5 out of range");
  lathe_buffer_free(x0);
  lathe_buffer_free(x1);
  lathe_executable_free(e);
  lathe_backend_free(b);
}

TEST(device_assignment) {
  lathe_backend_t b = backend_of("lathe:cpu,devices=2");
  if (!b) return;
  lathe_builder_t bl;
  CHECK_OK(lathe_builder_new(b, "assigned", &bl));
  lathe_function_t fn = lathe_builder_main(bl);
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3);
  lathe_value_t x, y;
  CHECK_OK(lathe_parameter(fn, "x", &s, &x));
  CHECK_OK(lathe_neg(fn, x, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  int d1 = 1, d2[2] = {0, 1}, bad = 7;
  CHECK_ERR(lathe_builder_assign_devices(bl, &bad, 1), INVALID_ARGUMENT, "device 7 out of range");
  CHECK_ERR(lathe_builder_assign_devices(bl, d2, 2), INVALID_ARGUMENT, "single-device program");
  CHECK_OK(lathe_builder_assign_devices(bl, &d1, 1));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(bl, &e));
  lathe_builder_free(bl);
  lathe_buffer_t in = f32_buffer(b, 1, 3, 1), out = NULL;
  CHECK_OK(lathe_executable_execute(e, &in, NULL, 1, 0, &out, 1)); /* default device ignored */
  int dev = -1;
  CHECK_OK(lathe_buffer_device(out, &dev));
  CHECK(dev == 1, "assigned device 1, got %d", dev);
  expect_f32("assigned", out, 3, 1, -1, 0);
  lathe_buffer_free(out);
  lathe_buffer_free(in);
  lathe_executable_free(e);
  lathe_backend_free(b);
}

/* A chain of executions each reading the previous one's output before it is computed, with the
 * buffers released at once and the inputs donated: every result must still be right. */
static void async_chain(const char *config) {
  lathe_backend_t b = backend_of(config);
  if (!b) return;
  CHECK(lathe_backend_is_asynchronous(b) == (strstr(config, "async=") != NULL && !strstr(config, "async=0")),
        "%s: asynchronous flag", config);
  enum { N = 1000, STEPS = 6 };
  lathe_executable_t e = affine(b, N);
  lathe_buffer_t cur = f32_buffer(b, 0, N, 0);
  for (int k = 0; k < STEPS; k++) {
    lathe_buffer_t next = NULL;
    bool donate = k % 2 == 1;
    CHECK_OK(lathe_executable_execute(e, &cur, &donate, 1, 0, &next, 1));
    lathe_buffer_free(cur); /* released while the work may still read it */
    cur = next;
  }
  /* y = 2^k x + (2^k - 1) after k steps */
  expect_f32(config, cur, N, 0, 64, 63);
  /* CopyToDevice of a buffer that is still being computed, then work on the other device */
  if (lathe_backend_num_devices(b) > 1) {
    lathe_buffer_t y = NULL, y1 = NULL, z = NULL;
    CHECK_OK(lathe_executable_execute(e, &cur, NULL, 1, 0, &y, 1));
    CHECK_OK(lathe_buffer_copy_to_device(y, 1, &y1));
    lathe_buffer_free(y);
    CHECK_OK(lathe_executable_execute(e, &y1, NULL, 1, 1, &z, 1));
    lathe_buffer_free(y1);
    expect_f32("copied across devices while pending", z, N, 0, 256, 255);
    lathe_buffer_free(z);
  }
  lathe_buffer_free(cur);
  lathe_executable_free(e); /* before the backend: order does not matter */
  lathe_backend_free(b);
}

/* A donated input held by nothing else is updated in place (an optimizer step writing into the
 * donated weights: no fresh result block), on the caller's thread and on a queue; an input that
 * is not donated keeps its memory and values. */
static void donated_in_place(const char *config) {
  lathe_backend_t b = backend_of(config);
  if (!b) return;
  enum { N = 100000 };
  lathe_executable_t e = affine(b, N);
  lathe_buffer_t x = f32_buffer(b, 0, N, 0), y = NULL, z = NULL;
  void *xmem = NULL, *ymem = NULL, *zmem = NULL;
  CHECK_OK(lathe_buffer_data(x, &xmem));
  CHECK_OK(lathe_executable_execute(e, &x, NULL, 1, 0, &y, 1));
  CHECK_OK(lathe_buffer_data(y, &ymem));
  CHECK(ymem != xmem, "%s: a result does not take a kept input's memory", config);
  expect_f32(config, x, N, 0, 1, 0);
  bool donate = true;
  CHECK_OK(lathe_executable_execute(e, &y, &donate, 1, 0, &z, 1));
  CHECK_OK(lathe_buffer_data(z, &zmem));
  CHECK(zmem == ymem, "%s: the donated input's memory holds the result", config);
  expect_f32(config, z, N, 0, 4, 3);
  lathe_buffer_free(x);
  lathe_buffer_free(y);
  lathe_buffer_free(z);
  lathe_executable_free(e);
  lathe_backend_free(b);
}

TEST(donated_input_updated_in_place) {
  donated_in_place("lathe:cpu");
  donated_in_place("lathe:cpu,fuse=0");
  donated_in_place("lathe:cpu,async=1");
}

TEST(async_ordering) {
  async_chain("lathe:cpu");
  async_chain("lathe:cpu,async=1");
  async_chain("lathe:cpu,async=late,devices=2");
}

TEST(async_is_ready_and_wait) {
  lathe_backend_t b = backend_of("lathe:cpu,async=late");
  if (!b) return;
  lathe_executable_t e = affine(b, 8);
  lathe_buffer_t x = f32_buffer(b, 0, 8, 1), y = NULL;
  CHECK_OK(lathe_executable_execute(e, &x, NULL, 1, 0, &y, 1));
  CHECK(!lathe_buffer_is_ready(y), "a late job is not done when execute returns");
  CHECK_OK(lathe_buffer_wait(y));
  CHECK(lathe_buffer_is_ready(y), "done after wait");
  void *data = NULL;
  CHECK_OK(lathe_buffer_data(y, &data));
  CHECK(data && ((float *)data)[0] == 3, "shared data after the work: %g", data ? ((float *)data)[0] : -1);
  lathe_buffer_free(y);
  lathe_buffer_free(x);
  /* the executable and the backend go first; the queued work keeps what it needs */
  x = f32_buffer(b, 0, 8, 1);
  CHECK_OK(lathe_executable_execute(e, &x, NULL, 1, 0, &y, 1));
  lathe_executable_free(e);
  lathe_buffer_free(x);
  lathe_backend_free(b);
  expect_f32("outlives its executable and backend", y, 8, 1, 2, 1);
  lathe_buffer_free(y);
}

/* An execution that fails while it runs: asynchronously, execute succeeds and the error comes
 * back from every read of the outputs, and from executions that consume them. */
TEST(async_errors) {
  const char *configs[] = {"lathe:cpu", "lathe:cpu,async=late"};
  for (int c = 0; c < 2; c++) {
    lathe_backend_t b = backend_of(configs[c]);
    if (!b) return;
    lathe_builder_t bl;
    CHECK_OK(lathe_builder_new(b, "lookup", &bl));
    lathe_function_t fn = lathe_builder_main(bl);
    lathe_shape ds = TST_SHAPE(LATHE_DTYPE_UINT8, 2, 34), is = TST_SHAPE(LATHE_DTYPE_INT32, 1, 1);
    lathe_value_t d, ix, y, z;
    CHECK_OK(lathe_parameter(fn, "data", &ds, &d));
    CHECK_OK(lathe_parameter(fn, "indices", &is, &ix));
    lathe_quantization q = {.scheme = LATHE_QUANT_GGML, .ggml_type = LATHE_GGML_Q8_0};
    CHECK_OK(lathe_quantized_embedding_lookup(fn, d, ix, &q, &y));
    CHECK_OK(lathe_function_return(fn, &y, 1));
    lathe_executable_t e = NULL;
    CHECK_OK(lathe_builder_compile(bl, &e));
    lathe_builder_free(bl);
    /* a second graph consuming the first one's output */
    CHECK_OK(lathe_builder_new(b, "neg", &bl));
    fn = lathe_builder_main(bl);
    lathe_shape ys = TST_SHAPE(LATHE_DTYPE_FLOAT32, 1, 32);
    CHECK_OK(lathe_parameter(fn, "y", &ys, &y));
    CHECK_OK(lathe_neg(fn, y, &z));
    CHECK_OK(lathe_function_return(fn, &z, 1));
    lathe_executable_t e2 = NULL;
    CHECK_OK(lathe_builder_compile(bl, &e2));
    lathe_builder_free(bl);
    uint8_t data[68] = {0};
    int32_t index = 5;
    lathe_buffer_t in[2] = {NULL, NULL}, out = NULL, out2 = NULL;
    CHECK_OK(lathe_buffer_from_host(b, 0, &ds, data, sizeof data, &in[0]));
    CHECK_OK(lathe_buffer_from_host(b, 0, &is, &index, sizeof index, &in[1]));
    lathe_status_t st = lathe_executable_execute(e, in, NULL, 2, 0, &out, 1);
    if (c == 0) {
      CHECK(lathe_status_code_of(st) == LATHE_STATUS_INVALID_ARGUMENT && strstr(lathe_status_message(st), "out of range"),
            "inline: the error comes from execute: %s", lathe_status_message(st));
      lathe_status_free(st);
    } else {
      CHECK(st == NULL, "async: execute queues the work: %s", lathe_status_message(st));
      lathe_status_free(st);
      float got[32];
      CHECK_ERR(lathe_buffer_to_host(out, got, sizeof got), INVALID_ARGUMENT, "out of range");
      CHECK_ERR(lathe_buffer_wait(out), INVALID_ARGUMENT, "out of range");
      CHECK_OK(lathe_executable_execute(e2, &out, NULL, 1, 0, &out2, 1));
      CHECK_ERR(lathe_buffer_to_host(out2, got, sizeof got), INVALID_ARGUMENT, "out of range");
      lathe_buffer_free(out2);
      lathe_buffer_free(out);
    }
    lathe_buffer_free(in[0]);
    lathe_buffer_free(in[1]);
    lathe_executable_free(e);
    lathe_executable_free(e2);
    lathe_backend_free(b);
  }
}

/* Lifetimes are reference counts: release the backend first, keep using what it made (the
 * C side of GoMLX's Execute-after-Finalize; runs under ASan in the sanitizer suite). */
TEST(release_order) {
  lathe_backend_t b = backend_of("lathe:cpu,threads=2");
  if (!b) return;
  lathe_executable_t e = affine(b, 16);
  lathe_buffer_t x = f32_buffer(b, 0, 16, 0), y = NULL;
  lathe_executable_retain(e);
  lathe_backend_release(b); /* the caller's reference goes; x and e hold theirs */
  CHECK_OK(lathe_executable_execute(e, &x, NULL, 1, 0, &y, 1));
  expect_f32("after the backend's release", y, 16, 0, 2, 1);
  lathe_executable_release(e);
  lathe_buffer_t ybis = lathe_buffer_retain(y);
  lathe_buffer_release(y);
  expect_f32("a retained buffer", ybis, 16, 0, 2, 1);
  lathe_buffer_release(ybis);
  lathe_executable_release(e); /* the last executable reference */
  lathe_buffer_free(x);        /* the last reference on the backend */
}

typedef struct {
  lathe_executable_t e;
  lathe_backend_t b;
  int failures;
} thread_ctx;

static void *hammer(void *arg) {
  thread_ctx *c = arg;
  for (int k = 0; k < 50; k++) {
    lathe_buffer_t x = NULL, y = NULL;
    float v[64];
    for (int i = 0; i < 64; i++) v[i] = (float)(k + i);
    lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 64);
    lathe_status_t st = lathe_buffer_from_host(c->b, 0, &s, v, sizeof v, &x);
    bool donate = true;
    if (!st) st = lathe_executable_execute(c->e, &x, &donate, 1, 0, &y, 1);
    if (!st) st = lathe_buffer_to_host(y, v, sizeof v);
    if (st || v[63] != (float)(2 * (k + 63) + 1)) c->failures++;
    lathe_status_free(st);
    lathe_buffer_free(x);
    lathe_buffer_free(y);
  }
  return NULL;
}

TEST(async_from_threads) {
  lathe_backend_t b = backend_of("lathe:cpu,async=1,devices=2");
  if (!b) return;
  lathe_executable_t e = affine(b, 64);
  enum { T = 6 };
  pthread_t th[T];
  thread_ctx ctx[T];
  for (int i = 0; i < T; i++) {
    ctx[i] = (thread_ctx){e, b, 0};
    pthread_create(&th[i], NULL, hammer, &ctx[i]);
  }
  int failures = 0;
  for (int i = 0; i < T; i++) {
    pthread_join(th[i], NULL);
    failures += ctx[i].failures;
  }
  CHECK(failures == 0, "%d of %d executions from %d threads failed", failures, 50 * T, T);
  lathe_executable_free(e);
  lathe_backend_free(b);
}

/* The specialisation cache is a bounded LRU: 70 bindings of a dynamic axis compile 70 programs
 * (plus the unspecialised one), evict 6, and a binding seen again is a hit. */
TEST(specialisation_cache) {
  lathe_backend_t b = backend_of("lathe:cpu");
  if (!b) return;
  lathe_builder_t bl;
  CHECK_OK(lathe_builder_new(b, "dyn", &bl));
  lathe_function_t fn = lathe_builder_main(bl);
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 1);
  s.dims[0] = -1;
  s.axis_names[0] = "n";
  lathe_value_t x, y;
  CHECK_OK(lathe_parameter(fn, "x", &s, &x));
  CHECK_OK(lathe_neg(fn, x, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(bl, &e));
  lathe_builder_free(bl);
  lathe_executable_stats st;
  CHECK_OK(lathe_executable_get_stats(e, &st));
  CHECK(st.compiles == 1 && st.cached == 0 && st.capacity == 64, "fresh: %lld compiles, %d cached, capacity %d",
        (long long)st.compiles, st.cached, st.capacity);
  for (int n = 1; n <= 70; n++) {
    lathe_buffer_t in = f32_buffer(b, 0, n, 0), out = NULL;
    CHECK_OK(lathe_executable_execute(e, &in, NULL, 1, 0, &out, 1));
    if (n == 70) expect_f32("n=70", out, n, 0, -1, 0);
    lathe_buffer_free(in);
    lathe_buffer_free(out);
  }
  CHECK_OK(lathe_executable_get_stats(e, &st));
  CHECK(st.compiles == 71 && st.evictions == 6 && st.cached == 64 && st.hits == 0,
        "after 70 bindings: %lld compiles, %lld evictions, %d cached, %lld hits", (long long)st.compiles,
        (long long)st.evictions, st.cached, (long long)st.hits);
  int again[3] = {70, 69, 1}; /* two cached, one evicted (the least recently used) */
  for (int k = 0; k < 3; k++) {
    lathe_buffer_t in = f32_buffer(b, 0, again[k], 3), out = NULL;
    CHECK_OK(lathe_executable_execute(e, &in, NULL, 1, 0, &out, 1));
    expect_f32("binding seen again", out, again[k], 3, -1, 0);
    lathe_buffer_free(in);
    lathe_buffer_free(out);
  }
  CHECK_OK(lathe_executable_get_stats(e, &st));
  CHECK(st.compiles == 72 && st.hits == 2 && st.evictions == 7, "again: %lld compiles, %lld hits, %lld evictions",
        (long long)st.compiles, (long long)st.hits, (long long)st.evictions);
  lathe_executable_free(e);
  lathe_backend_free(b);
}

/* A device table from a library built against another interface is refused, not used. */
TEST(device_table_check) {
  lathe_device_i d = lathe_cpu_device;
  CHECK(lathe_device_check(&d) == NULL, "the CPU table is valid");
  d.api_version = 1;
  CHECK_ERR(lathe_device_check(&d), FAILED_PRECONDITION, "interface version 1");
  d = lathe_cpu_device;
  d.struct_size = 16;
  CHECK_ERR(lathe_device_check(&d), FAILED_PRECONDITION, "table of 16 bytes");
  d = lathe_cpu_device;
  d.execute = NULL;
  CHECK_ERR(lathe_device_check(&d), FAILED_PRECONDITION, "mandatory slot");
}

TEST(cpu_options) {
  lathe_backend_t b = NULL;
  CHECK_ERR(lathe_backend_new("lathe:cpu,async=2", &b), INVALID_ARGUMENT, "async=0|1|late");
  CHECK_ERR(lathe_backend_new("lathe:cpu,devices=0", &b), INVALID_ARGUMENT, "devices must be an integer in [1, 256]");
  b = backend_of("lathe:cpu,threads=2,devices=3,fuse=0,async=late");
  if (b) CHECK(strcmp(lathe_backend_config(b), "lathe:cpu,threads=2,devices=3,fuse=0,async=late") == 0, "config %s",
               lathe_backend_config(b));
  lathe_backend_free(b);
}
