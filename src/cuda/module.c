/* module.c -- kernels: CUDA C sources compiled by NVRTC for the device's architecture (a cubin,
 * so the driver never JIT-compiles PTX), cached per device in memory and across processes on disk
 * (keyed by a hash of the source, the architecture and the NVRTC and driver versions). A failed
 * compile returns NVRTC's log in the error. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuda.h"
#include "kernels/zkernels.h"

/* The prelude of every kernel source: fixed-width types (NVRTC has no standard headers), half
 * conversions with the CPU's exact rounding (src/core/dtype.c), complex storage types and the
 * grid-stride loop. */
static const char prelude[] = LT_CUH_PRELUDE;


static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* A source's key, computed on every launch (sources are generated per launch): 8 bytes a step
 * with a multiply-xorshift mix, several times faster than byte-wise FNV over ~10 KB texts. */
static uint64_t source_key(const char *s, size_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, s + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  uint64_t w = 0;
  memcpy(&w, s + i, n - i);
  h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 29);
}

lathe_status_t lathe_cuda_compile_source(const char *source, int cc, void **out_cubin, size_t *out_size) {
  const lcu_api *api;
  LATHE_RETURN_IF_ERROR(lathe_cuda_load_nvrtc(&api));
  size_t np = strlen(prelude), ns = strlen(source);
  char *full = malloc(np + ns + 1);
  if (!full) return LATHE_OOM("lathe:cuda: compile");
  memcpy(full, prelude, np);
  memcpy(full + np, source, ns + 1);
  lnvrtcProgram prog = NULL;
  lnvrtcResult r = api->nvrtcCreateProgram(&prog, full, "lathe_kernel.cu", 0, NULL, NULL);
  free(full);
  if (r != LNVRTC_SUCCESS)
    return lathe_status_new(LATHE_STATUS_INTERNAL, "lathe:cuda: nvrtcCreateProgram: %s", api->nvrtcGetErrorString(r));
  char arch[48];
  snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d", cc);
  /* no contraction of a * b + c into one rounding: every op rounds as its definition (and the
   * CPU, compiled as ISO C) says, so fused and unfused code agree; kernels that want FMA call
   * fma() themselves */
  /* --minimal (NVRTC 12.4 on) leaves out the texture, surface and device-runtime declarations,
   * which no lathe kernel uses: about 10 ms less per program on the development machine */
  int driver, nvrtc;
  lathe_cuda_versions(&driver, &nvrtc);
  const char *opts[] = {arch, "--std=c++17", "-default-device", "--fmad=false", "--minimal"};
  r = api->nvrtcCompileProgram(prog, nvrtc >= 12040 ? 5 : 4, opts);
  lathe_status_t st = NULL;
  if (r != LNVRTC_SUCCESS) {
    size_t log_size = 0;
    api->nvrtcGetProgramLogSize(prog, &log_size);
    char *log = malloc(log_size + 1);
    if (log) {
      log[0] = 0;
      api->nvrtcGetProgramLog(prog, log);
      log[log_size] = 0;
    }
    st = lathe_status_new(LATHE_STATUS_INTERNAL, "lathe:cuda: NVRTC could not compile a kernel for sm_%d: %s\n%s", cc,
                          api->nvrtcGetErrorString(r), log ? log : "(no log)");
    free(log);
  }
  size_t size = 0;
  void *cubin = NULL;
  if (!st) {
    r = api->nvrtcGetCUBINSize(prog, &size);
    if (r == LNVRTC_SUCCESS) {
      cubin = malloc(size ? size : 1);
      if (!cubin) st = LATHE_OOM("lathe:cuda: compile");
      else r = api->nvrtcGetCUBIN(prog, cubin);
    }
    if (!st && r != LNVRTC_SUCCESS)
      st = lathe_status_new(LATHE_STATUS_INTERNAL, "lathe:cuda: NVRTC gave no cubin: %s", api->nvrtcGetErrorString(r));
  }
  api->nvrtcDestroyProgram(&prog);
  if (st) {
    free(cubin);
    return st;
  }
  *out_cubin = cubin;
  *out_size = size;
  return NULL;
}

