#pragma once
/// \file
/// parse_route: the KServe v2 (and Triton extension) endpoint a request target names, as a pure
/// function of the target, so routing is tested without sockets.

#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

namespace servekit::http {

/// The endpoints the server knows. `unknown` is any target that names none of them (404).
enum class endpoint : std::uint8_t {
  unknown,                 ///< no such endpoint: 404
  health_live,             ///< GET /v2/health/live
  health_ready,            ///< GET /v2/health/ready
  server_metadata,         ///< GET /v2
  model_metadata,          ///< GET /v2/models/{m}[/versions/{v}]
  model_ready,             ///< GET /v2/models/{m}[/versions/{v}]/ready
  model_config,            ///< GET /v2/models/{m}[/versions/{v}]/config
  model_infer,             ///< POST /v2/models/{m}[/versions/{v}]/infer
  model_generate,          ///< POST /v2/models/{m}[/versions/{v}]/generate (generate extension)
  model_generate_stream,   ///< POST /v2/models/{m}[/versions/{v}]/generate_stream (SSE)
  model_stats,             ///< GET /v2/models/{m}[/versions/{v}]/stats
  all_model_stats,         ///< GET /v2/models/stats
  repository_index,        ///< POST /v2/repository/index
  repository_load,         ///< POST /v2/repository/models/{m}/load
  repository_unload,       ///< POST /v2/repository/models/{m}/unload
  metrics,                 ///< GET /metrics
  openai_completions,      ///< POST /v1/completions (OpenAI-compatible)
  openai_chat_completions, ///< POST /v1/chat/completions (OpenAI-compatible)
  openai_models,           ///< GET /v1/models (OpenAI-compatible)
  admin_drain,             ///< POST /v2/admin/drain (servekit's: begin draining)
};

/// The HTTP methods the endpoints take (every endpoint takes exactly one).
enum class method : std::uint8_t { get, post };

[[nodiscard]] constexpr std::string_view to_string(method m) noexcept {
  return m == method::get ? "GET" : "POST";
}

[[nodiscard]] constexpr std::string_view to_string(endpoint e) noexcept {
  switch (e) {
  case endpoint::unknown:
    return "unknown";
  case endpoint::health_live:
    return "health_live";
  case endpoint::health_ready:
    return "health_ready";
  case endpoint::server_metadata:
    return "server_metadata";
  case endpoint::model_metadata:
    return "model_metadata";
  case endpoint::model_ready:
    return "model_ready";
  case endpoint::model_config:
    return "model_config";
  case endpoint::model_infer:
    return "model_infer";
  case endpoint::model_generate:
    return "model_generate";
  case endpoint::model_generate_stream:
    return "model_generate_stream";
  case endpoint::model_stats:
    return "model_stats";
  case endpoint::all_model_stats:
    return "all_model_stats";
  case endpoint::repository_index:
    return "repository_index";
  case endpoint::repository_load:
    return "repository_load";
  case endpoint::repository_unload:
    return "repository_unload";
  case endpoint::metrics:
    return "metrics";
  case endpoint::openai_completions:
    return "openai_completions";
  case endpoint::openai_chat_completions:
    return "openai_chat_completions";
  case endpoint::openai_models:
    return "openai_models";
  case endpoint::admin_drain:
    return "admin_drain";
  }
  return "unknown";
}

/// The method an endpoint answers to (Triton's); any other method gets 405.
[[nodiscard]] constexpr method method_for(endpoint e) noexcept {
  switch (e) {
  case endpoint::model_infer:
  case endpoint::model_generate:
  case endpoint::model_generate_stream:
  case endpoint::repository_index:
  case endpoint::repository_load:
  case endpoint::repository_unload:
  case endpoint::openai_completions:
  case endpoint::openai_chat_completions:
  case endpoint::admin_drain:
    return method::post;
  default:
    return method::get;
  }
}

/// Whether an endpoint names a model (then `route::model` is set).
[[nodiscard]] constexpr bool names_model(endpoint e) noexcept {
  switch (e) {
  case endpoint::model_metadata:
  case endpoint::model_ready:
  case endpoint::model_config:
  case endpoint::model_infer:
  case endpoint::model_generate:
  case endpoint::model_generate_stream:
  case endpoint::model_stats:
  case endpoint::repository_load:
  case endpoint::repository_unload:
    return true;
  default:
    return false;
  }
}

/// What a request target names.
struct route {
  endpoint kind = endpoint::unknown;
  std::string model;         ///< the model name, percent-decoded (model endpoints only)
  std::int64_t version = -1; ///< the `/versions/{v}` segment; -1 when absent (latest)
  /// Non-empty when the target is malformed (bad percent-encoding, a version that is not a
  /// number): the request gets 400 with this message, and `kind` is `unknown`.
  std::string error;
};

/// Decodes `%XX` escapes of one path segment into `out` (replacing its contents). `+` stays
/// `+`: that spelling of a space belongs to query strings, not paths. Returns false on a `%`
/// not followed by two hex digits.
[[nodiscard]] inline bool percent_decode(std::string_view in, std::string& out) {
  out.clear();
  out.reserve(in.size());
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') {
      return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
      return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
      return c - 'A' + 10;
    }
    return -1;
  };
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) {
      return false;
    }
    const int hi = hex(in[i + 1]);
    const int lo = hex(in[i + 2]);
    if (hi < 0 || lo < 0) {
      return false;
    }
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

