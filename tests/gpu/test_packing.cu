// Device packing order, pack and unpack against the CPU reference: bitwise equality of every layout array and
// of the packed / unpacked data, across regimes, dtypes, offset types and inner sizes; the exact workspace
// query, truncation by max_steps, graph capture and malformed inputs. The bad-argument errors are checked without
// a GPU in tests/cpu/test_argument_checks.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <vector>

#include "common/test_util.h"
#include "gpu/restore_setting.h"
#include "ragged/packed_sequence.h"
#include "ragged/packing.h"
#include "ragged/reference.h"

using namespace ragged;

namespace {

template <typename T_, typename O_>
struct Case {
  using T = T_;
  using OffsetT = O_;
};

template <typename OffsetT>
std::vector<OffsetT> offsets_of(const std::vector<std::int64_t>& lengths) {
  std::vector<OffsetT> offsets(lengths.size() + 1, 0);
  for (std::size_t b = 0; b < lengths.size(); ++b) offsets[b + 1] = static_cast<OffsetT>(offsets[b] + lengths[b]);
  return offsets;
}

std::int64_t longest(const std::vector<std::int64_t>& lengths) {
  return lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
}

// Every regime, plus many equal lengths (the stability of the sort).
std::vector<std::vector<std::int64_t>> all_length_sets(std::mt19937_64& rng) {
  std::vector<std::vector<std::int64_t>> sets;
  for (test::Regime regime : test::all_regimes()) sets.push_back(test::make_lengths(regime, rng));
  std::uniform_int_distribution<int> pick(0, 2);
  std::vector<std::int64_t> ties(3000);  // above CUB's single-tile size
  for (auto& l : ties) l = std::vector<std::int64_t>{0, 3, 7}[pick(rng)];
  sets.push_back(ties);
  sets.push_back(std::vector<std::int64_t>(50, 5));
  return sets;
}

// The layout arrays on the device, poisoned so that an entry the op forgets to write fails the comparison.
template <typename OffsetT>
struct DeviceLayout {
  DeviceBuffer<std::int64_t> sorted_indices, unsorted_indices;
  DeviceBuffer<OffsetT> sorted_lengths, batch_sizes, step_offsets;
  std::int64_t batch, max_steps;

