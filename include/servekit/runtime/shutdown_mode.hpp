#pragma once
/// \file
/// shutdown_mode: what a model (or an ensemble) does with accepted work when it shuts down.

#include <cstdint>
#include <string_view>

namespace servekit {

/// How `shutdown` treats requests still queued.
enum class shutdown_mode : std::uint8_t {
  drain,  ///< execute everything already accepted, then stop
  cancel, ///< answer every queued request with `cancelled`; batches already running finish
  /// A server's shutdown past its exit timeout: answer every queued request, and every response
  /// a decoupled model still owes, with `unavailable` "server is shutting down" (the message
  /// below); batches already running finish (model_repository::shutdown_models bounds the wait
  /// for a backend that never returns).
  abort,
};

/// What `shutdown_mode::abort` answers.
inline constexpr std::string_view shutting_down_message = "server is shutting down";

} // namespace servekit
