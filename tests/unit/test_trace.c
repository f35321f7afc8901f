/* test_trace.c -- profiling (docs/PROFILING.md): the trace file of a backend (events, valid JSON
 * after a flush and after the backend goes, bad paths), program dumps, memory counters, and that
 * no error message repeats a job's token. */
#include <ctype.h>
#include <dirent.h>
#include <pthread.h>
#include <unistd.h>

#include "testing.h"

/* ---- a minimal JSON checker: the whole text one value ---- */
static const char *ws(const char *p) {
  while (*p && isspace((unsigned char)*p)) p++;
  return p;
}
static const char *value(const char *p, int depth);
static const char *string(const char *p) {
  if (*p != '"') return NULL;
  for (p++; *p && *p != '"'; p++)
    if (*p == '\\' && !*++p) return NULL;
    else if ((unsigned char)*p < 0x20) return NULL;
  return *p == '"' ? p + 1 : NULL;
}
static const char *number(const char *p) {
  const char *s = p;
  if (*p == '-') p++;
  while (isdigit((unsigned char)*p) || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' || *p == '-') p++;
  return p > s ? p : NULL;
}
static const char *seq(const char *p, char close, bool object, int depth) {
  p = ws(p + 1);
  if (*p == close) return p + 1;
  for (;;) {
    if (object) {
      if (!(p = string(ws(p)))) return NULL;
      p = ws(p);
      if (*p++ != ':') return NULL;
    }
    if (!(p = value(p, depth + 1))) return NULL;
    p = ws(p);
    if (*p == close) return p + 1;
    if (*p++ != ',') return NULL;
  }
}
static const char *value(const char *p, int depth) {
  p = ws(p);
  if (depth > 64) return NULL;
  if (*p == '{') return seq(p, '}', true, depth);
  if (*p == '[') return seq(p, ']', false, depth);
  if (*p == '"') return string(p);
  if (!strncmp(p, "true", 4)) return p + 4;
  if (!strncmp(p, "false", 5)) return p + 5;
  if (!strncmp(p, "null", 4)) return p + 4;
  return number(p);
}
static bool json_ok(const char *text) {
  const char *end = value(text, 0);
  return end && !*ws(end);
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  size_t got = s ? fread(s, 1, (size_t)n, f) : 0;
  fclose(f);
  if (s) s[got] = 0;
  return s;
}

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* y = Transpose(x * 2 + 1) over Float32[2,3]: one fused LOOP region, then a layout step ("affine");
 * with chain, z = Transpose(y ^ 2): four steps, enough for a CUDA graph ("chain"). */
static lathe_executable_t program_t(lathe_backend_t b, bool chain) {
  lathe_builder_t bl;
  CHECK_OK(lathe_builder_new(b, chain ? "chain" : "affine", &bl));
  lathe_function_t fn = lathe_builder_main(bl);
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 3), s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  float two = 2, one = 1;
  int perm[2] = {1, 0};
  lathe_value_t x, c2, c1, t, u, y, w;
  CHECK_OK(lathe_parameter(fn, "x", &s, &x));
  CHECK_OK(lathe_constant(fn, &s0, &two, sizeof two, &c2));
  CHECK_OK(lathe_constant(fn, &s0, &one, sizeof one, &c1));
  CHECK_OK(lathe_mul(fn, x, c2, &t));
  CHECK_OK(lathe_add(fn, t, c1, &u));
  CHECK_OK(lathe_transpose(fn, u, perm, 2, &y));
  if (chain) {
    CHECK_OK(lathe_mul(fn, y, y, &w));
    CHECK_OK(lathe_transpose(fn, w, perm, 2, &y));
  }
  CHECK_OK(lathe_function_return(fn, &y, 1));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(bl, &e));
  lathe_builder_free(bl);
  return e;
}

static lathe_executable_t affine_t(lathe_backend_t b) { return program_t(b, false); }

