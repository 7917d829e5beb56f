#pragma once
/// \file
/// drain_state: whether this server is leaving its pool. One object is shared by the HTTP and
/// gRPC front ends of a process. From begin() on, readiness (`/v2/health/ready`, gRPC
/// ServerReady) is false, so a load balancer's health check takes the replica out, while
/// requests are still answered for the grace period; a request that would start a new sequence
/// is refused (`unavailable`, naming the reason), since the sequence could not finish here and
/// a proxy may retry it on another replica, and so is a request of a sequence this replica does
/// not hold (redirect()), which the proxy then retries on the replica that started it. After the
/// grace period the server stops accepting and drains as on stop() (docs/scale-out.md).

#include <servekit/core/request.hpp>
#include <servekit/core/status.hpp>
#include <servekit/schedule/sequence_errors.hpp>

#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <string>

namespace servekit::http {

class drain_state {
public:
  /// Starts draining because of `reason` ("SIGTERM", "POST /v2/admin/drain"). True for the
  /// call that started it; later calls change nothing.
  bool begin(std::string reason) {
    const std::lock_guard lock{mutex_};
    if (draining_.load(std::memory_order_relaxed)) {
      return false;
    }
    reason_ = std::move(reason);
    draining_.store(true, std::memory_order_release);
    return true;
  }

  /// Whether begin() was called: one atomic load, on every request.
  [[nodiscard]] bool draining() const noexcept { return draining_.load(std::memory_order_acquire); }

  /// What began the drain ("" before).
  [[nodiscard]] std::string reason() const {
    const std::lock_guard lock{mutex_};
    return reason_;
  }

  /// Ok unless draining and `r` would start a sequence: then `unavailable` saying why, for the
  /// client (or a proxy's retry) to start it on another replica.
  [[nodiscard]] status admit(const request& r, std::string_view model) const {
    if (!draining() || !r.sequence_start) {
      return {};
    }
    return unavailable(fmt::format("the server is draining ({}): model '{}' starts no new "
                                   "sequence here (sequence {}); start it on another replica",
                                   reason(), model, r.sequence_id.to_string()));
  }

  /// While draining, the sequence batcher's refusal of a request whose sequence is not open
  /// here becomes `unavailable` saying so: it belongs to a sequence another replica started
  /// (because this one refused its START) that a proxy's hash still sends here, and the proxy
  /// retries it on that replica. Any other status is returned unchanged.
  [[nodiscard]] status redirect(status s) const {
    if (!draining() || !is_missing_start(s)) {
      return s;
    }
    return unavailable(fmt::format("the server is draining ({}): {}; send it to the replica "
                                   "that holds the sequence",
                                   reason(), s.message()));
  }

private:
  mutable std::mutex mutex_;
  std::atomic<bool> draining_{false};
  std::string reason_;
};

} // namespace servekit::http
