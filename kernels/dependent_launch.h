// Host side of programmatic dependent launch (grid_dependency.cuh): whether a kernel may take it, and the
// process-wide switch. A header of its own so that the kernel emulator's grid_dependency.cuh (tests/emu/device)
// shares it with the real one, and benchmarks and tests can flip the switch without device code.
#pragma once

#include "ragged/status.h"

namespace ragged {
namespace detail {

// Whether `kernel` may be launched with launch_after_prior(true, ...) on the current device: compute capability
// 9.0 or newer, not turned off by RAGGED_DEPENDENT_LAUNCH=0 when the process started, and the kernel's code, as
// the device runs it, compiled for sm_90 or newer (cudaFuncAttributes::ptxVersion >= 90). Why the last: a build
// for sm_80 only runs on an H100 from its compute_80 PTX, where wait_for_prior_grid() compiled to nothing, so a
// dependent launch would let the kernel read before the one it follows has finished (kernels/grid_dependency.cu).
Status dependent_launch_available(const void* kernel, bool& available);
template <typename... Params>
Status dependent_launch_available(void (*kernel)(Params...), bool& available) {
  return dependent_launch_available(reinterpret_cast<const void*>(kernel), available);
}

// The process-wide switch behind it (benchmarks and tests compare with ordinary launches); not thread-safe to
// change.
bool dependent_launch_enabled();
void set_dependent_launch_enabled(bool enabled);

// Sets the switch for a scope and puts the former value back at its end, passed or thrown.
class DependentLaunchScope {
 public:
  explicit DependentLaunchScope(bool enabled) : saved_(dependent_launch_enabled()) {
    set_dependent_launch_enabled(enabled);
  }
  ~DependentLaunchScope() { set_dependent_launch_enabled(saved_); }
  DependentLaunchScope(const DependentLaunchScope&) = delete;
  DependentLaunchScope& operator=(const DependentLaunchScope&) = delete;

 private:
  bool saved_;
};

}  // namespace detail
}  // namespace ragged
