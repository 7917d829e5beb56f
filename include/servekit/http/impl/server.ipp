#pragma once
/// \file
/// The HTTP front end's implementation (http/server.hpp): what the sessions share
/// (server_state), one session per connection, and server's members. Compiled once into
/// servekit::server by src/http/server.cpp, or included by http/server.hpp with
/// SERVEKIT_HEADER_ONLY.

#include <servekit/http/server.hpp>

#include <utility> // before Asio: Boost 1.74's Asio needs it under GCC 12 in C++20

#include <servekit/config/model_config_json.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/status.hpp>
#include <servekit/http/endpoints.hpp>
#include <servekit/http/generate_codec.hpp>
#include <servekit/http/kserve_codec.hpp>
#include <servekit/http/routes.hpp>
#include <servekit/http/server_options.hpp>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/verb.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace servekit::http {

namespace detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using error_code = boost::system::error_code;

using strand_type = asio::strand<asio::io_context::executor_type>;
using socket_type = tcp::socket::rebind_executor<strand_type>::other;

inline constexpr std::string_view json_content_type = "application/json";
inline constexpr std::string_view binary_content_type = "application/octet-stream";
inline constexpr std::string_view event_stream_content_type = "text/event-stream; charset=utf-8";
/// Request headers (request line included) larger than this get 431.
inline constexpr std::uint32_t max_header_bytes = 16 * 1024;
/// After an error response that leaves request bytes unread (413, malformed request), the
/// connection reads and discards up to this much before closing, so the client sees the
/// response rather than a reset.
inline constexpr std::size_t max_drain_bytes = std::size_t{256} << 20;
/// A session's reusable strings shrink back when a large request grew them past this.
inline constexpr std::size_t max_kept_capacity = std::size_t{1} << 20;

[[nodiscard]] inline std::string_view to_std(beast::string_view s) noexcept {
  return {s.data(), s.size()};
}

/// A metadata builder's result as a body, whether the codec returns JSON or text.
template <class T>
void assign_body(std::string& body, const T& value) {
  if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    body.assign(std::string_view(value));
  } else {
    body = dump_json(value);
  }
}

class session;

/// What the sessions share: the repository, the options, the io_context and the set of live
/// sessions (so stop() can reach them).
class server_state {
public:
  server_state(model_repository& models, server_options options)
      : models_{models}, options_{std::move(options)},
        ioc_{options_.thread_count == 1 ? 1 : BOOST_ASIO_CONCURRENCY_HINT_DEFAULT},
        acceptor_strand_{asio::make_strand(ioc_)}, acceptor_{acceptor_strand_} {
    if (options_.thread_count == 0) {
      options_.thread_count = std::max(1U, std::thread::hardware_concurrency());
    }
    listen(); // first: if it throws, no work guard outlives the io_context
    work_.emplace(ioc_.get_executor());
  }

  server_state(const server_state&) = delete;
  server_state& operator=(const server_state&) = delete;

  ~server_state() {
    admin_.join();
    // Sessions still queued in the io_context are destroyed with it, after this body; they
    // unregister themselves, and must find no work guard left to release.
    const std::lock_guard lock{mutex_};
    if (!work_released_) {
      work_released_ = true;
      work_.reset();
    }
  }

  [[nodiscard]] model_repository& models() noexcept { return models_; }
  [[nodiscard]] const server_options& options() const noexcept { return options_; }
  [[nodiscard]] asio::io_context& ioc() noexcept { return ioc_; }
  [[nodiscard]] asio::thread_pool& admin() noexcept { return admin_; }
  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  [[nodiscard]] bool stopping() const noexcept { return stopping_.load(std::memory_order_acquire); }

  void start_accepting() {
    asio::dispatch(acceptor_strand_, [this] { accept(); });
  }

  void run() {
    std::vector<std::thread> threads;
    threads.reserve(options_.thread_count - 1);
    std::exception_ptr failure;
    std::mutex failure_mutex;
    const auto body = [&] {
      try {
        ioc_.run();
      } catch (...) {
        const std::lock_guard lock{failure_mutex};
        if (!failure) {
          failure = std::current_exception();
        }
        ioc_.stop();
      }
    };
    for (std::size_t i = 1; i < options_.thread_count; ++i) {
      threads.emplace_back(body);
    }
    body();
    for (auto& t : threads) {
      t.join();
    }
    if (failure) {
      std::rethrow_exception(failure);
    }
  }

  void stop();

  // The signal set is built here, on the caller's thread, so the handlers are installed before
  // this returns: a signal that arrives before run() starts is delivered once it does, instead of
  // killing the process. Called before run(), so nothing else touches signals_ yet.
  void stop_on_signals() {
    if (signals_ || stopping()) {
      return;
    }
    signals_.emplace(acceptor_strand_, SIGINT, SIGTERM);
    signals_->async_wait([this](const error_code& ec, int) {
      if (!ec) {
        stop();
      }
    });
  }

  /// Adds a session to the live set; false if the server is stopping (the session closes).
  [[nodiscard]] bool enlist(session* s, const std::shared_ptr<session>& owner) {
    const std::lock_guard lock{mutex_};
    sessions_.emplace(s, owner);
    return !stopping_locked_;
  }

