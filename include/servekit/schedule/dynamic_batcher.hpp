#pragma once
/// \file
/// The dynamic batcher: Triton's batch-forming rules as a pure decision core, and its policy tag.

#include <servekit/core/clock.hpp>
#include <servekit/queue/request_queue.hpp>
#include <servekit/schedule/batch_plan.hpp>
#include <servekit/schedule/detail/queue_backed_core.hpp>
#include <servekit/schedule/scheduler.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace servekit {

/// The custom-batching hook (Triton's TRITONBACKEND_ModelBatchIncludeRequest), applied on top of
/// the standard rules. This one admits everything and compiles away.
struct accept_every_request {
  void begin_batch() noexcept {}
  [[nodiscard]] constexpr bool include(const request&) const noexcept { return true; }
};

namespace detail {
template <class R>
concept rule_has_begin_batch = requires(R& rule) {
  rule.begin_batch();
};
template <class R>
concept rule_has_include = requires(R& rule, const request& r) {
  { rule.include(r) } -> std::convertible_to<bool>;
};
} // namespace detail

/// A batch rule: `begin_batch()` when a batch starts, `include(r)` false closes it before `r`.
template <class R>
concept batch_rule =
    std::default_initializable<R> && detail::rule_has_begin_batch<R> && detail::rule_has_include<R>;

/// Checks the `Rule` of `dynamic_batcher<Rule>`, one message per missing member (the rule's type
/// is this function's template argument, printed above the message).
template <class R>
consteval bool check_batch_rule() {
  static_assert(std::default_initializable<R>,
                "servekit: a batch rule (the Rule of dynamic_batcher<Rule>) needs a public default "
                "constructor; each batcher makes its own");
  static_assert(detail::rule_has_begin_batch<R>,
                "servekit: a batch rule (the Rule of dynamic_batcher<Rule>) needs `void "
                "begin_batch()`, called when a batch starts");
  static_assert(detail::rule_has_include<R>,
                "servekit: a batch rule (the Rule of dynamic_batcher<Rule>) needs `bool "
                "include(const servekit::request&)`; false closes the batch before the request");
  return true;
}

/// Triton's dynamic batcher, decided in one pass over the queue when an instance is free:
///
/// 1. Timeouts due at `now` are applied (REJECT leaves, DELAY moves to the level's tail).
/// 2. Walk in priority order, adding requests (each counts its batch dimension) until the next
///    would pass max_batch_size, or its variable dims differ from the first request's, or the
///    rule declines it. Remember the largest prefix that hits a preferred size, or else the
///    prefix just before the total would pass the largest preferred size.
/// 3. If that prefix exists and the oldest request in the batch has not waited
///    max_queue_delay_microseconds (a delay of 0 never expires): send it. Else, if the walk
///    stopped early or reached the largest preferred size: send all. Else, if the delay expired,
///    or is 0: send all, ignoring preferred sizes. Else wait until the oldest request's delay
///    expires.
///
/// Because batches form only when an instance asks, a batch keeps growing until an instance
/// actually starts it (Triton grows its pending payload for the same effect).
template <batch_rule Rule = accept_every_request>
class dynamic_batch_core : private detail::queue_backed_core {
public:
  explicit dynamic_batch_core(const scheduler_settings& s)
      : queue_backed_core{s.dynamic_batching.priority}, compatibility_{s.compatibility},
        max_batch_size_{std::max<std::int64_t>(s.max_batch_size, 1)},
        max_delay_{microseconds(s.dynamic_batching.max_queue_delay_microseconds)},
        hold_until_{s.hold_until_queued} {
    for (const auto size : s.dynamic_batching.preferred_batch_size) {
      preferred_.push_back(size);
    }
    if (preferred_.empty()) {
      preferred_.push_back(max_batch_size_);
    }
    std::sort(preferred_.begin(), preferred_.end());
    max_preferred_ = preferred_.back();
  }

  using queue_backed_core::deadline_of;
  using queue_backed_core::has_room;
  using queue_backed_core::level_of;
  using queue_backed_core::max_queue_size;
  using queue_backed_core::queue;
  [[nodiscard]] std::size_t size() const noexcept { return queue_.size(); }

  void enqueue(pending_ptr p) {
    p->level = queue_.level_of(p->request.priority);
    queue_.push(std::move(p));
  }

  void expire(time_point now, early_exits& exits) {
    queue_.expire(now, [&](pending_ptr p) { exits.timed_out.push_back(std::move(p)); });
  }

  void collect_cancelled(early_exits& exits) { queue_.take_cancelled(exits.cancelled); }
  void drain(early_exits& exits) { queue_.take_all(exits.cancelled); }

  void flush() noexcept {
    max_delay_ = duration::zero();
    hold_until_ = 0;
  }

