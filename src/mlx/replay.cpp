/* replay.cpp -- plans and the interpreter: a program's functions replayed step by step as MLX
 * calls over value slots (src/graph/program.h).
 *
 * mlx (compiled): each function is cut into segments at the steps that need a value on the host
 * -- While (its predicate), If (its predicate), DynamicReshape sized by values -- and at steps
 * with an empty operand or result (run outside compile: MLX's CUDA fused kernels crash on empty
 * arrays); every run of other steps becomes one mx::compile'd function, traced on first use and
 * again for each new input shape; MLX fuses elementwise work inside it. Host steps run between segments, and the
 * functions they call run the same way.
 * On a GPU device, steps that MLX computes only on the CPU (Float64, 8-byte scatters: cpu_step)
 * run on its CPU stream, outside compile.
 * mlx:dynamic: the steps are replayed on each run's arrays (MLX's lazy graph, evaluated once at
 * the end), so programs keep their dynamic axes and one plan serves every binding.
 * Constants become arrays once, at compile. Call inlines its callee; Sort sorts by keys when
 * its comparator is a plain ascending or descending comparison (the only comparators lowered). */
#include <cstring>

#include "mlx.h"

namespace lathe_mlx {

struct Segment {
  int begin, end; /* steps [begin, end) */
  bool host;      /* one host step, run by the interpreter */
  std::vector<int> ins, outs;
  std::function<Arrays(const Arrays &)> fn; /* the compiled steps */
};

struct FnPlan {
  const lathe_pfunc *pf = nullptr;
  std::vector<std::optional<mx::array>> consts; /* by slot */
  std::vector<bool> host;                       /* by step */
  std::vector<bool> on_cpu;                     /* by step: cpu_step (a GPU device's Float64 work) */
  std::vector<Segment> segs;
};

struct Plan {
  Options opt;
  Options cpu_opt; /* opt as a CPU device: the lowerings of on_cpu steps compute as on the CPU */
  std::optional<mx::Stream> cpu_stream; /* the context's, where on_cpu steps run */
  const lathe_program *prog;
  std::vector<FnPlan> fns;
};

namespace {

/* The frame of one function call: one array per slot. */
typedef std::vector<std::optional<mx::array>> Frame;

struct Run {
  Plan &p;
  Env env;
  bool tracing; /* inside an mx::compile trace: callees are inlined, not compiled again */
};

Arrays call_fn(Run &r, int fi, const Arrays &args);

/* The captured values for sub-function k of step s, from its hidden inputs. */
Arrays captures(const Run &r, const lathe_pstep &s, int k, const Frame &f) {
  const lathe_pfunc *sub = &r.p.prog->fns[s.sub_fn[k]];
  Arrays c;
  for (int i = 0; i < sub->n_params - sub->n_declared; i++) c.push_back(*f[(size_t)s.in[s.sub_cap[k] + i]]);
  return c;
}

Arrays concat(Arrays a, const Arrays &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

bool host_bool(const mx::array &x) {
  mx::array b = mx::astype(x, mx::bool_);
  mx::eval(b);
  return b.item<bool>();
}

/* Sort by keys: the first operand ordered by lathe:cpu's native keys (the requested order as
 * unsigned order; plain comparisons put NaN last and treat -0 as +0), stably. */
Arrays sort(const lathe_node *n, const Arrays &in) {
  bool desc = false, total = false;
  lathe_sort_comparator_order(n, &desc, &total);
  int axis = (int)lathe_attr_sort_axis(n);
  const mx::array &x = in[0];
  if (x.ndim() == 0 || x.shape(axis) <= 1 || x.size() == 0) return in;
  mx::Dtype ut = uint_of(x.dtype());
  int bits = (int)ut.size() * 8;
  mx::array top = scalar_u(UINT64_C(1) << (bits - 1), ut);
  mx::array key = mx::astype(x, ut); /* Bool and unsigned */
  if (mx::issubdtype(x.dtype(), mx::floating)) {
    mx::array v = total ? x : mx::where(mx::equal(x, scalar_i(0, x.dtype())), scalar_i(0, x.dtype()), x);
    mx::array b = mx::view(v, ut);
    key = mx::where(mx::greater_equal(b, top), mx::bitwise_invert(b), mx::bitwise_or(b, top));
    if (!total) key = mx::where(mx::isnan(x), scalar_u(UINT64_MAX, ut), key);
  } else if (mx::issubdtype(x.dtype(), mx::signedinteger)) {
    key = mx::bitwise_xor(mx::view(x, ut), top);
  }
  if (desc) key = mx::bitwise_invert(key);
  mx::array perm = mx::argsort(key, axis); /* stable */
  Arrays out;
  for (const auto &a : in) out.push_back(mx::take_along_axis(a, perm, axis));
  return out;
}

void run_step_(Run &r, int fi, Frame &f, int i);

/* Runs step i of function fi in frame f; what MLX rejects names the step. */
void run_step(Run &r, int fi, Frame &f, int i) {
  try {
    run_step_(r, fi, f, i);
  } catch (const std::invalid_argument &e) {
    const FnPlan &fp = r.p.fns[(size_t)fi];
    const lathe_node *n = fp.pf->steps[i].node;
    std::string ins;
    for (int k = 0; k < n->n_operands; k++) ins += std::string(k ? ", " : "") + lathe_dtype_name(n->in[k]->shape.dtype);
    throw std::invalid_argument(std::string(lathe_op_name(n->op)) + " (node " + std::to_string(n->id) + ", operands " +
                                ins + (fp.on_cpu[(size_t)i] ? ", on the CPU stream" : "") + "): " + e.what());
  }
}

void run_step_(Run &r, int fi, Frame &f, int i) {
  const FnPlan &fp = r.p.fns[(size_t)fi];
  const lathe_pstep &s = fp.pf->steps[i];
  const lathe_node *n = s.node;
  Arrays in;
  for (int k = 0; k < n->n_operands; k++) in.push_back(*f[(size_t)s.in[k]]);
  Arrays out;
  switch (n->op) {
    case LATHE_OP_CALL:
      out = call_fn(r, s.sub_fn[0], concat(in, captures(r, s, 0, f)));
      break;
    case LATHE_OP_WHILE: { /* the predicate is read on the host each iteration */
      Arrays state = in, cc = captures(r, s, 0, f), bc = captures(r, s, 1, f);
      for (;;) {
        Arrays c = call_fn(r, s.sub_fn[0], concat(state, cc));
        Arrays all = state;
        all.push_back(mx::astype(c[0], mx::bool_));
        eval_arrays(all, r.p.cpu_stream); /* the state too, so the lazy graph does not grow with the iterations */
        if (!all.back().item<bool>()) break;
        state = call_fn(r, s.sub_fn[1], concat(state, bc));
      }
      out = state;
      break;
    }
    case LATHE_OP_IF: {
      int k = host_bool(in[0]) ? 0 : 1;
      out = call_fn(r, s.sub_fn[k], captures(r, s, k, f));
      break;
    }
    default: {
      Env env = r.env;
      std::optional<mx::StreamContext> on; /* on MLX's CPU stream, then back to the device's */
      if (fp.on_cpu[(size_t)i]) on.emplace(*r.p.cpu_stream), env.opt = &r.p.cpu_opt;
      out = n->op == LATHE_OP_SORT ? sort(n, in) : lower(env, n, in);
      break;
    }
  }
  if ((int)out.size() != s.n_out)
    MLX_INTERNAL("mlx: %s gave %zu results, the program expects %d", lathe_op_name(n->op), out.size(), s.n_out);
  /* An empty result needs no kernel: MLX's CUDA kernels divide by or index into empty sizes
   * (crashes seen on the H200), so it becomes an empty array that is already evaluated. */
  for (auto &o : out)
    if (o.size() == 0 && o.has_primitive()) o = array_from_bytes(nullptr, 0, o.shape(), o.dtype());
  for (int k = 0; k < s.n_out; k++) f[(size_t)s.out[k]] = out[(size_t)k];
  for (int k = 0; k < s.n_dead; k++) /* drop what no later step reads (it may still be an output) */
    if (fp.pf->slots[s.dead[k]].last_use < fp.pf->n_steps) f[(size_t)s.dead[k]].reset();
}

Frame frame_of(const Run &r, int fi, const Arrays &args) {
  const FnPlan &fp = r.p.fns[(size_t)fi];
  const lathe_pfunc *pf = fp.pf;
  if ((int)args.size() != pf->n_params)
    MLX_INTERNAL("mlx: function called with %zu arguments, it takes %d", args.size(), pf->n_params);
  Frame f((size_t)pf->n_slots);
  for (int i = 0; i < pf->n_params; i++) f[(size_t)pf->params[i]] = args[(size_t)i];
  for (int i = 0; i < pf->n_slots; i++)
    if (fp.consts[(size_t)i]) f[(size_t)i] = fp.consts[(size_t)i];
  return f;
}

Arrays outputs_of(const lathe_pfunc *pf, const Frame &f) {
  Arrays o;
  for (int k = 0; k < pf->n_outputs; k++) {
    const auto &v = f[(size_t)pf->outputs[k]];
    if (!v) MLX_INTERNAL("mlx: output %d of a function was never computed", k);
    o.push_back(*v);
  }
  return o;
}

Arrays call_fn(Run &r, int fi, const Arrays &args) {
  FnPlan &fp = r.p.fns[(size_t)fi];
  Frame f = frame_of(r, fi, args);
  if (!r.p.opt.compiled || r.tracing) {
    for (int i = 0; i < fp.pf->n_steps; i++) run_step(r, fi, f, i);
    return outputs_of(fp.pf, f);
  }
  for (Segment &sg : fp.segs) {
    if (sg.host) {
      run_step(r, fi, f, sg.begin);
      continue;
    }
    Arrays ins;
    for (int s : sg.ins) ins.push_back(*f[(size_t)s]);
    Arrays outs = sg.fn(ins);
    for (size_t k = 0; k < sg.outs.size(); k++) f[(size_t)sg.outs[k]] = outs[k];
  }
  return outputs_of(fp.pf, f);
}

/* Whether a slot holds no elements (a dynamic axis counts as non-empty: the count is -1). */
bool empty_slot(const lathe_pfunc *pf, int sl) { return lathe_shape_num_elements(&pf->slots[sl].shape) == 0; }

/* Whether step s must run outside mx::compile (besides running on a GPU device's CPU stream,
 * on_cpu: compile fuses for one device): it reads a value on the host (directly or in what it
 * calls), or it has an empty operand or result. MLX's CUDA fused kernels (Compiled) crash on empty arrays,
 * and a lowering of several MLX ops can make empty intermediates that compile would fuse;
 * outside compile MLX's own kernels skip them. */
bool needs_host(const Plan &p, const lathe_pfunc *pf, const lathe_pstep &s) {
  for (int k = 0; k < s.n_in; k++)
    if (empty_slot(pf, s.in[k])) return true;
  for (int k = 0; k < s.n_out; k++)
    if (empty_slot(pf, s.out[k])) return true;
  const lathe_node *n = s.node;
  if (n->op == LATHE_OP_WHILE || n->op == LATHE_OP_IF) return true;
  if (n->op == LATHE_OP_DYNAMIC_RESHAPE) return n->n_operands > 1;
  if (n->op == LATHE_OP_CALL) {
    const FnPlan &sub = p.fns[(size_t)s.sub_fn[0]];
    for (bool h : sub.host)
      if (h) return true;
  }
  return false;
}

/* Cuts function fi into compiled segments and host steps (callees first: program order puts
 * sub-functions after their callers, so they are planned on demand). */
void segment(Plan &p, int fi, std::vector<int> &state) {
  if (state[(size_t)fi] == 2) return;
  if (state[(size_t)fi] == 1) MLX_INTERNAL("mlx: recursive function calls");
  state[(size_t)fi] = 1;
  FnPlan &fp = p.fns[(size_t)fi];
  const lathe_pfunc *pf = fp.pf;
  for (int i = 0; i < pf->n_steps; i++)
    for (int k = 0; k < pf->steps[i].n_sub; k++) segment(p, pf->steps[i].sub_fn[k], state);
  fp.host.assign((size_t)pf->n_steps, false);
  fp.on_cpu.assign((size_t)pf->n_steps, false);
  for (int i = 0; i < pf->n_steps; i++) {
    fp.on_cpu[(size_t)i] = cpu_step(pf->steps[i].node, p.opt);
    fp.host[(size_t)i] = fp.on_cpu[(size_t)i] || needs_host(p, pf, pf->steps[i]);
  }
  if (p.opt.compiled) {
    for (int i = 0; i < pf->n_steps;) {
      Segment sg;
      sg.begin = i;
      sg.host = fp.host[(size_t)i];
      if (sg.host) i++;
      else
        while (i < pf->n_steps && !fp.host[(size_t)i]) i++;
      sg.end = i;
      if (!sg.host) {
        /* inputs: slots read inside but defined before (constants are captured); outputs:
         * slots defined inside and read after, or returned */
        std::vector<bool> seen((size_t)pf->n_slots, false);
        for (int j = sg.begin; j < sg.end; j++) {
          const lathe_pstep &s = pf->steps[j];
          for (int k = 0; k < s.n_in; k++) {
            int sl = s.in[k];
            const lathe_pslot &ps = pf->slots[sl];
            if (ps.kind == LATHE_PSLOT_CONST || seen[(size_t)sl] || (ps.kind == LATHE_PSLOT_VALUE && ps.def >= sg.begin))
              continue;
            seen[(size_t)sl] = true;
            sg.ins.push_back(sl);
          }
          for (int k = 0; k < s.n_out; k++)
            if (pf->slots[s.out[k]].last_use >= sg.end) sg.outs.push_back(s.out[k]);
        }
        if (sg.outs.empty()) continue; /* nothing of it is used */
        Plan *pp = &p;
        Segment copy = sg;
        auto body = [pp, fi, copy](const Arrays &ins) {
          Run r{*pp, Env{&pp->opt, nullptr}, true};
          const FnPlan &fp2 = pp->fns[(size_t)fi];
          Frame f((size_t)fp2.pf->n_slots);
          for (int i2 = 0; i2 < fp2.pf->n_slots; i2++)
            if (fp2.consts[(size_t)i2]) f[(size_t)i2] = fp2.consts[(size_t)i2];
          for (size_t k = 0; k < copy.ins.size(); k++) f[(size_t)copy.ins[k]] = ins[k];
          for (int j = copy.begin; j < copy.end; j++) run_step(r, fi, f, j);
          Arrays o;
          for (int sl : copy.outs) o.push_back(*f[(size_t)sl]);
          return o;
        };
        sg.fn = mx::compile(std::function<Arrays(const Arrays &)>(body));
      }
      fp.segs.push_back(std::move(sg));
    }
  }
  state[(size_t)fi] = 2;
}

}  // namespace

Plan *plan_new(const Context &ctx, const lathe_program *prog) {
  auto p = std::make_unique<Plan>();
  p->opt = ctx.opt;
  p->cpu_opt = ctx.opt;
  p->cpu_opt.gpu = false;
  p->cpu_stream = ctx.cpu_stream;
  p->prog = prog;
  p->fns.resize((size_t)prog->n_fns);
  for (int fi = 0; fi < prog->n_fns; fi++) {
    FnPlan &fp = p->fns[(size_t)fi];
    const lathe_pfunc *pf = &prog->fns[fi];
    fp.pf = pf;
    fp.consts.resize((size_t)pf->n_slots);
    for (int i = 0; i < pf->n_slots; i++) {
      const lathe_pslot &s = pf->slots[i];
      check_node(s.node, ctx.opt);
      if (s.kind != LATHE_PSLOT_CONST) continue;
      lathe_bytes b = lathe_attr_constant_value(s.node);
      fp.consts[(size_t)i].emplace(array_from_bytes(b.data, b.size, mx_shape(s.shape.dims, s.shape.rank), mx_dtype(s.shape.dtype)));
    }
    for (int i = 0; i < pf->n_steps; i++) {
      const lathe_node *n = pf->steps[i].node;
      check_node(n, ctx.opt);
      bool desc, total;
      if (n->op == LATHE_OP_SORT && !lathe_sort_comparator_order(n, &desc, &total))
        MLX_UNIMPL("Sort: mlx sorts only with comparators that are a plain ascending or descending comparison of "
                   "the first operand (LessThan / GreaterThan, or their TotalOrder forms)");
      if (pf->steps[i].region >= 0) MLX_INTERNAL("mlx: the program has fusion regions, which mlx does not ask for");
    }
  }
  std::vector<int> state((size_t)prog->n_fns, 0);
  for (int fi = 0; fi < prog->n_fns; fi++) segment(*p, fi, state);
  return p.release();
}

void plan_free(Plan *p) { delete p; }

Arrays plan_run(Plan *p, const Arrays &args, Binding &bind) {
  const lathe_pfunc *main = lathe_program_main(p->prog);
  /* dynamic axes of the parameters bind to the inputs' sizes */
  for (int i = 0; i < main->n_declared; i++) {
    const lathe_shape &s = main->slots[main->params[i]].shape;
    for (int k = 0; k < s.rank; k++)
      if (s.dims[k] < 0) bind.set(s.axis_names[k], args[(size_t)i].shape(k));
  }
  Run r{*p, Env{&p->opt, &bind}, false};
  Arrays out = call_fn(r, 0, args);
  for (int k = 0; k < main->n_outputs; k++) { /* a lowering that disagrees with shape inference is a bug */
    const lathe_shape &s = main->slots[main->outputs[k]].shape;
    const mx::array &a = out[(size_t)k];
    bool ok = a.dtype() == mx_dtype(s.dtype) && (int)a.ndim() == s.rank;
    for (int d = 0; ok && d < s.rank; d++) {
      int64_t want = s.dims[d] >= 0 ? s.dims[d] : bind.get(s.axis_names[d]);
      ok = want < 0 || want == a.shape(d);
    }
    if (!ok) {
      char buf[LATHE_SHAPE_STR_MAX];
      MLX_INTERNAL("mlx: output %d has dtype %s and rank %zu where the program expects %s", k,
                   a.dtype() == mx_dtype(s.dtype) ? lathe_dtype_name(s.dtype) : "another", a.ndim(),
                   lathe_shape_str(&s, buf, sizeof buf));
    }
  }
  return out;
}

}  // namespace lathe_mlx
