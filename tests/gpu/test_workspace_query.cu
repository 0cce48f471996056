// The workspace query needs no buffers (docs/embedding.md, "Workspace"): a planner that sizes workspaces before any
// tensor exists passes placeholder addresses, and the size it gets must be the one the real tensors get wherever
// they sit. Every device op is queried here twice per shape, with placeholders aligned to 256 bytes and with
// placeholders one element past that (aligned to their type only, as a slice of a larger tensor is), and the
// answers must match and never be 0. A query reads no device memory, so no placeholder is ever dereferenced; it
// does ask the device (CUB's temp sizes, the RNN's path), hence a GPU test.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "ragged/attention.h"
#include "ragged/convert.h"
#include "ragged/offsets.h"
#include "ragged/packing.h"
#include "ragged/rnn.h"
#include "ragged/segment_reduce.h"

using namespace ragged;

namespace {

// Tensor i of a call stands at (i + 1) MiB, plus `shift` elements of its type (at), or `shift` 16-byte vectors
// (at16: attention requires 16-byte alignment).
struct Placeholders {
  std::uintptr_t shift = 0;
  template <typename T>
  T* at(int i) const {
    return reinterpret_cast<T*>(base(i) + shift * sizeof(T));
  }
  template <typename T>
  T* at16(int i) const {
    return reinterpret_cast<T*>(base(i) + shift * 16);
  }
  static std::uintptr_t base(int i) { return (std::uintptr_t{1} << 20) * static_cast<std::uintptr_t>(i + 1); }
};

// The size `query` reports with aligned placeholders, after checking that shifted ones give the same, non-zero.
template <typename Query>
std::size_t same_size_anywhere(const char* op, Query&& query) {
  std::size_t aligned = 0, shifted = 0;
  INFO(op);
  REQUIRE_OK(query(Placeholders{0}, aligned));
  REQUIRE_OK(query(Placeholders{1}, shifted));
  REQUIRE(aligned > 0);
  REQUIRE(shifted == aligned);
  return aligned;
}

struct Shape {
  std::int64_t batch, nnz, inner;
};

// An empty batch, a small one, wide rows, and more sequences than the segment ops' first plan holds (131072: past
// it their plan scan takes CUB's temp storage).
const std::vector<Shape> kShapes = {{0, 0, 1}, {37, 1000, 1}, {37, 1000, 64}, {5, 100, 1000}, {200000, 3000000, 1}};

template <typename T, typename OffsetT>
RaggedView<const T, OffsetT> ragged_at(const Placeholders& p, int values, int offsets, const Shape& s) {
  return RaggedView<const T, OffsetT>{p.at<const T>(values), p.at<const OffsetT>(offsets), s.batch, s.nnz, s.inner};
}

}  // namespace

TEMPLATE_TEST_CASE("segment ops size their workspace from the shapes alone", "[workspace]", test::F32_I32,
                   test::F32_I64, test::BF16_I32, test::BF16_I64) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  for (const Shape& s : kShapes) {
    INFO("batch " << s.batch << " nnz " << s.nnz << " inner " << s.inner);
    for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin}) {
      const bool arg = op == ReduceOp::kMax || op == ReduceOp::kMin;
      same_size_anywhere("segment_reduce", [&](const Placeholders& p, std::size_t& bytes) {
        return segment_reduce<T, OffsetT>(nullptr, bytes, ragged_at<T, OffsetT>(p, 0, 1, s), op, p.at<T>(2),
                                          arg ? p.at<std::int64_t>(3) : nullptr, 0.0f, nullptr);
      });
      same_size_anywhere("segment_reduce_backward", [&](const Placeholders& p, std::size_t& bytes) {
        return segment_reduce_backward<T, OffsetT>(nullptr, bytes, ragged_at<T, OffsetT>(p, 0, 1, s), op,
                                                   p.at<const T>(2), arg ? p.at<const std::int64_t>(3) : nullptr,
                                                   p.at<T>(4), nullptr);
      });
    }
    for (const bool log : {false, true}) {
      same_size_anywhere("segment_softmax", [&](const Placeholders& p, std::size_t& bytes) {
        return segment_softmax<T, OffsetT>(nullptr, bytes, ragged_at<T, OffsetT>(p, 0, 1, s), log, p.at<T>(2),
                                           nullptr);
      });
      same_size_anywhere("segment_softmax_backward", [&](const Placeholders& p, std::size_t& bytes) {
        return segment_softmax_backward<T, OffsetT>(nullptr, bytes, ragged_at<T, OffsetT>(p, 0, 1, s), log,
                                                    p.at<const T>(2), p.at<const T>(3), p.at<T>(4), nullptr);
      });
    }
  }
}

