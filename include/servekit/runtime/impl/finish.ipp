#pragma once
/// \file
/// Definitions for servekit/runtime/detail/finish.hpp. Compiled once into servekit::servekit, or
/// included by its header with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/runtime/detail/finish.hpp>

namespace servekit::detail {

SERVEKIT_DECL void answer_early_exits(early_exits& exits, model_statistics& stats, time_point now) {
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
  for (auto& p : exits.shut_down) {
    stats.record_early_failure(failure_reason::canceled, elapsed_ns(p->request.arrival, now));
    deliver(*p, response::failure(unavailable(std::string{shutting_down_message}), p->request.id));
  }
  for (auto& [p, why] : exits.refused) {
    stats.record_early_failure(failure_reason::rejected, elapsed_ns(p->request.arrival, now));
    deliver(*p, response::failure(std::move(why), p->request.id));
  }
  const auto n = exits.timed_out.size() + exits.cancelled.size() + exits.sequence_timed_out.size() +
                 exits.shut_down.size() + exits.refused.size();
  if (n != 0) {
    stats.add_pending(-static_cast<std::int64_t>(n));
  }
  exits.clear();
}

} // namespace servekit::detail