  DeviceLayout(std::int64_t batch_, std::int64_t max_steps_)
      : sorted_indices(static_cast<std::size_t>(batch_)),
        unsorted_indices(static_cast<std::size_t>(batch_)),
        sorted_lengths(static_cast<std::size_t>(batch_)),
        batch_sizes(static_cast<std::size_t>(max_steps_)),
        step_offsets(static_cast<std::size_t>(max_steps_ + 1)),
        batch(batch_),
        max_steps(max_steps_) {
    test::poison(sorted_indices);
    test::poison(unsorted_indices);
    test::poison(sorted_lengths);
    test::poison(batch_sizes);
    test::poison(step_offsets);
  }
  PackedLayout<OffsetT> view() {
    return PackedLayout<OffsetT>{batch,          max_steps,           sorted_indices.data(), unsorted_indices.data(),
                                 sorted_lengths.data(), batch_sizes.data(), step_offsets.data()};
  }
};

// Runs packing_order with exactly the queried workspace (after checking that one byte less is refused) and
// returns the copied-back CheckResult, which starts poisoned so that a missing reset shows.
template <typename OffsetT>
CheckResult run_packing_order(const DeviceBuffer<OffsetT>& offsets, DeviceLayout<OffsetT>& layout) {
  std::size_t bytes = 0;
  REQUIRE_OK((packing_order<OffsetT>(nullptr, bytes, offsets.data(), layout.view(), nullptr, nullptr)));
  DeviceBuffer<unsigned char> workspace(std::max<std::size_t>(bytes, 1));
  test::poison_workspace(workspace);
  if (bytes > 0) {
    std::size_t less = bytes - 1;
    REQUIRE(packing_order<OffsetT>(workspace.data(), less, offsets.data(), layout.view(), nullptr, nullptr) ==
            Status::kWorkspaceTooSmall);
  }
  DeviceBuffer<CheckResult> check(1);
  check.fill_bytes(0);
  REQUIRE_OK((packing_order<OffsetT>(workspace.data(), bytes, offsets.data(), layout.view(), check.data(), nullptr)));
  REQUIRE_CUDA(cudaDeviceSynchronize());
  return check.to_host()[0];
}

// The five layout arrays, copied back, against the reference's.
template <typename OffsetT>
void require_layout_equal(const DeviceBuffer<std::int64_t>& sorted_indices,
                          const DeviceBuffer<std::int64_t>& unsorted_indices, const DeviceBuffer<OffsetT>& sorted_lengths,
                          const DeviceBuffer<OffsetT>& batch_sizes, const DeviceBuffer<OffsetT>& step_offsets,
                          const reference::HostPackedLayout<OffsetT>& want) {
  {
    INFO("sorted_indices");
    REQUIRE_BITWISE_EQUAL(sorted_indices.to_host(), want.sorted_indices);
  }
  {
    INFO("unsorted_indices");
    REQUIRE_BITWISE_EQUAL(unsorted_indices.to_host(), want.unsorted_indices);
  }
  {
    INFO("sorted_lengths");
    REQUIRE_BITWISE_EQUAL(sorted_lengths.to_host(), want.sorted_lengths);
  }
  {
    INFO("batch_sizes");
    REQUIRE_BITWISE_EQUAL(batch_sizes.to_host(), want.batch_sizes);
  }
  {
    INFO("step_offsets");
    REQUIRE_BITWISE_EQUAL(step_offsets.to_host(), want.step_offsets);
  }
}

template <typename OffsetT>
void require_layout_equal(DeviceLayout<OffsetT>& device, const reference::HostPackedLayout<OffsetT>& want) {
  require_layout_equal(device.sorted_indices, device.unsorted_indices, device.sorted_lengths, device.batch_sizes,
                       device.step_offsets, want);
}

// The lowest index of a sequence longer than max_steps, or -1.
std::int64_t first_too_long(const std::vector<std::int64_t>& lengths, std::int64_t max_steps) {
  for (std::size_t b = 0; b < lengths.size(); ++b)
    if (lengths[b] > max_steps) return static_cast<std::int64_t>(b);
  return -1;
}

// Packs and unpacks `src` through the device layout and compares with the reference, starting from the poisoned
// outputs on both sides so that rows the ops must not write are checked as well. Returns the unpacked values.
template <typename T, typename OffsetT>
std::vector<T> check_pack_unpack(const std::vector<T>& src, const std::vector<OffsetT>& host_offsets,
                                 const DeviceBuffer<OffsetT>& offsets, std::int64_t inner,
                                 DeviceLayout<OffsetT>& layout, const reference::HostPackedLayout<OffsetT>& host_layout,
                                 std::size_t misalign = 0) {
  const std::int64_t batch = layout.batch;
  const std::int64_t nnz = static_cast<std::int64_t>(host_offsets.back());
  const std::size_t elems = static_cast<std::size_t>(nnz * inner);
  // `misalign` elements in front of every buffer force narrower vectors.
  std::vector<T> padded_src(misalign, T{});
  padded_src.insert(padded_src.end(), src.begin(), src.end());
  DeviceBuffer<T> d_src(padded_src);
  DeviceBuffer<T> packed(elems + misalign), unpacked(elems + misalign);
  test::poison(packed);
  test::poison(unpacked);
  const std::vector<T> poison_pattern = packed.to_host();

  std::size_t bytes = 0;
  const RaggedView<const T, OffsetT> src_view{d_src.data() + misalign, offsets.data(), batch, nnz, inner};
  const RaggedView<T, OffsetT> dst_view{unpacked.data() + misalign, offsets.data(), batch, nnz, inner};
  T* packed_rows = packed.data() + misalign;
  unsigned char stand_in = 0;  // no workspace needed (the query says 1 byte); any non-null pointer means "run"
  REQUIRE_OK(pack_sequences(static_cast<void*>(nullptr), bytes, src_view, layout.view(), packed_rows, nullptr));
  REQUIRE(bytes == 1);
  REQUIRE_OK(pack_sequences(&stand_in, bytes, src_view, layout.view(), packed_rows, nullptr));
  REQUIRE_OK(unpack_sequences(static_cast<void*>(nullptr), bytes, packed_rows, layout.view(), dst_view, nullptr));
  REQUIRE(bytes == 1);
  REQUIRE_OK(unpack_sequences(&stand_in, bytes, packed_rows, layout.view(), dst_view, nullptr));
  REQUIRE_CUDA(cudaDeviceSynchronize());

  std::vector<T> want_packed(poison_pattern.begin() + misalign, poison_pattern.end());
  reference::pack_sequences(RaggedView<const T, OffsetT>{src.data(), host_offsets.data(), batch, nnz, inner},
                            host_layout, want_packed.data());
  std::vector<T> got_packed = packed.to_host();
  got_packed.erase(got_packed.begin(), got_packed.begin() + misalign);
  {
    INFO("packed");
    REQUIRE_BITWISE_EQUAL(got_packed, want_packed);
  }
  std::vector<T> want_unpacked(poison_pattern.begin() + misalign, poison_pattern.end());
  reference::unpack_sequences(want_packed.data(), host_layout,
                              RaggedView<T, OffsetT>{want_unpacked.data(), host_offsets.data(), batch, nnz, inner});
  std::vector<T> got_unpacked = unpacked.to_host();
  got_unpacked.erase(got_unpacked.begin(), got_unpacked.begin() + misalign);
  {
    INFO("unpacked");
    REQUIRE_BITWISE_EQUAL(got_unpacked, want_unpacked);
  }
  return got_unpacked;
}

}  // namespace

