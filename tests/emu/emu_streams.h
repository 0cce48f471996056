// What the emulator's scheduler (emu_scheduler.cpp) takes from its runtime API (emu_cuda_api.cpp): the sticky
// error of cudaGetLastError, running a step on a stream (or recording it while the stream is captured), and the
// EMU_* settings.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>

namespace emu {

cudaError_t set_error(cudaError_t e);  // records e for cudaGetLastError unless it is cudaSuccess; returns e
void enqueue(cudaStream_t stream, std::function<void()> step);
bool is_capturing(cudaStream_t stream);
int env_int(const char* name, int fallback);
// Steps run so far (every enqueued step counts, kernels and copies alike): a kernel launched after_prior follows
// the kernel before it only when that kernel was the step just before.
std::uint64_t steps_run();

// Device memory for the dependent-launch check (emu_scheduler.cpp): every allocation's pages (not its guard page)
// set to `prot`; the page of an allocation that holds `address` (nullptr outside device memory); and the hook that
// forgets the last kernel's recorded writes (memory allocated, freed or copied synchronously since).
void protect_device_memory(int prot);
char* device_page(const void* address);
std::size_t page_bytes();
void forget_kernel_writes();

// The device the emulator stands for: an H100's figures, with EMU_SMS multiprocessors (default 132) and
// EMU_SMEM_OPTIN bytes of opt-in shared memory per block (default the H100's 227 KB; 101376 for a 99 KB device)
// and EMU_SMEM_PER_SM bytes per SM (default the H100's 228 KB).
int sm_count();
int shared_optin_bytes();
int shared_per_sm_bytes();
// Device memory: an allocation larger than this (an H100's 80 GiB) fails as cudaMalloc does on the GPU.
std::size_t global_memory_bytes();

// The dynamic shared memory `kernel` may take in the current context: 48 KB unless cudaFuncSetAttribute
// (MaxDynamicSharedMemorySize) raised it since the start or the last cudaDeviceReset, as on a GPU.
std::size_t dynamic_shared_limit(const void* kernel);

// Blocks of `threads` threads and `shared` bytes of dynamic shared memory one SM holds at once: what the
// occupancy query answers and what a cooperative grid must fit, SM count times this. Registers, which the
// emulator does not allocate, are EMU_BLOCKS_PER_SM's cap (default 2); shared memory counts the GPU's 1 KB
// reserved per block against EMU_SMEM_PER_SM, threads 2048 per SM in whole warps, and 0 where `shared` is past
// the kernel's limit in this context. Static shared memory is not counted: the emulator cannot see it.
int resident_blocks(const void* kernel, int threads, std::size_t shared);

}  // namespace emu
