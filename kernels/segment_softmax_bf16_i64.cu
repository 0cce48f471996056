// segment_softmax for bfloat16 values and int64 offsets (segment_softmax.cuh: one type pair per file).
#include "segment_softmax.cuh"

namespace ragged {
namespace detail {
RAGGED_INSTANTIATE_SEGMENT_SOFTMAX(__nv_bfloat16, std::int64_t)
}  // namespace detail
}  // namespace ragged