static void run_affine(lathe_backend_t b, lathe_executable_t e, int times) {
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 3);
  float x[6] = {0, 1, 2, 3, 4, 5}, y[6];
  lathe_buffer_t in = NULL;
  CHECK_OK(lathe_buffer_from_host(b, 0, &s, x, sizeof x, &in));
  for (int k = 0; k < times; k++) {
    lathe_buffer_t out = NULL;
    CHECK_OK(lathe_executable_execute(e, &in, NULL, 1, 0, &out, 1));
    CHECK_OK(lathe_buffer_to_host(out, y, sizeof y));
    CHECK(y[1] == 7 && y[2] == 3, "affine: y = [%g %g %g ...]", y[0], y[1], y[2]);
    lathe_buffer_free(out);
  }
  lathe_buffer_free(in);
}

static void tmp_dir(char *buf, size_t n) {
  snprintf(buf, n, "/tmp/lathe_trace_test_XXXXXX");
  CHECK(mkdtemp(buf) != NULL, "mkdtemp");
}

static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *de;
  char path[512];
  while (d && (de = readdir(d)))
    if (de->d_name[0] != '.') snprintf(path, sizeof path, "%s/%s", dir, de->d_name), remove(path);
  if (d) closedir(d);
  rmdir(dir);
}

TEST(trace_events) {
  char dir[64], path[128], config[200];
  tmp_dir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/trace.json", dir);
  snprintf(config, sizeof config, "lathe:cpu,threads=2,trace=%s", path);
  lathe_backend_t b = NULL;
  CHECK_OK(lathe_backend_new(config, &b));
  if (!b) return;
  CHECK(lathe_backend_is_tracing(b), "is tracing");
  lathe_executable_t e = affine_t(b);
  run_affine(b, e, 3);
  /* each execution leaves a whole file on disk (a Go program exits without freeing its backend) */
  char *text = slurp(path);
  CHECK(text && json_ok(text), "trace after executions, before any flush, is valid JSON");
  CHECK(text && count(text, "\"name\":\"Execute\"") == 3, "3 Execute events on disk before a flush");
  free(text);
  CHECK_OK(lathe_backend_trace_flush(b));
  text = slurp(path);
  CHECK(text && json_ok(text), "trace after a flush is valid JSON");
  CHECK(text && strstr(text, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":["), "trace header");
  if (text) {
    CHECK(count(text, "\"name\":\"compile\"") == 1, "one compile event, got %d", count(text, "\"name\":\"compile\""));
    CHECK(count(text, "\"name\":\"fusion regions\"") == 1, "a fusion phase event");
    CHECK(count(text, "\"name\":\"liveness and memory plan\"") == 1, "a memory planning phase event");
    CHECK(count(text, "\"name\":\"Execute\"") == 3, "3 Execute events, got %d", count(text, "\"name\":\"Execute\""));
    CHECK(count(text, "\"name\":\"run affine\"") == 3, "3 run events, got %d", count(text, "\"name\":\"run affine\""));
    CHECK(count(text, "\"name\":\"fused:Mul+Add\"") == 3, "3 region events, got %d", count(text, "\"name\":\"fused:Mul+Add\""));
    CHECK(count(text, "\"name\":\"Transpose\"") == 3, "3 Transpose events, got %d", count(text, "\"name\":\"Transpose\""));
    CHECK(count(text, "\"out\":\"Float32[3,2]\"") == 3, "the Transpose's output shape in args");
    CHECK(count(text, "\"name\":\"upload\"") == 1 && count(text, "\"name\":\"download\"") == 3, "transfers");
    CHECK(count(text, "\"ph\":\"C\"") >= 3, "memory counters");
    CHECK(count(text, "\"in_use\":") == 6, "each step's memory in use: %d", count(text, "\"in_use\":"));
    CHECK(count(text, "\"ph\":\"X\"") >= 3 * 5 + 4, "complete events: %d", count(text, "\"ph\":\"X\""));
  }
  free(text);
  /* events after a flush overwrite its tail; the file stays valid once the backend goes */
  run_affine(b, e, 1);
  lathe_executable_free(e);
  lathe_backend_free(b);
  text = slurp(path);
  CHECK(text && json_ok(text), "trace after the backend went is valid JSON");
  CHECK(text && count(text, "\"name\":\"Execute\"") == 4, "4 Execute events in all");
  free(text);
  remove_dir(dir);
}

