// Emulator stand-in for cooperative groups (tests/emu/shim): the grid group of a cooperative launch, whose
// sync() waits for every thread of the grid (the emulator runs such a grid's blocks all at once). The split
// barrier's arrival is a block barrier here, as CUDA's is (its first step), and the wait the grid barrier: so
// a block's writes between arriving and waiting are seen by every block after the wait, where on the GPU
// they may not be. Code must not rely on them (docs/emulator.md).
#pragma once

namespace cooperative_groups {

struct grid_group {
  using arrival_token = unsigned int;
  void sync() const { ::emu::grid_barrier(); }
  arrival_token barrier_arrive() const {
    ::emu::block_barrier();
    return 0u;
  }
  void barrier_wait(arrival_token&&) const { ::emu::grid_barrier(); }
};

inline grid_group this_grid() { return grid_group{}; }

}  // namespace cooperative_groups
