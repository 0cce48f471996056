// CPU reference of attention (reference_attention.h) against a brute force written as dense matrices: per
// sequence the whole score matrix with an explicit mask (built from distances to the last query / key), K and V
// expanded to one copy per query head, LSE by log-sum-exp over the row and P = exp(S - LSE), O = P V.
// Plus closed forms (one visible key, uniform scores: LSE = log(visible keys)), causal alignment when query
// and key lengths differ, padded = ragged, GQA = MHA with repeated heads, strided inputs, zero-length cases and
// rows that must not be written.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>

#include "common/host_attention.h"
#include "common/test_util.h"
#include "common/tolerance.h"
#include "ragged/reference.h"

using namespace ragged;
using test::HostAttention;

namespace {

using test::BF16_I32;
using test::BF16_I64;
using test::F16_I32;
using test::F16_I64;
using test::F32_I32;
using test::F32_I64;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

template <typename T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// Exact outputs of the reference, NaN where it wrote nothing.
struct Exact {
  std::vector<double> out, lse;
};

template <typename T, typename OffsetT>
Exact run_exact(const HostAttention<T, OffsetT>& h) {
  Exact e;
  e.out.assign(static_cast<std::size_t>(h.o_elems()), kNaN);
  e.lse.assign(static_cast<std::size_t>(h.lse_elems()), kNaN);
  reference::attention_forward_exact(h.host_args(nullptr, nullptr), e.out.data(), e.lse.data());
  return e;
}

// ---------------------------------------------------------------------------------------------------------
// Brute force, sequence by sequence with dense matrices.
// ---------------------------------------------------------------------------------------------------------
template <typename T, typename OffsetT>
Exact brute_force(const HostAttention<T, OffsetT>& h) {
  Exact e;
  e.out.assign(static_cast<std::size_t>(h.o_elems()), kNaN);
  e.lse.assign(static_cast<std::size_t>(h.lse_elems()), kNaN);
  const int D = h.dim, group = h.heads_q / h.heads_kv;
  for (std::int64_t b = 0; b < h.batch; ++b) {
    const std::int64_t Lq = h.q_lengths[b], Lk = h.k_lengths[b];
    // K and V expanded to one copy per query head: kv head c serves query heads c * group .. c * group + group - 1.
    std::vector<std::vector<double>> K(h.heads_q), V(h.heads_q);
    for (int c = 0; c < h.heads_kv; ++c)
      for (int r = 0; r < group; ++r) {
        auto& kk = K[c * group + r];
        auto& vv = V[c * group + r];
        for (std::int64_t j = 0; j < Lk; ++j)
          for (int d = 0; d < D; ++d) {
            kk.push_back(test::to_double(h.k[(h.k_row(b, j) * h.heads_kv + c) * D + d]));
            vv.push_back(test::to_double(h.v[(h.k_row(b, j) * h.heads_kv + c) * D + d]));
          }
      }
    // Mask: key j is visible to query i when it is at least as far from the last key as i is from the last
    // query (bottom-right alignment), or always without a causal mask.
    std::vector<char> visible(static_cast<std::size_t>(Lq * Lk));
    for (std::int64_t i = 0; i < Lq; ++i)
      for (std::int64_t j = 0; j < Lk; ++j) visible[i * Lk + j] = !h.causal || (Lk - 1 - j) >= (Lq - 1 - i);
    for (int hq = 0; hq < h.heads_q; ++hq) {
      std::vector<double> S(static_cast<std::size_t>(Lq * Lk), -kInf);
      for (std::int64_t i = 0; i < Lq; ++i)
        for (std::int64_t j = 0; j < Lk; ++j) {
          if (!visible[i * Lk + j]) continue;
          double dot = 0.0;
          for (int d = 0; d < D; ++d)
            dot += test::to_double(h.q[(h.q_row(b, i) * h.heads_q + hq) * D + d]) * K[hq][j * D + d];
          S[i * Lk + j] = dot * static_cast<double>(h.scale);
        }
      for (std::int64_t i = 0; i < Lq; ++i) {
        double m = -kInf;
        for (std::int64_t j = 0; j < Lk; ++j) m = std::max(m, S[i * Lk + j]);
        double lse = -kInf;
        if (m > -kInf) {
          double z = 0.0;
          for (std::int64_t j = 0; j < Lk; ++j) z += std::exp(S[i * Lk + j] - m);
          lse = m + std::log(z);
        }
        const std::int64_t row = h.q_row(b, i);
        e.lse[row * h.heads_q + hq] = lse;
        for (int d = 0; d < D; ++d) {
          double o = 0.0;
          if (lse > -kInf)
            for (std::int64_t j = 0; j < Lk; ++j) o += std::exp(S[i * Lk + j] - lse) * V[hq][j * D + d];
          e.out[(row * h.heads_q + hq) * D + d] = o;
        }
      }
    }
  }
  return e;
}

// "" when a and b agree within tol * (1 + |b|) (NaN must meet NaN, -inf must meet -inf), else the first mismatch.
std::string compare(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  if (a.size() != b.size()) return "sizes differ";
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!test::within(a[i], b[i], tol * (1.0 + std::abs(b[i])))) {
      std::ostringstream s;
      s << "element " << i << ": " << a[i] << " vs " << b[i];
      return s.str();
    }
  }
  return "";
}

