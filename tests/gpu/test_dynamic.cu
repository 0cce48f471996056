// The run-time typed entry points give bitwise the same results as the typed ops they dispatch to.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/test_util.h"
#include "ragged/attention.h"
#include "ragged/convert.h"
#include "ragged/dynamic.h"
#include "ragged/offsets.h"
#include "ragged/reference.h"
#include "ragged/segment_reduce.h"

using namespace ragged;
using test::run_two_phase;

TEST_CASE("dynamic dispatch matches the typed ops", "[dynamic][gpu]") {
  auto rng = test::make_rng(71);
  std::vector<std::int64_t> lengths = test::make_lengths(test::Regime::kZeroLengths, rng, 50);
  lengths.push_back(31);  // never an all-empty batch, whatever the seed
  const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
  std::vector<std::int32_t> offsets(lengths.size() + 1);
  REQUIRE_OK(lengths_to_offsets_host(lengths.data(), batch, offsets.data()));
  const std::int64_t nnz = offsets.back(), inner = 5, max_len = 30;
  const std::vector<half> values = test::random_values<half>(static_cast<std::size_t>(nnz * inner), rng);
  DeviceBuffer<half> d_values(values);
  DeviceBuffer<std::int32_t> d_offsets(offsets);

  dynamic::RaggedDesc desc{DType::kFloat16, DType::kInt32, d_values.data(), d_offsets.data(), batch, nnz, inner};
  RaggedView<const half, std::int32_t> view{d_values.data(), d_offsets.data(), batch, nnz, inner};

  DeviceBuffer<half> padded_dynamic(static_cast<std::size_t>(batch * max_len * inner));
  DeviceBuffer<half> padded_typed(padded_dynamic.size());
  test::poison(padded_dynamic);
  test::poison(padded_typed);
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return dynamic::ragged_to_padded(p, bytes, desc, padded_dynamic.data(), max_len, -2.5, Align::kRight,
                                     Truncate::kLeft, nullptr);
  }));
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return ragged_to_padded(p, bytes, view, PaddedView<half>{padded_typed.data(), batch, max_len, inner},
                            __float2half(-2.5f), Align::kRight, Truncate::kLeft, nullptr);
  }));
  REQUIRE_WRITTEN_AND_EQUAL(padded_dynamic.to_host(), padded_typed.to_host());

  DeviceBuffer<half> max_dynamic(static_cast<std::size_t>(batch * inner)), max_typed(max_dynamic.size());
  DeviceBuffer<std::int64_t> arg_dynamic(max_dynamic.size()), arg_typed(max_dynamic.size());
  test::poison(max_dynamic);
  test::poison(max_typed);
  test::poison(arg_dynamic);
  test::poison(arg_typed);
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return dynamic::segment_reduce(p, bytes, desc, ReduceOp::kMax, max_dynamic.data(), arg_dynamic.data(), 7.0f,
                                   nullptr);
  }));
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return segment_reduce(p, bytes, view, ReduceOp::kMax, max_typed.data(), arg_typed.data(), 7.0f, nullptr);
  }));
  REQUIRE_WRITTEN_AND_EQUAL(max_dynamic.to_host(), max_typed.to_host());
  REQUIRE_WRITTEN_AND_EQUAL(arg_dynamic.to_host(), arg_typed.to_host());
}

