#pragma once
/// \file
/// The HTTP front end's implementation (http/server.hpp), its shared part: server_state's members
/// (listening, accepting, running, stopping, the live sessions) and servekit::http::server's.
/// A session's members are in http/impl/session_*.ipp. Compiled once into servekit::server by
/// src/http/server.cpp, or included by http/server.hpp with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/http/impl/server_state.hpp>
#include <servekit/http/impl/session.hpp>
#include <servekit/http/server.hpp>
#include <servekit/http/server_options.hpp>
#include <servekit/repository/model_repository.hpp>

#include <utility> // before Asio: Boost 1.74's Asio needs it under GCC 12 in C++20

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>

#include <sys/resource.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

namespace servekit::http {

namespace detail {

/// After the exit timeout, how long the sessions get to write the "server is shutting down"
/// answers before every connection still open is closed.
inline constexpr std::chrono::milliseconds shutdown_grace{500};

SERVEKIT_DECL server_options with_thread_count(server_options options) {
  if (options.thread_count == 0) {
    options.thread_count = std::max(1U, std::thread::hardware_concurrency());
  }
  return options;
}

SERVEKIT_DECL std::vector<std::unique_ptr<asio::io_context>> make_contexts(std::size_t count) {
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  contexts.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    contexts.push_back(std::make_unique<asio::io_context>(1));
  }
  return contexts;
}

SERVEKIT_DECL server_state::server_state(model_repository& models, server_options options)
    : models_{models}, options_{with_thread_count(std::move(options))}, contexts_{make_contexts(
                                                                            options_.thread_count)},
      acceptor_strand_{contexts_.front()->get_executor()}, acceptor_{acceptor_strand_} {
  if (!options_.drain) {
    options_.drain = std::make_shared<drain_state>();
  }
  max_connections_ = options_.max_connections;
  if (const std::size_t limit = raise_descriptor_limit(); max_connections_ == 0) {
    max_connections_ = limit > 2 * descriptor_reserve ? limit - descriptor_reserve : limit / 2;
  }
  listen(); // first: if it throws, no work guard outlives the io_contexts
  work_.reserve(contexts_.size());
  for (const auto& context : contexts_) {
    work_.push_back(asio::make_work_guard(*context));
  }
}

/// Raises the soft RLIMIT_NOFILE to the hard limit (a server's connections are descriptors;
/// the soft default of 1,024 is far below what the system allows) and returns the soft limit
/// in force, or a large number when there is none.
SERVEKIT_DECL std::size_t raise_descriptor_limit() noexcept {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return 1024;
  }
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) {
      limit = raised;
    }
  }
  if (limit.rlim_cur == RLIM_INFINITY) {
    return std::size_t{1} << 20;
  }
  return static_cast<std::size_t>(limit.rlim_cur);
}

SERVEKIT_DECL std::size_t server_state::live_sessions() {
  const std::lock_guard lock{mutex_};
  return sessions_.size();
}

SERVEKIT_DECL server_state::~server_state() {
  admin_.join();
  // Sessions still queued in the io_context are destroyed with it, after this body; they
  // unregister themselves, and must find no work guard left to release.
  const std::lock_guard lock{mutex_};
  if (!work_released_) {
    work_released_ = true;
    work_.clear();
  }
}

SERVEKIT_DECL void server_state::start_accepting() {
  asio::dispatch(acceptor_strand_, [this] { accept(); });
}

SERVEKIT_DECL void server_state::run() {
  std::vector<std::thread> threads;
  threads.reserve(options_.thread_count - 1);
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const auto stop_all = [this] {
    for (const auto& context : contexts_) {
      context->stop();
    }
  };
  const auto body = [&](asio::io_context& context) {
    for (;;) {
      try {
        context.run();
        return;
      } catch (const std::bad_alloc&) {
        // An allocation failed in a handler: that handler's request fails, not the server. Its
        // session is destroyed (and its connection closed) when nothing else holds it; the
        // handlers that answer a request guard themselves (session_transport.ipp). Asio lets
        // run() go on after a handler threw. If it was the acceptor's (Asio allocates while
        // completing an accept, before the handler that would accept the next connection
        // runs), accepting starts again.
        resume_accepting();
      } catch (...) {
        const std::lock_guard lock{failure_mutex};
        if (!failure) {
          failure = std::current_exception();
        }
        stop_all();
        return;
      }
    }
  };
  for (std::size_t i = 1; i < contexts_.size(); ++i) {
    threads.emplace_back(body, std::ref(*contexts_[i]));
  }
  body(*contexts_.front());
  for (auto& t : threads) {
    t.join();
  }
  if (failure) {
    std::rethrow_exception(failure);
  }
}

