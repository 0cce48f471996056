// The CPU reference of the packed LSTM / GRU forward against brute-force formulations: the gate equations
// written out per hidden unit for one- and two-step sequences, GRU's b_hn inside the reset product, the LSTM
// projection, the ends of the reverse direction, zero-length sequences, layer composition, truncation and the
// storage-precision mode.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "common/test_util.h"
#include "ragged/reference.h"
#include "ragged/rnn.h"

using namespace ragged;

namespace {

double sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Host parameters of one layer and direction, in double and as float (what the reference reads).
struct Layer {
  std::int64_t gates, hidden, input, state, proj;
  std::vector<float> w_ih, w_hh, b_ih, b_hh, w_hr;
  RnnLayerWeights<float> view() const {
    return RnnLayerWeights<float>{w_ih.data(), w_hh.data(), b_ih.data(), b_hh.data(),
                                  w_hr.empty() ? nullptr : w_hr.data()};
  }
};

std::vector<float> random_floats(std::size_t n, double scale, std::mt19937_64& rng) {
  std::vector<float> v = test::random_values<float>(n, rng);
  for (auto& x : v) x = static_cast<float>(x * scale);
  return v;
}

Layer random_layer(RnnMode mode, std::int64_t input, std::int64_t hidden, std::int64_t proj, std::mt19937_64& rng) {
  Layer l;
  l.gates = rnn_gate_count(mode);
  l.hidden = hidden;
  l.input = input;
  l.proj = proj;
  l.state = proj > 0 ? proj : hidden;
  const double scale = 0.6;  // keeps the gates away from saturation
  l.w_ih = random_floats(static_cast<std::size_t>(l.gates * hidden * input), scale, rng);
  l.w_hh = random_floats(static_cast<std::size_t>(l.gates * hidden * l.state), scale, rng);
  l.b_ih = random_floats(static_cast<std::size_t>(l.gates * hidden), scale, rng);
  l.b_hh = random_floats(static_cast<std::size_t>(l.gates * hidden), scale, rng);
  if (proj > 0) l.w_hr = random_floats(static_cast<std::size_t>(proj * hidden), scale, rng);
  return l;
}

// Row `row` of gate block `gate` of a [gates * H, width] matrix, dotted with v.
double gate_dot(const std::vector<float>& m, std::int64_t width, std::int64_t hidden, int gate, std::int64_t unit,
                const std::vector<double>& v) {
  double sum = 0.0;
  const float* row = &m[(gate * hidden + unit) * width];
  for (std::int64_t k = 0; k < width; ++k) sum += static_cast<double>(row[k]) * v[k];
  return sum;
}

// torch.nn.LSTMCell, per hidden unit, with the projection of torch.nn.LSTM(proj_size) when l.proj > 0.
void lstm_cell(const Layer& l, const std::vector<double>& x, std::vector<double>& h, std::vector<double>& c) {
  std::vector<double> r(static_cast<std::size_t>(l.hidden));
  for (std::int64_t u = 0; u < l.hidden; ++u) {
    auto pre = [&](int gate) {
      return gate_dot(l.w_ih, l.input, l.hidden, gate, u, x) + l.b_ih[gate * l.hidden + u] +
             gate_dot(l.w_hh, l.state, l.hidden, gate, u, h) + l.b_hh[gate * l.hidden + u];
    };
    const double i = sig(pre(0)), f = sig(pre(1)), g = std::tanh(pre(2)), o = sig(pre(3));
    c[u] = f * c[u] + i * g;
    r[u] = o * std::tanh(c[u]);
  }
  if (l.proj == 0) {
    h = r;
    return;
  }
  for (std::int64_t p = 0; p < l.proj; ++p) {
    double sum = 0.0;
    for (std::int64_t u = 0; u < l.hidden; ++u) sum += static_cast<double>(l.w_hr[p * l.hidden + u]) * r[u];
    h[p] = sum;
  }
}

// torch.nn.GRUCell, per hidden unit. `bhn_inside` false moves b_hn out of the reset product (the wrong
// placement, used to show that the test can tell them apart).
void gru_cell(const Layer& l, const std::vector<double>& x, std::vector<double>& h, bool bhn_inside = true) {
  std::vector<double> next(static_cast<std::size_t>(l.hidden));
  for (std::int64_t u = 0; u < l.hidden; ++u) {
    const double r = sig(gate_dot(l.w_ih, l.input, l.hidden, 0, u, x) + l.b_ih[u] +
                         gate_dot(l.w_hh, l.state, l.hidden, 0, u, h) + l.b_hh[u]);
    const double z = sig(gate_dot(l.w_ih, l.input, l.hidden, 1, u, x) + l.b_ih[l.hidden + u] +
                         gate_dot(l.w_hh, l.state, l.hidden, 1, u, h) + l.b_hh[l.hidden + u]);
    const double in_n = gate_dot(l.w_ih, l.input, l.hidden, 2, u, x) + l.b_ih[2 * l.hidden + u];
    const double hid_n = gate_dot(l.w_hh, l.state, l.hidden, 2, u, h);
    const double b_hn = l.b_hh[2 * l.hidden + u];
    const double n = bhn_inside ? std::tanh(in_n + r * (hid_n + b_hn)) : std::tanh(in_n + b_hn + r * hid_n);
    next[u] = (1.0 - z) * n + z * h[u];
  }
  h = next;
}

std::vector<double> row_of(const std::vector<float>& values, std::int64_t row, std::int64_t width) {
  return std::vector<double>(values.begin() + row * width, values.begin() + (row + 1) * width);
}

// |got - want| within a few float roundings of want.
void require_close(float got, double want, double rel = 4e-7) {
  INFO("got " << got << ", want " << want);
  REQUIRE(std::abs(static_cast<double>(got) - want) <= rel * (1.0 + std::abs(want)));
}

struct Problem {
  RnnDesc desc;
  std::vector<Layer> layers;  // [layer * dirs + dir]
  std::vector<RnnLayerWeights<float>> weights;
  std::vector<std::int32_t> offsets;
  std::vector<float> input, h0, c0;
  std::int64_t batch = 0, nnz = 0;

