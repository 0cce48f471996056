// Puts a process-wide library switch back when the test that changed it ends, passed or not.
#pragma once

#include "../../kernels/launch.cuh"
#include "../../kernels/setting_scope.h"

namespace ragged {
namespace test {

// The switch as it was when the test began: the default, or what the environment set (e.g.
// RAGGED_SEGMENT_STREAM=0 in an A/B run).
template <typename Value, Value (*kGet)(), void (*kSet)(Value)>
using RestoreSetting = detail::SettingScope<Value, kGet, kSet>;

// The cap on every grid-stride launch's grid (launch.cuh: grid_cap; 0, none, unless a test set one).
using RestoreGridCap = RestoreSetting<unsigned, detail::grid_cap, detail::set_grid_cap>;

}  // namespace test
}  // namespace ragged
