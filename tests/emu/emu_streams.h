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

}  // namespace emu
