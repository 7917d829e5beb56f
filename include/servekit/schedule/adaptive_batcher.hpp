#pragma once
/// \file
/// The adaptive dynamic batcher: batches sized and timed by a controller from what it observes,
/// as a pure decision core, and its policy tag `dynamic_batcher<adaptive<Controller>>`.

#include <servekit/core/clock.hpp>
#include <servekit/core/status.hpp>
#include <servekit/queue/request_queue.hpp>
#include <servekit/schedule/batch_plan.hpp>
#include <servekit/schedule/batching_controllers.hpp>
#include <servekit/schedule/batching_signals.hpp>
#include <servekit/schedule/detail/queue_backed_core.hpp>
#include <servekit/schedule/dynamic_batcher.hpp>
#include <servekit/schedule/scheduler.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace servekit {

/// Names a batching controller for `dynamic_batcher<adaptive<Controller>>`.
template <batching_controller Controller = latency_target>
struct adaptive {
  using controller_type = Controller;
};

/// The dynamic batcher with its delay and batch size chosen by `Controller` instead of the
/// fixed max_queue_delay_microseconds and preferred sizes (which it ignores). The queue,
/// priority levels, queue policies, timeouts, cancellation and shape compatibility are the
/// dynamic batcher's.
///
/// When an instance is free, the controller decides from the queue (elements waiting, the
/// oldest request's arrival, batches in flight) and the signals it keeps: the arrival rate
/// (from enqueue), and the latency profile and share of requests within the objective (from
/// batch_done, which the shells call once each batch has executed). A batch is formed when
/// `wait_for` elements wait or the first in line has waited `max_delay`, taking queued requests
/// in order up to `at_most` elements (and max_batch_size).
///
/// With deadline admission on (adaptive_batching_options::deadline_admission), `admit` refuses a
/// request whose deadline the work ahead of it would make it miss, predicted from the profile.
template <batching_controller Controller>
class adaptive_batch_core : private detail::queue_backed_core {
public:
  explicit adaptive_batch_core(const scheduler_settings& s)
      : queue_backed_core{s.dynamic_batching.priority}, compatibility_{s.compatibility},
        signals_{s.dynamic_batching.adaptive, s.max_batch_size, s.instances},
        max_batch_size_{std::max<std::int64_t>(s.max_batch_size, 1)},
        hold_until_{s.hold_until_queued}, admission_{
                                              s.dynamic_batching.adaptive.deadline_admission} {}

  using queue_backed_core::deadline_of;
  using queue_backed_core::has_room;
  using queue_backed_core::level_of;
  using queue_backed_core::max_queue_size;
  using queue_backed_core::queue;
  [[nodiscard]] std::size_t size() const noexcept {
    return queue_.size() + refused_requests_.size();
  }

  /// Queues `p`, or with deadline admission refuses it (answered through the next expire,
  /// collect_cancelled or drain, as `admit` says).
  void enqueue(pending_ptr p) {
    p->level = queue_.level_of(p->request.priority);
    signals_.rate.observe(p->request.arrival, p->batch_elements);
    if (admission_) {
      if (status why = admit(*p, p->request.arrival); !why.ok()) {
        ++refused_;
        refused_requests_.push_back({std::move(p), std::move(why)});
        return;
      }
    }
    queued_elements_ += p->batch_elements;
    queue_.push(std::move(p));
  }

  /// Deadline-aware admission's decision: ok, or `unavailable` saying why a request arriving at
  /// `now` would miss its deadline (its queue timeout, else the objective) behind the work
  /// queued and executing. Ok until the profile has seen batches of different sizes (before,
  /// it reads every batch as all per-element time, which would refuse too much).
  [[nodiscard]] status admit(const pending_request& p, time_point now) const {
    if (!signals_.profile.has_slope()) {
      return {};
    }
    time_point deadline = deadline_of(p.request);
    if (signals_.target != duration::zero()) {
      deadline = std::min(deadline, later_by(p.request.arrival, signals_.target));
    }
    if (deadline == never) {
      return {};
    }
    const duration finish = predicted_wait(p.batch_elements);
    if (later_by(now, finish) <= deadline) {
      return {};
    }
    return unavailable("Request would miss its deadline: the work queued ahead of it takes about " +
                       std::to_string(finish.count() / 1000) + " us, " +
                       std::to_string(std::max<duration::rep>((deadline - now).count(), 0) / 1000) +
                       " us remain");
  }

  void expire(time_point now, early_exits& exits) {
    hand_over_refused(exits);
    const std::size_t before = exits.timed_out.size();
    queue_.expire(now, [&](pending_ptr p) { exits.timed_out.push_back(std::move(p)); });
    forget(exits.timed_out, before);
  }

  void collect_cancelled(early_exits& exits) {
    hand_over_refused(exits);
    const std::size_t before = exits.cancelled.size();
    queue_.take_cancelled(exits.cancelled);
    forget(exits.cancelled, before);
  }

  void drain(early_exits& exits) {
    hand_over_refused(exits);
    queue_.take_all(exits.cancelled);
    queued_elements_ = 0;
  }

  void flush() noexcept {
    flushing_ = true;
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
      hold_until_ = 0;
    }
    pending_request* head = first_live(exits);
    if (head == nullptr) {
      return false;
    }

    batching_decision d;
    if (!flushing_) {
      batching_view v;
      v.now = now;
      v.queued_elements = queued_elements_;
      v.oldest_arrival = head->request.arrival;
      v.in_flight = in_flight_;
      d = controller_.decide(v, signals_);
      last_ = d;
      if (d.hold && in_flight_ != 0) {
        return false; // batch_done makes this instance (or the one finishing) ask again
      }
      if (queued_elements_ < d.wait_for && d.max_delay != duration::zero()) {
        const time_point due = later_by(head->request.arrival, d.max_delay);
        if (now < due) {
          wait_until_ = due;
          return false;
        }
      }
    }

