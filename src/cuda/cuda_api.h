/* cuda_api.h -- the parts of the CUDA driver, NVRTC, cuBLASLt, cuFFT, NCCL and cuDNN APIs lathe calls, declared
 * here so that lathe builds with no CUDA SDK: the libraries are opened with dlopen at run time
 * (loader.c). Names carry an `lcu` prefix so that this header can sit beside NVIDIA's own headers
 * in abi_check.c, which checks every value below against them where the SDK exists. */
#ifndef LATHE_CUDA_API_H
#define LATHE_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

/* ---- driver API ---- */
typedef int lcuResult;
typedef int lcuDevice;
typedef struct lcuCtx_st *lcuContext;
typedef struct lcuStream_st *lcuStream;
typedef struct lcuEvent_st *lcuEvent;
typedef struct lcuMod_st *lcuModule;
typedef struct lcuFunc_st *lcuFunction;
typedef struct lcuGraph_st *lcuGraph;
typedef struct lcuGraphExec_st *lcuGraphExec;
typedef unsigned long long lcuDeviceptr;
typedef void (*lcuHostFn)(void *user_data);
/* CUDA_MEMCPY2D (v2): a pitched copy of Height rows of WidthInBytes (collectives rearrange blocks
 * with it); memory types LCU_MEMORYTYPE_* */
typedef struct lcuMemcpy2D {
  size_t srcXInBytes, srcY;
  int srcMemoryType;
  const void *srcHost;
  lcuDeviceptr srcDevice;
  void *srcArray;
  size_t srcPitch;
  size_t dstXInBytes, dstY;
  int dstMemoryType;
  void *dstHost;
  lcuDeviceptr dstDevice;
  void *dstArray;
  size_t dstPitch;
  size_t WidthInBytes, Height;
} lcuMemcpy2D;
enum { LCU_MEMORYTYPE_DEVICE = 2 };

enum {
  LCU_SUCCESS = 0,
  LCU_ERROR_OUT_OF_MEMORY = 2,
  LCU_ERROR_NOT_INITIALIZED = 3,
  LCU_ERROR_NO_DEVICE = 100,
  LCU_ERROR_NOT_READY = 600,
};

enum {
  LCU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  LCU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  LCU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  LCU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  LCU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  LCU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};

enum {
  LCU_STREAM_NON_BLOCKING = 0x1,
  LCU_EVENT_DISABLE_TIMING = 0x2,
  LCU_MEMHOSTALLOC_PORTABLE = 0x1,
  LCU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  LCU_GET_PROC_ADDRESS_DEFAULT = 0,
  LCU_STREAM_CAPTURE_MODE_RELAXED = 2,
};

/* The driver API version whose entry points cuGetProcAddress pins (CUDA 12.0). */
#define LCU_API_VERSION 12000

/* ---- NVRTC ---- */
typedef int lnvrtcResult;
typedef struct lnvrtcProgram_st *lnvrtcProgram;
enum { LNVRTC_SUCCESS = 0 };

/* ---- cuBLASLt ---- */
typedef int lcublasStatus;
typedef struct lcublasLtContext *lcublasLtHandle;
typedef struct lcublasLtMatmulDescOpaque *lcublasLtMatmulDesc;
typedef struct lcublasLtMatrixLayoutOpaque *lcublasLtMatrixLayout;
typedef struct lcublasLtMatmulPreferenceOpaque *lcublasLtMatmulPreference;
typedef struct {
  uint64_t data[8];
} lcublasLtMatmulAlgo;
typedef struct {
  lcublasLtMatmulAlgo algo;
  size_t workspaceSize;
  lcublasStatus state;
  float wavesCount;
  int reserved[4];
} lcublasLtMatmulHeuristicResult;

