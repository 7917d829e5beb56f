#pragma once
/// \file
/// A session's writes (http/impl/session.hpp): the response's status line and headers, the
/// write and what follows it (keep-alive, close), draining after an error, closing. All on the
/// connection's strand. Compiled once into servekit::server by src/http/session_write.cpp, or
/// included by http/server.hpp with SERVEKIT_HEADER_ONLY.

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
  try {
    write_response();
  } catch (const std::bad_alloc&) {
    // No memory for the head, the compressed body or the write: the response cannot go out,
    // so the connection is closed (its client sees the close instead of waiting for ever).
    close();
  }
}

SERVEKIT_DECL void session::write_response() {
  on_strand_.phase = phase::writing;
  handoff_.model.reset(); // a retired model's last reference goes to the repository's reaper
  on_strand_.in_flight.reset();
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
  encode_content();
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
  arm(server_.options().write_timeout);
  asio::async_write(
      on_strand_.socket, buffers,
      [self = shared_from_this()](const error_code& ec, std::size_t) { self->on_write(ec); });
}

SERVEKIT_DECL void session::on_write(const error_code& ec) {
  if (server_.options().log_verbose > 0) {
    log();
  }
  recycle();
  disarm();
  on_strand_.served_one = true;
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
  for (std::string* s :
       {&on_strand_.spare_body, &handoff_.body, &on_strand_.head, &on_strand_.coded}) {
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
  on_strand_.drained = 0;
  arm(server_.options().header_timeout); // a client that keeps sending is cut off too
  if (on_strand_.reading_ahead) {
    return; // its read drains on (on_read_ahead)
  }
  on_strand_.buffer.clear();
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
  // The timer is cancelled for real here: a pending wait would keep the io_context running.
  disarm();
  ++on_strand_.timer_generation;
  on_strand_.timer_expiry = std::chrono::steady_clock::time_point::max();
  on_strand_.timer.cancel();
  error_code ignored;
  on_strand_.socket.close(ignored);
}

} // namespace detail

} // namespace servekit::http
