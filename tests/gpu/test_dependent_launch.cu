// Programmatic dependent launch (kernels/grid_dependency.cuh) on its own: which kernels are offered it, and that
// a kernel launched after another reads, after its wait, everything the other wrote. The segment and RNN tests
// compare whole ops with and without it; this one holds the mechanism where a race has room to show: the first
// grid lets the second be scheduled at its start and leaves most of every SM free for it.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "../../kernels/grid_dependency.cuh"
#include "common/test_util.h"
#include "ragged/buffer.h"

using namespace ragged;

namespace {

constexpr int kThreads = 256;

__host__ __device__ inline unsigned mixed(unsigned seed, std::int64_t i, int rounds) {
  unsigned v = seed ^ static_cast<unsigned>(i * 2654435761u);
  for (int r = 0; r < rounds; ++r) v = v * 1664525u + 1013904223u;
  return v;
}

// Writes mixed(seed, i) to out[i], `rounds` multiply-adds an element so that the grid runs a while after the
// dependent grid has been scheduled.
__global__ void write_kernel(unsigned* out, std::int64_t n, unsigned seed, int rounds) {
  detail::allow_dependent_grid();
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = mixed(seed, i, rounds);
}

// out[i] = in[i] + 1, reading in only after the wait.
__global__ void read_after_wait_kernel(const unsigned* in, unsigned* out, std::int64_t n) {
  detail::wait_for_prior_grid();
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = in[i] + 1u;
}

// out[i * stride] = mixed(seed, i) for i < count: scattered writes, one element every `stride` elements.
__global__ void write_strided_kernel(unsigned* out, std::int64_t count, std::int64_t stride, unsigned seed) {
  detail::allow_dependent_grid();
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i * stride] = mixed(seed, i, 1);
}

// out[i] = in[i * stride] + 1, reading in only after the wait.
__global__ void gather_after_wait_kernel(const unsigned* in, std::int64_t count, std::int64_t stride, unsigned* out) {
  detail::wait_for_prior_grid();
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = in[i * stride] + 1u;
}

struct DeviceFacts {
  int major = 0;
  int ptx_version = 0;  // of read_after_wait_kernel as the device runs it
};

DeviceFacts device_facts() {
  DeviceFacts f;
  int device = 0;
  REQUIRE_CUDA(cudaGetDevice(&device));
  REQUIRE_CUDA(cudaDeviceGetAttribute(&f.major, cudaDevAttrComputeCapabilityMajor, device));
  cudaFuncAttributes attributes{};
  REQUIRE_CUDA(cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(&read_after_wait_kernel)));
  f.ptx_version = attributes.ptxVersion;
  return f;
}

}  // namespace

TEST_CASE("dependent launches are offered exactly where the kernel's code waits", "[launch][gpu]") {
  const DeviceFacts f = device_facts();
  INFO("compute capability major " << f.major << ", kernel PTX version " << f.ptx_version);
  bool available = true;
  {
    const detail::DependentLaunchScope on(true);
    REQUIRE_OK(detail::dependent_launch_available(&read_after_wait_kernel, available));
    // An sm_90 device running code built for sm_90 or newer; anything else (an sm_80 build JIT-compiled for an
    // H100 has no griddepcontrol.wait in it) must launch ordinarily.
    CHECK(available == (f.major >= 9 && f.ptx_version >= 90));
  }
  const detail::DependentLaunchScope off(false);
  REQUIRE_OK(detail::dependent_launch_available(&read_after_wait_kernel, available));
  CHECK_FALSE(available);
}

