// CPU reference of the packed LSTM / GRU forward: for every layer, direction and sequence, the gate equations
// one token at a time, in the sequence's own order (no sorting, no packed layout).
#include "ragged/reference_rnn.h"

#include <cmath>
#include <type_traits>
#include <vector>

#include "host_convert.h"

namespace ragged {
namespace reference {
namespace {

using detail::to_double;
using detail::round_to;

// A parameter tensor converted to the accumulation type once per layer and direction (empty when absent).
template <typename Acc, typename T>
std::vector<Acc> converted(const T* values, std::int64_t count) {
  std::vector<Acc> out;
  if (values == nullptr) return out;
  out.resize(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) out[i] = static_cast<Acc>(to_double(values[i]));
  return out;
}

template <typename Acc>
Acc sigmoid(Acc x) {
  return Acc(1) / (Acc(1) + std::exp(-x));
}

// One layer and direction's parameters in the accumulation type.
template <typename Acc>
struct Params {
  std::vector<Acc> w_ih, w_hh, b_ih, b_hh, w_hr;
};

// Runs the stack in Acc. `storage` rounds h (and r = o * tanh(c) before a projection) to T after every step, as
// storing them in T does; layer outputs are the stored h, so they are rounded too.
template <typename T, typename OffsetT, typename Acc>
void forward_impl(const RnnDesc& desc, const RnnLayerWeights<T>* weights, RaggedView<const T, OffsetT> input,
                  const T* h0, const T* c0, T* output, T* hn, T* cn, bool storage, std::int64_t max_steps) {
  const bool lstm = desc.mode == RnnMode::kLstm;
  const std::int64_t G = rnn_gate_count(desc.mode);
  const std::int64_t dirs = rnn_directions(desc);
  const std::int64_t H = desc.hidden_size;
  const std::int64_t S = rnn_state_size(desc);
  const std::int64_t P = lstm ? desc.proj_size : 0;
  const std::int64_t nnz = input.nnz, batch = input.batch;
  const std::int64_t out_width = dirs * S;
  auto keep = [&](Acc v) { return storage ? static_cast<Acc>(to_double(round_to<T>(static_cast<double>(v)))) : v; };

  std::int64_t in_width = desc.input_size;
  std::vector<Acc> layer_in(static_cast<std::size_t>(nnz * in_width));
  for (std::int64_t i = 0; i < nnz * in_width; ++i) layer_in[i] = static_cast<Acc>(to_double(input.values[i]));
  std::vector<Acc> layer_out;
  std::vector<char> written(static_cast<std::size_t>(nnz), 0);

  for (std::int64_t layer = 0; layer < desc.num_layers; ++layer) {
    layer_out.assign(static_cast<std::size_t>(nnz * out_width), Acc(0));
    for (std::int64_t d = 0; d < dirs; ++d) {
      const std::int64_t slot = layer * dirs + d;
      const RnnLayerWeights<T>& w = weights[slot];
      Params<Acc> p;
      p.w_ih = converted<Acc>(w.w_ih, G * H * in_width);
      p.w_hh = converted<Acc>(w.w_hh, G * H * S);
      if (desc.bias) {
        p.b_ih = converted<Acc>(w.b_ih, G * H);
        p.b_hh = converted<Acc>(w.b_hh, G * H);
      }
      if (P > 0) p.w_hr = converted<Acc>(w.w_hr, P * H);

      std::vector<Acc> h(static_cast<std::size_t>(S)), c(static_cast<std::size_t>(H)), r(static_cast<std::size_t>(H));
      std::vector<Acc> gi(static_cast<std::size_t>(G * H)), gh(static_cast<std::size_t>(G * H));
      for (std::int64_t b = 0; b < batch; ++b) {
        std::int64_t begin = 0, end = 0;
        clamped_row_range(input.offsets, b, nnz, begin, end);
        std::int64_t length = end - begin;
        if (max_steps >= 0 && length > max_steps) length = max_steps;
        const std::int64_t state_at = slot * batch + b;
        for (std::int64_t k = 0; k < S; ++k)
          h[k] = h0 != nullptr ? static_cast<Acc>(to_double(h0[state_at * S + k])) : Acc(0);
        for (std::int64_t u = 0; u < H; ++u)
          c[u] = lstm && c0 != nullptr ? static_cast<Acc>(to_double(c0[state_at * H + u])) : Acc(0);

        for (std::int64_t s = 0; s < length; ++s) {
          const std::int64_t row = begin + (d == 0 ? s : length - 1 - s);
          const Acc* x = &layer_in[row * in_width];
          for (std::int64_t q = 0; q < G * H; ++q) {
            Acc a = Acc(0);
            for (std::int64_t k = 0; k < in_width; ++k) a += x[k] * p.w_ih[q * in_width + k];
            Acc e = Acc(0);
            for (std::int64_t k = 0; k < S; ++k) e += h[k] * p.w_hh[q * S + k];
            if (desc.bias) {
              a += p.b_ih[q];
              e += p.b_hh[q];
            }
            gi[q] = a;
            gh[q] = e;
          }
          if (lstm) {
            for (std::int64_t u = 0; u < H; ++u) {
              const Acc in_gate = sigmoid(gi[u] + gh[u]);
              const Acc forget_gate = sigmoid(gi[H + u] + gh[H + u]);
              const Acc cell_gate = std::tanh(gi[2 * H + u] + gh[2 * H + u]);
              const Acc out_gate = sigmoid(gi[3 * H + u] + gh[3 * H + u]);
              c[u] = forget_gate * c[u] + in_gate * cell_gate;
              r[u] = out_gate * std::tanh(c[u]);
            }
            if (P > 0) {
              for (std::int64_t u = 0; u < H; ++u) r[u] = keep(r[u]);
              for (std::int64_t q = 0; q < P; ++q) {
                Acc a = Acc(0);
                for (std::int64_t u = 0; u < H; ++u) a += r[u] * p.w_hr[q * H + u];
                h[q] = keep(a);
              }
            } else {
              for (std::int64_t u = 0; u < H; ++u) h[u] = keep(r[u]);
            }
          } else {
            for (std::int64_t u = 0; u < H; ++u) {
              const Acc reset_gate = sigmoid(gi[u] + gh[u]);
              const Acc update_gate = sigmoid(gi[H + u] + gh[H + u]);
              const Acc candidate = std::tanh(gi[2 * H + u] + reset_gate * gh[2 * H + u]);
              r[u] = (Acc(1) - update_gate) * candidate + update_gate * h[u];
            }
            for (std::int64_t u = 0; u < H; ++u) h[u] = keep(r[u]);
          }
          for (std::int64_t k = 0; k < S; ++k) layer_out[row * out_width + d * S + k] = h[k];
          written[row] = 1;
        }
        if (hn != nullptr)
          for (std::int64_t k = 0; k < S; ++k) hn[state_at * S + k] = round_to<T>(static_cast<double>(h[k]));
        if (lstm && cn != nullptr)
          for (std::int64_t u = 0; u < H; ++u) cn[state_at * H + u] = round_to<T>(static_cast<double>(c[u]));
      }
    }
    layer_in.swap(layer_out);
    in_width = out_width;
  }
  // layer_in now holds the last layer's output.
  for (std::int64_t row = 0; row < nnz; ++row)
    if (written[row])
      for (std::int64_t k = 0; k < out_width; ++k)
        output[row * out_width + k] = round_to<T>(static_cast<double>(layer_in[row * out_width + k]));
}

}  // namespace

template <typename T, typename OffsetT>
void rnn_forward(const RnnDesc& desc, const RnnLayerWeights<T>* weights, RaggedView<const T, OffsetT> input,
                 const T* h0, const T* c0, T* output, T* hn, T* cn, RnnPrecision precision, std::int64_t max_steps) {
  if (precision == RnnPrecision::kStorage)
    forward_impl<T, OffsetT, float>(desc, weights, input, h0, c0, output, hn, cn, true, max_steps);
  else
    forward_impl<T, OffsetT, double>(desc, weights, input, h0, c0, output, hn, cn, false, max_steps);
}

#define RAGGED_INSTANTIATE_REFERENCE_RNN(T, O)                                                                  \
  template void rnn_forward<T, O>(const RnnDesc&, const RnnLayerWeights<T>*, RaggedView<const T, O>, const T*, \
                                  const T*, T*, T*, T*, RnnPrecision, std::int64_t);

RAGGED_INSTANTIATE_REFERENCE_RNN(float, std::int32_t)
RAGGED_INSTANTIATE_REFERENCE_RNN(float, std::int64_t)
RAGGED_INSTANTIATE_REFERENCE_RNN(half, std::int32_t)
RAGGED_INSTANTIATE_REFERENCE_RNN(half, std::int64_t)
RAGGED_INSTANTIATE_REFERENCE_RNN(bfloat16, std::int32_t)
RAGGED_INSTANTIATE_REFERENCE_RNN(bfloat16, std::int64_t)

}  // namespace reference
}  // namespace ragged
