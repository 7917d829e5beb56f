#pragma once
/// \file
/// server_options: what servekit::http::server is configured with (host, port, threads, body
/// limit, readiness, logging). Kept apart from server.hpp so flag parsing needs no Asio.

#include <servekit/http/drain.hpp>
#include <servekit/http/model_control.hpp>
#include <servekit/http/request_limits.hpp>
#include <servekit/http/routing_headers.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
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
  std::chrono::milliseconds exit_timeout{std::chrono::seconds{30}};
  /// Draining (SIGINT/SIGTERM, or POST /v2/admin/drain): readiness turns false at once and
  /// requests are still answered for this long, so that a load balancer stops sending before
  /// the server stops accepting (`--drain-grace-secs`; 0: stop at once, as Triton does).
  std::chrono::milliseconds drain_grace{0};
  /// The drain state, shared with the gRPC front end of the same process; the server makes
  /// its own when null.
  std::shared_ptr<drain_state> drain{};
  /// The headers a proxy routes on: sequence id and priority (`--sequence-id-header`,
  /// `--priority-header`), read as well as the request's parameters.
  routing_headers routing{};

  // ---- connection timeouts and limits (nginx's defaults where nginx has one) ------------
  // A timeout of zero turns that timeout off. Each closes the connection without an answer.

  /// From the connection's first byte (or a keep-alive request's first byte) until the whole
  /// header arrived (nginx's client_header_timeout, 60 s). Cuts off slowloris clients.
  std::chrono::milliseconds header_timeout{60'000};
  /// Longest wait between two pieces of a request body (nginx's client_body_timeout, 60 s).
  std::chrono::milliseconds body_timeout{60'000};
  /// Longest time a whole request body may take after its header (nginx has none; 10 min
  /// lets a 64 MiB body arrive at 1 Mbit/s).
  std::chrono::milliseconds body_total_timeout{600'000};
  /// How long an idle keep-alive connection waits for its next request (nginx's
  /// keepalive_timeout, 75 s).
  std::chrono::milliseconds keepalive_timeout{75'000};
  /// Longest time one write of a response (or of one generate_stream event) may take: a
  /// client that does not read is cut off (nginx's send_timeout, 60 s).
  std::chrono::milliseconds write_timeout{60'000};
  /// Connections served at once; past it a connection's request is answered 503 and the
  /// connection closed (and past it by connection_reject_reserve, closed at once). 0: the
  /// descriptor limit less a reserve for models and files (the server raises its soft
  /// RLIMIT_NOFILE to the hard limit at start; see server::max_connections()).
  std::size_t max_connections = 0;
  /// generate_stream events waiting for a client that reads slower than the model answers:
  /// past this many bytes the stream is given up and the connection closed, and the buffered
  /// events freed (1 MiB).
  std::size_t stream_buffer_bytes = std::size_t{1} << 20;

  /// Who may load and unload models, and which APIs need a header (http/model_control.hpp).
  model_control_options model_control{};
  request_limits limits{}; ///< what one request body may ask of the decoders (400 past it)
};

} // namespace servekit::http