TEMPLATE_TEST_CASE("offsets, conversion, mask and packing ops size their workspace from the shapes alone",
                   "[workspace]", std::int32_t, std::int64_t) {
  using OffsetT = TestType;
  for (const Shape& s : kShapes) {
    INFO("batch " << s.batch << " nnz " << s.nnz << " inner " << s.inner);
    same_size_anywhere("lengths_to_offsets", [&](const Placeholders& p, std::size_t& bytes) {
      return lengths_to_offsets<std::int64_t, OffsetT>(nullptr, bytes, p.at<const std::int64_t>(0), s.batch,
                                                       p.at<OffsetT>(1), p.at<CheckResult>(2), nullptr);
    });
    same_size_anywhere("offsets_to_lengths", [&](const Placeholders& p, std::size_t& bytes) {
      return offsets_to_lengths<OffsetT, std::int32_t>(nullptr, bytes, p.at<const OffsetT>(0), s.batch,
                                                       p.at<std::int32_t>(1), nullptr);
    });
    same_size_anywhere("max_length", [&](const Placeholders& p, std::size_t& bytes) {
      return max_length<OffsetT>(nullptr, bytes, p.at<const OffsetT>(0), s.batch, p.at<std::int64_t>(1), nullptr);
    });
    same_size_anywhere("validate_offsets", [&](const Placeholders& p, std::size_t& bytes) {
      return validate_offsets<OffsetT>(nullptr, bytes, p.at<const OffsetT>(0), s.batch, s.nnz, s.nnz,
                                       p.at<CheckResult>(1), nullptr);
    });
    const std::int64_t max_len = s.batch > 0 ? s.nnz / s.batch + 7 : 0;
    same_size_anywhere("ragged_to_padded", [&](const Placeholders& p, std::size_t& bytes) {
      const PaddedView<float> dst{p.at<float>(2), s.batch, max_len, s.inner};
      return ragged_to_padded<float, OffsetT>(nullptr, bytes, ragged_at<float, OffsetT>(p, 0, 1, s), dst, 0.0f,
                                              Align::kRight, Truncate::kLeft, nullptr);
    });
    same_size_anywhere("padded_to_ragged", [&](const Placeholders& p, std::size_t& bytes) {
      const PaddedView<const float> src{p.at<const float>(0), s.batch, max_len, s.inner};
      const RaggedView<float, OffsetT> dst{p.at<float>(1), p.at<const OffsetT>(2), s.batch, s.nnz, s.inner};
      return padded_to_ragged<float, OffsetT>(nullptr, bytes, src, dst, 0.0f, Align::kLeft, Truncate::kRight,
                                              nullptr);
    });
    same_size_anywhere("lengths_to_mask", [&](const Placeholders& p, std::size_t& bytes) {
      return lengths_to_mask<OffsetT>(nullptr, bytes, p.at<const OffsetT>(0), s.batch, max_len, Align::kLeft,
                                      p.at<bool>(1), p.at<CheckResult>(2), nullptr);
    });
    same_size_anywhere("lengths_to_additive_mask", [&](const Placeholders& p, std::size_t& bytes) {
      return lengths_to_additive_mask<OffsetT, bfloat16>(nullptr, bytes, p.at<const OffsetT>(0), s.batch, max_len,
                                                         Align::kRight, p.at<bfloat16>(1), nullptr, nullptr);
    });
    auto layout_at = [&](const Placeholders& p) {
      return PackedLayout<OffsetT>{s.batch,          max_len,          p.at<std::int64_t>(10), p.at<std::int64_t>(11),
                                   p.at<OffsetT>(12), p.at<OffsetT>(13), p.at<OffsetT>(14)};
    };
    same_size_anywhere("packing_order", [&](const Placeholders& p, std::size_t& bytes) {
      return packing_order<OffsetT>(nullptr, bytes, p.at<const OffsetT>(0), layout_at(p),
                                    p.at<CheckResult>(1), nullptr);
    });
    same_size_anywhere("pack_sequences", [&](const Placeholders& p, std::size_t& bytes) {
      return pack_sequences<float, OffsetT>(nullptr, bytes, ragged_at<float, OffsetT>(p, 0, 1, s), layout_at(p),
                                            p.at<float>(2), nullptr);
    });
    same_size_anywhere("unpack_sequences", [&](const Placeholders& p, std::size_t& bytes) {
      const RaggedView<float, OffsetT> dst{p.at<float>(1), p.at<const OffsetT>(2), s.batch, s.nnz, s.inner};
      return unpack_sequences<float, OffsetT>(nullptr, bytes, p.at<const float>(0), layout_at(p), dst, nullptr);
    });
  }
}

