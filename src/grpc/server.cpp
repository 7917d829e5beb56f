// servekit::grpc::server (include/servekit/grpc/server.hpp): gRPC's asynchronous API, one
// completion queue per thread, every RPC's call posted in advance on each queue. The one
// translation unit that includes grpc++ (with the generated stubs), so that its parse cost is
// paid once.

#include <servekit/grpc/server.hpp>

#include "infer_codec.hpp"

#include <servekit/config/model_config_pbtxt.hpp>
#include <servekit/core/cancellation.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/status.hpp>
#include <servekit/http/endpoints.hpp>
#include <servekit/http/kserve_metadata.hpp>
#include <servekit/http/model_control.hpp>
#include <servekit/http/routing_headers.hpp>
#include <servekit/metrics/statistics.hpp>
#include <servekit/runtime/model_ref.hpp>

#include <servekit/grpc/grpc_service.grpc.pb.h>
#include <servekit/grpc/health.grpc.pb.h>

#include <fmt/format.h>
#include <google/protobuf/text_format.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace servekit::grpc {

namespace detail {

namespace {

using inference_service = inference::GRPCInferenceService::AsyncService;
using health_service = ::grpc::health::v1::Health::AsyncService;

/// Triton's mapping of its error codes onto gRPC's.
[[nodiscard]] ::grpc::StatusCode grpc_code(status_code code) noexcept {
  switch (code) {
  case status_code::ok:
    return ::grpc::StatusCode::OK;
  case status_code::invalid_argument:
    return ::grpc::StatusCode::INVALID_ARGUMENT;
  case status_code::not_found:
    return ::grpc::StatusCode::NOT_FOUND;
  case status_code::unavailable:
    return ::grpc::StatusCode::UNAVAILABLE;
  case status_code::resource_exhausted:
    return ::grpc::StatusCode::RESOURCE_EXHAUSTED;
  case status_code::deadline_exceeded:
    return ::grpc::StatusCode::DEADLINE_EXCEEDED;
  case status_code::cancelled:
    return ::grpc::StatusCode::CANCELLED;
  default:
    return ::grpc::StatusCode::INTERNAL;
  }
}

[[nodiscard]] ::grpc::Status to_grpc(const status& s) {
  return s.ok() ? ::grpc::Status::OK : ::grpc::Status{grpc_code(s.code()), s.message()};
}

/// What a completion queue's tag points at: an operation of a call, told whether it succeeded.
class call_base {
public:
  call_base() = default;
  call_base(const call_base&) = delete;
  call_base& operator=(const call_base&) = delete;
  virtual ~call_base() = default;
  virtual void proceed(bool ok) = 0;
  /// The queues are drained with no thread handling calls (a server destroyed without run()):
  /// `ok` as gRPC reported it. The operation is dropped as if it had failed, except where gRPC
  /// still owes a call a tag (see unary_call and stream_call).
  virtual void drain(bool /*ok*/) { proceed(false); }
};

} // namespace

class server_state {
public:
  server_state(model_repository& models, server_options options);
  server_state(const server_state&) = delete;
  server_state& operator=(const server_state&) = delete;
  ~server_state();

  void run();
  void stop();

  [[nodiscard]] model_repository& models() noexcept { return models_; }
  [[nodiscard]] const server_options& options() const noexcept { return options_; }
  [[nodiscard]] bool stopping() const noexcept { return stopping_.load(std::memory_order_acquire); }
  /// Readiness is false while stopping or draining (options().drain, shared with HTTP).
  [[nodiscard]] bool leaving() const noexcept {
    return stopping() || (options_.drain && options_.drain->draining());
  }
  /// The routing metadata's sequence id and priority put on `r` (options().routing), then the
  /// drain check (a new sequence is refused while draining).
  [[nodiscard]] status admit(const ::grpc::ServerContext& context, servekit::request& r,
                             std::string_view model) const;
  /// A submit's refusal as a draining server answers it (http::drain_state::redirect).
  [[nodiscard]] status redirect(status st) const {
    return options_.drain ? options_.drain->redirect(std::move(st)) : st;
  }
  [[nodiscard]] inference_service& inference_rpcs() noexcept { return inference_; }
  [[nodiscard]] health_service& health_rpcs() noexcept { return health_; }
  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }

  /// Posts a fresh call of `Call` on `cq`, unless the queues are being shut down.
  template <class Call>
  void post(::grpc::ServerCompletionQueue* cq) {
    const std::shared_lock lock{post_mutex_};
    if (!accepting_) {
      return;
    }
    (new Call(*this, cq))->start();
  }

  /// A call was matched with a client's / has been answered and released.
  void call_started() noexcept { in_flight_.fetch_add(1, std::memory_order_relaxed); }
  void call_ended() noexcept {
    if (in_flight_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      const std::lock_guard lock{mutex_};
      idle_.notify_all();
    }
  }

  /// Runs `task` on the repository thread (load and unload block for as long as a model takes).
  void run_admin(std::function<void()> task) {
    {
      const std::lock_guard lock{mutex_};
      admin_tasks_.push_back(std::move(task));
    }
    admin_wakeup_.notify_one();
  }

private:
  void post_all(::grpc::ServerCompletionQueue* cq);
  void poll(::grpc::ServerCompletionQueue* cq);
  void admin_loop();
  void shut_down_queues();

  model_repository& models_;
  server_options options_;
  inference_service inference_;
  health_service health_;
  std::vector<std::unique_ptr<::grpc::ServerCompletionQueue>> queues_;
  std::unique_ptr<::grpc::Server> server_;
  std::uint16_t port_ = 0;

  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> in_flight_{0};
  std::shared_mutex post_mutex_; // shared: posting a call; exclusive: closing the queues
  bool accepting_ = true;        // guarded by post_mutex_
  bool queues_shut_down_ = false;

  std::mutex mutex_; // guards stop_requested_, admin_tasks_, admin_done_
  std::condition_variable stop_requested_cv_;
  std::condition_variable idle_;
  std::condition_variable admin_wakeup_;
  bool stop_requested_ = false;
  bool admin_done_ = false;
  std::deque<std::function<void()>> admin_tasks_;
};

