#pragma once
/// \file
/// shutdown_mode: what a model (or an ensemble) does with accepted work when it shuts down.

#include <cstdint>

namespace servekit {

/// How `shutdown` treats requests still queued.
enum class shutdown_mode : std::uint8_t {
  drain,  ///< execute everything already accepted, then stop
  cancel, ///< answer every queued request with `cancelled`; batches already running finish
};

} // namespace servekit