  void finish() {
    weights.clear();
    for (const Layer& l : layers) weights.push_back(l.view());
  }
  RaggedView<const float, std::int32_t> view() const {
    return RaggedView<const float, std::int32_t>{input.data(), offsets.data(), batch, nnz, desc.input_size};
  }
};

Problem make_problem(RnnMode mode, std::int64_t input, std::int64_t hidden, std::int64_t proj, std::int64_t layers,
                     bool bidirectional, const std::vector<std::int64_t>& lengths, std::mt19937_64& rng) {
  Problem p;
  p.desc.mode = mode;
  p.desc.input_size = input;
  p.desc.hidden_size = hidden;
  p.desc.proj_size = proj;
  p.desc.num_layers = layers;
  p.desc.bidirectional = bidirectional;
  const std::int64_t dirs = bidirectional ? 2 : 1;
  for (std::int64_t l = 0; l < layers; ++l)
    for (std::int64_t d = 0; d < dirs; ++d)
      p.layers.push_back(random_layer(mode, rnn_layer_input_size(p.desc, l), hidden, proj, rng));
  p.finish();
  p.batch = static_cast<std::int64_t>(lengths.size());
  p.offsets.assign(lengths.size() + 1, 0);
  for (std::size_t b = 0; b < lengths.size(); ++b)
    p.offsets[b + 1] = p.offsets[b] + static_cast<std::int32_t>(lengths[b]);
  p.nnz = p.offsets.back();
  p.input = random_floats(static_cast<std::size_t>(p.nnz * input), 1.0, rng);
  const std::int64_t S = rnn_state_size(p.desc);
  p.h0 = random_floats(static_cast<std::size_t>(layers * dirs * p.batch * S), 0.5, rng);
  p.c0 = random_floats(static_cast<std::size_t>(layers * dirs * p.batch * hidden), 0.5, rng);
  return p;
}

struct Result {
  std::vector<float> output, hn, cn;
};

constexpr float kUnwritten = 12345.0f;

Result run_reference(const Problem& p, reference::RnnPrecision precision = reference::RnnPrecision::kExact,
                     std::int64_t max_steps = -1, bool with_initial = true) {
  const std::int64_t dirs = rnn_directions(p.desc), S = rnn_state_size(p.desc);
  Result r;
  r.output.assign(static_cast<std::size_t>(p.nnz * dirs * S), kUnwritten);
  r.hn.assign(static_cast<std::size_t>(p.desc.num_layers * dirs * p.batch * S), kUnwritten);
  const bool lstm = p.desc.mode == RnnMode::kLstm;
  if (lstm) r.cn.assign(static_cast<std::size_t>(p.desc.num_layers * dirs * p.batch * p.desc.hidden_size), kUnwritten);
  reference::rnn_forward<float, std::int32_t>(p.desc, p.weights.data(), p.view(), with_initial ? p.h0.data() : nullptr,
                                              with_initial && lstm ? p.c0.data() : nullptr, r.output.data(),
                                              r.hn.data(), lstm ? r.cn.data() : nullptr, precision, max_steps);
  return r;
}

// The initial state of (layer, dir, sequence) as doubles.
std::vector<double> initial(const std::vector<float>& states, std::int64_t slot, std::int64_t batch, std::int64_t b,
                            std::int64_t width) {
  return row_of(states, slot * batch + b, width);
}

}  // namespace

