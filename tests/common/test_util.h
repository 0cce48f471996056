// Shared test helpers: device detection, seeded random inputs, length regimes, poisoning and comparisons.
#pragma once

#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "ragged/buffer.h"
#include "ragged/dtype.h"
#include "ragged/status.h"

namespace ragged {
namespace test {

constexpr int kSkipReturnCode = 77;

bool gpu_available();
// No device or no driver: the GPU tests skip (kSkipReturnCode). Without a device for any other reason they fail.
bool gpu_absent();
const char* gpu_unavailable_reason();

// A generator seeded from Catch2's --rng-seed (printed at start-up) and a per-use salt, so every test case
// gets its own fresh stream and a failing run can be replayed.
std::mt19937_64 make_rng(std::uint64_t salt);

// Conversions between element types and double for references and comparisons.
template <typename T>
double to_double(T v) {
  if constexpr (std::is_same<T, half>::value) return static_cast<double>(__half2float(v));
  else if constexpr (std::is_same<T, bfloat16>::value) return static_cast<double>(__bfloat162float(v));
  else return static_cast<double>(v);
}
template <typename T>
T from_double(double v) {
  if constexpr (std::is_same<T, half>::value) return __float2half(static_cast<float>(v));
  else if constexpr (std::is_same<T, bfloat16>::value) return __float2bfloat16(static_cast<float>(v));
  else if constexpr (std::is_same<T, bool>::value) return v != 0.0;
  else return static_cast<T>(v);
}

// Random non-zero values: floats uniform in [-2, -0.05] U [0.05, 2], integers in [1, 1000] with random sign,
// bool/uint8 random.
template <typename T>
std::vector<T> random_values(std::size_t count, std::mt19937_64& rng) {
  std::vector<T> out(count);
  if constexpr (std::is_same<T, bool>::value) {
    std::bernoulli_distribution coin(0.5);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = coin(rng);  // vector<bool>: no bool&
  } else if constexpr (std::is_same<T, std::uint8_t>::value) {
    std::uniform_int_distribution<int> dist(1, 255);
    for (auto& v : out) v = static_cast<std::uint8_t>(dist(rng));
  } else if constexpr (std::is_integral<T>::value) {
    std::uniform_int_distribution<std::int64_t> dist(1, 1000);
    std::bernoulli_distribution sign(0.5);
    for (auto& v : out) v = static_cast<T>(sign(rng) ? dist(rng) : -dist(rng));
  } else {
    std::uniform_real_distribution<double> mag(0.05, 2.0);
    std::bernoulli_distribution sign(0.5);
    for (auto& v : out) v = from_double<T>(sign(rng) ? mag(rng) : -mag(rng));
  }
  return out;
}

// Element type x offset type pairs for TEMPLATE_TEST_CASE over the floating-point ops.
template <typename T, typename OffsetT>
struct Case {
  using Value = T;
  using Offset = OffsetT;
};
using F32_I32 = Case<float, std::int32_t>;
using F32_I64 = Case<float, std::int64_t>;
using F16_I32 = Case<half, std::int32_t>;
using F16_I64 = Case<half, std::int64_t>;
using BF16_I32 = Case<bfloat16, std::int32_t>;
using BF16_I64 = Case<bfloat16, std::int64_t>;

// RAGGED_TEST_SCALE=s (0 < s <= 1, default 1) shrinks the large generated inputs of the segment tests, and the
// attention test's long key histories, to about s of their element counts, for runs under compute-sanitizer,
// where instrumented accesses make the full sizes take minutes per test case (scripts/gpu-check.sh sets it there;
// ctest never does). Inputs whose size is what a case tests (a plan past the first-pass kernel's limit, merge
// trees of three levels, long softmax rows) keep theirs.
double test_scale();
// Why RAGGED_TEST_SCALE cannot be used, or nullptr when it is unset or valid (gpu_main refuses to run then).
const char* test_scale_error();
// n x test_scale(), rounded, and at least `at_least`; exactly n at scale 1.
std::int64_t scaled(std::int64_t n, std::int64_t at_least = 1);

// Length regimes every op is tested across.
enum class Regime { kRandom, kEmptyBatch, kBatchOfOne, kZeroLengths, kAllEmpty, kOneHuge, kManyTiny };
const char* regime_name(Regime regime);
std::vector<Regime> all_regimes();
// Lengths for a regime; `scale` bounds the typical length (kOneHuge's huge row is about 64 * scale).
std::vector<std::int64_t> make_lengths(Regime regime, std::mt19937_64& rng, std::int64_t scale = 40);

// The byte poison() fills a buffer of T with.
template <typename T>
constexpr unsigned char poison_byte() {
  return std::is_floating_point<T>::value || std::is_same<T, half>::value || std::is_same<T, bfloat16>::value
             ? 0xff
             : 0x5a;
}

// Fills the device buffer with a pattern no op writes: all-ones bits (NaN) for floating point types, 0x5A for
// integers, so an element the op forgot to write fails the comparison.
template <typename T>
void poison(DeviceBuffer<T>& buffer) {
  buffer.fill_bytes(poison_byte<T>());
}

// Whether a value still holds poison()'s bytes: an element the op never wrote. In floating point the poison is a
// NaN, so a comparison that accepts NaN for NaN must ask this first (no NaN an op computes has all bits set: the
// GPU's is 0x7fff..., x86's 0xffc0..., an input's keeps its payload).
template <typename T>
bool is_poison(const T& v) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  for (unsigned char byte : bytes)
    if (byte != poison_byte<T>()) return false;
  return true;
}

// Elements of `values` that still hold poison()'s bytes. Where a test compares two GPU paths whose outputs were
// poisoned alike, an element both skip passes the comparison; REQUIRE_WRITTEN_AND_EQUAL asks this first.
template <typename T>
std::size_t count_poison(const std::vector<T>& values) {
  return static_cast<std::size_t>(std::count_if(values.begin(), values.end(), [](const T& v) { return is_poison(v); }));
}

// A device buffer of `count` elements with `guard` elements on each side, all poisoned. For the malformed-input
// tests: a write past either end lands in a guard, where guards_intact() sees it. Without the guards such a write
// usually lands in other mapped memory of the pool and goes unseen on a GPU unless compute-sanitizer runs. A guard
// of g elements also starts data() g * sizeof(T) bytes past the allocation's alignment: a guard of 1 to 3 float
// elements is an array that is not 16-byte aligned, for the tests of the one-element paths.
template <typename T>
class GuardedBuffer {
 public:
  explicit GuardedBuffer(std::size_t count, std::size_t guard = 4096) : count_(count), guard_(guard),
                                                                        buffer_(count + 2 * guard) {
    buffer_.fill_bytes(poison_byte<T>());
  }
  // Guards poisoned, the elements from `values`.
  GuardedBuffer(const std::vector<T>& values, std::size_t guard = 4096) : GuardedBuffer(values.size(), guard) {
    if (!values.empty())
      REQUIRE(cudaMemcpy(data(), values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  T* data() { return buffer_.data() + guard_; }
  const T* data() const { return buffer_.data() + guard_; }
  std::size_t size() const { return count_; }
  // The elements, without the guards (synchronises the device).
  std::vector<T> to_host() const {
    const std::vector<T> all = buffer_.to_host();
    return std::vector<T>(all.begin() + guard_, all.end() - guard_);
  }
  // Whether every guard element still holds poison()'s bytes (synchronises the device).
  bool guards_intact() const {
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    const std::vector<T> all = buffer_.to_host();
    const std::vector<T> before(all.begin(), all.begin() + guard_), after(all.end() - guard_, all.end());
    return count_poison(before) == guard_ && count_poison(after) == guard_;
  }

 private:
  std::size_t count_, guard_;
  DeviceBuffer<T> buffer_;
};

// Fills a workspace with 0xff bytes before an op runs (NaN in every floating type, -1 in every signed integer):
// an op must neither expect it zeroed nor read a byte it did not write first, and such a read then shows in its
// results (or as an out-of-bounds access). RAGGED_TEST_UNSET_WORKSPACE=1 leaves the workspace as allocated, so
// that compute-sanitizer's initcheck (scripts/gpu-check.sh sets it there) reports the read instead.
void poison_workspace(DeviceBuffer<unsigned char>& workspace);

// The two-phase call of a low-level op: queries the workspace, provides max(bytes, 1) bytes of it filled with
// garbage (poison_workspace), runs, synchronises. `op(void* workspace, std::size_t& bytes)`
// returns Status; so does this.
template <typename Op>
Status run_two_phase(Op&& op) {
  std::size_t bytes = 0;
  const Status query = op(nullptr, bytes);
  if (query != Status::kSuccess) return query;
  DeviceBuffer<unsigned char> workspace(bytes > 0 ? bytes : 1);
  poison_workspace(workspace);
  const Status run = op(workspace.data(), bytes);
  if (run != Status::kSuccess) return run;
  return from_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the op");
}

// What `enqueue(stream)` (returning Status) puts on a new non-blocking stream, captured into an instantiated
// CUDA graph. In global capture mode (the default) a host sync or another call that is illegal while capturing
// fails the capture. `enqueued` is what enqueue returned; launch() replays the graph and waits for it.
class CapturedGraph {
 public:
  template <typename Enqueue>
  explicit CapturedGraph(Enqueue&& enqueue, cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal) {
    REQUIRE(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(cudaStreamBeginCapture(stream_, mode) == cudaSuccess);
    enqueued = enqueue(stream_);
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph_);
    INFO("cudaStreamEndCapture -> " << cudaGetErrorString(ended));
    REQUIRE(ended == cudaSuccess);
    REQUIRE(cudaGraphInstantiate(&exec_, graph_, 0) == cudaSuccess);
  }
  cudaError_t launch() {
    const cudaError_t launched = cudaGraphLaunch(exec_, stream_);
    return launched != cudaSuccess ? launched : cudaStreamSynchronize(stream_);
  }
  ~CapturedGraph() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  Status enqueued = Status::kSuccess;

 private:
  cudaStream_t stream_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// Index of the first element whose bytes differ, or -1.
template <typename T>
std::int64_t first_bitwise_mismatch(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return static_cast<std::int64_t>(i);
  return -1;
}

}  // namespace test
}  // namespace ragged

// REQUIRE that a ragged call succeeded, showing the library's message if not.
#define REQUIRE_OK(expr)                                                        \
  do {                                                                          \
    const ::ragged::Status status_ = (expr);                                    \
    INFO(#expr << " -> " << ::ragged::status_string(status_) << ": "            \
               << ::ragged::last_error_message());                              \
    REQUIRE(status_ == ::ragged::Status::kSuccess);                             \
  } while (0)

#define REQUIRE_CUDA(expr)                                                      \
  do {                                                                          \
    const cudaError_t err_ = (expr);                                            \
    INFO(#expr << " -> " << cudaGetErrorString(err_));                          \
    REQUIRE(err_ == cudaSuccess);                                               \
  } while (0)

// A bitwise comparison of two host vectors that reports the first differing index. Each argument is evaluated
// once (an argument may be a device run that returns the vector).
#define REQUIRE_BITWISE_EQUAL(a, b)                                             \
  do {                                                                          \
    const auto& left_ = (a);                                                    \
    const auto& right_ = (b);                                                   \
    INFO(#a " against " #b);                                                    \
    REQUIRE(left_.size() == right_.size());                                     \
    const std::int64_t mismatch_ = ::ragged::test::first_bitwise_mismatch(left_, right_); \
    INFO("first mismatch at element " << mismatch_);                            \
    REQUIRE(mismatch_ == -1);                                                   \
  } while (0)

// REQUIRE_BITWISE_EQUAL where `b` comes from another GPU path poisoned as `a` was, and the op writes every
// element: `b` must hold no poison, else an element both paths skip would compare equal.
#define REQUIRE_WRITTEN_AND_EQUAL(a, b)                                         \
  do {                                                                          \
    const auto& written_ = (b);                                                 \
    INFO(#b " must have every element written");                               \
    REQUIRE(::ragged::test::count_poison(written_) == 0);                       \
    REQUIRE_BITWISE_EQUAL(a, written_);                                         \
  } while (0)