namespace {

// ---- unary calls ---------------------------------------------------------------------------

/// Whether the calls of a unary RPC submit a request to a model that a cancelled call cancels
/// (ModelInfer; see unary_call).
template <class Kind>
constexpr bool cancellable_kind = false;

/// One call of a unary RPC described by `Kind`: posted, matched with a client's request (then a
/// fresh one is posted in its place), handled, finished, deleted once gRPC is done with it and
/// every view of its request's bytes is released (ModelInfer's raw_input_contents; see refs_).
///
/// Kind: `service`, `request`, `response`; `static void post(server_state&, ServerContext*,
/// request*, ServerAsyncResponseWriter<response>*, ServerCompletionQueue*, void* tag)`; and
/// `static std::optional<::grpc::Status> handle(server_state&, unary_call&)`: a status finishes
/// the call now, nullopt means the handler has arranged for finish() to be called later.
/// With cancellable_kind<Kind>, the call asks gRPC to tell when it is done
/// (ServerContext::AsyncNotifyWhenDone), and a call that ends cancelled (the client cancelled or
/// went away, or its deadline passed) cancels the request its handler submitted.
template <class Kind>
class unary_call final : public call_base {
public:
  using request_type = typename Kind::request;
  using response_type = typename Kind::response;
  static constexpr bool cancellable = cancellable_kind<Kind>;

  unary_call(server_state& state, ::grpc::ServerCompletionQueue* cq) : state_{state}, cq_{cq} {}

  void start() {
    if constexpr (cancellable) {
      context_.AsyncNotifyWhenDone(&done_);
    }
    Kind::post(state_, &context_, &request_, &writer_, cq_, this);
  }

  void proceed(bool ok) override {
    if (!matched_) {
      if (!ok) { // the server is shutting down: this call was never matched, no done tag comes
        release(initial_refs);
        return;
      }
      matched_ = true;
      state_.call_started();
      // A cancellable call's done tag comes on this call's queue, whose one thread is running
      // this: on_done runs after handle() has returned.
      state_.post<unary_call>(cq_);
      std::optional<::grpc::Status> result;
      try {
        result = Kind::handle(state_, *this);
      } catch (const std::exception& e) {
        result = ::grpc::Status{::grpc::StatusCode::INTERNAL, e.what()};
      }
      if (result) {
        finish(*result);
      }
      return;
    }
    // Finish has completed (ok is false when the client had gone away: nothing to do).
    release();
  }

  /// Answers the call with response() (or with `s` alone, when it is an error). Once, from any
  /// thread; the call may be deleted as soon as it returns.
  void finish(const ::grpc::Status& s) {
    // A reference held across Finish: the queue's thread may see the completion and release
    // gRPC's reference before Finish returns here, and whichever release comes last deletes the
    // call. The two releases (acq_rel) also order this thread's writes to the response before
    // the deletion, which ThreadSanitizer cannot see through gRPC's own (uninstrumented)
    // synchronisation.
    acquire(this);
    if (s.ok()) {
      writer_.Finish(response_, s, this);
    } else {
      writer_.FinishWithError(s, this);
    }
    release();
  }

  [[nodiscard]] request_type& request() noexcept { return request_; }
  [[nodiscard]] response_type& response() noexcept { return response_; }
  [[nodiscard]] ::grpc::ServerContext& context() noexcept { return context_; }
  [[nodiscard]] server_state& state() noexcept { return state_; }

  /// A view of the request's bytes (or anything else that must keep the call alive) holds a
  /// reference; the call is deleted when gRPC's and every other reference are released.
  static void acquire(void* self) noexcept {
    static_cast<unary_call*>(self)->refs_.fetch_add(1, std::memory_order_relaxed);
  }
  static void release_view(void* self, std::byte*, std::size_t) noexcept {
    static_cast<unary_call*>(self)->release();
  }

  /// What a handler that finishes later keeps: set before the model or the repository thread
  /// may touch the call.
  std::shared_ptr<const loaded_model> model;
  std::vector<std::string> requested_outputs;
  /// The submitted request's cancellation (cancellable kinds): its token is the request's, and
  /// the call cancels it through `model` when gRPC says the call ended cancelled.
  std::optional<cancellation_source> cancel_source;

private:
  /// The tag of AsyncNotifyWhenDone: the call is over (answered, or cancelled).
  struct done_tag final : call_base {
    explicit done_tag(unary_call* c) noexcept : call{c} {}
    unary_call* call;
    void proceed(bool) override { call->on_done(); }
  };

  /// On the call's queue thread, after handle() (see proceed). A cancelled call whose request is
  /// still with the model cancels it there, as HTTP does for a client that leaves: a queued
  /// request is answered `cancelled` (into the cancelled call: Finish completes, unsent) and
  /// never executes. The call and `model` live until this returns (the done tag's reference).
  void on_done() {
    if (cancel_source && model && context_.IsCancelled()) {
      model->model().cancel(*cancel_source);
    }
    release();
  }

  /// gRPC matched the call, but it is being drained (call_base::drain): its done tag follows,
  /// which releases the other reference.
  void drain(bool ok) override {
    if (cancellable && !matched_ && ok) {
      release();
      return;
    }
    proceed(false);
  }

  void release(int n = 1) noexcept {
    if (refs_.fetch_sub(n, std::memory_order_acq_rel) == n) {
      const bool matched = matched_;
      server_state& state = state_;
      delete this;
      if (matched) {
        state.call_ended();
      }
    }
  }

  server_state& state_;
  ::grpc::ServerCompletionQueue* cq_;
  ::grpc::ServerContext context_;
  request_type request_;
  response_type response_;
  ::grpc::ServerAsyncResponseWriter<response_type> writer_{&context_};
  done_tag done_{this};
  bool matched_ = false;
  // gRPC's (until Finish completes) and, for a cancellable call, the done tag's.
  static constexpr int initial_refs = cancellable ? 2 : 1;
  std::atomic<int> refs_{initial_refs};
};

/// One call of a streaming RPC servekit does not implement yet: matched, then finished with
/// UNIMPLEMENTED and `Kind::message`. Kind: `stream` (the responder type), `request` (or void
/// for a bidirectional stream), `post(...)`.
template <class Kind>
class unimplemented_stream_call final : public call_base {
public:
  unimplemented_stream_call(server_state& state, ::grpc::ServerCompletionQueue* cq)
      : state_{state}, cq_{cq} {}

  void start() { Kind::post(state_, &context_, &request_, &stream_, cq_, this); }

