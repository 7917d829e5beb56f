#pragma once
/// \file
/// Finishing requests: the steps every shell takes to answer a request, in one place.

#include <servekit/core/clock.hpp>
#include <servekit/core/response.hpp>
#include <servekit/metrics/statistics.hpp>
#include <servekit/queue/pending_request.hpp>
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
inline void answer_early_exits(early_exits& exits, model_statistics& stats, time_point now) {
  for (auto& p : exits.timed_out) {
    stats.record_early_failure(failure_reason::rejected, elapsed_ns(p->request.arrival, now));
    deliver(*p, response::failure(unavailable("Request timeout expired"), p->request.id));
  }
  for (auto& p : exits.cancelled) {
    stats.record_early_failure(failure_reason::canceled, elapsed_ns(p->request.arrival, now));
    deliver(*p, response::failure(cancelled("Request cancelled"), p->request.id));
  }
  for (auto& p : exits.sequence_timed_out) {
    stats.record_early_failure(failure_reason::rejected, elapsed_ns(p->request.arrival, now));
    deliver(*p, response::failure(unavailable("timeout of the corresponding sequence has been "
                                              "expired"),
                                  p->request.id));
  }
  const auto n = exits.timed_out.size() + exits.cancelled.size() + exits.sequence_timed_out.size();
  if (n != 0) {
    stats.add_pending(-static_cast<std::int64_t>(n));
  }
  exits.clear();
}

} // namespace servekit::detail
