#pragma once
/// \file
/// One HTTP connection of the front end (http/server.hpp): the session class. Its member
/// functions are defined by purpose, one implementation file each:
/// - http/impl/session_transport.ipp: starting, reading, content codings, the deadline;
/// - http/impl/session_write.ipp: writing, keep-alive, draining, closing;
/// - http/impl/session_routing.ipp: the route of a request, and the answer for a missing model;
/// - http/impl/session_metadata.ipp: health, server and model metadata, model config;
/// - http/impl/session_infer.ipp: /infer and its response sink;
/// - http/impl/session_generate.ipp: /generate, /generate_stream (server-sent events), their sink;
/// - http/impl/session_repository.ipp: the repository index, load and unload;
/// - http/impl/session_statistics.ipp: model statistics and Prometheus metrics.

#include <servekit/core/cancellation.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/response_sink.hpp>
#include <servekit/http/decoded_infer_request.hpp>
#include <servekit/http/impl/server_state.hpp>
#include <servekit/http/openai_codec.hpp>
#include <servekit/http/routes.hpp>
#include <servekit/repository/model_repository.hpp>
#include <servekit/runtime/model_ref.hpp>

#include <utility> // before Asio: Boost 1.74's Asio needs it under GCC 12 in C++20

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/buffer_traits.hpp>
#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/optional/optional.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

namespace servekit::http {

namespace detail {

/// A request body held in a std::string that grows with the bytes that arrived. Beast's
/// string_body reserves the whole Content-Length on the first byte, so a client that announces
/// a body just under the limit and sends nothing more would hold that memory; this one never
/// holds more than about twice what was received (std::string grows geometrically).
struct growing_body {
  using value_type = std::string;

  class reader {
  public:
    template <bool IsRequest, class Fields>
    reader(bhttp::header<IsRequest, Fields>& /*header*/, value_type& body) : body_{body} {}

    void init(const boost::optional<std::uint64_t>& /*length*/, error_code& ec) { ec = {}; }

    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, error_code& ec) {
      const std::size_t extra = beast::buffer_bytes(buffers);
      if (extra > body_.max_size() - body_.size()) {
        ec = bhttp::error::buffer_overflow;
        return 0;
      }
      for (const auto b : beast::buffers_range_ref(buffers)) {
        body_.append(static_cast<const char*>(b.data()), b.size());
      }
      ec = {};
      return extra;
    }

    void finish(error_code& ec) { ec = {}; }

  private:
    value_type& body_;
  };
};

/// One connection: reads a request, answers it, reads the next (HTTP/1.1 keep-alive; one request
/// in flight at a time). Everything runs on the connection's strand except the encoding of an
/// infer response, which runs on the model's instance thread while the strand waits for it.
class session : public std::enable_shared_from_this<session> {
public:
  session(server_state& server, socket_type socket);

  session(const session&) = delete;
  session& operator=(const session&) = delete;
  ~session() = default;

  // ---- called by server_state (session_transport.ipp) -----------------------------------

  /// Registers with the server and starts reading, on the session's strand. over_limit: the
  /// server already has max_connections connections; the request is read and answered 503.
  void start(bool over_limit = false);
  /// stop(): closes an idle connection, or the one in flight after its response. On the strand.
  void request_stop();
  /// The exit timeout passed: closes the connection whatever it is doing. On the strand.
  void force_close();

  [[nodiscard]] const strand_type& executor() const noexcept { return strand_; }

  /// The response sink of an infer request: 16 bytes, stored inline in response_sink. Called
  /// on the model's instance thread (session_infer.ipp).
  struct infer_sink {
    std::shared_ptr<session> self;
    void operator()(response&& r);
  };

  /// The response sink of a generate or generate_stream request (same size as infer_sink). A
  /// decoupled model calls it once per response, from any thread, never concurrently for one
  /// request, the final response last (session_generate.ipp).
  struct generate_sink {
    std::shared_ptr<session> self;
    void operator()(response&& r);
  };

  /// Runs `step` on the session's strand, from a thread that is not the server's (a model's
  /// instance thread): the step that writes a response must not be lost to an allocation
  /// failure, or its client would wait forever. A post to an io_context allocates its
  /// operation before queueing it, so a failed post left nothing behind and is tried again,
  /// every millisecond while memory is exhausted.
  template <class Step>
  static void post_reliably(const std::shared_ptr<session>& self, const Step& step) noexcept {
    for (;;) {
      try {
        asio::post(self->strand_, step);
        return;
      } catch (const std::bad_alloc&) {
        std::this_thread::sleep_for(std::chrono::milliseconds{1});
      }
    }
  }

private:
  enum class phase : std::uint8_t { reading_header, reading_body, handling, writing, draining };