/* ---- the disk cache ---- */
bool lathe_cuda_cache_dir(char *buf, size_t cap) {
  const char *dir = getenv("LATHE_CUDA_CACHE_DIR");
  if (dir && (!strcmp(dir, "off") || !*dir)) return false;
  if (dir) snprintf(buf, cap, "%s", dir);
  else if (getenv("XDG_CACHE_HOME") && *getenv("XDG_CACHE_HOME")) snprintf(buf, cap, "%s/lathe/cuda", getenv("XDG_CACHE_HOME"));
  else if (getenv("HOME") && *getenv("HOME")) snprintf(buf, cap, "%s/.cache/lathe/cuda", getenv("HOME"));
  else return false;
  return true;
}

static void mkdirs(char *path) {
  for (char *p = path + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      mkdir(path, 0755);
      *p = '/';
    }
  mkdir(path, 0755);
}

void *lathe_cuda_read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  void *buf = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    long n = ftell(f);
    if (n > 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n)) && fread(buf, 1, (size_t)n, f) != (size_t)n) {
      free(buf);
      buf = NULL;
    }
    *size = n > 0 ? (size_t)n : 0;
  }
  fclose(f);
  return buf;
}

/* Best effort: a cache that cannot be written is no error. Written under a temporary name and
 * renamed, so another process never reads half a file. */
void lathe_cuda_write_file(const char *dir, const char *path, const void *data, size_t n) {
  char tmp[700], d[512];
  snprintf(d, sizeof d, "%s", dir);
  mkdirs(d);
  if (snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid()) >= (int)sizeof tmp) return;
  FILE *f = fopen(tmp, "wb");
  if (!f) return;
  bool ok = fwrite(data, 1, n, f) == n;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) remove(tmp);
}

/* ---- the per-device module table ---- */
enum { MODULE_FNS = 8 };

struct cuda_module {
  uint64_t key;
  char *source; /* to tell hash collisions apart */
  size_t len;
  lcuModule module;
  bool owner; /* unloads module when the device goes (the modules of batches are shared) */
  /* functions looked up so far (a module has a few kernels), so a launch skips cuModuleGetFunction */
  char *fn_names[MODULE_FNS];
  lcuFunction fns[MODULE_FNS];
  int n_fns;
};

/* Functions of lasting sources, by (text address, name): an open-addressed table whose entries
 * are published once with a release store and never change or move until the device goes. */
enum { LASTING_SLOTS = 1024, LASTING_PROBES = 16, LASTING_NAME = 64 };
typedef struct lasting_fn {
  const char *source;
  lcuFunction fn;
  char name[LASTING_NAME];
} lasting_fn;

lathe_status_t lathe_cuda_modules_init(cuda_modules *m) {
  memset(m, 0, sizeof *m);
  m->lasting = calloc(LASTING_SLOTS, sizeof *m->lasting);
  if (!m->lasting) return LATHE_OOM("lathe:cuda");
  if (pthread_mutex_init(&m->mu, NULL)) {
    free(m->lasting);
    m->lasting = NULL;
    return LATHE_OOM("lathe:cuda");
  }
  return NULL;
}

void lathe_cuda_modules_destroy(cuda_dev *d) {
  cuda_modules *m = &d->modules;
  lathe_status_t st = lathe_cuda_use(d);
  for (int i = 0; i < m->cap; i++)
    if (m->table && m->table[i]) {
      if (!st && m->table[i]->owner) d->cu->api->cuModuleUnload(m->table[i]->module);
      free(m->table[i]->source);
      for (int k = 0; k < m->table[i]->n_fns; k++) free(m->table[i]->fn_names[k]);
      free(m->table[i]);
    }
  lathe_status_free(st);
  free(m->table);
  m->table = NULL;
  for (int i = 0; m->lasting && i < LASTING_SLOTS; i++) free(atomic_load(&m->lasting[i]));
  free(m->lasting);
  m->lasting = NULL;
  pthread_mutex_destroy(&m->mu);
}

static cuda_module **slot_for(cuda_modules *m, uint64_t key, const char *source, size_t len) {
  for (size_t i = key & (size_t)(m->cap - 1);; i = (i + 1) & (size_t)(m->cap - 1)) {
    cuda_module *e = m->table[i];
    if (!e || (e->key == key && e->len == len && !memcmp(e->source, source, len))) return &m->table[i];
  }
}

static lathe_status_t grow(cuda_modules *m) {
  int cap = m->cap ? 2 * m->cap : 64;
  cuda_module **t = calloc((size_t)cap, sizeof *t), **old = m->table;
  if (!t) return LATHE_OOM("lathe:cuda");
  int old_cap = m->cap;
  m->table = t;
  m->cap = cap;
  for (int i = 0; i < old_cap; i++)
    if (old[i]) *slot_for(m, old[i]->key, old[i]->source, old[i]->len) = old[i];
  free(old);
  return NULL;
}

