#pragma once
/// \file
/// threaded_shell: runs a decision core and a model's backend instances on real threads.

#include <servekit/backend/backend.hpp>
#include <servekit/backend/batch.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/response_sink.hpp>
#include <servekit/metrics/statistics.hpp>
#include <servekit/queue/intake.hpp>
#include <servekit/queue/request_queue.hpp>
#include <servekit/runtime/detail/finish.hpp>
#include <servekit/runtime/detail/instance_holds.hpp>
#include <servekit/runtime/detail/instances.hpp>
#include <servekit/runtime/detail/ordered_completion.hpp>
#include <servekit/runtime/detail/parking_spot.hpp>
#include <servekit/runtime/detail/shell_runtime.hpp>
#include <servekit/runtime/detail/shell_support.hpp>
#include <servekit/runtime/instance_group.hpp>
#include <servekit/runtime/model_environment.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/runtime/resolved_config.hpp>
#include <servekit/runtime/shutdown_mode.hpp>
#include <servekit/schedule/scheduler.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace servekit {

/// Drives decision core `Core` with one thread per `Backend` instance.
///
/// Submitters hand requests to a lock-free intake and wake an idle instance if there is one.
/// Each instance thread, when free, takes the core's lock briefly, moves the intake into the
/// core, asks it for a batch and executes the batch outside the lock; out of work, it watches
/// the intake for a few microseconds, then sleeps on a futex until the core's next deadline. A
/// timekeeper thread exists only when a queue policy has timeouts, so that a REJECT timeout
/// fires at its deadline even while every instance is busy. No virtual call on this path.
///
/// `model<Backend, Policies...>` builds one; use it directly only to write another composition
/// root.
template <class Backend, scheduler_core Core>
class threaded_shell {
public:
  using traits = backend_traits<Backend>;

  /// Builds every instance (calling each backend's constructor on this thread) and starts
  /// their threads. Throws config_error if a backend's constructor throws.
  threaded_shell(const model_options& options, const resolved_config& config,
                 std::vector<instance_placement> placements, model_statistics& stats,
                 const model_environment& environment)
      : config_{config}, stats_{stats}, placements_{std::move(placements)}, core_{config.scheduler},
        runtime_{options, config, placements_, stats, environment},
        preserve_ordering_{config.scheduler.dynamic_batching.preserve_ordering},
        holds_{runtime_.instance_count()}, caller_batches_{std::make_unique<caller_batch[]>(
                                               runtime_.instance_count())} {
    setup_admission();
    start_threads();
  }

  threaded_shell(const threaded_shell&) = delete;
  threaded_shell& operator=(const threaded_shell&) = delete;

  /// Drains (see `shutdown`) if it was not shut down explicitly.
  ~threaded_shell() { shutdown(shutdown_mode::drain); }

  /// Queues a validated request that counts `elements` toward a batch, or says why not
  /// (`unavailable`: shutting down, or its priority level is full). Any thread, no lock.
  [[nodiscard]] status submit(request&& r, response_sink&& sink, std::int64_t elements) {
    return enter<false>(std::move(r), std::move(sink), elements);
  }

  /// submit(), executing on this thread when that is faster and allowed: when the backend
  /// declares `execute_on_any_thread`, an instance is free and nothing is queued ahead, this
  /// thread holds that instance, has the core form the batch and executes it, so the response
  /// reaches `sink` before this returns (infer_sync's path: two hand-offs between threads
  /// saved). Otherwise, or when the core waits for more (a queue delay), the same as submit.
  [[nodiscard]] status submit_here(request&& r, response_sink&& sink, std::int64_t elements) {
    return enter<here_allowed>(std::move(r), std::move(sink), elements);
  }

  /// Cancels the requests whose tokens come from `source`. Queued ones are answered with
  /// `cancelled` before this returns; one already executing finishes normally.
  void cancel(cancellation_source& source) {
    source.cancel();
    early_exits exits;
    bool took = false;
    {
      const std::lock_guard lock{core_mutex_};
      took = take_intake();
      core_.collect_cancelled(exits);
      release_admissions(exits);
    }
    detail::answer_early_exits(exits, stats_, clock::now());
    if (took) {
      wake_idle_instance();
    }
  }

