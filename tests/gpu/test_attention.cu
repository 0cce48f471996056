// varlen_attention_forward on the device against the double-precision CPU reference: float, half and bfloat16,
// int32 and int64 offsets, head_dim 64 and 128, causal and not, MHA / GQA / MQA, query lengths different from
// key lengths, zero-length and length-1 sequences, lengths that are not multiples of the tiles, one long
// sequence among many short ones, thousands of tiny sequences, spare rows; padded layout = ragged layout and
// batch invariance (bitwise); strided (fused QKV) inputs; graph capture; the RaggedTensor convenience call;
// malformed offsets (no out-of-bounds access: compute-sanitizer runs this file). The bad-argument errors are
// checked without a GPU in tests/cpu/test_argument_checks.cpp.
//
// Tolerance (after FlashAttention's test): over all valid elements of a case,
//   max |O - O_ref| <= 2 * max |O_naive - O_ref| + slack,
// O_ref the double reference, O_naive the same attention computed as a naive kernel in T would: inputs in T,
// S in float, softmax in float, P rounded to T, P V accumulated in float and rounded to T, the max taken over
// three naive runs that add their terms in different orders (SumOrder). slack is half an ulp
// of T at max |O_ref| (8 ulps for float, whose exp2 is the hardware approximation). LSE the same way against
// the naive float LSE. Rows that see no key must give O = 0 and LSE = -inf exactly.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>

#include "common/host_attention.h"
#include "common/test_util.h"
#include "common/tolerance.h"
#include "ragged/attention.h"
#include "ragged/buffer.h"
#include "ragged/reference.h"
#include "ragged/tensor.h"
#include "ragged/tensor_attention.h"

using namespace ragged;
using test::HostAttention;

namespace {

using test::BF16_I32;
using test::BF16_I64;
using test::F16_I32;
using test::F16_I64;
using test::F32_I32;
using test::F32_I64;
using test::run_two_phase;
using test::is_poison;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

template <typename T>
constexpr bool kLowPrecision = !std::is_same<T, float>::value;

template <typename T>
const char* type_name() {
  if (std::is_same<T, half>::value) return "half";
  if (std::is_same<T, bfloat16>::value) return "bfloat16";
  return "float";
}


template <typename T>
struct Output {
  std::vector<T> o;
  std::vector<float> lse;
};

// The inputs of a HostAttention in device memory, and a poisoned run of the op on them.
template <typename T, typename OffsetT>
struct DeviceAttention {
  const HostAttention<T, OffsetT>& host;
  DeviceBuffer<T> q, k, v;
  DeviceBuffer<OffsetT> q_index, k_index;

  explicit DeviceAttention(const HostAttention<T, OffsetT>& h)
      : host(h), q(h.q), k(h.k), v(h.v), q_index(h.q_index), k_index(h.k_index) {}

  AttentionArgs<T, OffsetT> args(T* o, float* lse) const {
    return host.args_with(q.data(), k.data(), v.data(), o, lse, q_index.data(), k_index.data());
  }

