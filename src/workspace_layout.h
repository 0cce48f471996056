// Internal: carves one caller-provided workspace into aligned pieces. The same code computes the size (query
// phase, base == nullptr) and the pointers (run phase), so the two can never disagree.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ragged {
namespace detail {

class WorkspaceLayout {
 public:
  static constexpr std::size_t kAlignment = 256;  // what cudaMalloc guarantees; enough for any vector access

  explicit WorkspaceLayout(void* base) : base_(static_cast<unsigned char*>(base)) {}

  // Reserves `bytes`; returns the piece's address (nullptr in the query phase).
  void* take(std::size_t bytes) {
    const std::size_t start = (size_ + kAlignment - 1) / kAlignment * kAlignment;
    size_ = start + bytes;
    return base_ == nullptr ? nullptr : base_ + start;
  }
  template <typename T>
  T* take_array(std::int64_t count) {
    return static_cast<T*>(take(static_cast<std::size_t>(count) * sizeof(T)));
  }
  std::size_t size() const { return size_; }

 private:
  unsigned char* base_;
  std::size_t size_ = 0;
};

}  // namespace detail
}  // namespace ragged
