#pragma once
/// \file
/// infer() and infer_sync(): `submit` as a future, or as a call that waits for the final response.
/// Shared by models, ensembles and model_ref.

#include <servekit/core/clock.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/response_sink.hpp>
#include <servekit/core/status.hpp>
#include <servekit/runtime/detail/cpu_relax.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <utility>

namespace servekit {

/// How long infer_sync() watches for its response before the caller sleeps. A response that
/// comes within it costs the caller no futex wake-up, which on a virtual machine is 25-30 us
/// (docs/benchmarks.md, pingpong): longer than a small model's whole execute. One wake-up's worth
/// of spinning per call is what a blocking caller can afford; a slower response then costs the
/// caller the wake-up it would have cost anyway.
inline constexpr duration sync_response_spin = std::chrono::microseconds{50};

namespace detail {

/// `self.submit(r, sink)` with the final response as a future; a rejected request's future holds
/// the failed response.
template <class Servable>
[[nodiscard]] std::future<response> infer_with(Servable& self, request&& r) {
  auto promise = std::make_shared<std::promise<response>>();
  std::future<response> future = promise->get_future();
  std::string id = r.id;
  status s = self.submit(std::move(r), [promise](response&& out) {
    if (out.final) {
      promise->set_value(std::move(out));
    }
  });
  if (!s.ok()) {
    promise->set_value(response::failure(std::move(s), std::move(id)));
  }
  return future;
}

/// `self.submit_here(r, sink)` where the servable has it (model<>: execute on this thread when it
/// can), else `self.submit(r, sink)`.
template <class Servable>
[[nodiscard]] status submit_here_or_submit(Servable& self, request&& r, response_sink sink) {
  if constexpr (requires { self.submit_here(std::move(r), std::move(sink)); }) {
    return self.submit_here(std::move(r), std::move(sink));
  } else {
    return self.submit(std::move(r), std::move(sink));
  }
}

/// Where a synchronous caller's final response lands: on the caller's stack, so a call allocates
/// nothing beyond what submit does. The instance thread moves the response in, then publishes it
/// with a release store; the caller reads it after an acquire load.
struct sync_slot {
  response value;
  std::atomic<std::uint32_t> ready{0};

  void deliver(response&& out) {
    value = std::move(out);
    ready.store(1, std::memory_order_release);
    // notify_one touches only the address (a futex wake), never the object, so the caller may
    // return and free the slot the moment it sees `ready`.
    ready.notify_one();
  }

  /// Watches for the response for `spin` (spin_until), then sleeps until it is there.
  void wait(duration spin) {
    const auto delivered = [this] { return ready.load(std::memory_order_acquire) != 0; };
    if (delivered()) {
      return; // answered on this thread (submit_here) or already: no clock read
    }
    if (!spin_until(clock::now() + spin, delivered)) {
      ready.wait(0, std::memory_order_acquire); // returns once `ready` is no longer 0
    }
  }
};

/// `self.submit(r, sink)` (`submit_here` where the servable has it), then waits for the final
/// response (partial responses of a decoupled model are dropped, as infer_with's future drops
/// them); a rejected request returns the failed response.
template <class Servable>
[[nodiscard]] response infer_sync_with(Servable& self, request&& r, duration spin) {
  sync_slot slot;
  std::string id = r.id;
  auto sink = [&slot](response&& out) {
    if (out.final) {
      slot.deliver(std::move(out));
    }
  };
  // A servable that can execute on this thread (model<>'s submit_here) does: this thread would
  // only wait otherwise, and the two hand-offs between threads cost more than a small model runs.
  status s = submit_here_or_submit(self, std::move(r), sink);
  if (!s.ok()) {
    return response::failure(std::move(s), std::move(id));
  }
  slot.wait(spin);
  return std::move(slot.value);
}

} // namespace detail
} // namespace servekit