/* The disk cache's file for a source of key on d (false: no cache). */
static bool cache_path(const cuda_dev *d, uint64_t key, char *dir, size_t dir_cap, char *path, size_t cap) {
  int driver, nvrtc;
  lathe_cuda_versions(&driver, &nvrtc);
  uint64_t file_key = fnv(key, &d->cc, sizeof d->cc);
  file_key = fnv(file_key, &driver, sizeof driver);
  file_key = fnv(file_key, &nvrtc, sizeof nvrtc);
  file_key = fnv(file_key, prelude, sizeof prelude);
  if (!lathe_cuda_cache_dir(dir, dir_cap)) return false;
  snprintf(path, cap, "%s/%016llx-sm%d.cubin", dir, (unsigned long long)file_key, d->cc);
  return true;
}

/* The cubin of source for d: from the disk cache, else NVRTC (and then written there). Without
 * the table's lock, so that several threads compile at once. */
static lathe_status_t cubin_of(cuda_dev *d, const char *source, uint64_t key, bool fresh, void **cubin, size_t *size,
                               bool *from_disk) {
  char dir[512], path[600];
  bool cached = cache_path(d, key, dir, sizeof dir, path, sizeof path);
  *cubin = cached && !fresh ? lathe_cuda_read_file(path, size) : NULL;
  *from_disk = *cubin != NULL;
  if (*cubin) return NULL;
  LATHE_RETURN_IF_ERROR(lathe_cuda_compile_source(source, d->cc, cubin, size));
  if (cached) lathe_cuda_write_file(dir, path, *cubin, *size);
  return NULL;
}

/* The module of source (of key) loaded on d: its cubin from the disk cache or NVRTC, compiled
 * afresh when the cached file does not load (stale or damaged). */
static lathe_status_t load_module(cuda_dev *d, const char *source, uint64_t key, lcuModule *mod) {
  void *cubin = NULL;
  size_t size = 0;
  bool from_disk = false;
  LATHE_RETURN_IF_ERROR(cubin_of(d, source, key, false, &cubin, &size, &from_disk));
  lathe_status_t st = lathe_cuda_use(d);
  if (!st) st = lathe_cuda_error(d->cu->api, d->cu->api->cuModuleLoadData(mod, cubin), "lathe:cuda: cuModuleLoadData");
  if (st && from_disk) {
    lathe_status_free(st);
    free(cubin);
    cubin = NULL;
    st = cubin_of(d, source, key, true, &cubin, &size, &from_disk);
    if (!st) st = lathe_cuda_error(d->cu->api, d->cu->api->cuModuleLoadData(mod, cubin), "lathe:cuda: cuModuleLoadData");
  }
  free(cubin);
  return st;
}

/* The table's entry for source (of key), entered with module mod (and, when name is given, its
 * function fn already looked up) unless another thread or an earlier batch entered it first;
 * *entered says which. NULL when memory ran out. */
static cuda_module *adopt(cuda_modules *m, const char *source, uint64_t key, lcuModule mod, bool owner, const char *name,
                          lcuFunction fn, bool *entered) {
  size_t len = strlen(source);
  cuda_module *e = calloc(1, sizeof *e), *found = NULL;
  char *src = malloc(len + 1), *nm = name ? malloc(strlen(name) + 1) : NULL;
  *entered = false;
  pthread_mutex_lock(&m->mu);
  bool room = e && src && (nm || !name);
  if (room && (m->cap == 0 || 2 * (m->n + 1) > m->cap)) {
    lathe_status_t st = grow(m);
    room = st == NULL;
    lathe_status_free(st);
  }
  cuda_module **slot = room ? slot_for(m, key, source, len) : NULL;
  if (slot && !*slot) {
    memcpy(src, source, len + 1);
    *e = (cuda_module){.key = key, .source = src, .len = len, .module = mod, .owner = owner};
    if (name) {
      strcpy(nm, name);
      e->fn_names[0] = nm;
      e->fns[0] = fn;
      e->n_fns = 1;
    }
    *slot = e;
    m->n++;
    *entered = true;
  }
  if (slot) found = *slot;
  pthread_mutex_unlock(&m->mu);
  if (!*entered) {
    free(e);
    free(src);
    free(nm);
  }
  return found;
}

/* The module of source on d: from the table, the disk cache, or NVRTC. Takes and drops mu;
 * entries are never removed before the device goes, so *out stays valid. */
