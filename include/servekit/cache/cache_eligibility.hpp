#pragma once
/// \file
/// check_response_cache_allowed: Triton's rule for which models may use the response cache,
/// shared by the config reader, model<> and the ensembles so the three refuse alike.

#include <servekit/core/config_error.hpp>

#include <string>
#include <string_view>

namespace servekit {

/// Refuses `response_cache { enable: true }` where a cached response would be wrong: on a
/// decoupled model (a request may get several responses) and under sequence batching (a
/// response depends on the sequence's earlier requests). Throws config_error at
/// "/response_cache/enable" with Triton's message.
inline void check_response_cache_allowed(std::string_view model, bool decoupled,
                                         bool sequence_batching) {
  const auto refuse = [model](std::string_view what) {
    throw config_error(config_error_code::bad_value, "/response_cache/enable",
                       "Response Cache does not currently support model " + std::string{model} +
                           " with " + std::string{what});
  };
  if (decoupled) {
    refuse("'decoupled' transaction policy");
  }
  if (sequence_batching) {
    refuse("sequence batching scheduler");
  }
}

} // namespace servekit
