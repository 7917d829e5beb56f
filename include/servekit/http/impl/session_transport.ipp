#pragma once
/// \file
/// A session's transport (http/impl/session.hpp): starting and stopping, reading a request's
/// header and body, writing the response, keep-alive, draining after an error, closing. All on
/// the connection's strand. Compiled once into servekit::server by src/http/session_transport.cpp,
/// or included by http/server.hpp with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/http/impl/server_state.hpp>
#include <servekit/http/impl/session.hpp>
#include <servekit/http/kserve_response.hpp>

#include <utility> // before Asio: Boost 1.74's Asio needs it under GCC 12 in C++20

#include <boost/asio/buffer.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace servekit::http {

namespace detail {

SERVEKIT_DECL session::session(server_state& server, socket_type socket)
    : server_{server}, strand_{socket.get_executor()}, on_strand_{std::move(socket)} {
  enlistment_.self = this;
}

/// Registers with the server and starts reading, on the session's strand.
SERVEKIT_DECL void session::start() {
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
  bhttp::async_read_header(
      on_strand_.socket, on_strand_.buffer, *on_strand_.parser,
      [self = shared_from_this()](const error_code& ec, std::size_t) { self->on_header(ec); });
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
  if (on_strand_.parser->is_done()) {
    handle();
    return;
  }
  const auto expect = on_strand_.parser->get()[bhttp::field::expect];
  if (beast::iequals(expect, "100-continue")) {
    // The client waits for this before sending the body (curl does for large bodies).
    static constexpr std::string_view go_on = "HTTP/1.1 100 Continue\r\n\r\n";
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
    handle();
  } else {
    read_body();
  }
}

SERVEKIT_DECL void session::read_body() {
  bhttp::async_read(on_strand_.socket, on_strand_.buffer, *on_strand_.parser,
                    [self = shared_from_this()](const error_code& ec, std::size_t) {
                      if (ec) {
                        self->read_failed(ec, true);
                      } else {
                        self->handle();
                      }
                    });
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

// ---- writing ----------------------------------------------------------------------------

SERVEKIT_DECL void session::reply(unsigned status, std::string_view content_type) {
  handoff_.status = status;
  handoff_.content_type = content_type;
  handoff_.json_header_length.reset();
  write();
}

SERVEKIT_DECL void session::reply_empty(unsigned status) {
  handoff_.body.clear();
  reply(status, {});
}

SERVEKIT_DECL void session::reply_error(unsigned status, std::string_view message) {
  handoff_.body = encode_error(message);
  reply(status, json_content_type);
}

SERVEKIT_DECL void session::write() {
  on_strand_.phase = phase::writing;
  handoff_.model.reset(); // a retired model's last reference goes to the repository's reaper
  on_strand_.close_after =
      !on_strand_.keep_alive || on_strand_.stopping || on_strand_.drain_after_write;
  on_strand_.head.clear();
  const auto reason = bhttp::obsolete_reason(bhttp::int_to_status(handoff_.status));
  on_strand_.head += "HTTP/1.1 ";
  on_strand_.head += fmt::format_int(handoff_.status).c_str();
  on_strand_.head += ' ';
  on_strand_.head.append(reason.data(), reason.size());
  on_strand_.head += "\r\n";
  if (!handoff_.content_type.empty()) {
    on_strand_.head += "Content-Type: ";
    on_strand_.head += handoff_.content_type;
    on_strand_.head += "\r\n";
  }
  on_strand_.head += "Content-Length: ";
  on_strand_.head += fmt::format_int(handoff_.body.size()).c_str();
  on_strand_.head += "\r\n";
  if (handoff_.json_header_length) {
    on_strand_.head += "Inference-Header-Content-Length: ";
    on_strand_.head += fmt::format_int(*handoff_.json_header_length).c_str();
    on_strand_.head += "\r\n";
  }
  if (on_strand_.close_after) {
    on_strand_.head += "Connection: close\r\n";
  }
  on_strand_.head += "\r\n";
  const std::array<asio::const_buffer, 2> buffers{asio::buffer(on_strand_.head),
                                                  asio::buffer(handoff_.body)};
  asio::async_write(
      on_strand_.socket, buffers,
      [self = shared_from_this()](const error_code& ec, std::size_t) { self->on_write(ec); });
}

SERVEKIT_DECL void session::on_write(const error_code& ec) {
  if (server_.options().log_verbose > 0) {
    log();
  }
  recycle();
  if (ec) {
    close(); // the client is gone: nothing more to do
    return;
  }
  if (on_strand_.drain_after_write) {
    drain();
    return;
  }
  if (on_strand_.close_after) {
    error_code ignored;
    on_strand_.socket.shutdown(tcp::socket::shutdown_send, ignored);
    close();
    return;
  }
  read_header();
}

SERVEKIT_DECL void session::log() const {
  std::string_view method = "-";
  std::string_view target = "-";
  if (on_strand_.parser && on_strand_.parser->is_header_done()) {
    method = to_std(on_strand_.parser->get().method_string());
    target = to_std(on_strand_.parser->get().target());
  }
  const auto elapsed = on_strand_.parser && on_strand_.parser->is_header_done()
                           ? std::chrono::steady_clock::now() - on_strand_.started
                           : std::chrono::steady_clock::duration{};
  server_.log_request(method, target, handoff_.status, elapsed);
}

/// Takes the request body back from the parser for the next request, and keeps the reused
/// strings from holding on to the memory of one huge request.
SERVEKIT_DECL void session::recycle() {
  if (on_strand_.parser) {
    on_strand_.spare_body.swap(on_strand_.parser->get().body());
    on_strand_.parser.reset();
  }
  for (std::string* s : {&on_strand_.spare_body, &handoff_.body, &on_strand_.head}) {
    if (s->capacity() > max_kept_capacity) {
      std::string{}.swap(*s);
    }
  }
}

/// Reads and discards what the client still sends after an error response, then closes.
SERVEKIT_DECL void session::drain() {
  on_strand_.phase = phase::draining;
  if (on_strand_.stopping) {
    close();
    return;
  }
  error_code ignored;
  on_strand_.socket.shutdown(tcp::socket::shutdown_send, ignored);
  on_strand_.buffer.clear();
  on_strand_.drained = 0;
  drain_some();
}

SERVEKIT_DECL void session::drain_some() {
  on_strand_.socket.async_read_some(
      on_strand_.buffer.prepare(64 * 1024),
      [self = shared_from_this()](const error_code& ec, std::size_t n) {
        self->on_strand_.drained += n;
        if (ec || self->on_strand_.drained > max_drain_bytes) {
          self->close();
        } else {
          self->drain_some();
        }
      });
}

SERVEKIT_DECL void session::close() {
  error_code ignored;
  on_strand_.socket.close(ignored);
}

} // namespace detail

} // namespace servekit::http
