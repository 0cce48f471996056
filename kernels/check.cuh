// Device side of CheckResult: record a failure so that the lowest index wins, deterministically.
#pragma once

#include <cstdint>

#include "ragged/check.h"

namespace ragged {
namespace detail {

__device__ __forceinline__ void record_failure(CheckResult* check, Status status, std::int64_t index) {
  if (check == nullptr) return;
  const unsigned long long code =
      (static_cast<unsigned long long>(index) << 8) | static_cast<unsigned long long>(static_cast<int>(status));
  atomicMin(&check->code, code);
}

}  // namespace detail
}  // namespace ragged
