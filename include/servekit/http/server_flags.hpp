#pragma once
/// \file
/// parse_server_flags: the example server's command line, with Triton's flag names
/// (`--model-repository`, `--http-port`, `--rate-limit`, `--cache-config`, ...), so a user's own
/// server can take the same flags; make_model_environment builds the rate limiter and response
/// cache they ask for.

#include <servekit/cache/cache_config.hpp>
#include <servekit/cache/response_cache.hpp>
#include <servekit/http/grpc_flags.hpp>
#include <servekit/http/model_control.hpp>
#include <servekit/http/routing_headers.hpp>
#include <servekit/http/server_options.hpp>
#include <servekit/runtime/model_environment.hpp>
#include <servekit/runtime/rate_limiter.hpp>

#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

namespace servekit::http {

/// Triton's `--rate-limit` modes.
enum class rate_limit_mode : std::uint8_t {
  off,             ///< instances execute whenever they have work (the default)
  execution_count, ///< instances wait for their group's rate_limiter resources
};

/// What the server's command line asks for.
struct server_flags {
  std::filesystem::path model_repository;
  server_options http;
  rate_limit_mode rate_limit = rate_limit_mode::off;
  /// `--rate-limit-resource` counts (only with --rate-limit execution_count).
  rate_limiter_settings rate_limiter;
  /// `--cache-config local,size=N`: a response cache; none without the flag.
  std::optional<response_cache_settings> cache;
  /// --allow-grpc, --allow-http, --grpc-port, --grpc-address, --grpc-infer-thread-count.
  grpc_endpoint_flags grpc;
};

/// The model_environment the flags ask for: a rate_limiter with execution_count, a
/// response_cache with --cache-config; null members otherwise. Pass it to the repository:
/// `model_repository{root, backends, {}, make_model_environment(flags)}`.
[[nodiscard]] inline model_environment make_model_environment(const server_flags& flags) {
  model_environment env;
  if (flags.rate_limit == rate_limit_mode::execution_count) {
    env.limiter = std::make_shared<rate_limiter>(flags.rate_limiter);
  }
  if (flags.cache) {
    env.cache = std::make_shared<response_cache>(*flags.cache);
  }
  return env;
}

// ---- connection timeouts and limits (server_options' transport fields) --------------------

/// The usage lines of the transport flags.
[[nodiscard]] inline std::string transport_flags_usage() {
  return "  --http-header-timeout-secs S      a request header must arrive within S seconds\n"
         "                                    of its first byte (default: 60)\n"
         "  --http-body-timeout-secs S        longest wait between two pieces of a request\n"
         "                                    body (default: 60)\n"
         "  --http-body-total-timeout-secs S  a whole request body must arrive within S\n"
         "                                    seconds of its header (default: 600)\n"
         "  --http-keepalive-timeout-secs S   an idle keep-alive connection is closed after\n"
         "                                    S seconds (default: 75)\n"
         "  --http-write-timeout-secs S       a response write (or generate_stream event)\n"
         "                                    must finish within S seconds (default: 60)\n"
         "  --http-max-connections N          connections served at once; past it 503;\n"
         "                                    0: the descriptor limit less 256 (default: 0)\n"
         "  --http-stream-buffer-bytes N      generate_stream events buffered for a slow\n"
         "                                    client before the stream is closed\n"
         "                                    (default: 1048576)\n"
         "                                    (S may be fractional; 0 turns a timeout off)\n";
}

[[nodiscard]] inline bool is_transport_flag(std::string_view name) noexcept {
  return name == "--http-header-timeout-secs" || name == "--http-body-timeout-secs" ||
         name == "--http-body-total-timeout-secs" || name == "--http-keepalive-timeout-secs" ||
         name == "--http-write-timeout-secs" || name == "--http-max-connections" ||
         name == "--http-stream-buffer-bytes";
}

/// Sets the option `name` names from `value`; the error message if the value is wrong.
[[nodiscard]] inline std::optional<std::string>
parse_transport_flag(std::string_view name, std::string_view value, server_options& options) {
  if (name == "--http-max-connections" || name == "--http-stream-buffer-bytes") {
    const bool connections = name == "--http-max-connections";
    std::size_t n = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (value.empty() || ec != std::errc{} || end != value.data() + value.size() ||
        (!connections && n == 0)) {
      return std::string(connections
                             ? "expected a number of connections (0: from the descriptor limit)"
                             : "expected a positive number of bytes") +
             ", got '" + std::string(value) + "'";
    }
    (connections ? options.max_connections : options.stream_buffer_bytes) = n;
    return std::nullopt;
  }
  double seconds = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  // Up to a year: past that a timeout is a typo, and the millisecond count must not overflow.
  if (value.empty() || ec != std::errc{} || end != value.data() + value.size() || !(seconds >= 0) ||
      seconds > 365.0 * 24 * 3600) {
    return "expected a number of seconds (0 turns it off), got '" + std::string(value) + "'";
  }
  const std::chrono::milliseconds ms{static_cast<std::int64_t>(seconds * 1000.0 + 0.5)};
  if (name == "--http-header-timeout-secs") {
    options.header_timeout = ms;
  } else if (name == "--http-body-timeout-secs") {
    options.body_timeout = ms;
  } else if (name == "--http-body-total-timeout-secs") {
    options.body_total_timeout = ms;
  } else if (name == "--http-keepalive-timeout-secs") {
    options.keepalive_timeout = ms;
  } else {
    options.write_timeout = ms;
  }
  return std::nullopt;
}

/// The usage text `--help` prints; `program` is the program's name.
[[nodiscard]] inline std::string
server_flags_usage(std::string_view program, const std::filesystem::path& default_repository) {
  const server_options d;
  std::string u;
  u += "Usage: ";
  u += program;
  u += " [options]\n\n"
       "Serves the models of a model repository over KServe v2 HTTP/REST and gRPC.\n\n"
       "Options (Triton's names; give values as `--flag value` or `--flag=value`):\n"
       "  --model-repository DIR     the model repository (also --model-store)\n"
       "                             (default: ";
  u += default_repository.string();
  u += ")\n"
       "  --http-port N              port to listen on; 0 picks a free one (default: ";
  u += std::to_string(d.port);
  u += ")\n"
       "  --host ADDR                address to listen on (also --http-address)\n"
       "                             (default: ";
  u += d.host;
  u += ")\n"
       "  --http-thread-count N      HTTP I/O threads; 0: one per core (default: 0)\n"
       "  --http-max-body-bytes N    largest request body; larger ones get 413\n"
       "                             (default: ";
  u += std::to_string(d.max_body_bytes);
  u += ")\n"
       "  --strict-model-config BOOL false only: configs are completed from their model\n"
       "                             files (Triton's default; `true` and\n"
       "                             --disable-auto-complete-config are refused)\n"
       "  --strict-readiness BOOL    /v2/health/ready only while every model is ready\n"
       "                             (default: true)\n"
       "  --log-verbose N            > 0: one line per request on stderr (default: 0)\n"
       "  --exit-timeout-secs N      after SIGINT/SIGTERM, how long requests in flight get\n"
       "                             before every connection is closed (default: 30)\n"
       "  --drain-grace-secs N       after SIGINT/SIGTERM or POST /v2/admin/drain: readiness\n"
       "                             false at once, requests still answered (new sequences\n"
       "                             refused) for N seconds, then stop (default: 0)\n"
       "  --sequence-id-header NAME  read the sequence id from this request header (gRPC:\n"
       "                             metadata key) too, for a proxy to hash on; with the\n"
       "                             parameter as well, the two must agree (default: none)\n"
       "  --priority-header NAME     read the request priority from this header too\n"
       "  --http-max-json-depth N    deepest JSON nesting of a request body, at most 512\n"
       "                             (default: ";
  u += std::to_string(d.limits.max_json_depth);
  u += ")\n"
       "  --http-max-inputs N        inputs in one infer/generate request (default: ";
  u += std::to_string(d.limits.max_inputs);
  u += ")\n"
       "  --http-max-outputs N       requested outputs in one request (default: ";
  u += std::to_string(d.limits.max_outputs);
  u += ")\n"
       "  --http-max-tensor-elements N  elements of one input tensor (default: ";
  u += std::to_string(d.limits.max_tensor_elements);
  u += ")\n"
       "                             A request past one of these limits gets 400.\n"
       "  --rate-limit MODE          off, or execution_count: model instances execute only\n"
       "                             when the resources of their instance group's\n"
       "                             rate_limiter are free (default: off)\n"
       "  --rate-limit-resource R    NAME:COUNT[:DEVICE], repeatable: the count of resource\n"
       "                             NAME (per device, or on DEVICE only); default: the most\n"
       "                             any instance needs. Needs --rate-limit execution_count\n"
       "  --cache-config SPEC        local,size=BYTES: a response cache of that size for the\n"
       "                             models with response_cache { enable: true } (default:\n"
       "                             no cache)\n"
       "  --model-control-mode MODE  none: load every model at start and refuse load and\n"
       "                             unload requests; explicit: load only --load-model\n"
       "                             names at start and allow load and unload; poll: load\n"
       "                             every model and follow the repository folder\n"
       "                             (default: none)\n"
       "  --load-model NAME          explicit mode: a model to load at start, repeatable;\n"
       "                             * (alone) loads every model (default: none)\n"
       "  --repository-poll-secs N   poll mode: seconds between two scans; 0: none\n"
       "                             after the start (default: 15)\n"
       "  --http-restricted-api R    API[,API...]:HEADER=VALUE, repeatable: requests to\n"
       "                             those APIs need that header (403 without it). APIs:\n"
       "                             health, metadata, inference, model-config,\n"
       "                             model-repository, statistics (also Triton's\n"
       "                             shared-memory, trace, logging) (default: none)\n"
       "  --help                     print this and exit\n";
  u += transport_flags_usage();
  u += grpc_flags_usage();
  u += "BOOL is true, false, 1 or 0.\n";
  return u;
}

namespace detail {

template <class Int>
[[nodiscard]] std::optional<Int> parse_flag_integer(std::string_view text) {
  Int value{};
  if (text.empty() || text.front() == '+') {
    return std::nullopt;
  }
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

/// The request_limits flags (--http-max-json-depth, --http-max-inputs, --http-max-outputs,
/// --http-max-tensor-elements): true when `name` is one of them.
[[nodiscard]] inline bool is_request_limit_flag(std::string_view name) noexcept {
  return name == "--http-max-json-depth" || name == "--http-max-inputs" ||
         name == "--http-max-outputs" || name == "--http-max-tensor-elements";
}

/// Sets the limit `name` (is_request_limit_flag) to `value`; the error message, or empty.
[[nodiscard]] inline std::string set_request_limit(std::string_view name, std::string_view value,
                                                   request_limits& limits) {
  const auto v = parse_flag_integer<std::size_t>(value);
  if (name == "--http-max-json-depth") {
    if (!v || *v < 1 || *v > 512) {
      return "expected a depth 1..512, got '" + std::string(value) + "'";
    }
    limits.max_json_depth = *v;
    return {};
  }
  if (!v || *v < 1) {
    return "expected a positive count, got '" + std::string(value) + "'";
  }
  if (name == "--http-max-inputs") {
    limits.max_inputs = *v;
  } else if (name == "--http-max-outputs") {
    limits.max_outputs = *v;
  } else {
    limits.max_tensor_elements = static_cast<std::uint64_t>(*v);
  }
  return {};
}

[[nodiscard]] inline std::optional<bool> parse_flag_bool(std::string_view text) {
  if (text == "true" || text == "1") {
    return true;
  }
  if (text == "false" || text == "0") {
    return false;
  }
  return std::nullopt;
}

} // namespace detail

/// Parses `args` (the arguments after the program name). Returns the flags, or the exit code
/// the program should return: 0 after printing the usage to `out` for `--help`, 2 after printing
/// an error naming the flag to `err`. Unknown flags and positional arguments are errors.
[[nodiscard]] inline std::variant<server_flags, int>
parse_server_flags(std::string_view program, std::span<const std::string_view> args,
                   std::filesystem::path default_repository, std::ostream& out, std::ostream& err) {
  server_flags flags;
  flags.model_repository = default_repository;

  const auto fail = [&](std::string_view flag, std::string_view message) -> int {
    err << program << ": " << flag << ": " << message << "\nTry '" << program
        << " --help' for the list of flags.\n";
    return 2;
  };

  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      out << server_flags_usage(program, default_repository);
      return 0;
    }
    if (arg.size() < 3 || arg.substr(0, 2) != "--") {
      err << program << ": unexpected argument '" << arg << "' (flags start with --)\nTry '"
          << program << " --help' for the list of flags.\n";
      return 2;
    }
    std::string_view name = arg;
    std::optional<std::string_view> inline_value;
    if (const auto eq = arg.find('='); eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
    }