/* lathe:cuda with option (trace=... or dump=...), or NULL (the test SKIPs) without a usable GPU. */
static lathe_backend_t gpu_with(const char *option) {
  char config[256];
  snprintf(config, sizeof config, "lathe:cuda,%s", option);
  lathe_backend_t b = NULL;
  lathe_status_free(lathe_backend_new(config, &b));
  return b;
}

/* lathe:cuda: each step again on the GPU's track with the GPU's times (timing events around it);
 * with trace_graphs=1 a replayed run is one span. */
TEST(trace_gpu_times) {
  char dir[64], path[128], config[200];
  tmp_dir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/steps.json", dir);
  snprintf(config, sizeof config, "trace=%s", path);
  lathe_backend_t b = gpu_with(config);
  if (!b) {
    remove_dir(dir);
    SKIP("no usable GPU");
  }
  lathe_executable_t e = affine_t(b);
  run_affine(b, e, 3);
  lathe_executable_free(e);
  lathe_backend_free(b);
  char *text = slurp(path);
  CHECK(text && json_ok(text), "GPU trace is valid JSON");
  if (text) {
    CHECK(count(text, "\"cat\":\"gpu step\"") == 6, "2 steps x 3 runs on the GPU's track, got %d",
          count(text, "\"cat\":\"gpu step\""));
    CHECK(count(text, "\"cat\":\"gpu\"") == 3, "3 GPU run spans, got %d", count(text, "\"cat\":\"gpu\""));
    /* runs may take different streams of the pool: a track per stream used, each named once */
    int named = count(text, "\"name\":\"thread_name\""), streams = 0;
    for (int k = 0; k < 64; k++) {
      char nm[48];
      snprintf(nm, sizeof nm, "\"name\":\"GPU 0 stream %d\"", k);
      int c = count(text, nm);
      CHECK(c <= 1, "track %s named %d times", nm, c);
      streams += c;
    }
    CHECK(named >= 1 && named == streams, "%d track names, %d of them GPU streams", named, streams);
    CHECK(count(text, "\"name\":\"Transpose\"") == 6, "Transpose: a host and a GPU event per run, got %d",
          count(text, "\"name\":\"Transpose\""));
  }
  free(text);
  snprintf(path, sizeof path, "%s/graphs.json", dir);
  snprintf(config, sizeof config, "trace_graphs=1,trace=%s", path);
  b = gpu_with(config);
  CHECK(b, "lathe:cuda,%s", config);
  if (b) {
    e = program_t(b, true);
    lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 3);
    float x[6] = {0, 1, 2, 3, 4, 5}, y[6];
    lathe_buffer_t in = NULL;
    CHECK_OK(lathe_buffer_from_host(b, 0, &s, x, sizeof x, &in));
    for (int k = 0; k < 4 && e && in; k++) { /* walked once, captured at the second run (graphs=2), replayed after */
      lathe_buffer_t out = NULL;
      CHECK_OK(lathe_executable_execute(e, &in, NULL, 1, 0, &out, 1));
      CHECK_OK(lathe_buffer_to_host(out, y, sizeof y));
      CHECK(y[0] == 1 && y[1] == 9 && y[5] == 121, "chain: y = [%g %g ... %g]", y[0], y[1], y[5]);
      lathe_buffer_free(out);
    }
    lathe_buffer_free(in);
    lathe_executable_free(e);
    lathe_backend_free(b);
  }
  text = slurp(path);
  CHECK(text && json_ok(text), "GPU trace (graphs) is valid JSON");
  if (text) {
    CHECK(count(text, "\"name\":\"replay chain\"") == 3, "3 replays, got %d", count(text, "\"name\":\"replay chain\""));
    CHECK(strstr(text, "\"name\":\"GPU 0 graphs\""), "the graphs' track");
    CHECK(count(text, "\"cat\":\"gpu step\"") == 4, "the walked run's 4 steps, got %d", count(text, "\"cat\":\"gpu step\""));
  }
  free(text);
  remove_dir(dir);
}

/* lathe:cuda's dumps: each program's kernels with their sources (.device.txt), and the library
 * choices of its first run (cuda-libraries.txt). */
