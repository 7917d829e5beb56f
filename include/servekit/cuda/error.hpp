#pragma once
/// \file
/// CUDA errors as servekit values: a `status` naming the failed call, or a `cuda_error` exception
/// for constructors (which have no status to return).

#include <servekit/core/status.hpp>

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace servekit::cuda {

/// The status of a CUDA runtime call: ok for cudaSuccess, else "CUDA call 'CALL' failed:
/// cudaErrorX (description)". The code says what a client can do about it: out of memory is
/// resource_exhausted (retry later, smaller batch), a missing or unusable device or driver is
/// unavailable, anything else is a bug or a broken device, so internal.
[[nodiscard]] inline status to_status(cudaError_t err, std::string_view call) {
  if (err == cudaSuccess) {
    return ok_status();
  }
  std::string message = "CUDA call '";
  message += call;
  message += "' failed: ";
  message += cudaGetErrorName(err);
  message += " (";
  message += cudaGetErrorString(err);
  message += ')';
  switch (err) {
  case cudaErrorMemoryAllocation:
    return resource_exhausted(std::move(message));
  case cudaErrorNoDevice:
  case cudaErrorInsufficientDriver:
  case cudaErrorDevicesUnavailable:
    return unavailable(std::move(message));
  default:
    return internal_error(std::move(message));
  }
}

/// Thrown where a status cannot be returned (constructors, allocators); carries the status so a
/// caller that catches it can still answer with the right code.
class cuda_error : public std::runtime_error {
public:
  explicit cuda_error(servekit::status error)
      : std::runtime_error{error.message()}, error_{std::move(error)} {}

  [[nodiscard]] const servekit::status& error() const noexcept { return error_; }

private:
  servekit::status error_;
};

/// Throws cuda_error unless `err` is cudaSuccess; `call` names the call in the message.
inline void throw_on_error(cudaError_t err, std::string_view call) {
  if (err != cudaSuccess) {
    throw cuda_error{to_status(err, call)};
  }
}

} // namespace servekit::cuda

/// Runs a CUDA call and throws servekit::cuda::cuda_error, naming the call, if it fails.
#define SERVEKIT_CUDA_THROW(call) ::servekit::cuda::throw_on_error((call), #call)

/// Runs a CUDA call and, if it fails, returns its status (naming the call) from the enclosing
/// function, which must return servekit::status.
#define SERVEKIT_CUDA_RETURN(call)                                                                 \
  do {                                                                                             \
    if (const cudaError_t servekit_cuda_result = (call); servekit_cuda_result != cudaSuccess) {    \
      return ::servekit::cuda::to_status(servekit_cuda_result, #call);                             \
    }                                                                                              \
  } while (false)
