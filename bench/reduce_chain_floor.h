// The floor of device_reduce's small row (bench_segment.cu): what one row of a few thousand floats costs a
// pipeline that does no more than launch, read and sum it, after the same L2 flush, so that the fixed cost of
// ragged's segment_reduce (its row pass, then its unit kernel as a programmatic dependent) splits into what the
// chain of launches itself costs and what the kernels do in it.
//   kernels:1  one ordinary launch of one block: it reads the row's offsets and values (every thread's loads
//              issued at once), sums them and writes the sum
//   kernels:2  ragged's chain with nothing in it: a one-block kernel reads the two offsets and writes the row's
//              length; the summing kernel above follows it as a programmatic dependent (launch_after_prior,
//              where the device allows it, as segment_reduce launches its unit kernel) and reads that length
//              after wait_for_prior_grid()
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ragged/status.h"

namespace ragged {
namespace bench {

// Sums values[offsets[0] .. offsets[1]) into *out by `kernels` (1 or 2) launches as above. `length_scratch`
// (device, one word) carries the length from the first kernel to the second (unused with one). `values` is
// 16-byte aligned.
Status launch_reduce_chain_floor(const float* values, const std::int32_t* offsets, std::int64_t* length_scratch,
                                 float* out, int kernels, cudaStream_t stream);

}  // namespace bench
}  // namespace ragged
