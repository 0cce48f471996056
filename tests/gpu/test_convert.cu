// ragged_to_padded / padded_to_ragged on the device against the CPU reference, bit for bit: every dtype x offset type
// x length regime x align x truncate x max_len below / at / above the longest sequence x inner sizes that select
// every vector width (16..1 bytes) and every token group (rows of 1, 2, 4 and 8 bytes, with the token-group kernels
// on and off), sub-views whose base pointers are one element off, the 64-bit index path, multi-tile grids, grids
// capped at 1 and 3 blocks, round trips, malformed offsets, a run refused by the argument checks (the checks
// themselves: tests/cpu/test_argument_checks.cpp) and the owning layer.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "../../kernels/convert_launch.h"
#include "common/test_util.h"
#include "gpu/restore_setting.h"
#include "ragged/buffer.h"
#include "ragged/convert.h"
#include "ragged/offsets.h"
#include "ragged/reference.h"
#include "ragged/tensor.h"

using namespace ragged;
using test::poison_byte;

namespace {

// The token-group kernels for narrow rows (kernels/convert_tokens.cu), on by default.
using RestoreTokenGroups =
    test::RestoreSetting<bool, detail::convert_token_groups_enabled, detail::set_convert_token_groups_enabled>;

// Host arrays are kept as bytes so that bool works like every other type (std::vector<bool> packs bits).
template <typename T>
struct HostArray {
  std::vector<unsigned char> bytes;
  HostArray(std::size_t count, unsigned char byte) : bytes(count * sizeof(T), byte) {}
  T* data() { return reinterpret_cast<T*>(bytes.data()); }
  const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }
  std::size_t size() const { return bytes.size() / sizeof(T); }
};

// One step of splitmix64: 64 random bits per call, a few instructions each.
std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Fresh random values of any element type, drawn as raw bits: these tests compare bytes, so the distribution does
// not matter, only the speed does. Padded buffers run to ~40 M elements (one huge row at D = 1000), and drawing them
// through test::random_values (mt19937_64, a distribution and a conversion per element, ~30 ns) took most of this
// program's 220 s on the first GPU run. Each element is then made an ordinary value of its type: bool 0 or 1,
// integers odd (non-zero), floating types with the exponent's top bit clear (finite, |x| < 2) and the lowest bit set
// (non-zero).
template <typename T>
HostArray<T> random_array(std::size_t count, std::mt19937_64& rng) {
  HostArray<T> out(count, 0);
  std::uint64_t state = rng();
  unsigned char* bytes = out.bytes.data();
  for (std::size_t i = 0; i < out.bytes.size(); i += 8) {
    const std::uint64_t word = splitmix64(state);
    std::memcpy(bytes + i, &word, std::min<std::size_t>(8, out.bytes.size() - i));
  }
  if constexpr (std::is_same<T, bool>::value) {
    for (unsigned char& b : out.bytes) b &= 1;
  } else {
    using Wide = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    using Bits = std::conditional_t<sizeof(T) == 1, std::uint8_t,
                                    std::conditional_t<sizeof(T) == 2, std::uint16_t, Wide>>;
    constexpr bool kFloating =
        std::is_floating_point<T>::value || std::is_same<T, half>::value || std::is_same<T, bfloat16>::value;
    constexpr Bits kExponentTop = kFloating ? Bits(Bits(1) << (8 * sizeof(T) - 2)) : Bits(0);
    for (std::size_t i = 0; i < count; ++i) {
      Bits b;
      std::memcpy(&b, bytes + i * sizeof(T), sizeof(T));
      b = Bits((b & Bits(~kExponentTop)) | Bits(1));
      std::memcpy(bytes + i * sizeof(T), &b, sizeof(T));
    }
  }
  return out;
}

template <typename T>
T value_of(double v) {
  return test::from_double<T>(v);
}

// Device memory with `shift` spare elements in front, so that data() can be misaligned on purpose. An output
// (`guarded`) has kGuardBytes behind its last element, which no kernel may write: poison() fills them too, and
// download() checks they still hold the poison (a 16-byte store of a token group past the output's end would land
// there). An input ends where its elements do, so that the emulator's guard page, or compute-sanitizer, catches a
// read past it.
constexpr std::size_t kGuardBytes = 16;