TEMPLATE_TEST_CASE("packing_order matches the reference", "[packing][order]", std::int32_t, std::int64_t) {
  using OffsetT = TestType;
  auto rng = test::make_rng(201);
  for (const auto& lengths : all_length_sets(rng)) {
    const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
    const std::vector<OffsetT> host_offsets = offsets_of<OffsetT>(lengths);
    const DeviceBuffer<OffsetT> offsets(host_offsets);
    // The longest (usual), larger (trailing zero batch sizes), much larger (more radix passes: the result
    // lands in the other buffer), and 0.
    for (std::int64_t max_steps : {longest(lengths), longest(lengths) + 5, std::int64_t{1} << 17, std::int64_t{0}}) {
      INFO("batch " << batch << ", max_steps " << max_steps);
      DeviceLayout<OffsetT> layout(batch, max_steps);
      const CheckResult check = run_packing_order(offsets, layout);
      INFO(describe(check, "sequence"));
      REQUIRE(check.ok() == (first_too_long(lengths, max_steps) < 0));
      require_layout_equal(layout, reference::packing_order(host_offsets.data(), batch, max_steps));
    }
  }
}

TEMPLATE_TEST_CASE("packing_order on a large batch (multi-pass sort, many ties)", "[packing][order]", std::int32_t,
                   std::int64_t) {
  using OffsetT = TestType;
  auto rng = test::make_rng(202);
  std::uniform_int_distribution<std::int64_t> length(0, 300);
  std::vector<std::int64_t> lengths(200000);
  for (auto& l : lengths) l = length(rng);
  const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
  const std::vector<OffsetT> host_offsets = offsets_of<OffsetT>(lengths);
  const DeviceBuffer<OffsetT> offsets(host_offsets);
  for (std::int64_t max_steps : {std::int64_t{300}, std::int64_t{1} << 12, std::int64_t{1} << 20}) {
    INFO("max_steps " << max_steps);
    DeviceLayout<OffsetT> layout(batch, max_steps);
    REQUIRE(run_packing_order(offsets, layout).ok());
    require_layout_equal(layout, reference::packing_order(host_offsets.data(), batch, max_steps));
  }
}