  void proceed(bool ok) override {
    if (!matched_ && ok) {
      matched_ = true;
      state_.call_started();
      state_.post<unimplemented_stream_call>(cq_);
      stream_.Finish(::grpc::Status{::grpc::StatusCode::UNIMPLEMENTED, std::string{Kind::message}},
                     this);
      return;
    }
    const bool matched = matched_;
    server_state& state = state_;
    delete this;
    if (matched) {
      state.call_ended();
    }
  }

private:
  server_state& state_;
  ::grpc::ServerCompletionQueue* cq_;
  ::grpc::ServerContext context_;
  typename Kind::request request_;
  typename Kind::stream stream_{&context_};
  bool matched_ = false;
};

// SERVEKIT_GRPC_UNARY(NAME, SERVICE): the Kind of RPC NAME of `inference` (or `health`): its
// message types and how a call of it is posted; handle() is defined below.
#define SERVEKIT_GRPC_UNARY(NAME, REQUEST, RESPONSE, SERVICE)                                      \
  struct NAME##_kind {                                                                             \
    using request = REQUEST;                                                                       \
    using response = RESPONSE;                                                                     \
    static void post(server_state& s, ::grpc::ServerContext* context, request* r,                  \
                     ::grpc::ServerAsyncResponseWriter<response>* writer,                          \
                     ::grpc::ServerCompletionQueue* cq, void* tag) {                               \
      s.SERVICE().Request##NAME(context, r, writer, cq, cq, tag);                                  \
    }                                                                                              \
    static std::optional<::grpc::Status> handle(server_state& s, unary_call<NAME##_kind>& call);   \
  }

#define SERVEKIT_GRPC_INFERENCE_UNARY(NAME)                                                        \
  SERVEKIT_GRPC_UNARY(NAME, inference::NAME##Request, inference::NAME##Response, inference_rpcs)

SERVEKIT_GRPC_INFERENCE_UNARY(ServerLive);
SERVEKIT_GRPC_INFERENCE_UNARY(ServerReady);
SERVEKIT_GRPC_INFERENCE_UNARY(ModelReady);
SERVEKIT_GRPC_INFERENCE_UNARY(ServerMetadata);
SERVEKIT_GRPC_INFERENCE_UNARY(ModelMetadata);
SERVEKIT_GRPC_INFERENCE_UNARY(ModelInfer);
SERVEKIT_GRPC_INFERENCE_UNARY(ModelConfig);
SERVEKIT_GRPC_INFERENCE_UNARY(ModelStatistics);
SERVEKIT_GRPC_INFERENCE_UNARY(RepositoryIndex);
SERVEKIT_GRPC_INFERENCE_UNARY(RepositoryModelLoad);
SERVEKIT_GRPC_INFERENCE_UNARY(RepositoryModelUnload);
SERVEKIT_GRPC_INFERENCE_UNARY(SystemSharedMemoryStatus);
SERVEKIT_GRPC_INFERENCE_UNARY(SystemSharedMemoryRegister);
SERVEKIT_GRPC_INFERENCE_UNARY(SystemSharedMemoryUnregister);
SERVEKIT_GRPC_INFERENCE_UNARY(CudaSharedMemoryStatus);
SERVEKIT_GRPC_INFERENCE_UNARY(CudaSharedMemoryRegister);
SERVEKIT_GRPC_INFERENCE_UNARY(CudaSharedMemoryUnregister);
SERVEKIT_GRPC_INFERENCE_UNARY(TraceSetting);
SERVEKIT_GRPC_INFERENCE_UNARY(LogSettings);
SERVEKIT_GRPC_UNARY(Check, ::grpc::health::v1::HealthCheckRequest,
                    ::grpc::health::v1::HealthCheckResponse, health_rpcs);

#undef SERVEKIT_GRPC_INFERENCE_UNARY
#undef SERVEKIT_GRPC_UNARY

template <>
constexpr bool cancellable_kind<ModelInfer_kind> = true;

struct Watch_kind {
  using request = ::grpc::health::v1::HealthCheckRequest;
  using stream = ::grpc::ServerAsyncWriter<::grpc::health::v1::HealthCheckResponse>;
  static constexpr std::string_view message =
      "grpc.health.v1.Health/Watch is not implemented by this server: poll Check";
  static void post(server_state& s, ::grpc::ServerContext* context, request* r, stream* st,
                   ::grpc::ServerCompletionQueue* cq, void* tag) {
    s.health_rpcs().RequestWatch(context, r, st, cq, cq, tag);
  }
};

// ---- handlers --------------------------------------------------------------------------------

/// The model `name`, `version_text` asks for, or the status to answer (HTTP's messages).
[[nodiscard]] std::shared_ptr<const loaded_model> find_model(server_state& s,
                                                             const std::string& name,
                                                             const std::string& version_text,
                                                             ::grpc::Status& error) {
  std::int64_t version = -1;
  if (const status st = parse_model_version(version_text, version); !st.ok()) {
    error = to_grpc(st);
    return nullptr;
  }
  auto m = s.models().find(name, version);
  if (!m) {
    const auto missing = http::missing_model_status(s.models(), name, version);
    error = to_grpc(*missing);
  }
  return m;
}

std::optional<::grpc::Status> ServerLive_kind::handle(server_state&,
                                                      unary_call<ServerLive_kind>& c) {
  c.response().set_live(true);
  return ::grpc::Status::OK;
}

std::optional<::grpc::Status> ServerReady_kind::handle(server_state& s,
                                                       unary_call<ServerReady_kind>& c) {
  c.response().set_ready(http::server_ready(s.models(), s.options().strict_readiness, s.leaving()));
  return ::grpc::Status::OK;
}

std::optional<::grpc::Status> ModelReady_kind::handle(server_state& s,
                                                      unary_call<ModelReady_kind>& c) {
  std::int64_t version = -1;
  if (const status st = parse_model_version(c.request().version(), version); !st.ok()) {
    return to_grpc(st);
  }
  const auto& name = c.request().name();
  if (s.models().find(name, version)) {
    c.response().set_ready(true);
    return ::grpc::Status::OK;
  }
  // As HTTP's ready endpoint: an unknown model or version is an error, a known one not ready
  // is `false`.
  if (const auto missing =
          http::missing_model_status(s.models(), name, version, /*not_ready_is_error=*/false);
      missing && missing->code() == status_code::not_found) {
    return to_grpc(*missing);
  }
  c.response().set_ready(false);
  return ::grpc::Status::OK;
}

std::optional<::grpc::Status> ServerMetadata_kind::handle(server_state&,
                                                          unary_call<ServerMetadata_kind>& c) {
  c.response().set_name(std::string{http::server_name});
  c.response().set_version(std::string{http::server_version});
  for (const auto e : http::server_extensions) {
    c.response().add_extensions(std::string{e});
  }
  return ::grpc::Status::OK;
}

std::optional<::grpc::Status> ModelMetadata_kind::handle(server_state& s,
                                                         unary_call<ModelMetadata_kind>& c) {
  ::grpc::Status error;
  const auto m = find_model(s, c.request().name(), c.request().version(), error);
  if (!m) {
    return error;
  }
  const auto& config = m->options();
  auto& out = c.response();
  out.set_name(config.name);
  const auto versions = s.models().versions_of(config.name);
  if (versions.empty()) {
    out.add_versions(std::to_string(config.version));
  }
  for (const auto v : versions) {
    out.add_versions(std::to_string(v));
  }
  out.set_platform(config.platform.empty() ? config.backend : config.platform);
  const bool batching = config.max_batch_size.value_or(0) > 0;
  const auto put = [&](const auto& list, auto add) {
    for (const auto& t : list) {
      auto* e = add();
      e->set_name(t.name);
      e->set_datatype(std::string{to_string(t.type)});
      if (batching) {
        e->add_shape(-1);
      }
      for (const auto d : t.dims.dims()) {
        e->add_shape(d);
      }
    }
  };
  put(config.input, [&] { return out.add_inputs(); });
  put(config.output, [&] { return out.add_outputs(); });
  return ::grpc::Status::OK;
}

std::optional<::grpc::Status> ModelConfig_kind::handle(server_state& s,
                                                       unary_call<ModelConfig_kind>& c) {
  ::grpc::Status error;
  const auto m = find_model(s, c.request().name(), c.request().version(), error);
  if (!m) {
    return error;
  }
  // The config as HTTP's /config shows it, through its text form: one writer for both.
  const std::string text = save_model_config_pbtxt(m->options());
  if (!google::protobuf::TextFormat::ParseFromString(text, c.response().mutable_config())) {
    return ::grpc::Status{::grpc::StatusCode::INTERNAL,
                          fmt::format("cannot express the configuration of model '{}' as "
                                      "inference.ModelConfig",
                                      m->options().name)};
  }
  return ::grpc::Status::OK;
}

void put_duration(inference::StatisticDuration* out, const duration_stat& d) {
  out->set_count(d.count);
  out->set_ns(d.ns);
}

void put_statistics(inference::ModelStatistics& out, const model_options& config,
                    const statistics_snapshot& stats) {
  out.set_name(config.name);
  out.set_version(std::to_string(config.version));
  out.set_last_inference(stats.last_inference_ms);
  out.set_inference_count(stats.inference_count);
  out.set_execution_count(stats.execution_count);
  auto* i = out.mutable_inference_stats();
  put_duration(i->mutable_success(), stats.success);
  put_duration(i->mutable_fail(), stats.fail);
  put_duration(i->mutable_queue(), stats.queue);
  put_duration(i->mutable_compute_input(), stats.compute_input);
  put_duration(i->mutable_compute_infer(), stats.compute_infer);
  put_duration(i->mutable_compute_output(), stats.compute_output);
  put_duration(i->mutable_cache_hit(), stats.cache_hit);
  put_duration(i->mutable_cache_miss(), stats.cache_miss);
  for (const auto& b : stats.batch_stats) {
    auto* e = out.add_batch_stats();
    e->set_batch_size(b.batch_size);
    put_duration(e->mutable_compute_input(), b.compute_input);
    put_duration(e->mutable_compute_infer(), b.compute_infer);
    put_duration(e->mutable_compute_output(), b.compute_output);
  }
  for (const auto& r : stats.response_stats) {
    auto& e = (*out.mutable_response_stats())[std::to_string(r.index)];
    put_duration(e.mutable_success(), r.success);
    put_duration(e.mutable_fail(), r.fail);
    put_duration(e.mutable_empty_response(), r.empty_response);
  }
  if (const auto& a = stats.adaptive_batching) {
    auto* e = out.mutable_adaptive_batching();
    e->set_target_latency_us(a->target_latency_us);
    e->set_target_percentile(a->target_percentile);
    e->set_wait_for(a->wait_for);
    e->set_max_delay_us(a->max_delay_us);
    e->set_at_most(a->at_most);
    e->set_fixed_latency_us(a->fixed_latency_us);
    e->set_per_element_latency_us(a->per_element_latency_us);
    e->set_profile_samples(a->profile_samples);
    e->set_arrival_rate(a->arrival_rate);
    e->set_recent_within_target(a->recent_within_target);
    e->set_requests(a->requests);
    e->set_within_target(a->within_target);
    e->set_refused_for_deadline(a->refused_for_deadline);
    e->set_controller_value(a->controller_value);
  }
}

std::optional<::grpc::Status> ModelStatistics_kind::handle(server_state& s,
                                                           unary_call<ModelStatistics_kind>& c) {
  if (c.request().name().empty()) {
    for (const auto& m : s.models().ready_models()) {
      put_statistics(*c.response().add_model_stats(), m->options(), m->model().statistics());
    }
    return ::grpc::Status::OK;
  }
  ::grpc::Status error;
  const auto m = find_model(s, c.request().name(), c.request().version(), error);
  if (!m) {
    return error;
  }
  put_statistics(*c.response().add_model_stats(), m->options(), m->model().statistics());
  return ::grpc::Status::OK;
}

std::optional<::grpc::Status> RepositoryIndex_kind::handle(server_state& s,
                                                           unary_call<RepositoryIndex_kind>& c) {
  for (const auto& e : s.models().index()) {
    if (c.request().ready() && e.state != model_ready_state::ready) {
      continue;
    }
    auto* m = c.response().add_models();
    m->set_name(e.name);
    m->set_version(e.version > 0 ? std::to_string(e.version) : "");
    m->set_state(std::string{to_string(e.state)});
    m->set_reason(e.reason);
  }
  return ::grpc::Status::OK;
}

/// Load or unload on the repository thread; the call is finished from there.
template <class Kind>
std::optional<::grpc::Status> change_repository(server_state& s, unary_call<Kind>& c, bool load) {
  bool unload_dependents = false;
  for (const auto& [key, value] : c.request().parameters()) {
    if (!load && key == "unload_dependents") {
      if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kBoolParam) {
        return ::grpc::Status{::grpc::StatusCode::INVALID_ARGUMENT,
                              "Unable to parse 'unload_dependents': attempt to access JSON "
                              "non-boolean as boolean"};
      }
      unload_dependents = value.bool_param();
      continue;
    }
    return ::grpc::Status{
        ::grpc::StatusCode::INVALID_ARGUMENT,
        fmt::format("repository {} parameter '{}' is not supported by this server{}",
                    load ? "load" : "unload", key,
                    load ? "; edit config.json in the repository and load again"
                         : " (it takes unload_dependents)")};
  }
  if (!s.options().model_control.load_unload_allowed()) {
    return ::grpc::Status{::grpc::StatusCode::UNAVAILABLE,
                          std::string{http::model_control_disabled_message}};
  }
  s.run_admin([&s, &c, load, unload_dependents] {
    const std::string& name = c.request().model_name();
    status st;
    try {
      st = load ? s.models().load(name) : s.models().unload(name, unload_dependents);
    } catch (const std::exception& e) {
      st = internal_error(
          fmt::format("failed to {} '{}': {}", load ? "load" : "unload", name, e.what()));
    }
    c.finish(to_grpc(st));
  });
  return std::nullopt;
}

std::optional<::grpc::Status>
RepositoryModelLoad_kind::handle(server_state& s, unary_call<RepositoryModelLoad_kind>& c) {
  return change_repository(s, c, /*load=*/true);
}

std::optional<::grpc::Status>
RepositoryModelUnload_kind::handle(server_state& s, unary_call<RepositoryModelUnload_kind>& c) {
  return change_repository(s, c, /*load=*/false);
}

[[nodiscard]] ::grpc::Status unimplemented(std::string_view what) {
  return ::grpc::Status{::grpc::StatusCode::UNIMPLEMENTED,
                        fmt::format("{} is not implemented by this server", what)};
}

#define SERVEKIT_GRPC_UNIMPLEMENTED(NAME, WHAT)                                                    \
  std::optional<::grpc::Status> NAME##_kind::handle(server_state&, unary_call<NAME##_kind>&) {     \
    return unimplemented(WHAT);                                                                    \
  }
