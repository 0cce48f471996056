// The segment plan: an inclusive scan over the rows of their RowWork (units, partial chunks, combine units),
// computed on the device from the offsets so that the work split needs no host sync.
#include <cub/device/device_scan.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "segment_common.cuh"
#include "segment_launch.h"

namespace ragged {
namespace detail {
namespace {

template <typename OffsetT>
struct RowWorkOf {
  const OffsetT* offsets;
  std::int64_t nnz;
  SegmentGeometry geometry;
  __host__ __device__ RowWork operator()(std::int64_t b) const {
    std::int64_t begin = 0, end = 0;
    clamped_row_range(offsets, b, nnz, begin, end);
    return row_work(end - begin, geometry);
  }
};

struct AddRowWork {
  __host__ __device__ RowWork operator()(const RowWork& a, const RowWork& b) const { return a + b; }
};

}  // namespace

template <typename OffsetT>
Status launch_segment_plan(void* d_cub_temp, std::size_t& cub_temp_bytes, const OffsetT* d_offsets,
                           std::int64_t batch, std::int64_t nnz, const SegmentGeometry& geometry, RowWork* d_plan,
                           cudaStream_t stream) {
  auto work = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                              RowWorkOf<OffsetT>{d_offsets, nnz, geometry});
  if (d_cub_temp == nullptr)
    return from_cuda(cub::DeviceScan::InclusiveScan(nullptr, cub_temp_bytes, work, d_plan + 1, AddRowWork{}, batch,
                                                    stream),
                     "cub::DeviceScan::InclusiveScan(segment plan)");
  Status s = from_cuda(cudaMemsetAsync(d_plan, 0, sizeof(RowWork), stream), "cudaMemsetAsync(plan)");
  if (s != Status::kSuccess || batch == 0) return s;
  return from_cuda(cub::DeviceScan::InclusiveScan(d_cub_temp, cub_temp_bytes, work, d_plan + 1, AddRowWork{}, batch,
                                                  stream),
                   "cub::DeviceScan::InclusiveScan(segment plan)");
}

template Status launch_segment_plan<std::int32_t>(void*, std::size_t&, const std::int32_t*, std::int64_t,
                                                  std::int64_t, const SegmentGeometry&, RowWork*, cudaStream_t);
template Status launch_segment_plan<std::int64_t>(void*, std::size_t&, const std::int64_t*, std::int64_t,
                                                  std::int64_t, const SegmentGeometry&, RowWork*, cudaStream_t);

}  // namespace detail
}  // namespace ragged
