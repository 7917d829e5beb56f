#pragma once
/// \file
/// The example server's gRPC endpoint flags, with Triton's names (`--allow-grpc`, `--grpc-port`,
/// `--grpc-address`, `--grpc-infer-thread-count`) and `--allow-http`; parse_server_flags
/// (http/server_flags.hpp) reads them into server_flags::grpc. Plain values: the http layer does
/// not know servekit::grpc (a layer above it); the server maps them onto grpc::server_options.

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace servekit::http {

/// What the gRPC flags ask for.
struct grpc_endpoint_flags {
  bool allow_grpc = true;          ///< --allow-grpc: serve gRPC (where servekit::grpc is built)
  bool allow_http = true;          ///< --allow-http: serve HTTP/REST
  std::uint16_t port = 8001;       ///< --grpc-port; 0 picks a free port
  std::optional<std::string> host; ///< --grpc-address; none: the HTTP address (--host)
  std::size_t thread_count = 0;    ///< --grpc-infer-thread-count; 0: one per core
};

/// The usage lines of the gRPC flags.
[[nodiscard]] inline std::string grpc_flags_usage() {
  return "  --allow-grpc BOOL          serve KServe v2 gRPC, in builds with servekit::grpc\n"
         "                             (default: true)\n"
         "  --allow-http BOOL          serve KServe v2 HTTP/REST (default: true)\n"
         "  --grpc-port N              gRPC port; 0 picks a free one (default: 8001)\n"
         "  --grpc-address ADDR        gRPC address (default: the HTTP address, --host)\n"
         "  --grpc-infer-thread-count N  gRPC completion-queue threads, 1..1024; 0: one per\n"
         "                             core (default: 0)\n";
}

[[nodiscard]] inline bool is_grpc_flag(std::string_view name) noexcept {
  return name == "--allow-grpc" || name == "--allow-http" || name == "--grpc-port" ||
         name == "--grpc-address" || name == "--grpc-infer-thread-count";
}

/// Sets the flag `name` (is_grpc_flag) from `value`; the error message if the value is wrong.
[[nodiscard]] inline std::optional<std::string>
parse_grpc_flag(std::string_view name, std::string_view value, grpc_endpoint_flags& flags) {
  const auto got = [&] { return ", got '" + std::string(value) + "'"; };
  if (name == "--allow-grpc" || name == "--allow-http") {
    bool v = false;
    if (value == "true" || value == "1") {
      v = true;
    } else if (value != "false" && value != "0") {
      return "expected true, false, 1 or 0" + got();
    }
    (name == "--allow-grpc" ? flags.allow_grpc : flags.allow_http) = v;
    return std::nullopt;
  }
  if (name == "--grpc-address") {
    if (value.empty()) {
      return std::string{"expected an address, got ''"};
    }
    flags.host = std::string(value);
    return std::nullopt;
  }
  std::size_t n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  const bool number = !value.empty() && ec == std::errc{} && end == value.data() + value.size();
  if (name == "--grpc-port") {
    if (!number || n > 65535) {
      return "expected a port number 0..65535" + got();
    }
    flags.port = static_cast<std::uint16_t>(n);
    return std::nullopt;
  }
  if (!number || n > 1024) {
    return "expected a thread count 0..1024 (0: one per core)" + got();
  }
  flags.thread_count = n;
  return std::nullopt;
}

} // namespace servekit::http