  // query_tile 0: the library's choice.
  Output<T> run(int query_tile = 0) const {
    DeviceBuffer<T> o(static_cast<std::size_t>(host.o_elems()));
    DeviceBuffer<float> lse(static_cast<std::size_t>(host.lse_elems()));
    test::poison(o);
    test::poison(lse);
    AttentionArgs<T, OffsetT> a = args(o.data(), lse.data());
    a.query_tile = query_tile;
    REQUIRE_OK(
        run_two_phase([&](void* ws, std::size_t& bytes) { return varlen_attention_forward(ws, bytes, a, nullptr); }));
    return {o.to_host(), lse.to_host()};
  }
};

// ---------------------------------------------------------------------------------------------------------
// The naive computation in T (tolerance rule) and the comparison.
// ---------------------------------------------------------------------------------------------------------
struct Naive {
  std::vector<double> out, lse;  // NaN outside sequences
};

// The order in which a naive computation adds up the terms of each sum (dot products, the softmax sum and P V).
// The tolerance takes the largest error of the three: one naive run is a single draw of the rounding error, and
// where a few keys dominate (large logits) a single draw is as likely to be small as the kernel's is to be large
// (in float, one run in about 13 exceeded 2x a forward-order draw on 16k keys, kernel emulator, 38 seeds).
enum class SumOrder { kForward, kReverse, kEvenThenOdd };

// Index k of n terms in the given order.
inline std::int64_t term(SumOrder order, std::int64_t k, std::int64_t n) {
  if (order == SumOrder::kReverse) return n - 1 - k;
  if (order == SumOrder::kEvenThenOdd) {
    const std::int64_t evens = (n + 1) / 2;
    return k < evens ? 2 * k : 2 * (k - evens) + 1;
  }
  return k;
}

template <typename T, typename OffsetT>
Naive naive_attention(const HostAttention<T, OffsetT>& h, SumOrder order) {
  Naive n;
  n.out.assign(static_cast<std::size_t>(h.o_elems()), kNaN);
  n.lse.assign(static_cast<std::size_t>(h.lse_elems()), kNaN);
  const int D = h.dim, group = h.heads_q / h.heads_kv;
  std::vector<float> s, p, acc(static_cast<std::size_t>(D));
  for (std::int64_t b = 0; b < h.batch; ++b) {
    const std::int64_t Lq = h.q_lengths[b], Lk = h.k_lengths[b];
    for (int hq = 0; hq < h.heads_q; ++hq) {
      const int hk = hq / group;
      for (std::int64_t i = 0; i < Lq; ++i) {
        const std::int64_t visible = h.causal ? std::min(Lk, std::max<std::int64_t>(0, i + Lk - Lq + 1)) : Lk;
        const std::int64_t row = h.q_row(b, i);
        const T* q = &h.q[(row * h.heads_q + hq) * D];
        s.assign(static_cast<std::size_t>(visible), 0.0f);
        float m = -std::numeric_limits<float>::infinity();
        for (std::int64_t j = 0; j < visible; ++j) {
          const T* k = &h.k[(h.k_row(b, j) * h.heads_kv + hk) * D];
          float dot = 0.0f;
          for (int dk = 0; dk < D; ++dk) {
            const std::int64_t d = term(order, dk, D);
            dot += static_cast<float>(test::to_double(q[d])) * static_cast<float>(test::to_double(k[d]));
          }
          s[j] = dot * h.scale;
          m = std::max(m, s[j]);
        }
        float sum = 0.0f;
        for (std::int64_t jk = 0; jk < visible; ++jk) sum += std::exp(s[term(order, jk, visible)] - m);
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (std::int64_t jk = 0; jk < visible; ++jk) {
          const std::int64_t j = term(order, jk, visible);
          const float pj = static_cast<float>(test::to_double(test::round_to<T>(std::exp(s[j] - m) / sum)));
          const T* v = &h.v[(h.k_row(b, j) * h.heads_kv + hk) * D];
          for (int d = 0; d < D; ++d) acc[d] += pj * static_cast<float>(test::to_double(v[d]));
        }
        for (int d = 0; d < D; ++d) n.out[(row * h.heads_q + hq) * D + d] = test::to_double(test::round_to<T>(acc[d]));
        n.lse[row * h.heads_q + hq] =
            visible == 0 ? -std::numeric_limits<double>::infinity() : static_cast<double>(m + std::log(sum));
      }
    }
  }
  return n;
}


// Per element of O (`per_head` = head_dim) or LSE (1): whether it belongs to a query of some sequence.
template <typename T, typename OffsetT>
std::vector<char> inside_sequences(const HostAttention<T, OffsetT>& h, int per_head) {
  const std::int64_t per_row = static_cast<std::int64_t>(h.heads_q) * per_head;
  std::vector<char> inside(static_cast<std::size_t>(h.q_rows * per_row), 0);
  for (std::int64_t b = 0; b < h.batch; ++b)
    for (std::int64_t i = 0; i < h.q_lengths[b]; ++i)
      std::fill_n(inside.begin() + h.q_row(b, i) * per_row, per_row, 1);
  return inside;
}

// Checks one device output against the reference with the tolerance rule; returns "" or what failed.
// Elements outside every sequence must keep their poison; a NaN of the reference must be a NaN.
template <typename T>
std::string check_against_reference(const std::vector<T>& got, const std::vector<double>& ref,
                                    const std::vector<const std::vector<double>*>& naives, bool is_lse,
                                    const std::vector<char>& inside) {
  double err = 0.0, naive_err = 0.0, max_ref = 0.0;
  std::ostringstream s;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double g = test::to_double(got[i]);
    if (!inside[i]) {
      if (!is_poison(got[i])) {
        s << "element " << i << " lies outside every sequence but was written (" << g << ")";
        return s.str();
      }
      continue;
    }
    if (std::isnan(ref[i])) {  // a NaN or +inf score (attention.h); the poison is a NaN too
      if (!std::isnan(g) || is_poison(got[i])) {
        s << "element " << i << ": got " << g << ", reference NaN";
        return s.str();
      }
      continue;
    }
    if (std::isinf(ref[i]) || std::isnan(g) || std::isinf(g)) {  // -inf LSE of a row without keys, or a bug
      if (g != ref[i]) {
        s << "element " << i << ": got " << g << ", reference " << ref[i];
        return s.str();
      }
      continue;
    }
    err = std::max(err, std::abs(g - ref[i]));
    for (const std::vector<double>* naive : naives) naive_err = std::max(naive_err, std::abs((*naive)[i] - ref[i]));
    max_ref = std::max(max_ref, std::abs(ref[i]));
  }
  double slack = 0.0;
  if (is_lse) slack = 8.0 * test::ulp_of<float>(std::max(1.0, max_ref));
  else slack = kLowPrecision<T> ? 0.5 * test::ulp_of<T>(max_ref) : 8.0 * test::ulp_of<float>(max_ref);
  if (err > 2.0 * naive_err + slack) {
    s << (is_lse ? "LSE" : "O") << " error " << err << " exceeds 2 x naive error " << naive_err << " + slack "
      << slack << " (max |ref| " << max_ref << ")";
    return s.str();
  }
  return "";
}

