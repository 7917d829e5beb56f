#pragma once
/// \file
/// Triton's `dynamic_batching` settings, and the checks Triton applies to them at load.

#include <servekit/core/config_error.hpp>
#include <servekit/queue/queue_policy.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace servekit {

/// The `dynamic_batching` message of a Triton model config, field for field.
struct dynamic_batching_options {
  /// Sizes to send at once when reached; empty means [max_batch_size].
  std::vector<std::int32_t> preferred_batch_size;
  /// How long the oldest request of a batch may wait for more; 0: never wait.
  std::uint64_t max_queue_delay_microseconds = 0;
  /// Send responses in the order requests left the queue.
  bool preserve_ordering = false;
  /// Priority levels and queue policies.
  priority_options priority;

  friend bool operator==(const dynamic_batching_options&,
                         const dynamic_batching_options&) = default;
};

/// Throws config_error (with the JSON pointer of the field) when `o` breaks one of Triton's
/// rules for a model whose max_batch_size is `max_batch_size`.
inline void validate(const dynamic_batching_options& o, std::int32_t max_batch_size) {
  const std::string base = "/dynamic_batching";
  for (std::size_t i = 0; i < o.preferred_batch_size.size(); ++i) {
    const auto size = o.preferred_batch_size[i];
    const std::string path = base + "/preferred_batch_size/" + std::to_string(i);
    if (size <= 0) {
      throw config_error(config_error_code::bad_value, path,
                         "dynamic batching preferred size must be positive");
    }
    if (size > std::max(max_batch_size, std::int32_t{1})) {
      throw config_error(config_error_code::bad_value, path,
                         "dynamic batching preferred size must be <= max batch size (" +
                             std::to_string(max_batch_size) + ")");
    }
  }
  const auto& p = o.priority;
  if (p.priority_levels != 0 &&
      (p.default_priority_level < 1 || p.default_priority_level > p.priority_levels)) {
    throw config_error(config_error_code::bad_value, base + "/default_priority_level",
                       "default priority level must be in range [1, " +
                           std::to_string(p.priority_levels) + "]");
  }
  if (p.priority_levels == 0 && p.default_priority_level != 0) {
    throw config_error(config_error_code::bad_value, base + "/default_priority_level",
                       "default priority level needs priority_levels > 0");
  }
  for (const auto& [level, policy] : p.priority_queue_policy) {
    if (level < 1 || level > p.priority_levels) {
      throw config_error(config_error_code::bad_value,
                         base + "/priority_queue_policy/" + std::to_string(level),
                         "priority queue policy must have priority level in range [1, " +
                             std::to_string(p.priority_levels) + "]");
    }
  }
  if (o.preserve_ordering) {
    if (p.priority_levels > 1) {
      throw config_error(config_error_code::bad_value, base + "/preserve_ordering",
                         "preserve_ordering cannot be combined with priority_levels > 1");
    }
    const auto delays = [](const queue_policy& q) {
      return q.timeout_action == timeout_action::delay && q.default_timeout_microseconds != 0;
    };
    bool delaying = delays(p.default_queue_policy);
    for (const auto& [level, policy] : p.priority_queue_policy) {
      delaying = delaying || delays(policy);
    }
    if (delaying) {
      throw config_error(config_error_code::bad_value, base + "/preserve_ordering",
                         "preserve_ordering cannot be combined with a DELAY timeout action "
                         "that has a non-zero default timeout");
    }
  }
}

} // namespace servekit