  // ---- transport, on the strand (session_transport.ipp) ---------------------------------

  void read_header(); ///< read_next_header(); closes if it runs out of memory
  void read_next_header();
  void read_header_now();
  void on_header(const error_code& ec);
  [[nodiscard]] bool framing_ok();
  void read_body();
  void on_body_bytes(const error_code& ec);
  void start_handling();
  [[nodiscard]] bool decode_content();
  void encode_content();
  /// Waits for the client's next bytes without a request to parse them into: on an idle
  /// keep-alive connection, and while a request waits on a model (so a client that leaves is
  /// seen at once). What arrives stays in the buffer for the next request.
  void read_ahead();
  void on_read_ahead(const error_code& ec, std::size_t n);
  /// Closes the connection if `timeout` passes before the next arm() or disarm() (a zero
  /// timeout disarms). Both only move the session's deadline; the timer follows it lazily
  /// (see start_timer), so a request does not pay for a timer wait per phase.
  void arm(std::chrono::milliseconds timeout);
  void disarm() noexcept;
  void start_timer(std::chrono::steady_clock::time_point expiry);
  void on_timer(std::uint32_t generation);
  void read_failed(const error_code& ec, bool request_started);
  void fail_request(unsigned status, std::string_view message);
  void reply(unsigned status, std::string_view content_type);
  void reply_empty(unsigned status);
  void reply_error(unsigned status, std::string_view message);
  void write(); ///< write_response(); closes if it runs out of memory
  void write_response();
  void on_write(const error_code& ec);
  void log() const;
  void recycle();
  void drain();
  void drain_some();
  void close();

  // ---- routing, on the strand (session_routing.ipp) -------------------------------------

  void handle();
  void dispatch_route();
  void reply_missing_model(bool ready_endpoint = false);

  // ---- health and metadata, on the strand (session_metadata.ipp) ------------------------

  void handle_health_ready();
  void handle_admin_drain();
  void handle_server_metadata();
  void handle_model_ready();
  void handle_model_metadata(); ///< .../{m}[/versions/{v}] and .../config

  // ---- infer (session_infer.ipp) --------------------------------------------------------

  void handle_infer();                               ///< on the strand
  void encode_infer_response(response&& r) noexcept; ///< in the sink

  // ---- cancellation from the network (session_infer.ipp), on the strand -----------------

  /// Lets the request about to be submitted to `m` be cancelled when its client leaves.
  void make_cancellable(request& r, const model_ref& m);
  /// The routing headers' sequence id and priority put on `r` (options().routing), then the
  /// drain check (a new sequence is refused while draining). Not ok: the reply's status.
  [[nodiscard]] status admit(request& r, std::string_view model) const;
  /// The client of the request in flight left: cancels it (see session_infer.ipp).
  void cancel_in_flight();

  // ---- generate and generate_stream (session_generate.ipp) ------------------------------

  void handle_generate(bool stream); ///< on the strand
  /// Submits a generate request (or an OpenAI one) with the generate sink, on the strand.
  [[nodiscard]] status submit_generate(request&& r, const model_ref& ref, bool stream);
  /// POST /v1/completions and /v1/chat/completions (OpenAI-compatible), on the strand: the
  /// generate machinery with the OpenAI codec (http/openai_codec.hpp).
  void handle_openai(openai_api api);
  void handle_openai_models(); ///< GET /v1/models, on the strand
  /// An error reply in OpenAI's form, on the strand.
  void reply_openai_error(unsigned status, std::string_view message);
  // In the sink, on the thread the model answers on:
  void collect_generate_response(const std::shared_ptr<session>& self, response&& r) noexcept;
  void stream_response(const std::shared_ptr<session>& self, response&& r) noexcept;
  // OpenAI requests, in the sink (session_openai.ipp): /generate's collection, a stream's events.
  void collect_openai_response(const response& r);
  [[nodiscard]] std::string openai_events(const response& r, unsigned& error_status);
  // On the strand: the events, written one after the other.
  void stream_push(std::string json, bool has_event, bool final, unsigned error_status);
  void stream_push_event(std::string json, bool has_event, bool final, unsigned error_status);
  void give_up_stream();
  void stream_write_next();
  void on_stream_write(const error_code& ec);
  void end_broken_stream();

  // ---- the model repository, on the strand (session_repository.ipp) ---------------------

