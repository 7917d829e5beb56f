#pragma once
/// \file
/// A session's transport (http/impl/session.hpp): starting and stopping, reading a request's
/// header and body, content codings, reading ahead, the connection's deadline. Writing the
/// response, draining and closing are in session_write.ipp. All on the connection's strand.
/// Compiled once into servekit::server by src/http/session_transport.cpp, or included by
/// http/server.hpp with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/http/detail/content_coding.hpp>
#include <servekit/http/impl/server_state.hpp>
#include <servekit/http/impl/session.hpp>
#include <servekit/http/kserve_response.hpp>

#include <utility> // before Asio: Boost 1.74's Asio needs it under GCC 12 in C++20

#include <boost/asio/buffer.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/read_size.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <memory>
#include <new>
#include <string>
#include <string_view>

namespace servekit::http {

namespace detail {

SERVEKIT_DECL session::session(server_state& server, socket_type socket)
    : server_{server}, strand_{socket.get_executor()}, on_strand_{std::move(socket)} {
  enlistment_.self = this;
}

/// Registers with the server and starts reading, on the session's strand. over_limit: the
/// server has max_connections already; the request is answered 503.
SERVEKIT_DECL void session::start(bool over_limit) {
  on_strand_.over_limit = over_limit;
  auto self = shared_from_this();
  const bool running = server_.enlist(this, self);
  enlistment_.server = &server_;
  if (!running) {
    // Accepted while the server stops: the io_context of this connection may already have run
    // out of work, so a handler dispatched to its strand might never run and the connection
    // would stay open until the server is destroyed (a client waiting for an answer would
    // wait that long). Nothing else can use the new socket yet: close it on this thread.
    close();
    return;
  }
  asio::dispatch(strand_, [self = std::move(self)] { self->read_header(); });
}

/// stop(): closes the connection if no request of it reached a model (idle, or a body still
/// arriving: a client that stalls mid-body must not hold the server open), else lets the
/// request in flight finish and closes after its response. On the strand.
SERVEKIT_DECL void session::request_stop() {
  on_strand_.stopping = true;
  if (on_strand_.phase == phase::reading_header || on_strand_.phase == phase::reading_body ||
      on_strand_.phase == phase::draining) {
    close();
  }
}

/// The exit timeout passed: closes the connection whatever it is doing (a client that does
/// not read its response must not hold the server open). On the strand.
SERVEKIT_DECL void session::force_close() { close(); }

// ---- reading ----------------------------------------------------------------------------

SERVEKIT_DECL void session::read_header() {
  try {
    read_next_header();
  } catch (const std::bad_alloc&) {
    // No memory for the next request's parser or its read: close, rather than leave a read
    // ahead pending that would come back to a session without a parser.
    close();
  }
}

SERVEKIT_DECL void session::read_next_header() {
  on_strand_.phase = phase::reading_header;
  if (on_strand_.stopping) {
    close();
    return;
  }
  on_strand_.parser.emplace();
  on_strand_.parser->header_limit(max_header_bytes);
  on_strand_.parser->body_limit(server_.options().max_body_bytes);
  // Lend the parser the previous request's body string, so its capacity is reused.
  on_strand_.spare_body.clear();
  on_strand_.parser->get().body().swap(on_strand_.spare_body);
  if (on_strand_.buffer.size() > 0 || (!on_strand_.served_one && !on_strand_.reading_ahead)) {
    read_header_now();
    return;
  }
  // An idle keep-alive connection: keepalive_timeout until the next request's first byte,
  // then header_timeout for the rest of its header (nginx's keepalive_timeout and
  // client_header_timeout). The read started while the last request was handled, if any, goes
  // on as this wait.
  arm(server_.options().keepalive_timeout);
  if (!on_strand_.reading_ahead) {
    read_ahead();
  }
}

SERVEKIT_DECL void session::read_header_now() {
  arm(server_.options().header_timeout);
  if (on_strand_.buffer.size() > 0) {
    // Usually the read ahead brought the whole header: parse it here. Beast's read would find
    // it too, but completes through a post (another pass through the scheduler per request).
    // A header not yet whole is left in the buffer (put consumes nothing) for the read below.
    error_code ec;
    on_strand_.buffer.consume(on_strand_.parser->put(on_strand_.buffer.data(), ec));
    if (ec != bhttp::error::need_more && (ec || on_strand_.parser->is_header_done())) {
      on_header(ec);
      return;
    }
  }
  bhttp::async_read_header(
      on_strand_.socket, on_strand_.buffer, *on_strand_.parser,
      [self = shared_from_this()](const error_code& ec, std::size_t) { self->on_header(ec); });
}

/// RFC 9112 section 6: a request whose Transfer-Encoding is not exactly "chunked" (the only
/// coding served), or that has both Transfer-Encoding and Content-Length, cannot be framed
/// the way every intermediary would frame it. Beast reads "chunked, identity" as a body of
/// length zero, so the body would be parsed as the next request (request smuggling): such a
/// request is answered 400 and the connection closed without reading its body.
SERVEKIT_DECL bool session::framing_ok() {
  const auto& req = on_strand_.parser->get();
  std::size_t encodings = 0;
  bool chunked_only = true;
  const auto [first, last] = req.equal_range(bhttp::field::transfer_encoding);
  for (auto it = first; it != last; ++it) {
    ++encodings;
    std::string_view value = to_std(it->value());
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) {
      value.remove_suffix(1);
    }
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
      value.remove_prefix(1);
    }
    chunked_only =
        chunked_only && beast::iequals(beast::string_view{value.data(), value.size()}, "chunked");
  }
  if (encodings == 0) {
    return true;
  }
  if (encodings > 1 || !chunked_only) {
    on_strand_.keep_alive = false;
    fail_request(400, "unsupported Transfer-Encoding: only \"chunked\" is accepted");
    return false;
  }
  if (req.find(bhttp::field::content_length) != req.end()) {
    fail_request(400, "a request may not have both Transfer-Encoding and Content-Length");
    return false;
  }
  return true;
}