TEMPLATE_TEST_CASE("packing_order with max_steps below the longest records the error and truncates",
                   "[packing][order][check]", std::int32_t, std::int64_t) {
  using OffsetT = TestType;
  auto rng = test::make_rng(203);
  for (const auto& lengths : all_length_sets(rng)) {
    const std::int64_t max_steps = longest(lengths) / 2;
    if (first_too_long(lengths, max_steps) < 0) continue;  // nothing longer: covered above
    const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
    const std::vector<OffsetT> host_offsets = offsets_of<OffsetT>(lengths);
    const DeviceBuffer<OffsetT> offsets(host_offsets);
    INFO("batch " << batch << ", max_steps " << max_steps);
    DeviceLayout<OffsetT> layout(batch, max_steps);
    const CheckResult check = run_packing_order(offsets, layout);
    REQUIRE(check.status() == Status::kInvalidArgument);
    REQUIRE(check.index() == first_too_long(lengths, max_steps));
    const auto host_layout = reference::packing_order(host_offsets.data(), batch, max_steps);
    require_layout_equal(layout, host_layout);
    // Pack / unpack stay inside the buffers: tokens past max_steps are neither packed nor unpacked.
    const std::int64_t nnz = static_cast<std::int64_t>(host_offsets.back());
    const std::vector<float> src = test::random_values<float>(static_cast<std::size_t>(nnz * 3), rng);
    check_pack_unpack<float, OffsetT>(src, host_offsets, offsets, 3, layout, host_layout);
  }
}

TEMPLATE_TEST_CASE("pack / unpack match the reference and round-trip", "[packing][pack]",
                   (Case<float, std::int32_t>), (Case<float, std::int64_t>), (Case<half, std::int32_t>),
                   (Case<half, std::int64_t>), (Case<bfloat16, std::int32_t>), (Case<bfloat16, std::int64_t>),
                   (Case<std::int32_t, std::int32_t>), (Case<std::int32_t, std::int64_t>),
                   (Case<std::int64_t, std::int32_t>), (Case<std::int64_t, std::int64_t>),
                   (Case<std::uint8_t, std::int32_t>), (Case<std::uint8_t, std::int64_t>)) {
  using T = typename TestType::T;
  using OffsetT = typename TestType::OffsetT;
  auto rng = test::make_rng(204);
  for (const auto& lengths : all_length_sets(rng)) {
    const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
    const std::vector<OffsetT> host_offsets = offsets_of<OffsetT>(lengths);
    const DeviceBuffer<OffsetT> offsets(host_offsets);
    const std::int64_t nnz = static_cast<std::int64_t>(host_offsets.back());
    for (std::int64_t max_steps : {longest(lengths), longest(lengths) + 3}) {
      DeviceLayout<OffsetT> layout(batch, max_steps);
      REQUIRE(run_packing_order(offsets, layout).ok());
      const auto host_layout = reference::packing_order(host_offsets.data(), batch, max_steps);
      for (std::int64_t inner : {1, 3, 64, 257}) {
        INFO("batch " << batch << ", nnz " << nnz << ", max_steps " << max_steps << ", inner " << inner);
        const std::vector<T> src = test::random_values<T>(static_cast<std::size_t>(nnz * inner), rng);
        const std::vector<T> round_trip = check_pack_unpack<T, OffsetT>(src, host_offsets, offsets, inner, layout,
                                                                       host_layout);
        INFO("unpack(pack(x)) == x");
        REQUIRE_BITWISE_EQUAL(round_trip, src);
      }
    }
  }
}

