#pragma once
/// \file
/// server_options: what servekit::http::server is configured with (host, port, threads, body
/// limit, readiness, logging). Kept apart from server.hpp so flag parsing needs no Asio.

#include <servekit/http/request_limits.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace servekit::http {

/// The HTTP front end's settings. The defaults are Triton's where Triton has one.
struct server_options {
  std::string host = "127.0.0.1"; ///< address to listen on (IPv4 or IPv6 literal)
  std::uint16_t port = 8000;      ///< 0: the system picks a free port (see server::port())
  std::size_t thread_count = 0;   ///< I/O threads; 0: std::thread::hardware_concurrency()
  std::size_t max_body_bytes = std::size_t{64} << 20; ///< larger request bodies get 413
  /// true: /v2/health/ready is 200 only while every model of the repository is ready (Triton's
  /// --strict-readiness); false: 200 whenever the server is up and not stopping.
  bool strict_readiness = true;
  int log_verbose = 0; ///< > 0: one line per request on stderr
  /// After stop(), how long requests in flight get to be answered and written before every
  /// connection still open is closed (Triton's --exit-timeout-secs, default 30).
  std::chrono::seconds exit_timeout{30};
  request_limits limits; ///< what one request body may ask of the decoders (400 past it)
};

} // namespace servekit::http
