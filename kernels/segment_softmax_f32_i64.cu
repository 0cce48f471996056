// segment_softmax for float values and int64 offsets (segment_softmax.cuh: one type pair per file).
#include "segment_softmax.cuh"

namespace ragged {
namespace detail {
RAGGED_INSTANTIATE_SEGMENT_SOFTMAX(float, std::int64_t)
}  // namespace detail
}  // namespace ragged
