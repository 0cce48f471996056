// The step floor of the persistent recurrent kernel (issue 4): what any persistent step over the same grid pays
// with no arithmetic at all, measured in the same run as the RNN benchmarks so that their time per step can be
// read as a fraction of it. Two floors, over the grid the persistent kernel would take for the case
// (plan_rnn_persistent's blocks, each owning its slice of hidden units):
//   kind:barrier    one word per block handed to the next block through L2, then a grid barrier: the latency
//                   of the barrier plus one dependent L2 round trip
//   kind:exchange   every block reads the whole previous h (batch x hidden elements, 16-byte L2 loads with up to
//                   8 in flight per thread, folded into a register as they arrive, one block reduction per
//                   step), writes its own slice of the next h, then a grid barrier: the barrier plus the
//                   broadcast of h that the recurrent product needs, at the full batch (the padded run's work;
//                   a ragged step reads only the active rows)
// Both run max_len steps, the ragged case's step count. Integer data, so RAGGED_BENCH_VERIFY checks them
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

}  // namespace bench
}  // namespace ragged
