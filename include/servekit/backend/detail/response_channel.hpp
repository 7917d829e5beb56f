#pragma once
/// \file
/// response_channel: what a response_sender (and a batch) holds to answer one request of a
/// decoupled model. The runtime implements it (runtime/detail/decoupled_requests.hpp), so
/// backend/ needs no header above it.

#include <servekit/core/response.hpp>
#include <servekit/core/status.hpp>

#include <memory>

namespace servekit::detail {

/// The answering side of one request of a decoupled model, from the start of its execution to
/// its final response. Shared by the model's table of outstanding requests and the backend's
/// response_sender. Abstract so that backend/ does not see the runtime's table; the cost is one
/// virtual call per response, next to the mutex every send takes anyway.
class response_channel : public std::enable_shared_from_this<response_channel> {
public:
  response_channel(const response_channel&) = delete;
  response_channel& operator=(const response_channel&) = delete;
  response_channel(response_channel&&) = delete;
  response_channel& operator=(response_channel&&) = delete;
  virtual ~response_channel() = default;

  /// Delivers `r`, as the final response when `final`. Not ok (and `r` dropped) when the
  /// request already has its final response.
  virtual status send(response&& r, bool final) = 0;

  /// Whether the request has its final response (sent, timed out or cancelled).
  [[nodiscard]] virtual bool finished() const = 0;

  /// The holder lets go of the request: without a final response it gets an error one.
  virtual void release() = 0;

protected:
  response_channel() = default;
};

} // namespace servekit::detail