SERVEKIT_DECL void server_state::stop_on_signals() {
  if (signals_ || stopping()) {
    return;
  }
  signals_.emplace(acceptor_strand_, SIGINT, SIGTERM);
  signals_->async_wait([this](const error_code& ec, int signal) {
    if (!ec) {
      // Give SIGINT and SIGTERM back their default action, so that a second one ends the
      // process at once (asio restores SIG_DFL when its last registration goes).
      error_code ignored;
      signals_->clear(ignored);
      begin_drain(signal == SIGINT ? "SIGINT" : "SIGTERM");
    }
  });
}

SERVEKIT_DECL void server_state::begin_drain(std::string reason) {
  if (stopping() || !drain().begin(std::move(reason))) {
    return;
  }
  if (options_.drain_grace <= std::chrono::milliseconds::zero()) {
    stop();
    return;
  }
  asio::post(acceptor_strand_, [this] {
    if (stopping()) {
      return; // stop() came first: its handler ran before this one, on this strand
    }
    drain_timer_.emplace(acceptor_strand_, options_.drain_grace);
    drain_timer_->async_wait([this](const error_code& ec) {
      if (!ec) {
        stop();
      }
    });
  });
}

SERVEKIT_DECL bool server_state::enlist(session* s, const std::shared_ptr<session>& owner) {
  const std::lock_guard lock{mutex_};
  sessions_.emplace(s, owner);
  return !stopping_locked_;
}

