#pragma once
/// \file
/// response_sender: the handle a decoupled backend keeps to answer one request after execute
/// returned (Triton's TRITONBACKEND_ResponseFactory).

#include <servekit/backend/detail/response_channel.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/status.hpp>

#include <memory>
#include <utility>

namespace servekit {

/// Owns the right to answer one request of a decoupled model: zero, one or many responses from
/// any thread, in any order relative to other requests, then the final flag (`finish()`, or
/// `send_final(r)` on a response with outputs). A backend gets one from `batch::take_sender(i)`;
/// from then on the model does not send `response(i)`.
///
/// Every call returns a status: not ok when the request already has its final response (sent
/// before, or the model answered it with an error because the final_response_timeout passed or
/// the model is shutting down with `cancel`); the response is then dropped. A sender destroyed
/// before the final response sends a final error, so that every request is answered. A sender
/// must be destroyed before the backend instance that took it.
class response_sender {
public:
  response_sender() noexcept = default;
  explicit response_sender(std::shared_ptr<detail::response_channel> state) noexcept
      : state_{std::move(state)} {}
  response_sender(response_sender&&) noexcept = default;
  response_sender& operator=(response_sender&& other) noexcept {
    if (this != &other) {
      reset();
      state_ = std::move(other.state_);
    }
    return *this;
  }
  response_sender(const response_sender&) = delete;
  response_sender& operator=(const response_sender&) = delete;
  ~response_sender() { reset(); }

  /// Whether this sender answers a request (false once moved from or reset).
  [[nodiscard]] explicit operator bool() const noexcept { return state_ != nullptr; }

  /// Sends a non-final response.
  status send(response&& r) { return state_->send(std::move(r), false); }

  /// Sends `r` as the final response.
  status send_final(response&& r) { return state_->send(std::move(r), true); }

  /// Sends the final flag on an empty response (Triton's
  /// TRITONSERVER_RESPONSE_COMPLETE_FINAL without a response).
  status finish() { return state_->send(response{}, true); }

  /// Whether the request has its final response (sent, timed out or cancelled).
  [[nodiscard]] bool finished() const { return state_->finished(); }

  /// Lets go of the request: without a final response it gets an error one.
  void reset() noexcept {
    if (state_) {
      try {
        state_->release();
      } catch (...) { // NOLINT(bugprone-empty-catch): out of memory building the error
      }
      state_.reset();
    }
  }

private:
  std::shared_ptr<detail::response_channel> state_;
};

} // namespace servekit