enum { LCUBLAS_STATUS_SUCCESS = 0, LCUBLAS_STATUS_NOT_SUPPORTED = 15 };
enum { /* cudaDataType_t */
  LCUDA_R_32F = 0,
  LCUDA_R_64F = 1,
  LCUDA_R_16F = 2,
  LCUDA_R_8I = 3,
  LCUDA_C_32F = 4,
  LCUDA_C_64F = 5,
  LCUDA_R_32I = 10,
  LCUDA_R_16BF = 14,
};
enum { /* cublasComputeType_t */
  LCUBLAS_COMPUTE_32F = 68,
  LCUBLAS_COMPUTE_32F_PEDANTIC = 69,
  LCUBLAS_COMPUTE_64F = 70,
  LCUBLAS_COMPUTE_32I = 72,
  LCUBLAS_COMPUTE_32F_FAST_TF32 = 77,
};
enum { LCUBLAS_OP_N = 0, LCUBLAS_OP_T = 1 };
enum { /* cublasLtMatmulDescAttributes_t */
  LCUBLASLT_MATMUL_DESC_TRANSA = 3,
  LCUBLASLT_MATMUL_DESC_TRANSB = 4,
  LCUBLASLT_MATMUL_DESC_EPILOGUE = 7,
  LCUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
};
enum { LCUBLASLT_EPILOGUE_BIAS = 4 }; /* cublasLtEpilogue_t: the bias added to each column of D */
enum { /* cublasLtMatrixLayoutAttribute_t */
  LCUBLASLT_MATRIX_LAYOUT_ORDER = 1,
  LCUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
  LCUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6,
};
enum { LCUBLASLT_ORDER_COL = 0, LCUBLASLT_ORDER_ROW = 1 };
enum { /* cublasLtMatmulPreferenceAttributes_t */
  LCUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
  LCUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  LCUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  LCUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  LCUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};

/* ---- cuFFT ---- */
typedef int lcufftResult;
typedef int lcufftHandle;
enum { LCUFFT_SUCCESS = 0, LCUFFT_ALLOC_FAILED = 2 };
enum { /* cufftType */
  LCUFFT_R2C = 0x2a,
  LCUFFT_C2R = 0x2c,
  LCUFFT_C2C = 0x29,
  LCUFFT_D2Z = 0x6a,
  LCUFFT_Z2D = 0x6c,
  LCUFFT_Z2Z = 0x69,
};
enum { LCUFFT_FORWARD = -1, LCUFFT_INVERSE = 1 };

/* ---- NCCL (the stable 2.x ABI: enums are ints, a communicator a pointer) ---- */
typedef int lncclResult;
typedef struct lncclComm *lncclComm;
enum { LNCCL_SUCCESS = 0 };
enum { /* ncclDataType_t */
  LNCCL_INT8 = 0,
  LNCCL_UINT8 = 1,
  LNCCL_INT32 = 2,
  LNCCL_UINT32 = 3,
  LNCCL_INT64 = 4,
  LNCCL_UINT64 = 5,
  LNCCL_FLOAT16 = 6,
  LNCCL_FLOAT32 = 7,
  LNCCL_FLOAT64 = 8,
  LNCCL_BFLOAT16 = 9, /* NCCL 2.10 and newer */
};
enum { LNCCL_SUM = 0, LNCCL_PROD = 1, LNCCL_MAX = 2, LNCCL_MIN = 3 }; /* ncclRedOp_t */

/* ---- cuDNN 9 (optional: convolutions; the legacy convolution API, still in cuDNN 9) ---- */
typedef int lcudnnStatus;
typedef struct lcudnnContext *lcudnnHandle;
typedef struct lcudnnTensorStruct *lcudnnTensorDesc;
typedef struct lcudnnFilterStruct *lcudnnFilterDesc;
typedef struct lcudnnConvolutionStruct *lcudnnConvDesc;
typedef void *lcudnnBackendDesc; /* cudnnBackendDescriptor_t */
typedef struct { /* cudnnConvolutionFwdAlgoPerf_t and cudnnConvolutionBwdFilterAlgoPerf_t */
  int algo;
  lcudnnStatus status;
  float time; /* ms */
  size_t memory;
  int determinism;
  int mathType;
  int reserved[3];
} lcudnnAlgoPerf;
enum { LCUDNN_STATUS_SUCCESS = 0 };
enum { LCUDNN_DATA_FLOAT = 0, LCUDNN_DATA_DOUBLE = 1, LCUDNN_DATA_HALF = 2, LCUDNN_DATA_BFLOAT16 = 9 };
enum { LCUDNN_TENSOR_NCHW = 0, LCUDNN_TENSOR_NHWC = 1 };
enum { LCUDNN_DEFAULT_MATH = 0, LCUDNN_TENSOR_OP_MATH = 1, LCUDNN_FMA_MATH = 3 };
enum { LCUDNN_CROSS_CORRELATION = 1 };

/* ---- the symbol table: one function pointer per entry of cuda_symbols.def ---- */
#define LATHE_CU_SYM(lib, ret, name, params) typedef ret(*lcu_pfn_##name) params;
#include "cuda_symbols.def"
#undef LATHE_CU_SYM

typedef struct lcu_api {
#define LATHE_CU_SYM(lib, ret, name, params) lcu_pfn_##name name;
#include "cuda_symbols.def"
#undef LATHE_CU_SYM
} lcu_api;

#endif
