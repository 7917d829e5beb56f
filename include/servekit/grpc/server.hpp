#pragma once
/// \file
/// server: the KServe v2 gRPC front end with Triton's extensions (inference.GRPCInferenceService
/// of proto/servekit/grpc/grpc_service.proto) and gRPC's health service, over the same
/// model_repository as the HTTP server.
///
///     servekit::model_repository models{"models", my_backends{}};
///     models.load_all();
///     servekit::grpc::server server{models, {.port = 8001}};
///     std::thread t{[&] { server.run(); }}; // or run() on this thread
///     ...
///     server.stop(); // t's run() returns once every call in flight is answered
///
/// Threading: gRPC's asynchronous completion-queue API, one completion queue per thread
/// (options.thread_count), each with calls of every RPC posted in advance, as gRPC's performance
/// notes advise and Triton does; no thread per request. A ModelInfer call (or a stream's request)
/// holds no thread while the model works on it: the response sink (on a model instance thread)
/// encodes the response there and finishes the call. Repository load/unload run on a separate
/// thread.
///
/// This header includes no gRPC header: the front end and the generated classes are compiled
/// once into servekit::grpc (src/grpc/), so including it costs what model_repository costs.

#include <servekit/grpc/server_options.hpp>
#include <servekit/repository/model_repository.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace servekit::grpc {

namespace detail {
class server_state;
} // namespace detail

/// The gRPC front end. Construction binds and listens (so port() is known at once); run() serves
/// until stop(). RPCs (docs/grpc.md):
/// - ServerLive, ServerReady, ModelReady; ServerMetadata, ModelMetadata, ModelConfig;
/// - ModelInfer (typed contents or raw_input_contents, raw_output_contents out, parameters both
///   ways; a decoupled model is refused: use ModelStreamInfer);
/// - ModelStreamInfer (every response of each request, with Triton's `triton_final_response`;
///   an error answers its request in `error_message` and the stream goes on);
/// - ModelStatistics, RepositoryIndex, RepositoryModelLoad, RepositoryModelUnload;
/// - grpc.health.v1.Health/Check.
/// The shared-memory, trace and log RPCs and Health/Watch answer UNIMPLEMENTED naming what is
/// missing.
///
/// Errors carry the HTTP front end's messages, with Triton's gRPC status codes: INVALID_ARGUMENT
/// (bad input), NOT_FOUND (unknown model or version), UNAVAILABLE (not ready, queue full,
/// stopping, model control off), RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, CANCELLED, INTERNAL.
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

  /// Serves on options.thread_count threads until stop(); returns once every call in flight is
  /// answered (or exit_timeout passed) and the threads are joined.
  void run();

  /// Stops accepting calls and lets those in flight finish. Thread-safe and idempotent; may be
  /// called before run(), from another thread or from a signal-handling thread (not from a
  /// signal handler itself).
  void stop();

private:
  std::unique_ptr<detail::server_state> state_;
};

} // namespace servekit::grpc
