// For the GPU tests that compare programmatic dependent launches (kernels/grid_dependency.cuh) with ordinary
// ones: the process's setting back when the test ends, passed or not.
#pragma once

#include "../../kernels/grid_dependency.cuh"

namespace ragged {
namespace test {

class RestoreDependentLaunch {
 public:
  RestoreDependentLaunch() : saved_(detail::dependent_launch_enabled()) {}
  ~RestoreDependentLaunch() { detail::set_dependent_launch_enabled(saved_); }
  RestoreDependentLaunch(const RestoreDependentLaunch&) = delete;
  RestoreDependentLaunch& operator=(const RestoreDependentLaunch&) = delete;

 private:
  bool saved_;
};

}  // namespace test
}  // namespace ragged