// Runs the op on `h` and checks O and LSE; rows without a visible key must be exactly O = 0, LSE = -inf.
// Every query tile the kernel for T has: the tensor-core kernel comes in 64- and 128-row tiles, and the
// automatic choice (0) must pick one of them.
template <typename T>
std::vector<int> query_tiles() {
  if (kLowPrecision<T>) return {64, 128};
  return {0};
}

// Each tile against the reference, and the tiles against each other bitwise (a row's arithmetic does not
// depend on the tile).
template <typename T, typename OffsetT>
void check_case(const HostAttention<T, OffsetT>& h) {
  std::vector<double> ref_out(static_cast<std::size_t>(h.o_elems()), kNaN);
  std::vector<double> ref_lse(static_cast<std::size_t>(h.lse_elems()), kNaN);
  reference::attention_forward_exact(h.host_args(nullptr, nullptr), ref_out.data(), ref_lse.data());
  const Naive forward = naive_attention(h, SumOrder::kForward), reverse = naive_attention(h, SumOrder::kReverse),
              even_odd = naive_attention(h, SumOrder::kEvenThenOdd);
  const std::vector<const std::vector<double>*> naive_out{&forward.out, &reverse.out, &even_odd.out};
  const std::vector<const std::vector<double>*> naive_lse{&forward.lse, &reverse.lse, &even_odd.lse};
  const std::vector<char> inside_o = inside_sequences(h, h.dim), inside_lse = inside_sequences(h, 1);
  const DeviceAttention<T, OffsetT> dev(h);
  std::vector<Output<T>> runs;
  for (int tile : query_tiles<T>()) {
    INFO("query tile " << tile);
    const Output<T> got = dev.run(tile);
    std::string failure = check_against_reference(got.o, ref_out, naive_out, false, inside_o);
    INFO("O: " << failure);
    REQUIRE(failure.empty());
    failure = check_against_reference(got.lse, ref_lse, naive_lse, true, inside_lse);
    INFO("LSE: " << failure);
    REQUIRE(failure.empty());
    for (std::size_t r = 0; r < ref_lse.size(); ++r)
      if (ref_lse[r] == -std::numeric_limits<double>::infinity())
        for (int d = 0; d < h.dim; ++d) REQUIRE(test::to_double(got.o[r * h.dim + d]) == 0.0);
    runs.push_back(got);
  }
  for (std::size_t i = 1; i < runs.size(); ++i) {
    REQUIRE_BITWISE_EQUAL(runs[0].o, runs[i].o);
    REQUIRE_BITWISE_EQUAL(runs[0].lse, runs[i].lse);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------------------------
struct Scenario {
  std::string name;
  std::vector<std::int64_t> q, k;
  int heads_q, heads_kv, dim;
  bool causal;
  std::int64_t extra_rows = 0;
  float scale = 0.0f;  // 0: 1 / sqrt(dim)
};

std::vector<std::int64_t> uniform_lengths(std::mt19937_64& rng, std::size_t n, std::int64_t lo, std::int64_t hi) {
  std::uniform_int_distribution<std::int64_t> len(lo, hi);
  std::vector<std::int64_t> out(n);
  for (auto& l : out) l = len(rng);
  return out;
}

std::vector<Scenario> scenarios(std::mt19937_64& rng) {
  std::vector<Scenario> s;
  // Lengths that are rarely multiples of the 64-row tiles, query and key lengths independent.
  const auto q1 = uniform_lengths(rng, 6, 1, 200), k1 = uniform_lengths(rng, 6, 1, 200);
  s.push_back({"independent lengths 1..200", q1, k1, 4, 4, 64, false});
  s.push_back({"independent lengths 1..200", q1, k1, 8, 2, 128, true});
  const auto e = uniform_lengths(rng, 5, 0, 300);
  s.push_back({"equal lengths 0..300", e, e, 4, 1, 128, false});
  s.push_back({"equal lengths 0..300, scale 0.3", e, e, 2, 2, 64, true, 0, 0.3f});
  // Zero-length and length-1 sequences, including queries without keys and keys without queries.
  const std::vector<std::int64_t> zq{0, 1, 0, 1, 1, 3, 0, 2, 1}, zk{1, 0, 0, 1, 4, 0, 2, 1, 65};
  s.push_back({"zero-length and length-1", zq, zk, 4, 2, 64, true});
  s.push_back({"zero-length and length-1", zq, zk, 2, 1, 128, false});
  // One long sequence among many short ones.
  std::vector<std::int64_t> ls = uniform_lengths(rng, 40, 0, 8);
  std::uniform_int_distribution<std::size_t> where(0, ls.size() - 1);
  std::uniform_int_distribution<std::int64_t> long_len(700, 900);
  ls[where(rng)] = long_len(rng);
  s.push_back({"one long among many short", ls, ls, 2, 1, 128, true});
  s.push_back({"one long among many short", ls, ls, 2, 2, 64, false});
  // More queries than keys: under the causal mask the first L_q - L_k queries see nothing.
  const auto mq = uniform_lengths(rng, 4, 100, 200), mk = uniform_lengths(rng, 4, 0, 80);
  s.push_back({"more queries than keys", mq, mk, 4, 2, 128, true});
  s.push_back({"more queries than keys", mq, mk, 4, 4, 64, false});
  // Decode-like: a few queries against long key histories.
  const auto dq = uniform_lengths(rng, 6, 1, 4), dk = uniform_lengths(rng, 6, 100, 300);
  s.push_back({"few queries, long keys", dq, dk, 8, 1, 128, true});
  // Hundreds of key tiles with large logits (scores of std ~8): the online softmax must rescale by exactly 1
  // while the row max holds, or a rounding error of max * scale compounds once per key tile. Under the
  // sanitizers (RAGGED_TEST_SCALE) a quarter of the keys, still 64 tiles, fits racecheck's 150 s per run.
  const std::int64_t k16 = test::scaled(16384, 1024), k12 = test::scaled(12001, 1024), k9 = test::scaled(9000, 1024);
  s.push_back({"16k keys, large logits", {3, 2}, {k16, k12}, 2, 1, 64, false, 0, 3.0f});
  s.push_back({"16k keys, large logits", {3, 20}, {k16, k9}, 2, 2, 128, true, 0, 3.0f});
  // Thousands of tiny sequences: the tile search takes several rounds.
  const auto tq = uniform_lengths(rng, 2000, 0, 4), tk = uniform_lengths(rng, 2000, 0, 4);
  s.push_back({"2000 tiny sequences", tq, tk, 2, 2, 64, true});
  s.push_back({"2000 tiny sequences", tq, tq, 2, 1, 128, false});
  s.push_back({"empty batch", {}, {}, 4, 2, 128, true});
  s.push_back({"all empty", {0, 0, 0}, {0, 0, 0}, 4, 2, 64, false});
  s.push_back({"spare rows after the last sequence", q1, k1, 2, 2, 128, true, 37});
  return s;
}

}  // namespace

TEMPLATE_TEST_CASE("attention on the device matches the CPU reference", "[attention][gpu]", F32_I32, F32_I64, F16_I32,
                   F16_I64, BF16_I32, BF16_I64) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(601);
  for (const Scenario& sc : scenarios(rng)) {
    INFO(type_name<T>() << ": " << sc.name << " (batch " << sc.q.size() << "), heads " << sc.heads_q << "/"
                        << sc.heads_kv << ", dim " << sc.dim << (sc.causal ? ", causal" : ""));
    auto h = test::random_attention<T, OffsetT>(sc.q, sc.k, sc.heads_q, sc.heads_kv, sc.dim, sc.causal, rng,
                                                sc.extra_rows);
    if (sc.scale > 0.0f) h.scale = sc.scale;
    check_case(h);
  }
}

