// Internal: carves one caller-provided workspace into aligned pieces. The same code computes the size (query
// phase, base == nullptr) and the pointers (run phase), so the two can never disagree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "ragged/status.h"
#include "validate.h"

namespace ragged {
namespace detail {

class WorkspaceLayout {
 public:
  static constexpr std::size_t kAlignment = 256;  // what cudaMalloc guarantees; enough for any vector access

  // The caller's base need not be aligned: as CUB does, the size includes kAlignment - 1 bytes of slack and the
  // run phase starts the pieces at the first aligned address.
  explicit WorkspaceLayout(void* base) : base_(align_up(base)) {}

  // Reserves `bytes`; returns the piece's address (nullptr in the query phase). A size past size_t marks the
  // layout overflowed (see finish) and returns nullptr.
  void* take(std::size_t bytes) {
    // start may pass kMaxSize (which is not a multiple of kAlignment) while size_ does not: refused before
    // kMaxSize - start could wrap.
    const std::size_t start = round_up(size_);
    if (overflowed_ || start < size_ || start > kMaxSize || bytes > kMaxSize - start) {
      overflowed_ = true;
      return nullptr;
    }
    size_ = start + bytes;
    return base_ == nullptr ? nullptr : base_ + start;
  }
  template <typename T>
  T* take_array(std::int64_t count) {
    if (count < 0 || static_cast<std::uint64_t>(count) > kMaxSize / sizeof(T)) {
      overflowed_ = true;
      return nullptr;
    }
    return static_cast<T*>(take(static_cast<std::size_t>(count) * sizeof(T)));
  }

  // The bytes to ask the caller for: 0 when no piece has bytes, else the pieces plus the alignment slack.
  std::size_t size() const { return size_ == 0 ? 0 : size_ + (kAlignment - 1); }

  // Ends either phase of `op`: the query phase stores size() in workspace_bytes (kNoWorkspaceBytes where that is 0);
  // the run phase checks that the caller's workspace_bytes covers size(). Either fails when the sizes overflowed.
  Status finish(std::size_t& workspace_bytes, const char* op) const {
    if (overflowed_)
      return fail(Status::kSizeOverflow, std::string(op) + ": the workspace size does not fit size_t");
    if (base_ == nullptr) {
      workspace_bytes = size() == 0 ? kNoWorkspaceBytes : size();
      return Status::kSuccess;
    }
    if (workspace_bytes < size())
      return fail(Status::kWorkspaceTooSmall, std::string(op) + " needs " + std::to_string(size()) +
                                                  " workspace bytes, got " + std::to_string(workspace_bytes));
    return Status::kSuccess;
  }

 private:
  // Leaves room for the slack that size() adds, so that size() itself cannot overflow.
  static constexpr std::size_t kMaxSize = std::numeric_limits<std::size_t>::max() - 2 * kAlignment;

  static std::size_t round_up(std::size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }
  static unsigned char* align_up(void* p) {
    if (p == nullptr) return nullptr;
    const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(p);
    return reinterpret_cast<unsigned char*>((address + kAlignment - 1) / kAlignment * kAlignment);
  }

  unsigned char* base_;
  std::size_t size_ = 0;
  bool overflowed_ = false;
};

}  // namespace detail
}  // namespace ragged
