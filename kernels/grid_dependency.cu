// The process-wide switch of programmatic dependent launch (grid_dependency.cuh).
#include "grid_dependency.cuh"

#include <map>
#include <mutex>

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

}  // namespace

bool dependent_launch_enabled() { return dependent_launch_setting(); }
void set_dependent_launch_enabled(bool enabled) { dependent_launch_setting() = enabled; }

Status dependent_launch_available(bool& available) {
  available = false;
  if (!dependent_launch_setting()) return Status::kSuccess;
  int device = 0;
  Status s = from_cuda(cudaGetDevice(&device), "cudaGetDevice");
  if (s != Status::kSuccess) return s;
  static std::mutex mutex;
  static std::map<int, int> major_of;  // compute capability per device, queried once
  std::lock_guard<std::mutex> lock(mutex);
  auto hit = major_of.find(device);
  if (hit == major_of.end()) {
    int major = 0;
    s = from_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
                  "cudaDeviceGetAttribute(ComputeCapabilityMajor)");
    if (s != Status::kSuccess) return s;
    hit = major_of.emplace(device, major).first;
  }
  available = hit->second >= 9;
  return Status::kSuccess;
}

}  // namespace detail
}  // namespace ragged
