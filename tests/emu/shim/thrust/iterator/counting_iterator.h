// Emulator stand-in for thrust::counting_iterator (tests/emu/shim): indexable, which is all the CUB stand-ins use.
#pragma once

namespace thrust {

template <typename T>
struct counting_iterator {
  T first;
  explicit counting_iterator(T f) : first(f) {}
  T operator[](long long i) const { return first + static_cast<T>(i); }
};

}  // namespace thrust
