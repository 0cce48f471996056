// What the emulator's CUB and Thrust stand-ins share (tests/emu/shim): the temporary-storage query and running a
// host computation as a step of a stream, with the storage it was given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>

namespace emu {
namespace shim {

// The temporary storage a stand-in asks for: some bytes, as CUB always asks for, and more with the items, as CUB's
// grows with them, so that a caller who queries for fewer items than it runs is caught (below).
inline std::size_t temp_bytes_for(std::int64_t items) {
  return 256 + 16 * static_cast<std::size_t>(items > 0 ? items : 0);
}

inline cudaError_t temp_query(std::size_t& temp_bytes, std::int64_t items) {
  temp_bytes = temp_bytes_for(items);
  return cudaSuccess;
}

// The run call: less storage than the query for `items` gives is cudaErrorInvalidValue (stricter than CUB, whose
// single-tile and radix-sort paths do not check). The step overwrites the storage it asked for before it computes
// and again after, as CUB's passes write theirs while they run: a caller's array that overlaps it (a workspace
// layout whose slots collide), an input or an output of the call, loses its values here too.
template <typename F>
cudaError_t step_with_temp(const char* name, void* temp, std::size_t temp_bytes, std::int64_t items,
                           cudaStream_t stream, F f) {
  const std::size_t need = temp_bytes_for(items);
  if (temp_bytes < need) return cudaErrorInvalidValue;
  ::emu::launch_body(name, ::emu::config(1, 1, 0, stream), std::function<void()>([=]() mutable {
                       std::memset(temp, 0xE7, need);
                       f();
                       std::memset(temp, 0xE7, need);
                     }));
  return cudaPeekAtLastError();
}

}  // namespace shim
}  // namespace emu

namespace cuda {
template <typename T>
struct maximum {
  T operator()(const T& a, const T& b) const { return a < b ? b : a; }
};
template <typename T>
struct minimum {
  T operator()(const T& a, const T& b) const { return b < a ? b : a; }
};
}  // namespace cuda
