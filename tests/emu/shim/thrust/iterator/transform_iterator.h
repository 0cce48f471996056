// Emulator stand-in for thrust::transform_iterator (tests/emu/shim): indexable, which is all the CUB stand-ins use.
#pragma once

namespace thrust {

template <typename F, typename It>
struct transform_iterator {
  It it;
  F f;
  auto operator[](long long i) const { return f(it[i]); }
};

template <typename It, typename F>
transform_iterator<F, It> make_transform_iterator(It it, F f) {
  return transform_iterator<F, It>{it, f};
}

}  // namespace thrust