  /// `f(core, now)` under the core's lock: what statistics read of a core's own state (the
  /// adaptive batcher's controller, runtime/adaptive_statistics.hpp).
  template <class F>
  [[nodiscard]] auto inspect_core(F&& f) const {
    const std::lock_guard lock{core_mutex_};
    return std::forward<F>(f)(core_, clock::now());
  }

  /// Stops accepting requests and stops the instance threads, explicitly choosing what happens
  /// to queued requests. Idempotent; returns when every instance thread has finished. A
  /// decoupled model's requests still owed a final response are waited for (`drain`, bounded
  /// by final_response_timeout_microseconds when set) or answered `cancelled` (`cancel`).
  void shutdown(shutdown_mode mode) {
    runtime_.shutdown(
        mode, core_mutex_,
        [&](early_exits& exits) {
          take_intake();
          if (mode != shutdown_mode::drain) {
            core_.drain(exits);
            release_admissions(exits);
          } else {
            core_.flush();
          }
        },
        [&] { idle_spot_.wake_all(); });
  }

  /// Decoupled models: requests whose final response has not been sent yet.
  [[nodiscard]] std::size_t outstanding_decoupled() const {
    return runtime_.outstanding_decoupled();
  }

  [[nodiscard]] std::size_t instance_count() const noexcept { return runtime_.instance_count(); }

private:
  using instance = detail::backend_instance<Backend>;

  /// Whether submit_here may execute on the caller's thread: the backend allows it, and the
  /// model is not decoupled (a decoupled backend's responses outlive execute).
  static constexpr bool here_allowed = traits::execute_on_any_thread && !traits::decoupled;

  // -- entering: submit and submit_here ----------------------------------------------------------

  template <bool Here>
  [[nodiscard]] status enter(request&& r, response_sink&& sink, std::int64_t elements) {
    const auto guard = runtime_.guard_submit();
    if (!runtime_.running()) {
      return runtime_.refusal();
    }
    const std::uint32_t level = core_.level_of(r);
    if (bounded_[level] && !admit(level)) {
      stats_.record_early_failure(failure_reason::rejected, 0);
      return unavailable("Exceeds maximum queue size");
    }
    r.arrival = clock::now();
    const time_point deadline = timekeeper_ ? core_.deadline_of(r) : never;
    pending_ptr p = make_pending(std::move(r), std::move(sink));
    p->batch_elements = elements;
    p->level = level;
    stats_.add_pending(1);
    if constexpr (Here) {
      if (const std::optional<std::size_t> held = holds_.try_hold_free()) {
        p = run_here(*held, std::move(p), deadline);
        if (!p) {
          return {};
        }
        // The core held requests already: this one queues behind them, as submit queues it.
      }
    }
    p->ticket = submitted_.fetch_add(1, std::memory_order_seq_cst);
    intake_.push(std::move(p));
    // An instance spinning for work takes this request without being woken; waking a parked one
    // as well would cost this thread a futex system call and the machine a thread that wakes to
    // find nothing (on two cores, one that competes with the spinner and the client).
    if (spinning_.load(std::memory_order_seq_cst) == 0 &&
        idle_.load(std::memory_order_seq_cst) > 0) {
      idle_spot_.wake_one();
    }
    runtime_.wake_timekeeper_before(deadline);
    return {};
  }

  // -- holding an instance (detail::instance_holds): its thread, or a caller of submit_here ---

  /// A batch's times and arrivals, kept from its execution until the instance next holds the
  /// core's lock (so that a core that learns from executions costs no extra lock).
  struct finished_batch {
    time_point started{};
    time_point finished{};
    std::int64_t elements = 0;
    std::vector<time_point> arrivals; // reused: grows to the largest batch, then allocates no more
    bool pending = false;
  };

  /// A submit_here caller's working state for a batch it executes on one instance (reused: a
  /// caller allocates nothing per request beyond what the instance's thread would).
  struct caller_batch {
    batch_plan plan;
    early_exits exits;
    batch b;
    finished_batch done;
  };

  /// The instance's thread before it forms a batch. If a caller holds the instance, whatever
  /// woke this thread is another instance's to take meanwhile: wake a parked one (a submitter
  /// that saw this thread spinning woke nobody), then wait for the caller to let go.
  void hold(std::size_t index) noexcept {
    holds_.hold(index, [this] {
      if (idle_.load(std::memory_order_seq_cst) > 0) {
        idle_spot_.wake_one();
      }
    });
  }