    const std::int64_t cap = std::clamp<std::int64_t>(d.at_most, 1, max_batch_size_);
    const request* first = nullptr;
    std::int64_t total = 0;
    batch_close_reason reason = batch_close_reason::queue_drained;
    for (pending_request* p = head; p != nullptr;) {
      pending_request* next = queue_.after(p);
      if (p->request.cancellation.cancelled()) {
        queued_elements_ -= p->batch_elements;
        exits.cancelled.push_back(queue_.remove(p));
        p = next;
        continue;
      }
      if (first != nullptr) {
        if (total + p->batch_elements > cap) {
          reason = total + p->batch_elements > max_batch_size_
                       ? batch_close_reason::next_request_does_not_fit
                       : batch_close_reason::preferred_batch_size;
          break;
        }
        if (compatibility_.needs_check() && !compatibility_.compatible(*first, p->request)) {
          reason = batch_close_reason::shape_mismatch;
          break;
        }
      } else {
        first = &p->request;
      }
      total += p->batch_elements;
      queued_elements_ -= p->batch_elements;
      plan.requests.push_back(queue_.remove(p));
      p = next;
    }
    if (total >= max_batch_size_) {
      reason = batch_close_reason::max_batch_size;
    } else if (reason == batch_close_reason::queue_drained && !flushing_ &&
               d.max_delay != duration::zero() && total < d.wait_for) {
      reason = batch_close_reason::queue_delay_expired;
    }
    plan.elements = total;
    plan.reason = reason;
    ++in_flight_;
    return true;
  }

  /// A batch this core formed executed from `started` to `finished`: `elements`, and the
  /// arrival of each of its requests. Feeds the latency profile, the share within the objective
  /// and the controller.
  void batch_done(time_point started, time_point finished, std::int64_t elements,
                  std::span<const time_point> arrivals) {
    in_flight_ -= in_flight_ != 0 ? 1U : 0U;
    batch_observation o;
    o.started = started;
    o.finished = finished;
    o.elements = elements;
    o.requests = arrivals.size();
    signals_.profile.observe(elements, finished - started);
    for (const time_point arrival : arrivals) {
      const duration latency = finished - arrival;
      signals_.observe_request(latency);
      o.worst_latency = std::max(o.worst_latency, latency);
    }
    controller_.observe(o, signals_);
  }

  [[nodiscard]] const batching_signals& signals() const noexcept { return signals_; }
  [[nodiscard]] const Controller& controller() const noexcept { return controller_; }
  [[nodiscard]] std::size_t in_flight() const noexcept { return in_flight_; }

  /// What the controller decided when a batch was last asked for.
  [[nodiscard]] const batching_decision& last_decision() const noexcept { return last_; }
  /// Requests deadline-aware admission refused.
  [[nodiscard]] std::uint64_t refused_for_deadline() const noexcept { return refused_; }
  [[nodiscard]] std::int64_t max_batch_size() const noexcept { return max_batch_size_; }

private:
  /// The first request in line that is not cancelled (cancelled ones go to `exits`).
  pending_request* first_live(early_exits& exits) {
    pending_request* p = queue_.first();
    while (p != nullptr && p->request.cancellation.cancelled()) {
      pending_request* next = queue_.after(p);
      queued_elements_ -= p->batch_elements;
      exits.cancelled.push_back(queue_.remove(p));
      p = next;
    }
    return p;
  }

  void hand_over_refused(early_exits& exits) {
    for (auto& r : refused_requests_) {
      exits.refused.push_back(std::move(r));
    }
    refused_requests_.clear();
  }

  void forget(const std::vector<pending_ptr>& removed, std::size_t from) noexcept {
    for (std::size_t i = from; i < removed.size(); ++i) {
      queued_elements_ -= removed[i]->batch_elements;
    }
  }

  /// How long until a request of `elements` joining the queue now would finish: the queued
  /// work in batches of max_batch_size spread over the instances, then its own batch.
  [[nodiscard]] duration predicted_wait(std::int64_t elements) const noexcept {
    const std::int64_t ahead = queued_elements_ + elements;
    const std::int64_t batches = (ahead + max_batch_size_ - 1) / max_batch_size_;
    const auto instances = static_cast<std::int64_t>(signals_.instances);
    // Rounds of batches: those in flight finish in about half an execution on average.
    const std::int64_t rounds = (batches + instances - 1) / instances;
    const double each = signals_.profile.seconds(std::min(ahead, max_batch_size_));
    const double busy = in_flight_ != 0 ? 0.5 * signals_.profile.seconds(max_batch_size_) : 0.0;
    return latency_profile::duration_of(static_cast<double>(rounds) * each + busy);
  }

  batch_compatibility compatibility_;
  batching_signals signals_;
  Controller controller_;
  batching_decision last_;
  std::int64_t max_batch_size_;
  std::int64_t queued_elements_ = 0;
  std::size_t in_flight_ = 0;
  std::size_t hold_until_;
  std::uint64_t refused_ = 0;
  std::vector<refusal> refused_requests_; // until the shell next collects early exits
  time_point wait_until_ = never;
  bool admission_;
  bool flushing_ = false;
};

/// Policy: the dynamic batcher, its batches sized and timed by `Controller` (see
/// adaptive_batch_core), e.g. `dynamic_batcher<adaptive<latency_target>>`.
template <class Controller>
struct dynamic_batcher<adaptive<Controller>> {
  using policy_role = scheduler_role;
  using core_type = adaptive_batch_core<Controller>;
  static constexpr bool batches_requests = true;
};

} // namespace servekit
