#pragma once
/// \file
/// batch_close_reason: why a batch stopped growing, counted in statistics.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace servekit {

/// Why a decision core closed a batch. Triton's users ask why their batches are small; every
/// batch carries one of these into the statistics. docs/dynamic-batching.md has the timelines.
enum class batch_close_reason : std::uint8_t {
  max_batch_size,       ///< it holds max_batch_size elements (or all the sequence slots)
  preferred_batch_size, ///< it reached a preferred size (or the prefix before passing the largest)
  queue_delay_expired,  ///< the oldest request waited max_queue_delay_microseconds
  shape_mismatch,       ///< the next request's variable dims differ from the batch's first
  queue_drained,        ///< no delay configured: it took everything that was queued
  batch_rule,           ///< the custom batch rule declined the next request
  no_batching,          ///< the default scheduler: one request per execution
  /// It holds fewer than max_batch_size elements, but the next request would not fit: a batch
  /// of 30 of 32 when the next request carries 4. Last, so the others keep their numbers.
  next_request_does_not_fit,
};

inline constexpr std::size_t batch_close_reason_count = 8;

inline constexpr std::array<batch_close_reason, batch_close_reason_count> all_batch_close_reasons{
    batch_close_reason::max_batch_size,      batch_close_reason::preferred_batch_size,
    batch_close_reason::queue_delay_expired, batch_close_reason::shape_mismatch,
    batch_close_reason::queue_drained,       batch_close_reason::batch_rule,
    batch_close_reason::no_batching,         batch_close_reason::next_request_does_not_fit};

[[nodiscard]] constexpr std::string_view to_string(batch_close_reason r) noexcept {
  switch (r) {
  case batch_close_reason::max_batch_size:
    return "max_batch_size";
  case batch_close_reason::preferred_batch_size:
    return "preferred_batch_size";
  case batch_close_reason::queue_delay_expired:
    return "queue_delay_expired";
  case batch_close_reason::shape_mismatch:
    return "shape_mismatch";
  case batch_close_reason::queue_drained:
    return "queue_drained";
  case batch_close_reason::batch_rule:
    return "batch_rule";
  case batch_close_reason::no_batching:
    return "no_batching";
  case batch_close_reason::next_request_does_not_fit:
    return "next_request_does_not_fit";
  }
  return "unknown";
}

} // namespace servekit
