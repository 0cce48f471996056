// For the GPU tests that compare programmatic dependent launches (kernels/grid_dependency.cuh) with ordinary
// ones.
#pragma once

#include <utility>

#include "../../kernels/dependent_launch.h"

namespace ragged {
namespace test {

// run() with dependent launches on, then with ordinary ones: {dependent, ordinary}. The process's setting is
// back when it returns, passed or thrown.
template <typename Run>
auto dependent_and_ordinary(Run&& run) {
  detail::DependentLaunchScope on(true);
  auto dependent = run();
  detail::DependentLaunchScope off(false);
  auto ordinary = run();
  return std::make_pair(std::move(dependent), std::move(ordinary));
}

}  // namespace test
}  // namespace ragged