SERVEKIT_GRPC_UNIMPLEMENTED(SystemSharedMemoryStatus,
                            "system shared memory (Triton's shared-memory extension)")
SERVEKIT_GRPC_UNIMPLEMENTED(SystemSharedMemoryRegister,
                            "system shared memory (Triton's shared-memory extension)")
SERVEKIT_GRPC_UNIMPLEMENTED(SystemSharedMemoryUnregister,
                            "system shared memory (Triton's shared-memory extension)")
SERVEKIT_GRPC_UNIMPLEMENTED(CudaSharedMemoryStatus,
                            "CUDA shared memory (Triton's shared-memory extension)")
SERVEKIT_GRPC_UNIMPLEMENTED(CudaSharedMemoryRegister,
                            "CUDA shared memory (Triton's shared-memory extension)")
SERVEKIT_GRPC_UNIMPLEMENTED(CudaSharedMemoryUnregister,
                            "CUDA shared memory (Triton's shared-memory extension)")
SERVEKIT_GRPC_UNIMPLEMENTED(TraceSetting, "TraceSetting (Triton's trace extension)")
SERVEKIT_GRPC_UNIMPLEMENTED(LogSettings, "LogSettings (Triton's logging extension)")
#undef SERVEKIT_GRPC_UNIMPLEMENTED

