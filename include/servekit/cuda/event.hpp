#pragma once
/// \file
/// event: an owned CUDA event, for ordering work across streams and timing it on the device.

#include <servekit/core/assert.hpp>
#include <servekit/core/status.hpp>
#include <servekit/cuda/device.hpp>
#include <servekit/cuda/error.hpp>

#include <cuda_runtime_api.h>

#include <utility>

namespace servekit::cuda {

/// An event on one device, destroyed with the object. Record it only on streams of that device.
class event {
public:
  /// `flags` as cudaEventCreateWithFlags takes them: cudaEventDefault keeps timing (elapsed_ms);
  /// cudaEventDisableTiming makes a cheaper event for pure ordering. Throws cuda_error.
  explicit event(int device, unsigned flags = cudaEventDefault) {
    const device_guard on{device};
    SERVEKIT_CUDA_THROW(cudaEventCreateWithFlags(&handle_, flags));
  }
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  event(event&& other) noexcept : handle_{std::exchange(other.handle_, nullptr)} {}
  event& operator=(event&& other) noexcept {
    if (this != &other) {
      destroy();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  ~event() { destroy(); }

  /// The handle, for CUDA calls (asserts the event was not moved from).
  [[nodiscard]] cudaEvent_t get() const noexcept {
    SERVEKIT_ASSERT(handle_ != nullptr, "use of a moved-from event");
    return handle_;
  }

  /// Marks the point in `s` reached by the work queued so far.
  [[nodiscard]] status record(cudaStream_t s) {
    SERVEKIT_CUDA_RETURN(cudaEventRecord(get(), s));
    return ok_status();
  }

  /// Blocks until the work before the recorded point has finished.
  [[nodiscard]] status synchronize() const {
    SERVEKIT_CUDA_RETURN(cudaEventSynchronize(get()));
    return ok_status();
  }

  /// Device time between two recorded events, in milliseconds (about 0.5 µs resolution), into
  /// `ms`. Both must have completed and have timing enabled.
  [[nodiscard]] static status elapsed_ms(const event& start, const event& end, float& ms) {
    SERVEKIT_CUDA_RETURN(cudaEventElapsedTime(&ms, start.get(), end.get()));
    return ok_status();
  }

private:
  void destroy() noexcept {
    // Safe while recorded work is pending: the resources are released once it completes.
    if (handle_ != nullptr) {
      static_cast<void>(cudaEventDestroy(handle_));
      handle_ = nullptr;
    }
  }

  cudaEvent_t handle_ = nullptr;
};

} // namespace servekit::cuda