struct Shape {
  int heads_q, heads_kv, dim;
};
constexpr Shape kShapes[] = {{2, 2, 8}, {4, 2, 8}, {3, 1, 16}, {2, 2, 64}};

struct LengthPair {
  std::string name;
  std::vector<std::int64_t> q, k;
};

std::vector<LengthPair> length_pairs(std::mt19937_64& rng) {
  std::uniform_int_distribution<std::int64_t> len(0, 24), count(2, 9);
  std::vector<LengthPair> sets;
  LengthPair independent{"independent q / k lengths", {}, {}};
  for (std::int64_t n = count(rng); n > 0; --n) {
    independent.q.push_back(len(rng));
    independent.k.push_back(len(rng));
  }
  sets.push_back(independent);
  LengthPair equal{"equal q / k lengths", independent.q, independent.q};
  sets.push_back(equal);
  sets.push_back({"more queries than keys", {7, 5, 3, 1}, {3, 2, 0, 1}});
  sets.push_back({"more keys than queries", {1, 3, 2, 4}, {9, 5, 2, 17}});
  sets.push_back({"zero-length sequences", {0, 5, 0, 3, 0}, {4, 0, 0, 6, 2}});
  sets.push_back({"all empty", {0, 0, 0}, {0, 0, 0}});
  sets.push_back({"empty batch", {}, {}});
  return sets;
}

}  // namespace

TEMPLATE_TEST_CASE("reference attention matches a dense brute force", "[attention][reference]", F32_I32, F32_I64,
                   F16_I32, F16_I64, BF16_I32, BF16_I64) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(501);
  for (const Shape& shape : kShapes)
    for (bool causal : {false, true})
      for (const LengthPair& lp : length_pairs(rng)) {
        INFO(lp.name << ", heads " << shape.heads_q << "/" << shape.heads_kv << ", dim " << shape.dim
                     << (causal ? ", causal" : ""));
        auto h = test::random_attention<T, OffsetT>(lp.q, lp.k, shape.heads_q, shape.heads_kv, shape.dim, causal,
                                                    rng, /*extra_rows=*/2);
        const Exact ref = run_exact(h);
        const Exact brute = brute_force(h);
        std::string failure = compare(ref.out, brute.out, 1e-12);
        INFO("out: " << failure);
        REQUIRE(failure.empty());
        failure = compare(ref.lse, brute.lse, 1e-12);
        INFO("lse: " << failure);
        REQUIRE(failure.empty());

        // attention_forward rounds the exact results once; rows outside sequences keep their poison.
        const T poison = test::round_to<T>(kNaN);
        std::vector<T> o(static_cast<std::size_t>(h.o_elems()), poison);
        std::vector<float> lse(static_cast<std::size_t>(h.lse_elems()), std::numeric_limits<float>::quiet_NaN());
        reference::attention_forward(h.host_args(o.data(), lse.data()));
        for (std::size_t i = 0; i < o.size(); ++i) {
          INFO("o[" << i << "]");
          REQUIRE(same_bits(o[i], std::isnan(ref.out[i]) ? poison : test::round_to<T>(ref.out[i])));
        }
        for (std::size_t i = 0; i < lse.size(); ++i) {
          INFO("lse[" << i << "]");
          REQUIRE(test::same_value(lse[i], static_cast<float>(ref.lse[i])));
        }
      }
}

