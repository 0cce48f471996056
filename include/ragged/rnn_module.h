// Owning convenience layer over rnn_forward (rnn.h): an LSTM / GRU stack that holds its parameters on the device,
// takes them in PyTorch's order, and runs on RaggedTensors. Allocates, synchronises where it must (the longest
// sequence is read back once per call), throws ragged::Error with the message of the failing check.
//
//   ragged::Rnn<float> lstm(desc, parameters);        // parameters as torch.nn.LSTM(...)._flat_weights, on the host
//   auto y = lstm.forward(x);                         // y.output: ragged [nnz, directions * state], x's offsets
//
// For graph capture, a caller-owned workspace or a caller-owned cuBLAS handle, use rnn_forward directly. One
// Rnn object is not safe to use from two host threads at once (it owns one cuBLAS handle).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ragged/buffer.h"
#include "ragged/rnn.h"
#include "ragged/status.h"
#include "ragged/tensor.h"

namespace ragged {

template <typename T, typename OffsetT>
struct RnnResult {
  RaggedTensor<T, OffsetT> output;  // [nnz, directions * state size], the input's offsets
  DeviceBuffer<T> hn;               // [num_layers * directions, batch, state size]
  DeviceBuffer<T> cn;               // [num_layers * directions, batch, H]; LSTM only (else empty)
};

template <typename T>
class Rnn {
 public:
  // `parameters`: one host tensor per entry of PyTorch's flat weight list, in its order: for each layer, for
  // each direction (forward, then reverse): weight_ih, weight_hh, then bias_ih and bias_hh (desc.bias), then
  // weight_hr (proj_size > 0). Each is row-major with PyTorch's shape; sizes are checked and named.
  Rnn(const RnnDesc& desc, const std::vector<std::vector<T>>& parameters, cudaStream_t stream = nullptr)
      : desc_(desc), stream_(stream) {
    check_desc();
    const std::vector<Expected> expected = expected_parameters();
    if (parameters.size() != expected.size())
      throw Error(Status::kInvalidArgument, "Rnn: " + std::to_string(parameters.size()) + " parameter tensors, " +
                                                rnn_mode_name(desc_.mode) + " with this shape takes " +
                                                std::to_string(expected.size()));
    for (std::size_t i = 0; i < expected.size(); ++i)  // every check before the first allocation
      if (static_cast<std::int64_t>(parameters[i].size()) != expected[i].elements)
        throw Error(Status::kInvalidArgument, "Rnn: parameter " + std::to_string(i) + " (" + expected[i].name +
                                                  ") has " + std::to_string(parameters[i].size()) +
                                                  " elements, expected " + std::to_string(expected[i].elements));
    for (const std::vector<T>& p : parameters) parameters_.emplace_back(p, stream_);
    std::size_t next = 0;
    const std::int64_t dirs = rnn_directions(desc_);
    for (std::int64_t slot = 0; slot < desc_.num_layers * dirs; ++slot) {
      RnnLayerWeights<T> w;
      w.w_ih = parameters_[next++].data();
      w.w_hh = parameters_[next++].data();
      if (desc_.bias) {
        w.b_ih = parameters_[next++].data();
        w.b_hh = parameters_[next++].data();
      }
      if (has_projection()) w.w_hr = parameters_[next++].data();
      weights_.push_back(w);
    }
    if (cublasCreate(&cublas_) != CUBLAS_STATUS_SUCCESS)
      throw Error(Status::kCudaError, "Rnn: cublasCreate failed");
  }
  // cublasDestroy synchronises the device (cuBLAS documents an implicit cublasDeviceSynchronize); a failure is
  // ignored, as a destructor must not throw.
  ~Rnn() {
    if (cublas_ != nullptr) cublasDestroy(cublas_);
  }
  Rnn(const Rnn&) = delete;
  Rnn& operator=(const Rnn&) = delete;

  const RnnDesc& desc() const { return desc_; }

