#pragma once
/// \file
/// Triton's `dynamic_batching` settings, and the checks Triton applies to them at load.

#include <servekit/core/config_error.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/queue/queue_policy.hpp>
#include <servekit/schedule/adaptive_batching_options.hpp>

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
  /// servekit extension: the objective and bounds of adaptive batching, read by
  /// `dynamic_batcher<adaptive<...>>` (which then ignores the delay and preferred sizes above).
  adaptive_batching_options adaptive;

  friend bool operator==(const dynamic_batching_options&,
                         const dynamic_batching_options&) = default;
};

/// Throws config_error (with the JSON pointer of the field) when `o` breaks one of Triton's
/// rules for a model whose max_batch_size is `max_batch_size`.
SERVEKIT_DECL void validate(const dynamic_batching_options& o, std::int32_t max_batch_size);

} // namespace servekit

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/schedule/impl/dynamic_batching_options.ipp>
#endif