template <typename T>
struct DeviceArray {
  DeviceBuffer<unsigned char> buffer;
  std::int64_t shift;
  std::size_t count;
  bool poisoned = false;
  std::size_t guard_bytes;
  DeviceArray(std::size_t n, std::int64_t shift_elems, bool guarded = false)
      : buffer((n + static_cast<std::size_t>(shift_elems)) * sizeof(T) + (guarded ? kGuardBytes : 0)),
        shift(shift_elems),
        count(n),
        guard_bytes(guarded ? kGuardBytes : 0) {}
  T* data() { return count == 0 ? nullptr : reinterpret_cast<T*>(buffer.data()) + shift; }
  void poison() {
    buffer.fill_bytes(poison_byte<T>());
    poisoned = true;
  }
  void upload(const HostArray<T>& host) {
    REQUIRE(host.size() == count);
    if (count > 0) REQUIRE_CUDA(cudaMemcpy(data(), host.data(), count * sizeof(T), cudaMemcpyHostToDevice));
  }
  HostArray<T> download() {
    HostArray<T> host(count, 0);
    REQUIRE_CUDA(cudaDeviceSynchronize());
    if (count > 0) REQUIRE_CUDA(cudaMemcpy(host.data(), data(), count * sizeof(T), cudaMemcpyDeviceToHost));
    if (poisoned && guard_bytes > 0) {
      unsigned char guard[kGuardBytes];
      const std::size_t end = (static_cast<std::size_t>(shift) + count) * sizeof(T);
      REQUIRE_CUDA(cudaMemcpy(guard, buffer.data() + end, kGuardBytes, cudaMemcpyDeviceToHost));
      INFO("the " << kGuardBytes << " bytes past the output's end were written");
      REQUIRE(std::all_of(guard, guard + kGuardBytes, [](unsigned char b) { return b == poison_byte<T>(); }));
    }
    return host;
  }
};

template <typename T>
void require_same_bytes(const HostArray<T>& got, const HostArray<T>& expected) {
  REQUIRE(got.size() == expected.size());
  std::int64_t mismatch = -1;
  const bool same = got.bytes == expected.bytes;  // one comparison; the loop only finds where they differ
  for (std::size_t i = 0; !same && i < got.size() && mismatch < 0; ++i)
    if (std::memcmp(got.data() + i, expected.data() + i, sizeof(T)) != 0) mismatch = static_cast<std::int64_t>(i);
  INFO("first mismatch at element " << mismatch << " of " << got.size());
  REQUIRE(mismatch == -1);
}

// Runs an op both ways of the two-phase contract: the query must ask for 0 bytes, the run gets one byte.
template <typename Op>
void run_op(Op&& op) {
  std::size_t bytes = 12345;
  REQUIRE_OK(op(nullptr, bytes));
  REQUIRE(bytes == 1);
  DeviceBuffer<unsigned char> one_byte(1);
  REQUIRE_OK(op(one_byte.data(), bytes));
  REQUIRE_CUDA(cudaDeviceSynchronize());
}

struct Case {
  std::vector<std::int64_t> lengths;
  std::int64_t inner = 1;
  std::int64_t max_len = 0;
  Align align = Align::kLeft;
  Truncate trunc = Truncate::kRight;
  std::int64_t shift = 0;          // elements by which every base pointer is moved off its allocation
  std::int64_t padded_shift = -1;  // ... the padded tensor's, where not `shift`
  std::int64_t lead_rows = 0;      // values rows before offsets[0] (must stay untouched)
  std::int64_t extra_rows = 0;     // values rows beyond offsets[batch] (must stay untouched)
  bool force_64bit_index = false;
};

std::string describe(const Case& c) {
  return "batch " + std::to_string(c.lengths.size()) + ", inner " + std::to_string(c.inner) + ", max_len " +
         std::to_string(c.max_len) + ", align " + std::to_string(static_cast<int>(c.align)) + ", trunc " +
         std::to_string(static_cast<int>(c.trunc)) + ", shift " + std::to_string(c.shift) + ", padded shift " +
         std::to_string(c.padded_shift) + ", lead rows " + std::to_string(c.lead_rows) + ", extra rows " +
         std::to_string(c.extra_rows) + (c.force_64bit_index ? ", 64-bit index" : "");
}

template <typename T, typename OffsetT>
void to_padded_on_device(const Case& c, RaggedView<const T, OffsetT> src, PaddedView<T> dst, T pad) {
  if (c.force_64bit_index) {
    REQUIRE_OK(detail::launch_ragged_to_padded<OffsetT>(src.values, src.offsets, src.batch, src.nnz, dst.data,
                                                        dst.max_len, src.inner * sizeof(T), sizeof(T), &pad,
                                                        c.align, c.trunc, nullptr, false));
    REQUIRE_CUDA(cudaDeviceSynchronize());
    return;
  }
  run_op([&](void* ws, std::size_t& bytes) {
    return ragged_to_padded(ws, bytes, src, dst, pad, c.align, c.trunc, nullptr);
  });
}

template <typename T, typename OffsetT>
void to_ragged_on_device(const Case& c, PaddedView<const T> src, RaggedView<T, OffsetT> dst, T fill) {
  if (c.force_64bit_index) {
    REQUIRE_OK(detail::launch_padded_to_ragged<OffsetT>(src.data, src.max_len, dst.values, dst.offsets, dst.batch,
                                                        dst.nnz, dst.inner * sizeof(T), sizeof(T), &fill, c.align,
                                                        c.trunc, nullptr, false));
    REQUIRE_CUDA(cudaDeviceSynchronize());
    return;
  }
  run_op([&](void* ws, std::size_t& bytes) {
    return padded_to_ragged(ws, bytes, src, dst, fill, c.align, c.trunc, nullptr);
  });
}