  [[nodiscard]] time_point next_timeout() const noexcept { return queue_.next_timeout(); }
  [[nodiscard]] time_point next_deadline() const noexcept {
    return std::min(wait_until_, queue_.next_timeout());
  }

  bool form_batch(time_point now, batch_plan& plan, early_exits& exits) {
    plan.clear();
    wait_until_ = never;
    expire(now, exits);
    if (hold_until_ != 0) {
      if (queue_.size() < hold_until_) {
        return false;
      }
      hold_until_ = 0; // Triton's hook holds once, then never again
    }

    const request* first = nullptr;
    std::int64_t total = 0;
    std::size_t count = 0;
    std::size_t best_count = 0;
    std::int64_t best_total = 0;
    time_point oldest = never;
    bool stopped = false;
    batch_close_reason stop_reason = batch_close_reason::max_batch_size;
    rule_.begin_batch();

    for (pending_request* p = queue_.first(); p != nullptr;) {
      if (p->request.cancellation.cancelled()) {
        pending_request* next = queue_.after(p);
        exits.cancelled.push_back(queue_.remove(p));
        p = next;
        continue;
      }
      const std::int64_t size = p->batch_elements;
      if (first != nullptr) {
        if (total + size > max_preferred_ && best_count == 0) {
          best_count = count;
          best_total = total;
        }
        if (total + size > max_batch_size_) {
          stopped = true;
          // Full batches say max_batch_size below; this one has room, just not for the next.
          stop_reason = batch_close_reason::next_request_does_not_fit;
          break;
        }
        if (compatibility_.needs_check() && !compatibility_.compatible(*first, p->request)) {
          stopped = true;
          stop_reason = batch_close_reason::shape_mismatch;
          break;
        }
      }
      if (!rule_.include(p->request)) {
        if (first == nullptr) {
          // A rule that refuses a batch's first request would stall the queue forever; the
          // request runs alone instead.
          ++count;
          total += size;
          oldest = p->request.arrival;
        }
        stopped = true;
        stop_reason = batch_close_reason::batch_rule;
        break;
      }
      if (first == nullptr) {
        first = &p->request;
      }
      ++count;
      total += size;
      oldest = std::min(oldest, p->request.arrival);
      if (std::find(preferred_.begin(), preferred_.end(), total) != preferred_.end()) {
        best_count = count;
        best_total = total;
      }
      p = queue_.after(p);
    }
    if (count == 0) {
      return false;
    }

    // As in Triton, a delay of 0 never "expires": preferred sizes still shape the batch.
    const bool delay_expired = max_delay_ != duration::zero() && now - oldest >= max_delay_;
    std::size_t take = count;
    batch_close_reason reason;
    if (best_count != 0 && !delay_expired) {
      // When the preferred prefix is everything the walk took, what stopped the walk (the
      // next request would pass max_batch_size, or differs in shape) is the better answer.
      reason =
          best_count == count && stopped ? stop_reason : batch_close_reason::preferred_batch_size;
      take = best_count;
      total = best_total;
    } else if (stopped) {
      reason = stop_reason;
    } else if (total >= max_preferred_) {
      reason = batch_close_reason::preferred_batch_size;
    } else if (delay_expired || max_delay_ == duration::zero()) {
      reason = delay_expired ? batch_close_reason::queue_delay_expired
                             : batch_close_reason::queue_drained;
    } else {
      wait_until_ = later_by(oldest, max_delay_);
      return false;
    }
    if (total == max_batch_size_ && reason != batch_close_reason::shape_mismatch &&
        reason != batch_close_reason::batch_rule) {
      reason = batch_close_reason::max_batch_size;
    }
    for (std::size_t i = 0; i < take; ++i) {
      plan.requests.push_back(queue_.remove(queue_.first()));
    }
    plan.elements = total;
    plan.reason = reason;
    return true;
  }

private:
  batch_compatibility compatibility_;
  std::vector<std::int64_t> preferred_;
  std::int64_t max_batch_size_;
  std::int64_t max_preferred_ = 1;
  duration max_delay_;
  std::size_t hold_until_;
  time_point wait_until_ = never;
  [[no_unique_address]] Rule rule_;
};

/// Policy: batch requests with Triton's dynamic batcher (configured by the model's
/// `dynamic_batching` options). `Rule` adds a custom batch rule (a `batch_rule`, checked here
/// with one message per missing member).
template <class Rule = accept_every_request>
struct dynamic_batcher {
  static_assert(check_batch_rule<Rule>());
  using policy_role = scheduler_role;
  // A rule that fails the check above gets the default core, so that the check's message is
  // the only error.
  using core_type =
      dynamic_batch_core<std::conditional_t<batch_rule<Rule>, Rule, accept_every_request>>;
  static constexpr bool batches_requests = true;
};

} // namespace servekit