TEST_CASE("reference LSTM: one step equals the hand-derived gate equations", "[reference][rnn]") {
  auto rng = test::make_rng(1);
  Problem p = make_problem(RnnMode::kLstm, 3, 2, 0, 1, false, {1}, rng);
  const Result zero_state = run_reference(p, reference::RnnPrecision::kExact, -1, false);
  const Layer& l = p.layers[0];
  // From h0 = c0 = 0: c1 = s(i) tanh(g) (the forget gate multiplies zero), h1 = s(o) tanh(c1), where every
  // pre-activation is W_i? x + b_i? + b_h? (W_h? h0 = 0).
  for (std::int64_t u = 0; u < 2; ++u) {
    double pre[4];
    for (int gate = 0; gate < 4; ++gate) {
      pre[gate] = l.b_ih[gate * 2 + u] + l.b_hh[gate * 2 + u];
      for (int k = 0; k < 3; ++k) pre[gate] += static_cast<double>(l.w_ih[(gate * 2 + u) * 3 + k]) * p.input[k];
    }
    const double c1 = sig(pre[0]) * std::tanh(pre[2]);
    const double h1 = sig(pre[3]) * std::tanh(c1);
    require_close(zero_state.output[u], h1);
    require_close(zero_state.hn[u], h1);
    require_close(zero_state.cn[u], c1);
  }
}

TEST_CASE("reference LSTM: two steps from a given state equal the cell applied twice", "[reference][rnn]") {
  auto rng = test::make_rng(2);
  Problem p = make_problem(RnnMode::kLstm, 3, 2, 0, 1, false, {2}, rng);
  const Result r = run_reference(p);
  const Layer& l = p.layers[0];
  std::vector<double> h = initial(p.h0, 0, 1, 0, 2), c = initial(p.c0, 0, 1, 0, 2);
  for (std::int64_t t = 0; t < 2; ++t) {
    lstm_cell(l, row_of(p.input, t, 3), h, c);
    for (std::int64_t u = 0; u < 2; ++u) require_close(r.output[t * 2 + u], h[u]);
  }
  for (std::int64_t u = 0; u < 2; ++u) {
    require_close(r.hn[u], h[u]);
    require_close(r.cn[u], c[u]);
  }
}