    // Triton's switch for auto-complete. servekit always completes a config from its model file
    // (Triton's default): `false` is accepted so that Triton's command lines run unchanged; asking
    // to turn it off is refused by name rather than silently ignored.
    constexpr std::string_view auto_complete_always =
        "servekit always completes a config from its model file (Triton's default, "
        "--strict-model-config=false); a config that sets max_batch_size and lists every input "
        "and output is used as written";
    if (name == "--disable-auto-complete-config") {
      return fail(name, auto_complete_always);
    }

    enum class kind {
      repository,
      auto_complete,
      port,
      host,
      threads,
      body,
      strict,
      verbose,
      exit_timeout,
      drain_grace,
      routing_header,
      rate_limit,
      rate_limit_resource,
      cache_config,
      model_control,
      transport,
      request_limit,
      grpc
    };
    kind k{};
    if (name == "--model-repository" || name == "--model-store") {
      k = kind::repository;
    } else if (name == "--http-port") {
      k = kind::port;
    } else if (name == "--host" || name == "--http-address") {
      k = kind::host;
    } else if (name == "--http-thread-count") {
      k = kind::threads;
    } else if (name == "--http-max-body-bytes") {
      k = kind::body;
    } else if (name == "--strict-readiness") {
      k = kind::strict;
    } else if (name == "--strict-model-config") {
      k = kind::auto_complete;
    } else if (name == "--log-verbose") {
      k = kind::verbose;
    } else if (name == "--exit-timeout-secs") {
      k = kind::exit_timeout;
    } else if (name == "--drain-grace-secs") {
      k = kind::drain_grace;
    } else if (name == "--sequence-id-header" || name == "--priority-header") {
      k = kind::routing_header;
    } else if (name == "--rate-limit") {
      k = kind::rate_limit;
    } else if (name == "--rate-limit-resource") {
      k = kind::rate_limit_resource;
    } else if (name == "--cache-config") {
      k = kind::cache_config;
    } else if (is_model_control_flag(name)) {
      k = kind::model_control;
    } else if (is_transport_flag(name)) {
      k = kind::transport;
    } else if (detail::is_request_limit_flag(name)) {
      k = kind::request_limit;
    } else if (is_grpc_flag(name)) {
      k = kind::grpc;
    } else {
      return fail(name, "unknown flag");
    }