std::optional<::grpc::Status> Check_kind::handle(server_state& s, unary_call<Check_kind>& c) {
  const auto& service = c.request().service();
  if (!service.empty() && service != "inference.GRPCInferenceService") {
    return ::grpc::Status{::grpc::StatusCode::NOT_FOUND,
                          fmt::format("unknown service '{}'", service)};
  }
  const bool ready = http::server_ready(s.models(), s.options().strict_readiness, s.leaving());
  c.response().set_status(ready ? ::grpc::health::v1::HealthCheckResponse::SERVING
                                : ::grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  return ::grpc::Status::OK;
}

/// ModelInfer's response sink: on the model's thread, the final response into the call's
/// response message, then the call finished. Holds no reference: the call lives until its Finish
/// completes, which this sink starts as its last act.
struct infer_sink {
  unary_call<ModelInfer_kind>* call;

  void operator()(response&& r) const {
    if (!r.final) {
      return; // decoupled models are refused before submit
    }
    if (!r.ok()) {
      call->finish(to_grpc(r.status));
      return;
    }
    ::grpc::Status result;
    try {
      const auto& config = call->model->options();
      result = to_grpc(encode_infer_response(r, config.name, config.version,
                                             call->requested_outputs, call->response()));
    } catch (const std::exception& e) {
      result = ::grpc::Status{::grpc::StatusCode::INTERNAL,
                              std::string{"cannot encode the response: "} + e.what()};
    }
    call->finish(result);
  }
};

std::optional<::grpc::Status> ModelInfer_kind::handle(server_state& s,
                                                      unary_call<ModelInfer_kind>& c) {
  auto& in = c.request();
  ::grpc::Status error;
  c.model = find_model(s, in.model_name(), in.model_version(), error);
  if (!c.model) {
    return error;
  }
  const model_ref ref = c.model->model();
  if (ref.decoupled()) {
    return ::grpc::Status{
        ::grpc::StatusCode::INVALID_ARGUMENT,
        fmt::format("model '{}' is decoupled (it may send several responses per request): "
                    "ModelInfer cannot return them; use ModelStreamInfer",
                    c.model->options().name)};
  }
  servekit::request r;
  const raw_view_owner views{&unary_call<ModelInfer_kind>::acquire,
                             &unary_call<ModelInfer_kind>::release_view, &c};
  if (const status st = decode_infer_request(in, r, s.options().limits, views); !st.ok()) {
    return to_grpc(st);
  }
  if (const status st =
          check_requested_outputs(r.requested_outputs, ref.outputs(), c.model->options().name);
      !st.ok()) {
    return to_grpc(st);
  }
  if (const status st = s.admit(c.context(), r, c.model->options().name); !st.ok()) {
    return to_grpc(st);
  }
  c.requested_outputs = r.requested_outputs;
  // A client that cancels, goes away or lets its deadline pass cancels the request (see
  // unary_call::on_done, which reads cancel_source on this thread after this returns).
  c.cancel_source.emplace();
  r.cancellation = c.cancel_source->token();
  // From a successful submit on, the sink owns the call's response: this thread must not touch
  // the call again.
  if (const status st = s.redirect(ref.submit(std::move(r), infer_sink{&c})); !st.ok()) {
    return to_grpc(st);
  }
  return std::nullopt;
}

// ---- ModelStreamInfer -------------------------------------------------------------------------

class stream_call;

/// One request read from a stream: its message (which raw views read in place, so it lives until
/// the last view is released) and what its responses need. Counted: one reference for the
/// request in flight (the sink's, until the final response), one per view; the last release frees
/// it and drops its reference on the stream.
struct stream_request {
  explicit stream_request(stream_call& s) : stream{s} {}

  stream_call& stream;
  inference::ModelInferRequest message;
  std::shared_ptr<const loaded_model> model;
  std::vector<std::string> requested_outputs;
  bool empty_final = false; // triton_enable_empty_final_response
  std::atomic<int> refs{1};
  // The stream's list of requests submitted and not yet finally answered (guarded by the
  // stream's mutex): what a cancelled stream cancels.
  stream_request* previous_in_flight = nullptr;
  stream_request* next_in_flight = nullptr;
  bool in_flight = false;

  static void acquire(void* self) noexcept {
    static_cast<stream_request*>(self)->refs.fetch_add(1, std::memory_order_relaxed);
  }
  static void release_view(void* self, std::byte*, std::size_t) noexcept {
    static_cast<stream_request*>(self)->release();
  }
  void release() noexcept;
};

/// One ModelStreamInfer stream: requests are read one after the other (so a sequence's requests
/// are submitted in the order sent) and submitted at once; every response of each (several for a
/// decoupled model) is written in the order the models answer, one write at a time, from
/// whichever thread answers; an error answers its request in `error_message` and the stream goes
/// on. When the client has closed its side and every request has had its final response written,
/// the stream finishes OK.
class stream_call final : public call_base {
public:
  stream_call(server_state& state, ::grpc::ServerCompletionQueue* cq) : state_{state}, cq_{cq} {}

  void start() {
    context_.AsyncNotifyWhenDone(&done_op_);
    state_.inference_rpcs().RequestModelStreamInfer(&context_, &stream_, cq_, cq_, &matched_op_);
  }

  void proceed(bool) override {} // every operation has a tag of its own (op)

  /// A response for the client, from the model's thread (or this one, for errors). `final_of`:
  /// the request whose final response this is, which is then released.
  void send(std::unique_ptr<inference::ModelStreamInferResponse> message,
            stream_request* final_of) {
    {
      const std::lock_guard lock{mutex_};
      if (message && !broken_) {
        writes_.push_back(std::move(message));
        if (!writing_) {
          writing_ = true;
          stream_.Write(*writes_.front(), &write_op_);
        }
      }
      if (final_of != nullptr) {
        --pending_;
        unlink(*final_of);
        finish_if_done();
      }
    }
    if (final_of != nullptr) {
      final_of->release();
    }
  }

  void add_ref() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      const bool matched = matched_;
      server_state& state = state_;
      delete this;
      if (matched) {
        state.call_ended();
      }
    }
  }