TEST_CASE("dynamic pad values are rounded once from double, as the references round", "[dynamic][gpu]") {
  // One token, one padded slot: the slot holds the pad value as the op converted it. Through float first, the
  // half and bfloat16 values below would round twice (to 1.0); a float past FLT_MAX must not be undefined.
  const std::vector<std::int32_t> offsets{0, 1};
  DeviceBuffer<std::int32_t> d_offsets(offsets);
  auto padded_slot = [&](DType dtype, const void* token, std::size_t elem_bytes, double pad) {
    DeviceBuffer<unsigned char> d_token(std::vector<unsigned char>(static_cast<const unsigned char*>(token),
                                                                   static_cast<const unsigned char*>(token) +
                                                                       elem_bytes));
    DeviceBuffer<unsigned char> padded(2 * elem_bytes);
    padded.fill_bytes(0x5a);
    const dynamic::RaggedDesc desc{dtype, DType::kInt32, d_token.data(), d_offsets.data(), 1, 1, 1};
    REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
      return dynamic::ragged_to_padded(p, bytes, desc, padded.data(), 2, pad, Align::kLeft, Truncate::kRight,
                                       nullptr);
    }));
    const std::vector<unsigned char> got = padded.to_host();
    REQUIRE(std::equal(got.begin(), got.begin() + elem_bytes, static_cast<const unsigned char*>(token)));
    return std::vector<unsigned char>(got.begin() + elem_bytes, got.end());
  };
  auto bytes_of = [](const auto& v) {
    const unsigned char* b = reinterpret_cast<const unsigned char*>(&v);
    return std::vector<unsigned char>(b, b + sizeof(v));
  };
  const half h_token = __float2half(0.25f);
  const double h_pad = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -30);
  REQUIRE(padded_slot(DType::kFloat16, &h_token, 2, h_pad) == bytes_of(__double2half(h_pad)));
  REQUIRE(__half2float(__double2half(h_pad)) == 1.0009765625f);
  const bfloat16 b_token = __float2bfloat16(0.25f);
  const double b_pad = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  REQUIRE(padded_slot(DType::kBFloat16, &b_token, 2, b_pad) == bytes_of(__double2bfloat16(b_pad)));
  REQUIRE(__bfloat162float(__double2bfloat16(b_pad)) == 1.0078125f);
  const float f_token = 0.25f;
  constexpr float kInf = std::numeric_limits<float>::infinity(), kMax = std::numeric_limits<float>::max();
  REQUIRE(padded_slot(DType::kFloat32, &f_token, 4, 1e300) == bytes_of(kInf));
  REQUIRE(padded_slot(DType::kFloat32, &f_token, 4, -1e300) == bytes_of(-kInf));
  // Less than half an ulp (2^103) past FLT_MAX rounds to it.
  REQUIRE(padded_slot(DType::kFloat32, &f_token, 4, double{kMax} + std::ldexp(1.0, 102)) == bytes_of(kMax));
}

TEST_CASE("dynamic backward passes and masks match the typed ops", "[dynamic][gpu]") {
  auto rng = test::make_rng(72);
  std::vector<std::int64_t> lengths = test::make_lengths(test::Regime::kZeroLengths, rng, 40);
  lengths.push_back(23);  // never an all-empty batch, whatever the seed
  const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
  std::vector<std::int64_t> offsets(lengths.size() + 1);
  REQUIRE_OK(lengths_to_offsets_host(lengths.data(), batch, offsets.data()));
  const std::int64_t nnz = offsets.back(), inner = 3;
  DeviceBuffer<std::int64_t> d_offsets(offsets);
  DeviceBuffer<bfloat16> d_x(test::random_values<bfloat16>(static_cast<std::size_t>(nnz * inner), rng));
  DeviceBuffer<bfloat16> d_dy(test::random_values<bfloat16>(static_cast<std::size_t>(nnz * inner), rng));
  DeviceBuffer<bfloat16> d_dsum(test::random_values<bfloat16>(static_cast<std::size_t>(batch * inner), rng));
  const dynamic::RaggedDesc desc{DType::kBFloat16, DType::kInt64, d_x.data(), d_offsets.data(), batch, nnz, inner};
  const RaggedView<const bfloat16, std::int64_t> view{d_x.data(), d_offsets.data(), batch, nnz, inner};
  const std::size_t n = static_cast<std::size_t>(nnz * inner);

  // The softmax to differentiate, from the typed op.
  DeviceBuffer<bfloat16> d_y(n);
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return segment_softmax(p, bytes, view, true, d_y.data(), nullptr);
  }));
  DeviceBuffer<bfloat16> dx_dynamic(n), dx_typed(n);
  test::poison(dx_dynamic);
  test::poison(dx_typed);
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return dynamic::segment_softmax_backward(p, bytes, desc, true, d_y.data(), d_dy.data(), dx_dynamic.data(),
                                             nullptr);
  }));
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return segment_softmax_backward(p, bytes, view, true, d_y.data(), d_dy.data(), dx_typed.data(), nullptr);
  }));
  REQUIRE_WRITTEN_AND_EQUAL(dx_dynamic.to_host(), dx_typed.to_host());

  test::poison(dx_dynamic);
  test::poison(dx_typed);
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return dynamic::segment_reduce_backward(p, bytes, desc, ReduceOp::kMean, d_dsum.data(), nullptr,
                                            dx_dynamic.data(), nullptr);
  }));
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return segment_reduce_backward(p, bytes, view, ReduceOp::kMean, d_dsum.data(), nullptr, dx_typed.data(),
                                   nullptr);
  }));
  REQUIRE_WRITTEN_AND_EQUAL(dx_dynamic.to_host(), dx_typed.to_host());

  // Masks from int64 lengths, one of them longer than max_len.
  std::vector<std::int64_t> mask_lengths = lengths;
  mask_lengths[0] = 100;
  DeviceBuffer<std::int64_t> d_lengths(mask_lengths);
  const std::int64_t max_len = 17;
  DeviceBuffer<half> additive_dynamic(static_cast<std::size_t>(batch * max_len)),
      additive_typed(additive_dynamic.size());
  test::poison(additive_dynamic);
  test::poison(additive_typed);
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return dynamic::lengths_to_additive_mask(p, bytes, DType::kInt64, d_lengths.data(), batch, max_len,
                                             Align::kRight, DType::kFloat16, additive_dynamic.data(), nullptr,
                                             nullptr);
  }));
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return lengths_to_additive_mask(p, bytes, d_lengths.data(), batch, max_len, Align::kRight,
                                    additive_typed.data(), nullptr, nullptr);
  }));
  REQUIRE_WRITTEN_AND_EQUAL(additive_dynamic.to_host(), additive_typed.to_host());

  DeviceBuffer<std::uint8_t> mask_dynamic(static_cast<std::size_t>(batch * max_len)), mask_typed(mask_dynamic.size());
  test::poison(mask_dynamic);
  test::poison(mask_typed);
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return dynamic::lengths_to_mask(p, bytes, DType::kInt64, d_lengths.data(), batch, max_len, Align::kLeft,
                                    reinterpret_cast<bool*>(mask_dynamic.data()), nullptr, nullptr);
  }));
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return lengths_to_mask(p, bytes, d_lengths.data(), batch, max_len, Align::kLeft,
                           reinterpret_cast<bool*>(mask_typed.data()), nullptr, nullptr);
  }));
  REQUIRE_WRITTEN_AND_EQUAL(mask_dynamic.to_host(), mask_typed.to_host());
}

