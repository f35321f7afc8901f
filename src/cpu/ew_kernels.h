/* ew_kernels.h -- the elementwise row kernels of src/graph/ew.def (UNARY, BINARY, COMPARE, SELECT
 * and CONVERT rows) instantiated for every byte-sized dtype of their class, and the initialisers
 * of their tables. Included once per ISA by isa_kernels.h (kernels.h says why); the families
 * (unary.c, binary.c, compare.c, select.c, convert.c) look the rows up in the backend's table. */

/* Rows by kind: one operand, two (BINARY and COMPARE), three (SELECT), and conversions. */
#define EWK_UNARY_DEF(D, OP, RULE, EXPR) \
  LATHE_EW_ROW1(ewk_##OP##_##D, LATHE_EW_MODE_##RULE, D, LATHE_EW_OUT_##RULE(D), EXPR)
#define EWK_BINARY_DEF(D, OP, RULE, EXPR) \
  LATHE_EW_ROW2(ewk_##OP##_##D, LATHE_EW_MODE_##RULE, D, LATHE_EW_OUT_##RULE(D), EXPR)
#define EWK_COMPARE_DEF EWK_BINARY_DEF
/* The first operand's dtype: Where's condition is Bool. */
#define EWK_D0_WHERE(D) BOOL
#define EWK_D0_CLAMP(D) D
#define EWK_SELECT_DEF(D, OP, RULE, EXPR) \
  LATHE_EW_ROW3(ewk_##OP##_##D, LATHE_EW_MODE_##RULE, D, LATHE_EW_OUT_##RULE(D), EWK_D0_##OP(D), EXPR)

#define EWK_ROWS_UNARY(OP, CLASS, RULE, EXPR) LATHE_DD_EACH_##CLASS(EWK_UNARY_DEF, OP, RULE, EXPR)
#define EWK_ROWS_BINARY(OP, CLASS, RULE, EXPR) LATHE_DD_EACH_##CLASS(EWK_BINARY_DEF, OP, RULE, EXPR)
#define EWK_ROWS_COMPARE(OP, CLASS, RULE, EXPR) LATHE_DD_EACH_##CLASS(EWK_COMPARE_DEF, OP, RULE, EXPR)
#define EWK_ROWS_SELECT(OP, CLASS, RULE, EXPR) LATHE_DD_EACH_##CLASS(EWK_SELECT_DEF, OP, RULE, EXPR)
/* ConvertDType (FROM class, TO_<class>): every source dtype D, then every target dtype OD. */
#define EWK_CV_DEF(OD, D, EXPR) LATHE_EW_CONVERT_ROW(ewk_cv_##D##_##OD, D, OD, EXPR)
#define EWK_CV_EACH_TO(D, RULE, EXPR) LATHE_DD_EACH_##RULE(EWK_CV_DEF, D, EXPR)
#define EWK_ROWS_CONVERT(OP, CLASS, RULE, EXPR) LATHE_DD_EACH_##CLASS(EWK_CV_EACH_TO, RULE, EXPR)

#define LATHE_EW(OP, KIND, CLASS, RULE, EXPR) EWK_ROWS_##KIND(OP, CLASS, RULE, EXPR)
#include "../graph/ew.def"
#undef LATHE_EW

/* Table initialisers: EWK_EW_ENTRIES for lathe_cpu_kernels.ew, EWK_CV_ENTRIES for .cv. */
#define EWK_ENTRY(D, OP, RULE, EXPR) [LATHE_OP_##OP][LATHE_DDI_##D] = ewk_##OP##_##D,
#define EWK_ENTRIES_UNARY(OP, CLASS, RULE, EXPR) LATHE_DD_EACH_##CLASS(EWK_ENTRY, OP, RULE, EXPR)
#define EWK_ENTRIES_BINARY EWK_ENTRIES_UNARY
#define EWK_ENTRIES_COMPARE EWK_ENTRIES_UNARY
#define EWK_ENTRIES_SELECT EWK_ENTRIES_UNARY
#define EWK_ENTRIES_CONVERT(OP, CLASS, RULE, EXPR)
#define EWK_CV_ENTRY(OD, D, EXPR) [LATHE_DDI_##D][LATHE_DDI_##OD] = ewk_cv_##D##_##OD,
#define EWK_CV_EACH_TO_ENTRY(D, RULE, EXPR) LATHE_DD_EACH_##RULE(EWK_CV_ENTRY, D, EXPR)
#define EWK_CV_ENTRIES_UNARY(OP, CLASS, RULE, EXPR)
#define EWK_CV_ENTRIES_BINARY EWK_CV_ENTRIES_UNARY
#define EWK_CV_ENTRIES_COMPARE EWK_CV_ENTRIES_UNARY
#define EWK_CV_ENTRIES_SELECT EWK_CV_ENTRIES_UNARY
#define EWK_CV_ENTRIES_CONVERT(OP, CLASS, RULE, EXPR) LATHE_DD_EACH_##CLASS(EWK_CV_EACH_TO_ENTRY, RULE, EXPR)
