#pragma once
/// \file
/// shell_runtime: what both threaded shells do the same way whatever their decision core:
/// build the instances and run their threads, run the timekeeper thread, shut down, and execute
/// a formed batch on an instance.

#include <servekit/backend/backend.hpp>
#include <servekit/backend/batch.hpp>
#include <servekit/core/clock.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/status.hpp>
#include <servekit/metrics/statistics.hpp>
#include <servekit/queue/pending_request.hpp>
#include <servekit/runtime/detail/decoupled_requests.hpp>
#include <servekit/runtime/detail/finish.hpp>
#include <servekit/runtime/detail/instance_rate_limits.hpp>
#include <servekit/runtime/detail/instances.hpp>
#include <servekit/runtime/detail/parking_spot.hpp>
#include <servekit/runtime/detail/shell_support.hpp>
#include <servekit/runtime/instance_group.hpp>
#include <servekit/runtime/model_environment.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/runtime/resolved_config.hpp>
#include <servekit/runtime/shutdown_mode.hpp>
#include <servekit/schedule/batch_plan.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace servekit::detail {

/// Decoupled models: sends response(i) as the final response of its request unless the backend
/// took the request's sender over (an execution that failed fails them all, taken or not,
/// unless they have their final).
inline void send_final_response(batch& b, std::size_t i) {
  response& r = b.response(i);
  if (!b.sender_taken(i) || !r.ok()) {
    (void)b.decoupled_state(i)->send(std::move(r), true);
  }
}

/// The part of a threaded shell that does not depend on its decision core: the instances of
/// `Backend` and their threads, the timekeeper thread, the lifecycle (running, then draining or
/// cancelling) with the submits in flight, the rate-limiter registration and, for a decoupled
/// model, the requests still owed a final response. What a shell does with its core comes in as
/// a callable (a template argument, inlined: no virtual call, no allocation per request).
///
/// A shell declares it after the members it reads while building (its placements), builds its
/// core first, and starts the threads from its constructor's body, once all of it exists.
template <class Backend>
class shell_runtime {
public:
  using traits = backend_traits<Backend>;
  using instance = backend_instance<Backend>;

  /// Builds every instance (calling each backend's constructor on this thread, then its warmup)
  /// and registers them with the rate limiter; starts no thread. Throws config_error if a
  /// backend's constructor throws or the limiter cannot honour the instance groups.
  shell_runtime(const model_options& options, const resolved_config& config,
                const std::vector<instance_placement>& placements, model_statistics& stats,
                const model_environment& environment)
      : options_{options}, stats_{stats} {
    if constexpr (traits::decoupled) {
      decoupled_.emplace(options.name, stats, config.final_response_timeout_microseconds);
    }
    rate_limits_ =
        instance_rate_limits{environment.limiter, options.name, options.instance_group, placements};
    instances_ = create_instances<Backend>(options, config, placements, &stats);
  }

  shell_runtime(const shell_runtime&) = delete;
  shell_runtime& operator=(const shell_runtime&) = delete;
  ~shell_runtime() = default; // the shell shuts down first: every thread is joined by then

  // -- threads -----------------------------------------------------------------------------------

  /// Starts one thread per instance, running `run(index)`.
  template <class Run>
  void start_instances(Run run) {
    for (std::size_t i = 0; i < instances_.size(); ++i) {
      instances_[i]->thread = std::thread{[run, i] { run(i); }};
    }
  }

  /// Starts the timekeeper thread. Until shutdown it calls `tick()`, which applies what is due
  /// and returns the next deadline, and then sleeps until that deadline unless `earlier(next)`
  /// says that a submit may have made an earlier one meanwhile. The deadline is published
  /// before that check, so that a submit either sees it (and wakes the timekeeper, see
  /// wake_timekeeper_before) or the check sees the submit's request.
  template <class Tick, class Earlier>
  void start_timekeeper(Tick tick, Earlier earlier) {
    timekeeper_ =
        std::thread{[this, tick = std::move(tick), earlier = std::move(earlier)]() mutable {
          while (!timekeeper_stop_.load(std::memory_order_seq_cst)) {
            const time_point next = tick();
            const std::uint32_t seen = timekeeper_spot_.epoch();
            timekeeper_target_.store(next.time_since_epoch().count(), std::memory_order_seq_cst);
            if (timekeeper_stop_.load(std::memory_order_seq_cst) || earlier(next)) {
              continue;
            }
            timekeeper_spot_.wait(seen, next);
          }
        }};
  }

