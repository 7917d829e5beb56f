#pragma once
/// \file
/// Queue policies: Triton's ModelQueuePolicy and the priority-level settings that use it.

#include <cstdint>
#include <map>

namespace servekit {

/// What happens to a request whose queue timeout expired (Triton's TimeoutAction).
enum class timeout_action : std::uint8_t {
  reject, ///< fail it with `unavailable` "Request timeout expired"
  delay,  ///< move it behind every unexpired request of its level; never dropped
};

/// One priority level's queue rules, with Triton's field names and defaults.
struct queue_policy {
  servekit::timeout_action timeout_action = timeout_action::reject;
  /// Queue timeout measured from submit; 0 means none.
  std::uint64_t default_timeout_microseconds = 0;
  /// If true, a request's own `timeout_us` may lower (never raise) a non-zero default.
  bool allow_timeout_override = false;
  /// Requests this level may hold (queued or delayed); 0 means unbounded.
  std::uint32_t max_queue_size = 0;

  /// Whether requests of this level can ever expire.
  [[nodiscard]] constexpr bool has_timeouts() const noexcept {
    return default_timeout_microseconds != 0;
  }
  friend bool operator==(const queue_policy&, const queue_policy&) = default;
};

/// Priority levels and the policy of each (part of Triton's dynamic_batching message).
struct priority_options {
  /// 0: one queue. N: levels 1..N, 1 served first; FIFO within a level.
  std::uint64_t priority_levels = 0;
  /// The level of requests with priority 0 or above priority_levels; in [1, N] when N != 0.
  std::uint64_t default_priority_level = 0;
  /// Policy of the single queue, and of every level without an entry below.
  queue_policy default_queue_policy;
  /// Per-level policies, keyed by level in [1, N].
  std::map<std::uint64_t, queue_policy> priority_queue_policy;

  friend bool operator==(const priority_options&, const priority_options&) = default;
};

} // namespace servekit