TEMPLATE_TEST_CASE("pack / unpack with buffers aligned only to their element (narrow vectors)", "[packing][pack]",
                   (Case<float, std::int32_t>), (Case<half, std::int64_t>), (Case<std::int64_t, std::int32_t>)) {
  using T = typename TestType::T;
  using OffsetT = typename TestType::OffsetT;
  auto rng = test::make_rng(205);
  const std::vector<std::int64_t> lengths = test::make_lengths(test::Regime::kZeroLengths, rng);
  const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
  const std::vector<OffsetT> host_offsets = offsets_of<OffsetT>(lengths);
  const DeviceBuffer<OffsetT> offsets(host_offsets);
  DeviceLayout<OffsetT> layout(batch, longest(lengths));
  REQUIRE(run_packing_order(offsets, layout).ok());
  const auto host_layout = reference::packing_order(host_offsets.data(), batch, longest(lengths));
  const std::int64_t nnz = static_cast<std::int64_t>(host_offsets.back());
  for (std::int64_t inner : {1, 64, 257}) {
    INFO("inner " << inner);
    const std::vector<T> src = test::random_values<T>(static_cast<std::size_t>(nnz * inner), rng);
    const std::vector<T> round_trip =
        check_pack_unpack<T, OffsetT>(src, host_offsets, offsets, inner, layout, host_layout, 1);
    REQUIRE_BITWISE_EQUAL(round_trip, src);
  }
}

TEMPLATE_TEST_CASE("packing_order, pack and unpack with grids of one and three blocks match the reference",
                   "[packing][order][pack]", std::int32_t, std::int64_t) {
  // The sort keys, the inverse permutation, the batch sizes and the row moves walk their items grid-stride, a
  // full grid in one round on these inputs; capped at 1 or 3 blocks (set_grid_cap) each thread takes many.
  // Every length set (up to ~1300 sequences; one of ~2600 steps), max_steps below the longest (the first
  // sequence too long recorded whichever round finds it), and narrow and wide rows.
  using OffsetT = TestType;
  auto rng = test::make_rng(208);
  const test::RestoreGridCap restore;
  for (unsigned cap : {1u, 3u}) {
    detail::set_grid_cap(cap);
    for (const auto& lengths : all_length_sets(rng)) {
      const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
      const std::vector<OffsetT> host_offsets = offsets_of<OffsetT>(lengths);
      const DeviceBuffer<OffsetT> offsets(host_offsets);
      const std::int64_t nnz = static_cast<std::int64_t>(host_offsets.back());
      for (std::int64_t max_steps : {longest(lengths), longest(lengths) / 2}) {
        INFO("grid of at most " << cap << " blocks, batch " << batch << ", max_steps " << max_steps);
        DeviceLayout<OffsetT> layout(batch, max_steps);
        const CheckResult check = run_packing_order(offsets, layout);
        const std::int64_t too_long = first_too_long(lengths, max_steps);
        REQUIRE(check.ok() == (too_long < 0));
        if (too_long >= 0) REQUIRE(check.index() == too_long);
        const auto host_layout = reference::packing_order(host_offsets.data(), batch, max_steps);
        require_layout_equal(layout, host_layout);
        check_pack_unpack<float, OffsetT>(test::random_values<float>(static_cast<std::size_t>(nnz * 3), rng),
                                          host_offsets, offsets, 3, layout, host_layout);
        check_pack_unpack<bfloat16, OffsetT>(test::random_values<bfloat16>(static_cast<std::size_t>(nnz * 64), rng),
                                             host_offsets, offsets, 64, layout, host_layout);
      }
    }
  }
}

