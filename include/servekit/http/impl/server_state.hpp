#pragma once
/// \file
/// The HTTP front end's shared part (http/server.hpp): the names every implementation file uses
/// (Asio and Beast aliases, limits, content types) and server_state, what the sessions share.
/// Its member functions are defined in http/impl/server.ipp.

#include <servekit/config/detail/json_teardown.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/http/drain.hpp>
#include <servekit/http/endpoints.hpp>
#include <servekit/http/server_options.hpp>
#include <servekit/repository/model_repository.hpp>

#include <utility> // before Asio: Boost 1.74's Asio needs it under GCC 12 in C++20

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/verb.hpp> // declares boost::beast::http, aliased below

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
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

/// A connection's executor. Each I/O thread runs an io_context of its own and a connection
/// lives on one of them, so its handlers never run concurrently: the io_context's executor is
/// the connection's strand, without asio::strand's lock, its per-connection allocation, or the
/// allocation Asio 1.74's strand makes in a destructor to reschedule itself (which would end
/// the process with std::terminate when memory runs out).
using strand_type = asio::io_context::executor_type;
using socket_type = tcp::socket::rebind_executor<strand_type>::other;
// Timers and the acceptor on the strand's own executor type, not the type-erased
// any_io_executor: Asio 1.74 copies an I/O object's executor into each operation in a noexcept
// constructor (handler_work), and a type-erased strand allocates there, so an allocation
// failure would call std::terminate.
using timer_type =
    asio::basic_waitable_timer<std::chrono::steady_clock,
                               asio::wait_traits<std::chrono::steady_clock>, strand_type>;
using acceptor_type = tcp::acceptor::rebind_executor<strand_type>::other;

inline constexpr std::string_view json_content_type = "application/json";
inline constexpr std::string_view binary_content_type = "application/octet-stream";
inline constexpr std::string_view event_stream_content_type = "text/event-stream; charset=utf-8";
/// Request headers (request line included) larger than this get 431.
inline constexpr std::uint32_t max_header_bytes = 16 * 1024;
/// After an error response that leaves request bytes unread (413, malformed request), the
/// connection reads and discards up to this much before closing, so the client sees the
/// response rather than a reset.
inline constexpr std::size_t max_drain_bytes = std::size_t{256} << 20;

/// The most one read ahead (an idle keep-alive connection, or one whose request waits on a
/// model) takes from the socket: what Beast's own reads take, at least 512 bytes.
inline constexpr std::size_t read_ahead_bytes = std::size_t{64} << 10;
/// Descriptors kept out of max_connections' default for model files, the repository and logs.
inline constexpr std::size_t descriptor_reserve = 256;
/// Past max_connections, this many more connections are read and answered 503; past that
/// they are closed at once, so a flood cannot take the descriptors the reserve keeps.
inline constexpr std::size_t connection_reject_reserve = 64;
/// Responses at least this large are compressed when the client's Accept-Encoding allows it;
/// smaller ones gain too little for the time.
inline constexpr std::size_t min_compressed_response_bytes = 1024;
/// A session's reusable strings shrink back when a large request grew them past this.
inline constexpr std::size_t max_kept_capacity = std::size_t{1} << 20;

[[nodiscard]] inline std::string_view to_std(beast::string_view s) noexcept {
  return {s.data(), s.size()};
}

/// A metadata builder's result as a body, whether the codec returns JSON or text. A JSON value
/// is dismantled once written, whatever happens: destroying it whole would allocate
/// (json_teardown.hpp).
template <class T>
void assign_body(std::string& body, T&& value) {
  if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    body.assign(std::string_view(value));
  } else {
    const servekit::detail::json_teardown teardown{value};
    body = dump_json(value);
  }
}

class session;

/// Raises the process's soft descriptor limit to its hard limit; returns the soft limit.
std::size_t raise_descriptor_limit() noexcept;
/// options.thread_count, or the number of hardware threads when it is 0.
server_options with_thread_count(server_options options);
/// One io_context per I/O thread, each told that one thread runs it (Asio then skips the
/// bookkeeping for several; posts from other threads still lock).
std::vector<std::unique_ptr<asio::io_context>> make_contexts(std::size_t count);
/// Releases the work guards of the I/O threads' io_contexts (server.ipp).
void release_guards(
    std::vector<asio::executor_work_guard<asio::io_context::executor_type>>& work) noexcept;

/// What the sessions share: the repository, the options, the io_context and the set of live
/// sessions (so stop() can reach them).
class server_state {
public:
  server_state(model_repository& models, server_options options);

  server_state(const server_state&) = delete;
  server_state& operator=(const server_state&) = delete;

  ~server_state();

  // ---- read anywhere (set at construction; stopping_ is atomic) -------------------------

