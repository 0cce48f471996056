// Emulator stand-in for cooperative groups (tests/emu/shim): the grid group of a cooperative launch, whose
// sync() waits for every thread of the grid (the emulator runs such a grid's blocks all at once).
#pragma once

namespace cooperative_groups {

struct grid_group {
  void sync() const { ::emu::grid_barrier(); }
};

inline grid_group this_grid() { return grid_group{}; }

}  // namespace cooperative_groups
