#pragma once
/// \file
/// What a decision core hands its shell: a batch to execute, and requests it finished early.

#include <servekit/backend/sequence_controls.hpp>
#include <servekit/core/batch_close_reason.hpp>
#include <servekit/core/status.hpp>
#include <servekit/queue/pending_request.hpp>

#include <cstdint>
#include <vector>

namespace servekit {

/// A closed batch: the requests in execution order, their element total, and why it closed.
/// Reused from one batch to the next so that steady state allocates nothing.
///
/// Under the sequence batcher `sequence` holds each entry's controls, and a null entry in
/// `requests` is padding (direct strategy: a slot with nothing ready); `ended` lists sequences
/// of the instance that left their slots without executing an END (the shell frees their state
/// and tells the backend before it executes the batch).
struct batch_plan {
  std::vector<pending_ptr> requests;
  std::int64_t elements = 0;
  batch_close_reason reason = batch_close_reason::queue_drained;
  std::vector<sequence_controls> sequence;
  std::vector<sequence_end> ended;

  [[nodiscard]] bool empty() const noexcept { return requests.empty(); }
  void clear() noexcept {
    requests.clear();
    sequence.clear();
    ended.clear();
    elements = 0;
  }
};

/// A request a core refused to queue, and why (deadline-aware admission).
struct refusal {
  pending_ptr request;
  status why;
};

/// Requests a core removed without executing them; the shell answers each.
struct early_exits {
  std::vector<pending_ptr> timed_out; ///< REJECT timeouts: `unavailable` "Request timeout expired"
  std::vector<pending_ptr> cancelled; ///< cancelled while queued: `cancelled`
  /// Requests of a backlogged sequence whose timeout expired: `unavailable` "timeout of the
  /// corresponding sequence has been expired".
  std::vector<pending_ptr> sequence_timed_out;
  /// Requests a shutdown past the server's exit timeout gave up on (shutdown_mode::abort):
  /// `unavailable` "server is shutting down".
  std::vector<pending_ptr> shut_down;
  /// Requests refused when they reached the core (deadline-aware admission): `why`.
  std::vector<refusal> refused;

  [[nodiscard]] bool empty() const noexcept {
    return timed_out.empty() && cancelled.empty() && sequence_timed_out.empty() &&
           shut_down.empty() && refused.empty();
  }
  void clear() noexcept {
    timed_out.clear();
    cancelled.clear();
    sequence_timed_out.clear();
    shut_down.clear();
    refused.clear();
  }
};

} // namespace servekit
