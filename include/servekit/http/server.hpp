#pragma once
/// \file
/// server: a KServe v2 HTTP/REST front end (plus Triton's health, statistics, repository and
/// metrics extensions) over a model_repository, on Boost.Beast and Asio.
///
///     servekit::model_repository models{"models", my_backends{}};
///     models.load_all();
///     servekit::http::server server{models, {.port = 8000}};
///     server.stop_on_signals();
///     server.run(); // returns after SIGINT/SIGTERM, once in-flight requests are answered
///
/// Threading: `thread_count` I/O threads, each running an io_context of its own; a connection
/// lives on one of them (dealt in turn), so its handlers never run concurrently. An infer
/// request holds no thread while the model works on it: the response sink (called on a model
/// instance thread) encodes the response there and posts the write to the connection's
/// io_context. Repository load/unload run on a separate thread, never on an I/O thread.

///
/// The front end (Boost.Beast sessions, routing, the endpoints) is compiled once into
/// servekit::server (http/impl/server.ipp, http/impl/session_*.ipp), so including this header costs
/// no Beast or Asio.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/http/server_options.hpp>
#include <servekit/repository/model_repository.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace servekit::http {

namespace detail {
class server_state;
} // namespace detail

/// The HTTP front end. Construction binds and listens (so port() is known at once); run()
/// serves until stop(). Endpoints (KServe v2 and Triton's extensions):
/// - GET /v2/health/live, /v2/health/ready (200, or 400 when not ready);
/// - GET /v2 (server metadata); GET /v2/models/{m}[/versions/{v}] (model metadata), .../ready
///   (200/400), .../config (the loaded config as JSON), .../stats (statistics extension);
/// - POST /v2/models/{m}[/versions/{v}]/infer (JSON, or the binary tensor data extension;
///   400 for a decoupled model);
/// - POST /v2/models/{m}[/versions/{v}]/generate and .../generate_stream (Triton's generate
///   extension: flat JSON in and out; generate_stream answers with server-sent events, one per
///   response, which is how a decoupled model's responses reach an HTTP client);
/// - GET /v2/models/stats (every ready model);
/// - POST /v2/repository/index, /v2/repository/models/{m}/load, .../unload (load and unload
///   only in explicit model control mode, else Triton's 503: options.model_control);
/// - POST /v2/admin/drain (servekit's: begin_drain(), for a replica leaving its pool);
/// - GET /metrics (Prometheus text).
///
/// Errors are `{"error": "..."}`: 400 bad request, 403 a restricted API without its header
/// (options.model_control.restricted), 404 unknown model, version or endpoint, 405 wrong method,
/// 413 body over max_body_bytes, 503 queue full, model not ready or over max_connections.
///
/// Transport hardening: a Transfer-Encoding other than exactly "chunked", or one together with
/// Content-Length, is answered 400 and the connection closed before its body is read (RFC 9112,
/// no request smuggling). Slow or idle peers are cut off by options.header_timeout,
/// body_timeout, body_total_timeout, keepalive_timeout and write_timeout. A request body grows
/// with the bytes received, never reserved from Content-Length.
class server {
public:
  /// Binds `options.host`:`options.port` and listens; throws std::system_error naming them if
  /// it cannot. `models` must outlive the server.
  server(model_repository& models, server_options options);

  server(server&&) noexcept;
  server& operator=(server&&) noexcept;
  ~server();

  /// The port listened on (the one the system picked when options.port was 0).
  [[nodiscard]] std::uint16_t port() const noexcept;
  [[nodiscard]] const std::string& host() const noexcept;
  [[nodiscard]] const server_options& options() const noexcept;
  /// The connection limit in force (options.max_connections, or its default from the
  /// descriptor limit).
  [[nodiscard]] std::size_t max_connections() const noexcept;
  /// Connections open now.
  [[nodiscard]] std::size_t connections() const;

  /// Serves on `thread_count` threads (the caller's is one of them) until stop(); returns once
  /// every connection is closed and every in-flight request answered.
  void run();

  /// Stops accepting, closes idle connections and lets requests in flight finish and be
  /// answered (their connections close after the response). Thread-safe and idempotent; may be
  /// called before run() or from a request handler's thread.
  void stop();

  /// Starts draining because of `reason`: /v2/health/ready (and a gRPC server sharing
  /// options().drain) turns false at once, requests are still answered and new sequences
  /// refused for options().drain_grace, then stop(). What POST /v2/admin/drain and SIGTERM do.
  void begin_drain(std::string reason);

  /// SIGINT and SIGTERM call begin_drain() (stop() after options().drain_grace, at once when it
  /// is zero). Call it once, before run(); the handlers are installed
  /// when it returns.
  void stop_on_signals();

private:
  std::unique_ptr<detail::server_state> state_;
};

} // namespace servekit::http

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/http/impl/server.ipp>
#include <servekit/http/impl/session_generate.ipp>
#include <servekit/http/impl/session_infer.ipp>
#include <servekit/http/impl/session_metadata.ipp>
#include <servekit/http/impl/session_openai.ipp>
#include <servekit/http/impl/session_repository.ipp>
#include <servekit/http/impl/session_routing.ipp>
#include <servekit/http/impl/session_statistics.ipp>
#include <servekit/http/impl/session_transport.ipp>
#include <servekit/http/impl/session_write.ipp>
#endif
