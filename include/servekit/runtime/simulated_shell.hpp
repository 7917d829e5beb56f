#pragma once
/// \file
/// simulated_shell: drives a decision core in virtual time with a backend latency model and no
/// threads. Deterministic tests of every timing rule, and capacity planning in seconds.

#include <servekit/core/clock.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/response_sink.hpp>
#include <servekit/metrics/statistics.hpp>
#include <servekit/queue/pending_request.hpp>
#include <servekit/runtime/adaptive_statistics.hpp>
#include <servekit/runtime/detail/finish.hpp>
#include <servekit/runtime/detail/shell_support.hpp>
#include <servekit/schedule/batch_plan.hpp>
#include <servekit/schedule/dynamic_batcher.hpp>
#include <servekit/schedule/scheduler.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <utility>
#include <vector>

namespace servekit {

/// Execution time of a batch as a function of its size: `fixed + per_element * elements`.
struct latency_model {
  duration fixed{};
  duration per_element{};
  [[nodiscard]] constexpr duration operator()(std::int64_t elements) const noexcept {
    return fixed + per_element * elements;
  }
};

/// One execution the simulated shell ran.
struct executed_batch {
  std::size_t instance = 0;
  time_point start{};
  time_point end{};
  std::int64_t elements = 0;
  batch_close_reason reason = batch_close_reason::queue_drained;
  std::vector<std::string> request_ids;    ///< in execution order ("" for a padding entry)
  std::vector<sequence_controls> sequence; ///< per entry, under the sequence batcher
};

/// A sequence that left its slot without an END, as the simulated shell saw it.
struct ended_sequence {
  std::size_t instance = 0;
  time_point at{};
  sequence_end notice;
};

/// Runs `SchedulerPolicy`'s decision core as the threaded shell would, on a virtual clock.
///
/// Events at the same instant are handled in this order: executions that end, then arrivals
/// and cancellations (in the order they were scheduled), then queue timeouts, then idle
/// instances (lowest index first) ask the core for batches. So a request arriving exactly when
/// an instance frees up joins the batch that instance starts.
///
/// Each executed request is answered, when its batch ends, with an ok response without outputs;
/// timeouts and cancellations are answered as the threaded shell answers them. A request that a
/// full level refuses is answered at its arrival with `unavailable` "Exceeds maximum queue size"
/// (the threaded model returns that status from submit instead).
template <class SchedulerPolicy = dynamic_batcher<>>
class simulated_shell {
public:
  using core_type = typename SchedulerPolicy::core_type;
  static constexpr bool pinned = pinned_scheduler_core<core_type>;
  static_assert(scheduler_core<core_type> || pinned);

  simulated_shell(const scheduler_settings& settings, std::size_t instances, latency_model latency)
      : core_{detail::with_instances(settings, instances)}, latency_{latency},
        busy_until_(instances, never), started_(instances),
        running_(instances), stats_{static_cast<std::size_t>(std::max(settings.max_batch_size, 1)),
                                    names(instances)} {}

  [[nodiscard]] time_point now() const noexcept { return now_; }

  /// Schedules the arrival of `r` at `at` (not before now()). `elements` is what it counts
  /// toward a batch (its batch dimension).
  void submit_at(time_point at, request r, response_sink sink, std::int64_t elements = 1) {
    r.arrival = std::max(at, now_);
    auto p = make_pending(std::move(r), std::move(sink));
    p->batch_elements = elements;
    p->ticket = next_ticket_++;
    events_.push({p->request.arrival, next_event_++, std::move(p), {}});
  }

  /// Schedules `source.cancel()` at `at`; queued requests it covers are answered `cancelled`.
  void cancel_at(time_point at, cancellation_source source) {
    events_.push({std::max(at, now_), next_event_++, nullptr, std::move(source)});
  }

  /// Batches that start from now on execute in `latency` (a backend that became slower or
  /// faster); batches executing now keep theirs.
  void set_latency(latency_model latency) noexcept { latency_ = latency; }

  /// Runs every event up to and including `until`, then sets the clock to `until`.
  void run_until(time_point until) {
    for (time_point t = next_event_time(); t != never && t <= until; t = next_event_time()) {
      step(t);
    }
    now_ = std::max(now_, until);
  }

  /// Runs until nothing is left to happen.
  void run() {
    for (time_point t = next_event_time(); t != never; t = next_event_time()) {
      step(t);
    }
  }

  /// Executions so far, in start order.
  [[nodiscard]] const std::vector<executed_batch>& batches() const noexcept { return batches_; }
  /// Sequences that left their slots without an END (sequence batcher), in order.
  [[nodiscard]] const std::vector<ended_sequence>& ended() const noexcept { return ended_; }
  [[nodiscard]] statistics_snapshot statistics() const {
    statistics_snapshot s = stats_.snapshot();
    if constexpr (reports_adaptive_batching<core_type>) {
      s.adaptive_batching = adaptive_snapshot(core_, now_);
    }
    return s;
  }
  [[nodiscard]] std::size_t queued() const noexcept { return core_.size(); }
  [[nodiscard]] const core_type& core() const noexcept { return core_; }

private:
  struct event {
    time_point at;
    std::uint64_t order = 0;
    pending_ptr arrival;              ///< an arriving request, or
    cancellation_source cancellation; ///< a cancellation
  };
  struct later {
    bool operator()(const event& a, const event& b) const noexcept {
      return a.at != b.at ? a.at > b.at : a.order > b.order;
    }
  };