  // Runs the stack over `x` ([nnz, input_size]). h0 / c0: [num_layers * directions, batch, state size / H] in
  // x's sequence order, or null for zeros. algo, projection: as RnnArgs.
  template <typename OffsetT>
  RnnResult<T, OffsetT> forward(const RaggedTensor<T, OffsetT>& x, const DeviceBuffer<T>* h0 = nullptr,
                                const DeviceBuffer<T>* c0 = nullptr, RnnAlgo algo = RnnAlgo::kAuto,
                                RnnProjection projection = RnnProjection::kCublas) const {
    if (x.inner() != desc_.input_size)
      throw Error(Status::kInvalidArgument, "Rnn::forward: x has inner size " + std::to_string(x.inner()) +
                                                ", the layer takes input_size " + std::to_string(desc_.input_size));
    const bool lstm = desc_.mode == RnnMode::kLstm;
    // [num_layers * directions, batch, size] state elements, checked before anything is compared or allocated.
    const std::int64_t sequences = detail::checked_product(desc_.num_layers * rnn_directions(desc_), x.batch(),
                                                           "Rnn::forward: num_layers * directions * batch");
    const std::int64_t h_elements =
        detail::checked_product(sequences, rnn_state_size(desc_), "Rnn::forward: h0 / hn elements");
    const std::int64_t c_elements =
        detail::checked_product(sequences, desc_.hidden_size, "Rnn::forward: c0 / cn elements");
    check_state(h0, h_elements, "h0");
    if (c0 != nullptr && !lstm) throw Error(Status::kInvalidArgument, "Rnn::forward: c0 given to a GRU");
    check_state(c0, c_elements, "c0");

    RnnResult<T, OffsetT> result;
    result.output = x.empty_like({rnn_directions(desc_) * rnn_state_size(desc_)});
    result.hn = DeviceBuffer<T>(static_cast<std::size_t>(h_elements), stream_);
    if (lstm) result.cn = DeviceBuffer<T>(static_cast<std::size_t>(c_elements), stream_);

    RnnArgs<T, OffsetT> args;
    args.desc = desc_;
    args.weights = weights_.data();
    args.input = x.view();
    args.max_steps = x.max_length();
    args.h0 = h0 != nullptr ? h0->data() : nullptr;
    args.c0 = c0 != nullptr ? c0->data() : nullptr;
    args.output = result.output.values().data();
    args.hn = result.hn.data();
    args.cn = lstm ? result.cn.data() : nullptr;
    args.cublas = cublas_;
    args.algo = algo;
    args.projection = projection;
    // The layer runs on its own stream: it waits for the work pending on x's stream (x itself, the output's
    // allocation) and on h0 / c0's; then x's stream waits for the layer, so the output (owned by x's stream) is
    // complete for whoever uses it there, and h0's and c0's streams do, so that freeing them there waits for the
    // reads. The waits back are made on an exception too, before `result` is freed. No host sync.
    CrossStreamUse x_use(stream_, x.stream());
    CrossStreamUse h0_use(stream_, h0 != nullptr ? h0->stream() : stream_);
    CrossStreamUse c0_use(stream_, c0 != nullptr ? c0->stream() : stream_);
    Workspace ws(stream_);
    run_with_workspace(ws, [&](void* p, std::size_t& bytes) { return rnn_forward(p, bytes, args, stream_); });
    x_use.done();
    h0_use.done();
    c0_use.done();
    return result;
  }

 private:
  struct Expected {
    std::string name;
    std::int64_t elements;
  };

  bool has_projection() const { return desc_.mode == RnnMode::kLstm && desc_.proj_size > 0; }

  void check_desc() const { throw_if_error(rnn_check_desc(desc_)); }

  // PyTorch's names and sizes, in its flat order.
  std::vector<Expected> expected_parameters() const {
    const std::int64_t G = rnn_gate_count(desc_.mode), H = desc_.hidden_size, S = rnn_state_size(desc_);
    std::vector<Expected> out;
    for (std::int64_t l = 0; l < desc_.num_layers; ++l)
      for (std::int64_t d = 0; d < rnn_directions(desc_); ++d) {
        const std::string suffix = "_l" + std::to_string(l) + (d == 1 ? "_reverse" : "");
        out.push_back({"weight_ih" + suffix, G * H * rnn_layer_input_size(desc_, l)});
        out.push_back({"weight_hh" + suffix, G * H * S});
        if (desc_.bias) {
          out.push_back({"bias_ih" + suffix, G * H});
          out.push_back({"bias_hh" + suffix, G * H});
        }
        if (has_projection()) out.push_back({"weight_hr" + suffix, desc_.proj_size * H});
      }
    return out;
  }

  static void check_state(const DeviceBuffer<T>* s, std::int64_t elements, const char* name) {
    if (s != nullptr && static_cast<std::int64_t>(s->size()) != elements)
      throw Error(Status::kInvalidArgument, std::string("Rnn::forward: ") + name + " holds " +
                                                std::to_string(s->size()) + " elements, expected " +
                                                std::to_string(elements) +
                                                " (num_layers * directions * batch * size)");
  }

  RnnDesc desc_;
  cudaStream_t stream_ = nullptr;
  std::vector<DeviceBuffer<T>> parameters_;
  std::vector<RnnLayerWeights<T>> weights_;
  cublasHandle_t cublas_ = nullptr;
};

}  // namespace ragged