// Both directions of one case against the reference, plus the round trip when nothing is truncated.
template <typename T, typename OffsetT>
void check_case(const Case& c, std::mt19937_64& rng) {
  INFO(describe(c));
  const std::int64_t batch = static_cast<std::int64_t>(c.lengths.size());
  std::vector<OffsetT> offsets(c.lengths.size() + 1);
  REQUIRE_OK(lengths_to_offsets_host(c.lengths.data(), batch, offsets.data()));
  for (OffsetT& offset : offsets) offset += static_cast<OffsetT>(c.lead_rows);
  const std::int64_t used_rows = static_cast<std::int64_t>(offsets.back());
  const std::int64_t nnz = used_rows + c.extra_rows;
  const std::size_t ragged_count = static_cast<std::size_t>(nnz * c.inner);
  const std::size_t padded_count = static_cast<std::size_t>(batch * c.max_len * c.inner);
  const T pad = value_of<T>(3);
  const T fill = std::is_same<T, bool>::value ? value_of<T>(0) : value_of<T>(-7);  // bool: differ from pad

  DeviceBuffer<OffsetT> d_offsets(offsets);
  const HostArray<T> values = random_array<T>(ragged_count, rng);
  DeviceArray<T> d_values(ragged_count, c.shift);
  d_values.upload(values);
  DeviceArray<T> d_padded(padded_count, c.padded_shift >= 0 ? c.padded_shift : c.shift, true);
  d_padded.poison();

  // ragged -> padded
  const RaggedView<const T, OffsetT> src{d_values.data(), d_offsets.data(), batch, nnz, c.inner};
  const PaddedView<T> padded{d_padded.data(), batch, c.max_len, c.inner};
  to_padded_on_device(c, src, padded, pad);
  HostArray<T> expected_padded(padded_count, poison_byte<T>());
  reference::ragged_to_padded<T, OffsetT>({values.data(), offsets.data(), batch, nnz, c.inner},
                                          {expected_padded.data(), batch, c.max_len, c.inner}, pad, c.align,
                                          c.trunc);
  require_same_bytes(d_padded.download(), expected_padded);

  // Round trip: with nothing truncated, padded -> ragged gives the values back (extra rows stay poisoned).
  const std::int64_t longest = c.lengths.empty() ? 0 : *std::max_element(c.lengths.begin(), c.lengths.end());
  DeviceArray<T> d_back(ragged_count, c.shift, true);
  d_back.poison();
  const RaggedView<T, OffsetT> back{d_back.data(), d_offsets.data(), batch, nnz, c.inner};
  if (c.max_len >= longest) {
    to_ragged_on_device<T, OffsetT>(c, {d_padded.data(), batch, c.max_len, c.inner}, back, fill);
    HostArray<T> got = d_back.download();
    HostArray<T> expected = values;
    if (ragged_count > 0) {  // an empty HostArray's data() is null, and memset(nullptr, .., 0) is undefined
      std::memset(expected.data(), poison_byte<T>(), c.lead_rows * c.inner * sizeof(T));
      std::memset(expected.data() + used_rows * c.inner, poison_byte<T>(),
                  (ragged_count - used_rows * c.inner) * sizeof(T));
    }
    require_same_bytes(got, expected);
  }

  // padded -> ragged from random padded data (so padding slots hold values that must not leak).
  const HostArray<T> random_padded = random_array<T>(padded_count, rng);
  d_padded.upload(random_padded);
  d_back.poison();
  to_ragged_on_device<T, OffsetT>(c, {d_padded.data(), batch, c.max_len, c.inner}, back, fill);
  HostArray<T> expected_ragged(ragged_count, poison_byte<T>());
  reference::padded_to_ragged<T, OffsetT>({random_padded.data(), batch, c.max_len, c.inner},
                                          {expected_ragged.data(), offsets.data(), batch, nnz, c.inner}, fill,
                                          c.align, c.trunc);
  require_same_bytes(d_back.download(), expected_ragged);
}

std::vector<std::int64_t> max_lens_around(const std::vector<std::int64_t>& lengths) {
  const std::int64_t longest = lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
  std::vector<std::int64_t> out = {longest / 2, longest, longest + 5};
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

constexpr Align kAligns[] = {Align::kLeft, Align::kRight};
constexpr Truncate kTruncs[] = {Truncate::kRight, Truncate::kLeft};

template <typename T, typename OffsetT>
void check_all_regimes(std::uint64_t salt) {
  auto rng = test::make_rng(salt);
  for (std::int64_t inner : {1, 3, 64, 1000}) {
    for (test::Regime regime : test::all_regimes()) {
      INFO("regime " << test::regime_name(regime));
      Case c;
      c.lengths = test::make_lengths(regime, rng, inner >= 64 ? 4 : 40);
      c.inner = inner;
      for (std::int64_t max_len : max_lens_around(c.lengths)) {
        for (Align align : kAligns) {
          for (Truncate trunc : kTruncs) {
            c.max_len = max_len;
            c.align = align;
            c.trunc = trunc;
            check_case<T, OffsetT>(c, rng);
          }
        }
      }
    }
  }
}

}  // namespace