TEMPLATE_TEST_CASE("attention on the device: every head_dim x mask x head grouping", "[attention][gpu]", F32_I32,
                   F16_I64, BF16_I32) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(602);
  struct Heads {
    int q, kv;
    const char* name;
  };
  const Heads groupings[] = {{4, 4, "MHA"}, {8, 2, "GQA"}, {4, 1, "MQA"}};
  for (int dim : {64, 128})
    for (bool causal : {false, true})
      for (const Heads& g : groupings) {
        const auto q = uniform_lengths(rng, 4, 0, 130), k = uniform_lengths(rng, 4, 0, 130);
        INFO(type_name<T>() << ": dim " << dim << ", " << g.name << (causal ? ", causal" : ""));
        check_case(test::random_attention<T, OffsetT>(q, k, g.q, g.kv, dim, causal, rng));
      }
}

TEMPLATE_TEST_CASE("attention: scores of -inf, +inf and NaN give the reference's O and LSE", "[attention][gpu]",
                   F32_I32, F16_I64, BF16_I32) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(611);
  // A query whose scores are all -inf: O = 0 and LSE = -inf exactly (check_case); NaN and +inf scores: NaN
  // O and LSE, where the LSE used to come out -inf; a single -inf score is a zero weight.
  const auto h = test::non_finite_attention<T, OffsetT>(rng);
  check_case(h);
  std::vector<double> ref_lse(static_cast<std::size_t>(h.lse_elems()));
  reference::attention_forward_exact(h.host_args(nullptr, nullptr), nullptr, ref_lse.data());
  REQUIRE(std::count_if(ref_lse.begin(), ref_lse.end(), [](double x) { return std::isnan(x); }) == 8);
  REQUIRE(std::count(ref_lse.begin(), ref_lse.end(), -std::numeric_limits<double>::infinity()) == 1);
}

