// Emulator replacement for kernels/async_copy.cuh (tests/emu/build.sh copies it over the original). cp.async
// copies land only when a cp.async.wait_group lets them: until then the destination keeps its old bytes, so a
// kernel that reads a tile before waiting for it reads garbage here as it may on the GPU. With EMU_CP_ASYNC=early
// they land at issue instead (and again at the wait), the other end of what a GPU may do: a refill of a buffer
// that other warps still read, without the barrier that should keep it back, then changes what they read.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace emu {
char* device_page(const void* address);  // emu_cuda_api.cpp: nullptr outside device memory
}  // namespace emu

namespace ragged {
namespace detail {

__device__ __forceinline__ unsigned smem_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

inline bool cp_async_lands_early() {
  static const bool early = [] {
    const char* mode = std::getenv("EMU_CP_ASYNC");
    return mode != nullptr && std::strcmp(mode, "early") == 0;
  }();
  return early;
}

__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, bool valid) {
  // The PTX ISA requires both addresses aligned to the copy's size (the GPU faults: misaligned address).
  if (dst % 16 != 0 || reinterpret_cast<std::uintptr_t>(src) % 16 != 0) {
    char what[128];
    std::snprintf(what, sizeof what, "cp.async of 16 bytes from %p to shared offset %u: not 16-byte aligned", src, dst);
    ::emu::kernel_error(what);
  }
  ::emu::ThreadState::PendingCopy copy;
  copy.dst = ::emu::shared_pointer(dst, 16);
  if (valid) std::memcpy(copy.bytes, src, 16);  // the source is read at issue; it does not change in a kernel
  else std::memset(copy.bytes, 0, 16);          // src-size 0: the destination is zero-filled
  if (cp_async_lands_early()) std::memcpy(copy.dst, copy.bytes, 16);
  ::emu::g_current->pending.push_back(copy);
}

__device__ __forceinline__ void cp_async_commit() {
  ::emu::g_current->group_ends.push_back(::emu::g_current->pending.size());
}

// Completes every committed group but the newest N.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  auto& t = *::emu::g_current;
  if (t.group_ends.size() <= static_cast<std::size_t>(N)) return;
  const std::size_t done = t.group_ends[t.group_ends.size() - 1 - N];
  for (std::size_t i = 0; i < done; ++i) std::memcpy(t.pending[i].dst, t.pending[i].bytes, 16);
  t.pending.erase(t.pending.begin(), t.pending.begin() + static_cast<std::ptrdiff_t>(done));
  t.group_ends.erase(t.group_ends.begin(), t.group_ends.end() - N);
  for (auto& end : t.group_ends) end -= done;
}

// Fetches nothing (there is no cache to warm), but the address must lie in device memory, as the GPU's
// prefetch.global.L2 is given it: a prefetch past an allocation's end fails here.
__device__ __forceinline__ void prefetch_l2(const void* p) {
  if (::emu::device_page(p) == nullptr) {
    std::fprintf(stderr, "emu: prefetch_l2 of %p, outside device memory\n", p);
    std::abort();
  }
}

}  // namespace detail
}  // namespace ragged