TEST(dump_gpu_kernels) {
  char dir[64], config[200], path[160];
  tmp_dir(dir, sizeof dir);
  snprintf(config, sizeof config, "dump=%s", dir);
  lathe_backend_t b = gpu_with(config);
  if (!b) {
    remove_dir(dir);
    SKIP("no usable GPU");
  }
  lathe_executable_t e = affine_t(b);
  run_affine(b, e, 1);
  lathe_executable_free(e);
  /* a product of shapes no other test asks (the heuristic's answers are kept for the process):
   * cuBLASLt's choice noted at its first run */
  lathe_builder_t bl;
  CHECK_OK(lathe_builder_new(b, "product", &bl));
  lathe_function_t fn = lathe_builder_main(bl);
  lathe_shape sx = TST_SHAPE(LATHE_DTYPE_FLOAT32, 72, 56), sy = TST_SHAPE(LATHE_DTYPE_FLOAT32, 56, 40);
  lathe_value_t x, y, z;
  int one = 1, zero = 0;
  CHECK_OK(lathe_parameter(fn, "x", &sx, &x));
  CHECK_OK(lathe_parameter(fn, "y", &sy, &y));
  CHECK_OK(lathe_dot_general(fn, x, &one, 1, NULL, 0, y, &zero, 1, NULL, 0, NULL, &z));
  CHECK_OK(lathe_function_return(fn, &z, 1));
  CHECK_OK(lathe_builder_compile(bl, &e));
  lathe_builder_free(bl);
  float *h = calloc(72 * 56, sizeof(float));
  lathe_buffer_t in[2] = {NULL, NULL}, out = NULL;
  CHECK_OK(lathe_buffer_from_host(b, 0, &sx, h, 72 * 56 * sizeof(float), &in[0]));
  CHECK_OK(lathe_buffer_from_host(b, 0, &sy, h, 56 * 40 * sizeof(float), &in[1]));
  if (e && in[0] && in[1]) {
    CHECK_OK(lathe_executable_execute(e, in, NULL, 2, 0, &out, 1));
    CHECK_OK(lathe_buffer_to_host(out, h, 72 * 40 * sizeof(float)));
  }
  lathe_buffer_free(out), lathe_buffer_free(in[0]), lathe_buffer_free(in[1]);
  lathe_executable_free(e);
  lathe_backend_free(b);
  free(h);
  snprintf(path, sizeof path, "%s/0000-affine.device.txt", dir);
  char *text = slurp(path);
  CHECK(text && strstr(text, "fused:Mul+Add [fused LOOP]: kernel lt_fused_") && strstr(text, "// ---- #0 ----"),
        "affine's device dump names the region's kernel and prints its source");
  free(text);
  snprintf(path, sizeof path, "%s/cuda-libraries.txt", dir);
  text = slurp(path);
  CHECK(text && strstr(text, "cuBLASLt Float32 GEMM") && strstr(text, "k=56"), "the product's cuBLASLt choice: %s",
        text ? text : "(no file)");
  free(text);
  remove_dir(dir);
}

TEST(trace_bad_path) {
  lathe_backend_t b = NULL;
  CHECK_ERR(lathe_backend_new("lathe:cpu,trace=/nonexistent-lathe-dir/t.json", &b), INVALID_ARGUMENT,
            "trace: cannot write \"/nonexistent-lathe-dir/t.json\"");
  CHECK(b == NULL, "no backend");
  setenv("LATHE_TRACE", "/nonexistent-lathe-dir/env.json", 1);
  CHECK_ERR(lathe_backend_new("lathe:cpu", &b), INVALID_ARGUMENT, "LATHE_TRACE: cannot write");
  unsetenv("LATHE_TRACE");
  CHECK_ERR(lathe_backend_new("lathe:cpu,dump=/nonexistent-lathe-dir", &b), INVALID_ARGUMENT,
            "dump: cannot write dumps into \"/nonexistent-lathe-dir\"");
  CHECK_ERR(lathe_backend_new("lathe:cpu,dump=/etc/passwd", &b), INVALID_ARGUMENT, "not a directory");
}