TEST_CASE("dynamic attention matches the typed op, dense strides by default", "[dynamic][gpu][attention]") {
  auto rng = test::make_rng(73);
  const std::vector<std::int64_t> q_lengths{5, 0, 70, 1, 33}, k_lengths{9, 4, 70, 0, 65};
  const std::int64_t batch = 5;
  std::vector<std::int32_t> q_offsets(batch + 1), k_offsets(batch + 1);
  REQUIRE_OK(lengths_to_offsets_host(q_lengths.data(), batch, q_offsets.data()));
  REQUIRE_OK(lengths_to_offsets_host(k_lengths.data(), batch, k_offsets.data()));
  const int heads_q = 4, heads_kv = 2, head_dim = 64;
  const std::int64_t rows_q = q_offsets.back(), rows_k = k_offsets.back();
  DeviceBuffer<std::int32_t> d_q_offsets(q_offsets), d_k_offsets(k_offsets);
  DeviceBuffer<half> q(test::random_values<half>(static_cast<std::size_t>(rows_q * heads_q * head_dim), rng));
  DeviceBuffer<half> k(test::random_values<half>(static_cast<std::size_t>(rows_k * heads_kv * head_dim), rng));
  DeviceBuffer<half> v(test::random_values<half>(static_cast<std::size_t>(rows_k * heads_kv * head_dim), rng));
  DeviceBuffer<half> o_dynamic(q.size()), o_typed(q.size());
  DeviceBuffer<float> lse_dynamic(static_cast<std::size_t>(rows_q * heads_q)), lse_typed(lse_dynamic.size());
  test::poison(o_dynamic);
  test::poison(o_typed);
  test::poison(lse_dynamic);
  test::poison(lse_typed);

  dynamic::AttentionDesc desc;  // strides left 0: dense
  desc.dtype = DType::kFloat16;
  desc.offset_dtype = DType::kInt32;
  desc.q.data = q.data();
  desc.k.data = k.data();
  desc.v.data = v.data();
  desc.o = o_dynamic.data();
  desc.lse = lse_dynamic.data();
  desc.q_seq.offsets = d_q_offsets.data();
  desc.q_seq.rows = rows_q;
  desc.k_seq.offsets = d_k_offsets.data();
  desc.k_seq.rows = rows_k;
  desc.batch = batch;
  desc.heads_q = heads_q;
  desc.heads_kv = heads_kv;
  desc.head_dim = head_dim;
  desc.scale = 0.125f;
  desc.causal = true;
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return dynamic::varlen_attention_forward(p, bytes, desc, nullptr);
  }));

  AttentionArgs<half, std::int32_t> a;
  a.q = dense_heads<const half>(q.data(), heads_q, head_dim);
  a.k = dense_heads<const half>(k.data(), heads_kv, head_dim);
  a.v = dense_heads<const half>(v.data(), heads_kv, head_dim);
  a.o = dense_heads<half>(o_typed.data(), heads_q, head_dim);
  a.lse = lse_typed.data();
  a.q_seq = SequenceLayout<std::int32_t>::ragged(d_q_offsets.data(), rows_q);
  a.k_seq = SequenceLayout<std::int32_t>::ragged(d_k_offsets.data(), rows_k);
  a.batch = batch;
  a.heads_q = heads_q;
  a.heads_kv = heads_kv;
  a.head_dim = head_dim;
  a.scale = 0.125f;
  a.causal = true;
  REQUIRE_OK(
      run_two_phase([&](void* p, std::size_t& bytes) { return varlen_attention_forward(p, bytes, a, nullptr); }));
  REQUIRE_WRITTEN_AND_EQUAL(o_dynamic.to_host(), o_typed.to_host());
  REQUIRE_WRITTEN_AND_EQUAL(lse_dynamic.to_host(), lse_typed.to_host());
}

