#pragma once
/// \file
/// server_options: what servekit::grpc::server is configured with (address, port, completion-
/// queue threads, readiness, model control). Kept apart from server.hpp so flag parsing needs no
/// gRPC.

#include <servekit/http/drain.hpp>
#include <servekit/http/model_control.hpp>
#include <servekit/http/request_limits.hpp>
#include <servekit/http/routing_headers.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace servekit::grpc {

/// The gRPC front end's settings. The defaults are Triton's where Triton has one.
struct server_options {
  std::string host = "127.0.0.1"; ///< address to listen on (IPv4 or IPv6 literal, or a name)
  std::uint16_t port = 8001;      ///< 0: the system picks a free port (see server::port())
  /// Threads, each polling a completion queue of its own (gRPC's advice for the async API); 0:
  /// std::thread::hardware_concurrency(). Triton's --grpc-infer-thread-count.
  std::size_t thread_count = 0;
  /// Largest request message accepted (gRPC's own default is 4 MiB; Triton's is INT32_MAX, so a
  /// large tensor goes through); a larger one gets RESOURCE_EXHAUSTED from gRPC.
  std::size_t max_message_bytes = std::size_t{0x7fffffff};
  /// true: ServerReady is true only while every model of the repository is ready (Triton's
  /// --strict-readiness); false: whenever the server is up and not stopping.
  bool strict_readiness = true;
  /// After stop(), how long calls in flight get to be answered before they are cancelled
  /// (Triton's --exit-timeout-secs).
  std::chrono::milliseconds exit_timeout{std::chrono::seconds{30}};
  /// The drain state (http/drain.hpp), shared with the HTTP front end of the same process:
  /// while draining, ServerReady is false and a request that would start a sequence is refused
  /// UNAVAILABLE. Null: never draining (stop() still stops).
  std::shared_ptr<http::drain_state> drain{};
  /// The metadata keys a proxy routes on (the sequence id, the priority), read as well as the
  /// request's parameters; a stream's metadata applies to each of its requests.
  http::routing_headers routing{};
  /// Who may load and unload models (RepositoryModelLoad/Unload answer UNAVAILABLE with HTTP's
  /// 503 message when not allowed). The HTTP-only restricted-API headers do not apply here.
  http::model_control_options model_control{};
  /// What one ModelInfer request may ask of the decoder (inputs, outputs, elements per input).
  http::request_limits limits{};
};

} // namespace servekit::grpc
