// Emulator stand-ins for CUB's DoubleBuffer and KeyValuePair (tests/emu/shim).
#pragma once

namespace cub {

template <typename T>
struct DoubleBuffer {
  T* d_buffers[2];
  int selector = 0;
  DoubleBuffer(T* current, T* alternate) : d_buffers{current, alternate} {}
  T* Current() const { return d_buffers[selector]; }
  T* Alternate() const { return d_buffers[selector ^ 1]; }
};

template <typename K, typename V>
struct KeyValuePair {
  K key{};
  V value{};
  KeyValuePair() = default;
  KeyValuePair(K k, V v) : key(k), value(v) {}
};

}  // namespace cub
