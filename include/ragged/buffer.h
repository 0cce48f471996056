// Owning convenience layer, part 1: RAII device memory. Allocation is stream-ordered (cudaMallocAsync on the
// buffer's stream) and every failure throws ragged::Error naming the call. Host copies synchronise the stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ragged/status.h"

namespace ragged {

// Throws ragged::Error if `error` is not cudaSuccess.
inline void cuda_check(cudaError_t error, const char* what) { throw_if_error(from_cuda(error, what)); }

namespace detail {
// Makes work enqueued on `waiter` from now on wait for what is already enqueued on `producer`, through an event
// (destroying it right away is allowed: the wait keeps its state). Returns the first failure, and takes every
// failure back from the runtime's last error, so a later launch check does not report it as its own.
inline cudaError_t order_after(cudaStream_t waiter, cudaStream_t producer) noexcept {
  if (waiter == producer) return cudaSuccess;
  cudaEvent_t event = nullptr;
  cudaError_t error = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  if (error == cudaSuccess) {
    error = cudaEventRecord(event, producer);
    if (error == cudaSuccess) error = cudaStreamWaitEvent(waiter, event, 0);
    const cudaError_t destroyed = cudaEventDestroy(event);
    if (error == cudaSuccess) error = destroyed;
  }
  if (error != cudaSuccess) cudaGetLastError();
  return error;
}
}  // namespace detail

// Makes work enqueued on `waiter` from now on wait for what is already enqueued on `producer`, without a host
// sync. Throws ragged::Error on failure.
inline void stream_wait(cudaStream_t waiter, cudaStream_t producer) {
  cuda_check(detail::order_after(waiter, producer), "stream_wait (cudaEventRecord / cudaStreamWaitEvent)");
}

// Work enqueued on `user` that reads or writes a buffer owned by (allocated and freed on) another stream: the
// constructor makes `user` wait for what is pending on `owner` (the buffer's contents, its allocation); done()
// makes `owner` wait for what was enqueued on `user` since, so that the buffer's cudaFreeAsync on `owner` cannot
// hand the memory out while that work runs. If done() is not reached (an exception after some work was
// enqueued), the destructor makes the same wait, ignoring its failure. No host sync.
class CrossStreamUse {
 public:
  CrossStreamUse(cudaStream_t user, cudaStream_t owner) : user_(user), owner_(owner) { stream_wait(user, owner); }
  ~CrossStreamUse() {
    if (!done_) detail::order_after(owner_, user_);
  }
  CrossStreamUse(const CrossStreamUse&) = delete;
  CrossStreamUse& operator=(const CrossStreamUse&) = delete;

  void done() {
    done_ = true;
    stream_wait(owner_, user_);
  }

 private:
  cudaStream_t user_;
  cudaStream_t owner_;
  bool done_ = false;
};

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count, cudaStream_t stream = nullptr) : count_(count), stream_(stream) {
    if (count_ > 0) {
      if (count_ > static_cast<std::size_t>(-1) / sizeof(T))
        throw Error(Status::kSizeOverflow, "DeviceBuffer: " + std::to_string(count_) + " elements of " +
                                               std::to_string(sizeof(T)) + " bytes overflow size_t");
      void* ptr = nullptr;
      cuda_check(cudaMallocAsync(&ptr, count_ * sizeof(T), stream_), "cudaMallocAsync");
      data_ = static_cast<T*>(ptr);
    }
  }
  explicit DeviceBuffer(const std::vector<T>& host, cudaStream_t stream = nullptr) : DeviceBuffer(host.size(), stream) {
    if constexpr (std::is_same_v<T, bool>) {
      // std::vector<bool> packs bits and has no data(): stage through one byte per element.
      const std::vector<unsigned char> bytes(host.begin(), host.end());
      copy_bytes_from_host(bytes.data(), bytes.size());
    } else {
      copy_from_host(host.data(), host.size());
    }
  }
  ~DeviceBuffer() { release(); }

  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      swap(other);
    }
    return *this;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }
  bool empty() const { return count_ == 0; }
  cudaStream_t stream() const { return stream_; }
  // Frees on `stream` from now on: `stream` first waits for the work pending on the old stream, which may
  // still use the memory.
  void set_stream(cudaStream_t stream) {
    if (data_ != nullptr) stream_wait(stream, stream_);
    stream_ = stream;
  }

  void copy_from_host(const T* host, std::size_t count) { copy_bytes_from_host(host, count); }
  std::vector<T> to_host() const {
    if constexpr (std::is_same_v<T, bool>) {
      std::vector<unsigned char> bytes(count_);
      copy_bytes_to_host(bytes.data());
      return std::vector<bool>(bytes.begin(), bytes.end());
    } else {
      std::vector<T> host(count_);
      copy_bytes_to_host(host.data());
      return host;
    }
  }
  // Sets every byte (tests poison outputs with this before a run).
  void fill_bytes(int byte) {
    if (count_ > 0) cuda_check(cudaMemsetAsync(data_, byte, bytes(), stream_), "cudaMemsetAsync");
  }

 private:
  static_assert(!std::is_same_v<T, bool> || sizeof(bool) == 1, "bool buffers are copied as one byte per element");

  void copy_bytes_from_host(const void* host, std::size_t count) {
    if (count > count_) throw Error(Status::kInvalidArgument, "copy_from_host: more elements than the buffer holds");
    if (count == 0) return;
    cuda_check(cudaMemcpyAsync(data_, host, count * sizeof(T), cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
    cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  void copy_bytes_to_host(void* host) const {
    if (count_ == 0) return;
    cuda_check(cudaMemcpyAsync(host, data_, bytes(), cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
    cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  void release() noexcept {
    // A destructor must not throw. A failed free (the stream destroyed before the buffer, say) leaks the memory;
    // its error is taken back from the runtime's last error, so the next launch check does not report it.
    if (data_ != nullptr && cudaFreeAsync(data_, stream_) != cudaSuccess) cudaGetLastError();
    data_ = nullptr;
    count_ = 0;
  }
  void swap(DeviceBuffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    std::swap(stream_, other.stream_);
  }

  T* data_ = nullptr;
  std::size_t count_ = 0;
  cudaStream_t stream_ = nullptr;
};

// A growable workspace for the two-phase calls: get(bytes) returns at least `bytes` of device memory.
class Workspace {
 public:
  explicit Workspace(cudaStream_t stream = nullptr) : stream_(stream) {}
  void* get(std::size_t bytes) {
    if (bytes > buffer_.size()) buffer_ = DeviceBuffer<unsigned char>(bytes, stream_);
    return buffer_.data();
  }
  std::size_t capacity() const { return buffer_.size(); }

 private:
  cudaStream_t stream_;
  DeviceBuffer<unsigned char> buffer_;
};

// Runs a two-phase op: queries its workspace, provides it from `workspace`, runs it, throws on failure.
// `op(void* d_workspace, std::size_t& bytes)` must return Status.
template <typename Op>
void run_with_workspace(Workspace& workspace, Op&& op) {
  std::size_t bytes = 0;
  throw_if_error(op(nullptr, bytes));
  // A zero-byte query still needs a non-null pointer to mean "run", hence at least one byte.
  void* ptr = workspace.get(bytes > 0 ? bytes : 1);
  throw_if_error(op(ptr, bytes));
}

}  // namespace ragged
