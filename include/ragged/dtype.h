// Element types known to ragged, and a run-time tag for frameworks that dispatch on dtype.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace ragged {

using half = __half;
using bfloat16 = __nv_bfloat16;

enum class DType : int { kFloat32, kFloat16, kBFloat16, kInt32, kInt64, kUInt8, kBool };

const char* dtype_name(DType dtype);
std::size_t dtype_size(DType dtype);

template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::kFloat32; };
template <> struct dtype_of<half> { static constexpr DType value = DType::kFloat16; };
template <> struct dtype_of<bfloat16> { static constexpr DType value = DType::kBFloat16; };
template <> struct dtype_of<std::int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct dtype_of<std::int64_t> { static constexpr DType value = DType::kInt64; };
template <> struct dtype_of<std::uint8_t> { static constexpr DType value = DType::kUInt8; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::kBool; };

template <typename T>
constexpr DType dtype_of_v = dtype_of<T>::value;

// Offsets are int32 (like cu_seqlens) or int64.
template <typename OffsetT>
constexpr bool is_offset_type_v =
    std::is_same<OffsetT, std::int32_t>::value || std::is_same<OffsetT, std::int64_t>::value;

}  // namespace ragged