TEST_CASE("packing_order, pack and unpack can be captured in a CUDA graph", "[packing][graph]") {
  auto rng = test::make_rng(206);
  const std::vector<std::int64_t> lengths = test::make_lengths(test::Regime::kRandom, rng);
  const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
  const std::int64_t max_steps = longest(lengths);
  const std::vector<std::int32_t> host_offsets = offsets_of<std::int32_t>(lengths);
  const std::int64_t nnz = host_offsets.back(), inner = 8;
  cudaStream_t stream = nullptr;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    const DeviceBuffer<std::int32_t> offsets(host_offsets);
    DeviceLayout<std::int32_t> layout(batch, max_steps);
    const std::vector<float> src = test::random_values<float>(static_cast<std::size_t>(nnz * inner), rng);
    const DeviceBuffer<float> d_src(src);
    DeviceBuffer<float> packed(src.size()), unpacked(src.size());
    test::poison(packed);
    test::poison(unpacked);
    std::size_t bytes = 0;
    REQUIRE_OK((packing_order<std::int32_t>(nullptr, bytes, offsets.data(), layout.view(), nullptr, stream)));
    DeviceBuffer<unsigned char> workspace(std::max<std::size_t>(bytes, 1));
    test::poison_workspace(workspace);
    REQUIRE_CUDA(cudaDeviceSynchronize());

    const RaggedView<const float, std::int32_t> src_view{d_src.data(), offsets.data(), batch, nnz, inner};
    const RaggedView<float, std::int32_t> dst_view{unpacked.data(), offsets.data(), batch, nnz, inner};
    cudaGraph_t graph = nullptr;
    REQUIRE_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    const Status order = packing_order<std::int32_t>(workspace.data(), bytes, offsets.data(), layout.view(), nullptr,
                                                     stream);
    std::size_t none = 0;
    const Status pack = pack_sequences<float, std::int32_t>(workspace.data(), none, src_view, layout.view(),
                                                            packed.data(), stream);
    const Status unpack = unpack_sequences<float, std::int32_t>(workspace.data(), none, packed.data(), layout.view(),
                                                                dst_view, stream);
    REQUIRE_CUDA(cudaStreamEndCapture(stream, &graph));
    REQUIRE(order == Status::kSuccess);
    REQUIRE(pack == Status::kSuccess);
    REQUIRE(unpack == Status::kSuccess);
    cudaGraphExec_t exec = nullptr;
    REQUIRE_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    REQUIRE_CUDA(cudaGraphLaunch(exec, stream));
    REQUIRE_CUDA(cudaStreamSynchronize(stream));
    REQUIRE_CUDA(cudaGraphExecDestroy(exec));
    REQUIRE_CUDA(cudaGraphDestroy(graph));

    const auto host_layout = reference::packing_order(host_offsets.data(), batch, max_steps);
    require_layout_equal(layout, host_layout);
    std::vector<float> want_packed(src.size());
    reference::pack_sequences(RaggedView<const float, std::int32_t>{src.data(), host_offsets.data(), batch, nnz, inner},
                              host_layout, want_packed.data());
    REQUIRE_BITWISE_EQUAL(packed.to_host(), want_packed);
    REQUIRE_BITWISE_EQUAL(unpacked.to_host(), src);
    REQUIRE_CUDA(cudaDeviceSynchronize());
  }
  REQUIRE_CUDA(cudaStreamDestroy(stream));
}