TEST_CASE("reference GRU: b_hn sits inside the reset product", "[reference][rnn]") {
  auto rng = test::make_rng(3);
  Problem p = make_problem(RnnMode::kGru, 3, 4, 0, 1, false, {2}, rng);
  const Result r = run_reference(p);
  const Layer& l = p.layers[0];
  std::vector<double> h = initial(p.h0, 0, 1, 0, 4), wrong = h;
  for (std::int64_t t = 0; t < 2; ++t) {
    gru_cell(l, row_of(p.input, t, 3), h, true);
    gru_cell(l, row_of(p.input, t, 3), wrong, false);
    for (std::int64_t u = 0; u < 4; ++u) require_close(r.output[t * 4 + u], h[u]);
  }
  // The other placement gives visibly different values, so the comparison above can tell them apart.
  double largest = 0.0;
  for (std::int64_t u = 0; u < 4; ++u) largest = std::max(largest, std::abs(wrong[u] - h[u]));
  REQUIRE(largest > 1e-3);
  for (std::int64_t u = 0; u < 4; ++u) require_close(r.hn[u], h[u]);
}

TEST_CASE("reference LSTM with proj_size: h = W_hr (o * tanh(c)) feeds the next step", "[reference][rnn]") {
  auto rng = test::make_rng(4);
  Problem p = make_problem(RnnMode::kLstm, 3, 5, 2, 1, false, {3}, rng);
  const Result r = run_reference(p);
  REQUIRE(r.output.size() == 3u * 2u);  // state size P = 2
  REQUIRE(r.hn.size() == 2u);
  REQUIRE(r.cn.size() == 5u);  // the cell keeps H = 5
  const Layer& l = p.layers[0];
  std::vector<double> h = initial(p.h0, 0, 1, 0, 2), c = initial(p.c0, 0, 1, 0, 5);
  for (std::int64_t t = 0; t < 3; ++t) {
    lstm_cell(l, row_of(p.input, t, 3), h, c);
    for (std::int64_t q = 0; q < 2; ++q) require_close(r.output[t * 2 + q], h[q]);
  }
  for (std::int64_t q = 0; q < 2; ++q) require_close(r.hn[q], h[q]);
  for (std::int64_t u = 0; u < 5; ++u) require_close(r.cn[u], c[u]);
}

TEST_CASE("reference bidirectional: each direction starts at its own end; empty sequences keep their state",
          "[reference][rnn]") {
  auto rng = test::make_rng(5);
  const RnnMode mode = GENERATE(RnnMode::kLstm, RnnMode::kGru);
  const std::vector<std::int64_t> lengths = {3, 0, 5, 1, 0, 2};  // unsorted, with empty sequences
  Problem p = make_problem(mode, 4, 3, 0, 1, true, lengths, rng);
  const Result r = run_reference(p);
  const std::int64_t H = 3, B = static_cast<std::int64_t>(lengths.size());
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t begin = p.offsets[b], length = lengths[b];
    for (std::int64_t d = 0; d < 2; ++d) {
      const Layer& l = p.layers[d];
      std::vector<double> h = initial(p.h0, d, B, b, H), c = initial(p.c0, d, B, b, H);
      const std::vector<double> h_start = h, c_start = c;
      for (std::int64_t s = 0; s < length; ++s) {
        const std::int64_t token = d == 0 ? s : length - 1 - s;
        const std::vector<double> x = row_of(p.input, begin + token, 4);
        if (mode == RnnMode::kLstm) lstm_cell(l, x, h, c);
        else gru_cell(l, x, h);
        for (std::int64_t u = 0; u < H; ++u) require_close(r.output[(begin + token) * 2 * H + d * H + u], h[u]);
        if (s == 0) {
          // The first step of either direction reads only its end token and the initial state.
          std::vector<double> h1 = h_start, c1 = c_start;
          const std::int64_t end_token = d == 0 ? 0 : length - 1;
          if (mode == RnnMode::kLstm) lstm_cell(l, row_of(p.input, begin + end_token, 4), h1, c1);
          else gru_cell(l, row_of(p.input, begin + end_token, 4), h1);
          for (std::int64_t u = 0; u < H; ++u) require_close(r.output[(begin + end_token) * 2 * H + d * H + u], h1[u]);
        }
      }
      // Final state: the forward one is the output at the last token, the reverse one the output at token 0;
      // an empty sequence ends in its initial state.
      for (std::int64_t u = 0; u < H; ++u) {
        require_close(r.hn[(d * B + b) * H + u], h[u]);
        if (length > 0) {
          const std::int64_t end_row = begin + (d == 0 ? length - 1 : 0);
          REQUIRE(r.hn[(d * B + b) * H + u] == r.output[end_row * 2 * H + d * H + u]);
        } else {
          REQUIRE(r.hn[(d * B + b) * H + u] == p.h0[(d * B + b) * H + u]);
        }
        if (mode == RnnMode::kLstm) require_close(r.cn[(d * B + b) * H + u], c[u]);
      }
    }
  }
}

