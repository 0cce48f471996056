// segment_reduce for float values and int64 offsets (segment_reduce.cuh: one type pair per file).
#include "segment_reduce.cuh"

namespace ragged {
namespace detail {
RAGGED_INSTANTIATE_SEGMENT_REDUCE(float, std::int64_t)
}  // namespace detail
}  // namespace ragged
