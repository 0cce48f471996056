// The tests' cap on every grid-stride launch's grid (launch.cuh: grid_cap, used by grid_size).
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