  /// submit_here's execution on instance `index`, which this thread holds: gives the request to
  /// the core and executes the batch the core forms at once. Returns the request back, not
  /// queued, if the core held requests already (they go first, on the instances' threads).
  [[nodiscard]] pending_ptr run_here(std::size_t index, pending_ptr p, time_point deadline) {
    caller_batch& h = caller_batches_[index];
    bool formed = false;
    bool more = false;
    std::uint64_t sequence = 0;
    {
      const std::lock_guard lock{core_mutex_};
      take_intake();
      if (core_.size() == 0) {
        // Counted as submitted and consumed at once: it never passes through the intake.
        p->ticket = submitted_.fetch_add(1, std::memory_order_seq_cst);
        consumed_.store(consumed_.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst);
        // Its arrival is "now" to the core: nothing else is queued, and a clock read is a
        // noticeable part of this path (a few tens of ns on a virtual machine).
        const time_point now = p->request.arrival;
        core_.enqueue(std::move(p));
        formed = core_.form_batch(now, h.plan, h.exits);
        if (formed) {
          sequence = next_sequence_++;
          for (const auto& q : h.plan.requests) {
            release_admission(*q);
          }
          more = core_.size() != 0;
        } else {
          // The core keeps it (a queue delay): the instances' threads read its new deadline.
          core_generation_.fetch_add(1, std::memory_order_seq_cst);
        }
        release_admissions(h.exits);
      }
    }
    if (p) {
      holds_.let_go(index);
      return p;
    }
    if (!h.exits.empty()) {
      detail::answer_early_exits(h.exits, stats_, clock::now());
    }
    if (formed) {
      holds_.mark(index, detail::instance_holds::executing);
      if (more) {
        wake_idle_instance();
      }
      execute(runtime_.at(index), h.plan, h.b, sequence, h.done);
      if constexpr (core_observes_batches<Core>) {
        const std::lock_guard lock{core_mutex_};
        core_.batch_done(h.done.started, h.done.finished, h.done.elements, h.done.arrivals);
        h.done.pending = false;
      }
      holds_.let_go(index);
    } else {
      holds_.let_go(index);
      wake_idle_instance();
      runtime_.wake_timekeeper_before(deadline);
    }
    return nullptr;
  }

  // -- admission: max_queue_size without taking the core's lock -------------------------------

  void setup_admission() {
    bool timeouts = false;
    const auto& priority = config_.scheduler.dynamic_batching.priority;
    // Admission classes, not priority_levels: that value may be as large as 2^64 - 1.
    const std::size_t levels = priority_class_count(priority);
    bounded_.assign(levels, false);
    admitted_ = std::make_unique<std::atomic<std::uint32_t>[]>(levels);
    for (std::uint32_t level = 0; level < levels; ++level) {
      bounded_[level] = core_.max_queue_size(level) != 0;
    }
    timeouts = priority.default_queue_policy.has_timeouts();
    for (const auto& [level, policy] : priority.priority_queue_policy) {
      timeouts = timeouts || policy.has_timeouts();
    }
    timekeeper_ = timeouts;
  }

