#pragma once
/// \file
/// The sequence batcher's refusal of a request whose sequence is not open here, made and
/// recognised in one place: a draining server (http/drain.hpp) turns it into `unavailable`, so
/// that a proxy retries the request on the replica that holds the sequence.

#include <servekit/core/request.hpp>
#include <servekit/core/status.hpp>

#include <string>
#include <string_view>

namespace servekit {

/// Triton's words for a request of a sequence that is not open (no START yet, or after END).
inline constexpr std::string_view missing_start_text =
    "must specify the START flag on the first request of the sequence";

/// The sequence batcher's refusal of sequence `id`'s request to `model` (invalid_argument).
[[nodiscard]] inline status missing_start(const correlation_id& id, std::string_view model) {
  return invalid_argument("inference request for sequence " + id.to_string() + " to model '" +
                          std::string{model} + "' " + std::string{missing_start_text});
}

/// Whether `s` is that refusal.
[[nodiscard]] inline bool is_missing_start(const status& s) {
  return s.code() == status_code::invalid_argument &&
         s.message().find(missing_start_text) != std::string::npos;
}

} // namespace servekit