TEMPLATE_TEST_CASE("attention: padded layout gives bitwise the ragged results", "[attention][gpu]", F32_I32, F16_I64,
                   BF16_I32) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(603);
  for (int dim : {64, 128})
    for (bool causal : {false, true}) {
      const std::vector<std::int64_t> q{70, 0, 1, 129, 64, 3}, k{65, 5, 0, 129, 200, 3};
      const auto r = test::random_attention<T, OffsetT>(q, k, 4, 2, dim, causal, rng);
      const auto p = test::to_padded(r, 150, 203, rng);
      const Output<T> ro = DeviceAttention<T, OffsetT>(r).run(), po = DeviceAttention<T, OffsetT>(p).run();
      INFO(type_name<T>() << ", dim " << dim << (causal ? ", causal" : ""));
      const std::int64_t w = r.heads_q * dim;
      for (std::int64_t b = 0; b < r.batch; ++b) {
        for (std::int64_t i = 0; i < p.q_max_len; ++i) {
          const std::int64_t prow = p.q_row(b, i);
          if (i >= q[b]) {  // padding slot: untouched
            for (std::int64_t x = 0; x < w; ++x) REQUIRE(is_poison(po.o[prow * w + x]));
            for (int hq = 0; hq < r.heads_q; ++hq) REQUIRE(is_poison(po.lse[prow * r.heads_q + hq]));
            continue;
          }
          const std::int64_t rrow = r.q_row(b, i);
          REQUIRE(std::memcmp(&ro.o[rrow * w], &po.o[prow * w], w * sizeof(T)) == 0);
          REQUIRE(std::memcmp(&ro.lse[rrow * r.heads_q], &po.lse[prow * r.heads_q], r.heads_q * sizeof(float)) == 0);
        }
      }
    }
}

TEMPLATE_TEST_CASE("attention is deterministic and batch-invariant", "[attention][gpu][determinism]", F32_I32,
                   F16_I32, BF16_I64) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(604);
  for (bool causal : {false, true}) {
    // The same sequence (300 queries, 257 keys) at different positions of two different batches.
    const auto base = test::random_attention<T, OffsetT>({300}, {257}, 4, 2, 128, causal, rng);
    const std::vector<std::int64_t> q1{5, 300, 77}, k1{9, 257, 1}, q2{64, 13, 1, 300}, k2{3, 100, 0, 257};
    auto first = test::random_attention<T, OffsetT>(q1, k1, 4, 2, 128, causal, rng);
    auto second = test::random_attention<T, OffsetT>(q2, k2, 4, 2, 128, causal, rng);
    const std::int64_t qw = 4 * 128, kw = 2 * 128;
    auto embed = [&](HostAttention<T, OffsetT>& h, std::int64_t b) {
      std::copy(base.q.begin(), base.q.end(), h.q.begin() + h.q_row(b, 0) * qw);
      std::copy(base.k.begin(), base.k.end(), h.k.begin() + h.k_row(b, 0) * kw);
      std::copy(base.v.begin(), base.v.end(), h.v.begin() + h.k_row(b, 0) * kw);
    };
    embed(first, 1);
    embed(second, 3);
    const DeviceAttention<T, OffsetT> d1(first), d2(second);
    const Output<T> a = d1.run(), again = d1.run(), c = d2.run();
    REQUIRE_BITWISE_EQUAL(a.o, again.o);
    REQUIRE_BITWISE_EQUAL(a.lse, again.lse);
    REQUIRE(std::memcmp(&a.o[first.q_row(1, 0) * qw], &c.o[second.q_row(3, 0) * qw], 300 * qw * sizeof(T)) == 0);
    REQUIRE(std::memcmp(&a.lse[first.q_row(1, 0) * 4], &c.lse[second.q_row(3, 0) * 4], 300 * 4 * sizeof(float)) == 0);
  }
}