  [[nodiscard]] model_repository& models() noexcept { return models_; }
  [[nodiscard]] const server_options& options() const noexcept { return options_; }
  [[nodiscard]] asio::thread_pool& admin() noexcept { return admin_; }
  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  [[nodiscard]] bool stopping() const noexcept { return stopping_.load(std::memory_order_acquire); }
  /// The drain state (options().drain, made here when the options had none).
  [[nodiscard]] drain_state& drain() const noexcept { return *options_.drain; }
  /// Readiness is false while stopping or draining.
  [[nodiscard]] bool leaving() const noexcept { return stopping() || drain().draining(); }
  /// options().max_connections, or its default from the descriptor limit when that is 0.
  [[nodiscard]] std::size_t max_connections() const noexcept { return max_connections_; }
  /// Connections open now (sessions not yet destroyed).
  [[nodiscard]] std::size_t live_sessions();

  // ---- running and stopping -------------------------------------------------------------

  void start_accepting();
  void run();
  void stop();

  // The signal set is built here, on the caller's thread, so the handlers are installed before
  // this returns: a signal that arrives before run() starts is delivered once it does, instead of
  // killing the process. Called before run(), so nothing else touches signals_ yet.
  void stop_on_signals();

  /// Starts draining for `reason` (http/drain.hpp): readiness false now, stop() after
  /// options().drain_grace (at once when it is zero). Thread-safe; only the first call counts.
  void begin_drain(std::string reason);

  // ---- the live sessions (under mutex_) -------------------------------------------------

  /// Adds a session to the live set; false if the server is stopping (the session closes).
  [[nodiscard]] bool enlist(session* s, const std::shared_ptr<session>& owner);

  /// Removes a session; the last one gone after stop() lets run() return. Called when nothing
  /// of the session is left but its entry here: once the work guard goes, the server may be
  /// destroyed (run() returns), so releasing it is the last thing this does.
  void delist(session* s) noexcept;

  /// Lets run() return once nothing else is queued. The exit timer is work too: cancel it (on
  /// its strand, before the guard goes) so run() returns now rather than when it expires; stop()
  /// arms it on that strand, so the cancel always comes after it, whichever thread ran first.
  void release_work() noexcept;

  /// stop()'s exit timeout expired: closes every connection still open. On the acceptor strand.
  void force_close_sessions();

  void log_request(std::string_view method, std::string_view target, unsigned status,
                   std::chrono::steady_clock::duration elapsed) const;

private:
  // ---- the acceptor (on acceptor_strand_, once listening) -------------------------------

  void listen();
  void accept();
  void accept_next() noexcept;
  void resume_accepting() noexcept;

  /// Under mutex_: whether the caller is the one to release the work guard (stopping, no
  /// session left, and nobody claimed it before). The claimant resets work_ after unlocking,
  /// as its very last access to the server; nobody else touches work_ after the claim.
  [[nodiscard]] bool claim_work_release() noexcept;

  model_repository& models_;
  server_options options_;
  std::uint16_t port_ = 0;
  std::size_t max_connections_ = 0;
  std::atomic<bool> stopping_{false};

  // The live sessions, and the work guard that keeps run() going until the last one is gone
  // after stop() (a request waiting on a model has no pending I/O to keep run() busy). Declared
  // before the io_context so they outlive the sessions it destroys.
  std::mutex mutex_;
  std::unordered_map<session*, std::weak_ptr<session>> sessions_;
  bool stopping_locked_ = false;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  bool work_released_ = false;

  /// One per I/O thread (options_.thread_count), each run by its thread alone.
  std::vector<std::unique_ptr<asio::io_context>> contexts_;
  std::size_t next_context_ = 0; ///< the context of the next accepted connection; acceptor's
  strand_type acceptor_strand_;  ///< contexts_[0]'s
  acceptor_type acceptor_;
  std::optional<asio::signal_set> signals_;
  std::optional<timer_type> retry_timer_;
  /// Which accept (or accept retry) is pending, 0 if none: resume_accepting() starts one when
  /// a handler threw and none is left. accept_generation_ on the acceptor strand.
  std::atomic<std::uint64_t> accept_armed_{0};
  std::uint64_t accept_generation_ = 0;
  /// Held by a pending accept's handler: when the handler goes (run, or lost to an exception
  /// before it ran), that accept is no longer pending.
  struct accept_watch {
    server_state* server = nullptr;
    std::uint64_t generation = 0;
    accept_watch(server_state* s, std::uint64_t g) noexcept : server{s}, generation{g} {}
    accept_watch(accept_watch&& other) noexcept
        : server{std::exchange(other.server, nullptr)}, generation{other.generation} {}
    accept_watch(const accept_watch&) = delete;
    accept_watch& operator=(const accept_watch&) = delete;
    accept_watch& operator=(accept_watch&&) = delete;
    ~accept_watch() {
      if (server != nullptr) {
        std::uint64_t expected = generation;
        server->accept_armed_.compare_exchange_strong(expected, 0);
      }
    }
  };
  std::optional<timer_type> exit_timer_;  ///< armed by stop(): options_.exit_timeout
  std::optional<timer_type> drain_timer_; ///< armed by begin_drain(): options_.drain_grace
  // Repository load/unload block (they build or drain models), so they run here, one at a time.
  asio::thread_pool admin_{1};
};

} // namespace detail

} // namespace servekit::http