  static std::vector<std::string> names(std::size_t instances) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < instances; ++i) {
      out.push_back("simulated_" + std::to_string(i));
    }
    return out;
  }

  [[nodiscard]] time_point next_event_time() const noexcept {
    time_point t = events_.empty() ? never : events_.top().at;
    for (const auto busy : busy_until_) {
      t = std::min(t, busy);
    }
    // The batching delay matters only to an idle instance; timeouts always do.
    if constexpr (pinned) {
      t = std::min(t, core_.next_timeout());
      for (std::size_t i = 0; i < busy_until_.size(); ++i) {
        if (busy_until_[i] == never) {
          t = std::min(t, core_.next_deadline(i));
        }
      }
    } else {
      const bool idle =
          std::find(busy_until_.begin(), busy_until_.end(), never) != busy_until_.end();
      t = std::min(t, idle ? core_.next_deadline() : core_.next_timeout());
    }
    return t;
  }

  void step(time_point t) {
    now_ = std::max(now_, t);
    for (std::size_t i = 0; i < busy_until_.size(); ++i) {
      if (busy_until_[i] <= now_) {
        finish(i);
      }
    }
    while (!events_.empty() && events_.top().at <= now_) {
      // priority_queue::top is const; the event is moved out just before pop.
      event e = std::move(const_cast<event&>(events_.top())); // NOLINT
      events_.pop();
      if (e.arrival) {
        arrive(std::move(e.arrival));
      } else {
        e.cancellation.cancel();
        core_.collect_cancelled(exits_);
      }
    }
    core_.expire(now_, exits_);
    detail::answer_early_exits(exits_, stats_, now_);
    for (std::size_t i = 0; i < busy_until_.size(); ++i) {
      if (busy_until_[i] == never) {
        start(i);
      }
    }
    detail::answer_early_exits(exits_, stats_, now_);
  }

  void arrive(pending_ptr p) {
    if constexpr (pinned) {
      const routing r = core_.enqueue(p, now_);
      if (!r.result.ok()) {
        detail::deliver(*p, response::failure(r.result, p->request.id));
        return;
      }
      stats_.add_pending(1);
      return;
    } else {
      arrive_shared(std::move(p));
    }
  }

  void arrive_shared(pending_ptr p) requires(!pinned) {
    p->level = core_.level_of(p->request);
    if (!core_.has_room(p->level)) {
      stats_.record_early_failure(failure_reason::rejected, 0);
      detail::deliver(*p,
                      response::failure(unavailable("Exceeds maximum queue size"), p->request.id));
      return;
    }
    stats_.add_pending(1);
    core_.enqueue(std::move(p));
  }

  void start(std::size_t instance) {
    batch_plan& plan = running_[instance];
    bool formed = false;
    if constexpr (pinned) {
      formed = core_.form_batch(instance, now_, plan, exits_);
      for (auto& e : plan.ended) {
        ended_.push_back({instance, now_, std::move(e)});
      }
      plan.ended.clear();
    } else {
      formed = core_.form_batch(now_, plan, exits_);
    }
    if (!formed) {
      return;
    }
    stats_.add_pending(-static_cast<std::int64_t>(real_requests(plan)));
    started_[instance] = now_;
    busy_until_[instance] = now_ + latency_(plan.elements);
    executed_batch record{instance,    now_, busy_until_[instance], plan.elements,
                          plan.reason, {},   plan.sequence};
    for (const auto& p : plan.requests) {
      record.request_ids.push_back(p ? p->request.id : std::string{});
    }
    batches_.push_back(std::move(record));
  }

  void finish(std::size_t instance) {
    batch_plan& plan = running_[instance];
    const time_point started = started_[instance];
    model_statistics::execution e;
    e.instance = instance;
    e.batch_size = static_cast<std::uint64_t>(plan.elements);
    e.requests = real_requests(plan);
    e.ok_requests = e.requests;
    e.ok_elements = 0;
    e.reason = plan.reason;
    e.compute_infer_ns = elapsed_ns(started, now_);
    for (auto& p : plan.requests) {
      if (!p) {
        continue; // padding
      }
      e.ok_elements += static_cast<std::uint64_t>(p->batch_elements);
      e.queue_ns += elapsed_ns(p->request.arrival, started);
      e.request_ok_ns += elapsed_ns(p->request.arrival, now_);
      response r;
      r.id = p->request.id;
      r.timing.queue_ns = elapsed_ns(p->request.arrival, started);
      r.timing.compute_infer_ns = e.compute_infer_ns;
      detail::deliver(*p, std::move(r));
    }
    stats_.record_execution(e);
    if constexpr (pinned) {
      core_.batch_done(instance, now_, plan);
    } else if constexpr (core_observes_batches<core_type>) {
      arrivals_.clear();
      for (const auto& p : plan.requests) {
        arrivals_.push_back(p->request.arrival);
      }
      core_.batch_done(started, now_, plan.elements, arrivals_);
    }
    plan.clear();
    busy_until_[instance] = never;
  }

  [[nodiscard]] static std::size_t real_requests(const batch_plan& plan) noexcept {
    return static_cast<std::size_t>(
        std::count_if(plan.requests.begin(), plan.requests.end(),
                      [](const pending_ptr& p) { return static_cast<bool>(p); }));
  }

  core_type core_;
  latency_model latency_;
  time_point now_{};
  std::vector<time_point> busy_until_;
  std::vector<time_point> started_;
  std::vector<time_point> arrivals_; // of the batch that finished (cores that observe batches)
  std::vector<batch_plan> running_;
  std::priority_queue<event, std::vector<event>, later> events_;
  early_exits exits_;
  std::vector<executed_batch> batches_;
  std::vector<ended_sequence> ended_;
  model_statistics stats_;
  std::uint64_t next_ticket_ = 0;
  std::uint64_t next_event_ = 0;
};

} // namespace servekit