  /// Wakes the timekeeper if `deadline` comes before the deadline it sleeps until.
  void wake_timekeeper_before(time_point deadline) noexcept {
    if (deadline < time_point{duration{timekeeper_target_.load(std::memory_order_seq_cst)}}) {
      timekeeper_spot_.wake_one();
    }
  }

  [[nodiscard]] instance& at(std::size_t index) noexcept { return *instances_[index]; }
  [[nodiscard]] std::size_t instance_count() const noexcept { return instances_.size(); }

  /// Decoupled models: requests whose final response has not been sent yet.
  [[nodiscard]] std::size_t outstanding_decoupled() const {
    return decoupled_ ? decoupled_->outstanding() : 0;
  }

  // -- lifecycle ---------------------------------------------------------------------------------

  /// Counts a submit in progress until the guard is destroyed; shutdown waits for such submits,
  /// so that one that saw running() finishes its push before the core is drained.
  [[nodiscard]] submit_guard guard_submit() noexcept { return submit_guard{submitters_}; }

  /// Whether shutdown has not begun. `order` pairs the read with the caller's other reads.
  [[nodiscard]] bool running(std::memory_order order = std::memory_order_acquire) const noexcept {
    return state_.load(order) == state::running;
  }

  /// What a submit answers once shutdown has begun.
  [[nodiscard]] status refusal() const {
    return unavailable("model '" + options_.name +
                       "' is shutting down and accepts no new requests");
  }

  /// Stops accepting requests and stops the threads. The first call waits for the submits in
  /// flight, then, under `core_mutex`, has `stop_core(exits)` give the core's queued requests
  /// their fate (executed by a drain, or moved to `exits` by a cancel), answers `exits` and
  /// calls `wake_all()` so that idle instances see the new state. Every call then joins the
  /// threads; a decoupled model's requests still owed a final response are waited for
  /// (`drain`, bounded by final_response_timeout_microseconds when set) or answered
  /// `cancelled` (`cancel`).
  template <class StopCore, class WakeAll>
  void shutdown(shutdown_mode mode, std::mutex& core_mutex, StopCore stop_core, WakeAll wake_all) {
    state expected = state::running;
    const state next = mode == shutdown_mode::drain ? state::draining : state::cancelling;
    if (state_.compare_exchange_strong(expected, next, std::memory_order_acq_rel)) {
      while (submitters_.load(std::memory_order_acquire) != 0) {
        std::this_thread::yield(); // a submit that passed the state check finishes its push
      }
      early_exits exits;
      {
        const std::lock_guard lock{core_mutex};
        stop_core(exits);
      }
      if (mode == shutdown_mode::abort) {
        aborting_.store(true, std::memory_order_release);
        for (auto& p : exits.cancelled) {
          exits.shut_down.push_back(std::move(p));
        }
        exits.cancelled.clear();
      }
      answer_early_exits(exits, stats_, clock::now());
      wake_all();
    }
    if (mode == shutdown_mode::abort) {
      aborting_.store(true, std::memory_order_release); // also when a drain or cancel came first
    }
    const bool aborting = aborting_.load(std::memory_order_acquire);
    if (decoupled_ && mode != shutdown_mode::drain) {
      // A draining shutdown may be waiting (holding join_mutex_) for requests a backend never
      // finishes: answering them now lets it return, so a cancel can follow a drain.
      decoupled_->cancel_all(aborting);
    }
    const std::lock_guard join_lock{join_mutex_};
    for (auto& in : instances_) {
      if (in->thread.joinable()) {
        in->thread.join();
      }
    }
    if (timekeeper_.joinable()) {
      timekeeper_stop_.store(true, std::memory_order_seq_cst);
      timekeeper_spot_.wake_all();
      timekeeper_.join();
    }
    if (decoupled_) {
      if (mode != shutdown_mode::drain ||
          state_.load(std::memory_order_acquire) == state::cancelling) {
        // Again: batches that ran until the join may have opened more.
        decoupled_->cancel_all(aborting_.load(std::memory_order_acquire));
      }
      decoupled_->wait_idle();
    }
  }

