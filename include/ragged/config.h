// Compiler portability macros shared by every public header.
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define RAGGED_HOST_DEVICE __host__ __device__ __forceinline__
#define RAGGED_DEVICE __device__ __forceinline__
#else
#define RAGGED_HOST_DEVICE inline
#define RAGGED_DEVICE inline
#endif
