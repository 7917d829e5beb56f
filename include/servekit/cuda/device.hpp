#pragma once
/// \file
/// Device discovery and the current-device guard.

#include <servekit/cuda/error.hpp>

#include <cuda_runtime_api.h>

#include <string>

namespace servekit::cuda {

/// The number of visible CUDA devices; 0 when there is none or no usable driver. Never throws, so
/// a server (and every GPU test) can ask it first on any machine and take its CPU path.
[[nodiscard]] inline int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    // The failure is also left as this thread's last error; clear it so that a later, unrelated
    // cudaGetLastError does not report it. (Without any driver the runtime's failure to start is
    // sticky: every call, this one included, reports it again; nothing else can run then.)
    static_cast<void>(cudaGetLastError());
    return 0;
  }
  return count;
}

/// The device's product name ("NVIDIA H100 80GB HBM3"). Throws cuda_error.
[[nodiscard]] inline std::string device_name(int device) {
  cudaDeviceProp properties{};
  SERVEKIT_CUDA_THROW(cudaGetDeviceProperties(&properties, device));
  return properties.name;
}

/// Makes `device` current for this thread for the guard's lifetime. The current device is
/// per-thread state that every allocation and stream creation reads, so code that runs on an
/// instance's thread sets it here rather than assuming what the thread last used.
class device_guard {
public:
  /// Throws cuda_error if the device cannot be made current.
  explicit device_guard(int device) {
    SERVEKIT_CUDA_THROW(cudaGetDevice(&previous_));
    if (device != previous_) {
      SERVEKIT_CUDA_THROW(cudaSetDevice(device));
      restore_ = true;
    }
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;
  /// Restores the previous device (errors ignored: a destructor cannot report them, and the
  /// device was current a moment ago).
  ~device_guard() {
    if (restore_) {
      static_cast<void>(cudaSetDevice(previous_));
    }
  }

private:
  int previous_ = 0;
  bool restore_ = false;
};

} // namespace servekit::cuda