TEST_CASE("reference attention: causal alignment when query and key lengths differ", "[attention][reference]") {
  // With Q = 0 every visible score is 0, so LSE = log(number of visible keys) and O = the mean of their V rows.
  auto rng = test::make_rng(502);
  for (bool causal : {false, true}) {
    const std::vector<std::int64_t> q_len{3, 5, 4, 1, 2}, k_len{5, 3, 4, 6, 0};
    auto h = test::random_attention<float, std::int32_t>(q_len, k_len, 1, 1, 4, causal, rng);
    std::fill(h.q.begin(), h.q.end(), 0.0f);
    const Exact e = run_exact(h);
    for (std::int64_t b = 0; b < h.batch; ++b)
      for (std::int64_t i = 0; i < q_len[b]; ++i) {
        // Bottom-right: the last query sees all keys, each earlier query one key fewer.
        const std::int64_t seen =
            causal ? std::max<std::int64_t>(0, std::min(k_len[b], k_len[b] - (q_len[b] - 1 - i))) : k_len[b];
        INFO("sequence " << b << ", query " << i << (causal ? ", causal" : "") << ": sees " << seen << " keys");
        const std::int64_t row = h.q_row(b, i);
        if (seen == 0) {
          REQUIRE(e.lse[row] == -kInf);
          for (int d = 0; d < 4; ++d) REQUIRE(e.out[row * 4 + d] == 0.0);
          continue;
        }
        REQUIRE(e.lse[row] == Approx(std::log(static_cast<double>(seen))).epsilon(1e-14));
        for (int d = 0; d < 4; ++d) {
          double mean = 0.0;
          for (std::int64_t j = 0; j < seen; ++j) mean += h.v[h.k_row(b, j) * 4 + d];
          REQUIRE(e.out[row * 4 + d] == Approx(mean / static_cast<double>(seen)).epsilon(1e-13));
        }
      }
  }
  // The explicit table for L_q = 5, L_k = 3: queries 0 and 1 see nothing, then 1, 2, 3 keys.
  auto h = test::random_attention<float, std::int64_t>({5}, {3}, 1, 1, 4, true, rng);
  std::fill(h.q.begin(), h.q.end(), 0.0f);
  const Exact e = run_exact(h);
  REQUIRE(e.lse[0] == -kInf);
  REQUIRE(e.lse[1] == -kInf);
  REQUIRE(e.lse[2] == Approx(0.0).margin(1e-15));
  REQUIRE(e.lse[3] == Approx(std::log(2.0)));
  REQUIRE(e.lse[4] == Approx(std::log(3.0)));
}

TEST_CASE("reference attention: one visible key returns its V row exactly", "[attention][reference]") {
  auto rng = test::make_rng(503);
  // Causal with L_q = L_k: the first query sees only key 0.
  auto h = test::random_attention<half, std::int32_t>({6, 1}, {6, 1}, 2, 1, 8, true, rng);
  const Exact e = run_exact(h);
  for (std::int64_t b = 0; b < 2; ++b)
    for (int hq = 0; hq < 2; ++hq) {
      const std::int64_t row = h.q_row(b, 0), krow = h.k_row(b, 0);
      double dot = 0.0;
      for (int d = 0; d < 8; ++d) {
        REQUIRE(e.out[(row * 2 + hq) * 8 + d] == test::to_double(h.v[krow * 8 + d]));
        dot += test::to_double(h.q[(row * 2 + hq) * 8 + d]) * test::to_double(h.k[krow * 8 + d]);
      }
      REQUIRE(e.lse[row * 2 + hq] == Approx(dot * h.scale).epsilon(1e-14));
    }
}

