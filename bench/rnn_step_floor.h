// The step floor of the persistent recurrent kernel (issue 4): what any persistent step over the same grid pays
// with no arithmetic at all, measured in the same run as the RNN benchmarks so that their time per step can be
// read as a fraction of it. Three floors, over the grid the persistent kernel would take for the case
// (plan_rnn_persistent's blocks, each owning its slice of hidden units):
//   kind:barrier    one word per block handed to the next block through L2, then a grid barrier: the latency
//                   of the barrier plus one dependent L2 round trip
//   kind:exchange   every block reads the whole previous h (batch x hidden elements, 16-byte L2 loads with up to
//                   8 in flight per thread, folded into a register as they arrive, one block reduction per
//                   step), writes its own slice of the next h, then a grid barrier: the barrier plus the
//                   broadcast of h that the recurrent product needs, at the full batch (the padded run's work;
//                   a ragged step reads only the active rows)
//   kind:weights    over the grid of the persistent kernel with streamed weights (plan_rnn_persistent, resident
//                   false), every block copies its units' rows of a W_hh-shaped matrix through shared memory each
//                   step, in k chunks by cp.async as that kernel stages them, then a grid barrier: the weights'
//                   trip from L2 / DRAM every step, with nothing computed on them; kind:weights_rotated the
//                   same with block b starting its walk at chunk b % chunks, kind:weights_packed with each
//                   block's chunks laid out one after another (the access pattern's share of that trip)
// All run max_len steps, the ragged case's step count. Integer data, so RAGGED_BENCH_VERIFY checks them
// exactly against a host model.
#pragma once

#include <cstdint>
#include <string>

#include "ragged/rnn.h"

namespace ragged {
namespace bench {

struct RnnStepFloorCase {
  RnnMode mode = RnnMode::kLstm;
  bool bf16 = true;
  std::int64_t batch = 0, hidden = 0, steps = 0;
};

// Registers the two floors of `c` under barrier_name and exchange_name (rnn_<mode>/floor/<case>/kind:...).
void register_rnn_step_floor(const std::string& barrier_name, const std::string& exchange_name,
                             const RnnStepFloorCase& c);

// Registers the weights floors of `c` under name, name + "_rotated" and name + "_packed"
// (rnn_<mode>/floor/<case>/kind:weights...).
void register_rnn_weights_floor(const std::string& name, const RnnStepFloorCase& c);

}  // namespace bench
}  // namespace ragged