TEST_CASE("reference: a stack of layers equals the layers run one after the other", "[reference][rnn]") {
  auto rng = test::make_rng(6);
  const RnnMode mode = GENERATE(RnnMode::kLstm, RnnMode::kGru);
  const std::int64_t proj = mode == RnnMode::kLstm ? 2 : 0;
  Problem stack = make_problem(mode, 3, 4, proj, 2, true, {4, 1, 0, 3}, rng);
  const Result whole = run_reference(stack);
  const std::int64_t S = rnn_state_size(stack.desc), B = stack.batch;

  // Layer 0 alone, then layer 1 on its output.
  Problem first = stack;
  first.desc.num_layers = 1;
  first.layers.assign(stack.layers.begin(), stack.layers.begin() + 2);
  first.finish();
  const Result r0 = run_reference(first);
  Problem second = stack;
  second.desc.num_layers = 1;
  second.desc.input_size = 2 * S;
  second.layers.assign(stack.layers.begin() + 2, stack.layers.end());
  second.finish();
  second.input = r0.output;
  second.h0.assign(stack.h0.begin() + 2 * B * S, stack.h0.end());
  second.c0.assign(stack.c0.begin() + 2 * B * 4, stack.c0.end());
  const Result r1 = run_reference(second);

  // The stack keeps layer 0's output in double, the composition rounds it to float: allow for that.
  for (std::size_t i = 0; i < whole.output.size(); ++i) require_close(whole.output[i], r1.output[i], 1e-5);
  for (std::size_t i = 0; i < r0.hn.size(); ++i) REQUIRE(whole.hn[i] == r0.hn[i]);
  for (std::size_t i = 0; i < r1.hn.size(); ++i) require_close(whole.hn[r0.hn.size() + i], r1.hn[i], 1e-5);
}

TEST_CASE("reference: max_steps truncates each sequence before either direction runs", "[reference][rnn]") {
  auto rng = test::make_rng(7);
  Problem p = make_problem(RnnMode::kLstm, 2, 3, 0, 1, true, {4, 2}, rng);
  const Result truncated = run_reference(p, reference::RnnPrecision::kExact, 2);
  // The first sequence behaves as its first two tokens: compare with a problem that holds just those.
  Problem cut = p;
  cut.offsets = {0, 2, 4};
  cut.nnz = 4;
  cut.input.assign(p.input.begin(), p.input.begin() + 2 * 2);
  cut.input.insert(cut.input.end(), p.input.begin() + 4 * 2, p.input.begin() + 6 * 2);
  const Result expected = run_reference(cut);
  const std::int64_t width = 2 * 3;
  for (std::int64_t k = 0; k < 2 * width; ++k) REQUIRE(truncated.output[k] == expected.output[k]);
  for (std::int64_t k = 2 * width; k < 4 * width; ++k) REQUIRE(truncated.output[k] == kUnwritten);  // dropped tokens
  for (std::int64_t k = 0; k < 2 * width; ++k)
    REQUIRE(truncated.output[4 * width + k] == expected.output[2 * width + k]);
  REQUIRE(truncated.hn == expected.hn);
  REQUIRE(truncated.cn == expected.cn);
}