static lathe_status_t module_of(cuda_dev *d, const char *source, cuda_module **out) {
  cuda_modules *m = &d->modules;
  size_t len = strlen(source);
  uint64_t key = source_key(source, len);
  pthread_mutex_lock(&m->mu);
  lathe_status_t st = (m->cap == 0 || 2 * (m->n + 1) > m->cap) ? grow(m) : NULL;
  cuda_module **slot = st ? NULL : slot_for(m, key, source, len);
  if (slot && *slot) *out = *slot;
  pthread_mutex_unlock(&m->mu);
  if (st || (slot && *slot)) return st;
  lcuModule mod = NULL;
  LATHE_RETURN_IF_ERROR(load_module(d, source, key, &mod));
  bool entered;
  *out = adopt(m, source, key, mod, true, NULL, NULL, &entered);
  if (!entered) d->cu->api->cuModuleUnload(mod); /* another thread loaded it meanwhile: theirs is kept */
  return *out ? NULL : LATHE_OOM("lathe:cuda");
}

lathe_status_t lathe_cuda_kernel(cuda_dev *d, const char *source, const char *name, lcuFunction *out) {
  cuda_module *e = NULL;
  LATHE_RETURN_IF_ERROR(module_of(d, source, &e));
  pthread_mutex_lock(&d->modules.mu);
  lathe_status_t st = NULL;
  for (int k = 0; k < e->n_fns; k++)
    if (!strcmp(e->fn_names[k], name)) {
      *out = e->fns[k];
      pthread_mutex_unlock(&d->modules.mu);
      return NULL;
    }
  char what[160];
  snprintf(what, sizeof what, "lathe:cuda: kernel %s", name);
  st = lathe_cuda_error(d->cu->api, d->cu->api->cuModuleGetFunction(out, e->module, name), what);
  if (!st && e->n_fns < MODULE_FNS) { /* remembered where there is room (else looked up each time) */
    char *nm = malloc(strlen(name) + 1);
    if (nm) {
      strcpy(nm, name);
      e->fn_names[e->n_fns] = nm;
      e->fns[e->n_fns++] = *out;
    }
  }
  pthread_mutex_unlock(&d->modules.mu);
  return st;
}

lathe_status_t lathe_cuda_kernel_lasting(cuda_dev *d, const char *source, const char *name, lcuFunction *out) {
  size_t nl = strlen(name);
  if (nl >= LASTING_NAME) return lathe_cuda_kernel(d, source, name, out);
  uint64_t h = fnv((uint64_t)(uintptr_t)source * 0x9e3779b97f4a7c15ull, name, nl);
  _Atomic(lasting_fn *) *tab = d->modules.lasting;
  for (int p = 0; p < LASTING_PROBES; p++) {
    lasting_fn *e = atomic_load_explicit(&tab[(h + (uint64_t)p) & (LASTING_SLOTS - 1)], memory_order_acquire);
    if (!e) break;
    if (e->source == source && !memcmp(e->name, name, nl + 1)) {
      *out = e->fn;
      return NULL;
    }
  }
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel(d, source, name, out));
  lasting_fn *e = malloc(sizeof *e);
  if (!e) return NULL; /* found the slow way: not remembered */
  e->source = source;
  e->fn = *out;
  memcpy(e->name, name, nl + 1);
  for (int p = 0; p < LASTING_PROBES; p++) { /* the first empty slot, unless a racing thread put it there */
    _Atomic(lasting_fn *) *slot = &tab[(h + (uint64_t)p) & (LASTING_SLOTS - 1)];
    lasting_fn *cur = NULL;
    if (atomic_compare_exchange_strong_explicit(slot, &cur, e, memory_order_release, memory_order_acquire)) return NULL;
    if (cur->source == source && !memcmp(cur->name, name, nl + 1)) break;
  }
  free(e); /* there already, or no room within the probes: found the slow way next time */
  return NULL;
}

lathe_status_t lathe_cuda_module_prepare(cuda_dev *d, const char *source) {
  cuda_module *e;
  return module_of(d, source, &e);
}

/* ---- batches: several generated kernels in one NVRTC program ----
 * NVRTC pays a fixed cost per program (its start, the ~9 KB preludes parsed, a cubin emitted:
 * about a third of an elementwise kernel's compile), and on some machines it compiles one
 * program at a time per process, however many threads ask. A plan's generated kernels are
 * therefore compiled in batches: each source's own part in a namespace of its own, the shared
 * prefix once ahead of them. The batch's cubin is cached on disk under the batch's key and
 * linked under each member's key, so a member is found on disk wherever it recurs; a module
 * loaded from a batch is shared by its members' table entries. */
