#pragma once
/// \file
/// parse_json_body: nlohmann's parse of a request body with a nesting limit, every failure an
/// invalid_argument naming what is wrong. The bodies the front end parses into nlohmann values
/// (generate, generate_stream, the repository endpoints) go through it: a client's body must
/// never reach code whose recursion only the stack bounds, and no parse failure (a syntax error,
/// a number out of range such as 1e400) may surface as an internal error.

#include <servekit/core/status.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace servekit::http::detail {

/// The nesting limit of every JSON body nlohmann parses: the /infer reader's (json_reader's
/// max_depth), so a body is as deep as either path allows.
inline constexpr std::size_t max_json_body_depth = 512;

/// nlohmann's message without its "[json.exception.parse_error.101] " tag, which means nothing
/// to a client.
[[nodiscard]] inline std::string_view without_nlohmann_prefix(std::string_view message) noexcept {
  if (message.starts_with("[json.exception.")) {
    if (const auto end = message.find("] "); end != std::string_view::npos) {
      message.remove_prefix(end + 2);
    }
  }
  return message;
}

/// Parses `body` into `out`. Errors (invalid_argument): a syntax error (nlohmann's message,
/// with its byte position), a number nlohmann cannot hold, nesting deeper than `max_depth`
/// (naming the byte offset). `what` names the body in messages ("the generate request").
[[nodiscard]] inline status parse_json_body(std::string_view body, nlohmann::json& out,
                                            std::string_view what,
                                            std::size_t max_depth = max_json_body_depth) {
  // nlohmann's parser keeps its own stack (no recursion), so the limit can be applied as it
  // goes: the callback sees every value start with its depth and stops the parse at the first
  // one too deep, before the document is built any further.
  struct too_deep {};
  const nlohmann::json::parser_callback_t limit =
      [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
        if ((event == nlohmann::json::parse_event_t::object_start ||
             event == nlohmann::json::parse_event_t::array_start) &&
            static_cast<std::size_t>(depth) >= max_depth) {
          throw too_deep{};
        }
        return true;
      };
  try {
    out = nlohmann::json::parse(body.begin(), body.end(), limit);
  } catch (const too_deep&) {
    out = nullptr;
    return invalid_argument(fmt::format("{} JSON nests deeper than {} levels", what, max_depth));
  } catch (const nlohmann::json::out_of_range& e) {
    // 406: a number such as 1e400, which no double holds. The client's text is at fault.
    out = nullptr;
    return invalid_argument(fmt::format("{} JSON holds a number out of range: {}", what,
                                        without_nlohmann_prefix(e.what())));
  } catch (const nlohmann::json::exception& e) {
    out = nullptr;
    return invalid_argument(
        fmt::format("failed to parse {} JSON: {}", what, without_nlohmann_prefix(e.what())));
  }
  return {};
}

} // namespace servekit::http::detail
