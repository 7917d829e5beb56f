#pragma once
/// \file
/// cuBLAS for a backend instance: errors as servekit statuses, and an owned handle bound to the
/// instance's stream with a workspace of its own.

#include <servekit/core/status.hpp>
#include <servekit/cuda/device.hpp>
#include <servekit/cuda/error.hpp>
#include <servekit/cuda/memory.hpp>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace cuda_examples {

/// The status of a cuBLAS call, worded like servekit::cuda::to_status: ok for success, else
/// "cuBLAS call 'CALL' failed: CUBLAS_STATUS_X (description)". Out of memory is
/// resource_exhausted, an uninitialised library (no device, no driver) unavailable, anything
/// else internal.
[[nodiscard]] inline servekit::status to_status(cublasStatus_t err, std::string_view call) {
  if (err == CUBLAS_STATUS_SUCCESS) {
    return servekit::ok_status();
  }
  std::string message = "cuBLAS call '";
  message += call;
  message += "' failed: ";
  message += cublasGetStatusName(err);
  message += " (";
  message += cublasGetStatusString(err);
  message += ')';
  switch (err) {
  case CUBLAS_STATUS_ALLOC_FAILED:
    return servekit::resource_exhausted(std::move(message));
  case CUBLAS_STATUS_NOT_INITIALIZED:
    return servekit::unavailable(std::move(message));
  default:
    return servekit::internal_error(std::move(message));
  }
}

/// Throws servekit::cuda::cuda_error (the one exception type of servekit::cuda) on failure.
inline void throw_on_error(cublasStatus_t err, std::string_view call) {
  if (err != CUBLAS_STATUS_SUCCESS) {
    throw servekit::cuda::cuda_error{to_status(err, call)};
  }
}

/// An owned cuBLAS handle that runs on one stream with a workspace it owns.
///
/// Why the workspace: without one, cuBLAS takes scratch memory from its own pool as it sees fit,
/// and a CUDA graph capture that triggers an allocation fails (or, in older releases, leaks a
/// workspace per captured graph). A workspace set up front makes every GEMM allocation-free, in
/// capture and out. cublasSetStream resets the workspace to the default pool, so it is set
/// after the stream, once, here.
class cublas_handle {
public:
  /// cuBLAS's recommended workspace for Hopper (32 MiB); older GPUs want 4 MiB, so this covers
  /// every device.
  static constexpr std::size_t workspace_bytes = std::size_t{32} << 20U;

  /// Creates the handle on `device` (cuBLAS binds a handle to the device current at creation),
  /// binds it to `stream`, a stream of that device, and gives it its workspace. Throws
  /// cuda_error.
  cublas_handle(int device, cudaStream_t stream)
      : workspace_{servekit::cuda::allocate_device(device, workspace_bytes)}, device_{device} {
    const servekit::cuda::device_guard on{device};
    throw_on_error(cublasCreate(&handle_), "cublasCreate");
    try {
      throw_on_error(cublasSetStream(handle_, stream), "cublasSetStream");
      throw_on_error(cublasSetWorkspace(handle_, workspace_.data(), workspace_.size()),
                     "cublasSetWorkspace");
    } catch (...) {
      static_cast<void>(cublasDestroy(handle_));
      throw;
    }
  }
  cublas_handle(const cublas_handle&) = delete;
  cublas_handle& operator=(const cublas_handle&) = delete;
  /// Destroys the handle before the workspace it uses (members die after the body), on its own
  /// device: cublasDestroy frees and synchronises on the current one, and a model may be
  /// unloaded from any thread with any device current.
  ~cublas_handle() {
    int previous = 0;
    const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != device_ &&
                          cudaSetDevice(device_) == cudaSuccess;
    static_cast<void>(cublasDestroy(handle_));
    if (switched) {
      static_cast<void>(cudaSetDevice(previous));
    }
  }

  [[nodiscard]] cublasHandle_t get() const noexcept { return handle_; }

private:
  servekit::buffer workspace_;
  int device_ = 0;
  cublasHandle_t handle_ = nullptr;
};

} // namespace cuda_examples