  /// Removes a session; the last one gone after stop() lets run() return. Called when nothing
  /// of the session is left but its entry here: once the work guard goes, the server may be
  /// destroyed (run() returns), so releasing it is the last thing this does.
  void delist(session* s) noexcept {
    bool release = false;
    {
      const std::lock_guard lock{mutex_};
      sessions_.erase(s);
      release = claim_work_release();
    }
    if (release) {
      release_work();
    }
  }

  /// Lets run() return once nothing else is queued. The exit timer is work too: cancel it (on
  /// its strand, before the guard goes) so run() returns now rather than when it expires; stop()
  /// arms it on that strand, so the cancel always comes after it, whichever thread ran first.
  void release_work() noexcept {
    asio::post(acceptor_strand_, [this] {
      if (exit_timer_) {
        exit_timer_->cancel();
      }
    });
    work_.reset();
  }

  /// stop()'s exit timeout expired: closes every connection still open. On the acceptor strand.
  void force_close_sessions();

  void log_request(std::string_view method, std::string_view target, unsigned status,
                   std::chrono::steady_clock::duration elapsed) const {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count();
    fmt::print(stderr, "HTTP {} {} {} {}us\n", method, target, status, us);
  }

private:
  void listen() {
    error_code ec;
    tcp::resolver resolver{ioc_};
    const auto results =
        resolver.resolve(options_.host, std::to_string(options_.port),
                         tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    const auto where = [&] {
      return "servekit::http::server: cannot listen on " + options_.host + ":" +
             std::to_string(options_.port);
    };
    if (ec) {
      throw std::system_error(ec, where());
    }
    if (results.empty()) {
      throw std::system_error(std::make_error_code(std::errc::address_not_available), where());
    }
    const tcp::endpoint endpoint = results.begin()->endpoint();
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) {
      acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    }
    if (!ec) {
      acceptor_.bind(endpoint, ec);
    }
    if (!ec) {
      acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    }
    if (ec) {
      throw std::system_error(ec, where());
    }
    port_ = acceptor_.local_endpoint().port();
  }

  void accept();

  model_repository& models_;
  server_options options_;
  std::uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};

  // The live sessions, and the work guard that keeps run() going until the last one is gone
  // after stop() (a request waiting on a model has no pending I/O to keep run() busy). Declared
  // before the io_context so they outlive the sessions it destroys.
  std::mutex mutex_;
  std::unordered_map<session*, std::weak_ptr<session>> sessions_;
  bool stopping_locked_ = false;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  bool work_released_ = false;

  /// Under mutex_: whether the caller is the one to release the work guard (stopping, no
  /// session left, and nobody claimed it before). The claimant resets work_ after unlocking,
  /// as its very last access to the server; nobody else touches work_ after the claim.
  [[nodiscard]] bool claim_work_release() noexcept {
    if (!stopping_locked_ || !sessions_.empty() || work_released_) {
      return false;
    }
    work_released_ = true;
    return true;
  }

  asio::io_context ioc_;
  strand_type acceptor_strand_;
  tcp::acceptor acceptor_;
  std::optional<asio::signal_set> signals_;
  std::optional<asio::steady_timer> retry_timer_;
  std::optional<asio::steady_timer> exit_timer_; ///< armed by stop(): options_.exit_timeout
  // Repository load/unload block (they build or drain models), so they run here, one at a time.
  asio::thread_pool admin_{1};
};

/// One connection: reads a request, answers it, reads the next (HTTP/1.1 keep-alive; one request
/// in flight at a time). Everything runs on the connection's strand except the encoding of an
/// infer response, which runs on the model's instance thread while the strand waits for it.
class session : public std::enable_shared_from_this<session> {
public:
  session(server_state& server, socket_type socket)
      : server_{server}, strand_{socket.get_executor()}, socket_{std::move(socket)} {
    enlistment_.self = this;
  }

  session(const session&) = delete;
  session& operator=(const session&) = delete;
  ~session() = default;

  /// Registers with the server and starts reading, on the session's strand.
  void start() {
    auto self = shared_from_this();
    const bool running = server_.enlist(this, self);
    enlistment_.server = &server_;
    asio::dispatch(strand_, [self = std::move(self), running] {
      if (running) {
        self->read_header();
      } else {
        self->close();
      }
    });
  }

  /// stop(): closes the connection if no request of it reached a model (idle, or a body still
  /// arriving: a client that stalls mid-body must not hold the server open), else lets the
  /// request in flight finish and closes after its response. On the strand.
  void request_stop() {
    stopping_ = true;
    if (phase_ == phase::reading_header || phase_ == phase::reading_body ||
        phase_ == phase::draining) {
      close();
    }
  }

  /// The exit timeout passed: closes the connection whatever it is doing (a client that does
  /// not read its response must not hold the server open). On the strand.
  void force_close() { close(); }

  [[nodiscard]] const strand_type& executor() const noexcept { return strand_; }

