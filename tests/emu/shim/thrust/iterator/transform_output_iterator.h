// Emulator stand-in for thrust::transform_output_iterator (tests/emu/shim): out[i] = x stores f(x).
#pragma once

namespace thrust {

template <typename F, typename It>
struct transform_output_iterator {
  It it;
  F f;
  struct Proxy {
    It at;
    F f;
    template <typename T>
    Proxy& operator=(const T& x) {
      *at = f(x);
      return *this;
    }
  };
  Proxy operator[](long long i) const { return Proxy{it + i, f}; }
};

template <typename It, typename F>
transform_output_iterator<F, It> make_transform_output_iterator(It it, F f) {
  return transform_output_iterator<F, It>{it, f};
}

}  // namespace thrust