char *lathe_cuda_batch_text(int n, const char *const *sources, size_t prefix) {
  lt_text t = {0};
  if (n > 0) lt_put(&t, "%.*s", (int)prefix, sources[0]);
  for (int i = 0; i < n; i++) lt_put(&t, "namespace lt_batch%d {\n%s\n}\n", i, sources[i] + prefix);
  if (t.oom) {
    free(t.s);
    return NULL;
  }
  return t.s;
}

/* A module loaded for a batch's members, and the file it came from (a member whose file is a link
 * to one already loaded shares it). */
typedef struct batch_module {
  lcuModule mod;
  dev_t dev;
  ino_t ino;
  bool owned;
} batch_module;

/* Member source takes its function from b's module: *out set when it was entered now; false when
 * the module lacks the function (then compiled). */
static bool take(cuda_dev *d, batch_module *b, const char *source, uint64_t key, const char *name, lcuFunction *out) {
  lcuFunction fn = NULL;
  bool entered;
  if (d->cu->api->cuModuleGetFunction(&fn, b->mod, name) != LCU_SUCCESS) return false;
  adopt(&d->modules, source, key, b->mod, !b->owned, name, fn, &entered);
  if (entered) {
    b->owned = true;
    *out = fn;
  }
  return true; /* entered now, or there already (found by lathe_cuda_kernel below) */
}

static void link_member(const char *batch_path, const char *path) {
  char tmp[700];
  if (snprintf(tmp, sizeof tmp, "%s.%d.lnk", path, (int)getpid()) >= (int)sizeof tmp) return;
  remove(tmp);
  if (link(batch_path, tmp) == 0 && rename(tmp, path) != 0) remove(tmp);
}

lathe_status_t lathe_cuda_kernels_batch(cuda_dev *d, int n, const char *const *sources, const char *const *names,
                                        size_t prefix, lcuFunction *out) {
  if (n <= 0) return NULL;
  cuda_modules *m = &d->modules;
  int *todo = malloc(sizeof *todo * (size_t)n);
  uint64_t *keys = malloc(sizeof *keys * (size_t)n);
  batch_module *mods = calloc((size_t)n + 1, sizeof *mods);
  const char **v = malloc(sizeof *v * (size_t)n);
  lathe_status_t st = todo && keys && mods && v ? lathe_cuda_use(d) : LATHE_OOM("lathe:cuda: compile");
  int nt = 0, nm = 0;
  for (int i = 0; i < n; i++) out[i] = NULL;
  for (int i = 0; !st && i < n; i++) { /* those not in the table, in the batch's form (the others: alone, below) */
    size_t len = strlen(sources[i]);
    keys[i] = source_key(sources[i], len);
    pthread_mutex_lock(&m->mu);
    bool known = m->cap && *slot_for(m, keys[i], sources[i], len);
    pthread_mutex_unlock(&m->mu);
    if (!known && len >= prefix && !memcmp(sources[i], sources[0], prefix)) todo[nt++] = i;
  }
  char dir[512], path[600], bpath[600];
  int left = 0;
  for (int t = 0; !st && t < nt; t++) { /* on disk: each file (a batch's, linked) loaded once */
    int i = todo[t];
    struct stat sb;
    batch_module *b = NULL;
    if (cache_path(d, keys[i], dir, sizeof dir, path, sizeof path) && stat(path, &sb) == 0) {
      for (int f = 0; f < nm && !b; f++)
        if (mods[f].dev == sb.st_dev && mods[f].ino == sb.st_ino) b = &mods[f];
      if (!b) {
        size_t size = 0;
        void *cubin = lathe_cuda_read_file(path, &size);
        lcuModule mod = NULL;
        if (cubin && d->cu->api->cuModuleLoadData(&mod, cubin) == LCU_SUCCESS) {
          mods[nm] = (batch_module){.mod = mod, .dev = sb.st_dev, .ino = sb.st_ino};
          b = &mods[nm++];
        }
        free(cubin); /* unreadable or damaged: compiled below */
      }
    }
    if (!b || !take(d, b, sources[i], keys[i], names[i], &out[i])) todo[left++] = i;
  }
  if (!st && left >= 2) { /* the rest as one program (one alone is compiled as itself, below) */
    for (int t = 0; t < left; t++) v[t] = sources[todo[t]];
    char *text = lathe_cuda_batch_text(left, v, prefix);
    uint64_t bkey = text ? source_key(text, strlen(text)) : 0;
    lcuModule mod = NULL;
    lathe_status_t cs = text ? load_module(d, text, bkey, &mod) : LATHE_OOM("lathe:cuda: compile");
    if (cs) mod = NULL;
    lathe_status_free(cs); /* a batch that fails is compiled member by member below, each with its own error */
    if (mod) {
      mods[nm] = (batch_module){.mod = mod};
      batch_module *b = &mods[nm++];
      bool linked = cache_path(d, bkey, dir, sizeof dir, bpath, sizeof bpath);
      for (int t = 0; t < left; t++) {
        int i = todo[t];
        if (linked && cache_path(d, keys[i], dir, sizeof dir, path, sizeof path)) link_member(bpath, path);
        take(d, b, sources[i], keys[i], names[i], &out[i]);
      }
    }
    free(text);
  }
  for (int f = 0; f < nm; f++) /* modules no member entered (all there already) */
    if (!mods[f].owned) d->cu->api->cuModuleUnload(mods[f].mod);
  for (int i = 0; !st && i < n; i++) /* the rest: in the table by now, or compiled alone */
    if (!out[i]) st = lathe_cuda_kernel(d, sources[i], names[i], &out[i]);
  free(todo);
  free(keys);
  free(mods);
  free(v);
  return st;
}

