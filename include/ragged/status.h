// ragged::Status: the result of every low-level call, and ragged::Error, the exception that the owning layer
// throws. Low-level calls never throw and never exit; when they fail they also leave a message naming the bad
// argument in a thread-local slot, read with last_error_message().
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace ragged {

enum class Status : int {
  kSuccess = 0,
  kInvalidArgument = 1,     // an argument is out of its documented range
  kNullPointer = 2,         // a null pointer where a non-zero size needs memory
  kInvalidOffsets = 3,      // offsets[0] != 0, decreasing, or offsets[batch] != nnz / beyond capacity
  kNegativeLength = 4,      // a sequence length below zero
  kSizeOverflow = 5,        // a size that does not fit the offset type (or size_t)
  kUnsupportedDType = 6,    // the op has no kernel for this element type
  kUnsupportedShape = 7,    // the op has no kernel for this shape (inner size, head dim, ...)
  kWorkspaceTooSmall = 8,   // the caller's workspace is smaller than the query returned
  kCudaError = 9,           // a CUDA runtime call or launch failed; the message holds cudaGetErrorString
  kNoDevice = 10,           // no CUDA device is visible
};

// A short constant name, e.g. "invalid offsets".
const char* status_string(Status status);

// The message of the most recent failure on this thread ("" if none). Valid until the next failing call.
const char* last_error_message();

// Records `message` as this thread's last error and returns `status`: `return fail(Status::kX, "...")`. The
// library's own symbol takes a C string, so that no std::string crosses it: a consumer built with the other
// libstdc++ string ABI (-D_GLIBCXX_USE_CXX11_ABI=0) links against it all the same.
Status fail(Status status, const char* message);
inline Status fail(Status status, const std::string& message) { return fail(status, message.c_str()); }

// Turns a CUDA error into kCudaError (kNoDevice for cudaErrorNoDevice / cudaErrorInsufficientDriver) with a
// message naming `what`; kSuccess for cudaSuccess. A failure also clears the runtime's last error
// (cudaGetLastError), so that a later launch check does not report the same error again.
Status from_cuda(cudaError_t error, const char* what);

// Thrown by the owning convenience layer.
class Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message)
      : std::runtime_error(std::string(status_string(status)) + ": " + message), status_(status) {}
  Status status() const noexcept { return status_; }

 private:
  Status status_;
};

// Throws ragged::Error carrying last_error_message() when `status` is not kSuccess.
void throw_if_error(Status status);

}  // namespace ragged
