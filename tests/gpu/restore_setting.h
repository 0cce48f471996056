// Puts a process-wide library switch back when the test that changed it ends, passed or not.
#pragma once

#include "../../kernels/setting_scope.h"

namespace ragged {
namespace test {

// The switch as it was when the test began: the default, or what the environment set (e.g.
// RAGGED_SEGMENT_STREAM=0 in an A/B run).
template <typename Value, Value (*kGet)(), void (*kSet)(Value)>
using RestoreSetting = detail::SettingScope<Value, kGet, kSet>;

}  // namespace test
}  // namespace ragged