/* A job's token never appears in a message, whatever else is wrong with the config. */
TEST(trace_token_redacted) {
  static const char *configs[] = {"lathe:cpu,token=s3cret,trace=/nonexistent-lathe-dir/t.json",
                                  "lathe:cpu,token=s3cret,bogus=1", "lathe:cpu,threads=2 token=s3cret",
                                  "lathe:cpu,token=s3cret,threads=x"};
  for (size_t i = 0; i < sizeof configs / sizeof *configs; i++) {
    lathe_backend_t b = NULL;
    lathe_status_t st = lathe_backend_new(configs[i], &b);
    CHECK(st && !strstr(lathe_status_message(st), "s3cret"), "config %zu: %s", i, lathe_status_message(st));
    lathe_status_free(st);
    lathe_backend_free(b);
  }
}

TEST(dump_programs) {
  char dir[64], config[200], path[200];
  tmp_dir(dir, sizeof dir);
  snprintf(config, sizeof config, "lathe:cpu,dump=%s", dir);
  lathe_backend_t b = NULL;
  CHECK_OK(lathe_backend_new(config, &b));
  if (!b) return;
  lathe_executable_t e = affine_t(b);
  int64_t arena = -1;
  CHECK_OK(lathe_executable_arena_bytes(e, &arena));
  CHECK(arena >= 24, "the region's result is planned in the arena: %lld bytes", (long long)arena);
  static const struct { const char *suffix, *want[3]; } files[] = {
      {"built.txt", {"function \"main\"", "= Mul(%", "Transpose(%"}},
      {"built.dot", {"digraph \"affine\"", "Mul", "->"}},
      {"program.txt", {"fused LOOP region 0 [Mul, Add]", "arena [0, +24)", "Transpose (node"}},
      {"program.dot", {"digraph \"affine\"", "fused LOOP\\nMul, Add", "@0+24"}},
  };
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    snprintf(path, sizeof path, "%s/0000-affine.%s", dir, files[i].suffix);
    char *text = slurp(path);
    CHECK(text != NULL, "dump %s written", path);
    for (int k = 0; text && k < 3; k++)
      CHECK(strstr(text, files[i].want[k]), "%s has \"%s\":\n%s", path, files[i].want[k], text);
    free(text);
  }
  lathe_executable_free(e);
  lathe_backend_free(b);
  remove_dir(dir);
}

TEST(memory_stats) {
  lathe_backend_t b = NULL;
  CHECK_OK(lathe_backend_new("lathe:cpu", &b));
  if (!b) return;
  lathe_memory_stats s0, s1, s2;
  CHECK_OK(lathe_backend_memory_stats(b, 0, &s0));
  CHECK(s0.process_wide && s0.current_bytes >= 0 && s0.peak_bytes >= s0.current_bytes, "stats before");
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 1 << 18);
  lathe_buffer_t buf = NULL;
  void *data;
  CHECK_OK(lathe_buffer_new_shared(b, 0, &s, &buf, &data));
  CHECK_OK(lathe_backend_memory_stats(b, 0, &s1));
  CHECK(s1.current_bytes - s0.current_bytes >= (1 << 20), "a 1 MiB buffer counted: %lld -> %lld",
        (long long)s0.current_bytes, (long long)s1.current_bytes);
  CHECK(s1.peak_bytes >= s1.current_bytes && s1.n_allocs > s0.n_allocs, "peak and count");
  lathe_buffer_free(buf);
  CHECK_OK(lathe_backend_memory_stats(b, 0, &s2));
  CHECK(s1.current_bytes - s2.current_bytes >= (1 << 20), "freed: %lld -> %lld", (long long)s1.current_bytes,
        (long long)s2.current_bytes);
  CHECK(s2.peak_bytes >= s1.current_bytes, "the peak stays");
  CHECK_OK(lathe_backend_memory_reset_peak(b, 0));
  CHECK_OK(lathe_backend_memory_stats(b, 0, &s2));
  CHECK(s2.peak_bytes < s1.current_bytes, "reset peak: %lld", (long long)s2.peak_bytes);
  CHECK_ERR(lathe_backend_memory_stats(b, 3, &s2), INVALID_ARGUMENT, "device 3");
  lathe_backend_free(b);
}

