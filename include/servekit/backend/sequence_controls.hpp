#pragma once
/// \file
/// What the sequence batcher tells a backend about each batch entry, and about sequences that
/// end without an END request.

#include <servekit/core/request.hpp>

#include <concepts>
#include <cstdint>
#include <string_view>

namespace servekit {

/// The control values of one batch entry under the sequence batcher: the values Triton writes
/// into the CONTROL_SEQUENCE_* inputs, as plain fields. Padding entries (direct strategy: a slot
/// with nothing ready) have `ready == false` and every other flag false.
struct sequence_controls {
  bool start = false; ///< the request starts its sequence (the state was initialised)
  bool end = false;   ///< the request ends its sequence
  bool ready = false; ///< the entry holds a request (false: padding, ignore it)
  /// The entry's batch slot (direct) or candidate index (oldest) within the instance. A
  /// sequence keeps its slot from START to END.
  std::uint32_t slot = 0;
  friend bool operator==(const sequence_controls&, const sequence_controls&) = default;
};

/// Why a sequence left its slot without an END request having executed.
enum class sequence_end_reason : std::uint8_t {
  end,          ///< its END request executed
  idle_timeout, ///< no request for max_sequence_idle_microseconds
  cancelled,    ///< a queued request of it was cancelled
  shutdown,     ///< the model shut down while the sequence was open
};

[[nodiscard]] constexpr std::string_view to_string(sequence_end_reason r) noexcept {
  switch (r) {
  case sequence_end_reason::end:
    return "end";
  case sequence_end_reason::idle_timeout:
    return "idle_timeout";
  case sequence_end_reason::cancelled:
    return "cancelled";
  case sequence_end_reason::shutdown:
    return "shutdown";
  }
  return "unknown";
}

/// A sequence that left its slot: the argument of a backend's optional hook
///
///     void sequence_ended(const servekit::sequence_end& e);
///
/// called on the instance's thread once per sequence that executed at least one request,
/// whatever ended it (Triton tells the backend nothing when it reaps a sequence; per-sequence
/// resources a backend keeps can be freed here).
struct sequence_end {
  correlation_id id;
  std::uint32_t slot = 0;
  sequence_end_reason reason = sequence_end_reason::end;
};

/// Whether backend `B` has the `sequence_ended` hook.
template <class B>
concept has_sequence_end_hook = requires(B& b, const sequence_end& e) {
  b.sequence_ended(e);
};

} // namespace servekit
