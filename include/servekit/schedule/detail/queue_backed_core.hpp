#pragma once
/// \file
/// What a batch core over one request_queue tells the shells about its queue (priority levels,
/// their size limits and timeouts), written once for the dynamic and the adaptive batch cores.

#include <servekit/core/clock.hpp>
#include <servekit/core/request.hpp>
#include <servekit/queue/queue_policy.hpp>
#include <servekit/queue/request_queue.hpp>

#include <cstdint>

namespace servekit::detail {

/// The queue-facing members of the scheduler_core concept (schedule/scheduler.hpp) for a core
/// that keeps its requests in one request_queue. A base, not a member: the core's own
/// members use `queue_` directly, and the shells call these as the core's.
class queue_backed_core {
public:
  [[nodiscard]] std::uint32_t level_of(const request& r) const noexcept {
    return queue_.level_of(r.priority);
  }
  [[nodiscard]] std::uint32_t max_queue_size(std::uint32_t level) const noexcept {
    return queue_.policy(level).max_queue_size;
  }
  [[nodiscard]] time_point deadline_of(const request& r) const noexcept {
    const std::uint64_t timeout = queue_.timeout_us(r, queue_.level_of(r.priority));
    return timeout == 0 ? never : deadline_after(r.arrival, timeout);
  }
  [[nodiscard]] bool has_room(std::uint32_t level) const noexcept { return queue_.has_room(level); }
  [[nodiscard]] const request_queue& queue() const noexcept { return queue_; }

protected:
  explicit queue_backed_core(const priority_options& priority) : queue_{priority} {}

  request_queue queue_;
};

} // namespace servekit::detail