TEMPLATE_PRODUCT_TEST_CASE("conversions match the reference for every dtype, regime, align and truncation",
                           "[convert][gpu]", std::pair,
                           ((float, std::int32_t), (float, std::int64_t), (half, std::int32_t),
                            (half, std::int64_t), (bfloat16, std::int32_t), (bfloat16, std::int64_t),
                            (std::int32_t, std::int32_t), (std::int32_t, std::int64_t), (std::int64_t, std::int32_t),
                            (std::int64_t, std::int64_t), (std::uint8_t, std::int32_t), (std::uint8_t, std::int64_t),
                            (bool, std::int32_t), (bool, std::int64_t))) {
  check_all_regimes<typename TestType::first_type, typename TestType::second_type>(201);
}

TEMPLATE_TEST_CASE("conversions with narrow rows and misaligned base pointers take the narrow vector paths",
                   "[convert][gpu]", std::int32_t, std::int64_t) {
  // Shifted by one element, no output is 16-byte aligned: the 4- and 8-byte rows below take convert.cu's
  // vector kernels instead of the token groups (which the unshifted ones take).
  using OffsetT = TestType;
  auto rng = test::make_rng(202);
  for (std::int64_t shift : {0, 1}) {
    for (Align align : kAligns) {
      for (Truncate trunc : kTruncs) {
        Case c;
        c.lengths = test::make_lengths(test::Regime::kRandom, rng, 30);
        c.max_len = 17;
        c.align = align;
        c.trunc = trunc;
        c.shift = shift;
        c.extra_rows = 3;
        c.inner = 3;
        check_case<half, OffsetT>(c, rng);  // 6-byte rows: 2-byte vectors
        c.inner = 5;
        check_case<std::uint8_t, OffsetT>(c, rng);  // 5-byte rows: 1-byte vectors
        check_case<bool, OffsetT>(c, rng);
        c.inner = 64;
        check_case<float, OffsetT>(c, rng);  // 256-byte rows: 16-byte vectors, or 4 when shifted
        check_case<bfloat16, OffsetT>(c, rng);
        c.inner = 2;
        check_case<std::int64_t, OffsetT>(c, rng);  // 16-byte rows, 8-byte vectors when shifted
        c.inner = 1;
        check_case<std::int32_t, OffsetT>(c, rng);
      }
    }
  }
}

TEMPLATE_TEST_CASE("conversions through the 64-bit index path", "[convert][gpu]", std::int32_t, std::int64_t) {
  using OffsetT = TestType;
  auto rng = test::make_rng(203);
  for (test::Regime regime : test::all_regimes()) {
    INFO("regime " << test::regime_name(regime));
    Case c;
    c.lengths = test::make_lengths(regime, rng, 40);
    c.force_64bit_index = true;
    for (std::int64_t max_len : max_lens_around(c.lengths)) {
      c.max_len = max_len;
      c.align = max_len % 2 ? Align::kLeft : Align::kRight;
      c.trunc = Truncate::kLeft;
      c.inner = 7;
      check_case<half, OffsetT>(c, rng);
      c.inner = 32;
      check_case<float, OffsetT>(c, rng);
      c.inner = 1;  // token groups: ragged_to_padded's 64-bit division
      check_case<float, OffsetT>(c, rng);
      check_case<std::uint8_t, OffsetT>(c, rng);
    }
  }
}