TEMPLATE_TEST_CASE("malformed offsets and layouts stay in bounds", "[packing][malformed]", std::int32_t,
                   std::int64_t) {
  using OffsetT = TestType;
  constexpr OffsetT kBig = std::numeric_limits<OffsetT>::max();
  // Decreasing, negative, beyond nnz and huge offsets; nnz = 10 rows.
  const std::vector<OffsetT> host_offsets = {3, 9, 2, -5, 14, kBig, 0, kBig, 10};
  const std::int64_t batch = static_cast<std::int64_t>(host_offsets.size()) - 1, nnz = 10, inner = 5;
  const DeviceBuffer<OffsetT> offsets(host_offsets);
  auto rng = test::make_rng(207);
  const DeviceBuffer<float> src(test::random_values<float>(static_cast<std::size_t>(nnz * inner), rng));
  // Outputs with guards on both sides: a write out of bounds is seen on any device, not only under memcheck.
  test::GuardedBuffer<float> packed(static_cast<std::size_t>(nnz * inner)), dst(static_cast<std::size_t>(nnz * inner));
  std::size_t none = 0;
  unsigned char stand_in = 0;
  for (std::int64_t max_steps : {std::int64_t{0}, std::int64_t{4}, std::int64_t{64}}) {
    INFO("max_steps " << max_steps);
    DeviceLayout<OffsetT> layout(batch, max_steps);
    const CheckResult check = run_packing_order(offsets, layout);
    REQUIRE(check.status() == Status::kInvalidArgument);  // some lengths exceed any of these max_steps
    const RaggedView<const float, OffsetT> src_view{src.data(), offsets.data(), batch, nnz, inner};
    REQUIRE_OK((pack_sequences<float, OffsetT>(&stand_in, none, src_view, layout.view(), packed.data(), nullptr)));
    const RaggedView<float, OffsetT> dst_view{dst.data(), offsets.data(), batch, nnz, inner};
    REQUIRE_OK((unpack_sequences<float, OffsetT>(&stand_in, none, packed.data(), layout.view(), dst_view, nullptr)));
    REQUIRE_CUDA(cudaDeviceSynchronize());
  }
  // A layout of garbage (never written by packing_order): the gather must still stay inside the buffers.
  DeviceLayout<OffsetT> garbage(batch, 6);
  garbage.sorted_indices.fill_bytes(0x7f);
  garbage.step_offsets.fill_bytes(0x11);
  const std::vector<OffsetT> valid = {0, 1, 2, 3, 4, 5, 6, 7, 10};
  const DeviceBuffer<OffsetT> valid_offsets(valid);
  REQUIRE_OK((pack_sequences<float, OffsetT>(&stand_in, none,
                                            RaggedView<const float, OffsetT>{src.data(), valid_offsets.data(), batch,
                                                                             nnz, inner},
                                            garbage.view(), packed.data(), nullptr)));
  REQUIRE_CUDA(cudaDeviceSynchronize());
  REQUIRE(packed.guards_intact());
  REQUIRE(dst.guards_intact());
}

TEMPLATE_TEST_CASE("PackedSequence packs a RaggedTensor as the reference does and unpacks it back",
                   "[packing][tensor]", std::int32_t, std::int64_t) {
  // One length set per call, every set different, so that a buffer the op forgot to write cannot pass on what
  // the previous call left in the stream's memory pool. Even sets take the longest sequence (read back), odd
  // ones a max_steps past it (trailing steps of batch size 0).
  using OffsetT = TestType;
  using Tensor = RaggedTensor<float, OffsetT>;
  auto rng = test::make_rng(209);
  const std::vector<std::int64_t> inner_dims = {2, 3};
  const std::int64_t inner = 6;
  const auto sets = all_length_sets(rng);
  for (std::size_t i = 0; i < sets.size(); ++i) {
    const std::vector<std::int64_t>& lengths = sets[i];
    const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
    const std::vector<OffsetT> host_offsets = offsets_of<OffsetT>(lengths);
    const std::int64_t nnz = static_cast<std::int64_t>(host_offsets.back());
    const std::int64_t max_steps = i % 2 == 0 ? -1 : longest(lengths) + 2;
    const std::int64_t steps = max_steps < 0 ? longest(lengths) : max_steps;
    INFO("batch " << batch << ", nnz " << nnz << ", max_steps " << max_steps);
    const std::vector<float> values = test::random_values<float>(static_cast<std::size_t>(nnz * inner), rng);
    const Tensor x = Tensor::from_host(values, lengths, inner_dims);

    const auto packed = PackedSequence<float, OffsetT>::from_ragged(x, max_steps);
    REQUIRE(packed.batch() == batch);
    REQUIRE(packed.nnz() == nnz);
    REQUIRE(packed.max_steps() == steps);
    REQUIRE(packed.inner_dims() == inner_dims);
    REQUIRE(packed.offsets().to_host() == host_offsets);
    const auto host_layout = reference::packing_order(host_offsets.data(), batch, steps);
    require_layout_equal(packed.sorted_indices(), packed.unsorted_indices(), packed.sorted_lengths(),
                         packed.batch_sizes(), packed.step_offsets(), host_layout);
    std::vector<float> want_packed(values.size());
    reference::pack_sequences(RaggedView<const float, OffsetT>{values.data(), host_offsets.data(), batch, nnz, inner},
                              host_layout, want_packed.data());
    REQUIRE_BITWISE_EQUAL(packed.data().to_host(), want_packed);

    const Tensor y = packed.to_ragged();
    REQUIRE(y.inner_dims() == inner_dims);
    REQUIRE(y.offsets_to_host() == host_offsets);
    REQUIRE_BITWISE_EQUAL(y.values_to_host(), values);

    // Other rows in the same packed order and of another width, as an RNN's output over packed.data().
    const std::vector<float> rows = test::random_values<float>(static_cast<std::size_t>(nnz * 5), rng);
    const Tensor z = packed.to_ragged(DeviceBuffer<float>(rows), {5});
    std::vector<float> want_z(rows.size());
    reference::unpack_sequences(rows.data(), host_layout,
                                RaggedView<float, OffsetT>{want_z.data(), host_offsets.data(), batch, nnz, 5});
    REQUIRE(z.inner_dims() == std::vector<std::int64_t>{5});
    REQUIRE(z.offsets_to_host() == host_offsets);
    REQUIRE_BITWISE_EQUAL(z.values_to_host(), want_z);
  }
}