  /// The response sink of an infer request: 16 bytes, stored inline in response_sink.
  struct infer_sink {
    std::shared_ptr<session> self;
    void operator()(response&& r) {
      if (!r.final) {
        return; // decoupled models are refused before submit; nothing partial reaches here
      }
      self->encode_infer_response(std::move(r));
      // The handler gets a copy: `self` keeps the session (and so the server) alive until post()
      // has returned, whatever the strand does meanwhile on another thread.
      asio::post(self->strand_, [s = self] { s->write(); });
    }
  };

  /// The response sink of a generate or generate_stream request (same size as infer_sink). A
  /// decoupled model calls it once per response, from any thread, never concurrently for one
  /// request, the final response last.
  struct generate_sink {
    std::shared_ptr<session> self;
    void operator()(response&& r) {
      if (self->streaming_) {
        self->stream_response(self, std::move(r));
      } else {
        self->collect_generate_response(self, std::move(r));
      }
    }
  };

private:
  enum class phase : std::uint8_t { reading_header, reading_body, handling, writing, draining };

  // ---- reading --------------------------------------------------------------------------

  void read_header() {
    phase_ = phase::reading_header;
    if (stopping_) {
      close();
      return;
    }
    parser_.emplace();
    parser_->header_limit(max_header_bytes);
    parser_->body_limit(server_.options().max_body_bytes);
    // Lend the parser the previous request's body string, so its capacity is reused.
    spare_body_.clear();
    parser_->get().body().swap(spare_body_);
    bhttp::async_read_header(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](const error_code& ec, std::size_t) { self->on_header(ec); });
  }

  void on_header(const error_code& ec) {
    if (ec) {
      read_failed(ec, /*header_started=*/buffer_.size() > 0);
      return;
    }
    phase_ = phase::reading_body;
    if (server_.options().log_verbose > 0) {
      started_ = std::chrono::steady_clock::now();
    }
    if (parser_->is_done()) {
      handle();
      return;
    }
    const auto expect = parser_->get()[bhttp::field::expect];
    if (beast::iequals(expect, "100-continue")) {
      // The client waits for this before sending the body (curl does for large bodies).
      static constexpr std::string_view go_on = "HTTP/1.1 100 Continue\r\n\r\n";
      asio::async_write(socket_, asio::buffer(go_on.data(), go_on.size()),
                        [self = shared_from_this()](const error_code& e, std::size_t) {
                          if (e) {
                            self->close();
                          } else {
                            self->read_body();
                          }
                        });
      return;
    }
    // The body often came in with the header: parse what is buffered without another read.
    parser_->eager(true);
    while (buffer_.size() > 0 && !parser_->is_done()) {
      error_code pe;
      const std::size_t used = parser_->put(buffer_.data(), pe);
      buffer_.consume(used);
      if (pe == bhttp::error::need_more) {
        break;
      }
      if (pe) {
        read_failed(pe, true);
        return;
      }
      if (used == 0) {
        break;
      }
    }
    if (parser_->is_done()) {
      handle();
    } else {
      read_body();
    }
  }

  void read_body() {
    bhttp::async_read(socket_, buffer_, *parser_,
                      [self = shared_from_this()](const error_code& ec, std::size_t) {
                        if (ec) {
                          self->read_failed(ec, true);
                        } else {
                          self->handle();
                        }
                      });
  }

  /// A read ended in an error: answer what deserves an answer (413, 431, 400), else close.
  void read_failed(const error_code& ec, bool request_started) {
    if (ec == bhttp::error::body_limit) {
      fail_request(413, fmt::format("request body exceeds the limit of {} bytes",
                                    server_.options().max_body_bytes));
      return;
    }
    if (ec == bhttp::error::header_limit) {
      fail_request(431,
                   fmt::format("request header exceeds the limit of {} bytes", max_header_bytes));
      return;
    }
    const bool transport = ec == asio::error::operation_aborted || ec == asio::error::eof ||
                           ec == bhttp::error::end_of_stream ||
                           ec == bhttp::error::partial_message ||
                           ec.category() == asio::error::get_system_category();
    if (transport || !request_started || !socket_.is_open()) {
      close(); // the client went away (or stop() closed an idle connection)
      return;
    }
    fail_request(400, "malformed HTTP request: " + ec.message());
  }

  /// Answers a request that could not be read whole, then drains and closes the connection.
  void fail_request(unsigned status, std::string_view message) {
    drain_after_write_ = true;
    keep_alive_ = false;
    reply_error(status, message);
  }

  // ---- dispatch -------------------------------------------------------------------------

  void handle() {
    phase_ = phase::handling;
    auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    try {
      parse_route(to_std(req.target()), route_);
      if (!route_.error.empty()) {
        reply_error(400, route_.error);
        return;
      }
      if (route_.kind == endpoint::unknown) {
        reply_error(404, fmt::format("no endpoint at {} {}", to_std(req.method_string()),
                                     to_std(req.target())));
        return;
      }
      const bhttp::verb wanted =
          method_for(route_.kind) == method::get ? bhttp::verb::get : bhttp::verb::post;
      if (req.method() != wanted) {
        reply_error(405,
                    fmt::format("{} takes {}, not {}", to_std(req.target()),
                                to_string(method_for(route_.kind)), to_std(req.method_string())));
        return;
      }
      dispatch_route();
    } catch (const std::exception& e) {
      reply_error(500, std::string("internal error: ") + e.what());
    }
  }

  void dispatch_route() {
    auto& models = server_.models();
    switch (route_.kind) {
    case endpoint::model_infer:
      handle_infer();
      return;
    case endpoint::model_generate:
    case endpoint::model_generate_stream:
      handle_generate(route_.kind == endpoint::model_generate_stream);
      return;
    case endpoint::health_live:
      reply_empty(200);
      return;
    case endpoint::health_ready:
      reply_empty(
          server_ready(models, server_.options().strict_readiness, server_.stopping()) ? 200 : 400);
      return;
    case endpoint::server_metadata:
      assign_body(body_, server_metadata_json());
      reply(200, json_content_type);
      return;
    case endpoint::model_ready:
      if (models.find(route_.model, route_.version)) {
        reply_empty(200);
      } else {
        reply_missing_model(/*ready_endpoint=*/true);
      }
      return;
    case endpoint::model_metadata:
    case endpoint::model_config:
    case endpoint::model_stats: {
      const auto m = models.find(route_.model, route_.version);
      if (!m) {
        reply_missing_model();
        return;
      }
      if (route_.kind == endpoint::model_metadata) {
        assign_body(body_, model_metadata_json(m->config(), models.versions_of(route_.model)));
      } else if (route_.kind == endpoint::model_config) {
        body_ = dump_json(save_model_config(m->config()));
      } else {
        body_ = dump_json(model_stats_json({m}));
      }
      reply(200, json_content_type);
      return;
    }
    case endpoint::all_model_stats:
      body_ = dump_json(model_stats_json(models.ready_models()));
      reply(200, json_content_type);
      return;
    case endpoint::repository_index: {
      bool ready_only = false;
      const auto& body = parser_->get().body();
      if (body.find_first_not_of(" \t\r\n") != std::string::npos) {
        const auto j = nlohmann::json::parse(body, nullptr, false);
        if (j.is_discarded() || !j.is_object()) {
          reply_error(400, "the repository index request body must be a JSON object");
          return;
        }
        if (const auto it = j.find("ready"); it != j.end()) {
          if (!it->is_boolean()) {
            reply_error(400, "the repository index request's \"ready\" must be a boolean");
            return;
          }
          ready_only = it->get<bool>();
        }
      }
      body_ = dump_json(repository_index_json(models.index(), ready_only));
      reply(200, json_content_type);
      return;
    }
    case endpoint::repository_load:
    case endpoint::repository_unload: {
      // Triton's load/unload bodies carry "parameters" (a config override, model files,
      // unload_dependents). We support none of them: refuse rather than ignore them silently.
      const auto& body = parser_->get().body();
      if (body.find_first_not_of(" \t\r\n") != std::string::npos) {
        const auto j = nlohmann::json::parse(body, nullptr, false);
        if (j.is_discarded() || !j.is_object()) {
          reply_error(400, "the repository load/unload request body must be a JSON object");
          return;
        }
        if (const auto it = j.find("parameters"); it != j.end() && !it->empty()) {
          reply_error(400, "repository load/unload parameters (config override, model files, "
                           "unload_dependents) are not supported by this server; "
                           "edit config.json in the repository and load again");
          return;
        }
      }
      handle_repository_change(route_.kind == endpoint::repository_load);
      return;
    }
    case endpoint::metrics:
      body_.clear();
      write_metrics(models, body_);
      reply(200, prometheus_content_type);
      return;
    case endpoint::unknown:
      break;
    }
    reply_error(404, "no such endpoint");
  }

  /// Answers a request for a model that find() did not return: 404 if the repository does not
  /// know it (or does not serve that version); if it knows it and it is not READY, 503 with the
  /// reason, or, for GET .../ready (`ready_endpoint`), Triton's bodiless 400.
  void reply_missing_model(bool ready_endpoint = false) {
    const auto entry = server_.models().status_of(route_.model);
    if (!entry) {
      reply_error(404, fmt::format("Request for unknown model: '{}' is not found", route_.model));
      return;
    }
    if (entry->state == model_state::ready && route_.version != -1) {
      reply_error(404, fmt::format("Request for unknown model: '{}' version {} is not found",
                                   route_.model, route_.version));
      return;
    }
    if (entry->state == model_state::ready) {
      // find() and status_of() read two snapshots: the model was published in between.
      reply_error(503, fmt::format("Request for model '{}' arrived while it was being loaded; "
                                   "send it again",
                                   route_.model));
      return;
    }
    if (ready_endpoint) {
      reply_empty(400);
      return;
    }
    std::string message = fmt::format("Request for model '{}' failed: the model is not ready ({})",
                                      route_.model, to_string(entry->state));
    if (!entry->reason.empty()) {
      message += ": ";
      message += entry->reason;
    }
    reply_error(503, message);
  }

  void handle_repository_change(bool load) {
    // Keep the session (and so run()) alive while the admin thread works; answer on the strand.
    asio::post(server_.admin(), [self = shared_from_this(), load, name = route_.model] {
      status s;
      try {
        s = load ? self->server_.models().load(name) : self->server_.models().unload(name);
      } catch (const std::exception& e) {
        s = internal_error(std::string(load ? "load" : "unload") + " failed: " + e.what());
      }
      asio::post(self->executor(), [self, s = std::move(s)] {
        if (s.ok()) {
          self->reply_empty(200);
        } else {
          self->reply_error(http_status_for(s.code()), s.message());
        }
      });
    });
  }

  // ---- infer ----------------------------------------------------------------------------

  void handle_infer() {
    model_ = server_.models().find(route_.model, route_.version);
    if (!model_) {
      reply_missing_model();
      return;
    }
    const auto& req = parser_->get();
    std::optional<std::size_t> header_length;
    if (const auto it = req.find("Inference-Header-Content-Length"); it != req.end()) {
      const auto text = to_std(it->value());
      std::size_t n = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
      if (ec != std::errc{} || end != text.data() + text.size()) {
        reply_error(400, fmt::format("invalid Inference-Header-Content-Length '{}'", text));
        return;
      }
      header_length = n;
    }
    if (status s = decode_infer_request(req.body(), header_length, decoded_); !s.ok()) {
      reply_error(http_status_for(s.code()), s.message());
      return;
    }
    const model_ref ref = model_->model();
    if (ref.decoupled()) {
      reply_error(400, fmt::format("model '{}' is decoupled (it may send several responses per "
                                   "request): /infer cannot return them; use POST "
                                   "/v2/models/{}/generate_stream (server-sent events)",
                                   route_.model, route_.model));
      return;
    }
    const auto outputs = ref.outputs();
    for (const auto& o : decoded_.outputs) {
      bool known = false;
      for (const auto& c : outputs) {
        known = known || c.name == o.name;
      }
      if (!known) {
        const std::string message = fmt::format("unexpected inference output '{}' for model '{}'",
                                                o.name, model_->config().name);
        reply_error(400, message);
        return;
      }
    }
    // From a successful submit on, the sink owns decoded_, model_ and the response strings
    // until it posts the write: this thread must not touch them. (The encoder reads only
    // decoded_.outputs and decoded_.binary_data_output, not the request moved out here.)
    status s = ref.submit(std::move(decoded_.request), infer_sink{shared_from_this()});
    if (!s.ok()) {
      reply_error(http_status_for(s.code()), s.message());
    }
  }

  /// On the model's instance thread (or wherever the model answers): the response into the
  /// session's strings. The strand is not touching them: it waits for the write this precedes.
  void encode_infer_response(response&& r) noexcept {
    json_header_length_.reset();
    try {
      if (r.ok()) {
        const status s = servekit::http::encode_infer_response(r, model_->config().name,
                                                               model_->config().version, decoded_,
                                                               body_, json_header_length_);
        // On failure the codec has put the error body in body_ already.
        status_ = s.ok() ? 200 : http_status_for(s.code());
        content_type_ = json_header_length_ ? binary_content_type : json_content_type;
      } else {
        status_ = http_status_for(r.status.code());
        body_ = encode_error(r.status.message());
        content_type_ = json_content_type;
      }
    } catch (const std::exception& e) {
      json_header_length_.reset();
      status_ = 500;
      content_type_ = json_content_type;
      try {
        body_ = encode_error(std::string("cannot encode the response: ") + e.what());
      } catch (...) {
        body_.assign(R"({"error":"cannot encode the response"})");
      }
    }
    // model_ is released in write(), on the strand: once handle_infer has returned from
    // submit, so the model outlives the submit call even if it was unloaded meanwhile.
  }

  // ---- generate (Triton's generate extension) -------------------------------------------

  /// POST .../generate (`stream` false) and .../generate_stream (`stream` true). The flat
  /// request becomes a KServe infer request (generate_codec.hpp), decoded and checked as /infer
  /// checks it. /generate answers with one JSON object: the model's only response (a decoupled
  /// model sending more than one gets 400 naming /generate_stream, as Triton refuses); an empty
  /// final response adds nothing. /generate_stream answers with server-sent events, one per
  /// response, chunked, written as the responses arrive; an error after the first event is an
  /// event {"error": "..."}, an error before it is an ordinary error reply.
  void handle_generate(bool stream) {
    model_ = server_.models().find(route_.model, route_.version);
    if (!model_) {
      reply_missing_model();
      return;
    }
    const model_ref ref = model_->model();
    if (status s =
            translate_generate_request(parser_->get().body(), model_->config().name, ref.inputs(),
                                       ref.max_batch_size() > 0, generate_json_);
        !s.ok()) {
      reply_error(http_status_for(s.code()), s.message());
      return;
    }
    if (status s = decode_infer_request(generate_json_, std::nullopt, decoded_); !s.ok()) {
      reply_error(http_status_for(s.code()), s.message());
      return;
    }
    streaming_ = stream;
    generate_responses_ = 0;
    generate_model_ = model_->config().name;
    generate_version_ = model_->config().version;
    stream_head_sent_ = false;
    stream_final_queued_ = false;
    stream_broken_ = false;
    status_ = 200;
    // From a successful submit on, the sink owns body_ and the generate_ members (non-stream)
    // until it posts the write: this thread must not touch them.
    status s = ref.submit(std::move(decoded_.request), generate_sink{shared_from_this()});
    if (!s.ok()) {
      streaming_ = false;
      reply_error(http_status_for(s.code()), s.message());
    }
  }

  /// /generate, on the thread the model answers on: keeps the one response in body_, and
  /// posts the write after the final one.
  void collect_generate_response(const std::shared_ptr<session>& self, response&& r) noexcept {
    try {
      if (!r.ok()) {
        if (status_ == 200) { // the first error wins; it replaces any response kept
          status_ = http_status_for(r.status.code());
          body_ = encode_error(r.status.message());
        }
      } else if (!r.final || !r.outputs.empty()) {
        ++generate_responses_;
        if (status_ == 200 && generate_responses_ == 1) {
          const status s = encode_generate_response(r, generate_model_, generate_version_, body_);
          status_ = s.ok() ? 200 : http_status_for(s.code());
        } else if (status_ == 200) {
          status_ = 400;
          body_ = encode_error(
              fmt::format("model '{}' sent more than one response: /generate returns exactly "
                          "one; use /v2/models/{}/generate_stream",
                          generate_model_, generate_model_));
        }
      }
      if (r.final && status_ == 200 && generate_responses_ == 0) {
        // A decoupled model that sent only an empty final response: no outputs.
        const status s =
            encode_generate_response(response{}, generate_model_, generate_version_, body_);
        status_ = s.ok() ? 200 : http_status_for(s.code());
      }
    } catch (...) {
      status_ = 500;
      body_ = R"({"error":"cannot encode the response"})";
    }
    if (r.final) {
      content_type_ = json_content_type;
      json_header_length_.reset();
      asio::post(self->strand_, [s = self] { s->write(); });
    }
  }

  /// /generate_stream, on the thread the model answers on: encodes the response and posts it to
  /// the strand, which writes the events in the order the model sent them.
  void stream_response(const std::shared_ptr<session>& self, response&& r) noexcept {
    std::string json;
    unsigned error_status = 0;
    bool has_event = true;
    try {
      if (!r.ok()) {
        error_status = http_status_for(r.status.code());
        json = encode_error(r.status.message());
      } else if (r.final && r.outputs.empty()) {
        has_event = false; // Triton sends no event for an empty final response
      } else if (const status s =
                     encode_generate_response(r, generate_model_, generate_version_, json);
                 !s.ok()) {
        error_status = http_status_for(s.code()); // json holds the error
      }
    } catch (...) {
      error_status = 500;
      json = R"({"error":"cannot encode the response"})";
    }
    asio::post(self->strand_, [s = self, json = std::move(json), has_event, error_status,
                               final = r.final]() mutable {
      s->stream_push(std::move(json), has_event, final, error_status);
    });
  }

  /// On the strand: queues one response's event (and the end of the body after the final).
  void stream_push(std::string json, bool has_event, bool final, unsigned error_status) {
    if (stream_broken_) {
      if (final) {
        end_broken_stream();
      }
      return; // the client is gone: the model's responses are dropped
    }
    if (!stream_head_sent_ && final && error_status != 0) {
      // Failed before anything was streamed: an ordinary error reply with the right status.
      streaming_ = false;
      body_ = std::move(json);
      reply(error_status, json_content_type);
      return;
    }
    if (!stream_head_sent_) {
      stream_head_sent_ = true;
      phase_ = phase::writing;
      close_after_ = !keep_alive_ || stopping_;
      std::string head = "HTTP/1.1 200 OK\r\nContent-Type: ";
      head += event_stream_content_type;
      head += "\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n";
      if (close_after_) {
        head += "Connection: close\r\n";
      }
      head += "\r\n";
      stream_queue_.push_back(std::move(head));
    }
    if (has_event) {
      const std::string event = sse_event(json);
      std::string chunk = fmt::format("{:x}\r\n", event.size());
      chunk += event;
      chunk += "\r\n";
      stream_queue_.push_back(std::move(chunk));
    }
    if (final) {
      stream_queue_.emplace_back("0\r\n\r\n");
      stream_final_queued_ = true;
    }
    stream_write_next();
  }

  void stream_write_next() {
    if (stream_writing_ || stream_queue_.empty()) {
      return;
    }
    stream_writing_ = true;
    asio::async_write(socket_, asio::buffer(stream_queue_.front()),
                      [self = shared_from_this()](const error_code& ec, std::size_t) {
                        self->on_stream_write(ec);
                      });
  }

  void on_stream_write(const error_code& ec) {
    stream_writing_ = false;
    if (ec) {
      // The client went away mid-stream. The model still answers the request (its sink holds
      // the session); its remaining responses are dropped, and the connection is closed.
      stream_broken_ = true;
      const bool final_seen = stream_final_queued_;
      stream_queue_.clear();
      close();
      if (final_seen) {
        end_broken_stream();
      }
      return;
    }
    stream_queue_.pop_front();
    if (!stream_queue_.empty()) {
      stream_write_next();
      return;
    }
    if (stream_final_queued_) {
      streaming_ = false;
      model_.reset();
      close_after_ = close_after_ || stopping_;
      status_ = 200;
      on_write(ec); // logs, then reads the next request or closes
    }
  }

  /// The final response of a stream whose client is gone: releases the model.
  void end_broken_stream() {
    streaming_ = false;
    stream_final_queued_ = false;
    model_.reset();
    if (server_.options().log_verbose > 0) {
      status_ = 499; // nginx's "client closed request", for the log line only
      log();
    }
  }

  // ---- writing --------------------------------------------------------------------------

  void reply(unsigned status, std::string_view content_type) {
    status_ = status;
    content_type_ = content_type;
    json_header_length_.reset();
    write();
  }

  void reply_empty(unsigned status) {
    body_.clear();
    reply(status, {});
  }

  void reply_error(unsigned status, std::string_view message) {
    body_ = encode_error(message);
    reply(status, json_content_type);
  }

  void write() {
    phase_ = phase::writing;
    model_.reset(); // a retired model's last reference goes to the repository's reaper
    close_after_ = !keep_alive_ || stopping_ || drain_after_write_;
    head_.clear();
    const auto reason = bhttp::obsolete_reason(bhttp::int_to_status(status_));
    head_ += "HTTP/1.1 ";
    head_ += fmt::format_int(status_).c_str();
    head_ += ' ';
    head_.append(reason.data(), reason.size());
    head_ += "\r\n";
    if (!content_type_.empty()) {
      head_ += "Content-Type: ";
      head_ += content_type_;
      head_ += "\r\n";
    }
    head_ += "Content-Length: ";
    head_ += fmt::format_int(body_.size()).c_str();
    head_ += "\r\n";
    if (json_header_length_) {
      head_ += "Inference-Header-Content-Length: ";
      head_ += fmt::format_int(*json_header_length_).c_str();
      head_ += "\r\n";
    }
    if (close_after_) {
      head_ += "Connection: close\r\n";
    }
    head_ += "\r\n";
    const std::array<asio::const_buffer, 2> buffers{asio::buffer(head_), asio::buffer(body_)};
    asio::async_write(
        socket_, buffers,
        [self = shared_from_this()](const error_code& ec, std::size_t) { self->on_write(ec); });
  }

  void on_write(const error_code& ec) {
    if (server_.options().log_verbose > 0) {
      log();
    }
    recycle();
    if (ec) {
      close(); // the client is gone: nothing more to do
      return;
    }
    if (drain_after_write_) {
      drain();
      return;
    }
    if (close_after_) {
      error_code ignored;
      socket_.shutdown(tcp::socket::shutdown_send, ignored);
      close();
      return;
    }
    read_header();
  }

  void log() const {
    std::string_view method = "-";
    std::string_view target = "-";
    if (parser_ && parser_->is_header_done()) {
      method = to_std(parser_->get().method_string());
      target = to_std(parser_->get().target());
    }
    const auto elapsed = parser_ && parser_->is_header_done()
                             ? std::chrono::steady_clock::now() - started_
                             : std::chrono::steady_clock::duration{};
    server_.log_request(method, target, status_, elapsed);
  }

  /// Takes the request body back from the parser for the next request, and keeps the reused
  /// strings from holding on to the memory of one huge request.
  void recycle() {
    if (parser_) {
      spare_body_.swap(parser_->get().body());
      parser_.reset();
    }
    for (std::string* s : {&spare_body_, &body_, &head_}) {
      if (s->capacity() > max_kept_capacity) {
        std::string{}.swap(*s);
      }
    }
  }

  /// Reads and discards what the client still sends after an error response, then closes.
  void drain() {
    phase_ = phase::draining;
    if (stopping_) {
      close();
      return;
    }
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    buffer_.clear();
    drained_ = 0;
    drain_some();
  }

  void drain_some() {
    socket_.async_read_some(buffer_.prepare(64 * 1024),
                            [self = shared_from_this()](const error_code& ec, std::size_t n) {
                              self->drained_ += n;
                              if (ec || self->drained_ > max_drain_bytes) {
                                self->close();
                              } else {
                                self->drain_some();
                              }
                            });
  }

  void close() {
    error_code ignored;
    socket_.close(ignored);
  }

  /// Delists the session from the server when it is destroyed. First member, so destroyed
  /// last: every Asio object of the session (socket, strand) is gone before the server may be.
  struct enlistment {
    server_state* server = nullptr;
    session* self = nullptr;
    enlistment() = default;
    enlistment(const enlistment&) = delete;
    enlistment& operator=(const enlistment&) = delete;
    ~enlistment() {
      if (server != nullptr) {
        server->delist(self);
      }
    }
  };
  enlistment enlistment_;

  server_state& server_;
  const strand_type strand_; // the socket's; kept apart so other threads can post to it
  socket_type socket_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::string spare_body_;
  route route_;
  phase phase_ = phase::reading_header;
  bool keep_alive_ = true;
  bool close_after_ = false;
  bool drain_after_write_ = false;
  bool stopping_ = false;
  std::size_t drained_ = 0;
  std::chrono::steady_clock::time_point started_{};

  // The response, reused from request to request.
  unsigned status_ = 200;
  std::string_view content_type_;
  std::string head_;
  std::string body_;
  std::optional<std::size_t> json_header_length_;

  // The infer request in flight (read by the sink to encode the response).
  decoded_infer_request decoded_;
  std::shared_ptr<const loaded_model> model_;

  // The generate request in flight. Set on the strand before submit; then read by the sink.
  std::string generate_json_; ///< the request translated into a KServe infer request
  std::string generate_model_;
  std::int64_t generate_version_ = 0;
  std::size_t generate_responses_ = 0; ///< /generate: responses with content (sink only)
  bool streaming_ = false;             ///< generate_stream: the sink streams events
  // generate_stream's output, on the strand: chunks written one after the other.
  std::deque<std::string> stream_queue_;
  bool stream_writing_ = false;
  bool stream_head_sent_ = false;
  bool stream_final_queued_ = false;
  bool stream_broken_ = false;
};

