#pragma once
// A client connection sending raw bytes, whose leaving (closing) is what the network
// cancellation tests need, and `eventually`, the bounded wait those tests poll with.
#include <utility> // before Asio: Boost 1.74's Asio needs it under GCC 12 in C++20

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>

#include <sys/socket.h>
#include <sys/time.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

namespace test_http {

/// A client connection sending raw bytes; closing it is the client leaving.
class raw_client {
public:
  explicit raw_client(std::uint16_t port) {
    socket_.connect(
        boost::asio::ip::tcp::endpoint{boost::asio::ip::make_address("127.0.0.1"), port});
    const timeval tv{0, 100'000}; // reads return every 100 ms, so waits can be bounded
    ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  /// POSTs `body` (JSON) to `path`; false if the server closed the connection meanwhile.
  bool post(std::string_view path, std::string_view body) {
    const std::string bytes = "POST " + std::string{path} +
                              " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              "Content-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + std::string{body};
    boost::system::error_code ec;
    boost::asio::write(socket_, boost::asio::buffer(bytes), ec);
    return !ec;
  }
  /// Reads until `text` has arrived or 10 s pass.
  bool read_until(std::string_view text) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{10};
    std::array<char, 4096> chunk{};
    while (received_.find(text) == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline) {
        return false;
      }
      const auto n = ::recv(socket_.native_handle(), chunk.data(), chunk.size(), 0);
      if (n > 0) {
        received_.append(chunk.data(), static_cast<std::size_t>(n));
      } else if (n == 0) {
        return false;
      }
    }
    return true;
  }
  void leave() {
    boost::system::error_code ec;
    socket_.close(ec);
  }
  [[nodiscard]] const std::string& received() const noexcept { return received_; }

private:
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::socket socket_{ioc_};
  std::string received_;
};

/// Polls `done` until it holds or 10 s pass.
inline bool eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  return true;
}

} // namespace test_http