SERVEKIT_DECL void server_state::delist(session* s) noexcept {
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

SERVEKIT_DECL void server_state::release_work() noexcept {
  asio::post(acceptor_strand_, [this] {
    if (exit_timer_) {
      exit_timer_->cancel();
    }
  });
  release_guards(work_);
}

/// Lets the io_contexts run out of work. The guards leave `work` in one step (a move, while
/// every context still has work) before any is released: once the last is released run() may
/// return and the server be destroyed, `work` with it, while this thread would still be going
/// through the vector.
SERVEKIT_DECL void release_guards(
    std::vector<asio::executor_work_guard<asio::io_context::executor_type>>& work) noexcept {
  auto released = std::move(work);
  released.clear();
}

SERVEKIT_DECL bool server_state::claim_work_release() noexcept {
  if (!stopping_locked_ || !sessions_.empty() || work_released_) {
    return false;
  }
  work_released_ = true;
  return true;
}

SERVEKIT_DECL void server_state::log_request(std::string_view method, std::string_view target,
                                             unsigned status,
                                             std::chrono::steady_clock::duration elapsed) const {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count();
  fmt::print(stderr, "HTTP {} {} {} {}us\n", method, target, status, us);
}

SERVEKIT_DECL void server_state::listen() {
  error_code ec;
  tcp::resolver resolver{*contexts_.front()};
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

/// After a handler threw std::bad_alloc: if no accept is pending (the accept's completion
/// threw before its handler ran: Asio allocates to dispatch it to the strand), starts one.
/// Retried while memory is exhausted.
SERVEKIT_DECL void server_state::resume_accepting() noexcept {
  for (;;) {
    try {
      asio::post(acceptor_strand_, [this] {
        if (accept_armed_.load() == 0 && acceptor_.is_open()) {
          accept_next();
        }
      });
      return;
    } catch (const std::bad_alloc&) {
      std::this_thread::sleep_for(std::chrono::milliseconds{1});
    }
  }
}

SERVEKIT_DECL void server_state::accept() {
  const std::uint64_t generation = ++accept_generation_;
  accept_armed_.store(generation); // before: the watch may be destroyed at once
  // Connections go to the I/O threads' io_contexts in turn.
  asio::io_context& context = *contexts_[next_context_++ % contexts_.size()];
  acceptor_.async_accept(context.get_executor(), [this, watch = accept_watch{this, generation}](
                                                     const error_code& ec, socket_type socket) {
    if (!acceptor_.is_open()) {
      return; // stop() closed it
    }
    if (ec) {
      // Out of descriptors and the like: retry shortly rather than spin.
      try {
        retry_timer_.emplace(acceptor_strand_, std::chrono::milliseconds(50));
        const std::uint64_t retry = ++accept_generation_;
        accept_armed_.store(retry); // the timer's handler accepts
        retry_timer_->async_wait([this, watch = accept_watch{this, retry}](const error_code& e) {
          if (!e && acceptor_.is_open()) {
            accept_next();
          }
        });
      } catch (const std::bad_alloc&) {
        accept_next(); // no memory for the timer: retry now
      }
      return;
    }
    try {
      error_code ignored;
      const std::size_t live = live_sessions();
      if (live >= max_connections_ + connection_reject_reserve) {
        socket.close(ignored); // a flood: keep the reserved descriptors free
      } else {
        socket.set_option(tcp::no_delay(true), ignored);
        std::make_shared<session>(*this, std::move(socket))->start(live >= max_connections_);
      }
    } catch (const std::bad_alloc&) {
      // No memory for the session: this connection is closed (the socket or the session
      // goes with the exception), the next one is accepted below.
    }
    accept_next();
  });
}

/// accept(), which must not be lost to an allocation failure (async_accept allocates its
/// operation): the server would never take another connection. On the acceptor strand. While
/// memory is exhausted it retries every millisecond, holding this one I/O thread.
SERVEKIT_DECL void server_state::accept_next() noexcept {
  for (;;) {
    try {
      accept();
      return;
    } catch (const std::bad_alloc&) {
      if (!acceptor_.is_open()) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds{1});
    }
  }
}

SERVEKIT_DECL void server_state::force_close_sessions() {
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

SERVEKIT_DECL void server_state::stop() {
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
    if (drain_timer_) {
      drain_timer_->cancel(); // stop() before the grace period ended: it must not keep run() up
    }
    {
      const std::lock_guard lock{mutex_};
      if (work_released_) {
        return; // every connection is already gone
      }
    }
    exit_timer_.emplace(acceptor_strand_, options_.exit_timeout);
    exit_timer_->async_wait([this](const error_code& ec) {
      if (ec) {
        return;
      }
      // Past the exit timeout: every model answers what it still owes (queued and backlogged
      // requests, open sequences, streams a backend never finishes) with `unavailable` "server
      // is shutting down". Not waited for here: a backend stuck in execute must not block an
      // I/O thread (the caller of run() bounds that wait, see shutdown_models).
      static_cast<void>(
          shutdown_models(models_, shutdown_mode::abort, std::chrono::milliseconds{0}));
      // The sessions write those answers and close; whatever is still open after a short grace
      // (a request inside a backend that never returns) is closed.
      exit_timer_->expires_after(shutdown_grace);
      exit_timer_->async_wait([this](const error_code& e) {
        if (e) {
          return;
        }
        force_close_sessions();
        // A session whose request is inside a backend that never returns stays alive (the
        // request's sink holds it) and so would the work guard: let run() return once the
        // closed connections' handlers are done, without waiting for that backend.
        bool release = false;
        {
          const std::lock_guard lock{mutex_};
          release = !std::exchange(work_released_, true);
        }
        if (release) {
          release_guards(work_);
        }
      });
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

SERVEKIT_DECL server::server(model_repository& models, server_options options)
    : state_{std::make_unique<detail::server_state>(models, std::move(options))} {
  state_->start_accepting();
}

SERVEKIT_DECL server::server(server&&) noexcept = default;
SERVEKIT_DECL server& server::operator=(server&&) noexcept = default;
SERVEKIT_DECL server::~server() = default;

SERVEKIT_DECL std::uint16_t server::port() const noexcept { return state_->port(); }

SERVEKIT_DECL std::size_t server::max_connections() const noexcept {
  return state_->max_connections();
}

SERVEKIT_DECL std::size_t server::connections() const { return state_->live_sessions(); }
SERVEKIT_DECL const std::string& server::host() const noexcept { return state_->options().host; }
SERVEKIT_DECL const server_options& server::options() const noexcept { return state_->options(); }
SERVEKIT_DECL void server::run() { state_->run(); }
SERVEKIT_DECL void server::stop() { state_->stop(); }
SERVEKIT_DECL void server::stop_on_signals() { state_->stop_on_signals(); }
SERVEKIT_DECL void server::begin_drain(std::string reason) {
  state_->begin_drain(std::move(reason));
}

} // namespace servekit::http
