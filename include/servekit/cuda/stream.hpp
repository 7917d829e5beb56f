#pragma once
/// \file
/// stream: an owned CUDA stream on one device.

#include <servekit/core/assert.hpp>
#include <servekit/core/status.hpp>
#include <servekit/cuda/device.hpp>
#include <servekit/cuda/error.hpp>

#include <cuda_runtime_api.h>

#include <utility>

namespace servekit::cuda {

/// A non-blocking stream on one device, destroyed with the object. Each backend instance owns
/// one, so the copies and kernels of different instances overlap. Non-blocking means no implicit
/// synchronisation with the legacy default stream: a library elsewhere in the process that uses
/// stream 0 cannot stall servekit's work (and the stream can be captured into CUDA graphs, which
/// the legacy default stream cannot).
class stream {
public:
  /// Throws cuda_error.
  explicit stream(int device) : device_{device} {
    const device_guard on{device};
    SERVEKIT_CUDA_THROW(cudaStreamCreateWithFlags(&handle_, cudaStreamNonBlocking));
  }
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  stream(stream&& other) noexcept
      : handle_{std::exchange(other.handle_, nullptr)}, device_{other.device_} {}
  stream& operator=(stream&& other) noexcept {
    if (this != &other) {
      destroy();
      handle_ = std::exchange(other.handle_, nullptr);
      device_ = other.device_;
    }
    return *this;
  }
  ~stream() { destroy(); }

  /// The handle, for CUDA calls. A moved-from stream has none (nullptr would silently mean the
  /// legacy default stream, hence the assertion).
  [[nodiscard]] cudaStream_t get() const noexcept {
    SERVEKIT_ASSERT(handle_ != nullptr, "use of a moved-from stream");
    return handle_;
  }
  [[nodiscard]] int device() const noexcept { return device_; }

  /// Blocks until all work queued so far has finished; the status of the first failed work.
  [[nodiscard]] status synchronize() const {
    SERVEKIT_CUDA_RETURN(cudaStreamSynchronize(get()));
    return ok_status();
  }

private:
  void destroy() noexcept {
    // Queued work still completes: cudaStreamDestroy returns at once and releases the stream's
    // resources when the device is done with it.
    if (handle_ != nullptr) {
      static_cast<void>(cudaStreamDestroy(handle_));
      handle_ = nullptr;
    }
  }

  cudaStream_t handle_ = nullptr;
  int device_;
};

} // namespace servekit::cuda
