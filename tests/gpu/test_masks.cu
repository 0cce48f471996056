// lengths_to_mask / lengths_to_additive_mask on the device against the CPU reference, bit for bit: both length
// types, bool / float / half / bfloat16 masks, both alignments, negative lengths and lengths beyond max_len,
// row widths that select every vector width, masks one element off their allocation and the 64-bit index path.
// The bad-argument errors are checked without a GPU in tests/cpu/test_argument_checks.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <type_traits>

#include "../../kernels/convert_launch.h"
#include "common/test_util.h"
#include "gpu/restore_setting.h"
#include "ragged/buffer.h"
#include "ragged/convert.h"
#include "ragged/reference.h"
#include "ragged/tensor.h"

using namespace ragged;

namespace {

constexpr unsigned char kPoison = 0x5a;  // neither a bool nor 0 / -inf in any mask type

template <typename LengthT>
std::vector<LengthT> random_lengths(std::int64_t batch, std::int64_t max_len, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::int64_t> length(-3, max_len + 5);
  std::vector<LengthT> lengths(static_cast<std::size_t>(batch));
  for (auto& l : lengths) l = static_cast<LengthT>(length(rng));
  return lengths;
}

// Runs the op on a poisoned mask placed `shift` elements into its allocation, returns the mask's bytes.
template <typename MaskT, typename Op>
std::vector<unsigned char> run_mask(std::int64_t count, std::int64_t shift, Op&& op) {
  DeviceBuffer<unsigned char> buffer(static_cast<std::size_t>((count + shift) * sizeof(MaskT)) + 1);
  buffer.fill_bytes(kPoison);
  MaskT* mask = count == 0 ? nullptr : reinterpret_cast<MaskT*>(buffer.data()) + shift;
  std::size_t bytes = 777;
  REQUIRE_OK(op(nullptr, bytes, mask));
  REQUIRE(bytes == 1);
  DeviceBuffer<unsigned char> one_byte(1);
  REQUIRE_OK(op(one_byte.data(), bytes, mask));
  REQUIRE_CUDA(cudaDeviceSynchronize());
  std::vector<unsigned char> out(static_cast<std::size_t>(count * sizeof(MaskT)));
  if (count > 0) REQUIRE_CUDA(cudaMemcpy(out.data(), mask, out.size(), cudaMemcpyDeviceToHost));
  return out;
}

void require_same_bytes(const std::vector<unsigned char>& got, const std::vector<unsigned char>& expected,
                        std::size_t elem_bytes) {
  REQUIRE(got.size() == expected.size());
  std::int64_t mismatch = -1;
  for (std::size_t i = 0; i < got.size() && mismatch < 0; ++i)
    if (got[i] != expected[i]) mismatch = static_cast<std::int64_t>(i / elem_bytes);
  INFO("first mismatch at element " << mismatch);
  REQUIRE(mismatch == -1);
}

// The mask of element type T (bool: lengths_to_mask; else lengths_to_additive_mask) against the reference.
template <typename LengthT, typename T>
void check_mask(const std::vector<LengthT>& lengths, const LengthT* d_lengths, std::int64_t max_len, Align align,
                std::int64_t shift) {
  const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
  const std::int64_t count = batch * max_len;
  const std::vector<unsigned char> got = run_mask<T>(count, shift, [&](void* ws, std::size_t& bytes, T* mask) {
    if constexpr (std::is_same<T, bool>::value)
      return lengths_to_mask(ws, bytes, d_lengths, batch, max_len, align, mask, nullptr, nullptr);
    else
      return lengths_to_additive_mask(ws, bytes, d_lengths, batch, max_len, align, mask, nullptr, nullptr);
  });
  std::vector<unsigned char> expected(got.size(), kPoison);
  T* want = reinterpret_cast<T*>(expected.data());
  if constexpr (std::is_same<T, bool>::value)
    reference::lengths_to_mask(lengths.data(), batch, max_len, align, want);
  else
    reference::lengths_to_additive_mask(lengths.data(), batch, max_len, align, want);
  require_same_bytes(got, expected, sizeof(T));
}

// The bool mask and the three additive masks of `lengths` on the device against the reference, bit for bit.
template <typename LengthT>
void check_every_mask(const std::vector<LengthT>& lengths, const LengthT* d_lengths, std::int64_t max_len,
                      Align align, std::int64_t shift) {
  check_mask<LengthT, bool>(lengths, d_lengths, max_len, align, shift);
  check_mask<LengthT, float>(lengths, d_lengths, max_len, align, shift);
  check_mask<LengthT, half>(lengths, d_lengths, max_len, align, shift);
  check_mask<LengthT, bfloat16>(lengths, d_lengths, max_len, align, shift);
}

}  // namespace

