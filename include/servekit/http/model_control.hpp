#pragma once
/// \file
/// Who may change what is served, as Triton has it: the model control mode
/// (`--model-control-mode none|explicit|poll`, `--load-model`, `--repository-poll-secs`) and the
/// restricted APIs (`--http-restricted-api <api>[,<api>]:<header>=<value>`), with their flag
/// parsers. Kept apart from server.hpp so flag parsing needs no Asio.

#include <servekit/http/routes.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace servekit::http {

/// Triton's `--model-control-mode`.
enum class model_control_mode : std::uint8_t {
  none,      ///< every model is loaded at start; load and unload are refused (Triton's default)
  explicit_, ///< only `--load-model` names are loaded at start; load and unload are allowed
  poll,      ///< the repository folder is rescanned; load and unload are refused
};

[[nodiscard]] constexpr std::string_view to_string(model_control_mode m) noexcept {
  switch (m) {
  case model_control_mode::none:
    return "none";
  case model_control_mode::explicit_:
    return "explicit";
  case model_control_mode::poll:
    return "poll";
  }
  return "none";
}

/// Triton's restricted API categories (its restricted_features.h), in its order.
enum class restricted_api : std::uint8_t {
  health,
  metadata,
  inference,
  shared_memory,
  model_config,
  model_repository,
  statistics,
  trace,
  logging,
};

inline constexpr std::array<std::string_view, 9> restricted_api_names{
    "health",           "metadata",   "inference", "shared-memory", "model-config",
    "model-repository", "statistics", "trace",     "logging"};

[[nodiscard]] constexpr std::string_view to_string(restricted_api a) noexcept {
  return restricted_api_names[static_cast<std::size_t>(a)];
}

/// The category Triton's HTTP server checks for an endpoint (http_server.cc's
/// RETURN_AND_RESPOND_IF_RESTRICTED calls); nullopt for one it never restricts (metrics, which
/// Triton serves on its own port, and unknown targets).
[[nodiscard]] constexpr std::optional<restricted_api> restricted_api_of(endpoint e) noexcept {
  switch (e) {
  case endpoint::health_live:
  case endpoint::health_ready:
  case endpoint::model_ready:
    return restricted_api::health;
  case endpoint::server_metadata:
  case endpoint::model_metadata:
    return restricted_api::metadata;
  case endpoint::model_config:
    return restricted_api::model_config;
  case endpoint::model_infer:
  case endpoint::model_generate:
  case endpoint::model_generate_stream:
  case endpoint::openai_completions:
  case endpoint::openai_chat_completions:
    return restricted_api::inference;
  case endpoint::openai_models:
    return restricted_api::metadata;
  case endpoint::model_stats:
  case endpoint::all_model_stats:
    return restricted_api::statistics;
  case endpoint::repository_index:
  case endpoint::repository_load:
  case endpoint::repository_unload:
  case endpoint::admin_drain: // it takes the server out of service, as an unload takes a model
    return restricted_api::model_repository;
  case endpoint::metrics:
  case endpoint::unknown:
    break;
  }
  return std::nullopt;
}

/// The header (matched case-insensitively, as HTTP names are) and the exact value a request to a
/// restricted API must carry.
struct api_restriction {
  std::string header;
  std::string value;
  friend bool operator==(const api_restriction&, const api_restriction&) = default;
};

/// The restricted APIs: at most one restriction per category.
class restricted_apis {
public:
  /// Restricts `api`; std::invalid_argument (Triton's message) if it already is.
  void restrict(restricted_api api, api_restriction restriction) {
    auto& slot = rules_[static_cast<std::size_t>(api)];
    if (slot) {
      throw std::invalid_argument("restricted api '" + std::string{to_string(api)} +
                                  "' can not be specified in multiple config groups");
    }
    slot = std::move(restriction);
  }

  /// The restriction on `api`, or null when anyone may call it.
  [[nodiscard]] const api_restriction* find(restricted_api api) const noexcept {
    const auto& slot = rules_[static_cast<std::size_t>(api)];
    return slot ? &*slot : nullptr;
  }

  /// The restriction on endpoint `e`, or null.
  [[nodiscard]] const api_restriction* find(endpoint e) const noexcept {
    const auto api = restricted_api_of(e);
    return api ? find(*api) : nullptr;
  }

  [[nodiscard]] bool empty() const noexcept {
    return std::none_of(rules_.begin(), rules_.end(), [](const auto& r) { return r.has_value(); });
  }

private:
  std::array<std::optional<api_restriction>, restricted_api_names.size()> rules_{};
};

/// Triton's answer (http_server.cc, RespondIfRestricted) to a restricted request without the
/// header: 403 with this message.
[[nodiscard]] inline std::string restricted_api_message(std::string_view header) {
  return "This API is restricted, expecting header '" + std::string{header} + "'";
}

/// Triton's answer (model_repository_manager.cc) to load and unload outside explicit mode: 503
/// (UNAVAILABLE) with this message, the same for none and poll.
inline constexpr std::string_view model_control_disabled_message =
    "explicit model load / unload is not allowed if polling is enabled";

