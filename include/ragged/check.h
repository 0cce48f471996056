// Device-side validation result. Device validation never syncs the host: it records the first failure (lowest
// index) in a CheckResult in device memory, which the caller copies back whenever it likes.
#pragma once

#include <cstdint>
#include <string>

#include "ragged/status.h"

namespace ragged {

// Encoded as (index << 8) | status so that one 64-bit atomicMin keeps the failure with the lowest index
// deterministically. All bits set means "no failure". The index keeps 56 bits: exact for any array that fits a
// device (2^56 offsets would take 256 PiB), though the size checks admit batches up to 2^59.
struct CheckResult {
  unsigned long long code = ~0ull;

  bool ok() const { return code == ~0ull; }
  Status status() const { return ok() ? Status::kSuccess : static_cast<Status>(code & 0xffu); }
  // The failing index: the offsets entry or the sequence whose length is bad; -1 when ok().
  std::int64_t index() const { return ok() ? -1 : static_cast<std::int64_t>(code >> 8); }
};

// Human-readable description of a copied-back result, e.g. "invalid offsets at offsets[3]". Inline, as every
// function returning a std::string here: the library's symbols take and return none.
inline std::string describe(const CheckResult& result, const char* what = "offsets") {
  if (result.ok()) return "ok";
  return std::string(status_string(result.status())) + " at " + what + "[" + std::to_string(result.index()) + "]";
}

}  // namespace ragged