TEST_CASE("dynamic packing_order, pack and unpack match the reference", "[dynamic][gpu][packing]") {
  auto rng = test::make_rng(74);
  const std::vector<std::int64_t> lengths{3, 0, 7, 7, 1, 5};
  const std::int64_t batch = static_cast<std::int64_t>(lengths.size()), max_steps = 9, inner = 3;
  std::vector<std::int64_t> offsets(lengths.size() + 1);
  REQUIRE_OK(lengths_to_offsets_host(lengths.data(), batch, offsets.data()));
  const std::int64_t nnz = offsets.back();
  DeviceBuffer<std::int64_t> d_offsets(offsets);
  DeviceBuffer<std::int64_t> sorted_indices(batch), unsorted_indices(batch), sorted_lengths(batch);
  DeviceBuffer<std::int64_t> batch_sizes(max_steps), step_offsets(max_steps + 1);
  for (auto* buffer : {&sorted_indices, &unsorted_indices, &sorted_lengths, &batch_sizes, &step_offsets})
    test::poison(*buffer);
  const dynamic::PackedLayoutDesc layout{batch,
                                         max_steps,
                                         sorted_indices.data(),
                                         unsorted_indices.data(),
                                         sorted_lengths.data(),
                                         batch_sizes.data(),
                                         step_offsets.data()};
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return dynamic::packing_order(p, bytes, DType::kInt64, d_offsets.data(), layout, nullptr, nullptr);
  }));
  const auto want = reference::packing_order(offsets.data(), batch, max_steps);
  REQUIRE(sorted_indices.to_host() == want.sorted_indices);
  REQUIRE(unsorted_indices.to_host() == want.unsorted_indices);
  REQUIRE(sorted_lengths.to_host() == want.sorted_lengths);
  REQUIRE(batch_sizes.to_host() == want.batch_sizes);
  REQUIRE(step_offsets.to_host() == want.step_offsets);

  const std::vector<std::uint8_t> values =
      test::random_values<std::uint8_t>(static_cast<std::size_t>(nnz * inner), rng);
  DeviceBuffer<std::uint8_t> d_values(values), packed(values.size()), unpacked(values.size());
  test::poison(packed);
  test::poison(unpacked);
  const dynamic::RaggedDesc desc{DType::kUInt8, DType::kInt64, d_values.data(), d_offsets.data(), batch, nnz, inner};
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return dynamic::pack_sequences(p, bytes, desc, layout, packed.data(), nullptr);
  }));
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return dynamic::unpack_sequences(p, bytes, packed.data(), layout, desc, unpacked.data(), nullptr);
  }));
  std::vector<std::uint8_t> want_packed(values.size());
  reference::pack_sequences(
      RaggedView<const std::uint8_t, std::int64_t>{values.data(), offsets.data(), batch, nnz, inner}, want,
      want_packed.data());
  REQUIRE(packed.to_host() == want_packed);
  REQUIRE(unpacked.to_host() == values);
}