private:
  /// A completion-queue tag for one kind of operation of the stream.
  struct op final : call_base {
    op(stream_call* s, void (stream_call::*f)(bool)) : self{s}, on{f} {}
    stream_call* self;
    void (stream_call::*on)(bool);
    void proceed(bool ok) override { (self->*on)(ok); }
    void drain(bool ok) override {
      if (ok && on == &stream_call::on_matched) {
        self->release(); // matched by gRPC, never handled: its done tag follows
        return;
      }
      (self->*on)(false);
    }
  };

  void on_matched(bool ok) {
    if (!ok) { // the server is shutting down: never matched, no done tag comes
      delete this;
      return;
    }
    matched_ = true;
    state_.call_started();
    state_.post<stream_call>(cq_);
    read_next();
  }

  /// The stream is over (AsyncNotifyWhenDone), on the queue's thread. Cancelled (the client
  /// cancelled or went away, or its deadline passed), it cancels its requests still with their
  /// models, as HTTP does for a client that leaves: queued ones are answered `cancelled` and
  /// never execute, a sequence's request ends its sequence, and a decoupled model's backend sees
  /// request.cancellation and should stop. Their answers are not written.
  void on_done(bool) {
    if (context_.IsCancelled() && cancel_source_) {
      std::vector<std::shared_ptr<const loaded_model>> models;
      {
        const std::lock_guard lock{mutex_};
        broken_ = true;
        for (const stream_request* r = in_flight_; r != nullptr; r = r->next_in_flight) {
          if (std::find(models.begin(), models.end(), r->model) == models.end()) {
            models.push_back(r->model);
          }
        }
      }
      // Outside the lock: a model answers its queued requests here, through send().
      for (const auto& m : models) {
        m->model().cancel(*cancel_source_);
      }
    }
    release();
  }

  void link(stream_request& r) { // with mutex_ held
    r.in_flight = true;
    r.next_in_flight = in_flight_;
    if (in_flight_ != nullptr) {
      in_flight_->previous_in_flight = &r;
    }
    in_flight_ = &r;
  }
  void unlink(stream_request& r) { // with mutex_ held
    if (!r.in_flight) {
      return;
    }
    r.in_flight = false;
    (r.previous_in_flight != nullptr ? r.previous_in_flight->next_in_flight : in_flight_) =
        r.next_in_flight;
    if (r.next_in_flight != nullptr) {
      r.next_in_flight->previous_in_flight = r.previous_in_flight;
    }
  }

  void read_next() {
    add_ref();
    next_ = new stream_request{*this};
    stream_.Read(&next_->message, &read_op_);
  }

  void on_read(bool ok) {
    stream_request* request = std::exchange(next_, nullptr);
    if (!ok) { // the client closed its side (or went away)
      request->release();
      const std::lock_guard lock{mutex_};
      reads_done_ = true;
      finish_if_done();
      return;
    }
    handle(*request);
    read_next();
  }

  /// `message` answering `request` with an error (its id and model named, so a client can tell
  /// which request failed); the request is released.
  void fail(stream_request& request, const std::string& message) {
    auto m = std::make_unique<inference::ModelStreamInferResponse>();
    m->set_error_message(message);
    m->mutable_infer_response()->set_model_name(request.message.model_name());
    m->mutable_infer_response()->set_model_version(request.message.model_version());
    m->mutable_infer_response()->set_id(request.message.id());
    {
      const std::lock_guard lock{mutex_};
      ++pending_;
    }
    send(std::move(m), &request);
  }

  void handle(stream_request& request);
  void on_write(bool ok);
  void on_finished(bool) { release(); }

  void finish_if_done() { // with mutex_ held
    if (reads_done_ && pending_ == 0 && !writing_ && !finishing_) {
      finishing_ = true;
      stream_.Finish(::grpc::Status::OK, &finish_op_);
    }
  }

  server_state& state_;
  ::grpc::ServerCompletionQueue* cq_;
  ::grpc::ServerContext context_;
  ::grpc::ServerAsyncReaderWriter<inference::ModelStreamInferResponse, inference::ModelInferRequest>
      stream_{&context_};
  op matched_op_{this, &stream_call::on_matched};
  op read_op_{this, &stream_call::on_read};
  op write_op_{this, &stream_call::on_write};
  op finish_op_{this, &stream_call::on_finished};
  op done_op_{this, &stream_call::on_done};
  stream_request* next_ = nullptr; // the request being read (only the queue's thread)
  // Every request's token comes from it; made at the first submit (only the queue's thread).
  std::optional<cancellation_source> cancel_source_;
  // gRPC's (until Finish completes), the done tag's, one per stream_request.
  std::atomic<int> refs_{2};
  bool matched_ = false; // set on the queue's thread when matched, before any release

  std::mutex mutex_; // guards what follows
  std::deque<std::unique_ptr<inference::ModelStreamInferResponse>> writes_;
  std::size_t pending_ = 0;             // requests submitted whose final response is not yet queued
  stream_request* in_flight_ = nullptr; // those submitted, newest first
  bool writing_ = false;
  bool reads_done_ = false;
  bool finishing_ = false;
  bool broken_ = false; // a write failed: the client is gone, responses are dropped
};