TEMPLATE_TEST_CASE("attention reads strided Q / K / V and writes strided O", "[attention][gpu]", F32_I64, BF16_I32) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(605);
  // A fused QKV tensor [tokens, 3, heads, dim] and O inside a [tokens, 2, heads, dim] buffer.
  const int heads = 2, dim = 64;
  const std::vector<std::int64_t> lengths{100, 0, 37, 64};
  const auto h = test::random_attention<T, OffsetT>(lengths, lengths, heads, heads, dim, true, rng);
  const std::int64_t rows = h.q_rows, w = heads * dim;
  std::vector<T> qkv(static_cast<std::size_t>(rows * 3 * w));
  for (std::int64_t row = 0; row < rows; ++row)
    for (std::int64_t x = 0; x < w; ++x) {
      qkv[(row * 3 + 0) * w + x] = h.q[row * w + x];
      qkv[(row * 3 + 1) * w + x] = h.k[row * w + x];
      qkv[(row * 3 + 2) * w + x] = h.v[row * w + x];
    }
  const DeviceAttention<T, OffsetT> dense(h);
  const Output<T> expected = dense.run();
  DeviceBuffer<T> d_qkv(qkv), o(static_cast<std::size_t>(rows * 2 * w));
  DeviceBuffer<float> lse(static_cast<std::size_t>(rows * heads));
  test::poison(o);
  test::poison(lse);
  AttentionArgs<T, OffsetT> a = dense.args(o.data(), lse.data());
  a.q = HeadsView<const T>{d_qkv.data(), 3 * w, dim};
  a.k = HeadsView<const T>{d_qkv.data() + w, 3 * w, dim};
  a.v = HeadsView<const T>{d_qkv.data() + 2 * w, 3 * w, dim};
  a.o = HeadsView<T>{o.data(), 2 * w, dim};
  REQUIRE_OK(
      run_two_phase([&](void* ws, std::size_t& bytes) { return varlen_attention_forward(ws, bytes, a, nullptr); }));
  const std::vector<T> wide = o.to_host();
  REQUIRE(test::count_poison(expected.o) == 0);  // the dense run wrote every row it is held to
  for (std::int64_t row = 0; row < rows; ++row) {
    REQUIRE(std::memcmp(&wide[row * 2 * w], &expected.o[row * w], w * sizeof(T)) == 0);
    for (std::int64_t x = 0; x < w; ++x) REQUIRE(is_poison(wide[row * 2 * w + w + x]));
  }
  REQUIRE_WRITTEN_AND_EQUAL(lse.to_host(), expected.lse);
}

TEST_CASE("attention can be captured in a CUDA graph", "[attention][gpu][graph]") {
  auto rng = test::make_rng(606);
  const auto h = test::random_attention<bfloat16, std::int32_t>({90, 0, 200}, {50, 7, 200}, 4, 2, 128, true, rng);
  const DeviceAttention<bfloat16, std::int32_t> dev(h);
  const Output<bfloat16> expected = dev.run();
  DeviceBuffer<bfloat16> o(static_cast<std::size_t>(h.o_elems()));
  DeviceBuffer<float> lse(static_cast<std::size_t>(h.lse_elems()));
  test::poison(o);
  test::poison(lse);
  const auto a = dev.args(o.data(), lse.data());
  std::size_t bytes = 0;
  REQUIRE_OK(varlen_attention_forward(nullptr, bytes, a, nullptr));
  DeviceBuffer<unsigned char> ws(std::max<std::size_t>(bytes, 1));
  test::poison_workspace(ws);
  test::CapturedGraph graph([&](cudaStream_t stream) { return varlen_attention_forward(ws.data(), bytes, a, stream); });
  REQUIRE_OK(graph.enqueued);
  REQUIRE_CUDA(cudaDeviceSynchronize());  // the poisoning above, before the graph's own stream runs
  REQUIRE_CUDA(graph.launch());
  REQUIRE_WRITTEN_AND_EQUAL(o.to_host(), expected.o);
  REQUIRE_WRITTEN_AND_EQUAL(lse.to_host(), expected.lse);
}