static_assert(sizeof(session::infer_sink) <= response_sink::inline_size,
              "the infer sink must fit response_sink's inline storage (no allocation per request)");
static_assert(sizeof(session::generate_sink) <= response_sink::inline_size,
              "the generate sink must fit response_sink's inline storage");

SERVEKIT_SERVER_DECL void server_state::accept() {
  acceptor_.async_accept(asio::make_strand(ioc_), [this](const error_code& ec, socket_type socket) {
    if (!acceptor_.is_open()) {
      return; // stop() closed it
    }
    if (ec) {
      // Out of descriptors and the like: retry shortly rather than spin.
      retry_timer_.emplace(acceptor_strand_, std::chrono::milliseconds(50));
      retry_timer_->async_wait([this](const error_code& e) {
        if (!e && acceptor_.is_open()) {
          accept();
        }
      });
      return;
    }
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    std::make_shared<session>(*this, std::move(socket))->start();
    accept();
  });
}

SERVEKIT_SERVER_DECL void server_state::force_close_sessions() {
  std::vector<std::shared_ptr<session>> live;
  {
    const std::lock_guard lock{mutex_};
    for (const auto& [raw, weak] : sessions_) {
      if (auto s = weak.lock()) {
        live.push_back(std::move(s));
      }
    }
  }
  for (const auto& s : live) {
    asio::post(s->executor(), [s] { s->force_close(); });
  }
}

