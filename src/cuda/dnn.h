/* dnn.h -- cuDNN's graph (backend) API as lathe uses it: the constants of cudnn_graph.h it needs
 * (lathe builds without cuDNN's headers and opens the library at run time) and the parts that
 * convolutions (cudnn.c) and attention (cudnn_sdpa.c) share. */
#ifndef LATHE_CUDA_DNN_H
#define LATHE_CUDA_DNN_H

#include "gemm.h"

enum { /* cudnn_graph.h's values */
  G_T_HANDLE = 0, G_T_DATA_TYPE = 1, G_T_BOOLEAN = 2, G_T_INT64 = 3, G_T_FLOAT = 4, G_T_DOUBLE = 5, G_T_VOID_PTR = 6,
  G_T_CONV_MODE = 7, G_T_HEUR_MODE = 8, G_T_NUMERICAL_NOTE = 11, G_T_POINTWISE_MODE = 14, G_T_DESC = 15,
  G_T_REDUCTION_OP = 18, G_T_BEHAVIOR_NOTE = 19,
  G_POINTWISE = 0, G_CONVOLUTION = 1, G_ENGINE = 2, G_ENGINECFG = 3, G_ENGINEHEUR = 4, G_PLAN = 5, G_OP_FWD = 10,
  G_OP_BWD_FILTER = 11, G_OP_POINTWISE = 13, G_OPGRAPH = 15, G_VARIANT_PACK = 16, G_TENSOR = 17, G_MATMUL = 18,
  G_OP_MATMUL = 19, G_REDUCTION = 21, G_OP_REDUCTION = 22, G_OP_RESHAPE = 31,
  A_PW_MODE = 0, A_PW_MATH_PREC = 1, A_PW_AXIS = 9,
  A_CONV_COMP_TYPE = 100, A_CONV_MODE = 101, A_CONV_DILATIONS = 102, A_CONV_STRIDES = 103, A_CONV_POST_PAD = 104,
  A_CONV_PRE_PAD = 105, A_CONV_SPATIAL_DIMS = 106,
  A_HEUR_MODE = 200, A_HEUR_GRAPH = 201, A_HEUR_RESULTS = 202, A_CFG_ENGINE = 300,
  A_PLAN_HANDLE = 400, A_PLAN_CFG = 401, A_PLAN_WORKSPACE = 402,
  A_FWD_ALPHA = 700, A_FWD_BETA = 701, A_FWD_CONV = 702, A_FWD_W = 703, A_FWD_X = 704, A_FWD_Y = 705,
  A_BWF_ALPHA = 712, A_BWF_BETA = 713, A_BWF_CONV = 714, A_BWF_DW = 715, A_BWF_X = 716, A_BWF_DY = 717,
  A_OPPW_DESC = 750, A_OPPW_X = 751, A_OPPW_B = 752, A_OPPW_Y = 753, A_OPPW_T = 758,
  A_GRAPH_HANDLE = 800, A_GRAPH_OPS = 801,
  A_T_ALIGN = 900, A_T_DATA_TYPE = 901, A_T_DIMS = 902, A_T_STRIDES = 903, A_T_UID = 906, A_T_VIRTUAL = 907,
  A_T_BY_VALUE = 908,
  A_VP_UIDS = 1000, A_VP_PTRS = 1001, A_VP_WORKSPACE = 1003,
  A_ENGINE_INDEX = 1301, A_ENGINE_NUMERICAL = 1303, A_ENGINE_BEHAVIOR = 1305,
  A_MM_COMP_TYPE = 1500, A_OPMM_A = 1520, A_OPMM_B = 1521, A_OPMM_C = 1522, A_OPMM_DESC = 1523,
  A_RED_OPERATOR = 1600, A_RED_COMP_TYPE = 1601, A_OPRED_X = 1610, A_OPRED_Y = 1611, A_OPRED_DESC = 1612,
  A_RESHAPE_X = 2200, A_RESHAPE_Y = 2201,
  HEUR_MODE_A = 3, NOTE_TENSOR_CORE = 0, NOTE_DOWN_CONVERT = 1, NOTE_REDUCED_REDUCTION = 2, BEHAVIOR_RUNTIME_COMPILATION = 0,
  PW_ADD = 0, PW_MUL = 1, PW_DIV = 6, PW_SUB = 9, PW_EXP = 13, PW_LOG = 15, PW_IDENTITY = 21, PW_CMP_GE = 303,
  PW_GEN_INDEX = 501, PW_BINARY_SELECT = 601,
  RED_ADD = 0, RED_MAX = 3,
  DNN_INT32 = 4, DNN_BOOLEAN = 11,
};

/* cuDNN's workspace while measuring and running (a plan that needs more is not chosen) */
#define LATHE_DNN_WS_MAX ((size_t)256 << 20)

/* The device's handle, made once (with the convolutions' choices on disk); false when cuDNN is
 * missing or refuses (then never again). */
bool lathe_cuda_dnn_ready(cuda_dev *d);
/* The heuristics' (mode A) engine configurations of the finalized operation graph, best first:
 * *n of at most cap in cfg, which this makes (the caller destroys every one of the cap). */
lcudnnStatus lathe_cuda_dnn_configs(const lcu_api *api, lcudnnBackendDesc graph, lcudnnBackendDesc *cfg, int cap,
                                    int64_t *n);
/* Configuration cfg finalized as an execution plan on d's handle (*plan, the caller's), with its
 * workspace in bytes; refused (nonzero) where that is over LATHE_DNN_WS_MAX. */
lcudnnStatus lathe_cuda_dnn_plan(cuda_dev *d, lcudnnBackendDesc cfg, lcudnnBackendDesc *plan, int64_t *ws);
/* Runs plan on ex's stream: tensor uids[i] at ptrs[i] (a device pointer; a host one for a
 * by-value scalar), workspace ws. */
lcudnnStatus lathe_cuda_dnn_execute(lathe_cuda_exec *ex, lcudnnBackendDesc plan, int n, const int64_t *uids, void **ptrs,
                                    lcuDeviceptr ws);
/* GPU time of one run of fn (the mean of reps, after an untimed one, which compiles kernels or
 * warms cuDNN's engine). */
lathe_status_t lathe_cuda_time_runs(lathe_cuda_exec *ex, lathe_status_t (*fn)(void *), void *ctx, int reps, float *ms);

#endif
