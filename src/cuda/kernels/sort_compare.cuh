struct lt_cmp_less {
  lt_sort_ops o;
  lt_sort_caps c;
  int64_t m, inner;
  LT_M bool lt(int64_t row, const uint64_t *, const int32_t *p, int64_t a, int64_t b) const {
    int64_t ia = p[a], ib = p[b];
    if (ia >= m || ib >= m) return ia < ib;
    int64_t base = (row / inner) * m * inner + row % inner, ea = base + ia * inner, eb = base + ib * inner;
    if (lt_user_less(o, c, ea, eb)) return true;
    if (lt_user_less(o, c, eb, ea)) return false;
    return ia < ib;
  }
};
LT_DEV lt_cmp_less lt_make_cmp(const lt_sort_ops &o, const lt_sort_caps &c, int64_t m, int64_t inner) {
  lt_cmp_less l; l.o = o; l.c = c; l.m = m; l.inner = inner; return l;
}
LT_SORT_KERNELS(cmp, lt_cmp_less, false, lt_make_cmp(o, c, m, inner))