SERVEKIT_SERVER_DECL void server_state::stop() {
  if (stopping_.exchange(true, std::memory_order_acq_rel)) {
    return;
  }
  asio::post(acceptor_strand_, [this] {
    error_code ignored;
    acceptor_.close(ignored);
    if (signals_) {
      signals_->cancel(ignored);
    }
    if (retry_timer_) {
      retry_timer_->cancel();
    }
    {
      const std::lock_guard lock{mutex_};
      if (work_released_) {
        return; // every connection is already gone
      }
    }
    exit_timer_.emplace(acceptor_strand_, options_.exit_timeout);
    exit_timer_->async_wait([this](const error_code& ec) {
      if (!ec) {
        force_close_sessions();
        // A decoupled request a backend never finishes would keep its session, and so run(),
        // alive: answer what the decoupled models still owe (`cancelled`).
        models_.shutdown_decoupled_models(shutdown_mode::cancel);
      }
    });
  });
  std::vector<std::shared_ptr<session>> live;
  bool release = false;
  {
    const std::lock_guard lock{mutex_};
    stopping_locked_ = true;
    live.reserve(sessions_.size());
    for (const auto& [raw, weak] : sessions_) {
      if (auto s = weak.lock()) {
        live.push_back(std::move(s));
      }
    }
    release = claim_work_release();
  }
  for (const auto& s : live) {
    asio::post(s->executor(), [s] { s->request_stop(); });
  }
  live.clear(); // may destroy sessions (and delist them) here, while the server surely lives
  if (release) {
    // No session left. The exit timer may be armed already (another io thread may have run the
    // handler posted above before work_released_ was set): release_work() cancels it too.
    release_work(); // last of all: run() may return
  }
}

} // namespace detail

SERVEKIT_SERVER_DECL server::server(model_repository& models, server_options options)
    : state_{std::make_unique<detail::server_state>(models, std::move(options))} {
  state_->start_accepting();
}

SERVEKIT_SERVER_DECL server::server(server&&) noexcept = default;
SERVEKIT_SERVER_DECL server& server::operator=(server&&) noexcept = default;
SERVEKIT_SERVER_DECL server::~server() = default;

SERVEKIT_SERVER_DECL std::uint16_t server::port() const noexcept { return state_->port(); }
SERVEKIT_SERVER_DECL const std::string& server::host() const noexcept {
  return state_->options().host;
}
SERVEKIT_SERVER_DECL const server_options& server::options() const noexcept {
  return state_->options();
}
SERVEKIT_SERVER_DECL void server::run() { state_->run(); }
SERVEKIT_SERVER_DECL void server::stop() { state_->stop(); }
SERVEKIT_SERVER_DECL void server::stop_on_signals() { state_->stop_on_signals(); }

} // namespace servekit::http
