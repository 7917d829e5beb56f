#pragma once
/// \file
/// status: the outcome of every operation on the request path (a code and a message).

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace servekit {

/// What went wrong, with Triton's meaning for each code.
enum class status_code : std::uint8_t {
  ok,                 ///< success
  invalid_argument,   ///< bad input: unknown input, wrong type or shape, batch too large
  not_found,          ///< unknown model, version or sequence
  unavailable,        ///< queue full, request timeout expired, shutting down
  resource_exhausted, ///< out of memory or another bounded resource
  deadline_exceeded,  ///< a deadline passed while the request was executing
  cancelled,          ///< cancelled by the client or by a cancelling shutdown
  internal,           ///< a backend failed or an invariant broke
};

/// Triton's spelling of a code (as in its error messages and HTTP mapping).
[[nodiscard]] constexpr std::string_view to_string(status_code code) noexcept {
  switch (code) {
  case status_code::ok:
    return "OK";
  case status_code::invalid_argument:
    return "INVALID_ARG";
  case status_code::not_found:
    return "NOT_FOUND";
  case status_code::unavailable:
    return "UNAVAILABLE";
  case status_code::resource_exhausted:
    return "RESOURCE_EXHAUSTED";
  case status_code::deadline_exceeded:
    return "DEADLINE_EXCEEDED";
  case status_code::cancelled:
    return "CANCELLED";
  case status_code::internal:
    return "INTERNAL";
  }
  return "UNKNOWN";
}

/// A code plus a human-readable message. A default-constructed status is ok and holds no
/// heap memory, so returning success costs nothing.
class status {
public:
  status() noexcept = default;
  status(status_code code, std::string message) : code_{code}, message_{std::move(message)} {}

  [[nodiscard]] bool ok() const noexcept { return code_ == status_code::ok; }
  explicit operator bool() const noexcept { return ok(); }
  [[nodiscard]] status_code code() const noexcept { return code_; }
  [[nodiscard]] const std::string& message() const noexcept { return message_; }

  friend bool operator==(const status&, const status&) = default;

private:
  status_code code_ = status_code::ok;
  std::string message_;
};

/// Factory helpers, one per code, so call sites read as sentences.
[[nodiscard]] inline status ok_status() noexcept { return {}; }
[[nodiscard]] inline status invalid_argument(std::string message) {
  return {status_code::invalid_argument, std::move(message)};
}
[[nodiscard]] inline status not_found(std::string message) {
  return {status_code::not_found, std::move(message)};
}
[[nodiscard]] inline status unavailable(std::string message) {
  return {status_code::unavailable, std::move(message)};
}
[[nodiscard]] inline status resource_exhausted(std::string message) {
  return {status_code::resource_exhausted, std::move(message)};
}
[[nodiscard]] inline status deadline_exceeded(std::string message) {
  return {status_code::deadline_exceeded, std::move(message)};
}
[[nodiscard]] inline status cancelled(std::string message) {
  return {status_code::cancelled, std::move(message)};
}
[[nodiscard]] inline status internal_error(std::string message) {
  return {status_code::internal, std::move(message)};
}

} // namespace servekit
