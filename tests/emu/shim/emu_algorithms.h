// What the emulator's CUB and Thrust stand-ins share (tests/emu/shim): the temporary-storage query and running a
// host computation as a step of a stream.
#pragma once

#include <cstddef>
#include <functional>

namespace emu {
namespace shim {

inline cudaError_t temp_query(std::size_t& temp_bytes) {
  temp_bytes = 256;  // some storage, as CUB always asks for, so that callers' workspace layouts keep the slot
  return cudaSuccess;
}

template <typename F>
cudaError_t step(const char* name, cudaStream_t stream, F f) {
  ::emu::launch_body(name, ::emu::config(1, 1, 0, stream), std::function<void()>(f));
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