TEST_CASE("dynamic offsets_to_lengths, max_length and validate_offsets match the host results",
          "[dynamic][gpu][offsets]") {
  auto rng = test::make_rng(75);
  std::vector<std::int64_t> lengths = test::make_lengths(test::Regime::kZeroLengths, rng, 300);
  lengths.push_back(41);  // the longest row last, never an all-empty batch
  const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
  std::vector<std::int32_t> offsets32(lengths.size() + 1);
  std::vector<std::int64_t> offsets64(lengths.size() + 1);
  REQUIRE_OK(lengths_to_offsets_host(lengths.data(), batch, offsets32.data()));
  REQUIRE_OK(lengths_to_offsets_host(lengths.data(), batch, offsets64.data()));
  DeviceBuffer<std::int32_t> d_offsets32(offsets32);
  DeviceBuffer<std::int64_t> d_offsets64(offsets64);
  const std::vector<std::int32_t> lengths32(lengths.begin(), lengths.end());

  DeviceBuffer<std::int64_t> d_lengths64(static_cast<std::size_t>(batch));
  DeviceBuffer<std::int32_t> d_lengths32(static_cast<std::size_t>(batch));
  test::poison(d_lengths64);
  test::poison(d_lengths32);
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return dynamic::offsets_to_lengths(p, bytes, DType::kInt32, d_offsets32.data(), batch, DType::kInt64,
                                       d_lengths64.data(), nullptr);
  }));
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return dynamic::offsets_to_lengths(p, bytes, DType::kInt64, d_offsets64.data(), batch, DType::kInt32,
                                       d_lengths32.data(), nullptr);
  }));
  REQUIRE(d_lengths64.to_host() == lengths);
  REQUIRE(d_lengths32.to_host() == lengths32);

  const std::int64_t want_max = *std::max_element(lengths.begin(), lengths.end());
  for (DType offset_dtype : {DType::kInt32, DType::kInt64}) {
    INFO(dtype_name(offset_dtype));
    const void* d_offsets = offset_dtype == DType::kInt32 ? static_cast<const void*>(d_offsets32.data())
                                                          : static_cast<const void*>(d_offsets64.data());
    DeviceBuffer<std::int64_t> d_max(1);
    test::poison(d_max);
    REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
      return dynamic::max_length(p, bytes, offset_dtype, d_offsets, batch, d_max.data(), nullptr);
    }));
    REQUIRE(d_max.to_host()[0] == want_max);
  }

  // Well-formed offsets pass (a poisoned result is reset); a decrease is named, as the typed op names it.
  auto validate = [&](DType offset_dtype, const void* d_offsets, std::int64_t expected_nnz) {
    DeviceBuffer<CheckResult> d_check(1);
    test::poison(d_check);
    REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
      return dynamic::validate_offsets(p, bytes, offset_dtype, d_offsets, batch, offsets64.back(), expected_nnz,
                                       d_check.data(), nullptr);
    }));
    return d_check.to_host()[0];
  };
  REQUIRE(validate(DType::kInt32, d_offsets32.data(), offsets64.back()).ok());
  REQUIRE(validate(DType::kInt64, d_offsets64.data(), -1).ok());
  std::vector<std::int64_t> bad = offsets64;
  const std::int64_t k = batch / 2;  // the lengths' count is random; at least 1 + the row of 41
  bad[k + 1] = bad[k] + 1000000;   // entry k + 2 decreases, or entry batch passes the capacity
  const std::int64_t bad_entry = k + 1 < batch ? k + 2 : batch;
  DeviceBuffer<std::int64_t> d_bad(bad);
  const CheckResult dynamic_result = validate(DType::kInt64, d_bad.data(), -1);
  DeviceBuffer<CheckResult> d_typed(1);
  test::poison(d_typed);
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return validate_offsets(p, bytes, d_bad.data(), batch, offsets64.back(), std::int64_t{-1}, d_typed.data(),
                            nullptr);
  }));
  const CheckResult typed_result = d_typed.to_host()[0];
  REQUIRE(dynamic_result.status() == Status::kInvalidOffsets);
  REQUIRE(dynamic_result.index() == bad_entry);
  REQUIRE(dynamic_result.code == typed_result.code);
}
