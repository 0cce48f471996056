// CPU reference of rnn_forward (rnn.h): every sequence on its own, one step at a time, straight from the gate
// equations; independent of any packed layout. Host pointers; the weights array holds host pointers in the
// layout of RnnLayerWeights. Offsets are trusted to be valid (validate_offsets_host first); rows are clamped
// like the kernels clamp them.
#pragma once

#include <cstdint>

#include "ragged/rnn.h"
#include "ragged/view.h"

namespace ragged {
namespace reference {

enum class RnnPrecision : int {
  // The exact function of the given T values: double accumulation, states and layer outputs kept in double
  // between steps and layers; every result is rounded to T once.
  kExact = 0,
  // A plain implementation in the storage precision: float accumulation in index order, the hidden state and
  // every layer output rounded to T after each step, the cell state kept in float. Its distance from kExact is
  // the error budget a same-precision implementation is judged by.
  kStorage = 1,
};

// output [nnz, directions * state size] (rows of no sequence are not written); hn / cn as in RnnArgs (null:
// not written). h0 / c0 null mean zeros. max_steps < 0: no truncation; otherwise sequences are truncated to
// their first max_steps tokens, as rnn_forward does.
template <typename T, typename OffsetT>
void rnn_forward(const RnnDesc& desc, const RnnLayerWeights<T>* weights, RaggedView<const T, OffsetT> input,
                 const T* h0, const T* c0, T* output, T* hn, T* cn, RnnPrecision precision = RnnPrecision::kExact,
                 std::int64_t max_steps = -1);

}  // namespace reference
}  // namespace ragged