TEST_CASE("attention and the recurrent layers size their workspace from the shapes alone", "[workspace]") {
  for (const Shape& s : kShapes) {
    INFO("batch " << s.batch << " nnz " << s.nnz);
    for (const bool causal : {false, true}) {
      same_size_anywhere("varlen_attention_forward", [&](const Placeholders& p, std::size_t& bytes) {
        AttentionArgs<bfloat16, std::int32_t> a;
        a.q = dense_heads<const bfloat16>(p.at16<const bfloat16>(0), 8, 128);
        a.k = dense_heads<const bfloat16>(p.at16<const bfloat16>(1), 2, 128);
        a.v = dense_heads<const bfloat16>(p.at16<const bfloat16>(2), 2, 128);
        a.o = dense_heads<bfloat16>(p.at16<bfloat16>(3), 8, 128);
        a.lse = p.at<float>(4);
        a.q_seq = SequenceLayout<std::int32_t>::ragged(p.at<const std::int32_t>(5), s.nnz);
        a.k_seq = SequenceLayout<std::int32_t>::ragged(p.at<const std::int32_t>(6), s.nnz);
        a.batch = s.batch;
        a.heads_q = 8;
        a.heads_kv = 2;
        a.head_dim = 128;
        a.scale = 0.125f;
        a.causal = causal;
        return varlen_attention_forward(nullptr, bytes, a, nullptr);
      });
    }
    // Two bidirectional LSTM layers with a projection, and a GRU, on every path that can run them here (a forced
    // persistent path is planned by the query: it needs the device, not the buffers).
    for (const RnnMode mode : {RnnMode::kLstm, RnnMode::kGru}) {
      for (const std::int64_t hidden : {256, 1024}) {
        RnnDesc desc;
        desc.mode = mode;
        desc.input_size = s.inner;
        desc.hidden_size = hidden;
        desc.proj_size = mode == RnnMode::kLstm ? 128 : 0;
        desc.num_layers = 2;
        desc.bidirectional = true;
        for (const RnnAlgo algo : {RnnAlgo::kAuto, RnnAlgo::kPerStep, RnnAlgo::kPersistent,
                                   RnnAlgo::kPersistentStreamed}) {
          RnnAlgo chosen = RnnAlgo::kAuto;
          const Status runs = rnn_select_algo<bfloat16>(desc, algo, chosen);
          if (runs == Status::kUnsupportedShape) continue;  // a persistent path this device cannot hold
          REQUIRE_OK(runs);
          INFO("hidden " << hidden << " " << rnn_mode_name(mode) << " " << rnn_algo_name(algo));
          same_size_anywhere("rnn_forward", [&](const Placeholders& p, std::size_t& bytes) {
            RnnArgs<bfloat16, std::int64_t> a;
            a.desc = desc;
            a.algo = algo;
            std::vector<RnnLayerWeights<bfloat16>> weights(4);
            for (int w = 0; w < 4; ++w)
              weights[w] = {p.at<const bfloat16>(10 + 5 * w), p.at<const bfloat16>(11 + 5 * w),
                            p.at<const bfloat16>(12 + 5 * w), p.at<const bfloat16>(13 + 5 * w),
                            mode == RnnMode::kLstm ? p.at<const bfloat16>(14 + 5 * w) : nullptr};
            a.weights = weights.data();
            a.input = RaggedView<const bfloat16, std::int64_t>{p.at<const bfloat16>(0), p.at<const std::int64_t>(1),
                                                               s.batch, s.nnz, s.inner};
            a.max_steps = s.batch > 0 ? s.nnz : 0;
            a.h0 = p.at<const bfloat16>(2);
            a.c0 = mode == RnnMode::kLstm ? p.at<const bfloat16>(3) : nullptr;
            a.output = p.at<bfloat16>(4);
            a.hn = p.at<bfloat16>(5);
            a.cn = mode == RnnMode::kLstm ? p.at<bfloat16>(6) : nullptr;
            a.projection = RnnProjection::kBatchInvariant;  // no cuBLAS handle needed
            return rnn_forward(nullptr, bytes, a, nullptr);
          });
        }
      }
    }
  }
}
