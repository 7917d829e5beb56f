#pragma once
/// \file
/// Definitions for servekit/schedule/dynamic_batching_options.hpp. Compiled once into
/// servekit::servekit, or included by its header with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/schedule/dynamic_batching_options.hpp>

namespace servekit {

SERVEKIT_DECL void validate(const dynamic_batching_options& o, std::int32_t max_batch_size) {
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
  const auto& a = o.adaptive;
  if (!(a.target_percentile > 0.0F && a.target_percentile <= 100.0F)) {
    throw config_error(config_error_code::bad_value, base + "/adaptive/target_percentile",
                       "adaptive batching's target percentile must be in (0, 100], got " +
                           std::to_string(a.target_percentile));
  }
  if (a.rate_window_microseconds == 0) {
    throw config_error(config_error_code::bad_value, base + "/adaptive/rate_window_microseconds",
                       "adaptive batching's rate window must be positive");
  }
  if (a.deadline_admission && a.target_latency_microseconds == 0) {
    throw config_error(config_error_code::bad_value, base + "/adaptive/deadline_admission",
                       "deadline admission needs an objective: set target_latency_microseconds");
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