void stream_request::release() noexcept {
  if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    stream_call& s = stream;
    delete this;
    s.release();
  }
}

void stream_call::on_write(bool ok) {
  const std::lock_guard lock{mutex_};
  writes_.pop_front();
  if (!ok) {
    broken_ = true;
    writes_.clear();
  }
  if (!writes_.empty()) {
    stream_.Write(*writes_.front(), &write_op_);
    return;
  }
  writing_ = false;
  finish_if_done();
}

/// ModelStreamInfer's response sink: each response into a ModelStreamInferResponse with
/// Triton's `triton_final_response` parameter, queued for writing; the final one releases the
/// request. A final response with no outputs and no parameters (a decoupled model's flag-only
/// final) is written only when the request asked with `triton_enable_empty_final_response`, as
/// Triton does.
struct stream_sink {
  stream_request* request;

  void operator()(response&& r) const {
    std::unique_ptr<inference::ModelStreamInferResponse> m;
    try {
      m = std::make_unique<inference::ModelStreamInferResponse>();
      auto& out = *m->mutable_infer_response();
      const auto& config = request->model->options();
      if (!r.ok()) {
        m->set_error_message(r.status.message());
        out.set_model_name(config.name);
        out.set_model_version(std::to_string(config.version));
        out.set_id(request->message.id());
      } else if (r.final && r.outputs.empty() && r.parameters.empty() && !request->empty_final) {
        m.reset();
      } else if (const status s = encode_infer_response(r, config.name, config.version,
                                                        request->requested_outputs, out);
                 !s.ok()) {
        m->set_error_message(s.message());
      } else {
        (*out.mutable_parameters())["triton_final_response"].set_bool_param(r.final);
      }
    } catch (...) {
      m.reset(); // out of memory: the response is lost, the stream goes on
    }
    request->stream.send(std::move(m), r.final ? request : nullptr);
  }
};

void stream_call::handle(stream_request& request) {
  auto& in = request.message;
  auto& parameters = *in.mutable_parameters();
  if (const auto it = parameters.find("triton_enable_empty_final_response");
      it != parameters.end()) {
    if (it->second.parameter_choice_case() != inference::InferParameter::kBoolParam) {
      fail(request, "Unable to parse 'triton_enable_empty_final_response': expected true or "
                    "false");
      return;
    }
    request.empty_final = it->second.bool_param();
    parameters.erase(it);
  }
  ::grpc::Status error;
  request.model = find_model(state_, in.model_name(), in.model_version(), error);
  if (!request.model) {
    fail(request, error.error_message());
    return;
  }
  const model_ref ref = request.model->model();
  servekit::request r;
  const raw_view_owner views{&stream_request::acquire, &stream_request::release_view, &request};
  if (const status st = decode_infer_request(in, r, state_.options().limits, views); !st.ok()) {
    fail(request, st.message());
    return;
  }
  if (const status st = check_requested_outputs(r.requested_outputs, ref.outputs(),
                                                request.model->options().name);
      !st.ok()) {
    fail(request, st.message());
    return;
  }
  if (const status st = state_.admit(context_, r, request.model->options().name); !st.ok()) {
    fail(request, st.message());
    return;
  }
  request.requested_outputs = r.requested_outputs;
  if (!cancel_source_) {
    cancel_source_.emplace(); // one allocation per stream, not per request
  }
  r.cancellation = cancel_source_->token();
  {
    const std::lock_guard lock{mutex_};
    ++pending_;
    link(request);
  }
  // From a successful submit on, the sink owns the request's reference.
  if (const status st = state_.redirect(ref.submit(std::move(r), stream_sink{&request}));
      !st.ok()) {
    {
      const std::lock_guard lock{mutex_};
      --pending_;
      unlink(request);
    }
    fail(request, st.message());
  }
}

[[nodiscard]] std::string listen_address(const std::string& host, std::uint16_t port) {
  if (host.find(':') != std::string::npos && !host.starts_with('[')) {
    return fmt::format("[{}]:{}", host, port); // an IPv6 literal
  }
  return fmt::format("{}:{}", host, port);
}

[[nodiscard]] int message_limit(std::size_t bytes) noexcept {
  return static_cast<int>(std::min<std::size_t>(bytes, std::numeric_limits<int>::max()));
}

} // namespace

server_state::server_state(model_repository& models, server_options options)
    : models_{models}, options_{std::move(options)} {
  if (options_.thread_count == 0) {
    options_.thread_count = std::max(1U, std::thread::hardware_concurrency());
  }
  // Metadata keys arrive in lower case: look the routing keys up that way.
  options_.routing.sequence_id = http::metadata_key(options_.routing.sequence_id);
  options_.routing.priority = http::metadata_key(options_.routing.priority);
  ::grpc::ServerBuilder builder;
  int selected_port = 0;
  builder.AddListeningPort(listen_address(options_.host, options_.port),
                           ::grpc::InsecureServerCredentials(), &selected_port);
  // One server per port: without this, gRPC sets SO_REUSEPORT and a second server on a port in
  // use would share it silently instead of failing.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(&inference_);
  builder.RegisterService(&health_);
  builder.SetMaxReceiveMessageSize(message_limit(options_.max_message_bytes));
  builder.SetMaxSendMessageSize(std::numeric_limits<int>::max());
  for (std::size_t i = 0; i < options_.thread_count; ++i) {
    queues_.push_back(builder.AddCompletionQueue());
  }
  server_ = builder.BuildAndStart();
  if (!server_ || selected_port <= 0) {
    if (server_) {
      server_->Shutdown();
    }
    shut_down_queues();
    throw std::system_error(std::make_error_code(std::errc::address_in_use),
                            fmt::format("servekit::grpc::server: cannot listen on {}",
                                        listen_address(options_.host, options_.port)));
  }
  port_ = static_cast<std::uint16_t>(selected_port);
  for (const auto& cq : queues_) {
    post_all(cq.get());
  }
}

