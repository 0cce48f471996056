// A process-wide library switch (a getter and a setter, e.g. set_segment_stream_enabled) held for a scope: the
// value it had when the scope began (the default, or what the environment set) is put back when it ends. The
// benchmarks set switches to time each side in one run, the tests to compare their bits.
#pragma once

namespace ragged {
namespace detail {

template <typename Value, Value (*kGet)(), void (*kSet)(Value)>
class SettingScope {
 public:
  SettingScope() : saved_(kGet()) {}
  explicit SettingScope(Value value) : SettingScope() { kSet(value); }
  SettingScope(const SettingScope&) = delete;
  SettingScope& operator=(const SettingScope&) = delete;
  ~SettingScope() { kSet(saved_); }

 private:
  Value saved_;
};

}  // namespace detail
}  // namespace ragged