  bool admit(std::uint32_t level) noexcept {
    const std::uint32_t max = core_.max_queue_size(level);
    if (admitted_[level].fetch_add(1, std::memory_order_relaxed) >= max) {
      admitted_[level].fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    return true;
  }

  void release_admission(const pending_request& p) noexcept {
    if (bounded_[p.level]) {
      admitted_[p.level].fetch_sub(1, std::memory_order_relaxed);
    }
  }
  void release_admissions(const early_exits& exits) noexcept {
    for (const auto& p : exits.timed_out) {
      release_admission(*p);
    }
    for (const auto& p : exits.cancelled) {
      release_admission(*p);
    }
    for (const auto& r : exits.refused) {
      release_admission(*r.request);
    }
  }

  // -- threads -----------------------------------------------------------------------------------

  void start_threads() {
    runtime_.start_instances([this](std::size_t i) { run_instance(i); });
    if (timekeeper_) {
      runtime_.start_timekeeper(
          [this, exits = early_exits{}]() mutable { return apply_timeouts(exits); },
          [this](time_point) { return has_unseen_work(); });
    }
  }

  // -- the core, under core_mutex_ ---------------------------------------------------------------

  /// Moves everything submitted so far into the core; true if it moved anything. Caller holds
  /// core_mutex_. A thread that is not going to form a batch itself (the timekeeper, cancel)
  /// must then call wake_idle_instance(): the submitter may have found no idle instance to wake.
  bool take_intake() {
    bool took = false;
    while (consumed_.load(std::memory_order_relaxed) !=
           submitted_.load(std::memory_order_seq_cst)) {
      pending_ptr p = intake_.pop();
      if (!p) {
        std::this_thread::yield(); // a producer is between its two steps; it is about to link
        continue;
      }
      consumed_.store(consumed_.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst);
      core_.enqueue(std::move(p));
      took = true;
    }
    if (took) {
      core_generation_.fetch_add(1, std::memory_order_seq_cst);
    }
    return took;
  }

  /// Requests submitted but not yet moved into the core.
  [[nodiscard]] bool has_unseen_work() const noexcept {
    return consumed_.load(std::memory_order_seq_cst) != submitted_.load(std::memory_order_seq_cst);
  }

  /// Wakes a parked instance unless one is spinning: a spinner sees the core's generation change
  /// (take_intake bumps it) or the unseen work, and comes for it.
  void wake_idle_instance() noexcept {
    if (spinning_.load(std::memory_order_seq_cst) == 0 &&
        idle_.load(std::memory_order_seq_cst) > 0) {
      idle_spot_.wake_one();
    }
  }

  void run_instance(std::size_t index) {
    instance& self = runtime_.at(index);
    batch_plan plan;
    early_exits exits;
    batch b;
    finished_batch done;  // the batch this instance executed last, for a core that learns from it
    bool holding = false; // this thread holds its instance (see "holding an instance")
    for (;;) {
      if (holding) {
        holds_.mark(index, detail::instance_holds::looking);
      } else {
        hold(index);
        holding = true;
      }
      bool formed = false;
      bool finished = false;
      bool more = false;
      std::uint64_t sequence = 0;
      std::uint64_t generation = 0;
      time_point deadline = never;
      {
        const std::lock_guard lock{core_mutex_};
        if constexpr (core_observes_batches<Core>) {
          if (done.pending) {
            core_.batch_done(done.started, done.finished, done.elements, done.arrivals);
            done.pending = false;
          }
        }
        take_intake();
        formed = core_.form_batch(clock::now(), plan, exits);
        if (formed) {
          sequence = next_sequence_++;
          for (const auto& p : plan.requests) {
            release_admission(*p);
          }
          more = core_.size() != 0;
        } else {
          finished = !runtime_.running() && core_.size() == 0 && !has_unseen_work();
          deadline = core_.next_deadline();
          generation = core_generation_.load(std::memory_order_relaxed);
        }
        release_admissions(exits);
      }
      if (!exits.empty()) {
        detail::answer_early_exits(exits, stats_, clock::now());
      }
      if (formed) {
        holds_.mark(index, detail::instance_holds::executing);
        if (more) {
          wake_idle_instance(); // another instance can start the rest
        }
        execute(self, plan, b, sequence, done);
        continue; // still holding the instance
      }
      holds_.let_go(index); // idle: a submit_here caller may execute on it meanwhile
      holding = false;
      if (finished) {
        return;
      }
      if (!spin_for_work(deadline, generation)) {
        park(deadline, generation);
      }
    }
  }

  /// Spins briefly before sleeping (see detail::spin_for_work). Spinning instances are counted in
  /// spinning_, not idle_: a submitter that sees one spinning wakes nobody. That is safe by the
  /// same Dekker pairing as park(): a submitter publishes its request and then reads spinning_,
  /// while a spinner that gives up lowers spinning_ and then (in park) looks for unseen work; so
  /// either the submitter sees no spinner and wakes a parked instance, or the former spinner sees
  /// the request and does not sleep.
  [[nodiscard]] bool spin_for_work(time_point deadline, std::uint64_t generation) noexcept {
    spinning_.fetch_add(1, std::memory_order_seq_cst);
    const bool found = detail::spin_for_work(deadline, [&] {
      return has_unseen_work() || core_generation_.load(std::memory_order_relaxed) != generation ||
             !runtime_.running(std::memory_order_relaxed);
    });
    spinning_.fetch_sub(1, std::memory_order_seq_cst);
    return found;
  }

  /// Sleeps until `deadline`, unless work arrived since the core said "nothing to form" at
  /// `generation`. Paired with the wakers' "publish work, then read idle_" (Dekker's pattern,
  /// all sequentially consistent), so that either the waker sees this instance idle and wakes
  /// it, or this instance sees the new work and does not sleep.
  void park(time_point deadline, std::uint64_t generation) {
    idle_.fetch_add(1, std::memory_order_seq_cst);
    const std::uint32_t seen = idle_spot_.epoch();
    if (!has_unseen_work() && core_generation_.load(std::memory_order_seq_cst) == generation &&
        runtime_.running(std::memory_order_seq_cst)) {
      idle_spot_.wait(seen, deadline);
    }
    idle_.fetch_sub(1, std::memory_order_seq_cst);
  }

  /// The timekeeper's tick: applies REJECT timeouts that are due, even while every instance is
  /// busy; returns when the next one is.
  time_point apply_timeouts(early_exits& exits) {
    time_point next = never;
    bool took = false;
    {
      const std::lock_guard lock{core_mutex_};
      took = take_intake();
      core_.expire(clock::now(), exits);
      release_admissions(exits);
      next = core_.next_timeout();
    }
    if (took) {
      wake_idle_instance();
    }
    if (!exits.empty()) {
      detail::answer_early_exits(exits, stats_, clock::now());
    }
    return next;
  }

  // -- execution ---------------------------------------------------------------------------------

  void execute(instance& self, batch_plan& plan, batch& b, std::uint64_t sequence,
               finished_batch& done) {
    const std::size_t n = plan.requests.size();
    b.clear();
    b.bind(self.context, traits::decoupled);
    for (const auto& p : plan.requests) {
      b.add(p->request, p->batch_elements, p->sink);
    }
    if constexpr (core_observes_batches<Core>) {
      done.arrivals.clear();
      for (const auto& p : plan.requests) {
        done.arrivals.push_back(p->request.arrival);
      }
      done.elements = plan.elements;
      done.started = clock::now();
    }
    runtime_.execute(self, plan, b, n, [](std::size_t, response&, bool) {});
    if constexpr (core_observes_batches<Core>) {
      done.finished = clock::now();
      done.pending = true;
    }
    if constexpr (traits::decoupled) {
      for (std::size_t i = 0; i < n; ++i) {
        detail::send_final_response(b, i);
      }
    } else if (preserve_ordering_) {
      ordering_.complete(sequence, plan, b);
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        detail::deliver(*plan.requests[i], std::move(b.response(i)));
      }
    }
    b.clear();
    plan.clear();
  }