/* A step split over the CPU pool: each chunk is an event on the thread that ran it. */
TEST(trace_pool_chunks) {
  char dir[64], path[128], config[200];
  tmp_dir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/trace.json", dir);
  snprintf(config, sizeof config, "lathe:cpu,threads=2,trace=%s", path);
  lathe_backend_t b = NULL;
  CHECK_OK(lathe_backend_new(config, &b));
  if (!b) return;
  enum { N = 1 << 20 };
  lathe_builder_t bl;
  CHECK_OK(lathe_builder_new(b, "neg", &bl));
  lathe_function_t fn = lathe_builder_main(bl);
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, N);
  lathe_value_t x, y;
  CHECK_OK(lathe_parameter(fn, "x", &s, &x));
  CHECK_OK(lathe_neg(fn, x, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(bl, &e));
  lathe_builder_free(bl);
  lathe_buffer_t in = NULL, out = NULL;
  void *data;
  CHECK_OK(lathe_buffer_new_shared(b, 0, &s, &in, &data));
  CHECK_OK(lathe_executable_execute(e, &in, NULL, 1, 0, &out, 1));
  lathe_buffer_free(out);
  lathe_buffer_free(in);
  lathe_executable_free(e);
  lathe_backend_free(b);
  char *text = slurp(path);
  CHECK(text && json_ok(text), "valid JSON");
  int chunks = text ? count(text, "\"name\":\"pool chunk\"") : 0;
  CHECK(chunks >= 2, "the Neg's chunks: %d events", chunks);
  CHECK(text && count(text, "\"cat\":\"worker\"") == chunks, "worker category");
  free(text);
  remove_dir(dir);
}

/* Backends naming one file share it; a later backend continues it rather than truncating it. */
TEST(trace_shared_file) {
  char dir[64], path[128], config[200];
  tmp_dir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/trace.json", dir);
  snprintf(config, sizeof config, "lathe:cpu,trace=%s", path);
  lathe_backend_t a = NULL, b = NULL, c = NULL;
  CHECK_OK(lathe_backend_new(config, &a));
  setenv("LATHE_TRACE", path, 1);
  CHECK_OK(lathe_backend_new("lathe:cpu,threads=1", &b));
  unsetenv("LATHE_TRACE");
  if (!a || !b) return;
  lathe_executable_t ea = affine_t(a), eb = affine_t(b);
  run_affine(a, ea, 1);
  run_affine(b, eb, 2);
  lathe_executable_free(ea);
  lathe_executable_free(eb);
  lathe_backend_free(a);
  lathe_backend_free(b);
  CHECK_OK(lathe_backend_new(config, &c));
  if (c) {
    lathe_executable_t ec = affine_t(c);
    run_affine(c, ec, 1);
    lathe_executable_free(ec);
    lathe_backend_free(c);
  }
  char *text = slurp(path);
  CHECK(text && json_ok(text), "valid JSON");
  CHECK(text && count(text, "\"name\":\"Execute\"") == 4, "the three backends' 4 executions in one file");
  CHECK(text && count(text, "\"traceEvents\"") == 1, "one header");
  free(text);
  remove_dir(dir);
}

/* Executions on several threads write one valid file (the writer locks per event). */
typedef struct {
  lathe_backend_t b;
  lathe_executable_t e;
} trace_job;

static void *trace_worker(void *arg) {
  trace_job *j = arg;
  run_affine(j->b, j->e, 20);
  return NULL;
}

TEST(trace_threads) {
  char dir[64], path[128], config[200];
  tmp_dir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/trace.json", dir);
  snprintf(config, sizeof config, "lathe:cpu,threads=2,trace=%s", path);
  lathe_backend_t b = NULL;
  CHECK_OK(lathe_backend_new(config, &b));
  if (!b) return;
  trace_job j = {b, affine_t(b)};
  pthread_t t[3];
  for (int k = 0; k < 3; k++) pthread_create(&t[k], NULL, trace_worker, &j);
  for (int k = 0; k < 3; k++) pthread_join(t[k], NULL);
  lathe_executable_free(j.e);
  lathe_backend_free(b);
  char *text = slurp(path);
  CHECK(text && json_ok(text), "valid JSON after concurrent executions");
  CHECK(text && count(text, "\"name\":\"run affine\"") == 60, "60 runs");
  CHECK(text && count(text, "\"name\":\"fused:Mul+Add\"") == 60, "60 region steps");
  free(text);
  remove_dir(dir);
}