TEMPLATE_TEST_CASE("reference attention: scores of -inf, +inf and NaN", "[attention][reference]", F32_I32, F16_I64,
                   BF16_I32) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(507);
  const auto h = test::non_finite_attention<T, OffsetT>(rng);
  const Exact e = run_exact(h);
  const Exact brute = brute_force(h);  // for the finite rows
  enum Expect { kFinite, kEmpty, kNaN };
  auto expected = [](std::int64_t b, std::int64_t i, int head) {
    if (b == 1) return kNaN;
    if (b == 0 && i == 0 && head == 0) return kEmpty;
    if (b == 0 && ((i == 1 && head == 1) || (i == 2 && head == 0))) return kNaN;
    return kFinite;
  };
  for (std::int64_t b = 0; b < h.batch; ++b)
    for (std::int64_t i = 0; i < h.q_lengths[b]; ++i)
      for (int head = 0; head < h.heads_q; ++head) {
        INFO("sequence " << b << ", query " << i << ", head " << head);
        const std::size_t row = static_cast<std::size_t>(h.q_row(b, i) * h.heads_q + head);
        const Expect want = expected(b, i, head);
        for (int d = 0; d < h.dim; ++d) {
          const double o = e.out[row * h.dim + d];
          if (want == kEmpty) REQUIRE(o == 0.0);
          if (want == kNaN) REQUIRE(std::isnan(o));
          if (want == kFinite) {
            REQUIRE(std::isfinite(o));
            REQUIRE(o == Approx(brute.out[row * h.dim + d]).epsilon(1e-12).margin(1e-12));
          }
        }
        if (want == kEmpty) REQUIRE(e.lse[row] == -kInf);
        if (want == kNaN) REQUIRE(std::isnan(e.lse[row]));
        if (want == kFinite) REQUIRE(e.lse[row] == Approx(brute.lse[row]).epsilon(1e-12));
      }
}

TEMPLATE_TEST_CASE("reference attention: padded layout equals ragged layout", "[attention][reference]", F32_I32,
                   BF16_I64) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(504);
  for (bool causal : {false, true}) {
    const auto r = test::random_attention<T, OffsetT>({4, 0, 9, 1}, {6, 3, 0, 7}, 4, 2, 8, causal, rng);
    const auto p = test::to_padded(r, 11, 8, rng);
    const Exact er = run_exact(r), ep = run_exact(p);
    const std::int64_t w = r.heads_q * r.dim;
    for (std::int64_t b = 0; b < r.batch; ++b)
      for (std::int64_t i = 0; i < r.q_lengths[b]; ++i) {
        for (std::int64_t x = 0; x < w; ++x) REQUIRE(er.out[r.q_row(b, i) * w + x] == ep.out[p.q_row(b, i) * w + x]);
        for (int hq = 0; hq < r.heads_q; ++hq)
          REQUIRE(test::same_value(er.lse[r.q_row(b, i) * r.heads_q + hq], ep.lse[p.q_row(b, i) * r.heads_q + hq]));
      }
    // Padding slots are not written.
    std::int64_t padding_rows = 0;
    for (std::int64_t b = 0; b < p.batch; ++b)
      for (std::int64_t i = p.q_lengths[b]; i < p.q_max_len; ++i, ++padding_rows) {
        for (std::int64_t x = 0; x < w; ++x) REQUIRE(std::isnan(ep.out[p.q_row(b, i) * w + x]));
        for (int hq = 0; hq < r.heads_q; ++hq) REQUIRE(std::isnan(ep.lse[p.q_row(b, i) * r.heads_q + hq]));
      }
    REQUIRE(padding_rows > 0);
  }
}