  // The model's configuration and statistics (the model owns them and outlives this shell).
  const resolved_config& config_;
  model_statistics& stats_;
  std::vector<instance_placement> placements_;

  // The decision core and what feeds it.
  mutable std::mutex core_mutex_; // mutable: inspect_core reads the core for statistics
  Core core_;
  intake intake_;
  std::uint64_t next_sequence_ = 0; // guarded by core_mutex_
  alignas(64) std::atomic<std::uint64_t> submitted_{0};
  alignas(64) std::atomic<std::uint64_t> consumed_{0}; // written under core_mutex_
  std::atomic<std::uint64_t> core_generation_{0};      // bumped under core_mutex_
  std::vector<bool> bounded_;
  std::unique_ptr<std::atomic<std::uint32_t>[]> admitted_;

  // Sleeping and waking.
  alignas(64) std::atomic<int> idle_{0};
  std::atomic<int> spinning_{0}; // instances in spin_for_work
  detail::parking_spot idle_spot_;
  bool timekeeper_ = false; // a queue policy has timeouts
  // The instances, their threads, the timekeeper and the lifecycle, built after the core; here
  // so that the state a submit reads and writes (idle_, the lifecycle, the timekeeper's
  // deadline) shares a cache line.
  detail::shell_runtime<Backend> runtime_;

  bool preserve_ordering_ = false;
  detail::ordered_completion ordering_;
  // Per instance, sized before the threads start: who executes on it now, and a submit_here
  // caller's working state for it.
  detail::instance_holds holds_;
  std::unique_ptr<caller_batch[]> caller_batches_;
};

} // namespace servekit
