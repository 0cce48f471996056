// The process-wide switch of programmatic dependent launch, and which kernels may take it (dependent_launch.h).
#include "dependent_launch.h"

#include <map>
#include <mutex>
#include <utility>

#include "launch.cuh"

namespace ragged {
namespace detail {
namespace {

// RAGGED_DEPENDENT_LAUNCH=0 in the environment starts a process with ordinary launches only, to compare the two
// on a GPU.
bool& dependent_launch_setting() {
  static bool enabled = switch_from_environment("RAGGED_DEPENDENT_LAUNCH");
  return enabled;
}

// Whether the device runs `kernel` from code compiled for sm_90 or newer, where wait_for_prior_grid() is
// griddepcontrol.wait. Asked once per kernel and device: the answer cannot change in a process.
Status kernel_waits_for_prior_grid(const void* kernel, int device, bool& waits) {
  static std::mutex mutex;
  static std::map<std::pair<int, const void*>, bool> waits_of;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(device, kernel);
  auto hit = waits_of.find(key);
  if (hit == waits_of.end()) {
    int major = 0;
    Status s = from_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
                         "cudaDeviceGetAttribute(ComputeCapabilityMajor)");
    if (s != Status::kSuccess) return s;
    cudaFuncAttributes attributes{};
    s = from_cuda(cudaFuncGetAttributes(&attributes, kernel), "cudaFuncGetAttributes");
    if (s != Status::kSuccess) return s;
    hit = waits_of.emplace(key, major >= 9 && attributes.ptxVersion >= 90).first;
  }
  waits = hit->second;
  return Status::kSuccess;
}

}  // namespace

bool dependent_launch_enabled() { return dependent_launch_setting(); }
void set_dependent_launch_enabled(bool enabled) { dependent_launch_setting() = enabled; }

Status dependent_launch_available(const void* kernel, bool& available) {
  available = false;
  if (!dependent_launch_setting()) return Status::kSuccess;
  int device = 0;
  const Status s = from_cuda(cudaGetDevice(&device), "cudaGetDevice");
  if (s != Status::kSuccess) return s;
  return kernel_waits_for_prior_grid(kernel, device, available);
}

}  // namespace detail
}  // namespace ragged