TEST_CASE("reference: bias = false equals zero biases and reads no bias", "[reference][rnn]") {
  auto rng = test::make_rng(9);
  const RnnMode mode = GENERATE(RnnMode::kLstm, RnnMode::kGru);
  Problem zero_bias = make_problem(mode, 3, 4, 0, 2, true, {3, 0, 2}, rng);
  for (Layer& l : zero_bias.layers) {
    std::fill(l.b_ih.begin(), l.b_ih.end(), 0.0f);
    std::fill(l.b_hh.begin(), l.b_hh.end(), 0.0f);
  }
  zero_bias.finish();
  Problem no_bias = zero_bias;
  no_bias.desc.bias = false;
  no_bias.finish();
  for (auto& w : no_bias.weights) w.b_ih = w.b_hh = nullptr;
  const Result a = run_reference(zero_bias), b = run_reference(no_bias);
  REQUIRE(a.output == b.output);
  REQUIRE(a.hn == b.hn);
  REQUIRE(a.cn == b.cn);
}

TEST_CASE("reference: the storage-precision mode stays close to the exact one", "[reference][rnn]") {
  auto rng = test::make_rng(8);
  const RnnMode mode = GENERATE(RnnMode::kLstm, RnnMode::kGru);
  Problem p = make_problem(mode, 5, 6, 0, 2, true, {7, 3, 0, 5}, rng);
  const Result exact = run_reference(p, reference::RnnPrecision::kExact);
  const Result storage = run_reference(p, reference::RnnPrecision::kStorage);
  // For float storage the only differences are float accumulation and float states: a few float ulps.
  double largest = 0.0;
  for (std::size_t i = 0; i < exact.output.size(); ++i)
    largest = std::max(largest, std::abs(static_cast<double>(exact.output[i]) - storage.output[i]));
  REQUIRE(largest < 1e-5);
  for (std::size_t i = 0; i < exact.hn.size(); ++i) require_close(storage.hn[i], exact.hn[i], 1e-5);

  // For half storage the rounding of h each step shows, but stays within a few half ulps.
  std::vector<half> input_h, h0_h, c0_h;
  for (float v : p.input) input_h.push_back(__float2half(v));
  for (float v : p.h0) h0_h.push_back(__float2half(v));
  for (float v : p.c0) c0_h.push_back(__float2half(v));
  std::vector<std::vector<half>> params;
  std::vector<RnnLayerWeights<half>> weights;
  for (const Layer& l : p.layers) {
    for (const std::vector<float>* m : {&l.w_ih, &l.w_hh, &l.b_ih, &l.b_hh}) {
      params.emplace_back();
      for (float v : *m) params.back().push_back(__float2half(v));
    }
  }
  for (std::size_t i = 0; i < p.layers.size(); ++i)
    weights.push_back(RnnLayerWeights<half>{params[4 * i].data(), params[4 * i + 1].data(), params[4 * i + 2].data(),
                                            params[4 * i + 3].data(), nullptr});
  RaggedView<const half, std::int32_t> view{input_h.data(), p.offsets.data(), p.batch, p.nnz, 5};
  const std::size_t out_count = exact.output.size();
  std::vector<half> out_exact(out_count), out_storage(out_count);
  const bool lstm = mode == RnnMode::kLstm;
  reference::rnn_forward<half, std::int32_t>(p.desc, weights.data(), view, h0_h.data(), lstm ? c0_h.data() : nullptr,
                                             out_exact.data(), nullptr, nullptr, reference::RnnPrecision::kExact);
  reference::rnn_forward<half, std::int32_t>(p.desc, weights.data(), view, h0_h.data(), lstm ? c0_h.data() : nullptr,
                                             out_storage.data(), nullptr, nullptr, reference::RnnPrecision::kStorage);
  double half_gap = 0.0;
  for (std::size_t i = 0; i < out_count; ++i)
    half_gap = std::max(half_gap, std::abs(test::to_double(out_exact[i]) - test::to_double(out_storage[i])));
  REQUIRE(half_gap > 0.0);   // the modes differ in half...
  REQUIRE(half_gap < 2e-2);  // ...by rounding, not by semantics
}
