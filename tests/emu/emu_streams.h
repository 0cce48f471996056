// What the emulator's scheduler (emu_scheduler.cpp) takes from its runtime API (emu_cuda_api.cpp): the sticky
// error of cudaGetLastError, running a step on a stream (or recording it while the stream is captured), and the
// EMU_* settings.
#pragma once

#include <cuda_runtime.h>

#include <functional>

namespace emu {

cudaError_t set_error(cudaError_t e);  // records e for cudaGetLastError unless it is cudaSuccess; returns e
void enqueue(cudaStream_t stream, std::function<void()> step);
bool is_capturing(cudaStream_t stream);
int env_int(const char* name, int fallback);

// The device the emulator stands for: an H100's figures, with EMU_SMS multiprocessors (default 132) and
// EMU_SMEM_OPTIN bytes of opt-in shared memory per block (default the H100's 227 KB; 101376 for a 99 KB device)
// and EMU_SMEM_PER_SM bytes per SM (default the H100's 228 KB).
int sm_count();
int shared_optin_bytes();
int shared_per_sm_bytes();

}  // namespace emu