  // -- execution ---------------------------------------------------------------------------------

  /// Executes `b`, which the shell bound from `plan`, on `self`: waits for the instance's
  /// rate-limiter resources, hands each decoupled request's sink to a per-request state, runs
  /// the backend, and finishes the response of each entry that has a request (a null entry is
  /// padding): a backend that threw fails it, `settle(i, response, backend_threw)` may still
  /// fail it, then it gets its id, outputs and timing and is counted. Records the execution;
  /// `real` is the number of requests. Delivering the responses is the caller's.
  template <class Settle>
  void execute(instance& self, batch_plan& plan, batch& b, std::size_t real, Settle settle) {
    const std::size_t index = self.context.instance_index;
    // Blocks until the rate limiter grants the instance its group's resources (at once, and
    // for free, without a limiter or without `rate_limiter` in its group).
    if (const std::uint64_t waited = rate_limits_.acquire(index); waited != 0) {
      stats_.record_rate_limiter_wait(waited);
    }
    instance_rate_limits::held resources{rate_limits_, index};
    stats_.add_pending(-static_cast<std::int64_t>(real));

    const time_point start = clock::now();
    if constexpr (traits::decoupled) {
      for (const auto& p : plan.requests) {
        b.bind_decoupled(p ? decoupled_->open(*p, start) : nullptr);
      }
    }
    const std::optional<status> failure = run_backend(*self.backend, b);
    const time_point end = clock::now();
    resources.release(); // as Triton: when execute returns, not at the final response

    model_statistics::execution e =
        execution_record(index, b, start, end, plan.elements, real, plan.reason);
    for (std::size_t i = 0; i < plan.requests.size(); ++i) {
      pending_request* p = plan.requests[i].get();
      if (p == nullptr) {
        continue;
      }
      response& r = b.response(i);
      if (failure) {
        r = response::failure(status{
            failure->code(), "backend of model '" + options_.name + "' failed in instance '" +
                                 self.placement.name + "': " + failure->message()});
      }
      settle(i, r, failure.has_value());
      finish_response(p->request, r);
      stamp_timing(r, p->request, start, e);
      count_request(e, p->request, p->batch_elements, r.ok(), start, end);
    }
    stats_.record_execution(e);
  }

private:
  enum class state : std::uint8_t { running, draining, cancelling };

  // First, so that a shell that declares this object right after its own wake-up state keeps
  // everything a submit touches together: the timekeeper's wake-up channel and the lifecycle.
  detail::parking_spot timekeeper_spot_;
  std::atomic<duration::rep> timekeeper_target_{never.time_since_epoch().count()};
  std::atomic<bool> timekeeper_stop_{false};
  std::atomic<state> state_{state::running};
  std::atomic<int> submitters_{0};
  std::atomic<bool> aborting_{false}; ///< a shutdown_mode::abort began: owed answers say so
  std::mutex join_mutex_;

  // The model's configuration and statistics (the model owns them and outlives the shell).
  const model_options& options_;
  model_statistics& stats_;

  // Decoupled models only; outlives the instances (their senders point into it).
  std::optional<decoupled_requests> decoupled_;
  instance_rate_limits rate_limits_; // unregisters after the instances stopped
  std::vector<std::unique_ptr<instance>> instances_;
  std::thread timekeeper_;
};

} // namespace servekit::detail
