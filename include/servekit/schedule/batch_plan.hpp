#pragma once
/// \file
/// What a decision core hands its shell: a batch to execute, and requests it finished early.

#include <servekit/core/batch_close_reason.hpp>
#include <servekit/queue/pending_request.hpp>

#include <cstdint>
#include <vector>

namespace servekit {

/// A closed batch: the requests in execution order, their element total, and why it closed.
/// Reused from one batch to the next so that steady state allocates nothing.
struct batch_plan {
  std::vector<pending_ptr> requests;
  std::int64_t elements = 0;
  batch_close_reason reason = batch_close_reason::queue_drained;

  [[nodiscard]] bool empty() const noexcept { return requests.empty(); }
  void clear() noexcept {
    requests.clear();
    elements = 0;
  }
};

/// Requests a core removed without executing them; the shell answers each.
struct early_exits {
  std::vector<pending_ptr> timed_out; ///< REJECT timeouts: `unavailable` "Request timeout expired"
  std::vector<pending_ptr> cancelled; ///< cancelled while queued: `cancelled`

  [[nodiscard]] bool empty() const noexcept { return timed_out.empty() && cancelled.empty(); }
  void clear() noexcept {
    timed_out.clear();
    cancelled.clear();
  }
};

} // namespace servekit
