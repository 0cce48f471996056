// segment_softmax for half values and int32 offsets (segment_softmax.cuh: one type pair per file).
#include "segment_softmax.cuh"

namespace ragged {
namespace detail {
RAGGED_INSTANTIATE_SEGMENT_SOFTMAX(__half, std::int32_t)
}  // namespace detail
}  // namespace ragged
