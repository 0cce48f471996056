// The process-wide switch of segment_softmax's block rows (segment_launch.h); the kernels are in
// segment_softmax.cuh.
#include "segment_launch.h"

namespace ragged {
namespace detail {
namespace {

// RAGGED_SEGMENT_BLOCK_ROWS=0 in the environment starts a process with block rows off, to compare on a GPU.
bool& block_rows_setting() {
  static bool enabled = switch_from_environment("RAGGED_SEGMENT_BLOCK_ROWS");
  return enabled;
}

}  // namespace

bool segment_block_rows_enabled() { return block_rows_setting(); }
void set_segment_block_rows_enabled(bool enabled) { block_rows_setting() = enabled; }

}  // namespace detail
}  // namespace ragged
