// Status names, the thread-local last-error message and the CUDA error bridge.
#include "ragged/status.h"

#include <cstdio>

#include "ragged/check.h"

namespace ragged {
namespace {
thread_local std::string g_last_error;
}

const char* status_string(Status status) {
  switch (status) {
    case Status::kSuccess: return "success";
    case Status::kInvalidArgument: return "invalid argument";
    case Status::kNullPointer: return "null pointer";
    case Status::kInvalidOffsets: return "invalid offsets";
    case Status::kNegativeLength: return "negative length";
    case Status::kSizeOverflow: return "size overflow";
    case Status::kUnsupportedDType: return "unsupported dtype";
    case Status::kUnsupportedShape: return "unsupported shape";
    case Status::kWorkspaceTooSmall: return "workspace too small";
    case Status::kCudaError: return "CUDA error";
    case Status::kNoDevice: return "no CUDA device";
  }
  return "unknown status";
}

const char* last_error_message() { return g_last_error.c_str(); }

Status fail(Status status, const char* message) {
  g_last_error = message != nullptr ? message : "";
  return status;
}

Status from_cuda(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::kSuccess;
  // The runtime also keeps a failed call's error as the thread's last error, which the next op's launch check
  // (cudaGetLastError) would then report as its own kernel's failure. The Status below reports it, so it is taken
  // back here. A sticky error (a fault in a kernel) stays in the context whatever this does.
  cudaGetLastError();
  // No usable device (none visible, or no driver that can run this runtime): a state of the machine that a
  // caller may want to tell apart from a failing call.
  const bool no_device = error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver;
  return fail(no_device ? Status::kNoDevice : Status::kCudaError,
              std::string(what) + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")");
}

void throw_if_error(Status status) {
  if (status != Status::kSuccess) throw Error(status, last_error_message());
}

}  // namespace ragged