/* ---- memoized texts (cuda.h): an open-addressed table under a lock, never shrunk; entries live
 * as long as the process ---- */
enum { MEMO_KEY = 32 };
typedef struct memo_entry {
  lathe_cuda_text_maker make;
  size_t n;
  unsigned char key[MEMO_KEY];
  char *text;
} memo_entry;
static pthread_mutex_t memo_mu = PTHREAD_MUTEX_INITIALIZER;
static memo_entry *memo;
static size_t memo_cap, memo_n;

static memo_entry *memo_slot(memo_entry *t, size_t cap, lathe_cuda_text_maker make, const void *key, size_t n) {
  uint64_t h = fnv(fnv(1469598103934665603ull, &make, sizeof make), key, n);
  for (size_t i = h & (cap - 1);; i = (i + 1) & (cap - 1))
    if (!t[i].text || (t[i].make == make && t[i].n == n && !memcmp(t[i].key, key, n))) return &t[i];
}

const char *lathe_cuda_memo_text(lathe_cuda_text_maker make, const void *key, size_t n) {
  if (n > MEMO_KEY) return NULL;
  pthread_mutex_lock(&memo_mu);
  memo_entry *e = memo_cap ? memo_slot(memo, memo_cap, make, key, n) : NULL;
  if (e && e->text) {
    pthread_mutex_unlock(&memo_mu);
    return e->text;
  }
  if (2 * (memo_n + 1) > memo_cap) { /* grow, then find the slot again */
    size_t cap = memo_cap ? 2 * memo_cap : 64;
    memo_entry *t = calloc(cap, sizeof *t);
    if (!t) {
      pthread_mutex_unlock(&memo_mu);
      return NULL;
    }
    for (size_t i = 0; i < memo_cap; i++)
      if (memo[i].text) *memo_slot(t, cap, memo[i].make, memo[i].key, memo[i].n) = memo[i];
    free(memo);
    memo = t, memo_cap = cap;
    e = memo_slot(memo, memo_cap, make, key, n);
  }
  char *text = make(key, n); /* under the lock: a text is made once, and this happens once per key */
  if (text) {
    e->make = make, e->n = n, e->text = text;
    memcpy(e->key, key, n);
    memo_n++;
  }
  pthread_mutex_unlock(&memo_mu);
  return text;
}

/* ---- growing kernel sources (cuda.h) ---- */
void lt_put(lt_text *t, const char *fmt, ...) {
  if (t->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(t->s ? t->s + t->n : NULL, t->s ? t->cap - t->n : 0, fmt, ap);
    va_end(ap);
    if (k < 0) {
      t->oom = true;
      return;
    }
    if (t->s && t->n + (size_t)k < t->cap) {
      t->n += (size_t)k;
      return;
    }
    size_t nc = (t->cap ? t->cap * 2 : 8192) + (size_t)k;
    char *ns = realloc(t->s, nc);
    if (!ns) {
      t->oom = true;
      return;
    }
    t->s = ns;
    t->cap = nc;
  }
}
