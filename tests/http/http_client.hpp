#pragma once
/// \file
/// A small synchronous HTTP/1.1 client over Boost.Beast for the end-to-end tests: one keep-alive
/// connection per client, one request at a time, reconnecting when the server closed it. Raw
/// bytes can be sent too, for malformed requests the Beast serializer would never write.

#include <utility> // before Asio: Boost 1.74's asio needs std::exchange declared (g++ 12, C++20)

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/dynamic_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace test_http {

/// A response as the tests look at it. `status` is 0 when no response arrived (the connection
/// failed or was closed); `error` then says why.
struct reply {
  unsigned status = 0;
  std::string body;
  std::map<std::string, std::string> headers; ///< lower-case names
  std::string error;

  [[nodiscard]] std::string header(const std::string& name) const {
    const auto it = headers.find(name);
    return it == headers.end() ? std::string{} : it->second;
  }
};

class client {
public:
  client(std::string host, std::uint16_t port) : host_{std::move(host)}, port_{port} {}

  client(const client&) = delete;
  client& operator=(const client&) = delete;
  ~client() { close(); }

  reply get(std::string_view target) { return send(boost::beast::http::verb::get, target, {}); }

  reply post(std::string_view target, std::string body = {},
             std::vector<std::pair<std::string, std::string>> extra_headers = {}) {
    return send(boost::beast::http::verb::post, target, std::move(body), std::move(extra_headers));
  }

  reply send(boost::beast::http::verb method, std::string_view target, std::string body,
             std::vector<std::pair<std::string, std::string>> extra_headers = {}) {
    namespace http = boost::beast::http;
    http::request<http::string_body> req{method, std::string{target}, 11};
    req.set(http::field::host, host_);
    req.keep_alive(true);
    for (auto& [name, value] : extra_headers) {
      req.set(name, value);
    }
    if (method == http::verb::post || !body.empty()) {
      if (req.find(http::field::content_type) == req.end()) {
        req.set(http::field::content_type, "application/json");
      }
      req.body() = std::move(body);
      req.prepare_payload();
    }
    // A keep-alive connection the server has since closed fails on first use: retry once on a
    // fresh connection (the request cannot have been processed if nothing came back at all).
    for (int attempt = 0; attempt < 2; ++attempt) {
      const bool reused = socket_.has_value();
      if (!ensure_connected()) {
        return failed("connect: " + last_error_);
      }
      boost::system::error_code ec;
      http::write(*socket_, req, ec);
      if (!ec) {
        reply r = read_reply();
        if (r.status != 0 || !reused) {
          return r;
        }
      }
      close();
      if (!reused) {
        return failed("write: " + ec.message());
      }
      ++retries_;
    }
    return failed("the server closed the connection twice");
  }

  /// Writes `bytes` as they are and reads one response (status 0 if the server closed instead).
  reply raw(std::string_view bytes) {
    close();
    if (!ensure_connected()) {
      return failed("connect: " + last_error_);
    }
    boost::system::error_code ec;
    boost::asio::write(*socket_, boost::asio::buffer(bytes.data(), bytes.size()), ec);
    if (ec) {
      close();
      return failed("write: " + ec.message());
    }
    return read_reply();
  }

  /// Whether the server closed this connection (reads EOF without sending anything).
  [[nodiscard]] bool closed_by_server() {
    if (!socket_) {
      return true;
    }
    char byte = 0;
    boost::system::error_code ec;
    socket_->read_some(boost::asio::buffer(&byte, 1), ec);
    close();
    return ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset;
  }

  void close() noexcept {
    if (socket_) {
      boost::system::error_code ec;
      socket_->shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
      socket_->close(ec);
      socket_.reset();
    }
    buffer_.clear();
  }

  /// How many TCP connections this client has opened (1 while keep-alive holds).
  [[nodiscard]] int connections_opened() const noexcept { return connections_; }
  /// How many requests were sent again because a reused connection turned out closed.
  [[nodiscard]] int retries() const noexcept { return retries_; }

private:
  bool ensure_connected() {
    if (socket_) {
      return true;
    }
    boost::system::error_code ec;
    boost::asio::ip::tcp::resolver resolver{io_};
    const auto endpoints = resolver.resolve(host_, std::to_string(port_), ec);
    if (ec) {
      last_error_ = ec.message();
      return false;
    }
    socket_.emplace(io_);
    boost::asio::connect(*socket_, endpoints, ec);
    if (ec) {
      last_error_ = ec.message();
      socket_.reset();
      return false;
    }
    ++connections_;
    return true;
  }

  reply read_reply() {
    namespace http = boost::beast::http;
    http::response_parser<http::string_body> parser;
    parser.body_limit(std::size_t{1} << 30);
    boost::system::error_code ec;
    http::read(*socket_, buffer_, parser, ec);
    if (ec) {
      close();
      return failed("read: " + ec.message());
    }
    auto res = parser.release();
    reply r;
    r.status = res.result_int();
    for (const auto& field : res) {
      std::string name{field.name_string()};
      for (auto& c : name) {
        if (c >= 'A' && c <= 'Z') {
          c = static_cast<char>(c - 'A' + 'a');
        }
      }
      r.headers[name] = std::string{field.value()};
    }
    r.body = std::move(res.body());
    if (!res.keep_alive()) {
      close();
    }
    return r;
  }

  static reply failed(std::string why) {
    reply r;
    r.error = std::move(why);
    return r;
  }

  std::string host_;
  std::uint16_t port_;
  boost::asio::io_context io_;
  std::optional<boost::asio::ip::tcp::socket> socket_;
  boost::beast::flat_buffer buffer_;
  std::string last_error_;
  int connections_ = 0;
  int retries_ = 0;
};

} // namespace test_http