server_state::~server_state() {
  if (!queues_shut_down_) { // never run
    server_->Shutdown(std::chrono::system_clock::now());
    shut_down_queues();
  }
}

void server_state::post_all(::grpc::ServerCompletionQueue* cq) {
  post<unary_call<ServerLive_kind>>(cq);
  post<unary_call<ServerReady_kind>>(cq);
  post<unary_call<ModelReady_kind>>(cq);
  post<unary_call<ServerMetadata_kind>>(cq);
  post<unary_call<ModelMetadata_kind>>(cq);
  post<unary_call<ModelInfer_kind>>(cq);
  post<unary_call<ModelConfig_kind>>(cq);
  post<unary_call<ModelStatistics_kind>>(cq);
  post<unary_call<RepositoryIndex_kind>>(cq);
  post<unary_call<RepositoryModelLoad_kind>>(cq);
  post<unary_call<RepositoryModelUnload_kind>>(cq);
  post<unary_call<SystemSharedMemoryStatus_kind>>(cq);
  post<unary_call<SystemSharedMemoryRegister_kind>>(cq);
  post<unary_call<SystemSharedMemoryUnregister_kind>>(cq);
  post<unary_call<CudaSharedMemoryStatus_kind>>(cq);
  post<unary_call<CudaSharedMemoryRegister_kind>>(cq);
  post<unary_call<CudaSharedMemoryUnregister_kind>>(cq);
  post<unary_call<TraceSetting_kind>>(cq);
  post<unary_call<LogSettings_kind>>(cq);
  post<unary_call<Check_kind>>(cq);
  post<stream_call>(cq);
  post<unimplemented_stream_call<Watch_kind>>(cq);
}

void server_state::poll(::grpc::ServerCompletionQueue* cq) {
  void* tag = nullptr;
  bool ok = false;
  while (cq->Next(&tag, &ok)) {
    static_cast<call_base*>(tag)->proceed(ok);
  }
}

void server_state::admin_loop() {
  std::unique_lock lock{mutex_};
  for (;;) {
    admin_wakeup_.wait(lock, [&] { return admin_done_ || !admin_tasks_.empty(); });
    if (admin_tasks_.empty()) {
      return; // done, and nothing left to run
    }
    auto task = std::move(admin_tasks_.front());
    admin_tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

void server_state::shut_down_queues() {
  {
    const std::unique_lock lock{post_mutex_};
    accepting_ = false;
  }
  for (const auto& cq : queues_) {
    cq->Shutdown();
  }
  // Drain what is left (calls posted and never matched) where no thread polls.
  for (const auto& cq : queues_) {
    void* tag = nullptr;
    bool ok = false;
    while (cq->Next(&tag, &ok)) {
      static_cast<call_base*>(tag)->drain(ok);
    }
  }
  queues_shut_down_ = true;
}

void server_state::run() {
  std::thread admin{[this] { admin_loop(); }};
  std::vector<std::thread> pollers;
  pollers.reserve(queues_.size());
  for (const auto& cq : queues_) {
    pollers.emplace_back([this, q = cq.get()] { poll(q); });
  }
  {
    std::unique_lock lock{mutex_};
    stop_requested_cv_.wait(lock, [&] { return stop_requested_; });
  }
  // No new calls; those in flight get exit_timeout to finish, then gRPC cancels them.
  server_->Shutdown(std::chrono::system_clock::now() + options_.exit_timeout);
  {
    std::unique_lock lock{mutex_};
    admin_done_ = true;
  }
  admin_wakeup_.notify_all();
  admin.join();
  {
    // A model may still answer a cancelled call: its Finish needs the queues.
    std::unique_lock lock{mutex_};
    idle_.wait(lock, [&] { return in_flight_.load(std::memory_order_acquire) == 0; });
  }
  {
    const std::unique_lock lock{post_mutex_};
    accepting_ = false;
  }
  for (const auto& cq : queues_) {
    cq->Shutdown();
  }
  for (auto& t : pollers) {
    t.join();
  }
  queues_shut_down_ = true;
}

status server_state::admit(const ::grpc::ServerContext& context, servekit::request& r,
                           std::string_view model) const {
  if (options_.routing.any()) {
    const auto& metadata = context.client_metadata();
    const auto find = [&metadata](const std::string& key) -> std::optional<std::string_view> {
      const auto it = metadata.find(::grpc::string_ref{key});
      if (it == metadata.end()) {
        return std::nullopt;
      }
      return std::string_view{it->second.data(), it->second.size()};
    };
    if (status st = http::apply_routing_headers(r, options_.routing, find); !st.ok()) {
      return st;
    }
  }
  return options_.drain ? options_.drain->admit(r, model) : status{};
}

void server_state::stop() {
  stopping_.store(true, std::memory_order_release);
  {
    const std::lock_guard lock{mutex_};
    stop_requested_ = true;
  }
  stop_requested_cv_.notify_all();
}

} // namespace detail

} // namespace servekit::grpc

#if defined(SERVEKIT_GRPC_TSAN_SUPPRESSIONS)
// ThreadSanitizer builds of servekit (SERVEKIT_SANITIZE=thread): Debian's gRPC, gpr and Abseil
// are not instrumented, so TSan sees their file descriptors and memory touched from several
// threads without the synchronisation (Abseil's futex-based mutexes) that orders them, and reports
// races inside them. Those reports are suppressed; a race in servekit's own code is still
// reported unless a frame of gRPC's is on its stack.
extern "C" const char* __tsan_default_suppressions() {
  return "race:libgrpc.so\n"
         "race:libgrpc++.so\n"
         "race:libgpr.so\n"
         "race:libabsl_\n";
}
#endif

namespace servekit::grpc {

server::server(model_repository& models, server_options options)
    : state_{std::make_unique<detail::server_state>(models, std::move(options))} {}

server::server(server&&) noexcept = default;
server& server::operator=(server&&) noexcept = default;
server::~server() = default;

std::uint16_t server::port() const noexcept { return state_->port(); }
const std::string& server::host() const noexcept { return state_->options().host; }
const server_options& server::options() const noexcept { return state_->options(); }
void server::run() { state_->run(); }
void server::stop() { state_->stop(); }

} // namespace servekit::grpc
