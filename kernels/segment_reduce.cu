// The process-wide switch of segment_reduce's and segment_softmax's row streams (segment_launch.h); the kernels
// are in segment_reduce.cuh and segment_softmax.cuh.
#include "segment_launch.h"

namespace ragged {
namespace detail {
namespace {

// RAGGED_SEGMENT_STREAM=0 in the environment starts a process with streaming off (every row through the unit
// walk, in segment_reduce and segment_softmax), to compare the two on a GPU.
bool& segment_stream_setting() {
  static bool enabled = switch_from_environment("RAGGED_SEGMENT_STREAM");
  return enabled;
}

}  // namespace

bool segment_stream_enabled() { return segment_stream_setting(); }
void set_segment_stream_enabled(bool enabled) { segment_stream_setting() = enabled; }

}  // namespace detail
}  // namespace ragged