TEST_CASE("PackedSequence refuses a max_steps below the longest sequence and rows of the wrong size",
          "[packing][tensor][errors]") {
  using Tensor = RaggedTensor<float, std::int32_t>;
  using Packed = PackedSequence<float, std::int32_t>;
  auto rng = test::make_rng(210);
  const std::vector<std::int64_t> lengths{3, 0, 7, 7, 2};
  const Tensor x = Tensor::from_host(test::random_values<float>(19 * 2, rng), lengths, {2});
  REQUIRE_THROWS_WITH(Packed::from_ragged(x, 6), Catch::Contains("sequence 2 is longer than max_steps = 6"));
  REQUIRE_THROWS_WITH(Packed::from_ragged(x, 2), Catch::Contains("sequence 0 is longer than max_steps = 2"));
  const Packed packed = Packed::from_ragged(x, 7);  // exactly the longest: accepted
  REQUIRE_THROWS_WITH(packed.to_ragged(DeviceBuffer<float>(19 * 3), {2}),
                      Catch::Contains("rows holds 57 values, nnz * inner = 19 * 2"));
}

TEST_CASE("PackedSequence works on the tensor's stream, and a moved-from one is empty", "[packing][tensor]") {
  using Tensor = RaggedTensor<half, std::int64_t>;
  using Packed = PackedSequence<half, std::int64_t>;
  auto rng = test::make_rng(211);
  const std::vector<std::int64_t> lengths{4, 9, 0, 1};
  const std::vector<half> values = test::random_values<half>(14 * 8, rng);
  cudaStream_t stream = nullptr;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    const Tensor x = Tensor::from_host(values, lengths, {8}, stream);
    Packed a = Packed::from_ragged(x);
    REQUIRE(a.stream() == stream);
    REQUIRE(a.data().stream() == stream);
    Packed b = std::move(a);
    REQUIRE(a.batch() == 0);
    REQUIRE(a.nnz() == 0);
    REQUIRE(a.max_steps() == 0);
    REQUIRE(a.inner_dims().empty());
    REQUIRE(a.data().empty());
    REQUIRE(a.batch_sizes().empty());
    REQUIRE(b.batch() == 4);
    REQUIRE(b.max_steps() == 9);
    REQUIRE(b.batch_sizes().to_host() == std::vector<std::int64_t>{3, 2, 2, 2, 1, 1, 1, 1, 1});
    const Tensor y = b.to_ragged();
    REQUIRE(y.stream() == stream);
    REQUIRE_BITWISE_EQUAL(y.values_to_host(), values);
  }
  REQUIRE_CUDA(cudaStreamSynchronize(stream));
  REQUIRE_CUDA(cudaStreamDestroy(stream));
}
