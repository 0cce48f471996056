#include "bench/common/device_data.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "ragged/status.h"

namespace ragged {
namespace bench {
namespace {

__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store(std::uint8_t* p, float v) {
  *p = static_cast<std::uint8_t>(static_cast<int>(v));  // truncated, then modulo 256
}

template <typename T>
__global__ void fill_uniform_kernel(T* data, std::int64_t count, float scale, std::uint32_t seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    store(data + i, (static_cast<float>(h & 0xffffff) / 8388608.0f - 1.0f) * scale);
  }
}

}  // namespace

template <typename T>
void fill_uniform(T* data, std::size_t count, float scale, std::uint32_t seed, cudaStream_t stream) {
  if (count == 0) return;
  fill_uniform_kernel<T><<<1024, 256, 0, stream>>>(data, static_cast<std::int64_t>(count), scale, seed);
  cuda_check(cudaGetLastError(), "fill_uniform_kernel");
}

template void fill_uniform<float>(float*, std::size_t, float, std::uint32_t, cudaStream_t);
template void fill_uniform<__half>(__half*, std::size_t, float, std::uint32_t, cudaStream_t);
template void fill_uniform<__nv_bfloat16>(__nv_bfloat16*, std::size_t, float, std::uint32_t, cudaStream_t);
template void fill_uniform<std::uint8_t>(std::uint8_t*, std::size_t, float, std::uint32_t, cudaStream_t);

CublasHandle::CublasHandle() {
  const cublasStatus_t status = cublasCreate(&handle_);
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(Status::kCudaError, "cublasCreate failed with cuBLAS status " + std::to_string(status));
}

CublasHandle::~CublasHandle() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

}  // namespace bench
}  // namespace ragged
