// The emulator's cuBLAS (tests/emu): the handle calls ragged makes, and cublasGemmEx and cublasGemmBatchedEx for
// float, half and bfloat16 inputs with float compute, done on the host as a step of the handle's stream.
// Column-major, as cuBLAS; each output sums its k products in order in float. Arguments cuBLAS refuses are
// refused with its status.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cuda_emu.h"

namespace {

struct Handle {
  cudaStream_t stream = nullptr;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
  cublasMath_t math_mode = CUBLAS_DEFAULT_MATH;
};

float element(const void* p, cudaDataType type, std::int64_t i) {
  switch (type) {
    case CUDA_R_32F: return static_cast<const float*>(p)[i];
    case CUDA_R_16F: return __half2float(static_cast<const __half*>(p)[i]);
    case CUDA_R_16BF: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return 0.0f;
  }
}

void store(void* p, cudaDataType type, std::int64_t i, float v) {
  switch (type) {
    case CUDA_R_32F: static_cast<float*>(p)[i] = v; break;
    case CUDA_R_16F: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    case CUDA_R_16BF: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    default: break;
  }
}

bool supported(cudaDataType t) { return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF; }

// What cuBLAS refuses, as its documentation lists: a type or mode outside what the stand-in computes, negative
// sizes, or a leading dimension smaller than the rows of the matrix as stored.
cublasStatus_t check_gemm(const Handle& h, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                          cudaDataType Atype, int lda, cudaDataType Btype, int ldb, cudaDataType Ctype, int ldc,
                          cublasComputeType_t compute) {
  if (!supported(Atype) || !supported(Btype) || !supported(Ctype) ||
      (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_PEDANTIC) ||
      h.pointer_mode != CUBLAS_POINTER_MODE_HOST || transa == CUBLAS_OP_C || transb == CUBLAS_OP_C)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
  const int a_rows = transa == CUBLAS_OP_N ? m : k, b_rows = transb == CUBLAS_OP_N ? k : n;
  if (lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

// C = alpha op(A) op(B) + beta C for one matrix, column-major; each output sums its k products in order in float.
void gemm_on_host(cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, float alpha,
                  const void* A, cudaDataType Atype, int lda, const void* B, cudaDataType Btype, int ldb, float beta,
                  void* C, cudaDataType Ctype, int ldc) {
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t i = 0; i < m; ++i) {
      float acc = 0.0f;
      for (std::int64_t l = 0; l < k; ++l) {
        const float a = element(A, Atype, transa == CUBLAS_OP_N ? i + l * lda : l + i * lda);
        const float b = element(B, Btype, transb == CUBLAS_OP_N ? l + j * ldb : j + l * ldb);
        acc += a * b;
      }
      const std::int64_t at = i + j * static_cast<std::int64_t>(ldc);
      const float old = beta == 0.0f ? 0.0f : element(C, Ctype, at);  // beta = 0 ignores C, NaN included
      store(C, Ctype, at, alpha * acc + beta * old);
    }
}

}  // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  *handle = reinterpret_cast<cublasHandle_t>(new Handle);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  delete reinterpret_cast<Handle*>(handle);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  reinterpret_cast<Handle*>(handle)->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* stream) {
  *stream = reinterpret_cast<Handle*>(handle)->stream;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t, void*, size_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t* mode) {
  *mode = reinterpret_cast<Handle*>(handle)->pointer_mode;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
  reinterpret_cast<Handle*>(handle)->pointer_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  *mode = reinterpret_cast<Handle*>(handle)->math_mode;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  reinterpret_cast<Handle*>(handle)->math_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}
const char* cublasGetStatusString(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_NOT_SUPPORTED (emulated cuBLAS)";
}


cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t) {
  const Handle& h = *reinterpret_cast<Handle*>(handle);
  const cublasStatus_t status = check_gemm(h, transa, transb, m, n, k, Atype, lda, Btype, ldb, Ctype, ldc, compute);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  const float a_scale = *static_cast<const float*>(alpha), b_scale = *static_cast<const float*>(beta);
  ::emu::launch_body("cublasGemmEx (host stand-in)", ::emu::config(1, 1, 0, h.stream), [=] {
    gemm_on_host(transa, transb, m, n, k, a_scale, A, Atype, lda, B, Btype, ldb, b_scale, C, Ctype, ldc);
  });
  return CUBLAS_STATUS_SUCCESS;
}

// The pointer arrays live in device memory, as cuBLAS requires; under emulation that is host memory.
cublasStatus_t cublasGemmBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                   int n, int k, const void* alpha, const void* const Aarray[], cudaDataType Atype,
                                   int lda, const void* const Barray[], cudaDataType Btype, int ldb, const void* beta,
                                   void* const Carray[], cudaDataType Ctype, int ldc, int batch,
                                   cublasComputeType_t compute, cublasGemmAlgo_t) {
  const Handle& h = *reinterpret_cast<Handle*>(handle);
  const cublasStatus_t status = check_gemm(h, transa, transb, m, n, k, Atype, lda, Btype, ldb, Ctype, ldc, compute);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  if (batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
  const float a_scale = *static_cast<const float*>(alpha), b_scale = *static_cast<const float*>(beta);
  ::emu::launch_body("cublasGemmBatchedEx (host stand-in)", ::emu::config(1, 1, 0, h.stream), [=] {
    for (int i = 0; i < batch; ++i)
      gemm_on_host(transa, transb, m, n, k, a_scale, Aarray[i], Atype, lda, Barray[i], Btype, ldb, b_scale,
                   Carray[i], Ctype, ldc);
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