TEST_CASE("reference attention: grouped-query heads equal repeated K/V heads", "[attention][reference]") {
  auto rng = test::make_rng(505);
  for (bool causal : {false, true})
    for (int heads_kv : {1, 2, 3}) {
      const int heads_q = 6, dim = 8, group = heads_q / heads_kv;
      const auto g = test::random_attention<float, std::int32_t>({5, 3, 0, 8}, {7, 3, 2, 8}, heads_q, heads_kv, dim,
                                                                 causal, rng);
      auto m = g;  // multi-head: query head hq gets its own copy of K / V head hq / group
      m.heads_kv = heads_q;
      m.k.assign(static_cast<std::size_t>(g.k_rows * heads_q * dim), 0.0f);
      m.v = m.k;
      for (std::int64_t row = 0; row < g.k_rows; ++row)
        for (int hq = 0; hq < heads_q; ++hq)
          for (int d = 0; d < dim; ++d) {
            m.k[(row * heads_q + hq) * dim + d] = g.k[(row * heads_kv + hq / group) * dim + d];
            m.v[(row * heads_q + hq) * dim + d] = g.v[(row * heads_kv + hq / group) * dim + d];
          }
      const Exact eg = run_exact(g), em = run_exact(m);
      INFO("heads_kv " << heads_kv << (causal ? ", causal" : ""));
      REQUIRE(compare(eg.out, em.out, 0.0).empty());
      REQUIRE(compare(eg.lse, em.lse, 0.0).empty());
    }
}

TEST_CASE("reference attention: strided Q / K / V / O read and write the same values", "[attention][reference]") {
  auto rng = test::make_rng(506);
  // A fused QKV tensor [tokens, 3, heads, dim]: Q, K and V are views with token stride 3 * heads * dim.
  const int heads = 2, dim = 8;
  const std::vector<std::int64_t> lengths{3, 0, 5};
  const auto h = test::random_attention<float, std::int64_t>(lengths, lengths, heads, heads, dim, true, rng);
  const std::int64_t rows = h.q_rows, w = heads * dim;
  std::vector<float> qkv(static_cast<std::size_t>(rows * 3 * w));
  for (std::int64_t row = 0; row < rows; ++row)
    for (std::int64_t x = 0; x < w; ++x) {
      qkv[(row * 3 + 0) * w + x] = h.q[row * w + x];
      qkv[(row * 3 + 1) * w + x] = h.k[row * w + x];
      qkv[(row * 3 + 2) * w + x] = h.v[row * w + x];
    }
  std::vector<float> dense_o(static_cast<std::size_t>(rows * w)), dense_lse(static_cast<std::size_t>(rows * heads));
  reference::attention_forward(h.host_args(dense_o.data(), dense_lse.data()));
  // O written with a token stride of 2 * heads * dim: the other half must stay untouched.
  std::vector<float> wide_o(static_cast<std::size_t>(rows * 2 * w), -7.0f), lse(static_cast<std::size_t>(rows * heads));
  auto a = h.host_args(wide_o.data(), lse.data());
  a.q = HeadsView<const float>{qkv.data(), 3 * w, dim};
  a.k = HeadsView<const float>{qkv.data() + w, 3 * w, dim};
  a.v = HeadsView<const float>{qkv.data() + 2 * w, 3 * w, dim};
  a.o = HeadsView<float>{wide_o.data(), 2 * w, dim};
  reference::attention_forward(a);
  for (std::int64_t row = 0; row < rows; ++row)
    for (std::int64_t x = 0; x < w; ++x) {
      REQUIRE(wide_o[row * 2 * w + x] == dense_o[row * w + x]);
      REQUIRE(wide_o[row * 2 * w + w + x] == -7.0f);
    }
  REQUIRE(lse == dense_lse);
}