  void handle_repository_index();
  void handle_repository_load_unload();
  /// Runs the load or unload on the admin thread, answers on the strand.
  void handle_repository_change(bool load, bool unload_dependents);

  // ---- statistics and metrics, on the strand (session_statistics.ipp) -------------------

  void handle_model_stats();
  void handle_all_model_stats();
  void handle_metrics();

  // ---- members ---------------------------------------------------------------------------

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

  // Set at construction, then only read: any thread.
  server_state& server_;
  const strand_type strand_; // the socket's; kept apart so other threads can post to it

  /// Touched only on the connection's strand (strand_): the socket, the request being read,
  /// where the connection is in its cycle, and generate_stream's output.
  struct strand_state {
    explicit strand_state(socket_type s) : socket{std::move(s)} {}

    socket_type socket;
    /// The connection's only timer: header, body, keep-alive and write timeouts (arm()).
    timer_type timer{socket.get_executor()};
    /// When the connection is cut off; max(): no limit (disarmed).
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
    /// When the pending timer wait ends; max(): none pending. Never later than `deadline`.
    std::chrono::steady_clock::time_point timer_expiry =
        std::chrono::steady_clock::time_point::max();
    std::uint32_t timer_generation = 0; ///< bumped per timer wait: superseded waits are ignored
    bool reading_ahead = false;         ///< read_ahead()'s read is pending
    std::chrono::steady_clock::time_point body_deadline{}; ///< the whole body's time limit
    bool served_one = false; ///< a request was answered: the next wait is keep-alive
    bool over_limit = false; ///< past max_connections: the request gets 503
    beast::flat_buffer buffer;
    std::optional<bhttp::request_parser<growing_body>> parser;
    std::string spare_body;
    http::route route;
    session::phase phase = session::phase::reading_header;
    bool keep_alive = true;
    bool close_after = false;
    bool drain_after_write = false;
    bool stopping = false;
    std::size_t drained = 0;
    std::chrono::steady_clock::time_point started{};
    std::string head;  ///< the response's status line and headers, reused
    std::string coded; ///< a body being inflated or compressed (Content-Encoding), reused

    // generate_stream's output: chunks written one after the other.
    std::deque<std::string> stream_queue;
    std::size_t stream_queued_bytes = 0; ///< bounded by options().stream_buffer_bytes
    bool stream_writing = false;
    bool stream_head_sent = false;
    bool stream_final_queued = false;
    bool stream_broken = false;

    // Cancellation from the network: the request in flight carries a token of cancel_source,
    // and in_flight is the model answering it (alive while handoff_.model holds it: set before
    // submit, cleared where handoff_.model is released). One source per connection, made at
    // its first inference: a connection whose client left is closed, so a cancelled source is
    // never given to another request.
    std::optional<cancellation_source> cancel_source;
    std::optional<model_ref> in_flight;
  };
  strand_state on_strand_;

  /// The request in flight and its response, handed between the strand and the response sink.
  /// On the strand, except from a successful submit() (handle_infer, handle_generate) until the
  /// sink posts the write of the final response to the strand: meanwhile the sink owns them (on
  /// the model's instance thread, or wherever the model answers) and the strand must not touch
  /// them. generate_stream's sink only reads streaming, generate_model and generate_version.
  struct sink_state {
    // The response, reused from request to request.
    unsigned status = 200;
    std::string_view content_type;
    std::string body;
    std::optional<std::size_t> json_header_length;

    // The infer request in flight (read by the sink to encode the response).
    decoded_infer_request decoded;
    std::shared_ptr<const loaded_model> model;

    // The generate request in flight. Set on the strand before submit; then read by the sink.
    std::string generate_model;
    std::int64_t generate_version = 0;
    std::size_t generate_responses = 0; ///< /generate: responses with content (sink only)
    bool streaming = false;             ///< generate_stream: the sink streams events
    // An OpenAI request (unset for /generate): its endpoint, the response id and creation time,
    // whether the stream ends with a usage chunk, and the text of a non-streamed answer.
    std::optional<openai_api> openai;
    std::string openai_id;
    std::int64_t openai_created = 0;
    bool openai_include_usage = false;
    std::string openai_text;
  };
  sink_state handoff_;
};

static_assert(sizeof(session::infer_sink) <= response_sink::inline_size,
              "the infer sink must fit response_sink's inline storage (no allocation per request)");
static_assert(sizeof(session::generate_sink) <= response_sink::inline_size,
              "the generate sink must fit response_sink's inline storage");

} // namespace detail

} // namespace servekit::http