SERVEKIT_DECL void session::on_header(const error_code& ec) {
  if (ec) {
    read_failed(ec, /*header_started=*/on_strand_.buffer.size() > 0);
    return;
  }
  on_strand_.phase = phase::reading_body;
  if (server_.options().log_verbose > 0) {
    on_strand_.started = std::chrono::steady_clock::now();
  }
  if (!framing_ok()) {
    return;
  }
  if (on_strand_.over_limit) {
    fail_request(503,
                 fmt::format("too many connections (the limit is {})", server_.max_connections()));
    return;
  }
  if (on_strand_.parser->is_done()) {
    start_handling();
    return;
  }
  const auto expect = on_strand_.parser->get()[bhttp::field::expect];
  if (beast::iequals(expect, "100-continue")) {
    // The client waits for this before sending the body (curl does for large bodies).
    static constexpr std::string_view go_on = "HTTP/1.1 100 Continue\r\n\r\n";
    arm(server_.options().write_timeout);
    asio::async_write(on_strand_.socket, asio::buffer(go_on.data(), go_on.size()),
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
  on_strand_.parser->eager(true);
  while (on_strand_.buffer.size() > 0 && !on_strand_.parser->is_done()) {
    error_code pe;
    const std::size_t used = on_strand_.parser->put(on_strand_.buffer.data(), pe);
    on_strand_.buffer.consume(used);
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
  if (on_strand_.parser->is_done()) {
    start_handling();
  } else {
    read_body();
  }
}

SERVEKIT_DECL void session::read_body() {
  const auto total = server_.options().body_total_timeout;
  on_strand_.body_deadline = total.count() > 0 ? std::chrono::steady_clock::now() + total
                                               : std::chrono::steady_clock::time_point::max();
  on_body_bytes({});
}

/// Reads the body a piece at a time, so body_timeout counts from the last bytes that arrived
/// (nginx's client_body_timeout) and body_total_timeout from the end of the header.
SERVEKIT_DECL void session::on_body_bytes(const error_code& ec) {
  if (ec) {
    read_failed(ec, true);
    return;
  }
  if (on_strand_.parser->is_done()) {
    start_handling();
    return;
  }
  auto timeout = server_.options().body_timeout;
  if (on_strand_.body_deadline != std::chrono::steady_clock::time_point::max()) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(
        on_strand_.body_deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      close();
      return;
    }
    timeout = timeout.count() > 0 ? std::min(timeout, left) : left;
  }
  arm(timeout);
  bhttp::async_read_some(
      on_strand_.socket, on_strand_.buffer, *on_strand_.parser,
      [self = shared_from_this()](const error_code& e, std::size_t) { self->on_body_bytes(e); });
}

// ---- handling --------------------------------------------------------------------------

/// The request is read: routes it, and if it now waits on a model, watches for the client
/// leaving meanwhile.
SERVEKIT_DECL void session::start_handling() {
  disarm();
  if (!decode_content()) {
    return;
  }
  handle();
  // A request that waits on a model: read ahead, so a client that leaves meanwhile is seen at
  // once (its descriptor released now, not when the model answers). Bytes already buffered (a
  // pipelined request) are the next request's; the socket is not read past them.
  if (on_strand_.phase == phase::handling && on_strand_.socket.is_open() &&
      on_strand_.buffer.size() == 0 && !on_strand_.reading_ahead) {
    read_ahead();
  }
}

/// A body sent with Content-Encoding gzip or deflate is inflated in place, within
/// max_body_bytes counted after inflation (a small body cannot expand into a zip bomb); another
/// coding is 415. False when it answered the request.
SERVEKIT_DECL bool session::decode_content() {
  auto& req = on_strand_.parser->get();
  const auto it = req.find(bhttp::field::content_encoding);
  if (it == req.end()) {
    return true;
  }
  const auto coding = parse_content_encoding(to_std(it->value()));
  if (coding == content_coding::identity) {
    return true;
  }
  on_strand_.keep_alive = req.keep_alive();
  if (coding == content_coding::unsupported) {
    reply_error(415, fmt::format("unsupported Content-Encoding '{}': gzip, deflate or identity",
                                 to_std(it->value())));
    return false;
  }
  const std::size_t limit = server_.options().max_body_bytes;
  switch (inflate_body(req.body(), coding, limit, on_strand_.coded)) {
  case inflate_result::ok:
    req.body().swap(on_strand_.coded);
    req.erase(bhttp::field::content_encoding);
    return true;
  case inflate_result::too_large:
    reply_error(413,
                fmt::format("request body exceeds the limit of {} bytes once decompressed", limit));
    return false;
  case inflate_result::corrupt:
    break;
  }
  reply_error(400, fmt::format("request body is not valid {} data",
                               coding == content_coding::gzip ? "gzip" : "deflate"));
  return false;
}

/// Compresses the response body when the request's Accept-Encoding allows gzip or deflate and
/// the body is large enough to gain from it.
SERVEKIT_DECL void session::encode_content() {
  if (handoff_.body.size() < min_compressed_response_bytes || !on_strand_.parser ||
      !on_strand_.parser->is_header_done()) {
    return;
  }
  const auto& req = on_strand_.parser->get();
  const auto it = req.find(bhttp::field::accept_encoding);
  if (it == req.end()) {
    return;
  }
  const auto coding = choose_response_coding(to_std(it->value()));
  if (coding == content_coding::identity ||
      !deflate_body(handoff_.body, coding, on_strand_.coded) ||
      on_strand_.coded.size() >= handoff_.body.size()) {
    return;
  }
  handoff_.body.swap(on_strand_.coded);
  on_strand_.head += coding == content_coding::gzip ? "Content-Encoding: gzip\r\n"
                                                    : "Content-Encoding: deflate\r\n";
  on_strand_.head += "Vary: Accept-Encoding\r\n";
}

/// One read into the connection's buffer, in place of a wait for readability: whatever it
/// brings (the next request's first bytes, a pipelined request) is kept for read_header, and a
/// request costs one read either way. On the strand; nothing else touches the buffer meanwhile
/// (the request before was read whole).
SERVEKIT_DECL void session::read_ahead() {
  on_strand_.reading_ahead = true;
  on_strand_.socket.async_read_some(
      on_strand_.buffer.prepare(beast::read_size(on_strand_.buffer, read_ahead_bytes)),
      [self = shared_from_this()](const error_code& ec, std::size_t n) {
        self->on_read_ahead(ec, n);
      });
}

SERVEKIT_DECL void session::on_read_ahead(const error_code& ec, std::size_t n) {
  on_strand_.reading_ahead = false;
  on_strand_.buffer.commit(n);
  if (ec == asio::error::operation_aborted || !on_strand_.socket.is_open()) {
    return; // closed meanwhile
  }
  switch (on_strand_.phase) {
  case phase::reading_header: // the keep-alive wait
    if (ec) {
      close(); // the client closed its idle connection
    } else {
      read_header_now();
    }
    return;
  case phase::handling:
    if (ec) {
      cancel_in_flight(); // the client left: its request need not run
      close();            // and its response has nowhere to go
    }
    return; // else: the next request's bytes, parsed once this one is answered
  case phase::writing:
    if (ec && handoff_.streaming && !on_strand_.stream_final_queued && !on_strand_.stream_broken) {
      give_up_stream(); // the client left mid-stream: cancels the request, closes
    } else if (ec) {
      on_strand_.close_after = true; // nothing more comes: close once the response is out
    }
    return;
  case phase::draining:
    on_strand_.drained += n;
    on_strand_.buffer.clear();
    if (ec || on_strand_.drained > max_drain_bytes) {
      close();
    } else {
      drain_some();
    }
    return;
  case phase::reading_body:
    return; // not reached: the body is read only with no read ahead pending
  }
}

// ---- timeouts ---------------------------------------------------------------------------

SERVEKIT_DECL void session::arm(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) {
    disarm();
    return;
  }
  on_strand_.deadline = std::chrono::steady_clock::now() + timeout;
  // A wait ending no later than the deadline is already pending: when it ends, on_timer waits
  // on for what is left. So a request moving through its phases (keep-alive, header, body,
  // write) only reads the clock; the timer is reset when a deadline comes earlier than the
  // pending wait, or no wait is pending.
  if (on_strand_.timer_expiry > on_strand_.deadline) {
    start_timer(on_strand_.deadline);
  }
}

SERVEKIT_DECL void session::disarm() noexcept {
  on_strand_.deadline = std::chrono::steady_clock::time_point::max();
}

SERVEKIT_DECL void session::start_timer(std::chrono::steady_clock::time_point expiry) {
  const std::uint32_t generation = ++on_strand_.timer_generation;
  on_strand_.timer_expiry = expiry;
  on_strand_.timer.expires_at(expiry); // cancels the wait pending, if any
  // A weak reference: a pending timer must not keep a finished session (and its descriptor)
  // alive; the session's destruction cancels the wait.
  on_strand_.timer.async_wait([weak = weak_from_this(), generation](const error_code& ec) {
    if (ec) {
      return;
    }
    if (auto self = weak.lock()) {
      self->on_timer(generation);
    }
  });
}

/// A timer wait ended: closes the connection if its deadline has passed, else waits on until
/// the deadline (moved by arm() meanwhile), unless disarmed.
SERVEKIT_DECL void session::on_timer(std::uint32_t generation) {
  if (generation != on_strand_.timer_generation) {
    return; // superseded by a later start_timer
  }
  on_strand_.timer_expiry = std::chrono::steady_clock::time_point::max();
  if (on_strand_.deadline == std::chrono::steady_clock::time_point::max() ||
      !on_strand_.socket.is_open()) {
    return;
  }
  if (std::chrono::steady_clock::now() >= on_strand_.deadline) {
    close(); // the peer was too slow to send or to read
  } else {
    start_timer(on_strand_.deadline);
  }
}

/// A read ended in an error: answer what deserves an answer (413, 431, 400), else close.
SERVEKIT_DECL void session::read_failed(const error_code& ec, bool request_started) {
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
                         ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
                         ec.category() == asio::error::get_system_category();
  if (transport || !request_started || !on_strand_.socket.is_open()) {
    close(); // the client went away (or stop() closed an idle connection)
    return;
  }
  fail_request(400, "malformed HTTP request: " + ec.message());
}

/// Answers a request that could not be read whole, then drains and closes the connection.
SERVEKIT_DECL void session::fail_request(unsigned status, std::string_view message) {
  on_strand_.drain_after_write = true;
  on_strand_.keep_alive = false;
  reply_error(status, message);
}

} // namespace detail

} // namespace servekit::http
