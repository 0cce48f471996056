// The tests' cap on every grid that grid_size sizes (launch.cuh: grid_cap).
#include "launch.cuh"

namespace ragged {
namespace detail {
namespace {

unsigned& grid_cap_setting() {
  static unsigned blocks = 0;
  return blocks;
}

}  // namespace

unsigned grid_cap() { return grid_cap_setting(); }
void set_grid_cap(unsigned blocks) { grid_cap_setting() = blocks; }

}  // namespace detail
}  // namespace ragged
