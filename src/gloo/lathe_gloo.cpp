// lathe_gloo.cpp -- liblathe_gloo.so: Gloo's AllReduce, AllGather and AllToAll behind the C interface
// of lathe_gloo.h.
// Rendezvous goes through the job's coordinator (a gloo::rendezvous::Store over the C callbacks),
// transport is Gloo's TCP; Gloo's timeouts and peer errors become returned messages.
#include "lathe_gloo.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

void put(char *err, size_t cap, const std::string &msg) {
  if (cap) std::snprintf(err, cap, "%s", msg.c_str());
}

class CoordStore : public gloo::rendezvous::Store {
 public:
  explicit CoordStore(const lathe_gloo_store &s) : s_(s) {}
  void set(const std::string &key, const std::vector<char> &data) override {
    char err[512] = {0};
    if (s_.set(s_.ctx, key.c_str(), data.data(), data.size(), err, sizeof err)) throw std::runtime_error(err);
  }
  std::vector<char> get(const std::string &key) override {
    char err[512] = {0};
    void *v = nullptr;
    size_t n = 0;
    if (s_.get(s_.ctx, key.c_str(), &v, &n, err, sizeof err)) throw std::runtime_error(err);
    std::vector<char> out(static_cast<char *>(v), static_cast<char *>(v) + n);
    std::free(v);
    return out;
  }
  // get waits for its key (with the job's timeout): waiting is getting
  void wait(const std::vector<std::string> &keys) override {
    for (const auto &k : keys) (void)get(k);
  }
  void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &) override { wait(keys); }

 private:
  lathe_gloo_store s_;
};

template <size_t N> struct Elem { unsigned char b[N]; };

template <size_t N>
void run(const std::shared_ptr<gloo::Context> &ctx, void *buf, size_t count, lathe_gloo_reduce_fn fn, void *fn_ctx,
         uint32_t tag) {
  gloo::AllreduceOptions opts(ctx);
  Elem<N> *p = static_cast<Elem<N> *>(buf);
  opts.setInput(p, count);
  opts.setOutput(p, count);
  opts.setTag(tag);
  opts.setReduceFunction([fn, fn_ctx](void *c, const void *a, const void *b, size_t n) { fn(fn_ctx, c, a, b, n); });
  gloo::allreduce(opts);
}

// Gloo's exceptions become messages; f runs the operation.
template <typename F>
int guarded(char *err, size_t cap, F f) {
  try {
    f();
    return 0;
  } catch (const std::exception &e) {
    put(err, cap, e.what());
  } catch (...) {
    put(err, cap, "unknown exception from Gloo");
  }
  return 1;
}

}  // namespace

struct lathe_gloo_context {
  std::shared_ptr<gloo::transport::Device> dev;
  std::shared_ptr<gloo::rendezvous::Context> ctx;
};

extern "C" int lathe_gloo_abi(void) { return LATHE_GLOO_ABI; }

extern "C" int lathe_gloo_connect(const lathe_gloo_store *store, const char *prefix, const char *host, int rank,
                                  int size, int timeout_ms, lathe_gloo_context **out, char *err, size_t cap) {
  *out = nullptr;
  return guarded(err, cap, [&] {
    std::unique_ptr<lathe_gloo_context> c(new lathe_gloo_context);
    gloo::transport::tcp::attr attr(host);
    c->dev = gloo::transport::tcp::CreateDevice(attr);
    c->ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    c->ctx->setTimeout(std::chrono::milliseconds(timeout_ms));
    CoordStore base(*store);
    gloo::rendezvous::PrefixStore ps(prefix, base);
    c->ctx->connectFullMesh(ps, c->dev);
    *out = c.release();
  });
}

extern "C" int lathe_gloo_all_reduce(lathe_gloo_context *c, void *buf, size_t count, size_t elem_size,
                                     lathe_gloo_reduce_fn fn, void *fn_ctx, uint32_t tag, char *err, size_t cap) {
  if (elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8 && elem_size != 16) {
    put(err, cap, "element size " + std::to_string(elem_size) + " is not supported");
    return 1;
  }
  return guarded(err, cap, [&] {
    switch (elem_size) {
      case 1: run<1>(c->ctx, buf, count, fn, fn_ctx, tag); break;
      case 2: run<2>(c->ctx, buf, count, fn, fn_ctx, tag); break;
      case 4: run<4>(c->ctx, buf, count, fn, fn_ctx, tag); break;
      case 8: run<8>(c->ctx, buf, count, fn, fn_ctx, tag); break;
      default: run<16>(c->ctx, buf, count, fn, fn_ctx, tag); break;
    }
  });
}

extern "C" int lathe_gloo_all_gather(lathe_gloo_context *c, const void *in, void *out, size_t bytes, uint32_t tag,
                                     char *err, size_t cap) {
  return guarded(err, cap, [&] {
    gloo::AllgatherOptions opts(c->ctx);
    // Gloo's buffers are not const, but an input is only read
    opts.setInput(static_cast<char *>(const_cast<void *>(in)), bytes);
    opts.setOutput(static_cast<char *>(out), bytes * static_cast<size_t>(c->ctx->size));
    opts.setTag(tag);
    gloo::allgather(opts);
  });
}

extern "C" int lathe_gloo_all_to_all(lathe_gloo_context *c, const void *in, void *out, size_t bytes, uint32_t tag,
                                     char *err, size_t cap) {
  return guarded(err, cap, [&] {
    gloo::AlltoallOptions opts(c->ctx);
    size_t total = bytes * static_cast<size_t>(c->ctx->size);
    opts.setInput(static_cast<char *>(const_cast<void *>(in)), total);
    opts.setOutput(static_cast<char *>(out), total);
    opts.setTag(tag);
    gloo::alltoall(opts);
  });
}

extern "C" void lathe_gloo_free(lathe_gloo_context *c) {
  try {
    delete c;
  } catch (...) {
  }
}