TEMPLATE_TEST_CASE("masks match the reference", "[mask][gpu]", std::int32_t, std::int64_t) {
  using LengthT = TestType;
  auto rng = test::make_rng(301);
  for (std::int64_t batch : {0, 1, 5, 300}) {
    // Row widths that select 16-, 8-, 4-, 2- and 1-byte vectors for each element size.
    for (std::int64_t max_len : {0, 1, 2, 3, 4, 7, 8, 16, 33, 64, 1000}) {
      const std::vector<LengthT> lengths = random_lengths<LengthT>(batch, max_len, rng);
      DeviceBuffer<LengthT> d_lengths(lengths);
      for (Align align : {Align::kLeft, Align::kRight}) {
        for (std::int64_t shift : {0, 1}) {
          INFO("batch " << batch << ", max_len " << max_len << ", align " << static_cast<int>(align) << ", shift "
                        << shift);
          check_every_mask(lengths, d_lengths.data(), max_len, align, shift);
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("masks with grids of one and three blocks match the reference", "[mask][gpu]", std::int32_t,
                   std::int64_t) {
  // The mask kernel walks its vectors grid-stride, a full grid in one round on these sizes; capped at 1 or 3
  // blocks (set_grid_cap) each thread takes many, across rows. Narrow rows (1-byte bool vectors) and wide ones
  // (16-byte vectors), and the first negative length among many rows found whichever round reaches it.
  using LengthT = TestType;
  auto rng = test::make_rng(306);
  const test::RestoreGridCap restore;
  for (unsigned cap : {1u, 3u}) {
    detail::set_grid_cap(cap);
    for (std::int64_t max_len : {7, 1000}) {
      const std::int64_t batch = 300;
      const std::vector<LengthT> lengths = random_lengths<LengthT>(batch, max_len, rng);
      DeviceBuffer<LengthT> d_lengths(lengths);
      for (Align align : {Align::kLeft, Align::kRight}) {
        INFO("grid of at most " << cap << " blocks, max_len " << max_len << ", align " << static_cast<int>(align));
        check_every_mask(lengths, d_lengths.data(), max_len, align, 0);
      }
    }
    INFO("grid of at most " << cap << " blocks");
    std::vector<LengthT> lengths(5000, LengthT{4});
    lengths[4999] = LengthT{-2};
    lengths[4321] = LengthT{-1};
    DeviceBuffer<LengthT> d_lengths(lengths);
    DeviceBuffer<CheckResult> d_check(1);
    DeviceBuffer<bool> mask(lengths.size() * 6);
    d_check.fill_bytes(0x00);  // a stale "failure at index 0": the op must reset it
    Workspace workspace;
    run_with_workspace(workspace, [&](void* ws, std::size_t& bytes) {
      return lengths_to_mask(ws, bytes, d_lengths.data(), 5000, 6, Align::kLeft, mask.data(), d_check.data(),
                             nullptr);
    });
    const CheckResult check = d_check.to_host()[0];
    REQUIRE(check.status() == Status::kNegativeLength);
    REQUIRE(check.index() == 4321);
  }
}

TEMPLATE_TEST_CASE("masks through the 64-bit index path", "[mask][gpu]", std::int32_t, std::int64_t) {
  using LengthT = TestType;
  auto rng = test::make_rng(302);
  const std::int64_t batch = 37;
  for (std::int64_t max_len : {5, 48}) {
    const std::vector<LengthT> lengths = random_lengths<LengthT>(batch, max_len, rng);
    DeviceBuffer<LengthT> d_lengths(lengths);
    for (Align align : {Align::kLeft, Align::kRight}) {
      const std::vector<unsigned char> got =
          run_mask<bool>(batch * max_len, 0, [&](void* ws, std::size_t& bytes, bool* mask) {
            if (ws == nullptr) {  // the launcher has no query phase: answer it here, as the ops do
              bytes = 1;
              return Status::kSuccess;
            }
            return detail::launch_lengths_to_mask(d_lengths.data(), batch, max_len, align, mask, 1, 1u, 0u, nullptr,
                                                  nullptr, false);
          });
      std::vector<unsigned char> expected(got.size(), kPoison);
      reference::lengths_to_mask(lengths.data(), batch, max_len, align, reinterpret_cast<bool*>(expected.data()));
      require_same_bytes(got, expected, 1);
    }
  }
}

TEMPLATE_TEST_CASE("masks record the first negative length", "[mask][gpu][errors]", std::int32_t, std::int64_t) {
  using LengthT = TestType;
  const std::int64_t max_len = 6;
  DeviceBuffer<CheckResult> d_check(1);
  auto run = [&](const std::vector<LengthT>& lengths) {
    const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
    DeviceBuffer<LengthT> d_lengths(lengths);
    DeviceBuffer<half> mask(static_cast<std::size_t>(batch * max_len));
    test::poison(mask);        // most slots expect 0.0: a slot the op skips must not hold it already
    d_check.fill_bytes(0x00);  // a stale "failure at index 0": the op must reset it
    Workspace workspace;
    run_with_workspace(workspace, [&](void* ws, std::size_t& bytes) {
      return lengths_to_additive_mask(ws, bytes, d_lengths.data(), batch, max_len, Align::kRight, mask.data(),
                                      d_check.data(), nullptr);
    });
    std::vector<half> expected(static_cast<std::size_t>(batch * max_len));
    reference::lengths_to_additive_mask(lengths.data(), batch, max_len, Align::kRight, expected.data());
    REQUIRE_BITWISE_EQUAL(mask.to_host(), expected);
    return d_check.to_host()[0];
  };
  // Many rows, so that the failing rows land in different blocks; the lowest index wins.
  std::vector<LengthT> lengths(5000, LengthT{4});
  lengths[4321] = LengthT{-1};
  lengths[1234] = LengthT{-7};
  lengths[4999] = LengthT{-2};
  CheckResult check = run(lengths);
  REQUIRE(check.status() == Status::kNegativeLength);
  REQUIRE(check.index() == 1234);
  lengths[1234] = LengthT{9};  // longer than max_len is fine: the row is full
  lengths[4321] = LengthT{0};
  lengths[4999] = LengthT{6};
  check = run(lengths);
  REQUIRE(check.ok());
}

TEST_CASE("masks can be captured in a CUDA graph and replayed, the length check included", "[mask][gpu][graph]") {
  auto rng = test::make_rng(305);
  const std::int64_t batch = 700, max_len = 33;
  std::vector<std::int32_t> lengths = random_lengths<std::int32_t>(batch, max_len, rng);
  for (auto& l : lengths) l = std::max(l, 0);
  lengths[517] = -4;  // recorded by the check on every replay
  DeviceBuffer<std::int32_t> d_lengths(lengths);
  DeviceBuffer<bool> mask(static_cast<std::size_t>(batch * max_len));
  DeviceBuffer<bfloat16> additive(static_cast<std::size_t>(batch * max_len));
  DeviceBuffer<CheckResult> d_check(1);
  std::size_t mask_bytes = 0, additive_bytes = 0;
  REQUIRE_OK(lengths_to_mask(nullptr, mask_bytes, d_lengths.data(), batch, max_len, Align::kRight, mask.data(),
                             d_check.data(), nullptr));
  REQUIRE_OK(lengths_to_additive_mask(nullptr, additive_bytes, d_lengths.data(), batch, max_len, Align::kLeft,
                                      additive.data(), d_check.data(), nullptr));
  DeviceBuffer<unsigned char> ws(std::max<std::size_t>(std::max(mask_bytes, additive_bytes), 1));

  test::CapturedGraph graph([&](cudaStream_t stream) {
    const Status first = lengths_to_mask(ws.data(), mask_bytes, d_lengths.data(), batch, max_len, Align::kRight,
                                         mask.data(), nullptr, stream);
    const Status second = lengths_to_additive_mask(ws.data(), additive_bytes, d_lengths.data(), batch, max_len,
                                                   Align::kLeft, additive.data(), d_check.data(), stream);
    return first != Status::kSuccess ? first : second;
  });
  REQUIRE_OK(graph.enqueued);
  std::vector<unsigned char> expected_mask(static_cast<std::size_t>(batch * max_len));
  std::vector<bfloat16> expected_additive(static_cast<std::size_t>(batch * max_len));
  reference::lengths_to_mask(lengths.data(), batch, max_len, Align::kRight,
                             reinterpret_cast<bool*>(expected_mask.data()));
  reference::lengths_to_additive_mask(lengths.data(), batch, max_len, Align::kLeft, expected_additive.data());
  for (int replay = 0; replay < 2; ++replay) {
    mask.fill_bytes(kPoison);
    test::poison(additive);
    d_check.fill_bytes(0x00);  // a stale "failure at index 0": the replay must reset it
    REQUIRE_CUDA(cudaDeviceSynchronize());
    REQUIRE_CUDA(graph.launch());
    std::vector<unsigned char> got_mask(expected_mask.size());
    REQUIRE_CUDA(cudaMemcpy(got_mask.data(), mask.data(), got_mask.size(), cudaMemcpyDeviceToHost));
    require_same_bytes(got_mask, expected_mask, 1);
    REQUIRE_BITWISE_EQUAL(additive.to_host(), expected_additive);
    const CheckResult check = d_check.to_host()[0];
    REQUIRE(check.status() == Status::kNegativeLength);
    REQUIRE(check.index() == 517);
  }
}

TEST_CASE("bool masks round-trip through the owning buffer", "[mask][gpu]") {
  // DeviceBuffer<bool> stages std::vector<bool> (bit-packed, no data()) through bytes in both directions.
  const std::vector<std::int32_t> lengths = {3, 0, 5, 1};
  const std::int64_t batch = 4, max_len = 4;
  DeviceBuffer<std::int32_t> d_lengths(lengths);
  // Poisoned with each value in turn (every slot "real", then every slot "padding"), so that a slot the op skips
  // fails one of the two runs.
  for (const bool poison : {true, false}) {
    DeviceBuffer<bool> mask(std::vector<bool>(batch * max_len, poison));
    Workspace workspace;
    run_with_workspace(workspace, [&](void* ws, std::size_t& bytes) {
      return lengths_to_mask(ws, bytes, d_lengths.data(), batch, max_len, Align::kLeft, mask.data(), nullptr,
                             nullptr);
    });
    const std::vector<bool> got = mask.to_host();
    REQUIRE(got.size() == static_cast<std::size_t>(batch * max_len));
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t t = 0; t < max_len; ++t) {
        INFO("poison " << poison << " sequence " << b << " token " << t);
        REQUIRE(got[b * max_len + t] == (t < std::min<std::int64_t>(lengths[b], max_len)));
      }
  }
}

TEMPLATE_TEST_CASE("RaggedTensor::padding_mask and additive_mask match the reference", "[mask][gpu][tensor]",
                   std::int32_t, std::int64_t) {
  // The three masks of a tensor differ from one another (width, alignment, type) and every regime's lengths
  // differ, so a mask the op left unwritten cannot pass on what an earlier one left in the memory pool.
  using OffsetT = TestType;
  auto rng = test::make_rng(214);
  for (test::Regime regime : test::all_regimes()) {
    INFO("regime " << test::regime_name(regime));
    const std::vector<std::int64_t> lengths = test::make_lengths(regime, rng, 20);
    std::int64_t nnz = 0;
    for (std::int64_t l : lengths) nnz += l;
    const auto x = RaggedTensor<float, OffsetT>::from_host(test::random_values<float>(nnz * 3, rng), lengths, {3});
    const std::int64_t batch = x.batch();
    const std::int64_t longest = lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());

    const std::vector<bool> got = x.padding_mask().to_host();  // the longest, left aligned
    std::vector<unsigned char> want(static_cast<std::size_t>(batch * longest), kPoison);
    reference::lengths_to_mask(lengths.data(), batch, longest, Align::kLeft, reinterpret_cast<bool*>(want.data()));
    REQUIRE(got == std::vector<bool>(want.begin(), want.end()));

    const std::int64_t short_len = longest / 2 + 1;  // some sequences fill their rows
    const std::vector<bool> got_short = x.padding_mask(short_len, Align::kRight).to_host();
    std::vector<unsigned char> want_short(static_cast<std::size_t>(batch * short_len), kPoison);
    reference::lengths_to_mask(lengths.data(), batch, short_len, Align::kRight,
                               reinterpret_cast<bool*>(want_short.data()));
    REQUIRE(got_short == std::vector<bool>(want_short.begin(), want_short.end()));

    const std::int64_t long_len = longest + 3;
    const std::vector<half> got_additive = x.template additive_mask<half>(long_len).to_host();
    std::vector<half> want_additive(static_cast<std::size_t>(batch * long_len));
    reference::lengths_to_additive_mask(lengths.data(), batch, long_len, Align::kLeft, want_additive.data());
    REQUIRE_BITWISE_EQUAL(got_additive, want_additive);
  }
}
