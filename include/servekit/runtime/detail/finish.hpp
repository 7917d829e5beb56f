#pragma once
/// \file
/// Finishing requests: the steps every shell takes to answer a request, in one place.

#include <servekit/core/clock.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/response.hpp>
#include <servekit/metrics/statistics.hpp>
#include <servekit/queue/pending_request.hpp>
#include <servekit/runtime/shutdown_mode.hpp>
#include <servekit/schedule/batch_plan.hpp>

#include <algorithm>
#include <exception>
#include <string>
#include <utility>

namespace servekit::detail {

/// Sends `r` as the request's final response. A sink must not throw; if it does anyway, the
/// exception is swallowed here so that one client's callback cannot take down an instance.
inline void deliver(pending_request& p, response&& r) noexcept {
  try {
    p.sink.complete(std::move(r));
  } catch (...) { // NOLINT(bugprone-empty-catch): documented: sinks must not throw
  }
}

/// Gives a backend's response the request's id and drops outputs the client did not request.
inline void finish_response(const request& req, response& r) {
  if (r.id.empty()) {
    r.id = req.id;
  }
  if (!req.requested_outputs.empty()) {
    std::erase_if(r.outputs, [&](const tensor& t) { return !req.wants_output(t.name); });
  }
}

/// Answers the requests a core finished without executing them (timeouts, cancellations).
SERVEKIT_DECL void answer_early_exits(early_exits& exits, model_statistics& stats, time_point now);

} // namespace servekit::detail

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/runtime/impl/finish.ipp>
#endif
