// The segment plan of more than kKernelPlanGroups groups: an inclusive scan of the row pass's per-group work sums
// (units, partial chunks, second-pass units), on the device so that the work split needs no host
// sync. (Smaller plans are scanned by the first-pass kernel itself: segment_common.cuh, stage_plan.)
#include <cub/device/device_scan.cuh>

#include "segment_common.cuh"
#include "segment_launch.h"

namespace ragged {
namespace detail {
namespace {

struct AddRowWork {
  __host__ __device__ RowWork operator()(const RowWork& a, const RowWork& b) const { return a + b; }
};

}  // namespace

Status launch_segment_plan(void* d_cub_temp, std::size_t& cub_temp_bytes, const RowWork* d_group_work,
                           std::int64_t groups, RowWork* d_plan, cudaStream_t stream) {
  if (d_cub_temp == nullptr)
    return from_cuda(cub::DeviceScan::InclusiveScan(nullptr, cub_temp_bytes, d_group_work, d_plan + 1, AddRowWork{},
                                                    groups, stream),
                     "cub::DeviceScan::InclusiveScan(segment plan)");
  Status s = from_cuda(cudaMemsetAsync(d_plan, 0, sizeof(RowWork), stream), "cudaMemsetAsync(plan)");
  if (s != Status::kSuccess || groups == 0) return s;
  return from_cuda(cub::DeviceScan::InclusiveScan(d_cub_temp, cub_temp_bytes, d_group_work, d_plan + 1, AddRowWork{},
                                                  groups, stream),
                   "cub::DeviceScan::InclusiveScan(segment plan)");
}

}  // namespace detail
}  // namespace ragged
