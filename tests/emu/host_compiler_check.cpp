// A host-compiler miscompile that the emulator's build must not meet: build.sh compiles and runs this with its
// own flags before anything else. Found 2026-11-28: g++ 12.2 at -O2 (Debian 12.2.0-14) gave wrong outputs in
// segment_softmax's scalar row pass (normalize_tiny_row with D the constant 1) and in this reduction of it, a
// softmax over one 28-token row walked twice in groups of 4 as walk_tiny walks. Correct at -O1, with
// -fno-tree-vrp or -fno-thread-jumps, under -fsanitize=undefined (and address), and with clang 14 at -O2: a g++
// value-range / jump-threading defect as far as we can tell, not undefined behaviour here. The build passes
// -fno-tree-vrp. The shape is kept as found (small edits, such as a float for Item, made the defect vanish).
// Prints "ok" and exits 0 when every output matches a double-precision softmax.
#include <cmath>
#include <cstdio>

namespace {

constexpr int kGroup = 4;
struct Item {  // the kernel's (x, dy) pair, dy dropped
  float x;
};
struct Head {
  Item at[kGroup];
};
struct Statistic {
  float max = -INFINITY;
  float sum = 0.0f;
};
struct Args {
  const float* in;
  float* out;
  long inner;
};

template <int N, typename X>
inline void accumulate(Statistic& st, X x) {
  float top = st.max;
  for (int i = 0; i < N; ++i) top = fmaxf(top, x(i));
  float sum = st.sum * expf(st.max - top);
  for (int i = 0; i < N; ++i) sum += expf(x(i) - top);
  st = Statistic{top, sum};
}

template <typename I, typename Load, typename F>
inline void walk_groups(I length, const Head& head, bool /*from_head*/, Item pad, Load load, F f) {
  auto group = [&](I t0) {
    Item items[kGroup];
    if (t0 == 0) {
      for (int k = 0; k < kGroup; ++k) items[k] = head.at[k];
    } else {
      for (int k = 0; k < kGroup; ++k) {
        const Item loaded = load(t0 + k < length - 1 ? t0 + k : length - 1);
        items[k] = t0 + k < length ? loaded : pad;
      }
    }
    f(t0, items);
  };
  for (I t0 = 0; t0 < length; t0 += kGroup) group(t0);
}

template <bool kConstantInner>
__attribute__((noinline)) void softmax_row(const Args& a, int begin, int length, const Head& head) {
  using I = int;
  const I D = kConstantInner ? 1 : a.inner;
  const Item pad{-INFINITY};
  {
    auto load = [&](I t) { return Item{a.in[(begin + t) * D]}; };
    Statistic st;
    walk_groups(length, head, true, pad, load, [&](I, const Item (&items)[kGroup]) {
      accumulate<kGroup>(st, [&](int i) { return items[i].x; });
    });
    const float max = st.max, inverse = 1.0f / st.sum;
    walk_groups(length, head, true, pad, load, [&](I t0, const Item (&items)[kGroup]) {
      for (int k = 0; k < kGroup; ++k)
        if (t0 + k < length) a.out[(begin + t0 + k) * D] = expf(items[k].x - max) * inverse;
    });
  }
}

}  // namespace

int main() {
  constexpr int kBegin = 6, kLength = 28;
  float in[64], out[64];
  for (int i = 0; i < 64; ++i) in[i] = std::sin(i * 1.7f) * 2;
  Head head;
  for (int k = 0; k < kGroup; ++k) head.at[k] = Item{in[kBegin + k]};
  const Args args{in, out, 1};
  softmax_row<true>(args, kBegin, kLength, head);
  double max = -INFINITY, sum = 0;
  for (int i = kBegin; i < kBegin + kLength; ++i) max = std::fmax(max, in[i]);
  for (int i = kBegin; i < kBegin + kLength; ++i) sum += std::exp(in[i] - max);
  int wrong = 0;
  for (int i = kBegin; i < kBegin + kLength; ++i) {
    const double want = std::exp(in[i] - max) / sum;
    if (!(std::fabs(out[i] - want) <= 1e-5 * want)) ++wrong;
  }
  if (wrong != 0) {
    std::printf("host compiler check: %d of %d softmax outputs wrong\n", wrong, kLength);
    return 1;
  }
  std::printf("ok\n");
  return 0;
}
