// Puts a process-wide library switch back when the test that changed it ends, passed or not.
#pragma once

namespace ragged {
namespace test {

// The switch as it was when the test began: the default, or what the environment set (e.g.
// RAGGED_SEGMENT_STREAM=0 in an A/B run).
template <typename Value, Value (*kGet)(), void (*kSet)(Value)>
class RestoreSetting {
 public:
  RestoreSetting() : saved_(kGet()) {}
  RestoreSetting(const RestoreSetting&) = delete;
  RestoreSetting& operator=(const RestoreSetting&) = delete;
  ~RestoreSetting() { kSet(saved_); }

 private:
  Value saved_;
};

}  // namespace test
}  // namespace ragged