/// Parses one `--http-restricted-api` value, `<api>[,<api>...]:<header>=<value>`, into `into`.
/// Throws std::invalid_argument with Triton's message (command_line_parser.cc) on a bad format,
/// an unknown API or an API given twice.
inline void parse_restricted_api(std::string_view spec, restricted_apis& into) {
  const auto colon = spec.find(':');
  const auto eq = colon == std::string_view::npos ? colon : spec.find('=', colon + 1);
  const auto bad_format = [&] {
    return std::invalid_argument(
        "--http-restricted-api option format is '<config name>:<setting>=<value>'. Got " +
        std::string{spec});
  };
  if (eq == std::string_view::npos) {
    throw bad_format();
  }
  const auto apis = spec.substr(0, colon);
  api_restriction restriction{std::string{spec.substr(colon + 1, eq - colon - 1)},
                              std::string{spec.substr(eq + 1)}};
  if (apis.empty() || restriction.header.empty() || restriction.value.empty()) {
    throw bad_format();
  }
  std::size_t begin = 0;
  while (begin <= apis.size()) {
    const auto comma = std::min(apis.find(',', begin), apis.size());
    const auto name = apis.substr(begin, comma - begin);
    const auto it = std::find(restricted_api_names.begin(), restricted_api_names.end(), name);
    if (it == restricted_api_names.end()) {
      throw std::invalid_argument("unknown restricted api '" + std::string{name} + "'");
    }
    into.restrict(static_cast<restricted_api>(it - restricted_api_names.begin()), restriction);
    begin = comma + 1;
  }
}

/// What the server lets clients change, and what the program loads at start and polls.
struct model_control_options {
  model_control_mode mode = model_control_mode::none;
  /// explicit mode: the models loaded at start (`--load-model`, repeatable); `*` alone: all.
  std::vector<std::string> load_models;
  /// poll mode: the time between two scans of the repository (`--repository-poll-secs`,
  /// Triton's default 15); 0: no scan after the start (as Triton, whose command lines often pass
  /// `--repository-poll-secs=0` with explicit mode, where it has no effect).
  std::chrono::seconds poll_interval{15};
  /// `--http-restricted-api`: the APIs that need a header.
  restricted_apis restricted;

  /// Whether POST /v2/repository/models/{m}/load and .../unload may change what is served.
  [[nodiscard]] bool load_unload_allowed() const noexcept {
    return mode == model_control_mode::explicit_;
  }
};

/// Whether `name` is one of the flags parse_model_control_flag takes.
[[nodiscard]] inline bool is_model_control_flag(std::string_view name) noexcept {
  return name == "--model-control-mode" || name == "--load-model" ||
         name == "--repository-poll-secs" || name == "--http-restricted-api";
}

/// Applies one model-control flag (is_model_control_flag(name)) with `value` to `into`; returns
/// the error to print, if any.
[[nodiscard]] inline std::optional<std::string>
parse_model_control_flag(std::string_view name, std::string_view value,
                         model_control_options& into) {
  if (name == "--model-control-mode") {
    std::string lower{value};
    std::transform(lower.begin(), lower.end(), lower.begin(), [](char c) {
      return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    });
    if (lower == "none") {
      into.mode = model_control_mode::none;
    } else if (lower == "explicit") {
      into.mode = model_control_mode::explicit_;
    } else if (lower == "poll") {
      into.mode = model_control_mode::poll;
    } else {
      return "expected none, explicit or poll, got '" + std::string{value} + "'";
    }
    return std::nullopt;
  }
  if (name == "--load-model") {
    if (value.empty()) {
      return std::string{"expected a model name or *, got ''"};
    }
    into.load_models.emplace_back(value);
    return std::nullopt;
  }
  if (name == "--repository-poll-secs") {
    std::uint32_t secs = 0;
    const auto* end = value.data() + value.size();
    const auto [ptr, ec] = std::from_chars(value.data(), end, secs);
    if (value.empty() || ec != std::errc{} || ptr != end || secs > 86400) {
      return "expected a number of seconds 0..86400, got '" + std::string{value} + "'";
    }
    into.poll_interval = std::chrono::seconds{secs};
    return std::nullopt;
  }
  try {
    parse_restricted_api(value, into.restricted);
  } catch (const std::invalid_argument& e) {
    return std::string{e.what()};
  }
  return std::nullopt;
}

/// The checks Triton makes once every flag is read; returns the error to print, if any.
[[nodiscard]] inline std::optional<std::string>
check_model_control_flags(const model_control_options& options) {
  if (!options.load_models.empty() && options.mode != model_control_mode::explicit_) {
    return std::string{"Use of '--load-model' requires setting '--model-control-mode=explicit' "
                       "as well."};
  }
  const bool all = std::find(options.load_models.begin(), options.load_models.end(), "*") !=
                   options.load_models.end();
  if (all && options.load_models.size() > 1) {
    return std::string{"--load-model=* must be the only --load-model argument"};
  }
  return std::nullopt;
}

} // namespace servekit::http