TEST_CASE("attention on RaggedTensors matches the low-level call", "[attention][gpu]") {
  auto rng = test::make_rng(607);
  const std::vector<std::int64_t> q_len{33, 0, 128}, k_len{40, 3, 100};
  const auto h = test::random_attention<half, std::int64_t>(q_len, k_len, 4, 1, 64, true, rng);
  const Output<half> expected = DeviceAttention<half, std::int64_t>(h).run();
  const auto q = RaggedTensor<half, std::int64_t>::from_host(h.q, q_len, {4, 64});
  const auto k = RaggedTensor<half, std::int64_t>::from_host(h.k, k_len, {1, 64});
  const auto v = RaggedTensor<half, std::int64_t>::from_host(h.v, k_len, {1, 64});
  DeviceBuffer<float> lse;
  const auto o = attention(q, k, v, /*causal=*/true, /*scale=*/0.0f, &lse);
  REQUIRE_WRITTEN_AND_EQUAL(o.values_to_host(), expected.o);
  REQUIRE_WRITTEN_AND_EQUAL(lse.to_host(), expected.lse);
  // A shape error throws with a message naming the argument.
  const auto bad = RaggedTensor<half, std::int64_t>::from_host(h.v, k_len, {64});
  REQUIRE_THROWS_AS(attention(q, k, bad), Error);
  // A call the low-level op refuses (head_dim 32: not a kernel's) leaves the caller's lse buffer as it was.
  const auto q32 = RaggedTensor<half, std::int64_t>::from_host(std::vector<half>(h.q.size() / 2), q_len, {4, 32});
  const auto kv32 = RaggedTensor<half, std::int64_t>::from_host(std::vector<half>(h.k.size() / 2), k_len, {1, 32});
  REQUIRE_THROWS_WITH(attention(q32, kv32, kv32, false, 0.0f, &lse), Catch::Contains("head_dim 32"));
  REQUIRE_BITWISE_EQUAL(lse.to_host(), expected.lse);
  // scale <= 0 means the default; NaN and infinity are refused, not taken for it.
  for (float scale : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()})
    REQUIRE_THROWS_WITH(attention(q, k, v, true, scale, &lse), Catch::Contains("scale"));
  REQUIRE_BITWISE_EQUAL(attention(q, k, v, true, -1.0f).values_to_host(), expected.o);
}

// The case of the cross-stream tests below: bf16, grouped heads 4 / 2, dim 128, a sequence without queries;
// its expected outputs from the low-level call on the default stream.
struct CrossStreamCase {
  std::vector<std::int64_t> q_len{200, 0, 64}, k_len{300, 5, 64};
  test::HostAttention<bfloat16, std::int32_t> h;
  Output<bfloat16> expected;

  explicit CrossStreamCase(std::uint64_t seed) {
    auto rng = test::make_rng(seed);
    h = test::random_attention<bfloat16, std::int32_t>(q_len, k_len, 4, 2, 128, false, rng);
    expected = DeviceAttention<bfloat16, std::int32_t>(h).run();
  }
};

TEST_CASE("attention on RaggedTensors waits for K and V on their own stream, without a host sync",
          "[attention][gpu]") {
  const CrossStreamCase c(609);
  const auto& [q_len, k_len, h, expected] = c;
  cudaStream_t kv_stream = nullptr;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&kv_stream, cudaStreamNonBlocking));
  {
    const auto q = RaggedTensor<bfloat16, std::int32_t>::from_host(h.q, q_len, {4, 128});
    // K and V hold poison until a copy that waits behind a long queue on their stream lands: if the kernel did
    // not wait for that stream, it would read the poison.
    std::vector<bfloat16> poison(h.k.size(), __float2bfloat16(1000.0f));
    auto k = RaggedTensor<bfloat16, std::int32_t>::from_host(poison, k_len, {2, 128}, kv_stream);
    auto v = RaggedTensor<bfloat16, std::int32_t>::from_host(poison, k_len, {2, 128}, kv_stream);
    const DeviceBuffer<bfloat16> real_k(h.k, kv_stream), real_v(h.v, kv_stream);  // uploaded, synchronised
    DeviceBuffer<unsigned char> busy(std::size_t{256} << 20, kv_stream);
    for (int i = 0; i < 8; ++i) REQUIRE_CUDA(cudaMemsetAsync(busy.data(), i, busy.bytes(), kv_stream));
    REQUIRE_CUDA(cudaMemcpyAsync(k.values().data(), real_k.data(), real_k.bytes(), cudaMemcpyDeviceToDevice,
                                 kv_stream));
    REQUIRE_CUDA(cudaMemcpyAsync(v.values().data(), real_v.data(), real_v.bytes(), cudaMemcpyDeviceToDevice,
                                 kv_stream));
    DeviceBuffer<float> lse;
    const auto o = attention(q, k, v, /*causal=*/false, /*scale=*/0.0f, &lse);
    REQUIRE_WRITTEN_AND_EQUAL(o.values_to_host(), expected.o);
    REQUIRE_WRITTEN_AND_EQUAL(lse.to_host(), expected.lse);
    REQUIRE_CUDA(cudaStreamSynchronize(kv_stream));
  }
  REQUIRE_CUDA(cudaStreamDestroy(kv_stream));
}