TEST_CASE("a dependent kernel reads, after its wait, everything the kernel before it wrote", "[launch][gpu]") {
  const detail::DependentLaunchScope on(true);
  bool dependent = false;
  REQUIRE_OK(detail::dependent_launch_available(&read_after_wait_kernel, dependent));
  INFO("dependent launch " << (dependent ? "on" : "off (device or build before sm_90)"));
  int device = 0, sms = 0;
  REQUIRE_CUDA(cudaGetDevice(&device));
  REQUIRE_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::int64_t n = std::int64_t{1} << 18;
  const int rounds = 64;
  DeviceBuffer<unsigned> first(static_cast<std::size_t>(n)), second(static_cast<std::size_t>(n));
  cudaStream_t stream = nullptr;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto rng = test::make_rng(1300);
  for (int trial = 0; trial < 8; ++trial) {
    const unsigned seed = static_cast<unsigned>(rng());
    test::poison(first);
    test::poison(second);
    REQUIRE_CUDA(cudaDeviceSynchronize());  // the poison went to the default stream, which `stream` does not follow
    // One block per SM for the writer: the reader's blocks fit beside it and start while it runs.
    REQUIRE_OK(detail::launch_after_prior(false, "write_kernel", &write_kernel, dim3(static_cast<unsigned>(sms)),
                                          dim3(kThreads), 0, stream, first.data(), n, seed, rounds));
    REQUIRE_OK(detail::launch_after_prior(dependent, "read_after_wait_kernel", &read_after_wait_kernel,
                                          dim3(static_cast<unsigned>(4 * sms)), dim3(kThreads), 0, stream,
                                          static_cast<const unsigned*>(first.data()), second.data(), n));
    REQUIRE_CUDA(cudaStreamSynchronize(stream));
    const std::vector<unsigned> got = second.to_host();
    std::int64_t wrong = 0, first_wrong = -1;
    for (std::int64_t i = 0; i < n; ++i) {
      if (got[static_cast<std::size_t>(i)] != mixed(seed, i, rounds) + 1u) {
        if (first_wrong < 0) first_wrong = i;
        ++wrong;
      }
    }
    INFO("trial " << trial << ": " << wrong << " of " << n << " elements wrong, the first at " << first_wrong);
    REQUIRE(wrong == 0);
  }
  REQUIRE_CUDA(cudaStreamDestroy(stream));
}

// One element every 8 KB of a 512 MB buffer: 65,536 pages written apart. On a GPU, another reader after its wait.
// Under the emulator, whose check of dependent launches opens each written page of read-only device memory on its
// own, this passes vm.max_map_count (65,530 mappings by default); before 2026-12-07 the store that could not open
// its page faulted forever (docs/emulator.md). Now the check gives up for that launch and the next, and says so.
TEST_CASE("a dependent kernel after one writing 65,536 scattered pages", "[launch][gpu]") {
  const detail::DependentLaunchScope on(true);
  bool dependent = false;
  REQUIRE_OK(detail::dependent_launch_available(&gather_after_wait_kernel, dependent));
  INFO("dependent launch " << (dependent ? "on" : "off (device or build before sm_90)"));
  const std::int64_t stride = 2048;  // unsigned elements: 8 KB
  const std::int64_t count = std::int64_t{1} << 16;
  DeviceBuffer<unsigned> scattered(static_cast<std::size_t>(count * stride)), gathered(static_cast<std::size_t>(count));
  cudaStream_t stream = nullptr;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const unsigned seed = static_cast<unsigned>(test::make_rng(1301)());
  test::poison(scattered);
  test::poison(gathered);
  REQUIRE_CUDA(cudaDeviceSynchronize());
  // Twice: the second writer (no wait in its code, so an ordinary launch) overwrites what the first reader read.
  for (int round = 0; round < 2; ++round) {
    REQUIRE_OK(detail::launch_after_prior(false, "write_strided_kernel", &write_strided_kernel, dim3(64),
                                          dim3(kThreads), 0, stream, scattered.data(), count, stride,
                                          seed + static_cast<unsigned>(round)));
    REQUIRE_OK(detail::launch_after_prior(dependent, "gather_after_wait_kernel", &gather_after_wait_kernel, dim3(64),
                                          dim3(kThreads), 0, stream, static_cast<const unsigned*>(scattered.data()),
                                          count, stride, gathered.data()));
    REQUIRE_CUDA(cudaStreamSynchronize(stream));
    const std::vector<unsigned> got = gathered.to_host();
    std::int64_t wrong = 0, first_wrong = -1;
    for (std::int64_t i = 0; i < count; ++i) {
      if (got[static_cast<std::size_t>(i)] != mixed(seed + static_cast<unsigned>(round), i, 1) + 1u) {
        if (first_wrong < 0) first_wrong = i;
        ++wrong;
      }
    }
    INFO("round " << round << ": " << wrong << " of " << count << " elements wrong, the first at " << first_wrong);
    REQUIRE(wrong == 0);
  }
  REQUIRE_CUDA(cudaStreamDestroy(stream));
}