namespace detail {

/// Most segments a known target has: /v2/models/{m}/versions/{v}/{action}.
inline constexpr std::size_t max_route_segments = 6;

/// Parses a `/versions/{v}` segment: decimal digits only, fitting an int64.
[[nodiscard]] inline bool parse_version(std::string_view text, std::int64_t& version) {
  if (text.empty()) {
    return false;
  }
  for (const char c : text) {
    if (c < '0' || c > '9') {
      return false;
    }
  }
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size()) {
    return false;
  }
  version = v;
  return true;
}

/// The endpoint a model action segment names (`ready`, `config`, `infer`, `generate`,
/// `generate_stream`, `stats`).
[[nodiscard]] inline endpoint model_action(std::string_view action) noexcept {
  if (action == "infer") {
    return endpoint::model_infer;
  }
  if (action == "generate") {
    return endpoint::model_generate;
  }
  if (action == "generate_stream") {
    return endpoint::model_generate_stream;
  }
  if (action == "ready") {
    return endpoint::model_ready;
  }
  if (action == "config") {
    return endpoint::model_config;
  }
  if (action == "stats") {
    return endpoint::model_stats;
  }
  return endpoint::unknown;
}

/// Sets `out.model` from a raw segment; false (with `out.error` set) on bad percent-encoding.
[[nodiscard]] inline bool set_model(std::string_view raw, route& out) {
  if (raw.find('%') == std::string_view::npos) {
    out.model.assign(raw);
    return true;
  }
  if (!percent_decode(raw, out.model)) {
    out.model.clear();
    out.error = "malformed percent-encoding in model name '" + std::string(raw) + "'";
    return false;
  }
  return true;
}

} // namespace detail

/// Parses `target` (origin-form: a path and an optional `?query`, which is ignored) into `out`,
/// reusing `out`'s strings, so that routing a request need not allocate. Matching is exact:
/// no trailing slash, no empty segment.
inline void parse_route(std::string_view target, route& out) {
  out.kind = endpoint::unknown;
  out.model.clear();
  out.version = -1;
  out.error.clear();

  if (const auto q = target.find_first_of("?#"); q != std::string_view::npos) {
    target = target.substr(0, q);
  }
  if (target.empty() || target.front() != '/') {
    return;
  }
  target.remove_prefix(1);

  std::array<std::string_view, detail::max_route_segments> seg{};
  std::size_t n = 0;
  while (true) {
    const auto slash = target.find('/');
    const std::string_view s = target.substr(0, slash);
    if (s.empty() || n == seg.size()) {
      return; // an empty segment or too many: no endpoint has that shape
    }
    seg[n++] = s;
    if (slash == std::string_view::npos) {
      break;
    }
    target.remove_prefix(slash + 1);
  }

  if (n == 1 && seg[0] == "metrics") {
    out.kind = endpoint::metrics;
    return;
  }
  if (seg[0] == "v1") { // the OpenAI-compatible API
    if (n == 2 && seg[1] == "completions") {
      out.kind = endpoint::openai_completions;
    } else if (n == 2 && seg[1] == "models") {
      out.kind = endpoint::openai_models;
    } else if (n == 3 && seg[1] == "chat" && seg[2] == "completions") {
      out.kind = endpoint::openai_chat_completions;
    }
    return;
  }
  if (seg[0] != "v2") {
    return;
  }
  if (n == 1) {
    out.kind = endpoint::server_metadata;
    return;
  }
  if (seg[1] == "health") {
    if (n == 3 && seg[2] == "live") {
      out.kind = endpoint::health_live;
    } else if (n == 3 && seg[2] == "ready") {
      out.kind = endpoint::health_ready;
    }
    return;
  }
  if (seg[1] == "admin") {
    if (n == 3 && seg[2] == "drain") {
      out.kind = endpoint::admin_drain;
    }
    return;
  }
  if (seg[1] == "repository") {
    if (n == 3 && seg[2] == "index") {
      out.kind = endpoint::repository_index;
      return;
    }
    if (n == 5 && seg[2] == "models" && (seg[4] == "load" || seg[4] == "unload")) {
      if (detail::set_model(seg[3], out)) {
        out.kind = seg[4] == "load" ? endpoint::repository_load : endpoint::repository_unload;
      }
    }
    return;
  }
  if (seg[1] != "models" || n < 3) {
    return;
  }
  if (n == 3 && seg[2] == "stats") {
    out.kind = endpoint::all_model_stats; // as Triton: a model named "stats" is shadowed here
    return;
  }
  // /v2/models/{m} [/versions/{v}] [/{action}]
  std::size_t next = 3;
  std::int64_t version = -1;
  if (n >= 5 && seg[3] == "versions") {
    if (!detail::parse_version(seg[4], version)) {
      out.error = "invalid model version '" + std::string(seg[4]) + "': expected a number";
      return;
    }
    next = 5;
  }
  endpoint kind = endpoint::model_metadata;
  if (n == next + 1) {
    kind = detail::model_action(seg[next]);
  } else if (n != next) {
    return;
  }
  if (kind == endpoint::unknown) {
    return;
  }
  if (detail::set_model(seg[2], out)) {
    out.kind = kind;
    out.version = version;
  }
}

/// The same, returning a new route.
[[nodiscard]] inline route parse_route(std::string_view target) {
  route r;
  parse_route(target, r);
  return r;
}

} // namespace servekit::http