TEST_CASE("attention on RaggedTensors: K and V freed on their own stream right after the call are read first",
          "[attention][gpu]") {
  const CrossStreamCase c(612);
  const auto& [q_len, k_len, h, expected] = c;
  cudaStream_t q_stream = nullptr, kv_stream = nullptr;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&q_stream, cudaStreamNonBlocking));
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&kv_stream, cudaStreamNonBlocking));
  {
    const auto q = RaggedTensor<bfloat16, std::int32_t>::from_host(h.q, q_len, {4, 128}, q_stream);
    auto k = RaggedTensor<bfloat16, std::int32_t>::from_host(h.k, k_len, {2, 128}, kv_stream);
    auto v = RaggedTensor<bfloat16, std::int32_t>::from_host(h.v, k_len, {2, 128}, kv_stream);
    // A long queue on Q's stream holds the kernel back while K and V are freed on theirs and the memory, reused
    // by the next allocations there, is overwritten: unless K / V's stream waits for the kernel, it reads that.
    DeviceBuffer<unsigned char> busy(std::size_t{256} << 20, q_stream);
    for (int i = 0; i < 8; ++i) REQUIRE_CUDA(cudaMemsetAsync(busy.data(), i, busy.bytes(), q_stream));
    DeviceBuffer<float> lse;
    const auto o = attention(q, k, v, /*causal=*/false, /*scale=*/0.0f, &lse);
    const void* freed_k = k.values().data();
    const void* freed_v = v.values().data();
    k = RaggedTensor<bfloat16, std::int32_t>();
    v = RaggedTensor<bfloat16, std::int32_t>();
    DeviceBuffer<bfloat16> reuse_k(h.k.size(), kv_stream), reuse_v(h.v.size(), kv_stream);
    // The case tests something only where the pool hands K's or V's memory out again (stream-ordered reuse on
    // the stream that freed it).
    const bool reused = reuse_k.data() == freed_k || reuse_k.data() == freed_v || reuse_v.data() == freed_k ||
                        reuse_v.data() == freed_v;
    REQUIRE(reused);
    reuse_k.fill_bytes(0x7f);
    reuse_v.fill_bytes(0x7f);
    REQUIRE_WRITTEN_AND_EQUAL(o.values_to_host(), expected.o);
    REQUIRE_WRITTEN_AND_EQUAL(lse.to_host(), expected.lse);
    REQUIRE_CUDA(cudaStreamSynchronize(kv_stream));
  }
  REQUIRE_CUDA(cudaStreamDestroy(q_stream));
  REQUIRE_CUDA(cudaStreamDestroy(kv_stream));
}

TEST_CASE("attention with malformed offsets or lengths stays in bounds", "[attention][gpu][errors]") {
  // Wrong values are allowed, out-of-bounds accesses are not (compute-sanitizer memcheck runs this).
  auto rng = test::make_rng(609);
  const auto h = test::random_attention<bfloat16, std::int32_t>({40, 30, 30}, {40, 30, 30}, 2, 1, 128, true, rng);
  DeviceAttention<bfloat16, std::int32_t> dev(h);
  // Outputs with guards on both sides: a write out of bounds is seen on any device, not only under memcheck.
  test::GuardedBuffer<bfloat16> o(static_cast<std::size_t>(h.o_elems()));
  test::GuardedBuffer<float> lse(static_cast<std::size_t>(h.lse_elems()));
  const std::vector<std::vector<std::int32_t>> bad_offsets = {
      {0, 90, 20, 100},      // decreasing, past the rows
      {-50, 10, 5, 1000},    // negative start, end far past the rows
      {30, 30, 30, 30},      // does not start at 0
      {0, 2147483647, -2147483647 - 1, 100}};
  for (const auto& offsets : bad_offsets) {
    DeviceBuffer<std::int32_t> d_offsets(offsets);
    for (bool on_q : {true, false}) {
      auto a = dev.args(o.data(), lse.data());
      (on_q ? a.q_seq : a.k_seq).offsets = d_offsets.data();
      REQUIRE_OK(
          run_two_phase([&](void* ws, std::size_t& bytes) { return varlen_attention_forward(ws, bytes, a, nullptr); }));
    }
  }
  // Padded lengths beyond max_len or negative are clamped.
  const auto p = test::to_padded(h, 45, 45, rng);
  DeviceAttention<bfloat16, std::int32_t> pdev(p);
  test::GuardedBuffer<bfloat16> po(static_cast<std::size_t>(p.o_elems()));
  test::GuardedBuffer<float> plse(static_cast<std::size_t>(p.lse_elems()));
  DeviceBuffer<std::int32_t> lengths(std::vector<std::int32_t>{1000, -5, 45});
  auto a = pdev.args(po.data(), plse.data());
  a.q_seq.lengths = lengths.data();
  a.k_seq.lengths = lengths.data();
  REQUIRE_OK(
      run_two_phase([&](void* ws, std::size_t& bytes) { return varlen_attention_forward(ws, bytes, a, nullptr); }));
  for (const bool intact : {o.guards_intact(), lse.guards_intact(), po.guards_intact(), plse.guards_intact()})
    REQUIRE(intact);
}