    std::string_view value;
    if (inline_value) {
      value = *inline_value;
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return fail(name, "needs a value");
    }

    switch (k) {
    case kind::repository:
      if (value.empty()) {
        return fail(name, "expected a directory, got ''");
      }
      flags.model_repository = std::filesystem::path(value);
      break;
    case kind::port:
      if (auto v = detail::parse_flag_integer<std::uint16_t>(value)) {
        flags.http.port = *v;
      } else {
        return fail(name, "expected a port number 0..65535, got '" + std::string(value) + "'");
      }
      break;
    case kind::host:
      if (value.empty()) {
        return fail(name, "expected an address, got ''");
      }
      flags.http.host = std::string(value);
      break;
    case kind::threads:
      if (auto v = detail::parse_flag_integer<std::size_t>(value); v && *v <= 1024) {
        flags.http.thread_count = *v;
      } else {
        return fail(name, "expected a thread count 0..1024 (0: one per core), got '" +
                              std::string(value) + "'");
      }
      break;
    case kind::body:
      if (auto v = detail::parse_flag_integer<std::size_t>(value); v && *v > 0) {
        flags.http.max_body_bytes = *v;
      } else {
        return fail(name, "expected a positive number of bytes, got '" + std::string(value) + "'");
      }
      break;
    case kind::auto_complete:
      if (auto v = detail::parse_flag_bool(value); !v) {
        return fail(name, "expected true, false, 1 or 0, got '" + std::string(value) + "'");
      } else if (*v) {
        return fail(name, auto_complete_always);
      }
      break;
    case kind::strict:
      if (auto v = detail::parse_flag_bool(value)) {
        flags.http.strict_readiness = *v;
      } else {
        return fail(name, "expected true, false, 1 or 0, got '" + std::string(value) + "'");
      }
      break;
    case kind::verbose:
      if (auto v = detail::parse_flag_integer<int>(value); v && *v >= 0) {
        flags.http.log_verbose = *v;
      } else {
        return fail(name, "expected a level 0, 1, ..., got '" + std::string(value) + "'");
      }
      break;
    case kind::exit_timeout:
      if (auto v = detail::parse_flag_integer<std::uint32_t>(value)) {
        flags.http.exit_timeout = std::chrono::seconds{*v};
      } else {
        return fail(name, "expected a number of seconds, got '" + std::string(value) + "'");
      }
      break;
    case kind::drain_grace:
      if (auto v = detail::parse_flag_integer<std::uint32_t>(value); v && *v <= 3600) {
        flags.http.drain_grace = std::chrono::seconds{*v};
      } else {
        return fail(name, "expected a number of seconds 0..3600, got '" + std::string(value) + "'");
      }
      break;
    case kind::routing_header:
      if (!valid_routing_header(value)) {
        return fail(name, "expected a header name (letters, digits, '-'; not grpc-*), got '" +
                              std::string(value) + "'");
      }
      (name == "--sequence-id-header" ? flags.http.routing.sequence_id
                                      : flags.http.routing.priority) = std::string(value);
      break;
    case kind::request_limit:
      if (auto e = detail::set_request_limit(name, value, flags.http.limits); !e.empty()) {
        return fail(name, e);
      }
      break;
    case kind::rate_limit:
      if (value == "off") {
        flags.rate_limit = rate_limit_mode::off;
      } else if (value == "execution_count") {
        flags.rate_limit = rate_limit_mode::execution_count;
      } else {
        return fail(name, "expected off or execution_count, got '" + std::string(value) + "'");
      }
      break;
    case kind::rate_limit_resource:
      try {
        flags.rate_limiter.resources.push_back(parse_rate_limit_resource(value));
      } catch (const std::exception& e) {
        return fail(name, e.what());
      }
      break;
    case kind::cache_config:
      if (flags.cache) {
        return fail(name, "given twice (one cache per server)");
      }
      try {
        flags.cache = parse_cache_config(value);
      } catch (const std::exception& e) {
        return fail(name, e.what());
      }
      break;
    case kind::model_control:
      if (const auto error = parse_model_control_flag(name, value, flags.http.model_control)) {
        return fail(name, *error);
      }
      break;
    case kind::transport:
      if (const auto error = parse_transport_flag(name, value, flags.http)) {
        return fail(name, *error);
      }
      break;
    case kind::grpc:
      if (const auto error = parse_grpc_flag(name, value, flags.grpc)) {
        return fail(name, *error);
      }
      break;
    }
  }
  if (!flags.rate_limiter.resources.empty() &&
      flags.rate_limit != rate_limit_mode::execution_count) {
    // Triton ignores the counts then; a count that silently does nothing is a mistake.
    return fail("--rate-limit-resource", "has no effect without --rate-limit execution_count");
  }
  if (const auto error = check_model_control_flags(flags.http.model_control)) {
    return fail("--load-model", *error);
  }
  if (!flags.grpc.allow_http && !flags.grpc.allow_grpc) {
    return fail("--allow-http", "false together with --allow-grpc false leaves nothing to serve");
  }
  return flags;
}

/// The same over `main`'s arguments, printing to std::cout and std::cerr.
[[nodiscard]] inline std::variant<server_flags, int>
parse_server_flags(int argc, char** argv, std::filesystem::path default_repository) {
  std::vector<std::string_view> args;
  const std::size_t count = argc > 0 ? static_cast<std::size_t>(argc) : 0;
  args.reserve(count);
  for (std::size_t i = 1; i < count; ++i) {
    args.emplace_back(argv[i]);
  }
  const std::string_view program =
      count > 0 && argv[0] != nullptr ? std::string_view(argv[0]) : "servekit-server";
  const auto slash = program.rfind('/');
  return parse_server_flags(slash == std::string_view::npos ? program : program.substr(slash + 1),
                            args, std::move(default_repository), std::cout, std::cerr);
}

} // namespace servekit::http
