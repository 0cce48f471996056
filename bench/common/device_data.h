// Device data shared by the GPU suites: random fills and a cuBLAS handle.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "ragged/buffer.h"

namespace ragged {
namespace bench {

// Fills `count` values with uniform numbers in [-scale, scale) hashed from the index and `seed`: a kernel's speed
// must not come from easy data (zeros, constants). For float, __half and __nv_bfloat16 (rounded to nearest), and
// std::uint8_t (the integer part modulo 256: a scale of 128 reaches every byte).
template <typename T>
void fill_uniform(T* data, std::size_t count, float scale, std::uint32_t seed, cudaStream_t stream);

template <typename T>
void fill_uniform(DeviceBuffer<T>& buffer, float scale, std::uint32_t seed, cudaStream_t stream) {
  fill_uniform(buffer.data(), buffer.size(), scale, seed, stream);
}

// An owned cuBLAS handle; throws ragged::Error when cuBLAS cannot create one.
class CublasHandle {
 public:
  CublasHandle();
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

}  // namespace bench
}  // namespace ragged