TEMPLATE_TEST_CASE("conversions of narrow rows: the token groups and the vector kernels", "[convert][gpu]",
                   std::int32_t, std::int64_t) {
  // Rows of 1, 2, 4 and 8 bytes (D = 1 of every width, D = 2 of 16- and 32-bit elements) go to the token-group
  // kernels (16 bytes of output a thread, kernels/convert_tokens.cu) where the base pointers allow; switched off,
  // to convert.cu's vector kernels. Both against the reference, byte for byte: every regime, max_len below, at and
  // above the longest sequence (groups then cross sequences, several where max_len is below 16 one-byte tokens),
  // both alignments and truncations, and rows before offsets[0] and past offsets[batch] that must stay untouched;
  // then with the values one element off 16 bytes and the padded tensor on them (ragged -> padded takes the token
  // groups from a misaligned source, padded -> ragged the vector kernels), and the other way round.
  using OffsetT = TestType;
  auto rng = test::make_rng(206);
  const RestoreTokenGroups restore;
  for (bool token_groups : {true, false}) {
    detail::set_convert_token_groups_enabled(token_groups);
    for (test::Regime regime : test::all_regimes()) {
      INFO((token_groups ? "token groups" : "vector kernels") << ", regime " << test::regime_name(regime));
      Case c;
      c.lengths = test::make_lengths(regime, rng, 40);
      c.lead_rows = 3;
      c.extra_rows = 5;
      for (const std::int64_t shift : {1, 0}) {
        INFO("values shifted by " << shift << ", padded by " << 1 - shift);
        c.shift = shift;
        c.padded_shift = 1 - shift;
        c.max_len = max_lens_around(c.lengths).back();
        c.inner = 1;
        check_case<float, OffsetT>(c, rng);
        check_case<half, OffsetT>(c, rng);
      }
      c.shift = 0;
      c.padded_shift = -1;
      for (std::int64_t max_len : max_lens_around(c.lengths)) {
        c.max_len = max_len;
        for (Align align : kAligns) {
          for (Truncate trunc : kTruncs) {
            c.align = align;
            c.trunc = trunc;
            c.inner = 1;
            check_case<std::uint8_t, OffsetT>(c, rng);
            check_case<bfloat16, OffsetT>(c, rng);
            check_case<float, OffsetT>(c, rng);
            check_case<std::int64_t, OffsetT>(c, rng);
            c.inner = 2;
            check_case<half, OffsetT>(c, rng);
            check_case<float, OffsetT>(c, rng);
          }
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("conversions over many tiles and many sequences", "[convert][gpu][large]", std::int32_t,
                   std::int64_t) {
  using OffsetT = TestType;
  auto rng = test::make_rng(204);
  // ~100k sequences and ~3M one-byte rows: several grid-stride iterations per block, and tiles whose rows span
  // dozens of sequences (the per-thread search inside the tile's range, and multi-step warp searches). Both
  // kernels of these narrow rows: the token groups and the vector kernels.
  Case c;
  c.lengths.resize(100000);
  std::uniform_int_distribution<std::int64_t> length(0, 60);
  for (auto& l : c.lengths) l = length(rng);
  c.lengths[777] = 5000;  // one long sequence among them
  const RestoreTokenGroups restore;
  for (bool token_groups : {true, false}) {
    INFO((token_groups ? "token groups" : "vector kernels"));
    detail::set_convert_token_groups_enabled(token_groups);
    for (Align align : kAligns) {
      c.align = align;
      c.trunc = align == Align::kLeft ? Truncate::kLeft : Truncate::kRight;
      c.max_len = 45;
      c.inner = 1;
      check_case<std::uint8_t, OffsetT>(c, rng);
      c.inner = 2;  // 8-byte rows
      c.max_len = 40;
      check_case<float, OffsetT>(c, rng);
    }
  }
}

TEMPLATE_TEST_CASE("conversions with grids of one and three blocks match the reference", "[convert][gpu]",
                   std::int32_t, std::int64_t) {
  // The conversion kernels walk their tiles grid-stride, a full grid often in one round on these inputs; capped at
  // 1 or 3 blocks (set_grid_cap) every block takes many, the token groups' sequence search starting afresh at
  // each. Narrow rows (tiles of 4096 tokens in the token groups: lengths at scale 400, several tiles) with the
  // token groups on and off, and the vector kernels' wider rows, against the reference, with rows before
  // offsets[0] and past offsets[batch] left untouched.
  using OffsetT = TestType;
  auto rng = test::make_rng(207);
  const RestoreTokenGroups restore;
  const test::RestoreGridCap restore_cap;
  for (unsigned cap : {1u, 3u}) {
    detail::set_grid_cap(cap);
    for (test::Regime regime : test::all_regimes()) {
      for (Align align : kAligns) {
        INFO("grid of at most " << cap << " blocks, regime " << test::regime_name(regime));
        Case c;
        c.lead_rows = 2;
        c.extra_rows = 3;
        c.align = align;
        c.trunc = align == Align::kLeft ? Truncate::kRight : Truncate::kLeft;
        c.lengths = test::make_lengths(regime, rng, 400);
        c.max_len = max_lens_around(c.lengths).front();
        for (bool token_groups : {true, false}) {
          INFO((token_groups ? "token groups" : "vector kernels"));
          detail::set_convert_token_groups_enabled(token_groups);
          c.inner = 1;
          check_case<std::uint8_t, OffsetT>(c, rng);
          check_case<float, OffsetT>(c, rng);
          c.inner = 2;
          check_case<half, OffsetT>(c, rng);
        }
        c.lengths = test::make_lengths(regime, rng, 40);
        c.max_len = max_lens_around(c.lengths).front();
        c.inner = 3;
        check_case<float, OffsetT>(c, rng);
        c.inner = 64;
        check_case<bfloat16, OffsetT>(c, rng);
      }
    }
  }
}

TEMPLATE_TEST_CASE("malformed offsets never fault", "[convert][gpu][errors]", std::int32_t, std::int64_t) {
  using OffsetT = TestType;
  auto rng = test::make_rng(205);
  const std::int64_t nnz = 10;
  const std::vector<std::vector<OffsetT>> bad_offsets = {
      {0, 5, 3, 10},          // decreasing
      {0, 4, 100},            // beyond nnz
      {-5, 2, 6},             // negative
      {7, 3, -2, 50, 1},      // everything wrong
      {0, 10, 0, 10, 0, 10},  // overlapping sequences
  };
  const RestoreTokenGroups restore;
  for (const std::vector<OffsetT>& offsets : bad_offsets) {
    const std::int64_t batch = static_cast<std::int64_t>(offsets.size()) - 1;
    DeviceBuffer<OffsetT> d_offsets(offsets);
    // At D = 1 the token groups, and with them off the vector kernels (D = 64: vector kernels either way).
    for (std::int64_t inner : {1, 64}) {
      for (std::int64_t max_len : {0, 3, 20}) {
        for (bool token_groups : {true, false}) {
          detail::set_convert_token_groups_enabled(token_groups);
          for (Align align : kAligns) {
            for (Truncate trunc : kTruncs) {
              INFO("offsets[1] " << offsets[1] << ", inner " << inner << ", max_len " << max_len
                                 << (token_groups ? ", token groups" : ", vector kernels"));
              const HostArray<float> values = random_array<float>(static_cast<std::size_t>(nnz * inner), rng);
              DeviceArray<float> d_values(values.size(), 0);
              d_values.upload(values);
              DeviceArray<float> d_padded(static_cast<std::size_t>(batch * max_len * inner), 0);
              d_padded.poison();
              const RaggedView<const float, OffsetT> src{d_values.data(), d_offsets.data(), batch, nnz, inner};
              run_op([&](void* ws, std::size_t& bytes) {
                return ragged_to_padded(ws, bytes, src, PaddedView<float>{d_padded.data(), batch, max_len, inner},
                                        1.0f, align, trunc, nullptr);
              });
              // Each padded element depends only on its own clamped sequence, so even here it matches the
              // reference, which clamps the same way.
              HostArray<float> expected(d_padded.count, poison_byte<float>());
              reference::ragged_to_padded<float, OffsetT>({values.data(), offsets.data(), batch, nnz, inner},
                                                          {expected.data(), batch, max_len, inner}, 1.0f, align,
                                                          trunc);
              require_same_bytes(d_padded.download(), expected);

              // Into a buffer with guards on both sides: a write out of bounds is seen on any device.
              test::GuardedBuffer<float> back(values.size());
              const RaggedView<float, OffsetT> dst{back.data(), d_offsets.data(), batch, nnz, inner};
              run_op([&](void* ws, std::size_t& bytes) {
                return padded_to_ragged(ws, bytes, PaddedView<const float>{d_padded.data(), batch, max_len, inner},
                                        dst, 2.0f, align, trunc, nullptr);
              });
              REQUIRE_CUDA(cudaGetLastError());
              REQUIRE(back.guards_intact());
            }
          }
        }
      }
    }
  }
}

// The argument checks themselves run without a GPU in tests/cpu/test_argument_checks.cpp; this case checks that
// a run that fails them leaves the device data alone.
TEST_CASE("a conversion that fails its argument checks enqueues nothing", "[convert][gpu][errors]") {
  DeviceBuffer<float> values(12);
  DeviceBuffer<float> padded(12);
  const std::vector<std::int32_t> host_offsets = {0, 2, 6};
  DeviceBuffer<std::int32_t> offsets(host_offsets);
  const RaggedView<const float, std::int32_t> src{values.data(), offsets.data(), 2, 6, 2};
  const PaddedView<float> dst{padded.data(), 2, 3, 2};
  std::size_t bytes = 0;

  padded.fill_bytes(0x11);
  DeviceBuffer<unsigned char> one_byte(1);
  auto d = dst;
  d.batch = 5;
  REQUIRE(ragged_to_padded(one_byte.data(), bytes, src, d, 0.0f, Align::kLeft, Truncate::kRight, nullptr) ==
          Status::kInvalidArgument);
  const std::vector<float> untouched = padded.to_host();
  for (float v : untouched) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &v, sizeof(bits));
    REQUIRE(bits == 0x11111111u);
  }
}

TEST_CASE("both conversions can be captured in a CUDA graph and replayed", "[convert][gpu][graph]") {
  auto rng = test::make_rng(331);
  const std::vector<std::int64_t> lengths = test::make_lengths(test::Regime::kRandom, rng, 60);
  const std::int64_t batch = static_cast<std::int64_t>(lengths.size()), inner = 5;
  const std::int64_t max_len = *std::max_element(lengths.begin(), lengths.end()) + 2;
  std::vector<std::int64_t> offsets(lengths.size() + 1);
  REQUIRE_OK(lengths_to_offsets_host(lengths.data(), batch, offsets.data()));
  const std::int64_t nnz = offsets.back();
  const std::vector<float> values = test::random_values<float>(static_cast<std::size_t>(nnz * inner), rng);
  const std::vector<float> padded_in =
      test::random_values<float>(static_cast<std::size_t>(batch * max_len * inner), rng);
  DeviceBuffer<std::int64_t> d_offsets(offsets);
  DeviceBuffer<float> d_values(values), d_padded_in(padded_in);
  DeviceBuffer<float> d_padded(padded_in.size()), d_ragged(values.size());
  const RaggedView<const float, std::int64_t> src{d_values.data(), d_offsets.data(), batch, nnz, inner};
  const PaddedView<float> padded{d_padded.data(), batch, max_len, inner};
  const PaddedView<const float> padded_src{d_padded_in.data(), batch, max_len, inner};
  const RaggedView<float, std::int64_t> ragged_dst{d_ragged.data(), d_offsets.data(), batch, nnz, inner};
  std::size_t to_padded_bytes = 0, to_ragged_bytes = 0;
  REQUIRE_OK(ragged_to_padded(nullptr, to_padded_bytes, src, padded, 0.5f, Align::kRight, Truncate::kLeft, nullptr));
  REQUIRE_OK(padded_to_ragged(nullptr, to_ragged_bytes, padded_src, ragged_dst, -1.0f, Align::kRight,
                              Truncate::kLeft, nullptr));
  DeviceBuffer<unsigned char> ws(std::max<std::size_t>(std::max(to_padded_bytes, to_ragged_bytes), 1));
  test::poison_workspace(ws);

  test::CapturedGraph graph([&](cudaStream_t stream) {
    const Status first = ragged_to_padded(ws.data(), to_padded_bytes, src, padded, 0.5f, Align::kRight,
                                          Truncate::kLeft, stream);
    const Status second = padded_to_ragged(ws.data(), to_ragged_bytes, padded_src, ragged_dst, -1.0f, Align::kRight,
                                           Truncate::kLeft, stream);
    return first != Status::kSuccess ? first : second;
  });
  REQUIRE_OK(graph.enqueued);
  std::vector<float> expected_padded(padded_in.size()), expected_ragged(values.size());
  reference::ragged_to_padded<float, std::int64_t>({values.data(), offsets.data(), batch, nnz, inner},
                                                   {expected_padded.data(), batch, max_len, inner}, 0.5f,
                                                   Align::kRight, Truncate::kLeft);
  reference::padded_to_ragged<float, std::int64_t>({padded_in.data(), batch, max_len, inner},
                                                   {expected_ragged.data(), offsets.data(), batch, nnz, inner}, -1.0f,
                                                   Align::kRight, Truncate::kLeft);
  for (int replay = 0; replay < 2; ++replay) {
    test::poison(d_padded);
    test::poison(d_ragged);
    REQUIRE_CUDA(cudaDeviceSynchronize());
    REQUIRE_CUDA(graph.launch());
    REQUIRE_BITWISE_EQUAL(d_padded.to_host(), expected_padded);
    REQUIRE_BITWISE_EQUAL(d_ragged.to_host(), expected_ragged);
  }
}

TEMPLATE_TEST_CASE("RaggedTensor::to_padded and from_padded", "[convert][gpu][tensor]", float, half, std::int64_t) {
  using T = TestType;
  auto rng = test::make_rng(206);
  for (test::Regime regime : test::all_regimes()) {
    INFO("regime " << test::regime_name(regime));
    const std::vector<std::int64_t> lengths = test::make_lengths(regime, rng, 20);
    std::int64_t nnz = 0;
    for (std::int64_t l : lengths) nnz += l;
    const std::vector<std::int64_t> inner_dims = {2, 3};
    const std::vector<T> values = test::random_values<T>(static_cast<std::size_t>(nnz * 6), rng);
    const auto tensor = RaggedTensor<T, std::int32_t>::from_host(values, lengths, inner_dims);
    const std::vector<std::int32_t> offsets = tensor.offsets_to_host();
    const std::int64_t batch = tensor.batch();
    const std::int64_t longest = lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
    const T pad = test::from_double<T>(9);

    // Default: max_len = the longest sequence, left aligned; the round trip gives the values back.
    const PaddedTensor<T> padded = tensor.to_padded(pad);
    REQUIRE(padded.batch == batch);
    REQUIRE(padded.max_len == longest);
    REQUIRE(padded.inner_dims == inner_dims);
    std::vector<T> expected(static_cast<std::size_t>(batch * longest * 6));
    reference::ragged_to_padded<T, std::int32_t>({values.data(), offsets.data(), batch, nnz, 6},
                                                 {expected.data(), batch, longest, 6}, pad, Align::kLeft,
                                                 Truncate::kRight);
    REQUIRE_BITWISE_EQUAL(padded.data.to_host(), expected);
    const auto back = RaggedTensor<T, std::int32_t>::from_padded(padded, lengths, test::from_double<T>(-1));
    REQUIRE(back.nnz() == nnz);
    REQUIRE(back.inner_dims() == inner_dims);
    REQUIRE_BITWISE_EQUAL(back.values_to_host(), values);

    // A shorter max_len, right aligned, keeping the last tokens; back again, the dropped tokens are the fill.
    const std::int64_t short_len = longest / 2;
    const PaddedTensor<T> cut = tensor.to_padded(pad, short_len, Align::kRight, Truncate::kLeft);
    std::vector<T> expected_cut(static_cast<std::size_t>(batch * short_len * 6));
    reference::ragged_to_padded<T, std::int32_t>({values.data(), offsets.data(), batch, nnz, 6},
                                                 {expected_cut.data(), batch, short_len, 6}, pad, Align::kRight,
                                                 Truncate::kLeft);
    REQUIRE_BITWISE_EQUAL(cut.data.to_host(), expected_cut);
    const T fill = test::from_double<T>(-1);
    const auto restored =
        RaggedTensor<T, std::int32_t>::from_padded(cut, lengths, fill, Align::kRight, Truncate::kLeft);
    std::vector<T> expected_restored(values.size());
    reference::padded_to_ragged<T, std::int32_t>({expected_cut.data(), batch, short_len, 6},
                                                 {expected_restored.data(), offsets.data(), batch, nnz, 6}, fill,
                                                 Align::kRight, Truncate::kLeft);
    REQUIRE_BITWISE_EQUAL(restored.values_to_host(), expected_restored);
  }
  using Tensor = RaggedTensor<T, std::int32_t>;
  REQUIRE_THROWS_AS(Tensor::from_padded(PaddedTensor<T>{}, {1, 2}), Error);
}

TEST_CASE("a moved-from RaggedTensor is empty, and moving one into itself changes nothing", "[convert][gpu][tensor]") {
  using Tensor = RaggedTensor<float, std::int32_t>;
  auto rng = test::make_rng(208);
  const std::vector<std::int64_t> lengths{2, 0, 3};
  const std::vector<float> values = test::random_values<float>(5 * 4, rng);
  auto require_empty = [](const Tensor& t) {
    REQUIRE(t.batch() == 0);
    REQUIRE(t.nnz() == 0);
    REQUIRE(t.inner() == 1);
    REQUIRE(t.values().empty());
    REQUIRE(t.offsets().empty());
    REQUIRE(t.lengths_to_host().empty());  // once read offsets that had moved away
  };
  auto require_whole = [&](const Tensor& t) {
    REQUIRE(t.batch() == 3);
    REQUIRE(t.nnz() == 5);
    REQUIRE(t.inner_dims() == std::vector<std::int64_t>{4});
    REQUIRE(t.lengths_to_host() == lengths);
    REQUIRE_BITWISE_EQUAL(t.values_to_host(), values);
  };
  Tensor a = Tensor::from_host(values, lengths, {4});
  Tensor b = std::move(a);
  require_empty(a);
  require_whole(b);
  Tensor& alias = b;
  b = std::move(alias);
  require_whole(b);
  Tensor c = Tensor::from_host(std::vector<float>(3), {1, 2});
  c = std::move(b);
  require_empty(b);
  require_whole(c);
}

TEST_CASE("RaggedTensor::from_padded waits for the padded data on its own stream, without a host sync",
          "[convert][gpu][tensor]") {
  auto rng = test::make_rng(207);
  const std::vector<std::int64_t> lengths{7, 0, 12, 3};
  const std::vector<std::int32_t> offsets{0, 7, 7, 19, 22};
  const std::int64_t batch = 4, max_len = 12, inner = 4, nnz = 22;
  const std::vector<float> real = test::random_values<float>(static_cast<std::size_t>(batch * max_len * inner), rng);
  std::vector<float> expected(static_cast<std::size_t>(nnz * inner));
  reference::padded_to_ragged<float, std::int32_t>({real.data(), batch, max_len, inner},
                                                   {expected.data(), offsets.data(), batch, nnz, inner}, 0.0f,
                                                   Align::kLeft, Truncate::kRight);
  cudaStream_t padded_stream = nullptr;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&padded_stream, cudaStreamNonBlocking));
  {
    // The padded data holds poison until a copy that waits behind a long queue on its stream lands: if
    // from_padded (on the default stream) did not wait for that stream, it would read the poison.
    PaddedTensor<float> padded;
    padded.data = DeviceBuffer<float>(std::vector<float>(real.size(), 1000.0f), padded_stream);
    padded.batch = batch;
    padded.max_len = max_len;
    padded.inner_dims = {inner};
    const DeviceBuffer<float> real_data(real, padded_stream);  // uploaded, synchronised
    DeviceBuffer<unsigned char> busy(std::size_t{256} << 20, padded_stream);
    for (int i = 0; i < 8; ++i) REQUIRE_CUDA(cudaMemsetAsync(busy.data(), i, busy.bytes(), padded_stream));
    REQUIRE_CUDA(cudaMemcpyAsync(padded.data.data(), real_data.data(), real_data.bytes(), cudaMemcpyDeviceToDevice,
                                 padded_stream));
    const auto back = RaggedTensor<float, std::int32_t>::from_padded(padded, lengths);
    REQUIRE_BITWISE_EQUAL(back.values_to_host(), expected);
    REQUIRE_CUDA(cudaStreamSynchronize(padded_stream));
  }
  REQUIRE_CUDA(cudaStreamDestroy(padded_stream));
}
