// The process-wide settings of the segment kernels (segment_launch.h): segment_reduce's and segment_softmax's
// row streams, scalar, warp and sub-warp row passes, the row passes' L2 prefetch, staged merges, and
// segment_reduce's L2 prefetch; the kernels are in segment_reduce.cuh and segment_softmax.cuh.
#include <algorithm>

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

// RAGGED_SEGMENT_SCALAR_ROWS=0 in the environment starts a process whose D = 1 reductions and softmaxes take the
// generic row pass, to compare the two on a GPU.
bool& segment_scalar_rows_setting() {
  static bool enabled = switch_from_environment("RAGGED_SEGMENT_SCALAR_ROWS");
  return enabled;
}

// RAGGED_SEGMENT_WARP_ROWS=0 in the environment starts a process whose D = 1 reductions and softmaxes leave the
// rows of tiny_tokens + 1 to kWarpRowTokens tokens to the first pass's streams instead of a warp each in the row
// pass, to compare the two on a GPU.
bool& segment_warp_rows_setting() {
  static bool enabled = switch_from_environment("RAGGED_SEGMENT_WARP_ROWS");
  return enabled;
}

// RAGGED_SEGMENT_SUBWARP_ROWS=0 in the environment starts a process whose short rows at D > 32 take the first
// pass instead of the sub-warp row pass, to compare the two on a GPU.
bool& segment_subwarp_rows_setting() {
  static bool enabled = switch_from_environment("RAGGED_SEGMENT_SUBWARP_ROWS");
  return enabled;
}

// RAGGED_SEGMENT_STAGED_MERGES=0 in the environment starts a process whose first-pass kernels merge wide merge-tree
// nodes a column at a time through registers, to compare the two on a GPU.
bool& segment_staged_merges_setting() {
  static bool enabled = switch_from_environment("RAGGED_SEGMENT_STAGED_MERGES");
  return enabled;
}

// The merge staging's cap per warp (tests lower it to run the smaller stagings a device with less shared memory
// gets).
int& segment_merge_stage_cap_setting() {
  static int bytes = static_cast<int>(kMergeStageBytes);
  return bytes;
}

// RAGGED_SEGMENT_ROW_PREFETCH=0 in the environment starts a process whose row passes ask L2 for nothing ahead of
// their rows' loads, to compare the two on a GPU.
bool& segment_row_prefetch_setting() {
  static bool enabled = switch_from_environment("RAGGED_SEGMENT_ROW_PREFETCH");
  return enabled;
}

// RAGGED_SEGMENT_PREFETCH=N (0 .. 4) in the environment starts a process that prefetches N groups ahead (0: off).
int& segment_prefetch_setting() {
  static int groups = setting_from_environment("RAGGED_SEGMENT_PREFETCH", kSegmentPrefetchGroups, 0,
                                               kSegmentMaxPrefetchGroups);
  return groups;
}

}  // namespace

bool segment_stream_enabled() { return segment_stream_setting(); }
void set_segment_stream_enabled(bool enabled) { segment_stream_setting() = enabled; }
bool segment_row_prefetch_enabled() { return segment_row_prefetch_setting(); }
void set_segment_row_prefetch_enabled(bool enabled) { segment_row_prefetch_setting() = enabled; }
bool segment_scalar_rows_enabled() { return segment_scalar_rows_setting(); }
void set_segment_scalar_rows_enabled(bool enabled) { segment_scalar_rows_setting() = enabled; }
bool segment_warp_rows_enabled() { return segment_warp_rows_setting(); }
void set_segment_warp_rows_enabled(bool enabled) { segment_warp_rows_setting() = enabled; }
bool segment_subwarp_rows_enabled() { return segment_subwarp_rows_setting(); }
void set_segment_subwarp_rows_enabled(bool enabled) { segment_subwarp_rows_setting() = enabled; }
bool segment_staged_merges_enabled() { return segment_staged_merges_setting(); }
void set_segment_staged_merges_enabled(bool enabled) { segment_staged_merges_setting() = enabled; }
int segment_merge_stage_cap() { return segment_merge_stage_cap_setting(); }
void set_segment_merge_stage_cap(int bytes) {
  int cap = static_cast<int>(kMergeStageBytes);
  while (cap > bytes && cap >= kMergeStageMinBytes) cap /= 2;
  segment_merge_stage_cap_setting() = cap >= kMergeStageMinBytes ? cap : 0;
}
int segment_prefetch_groups() { return segment_prefetch_setting(); }
void set_segment_prefetch_groups(int groups) {
  segment_prefetch_setting() = std::min(std::max(groups, 0), kSegmentMaxPrefetchGroups);
}

}  // namespace detail
}  // namespace ragged
