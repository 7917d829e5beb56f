#pragma once
/// \file
/// ensemble_executor: the event-driven shell both ensemble forms share. A request's steps are
/// sent to their composing models' own schedulers as soon as their inputs exist; each step's
/// response, on whichever thread the composing model answers, sends the steps it completes.
/// No thread of its own and no thread ever waits: max_inflight_requests parks a step launch in a
/// queue that the next finishing request of that step drains.

#include <servekit/backend/request_validator.hpp>
#include <servekit/cache/cache_eligibility.hpp>
#include <servekit/cache/detail/cached_submit.hpp>
#include <servekit/cache/response_cache.hpp>
#include <servekit/core/clock.hpp>
#include <servekit/core/detail/block_pool.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/response_sink.hpp>
#include <servekit/core/status.hpp>
#include <servekit/ensemble/detail/ensemble_plan.hpp>
#include <servekit/ensemble/detail/ensemble_run.hpp>
#include <servekit/metrics/ensemble_statistics.hpp>
#include <servekit/runtime/detail/infer.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/runtime/shutdown_mode.hpp>

#include <atomic>
#include <concepts>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace servekit {

/// What the executor sends steps to: `submit(step, request, sink)` on the step's composing model
/// and `cancel(source)` on every composing model.
template <class T>
concept ensemble_targets = requires(T& t, std::size_t step, request&& r, response_sink&& sink,
                                    cancellation_source& c) {
  { t.submit(step, std::move(r), std::move(sink)) } -> std::same_as<status>;
  t.cancel(c);
};

/// Both ensemble forms are this class with their own `Targets`: it is the whole model surface
/// (submit, infer, cancel, shutdown, statistics, name, inputs, outputs).
template <ensemble_targets Targets>
class ensemble_executor {
public:
  /// `max_inflight_requests`: most requests of each step in flight at once (0: unlimited).
  ensemble_executor(detail::ensemble_plan plan, Targets targets, std::int64_t version,
                    std::uint32_t max_inflight_requests)
      : plan_{std::move(plan)}, targets_{std::move(targets)}, counters_{step_infos(plan_)},
        version_{version}, limit_{max_inflight_requests} {
    validator_ = request_validator{plan_.name, plan_.max_batch_size, plan_.input_configs,
                                   plan_.output_configs};
    if (limit_ != 0) {
      gates_ = std::make_unique<gate[]>(plan_.steps.size());
    }
  }

  ensemble_executor(const ensemble_executor&) = delete;
  ensemble_executor& operator=(const ensemble_executor&) = delete;
  ~ensemble_executor() { shutdown(shutdown_mode::drain); }

  /// Accepts `r` or says why not (bad input, naming it; `unavailable` after shutdown). An
  /// accepted request gets exactly one final response through `sink` (a response-cache hit:
  /// on this thread, before submit returns, and no step runs).
  [[nodiscard]] status submit(request&& r, response_sink sink) {
    if (!sink) {
      return invalid_argument("submit to ensemble '" + plan_.name + "' needs a response sink");
    }
    std::int64_t elements = 1;
    if (auto s = validator_.validate(r, elements); !s.ok()) {
      return s;
    }
    if (cache_ != nullptr) [[unlikely]] {
      return detail::cached_submit(*cache_, plan_.name, version_, std::move(r), std::move(sink),
                                   counters_, [this, elements](request&& q, response_sink s) {
                                     return start(std::move(q), std::move(s), elements);
                                   });
    }
    return start(std::move(r), std::move(sink), elements);
  }

  /// The same, as a future.
  [[nodiscard]] std::future<response> infer(request&& r) {
    return detail::infer_with(*this, std::move(r));
  }

  /// The same, waiting on this thread for the final response: spins for `spin`, then sleeps
  /// (see sync_response_spin). A rejected request returns the failed response.
  [[nodiscard]] response infer_sync(request&& r, duration spin = sync_response_spin) {
    return detail::infer_sync_with(*this, std::move(r), spin);
  }

  /// Cancels requests whose tokens come from `source`: step requests queued in composing
  /// models are answered `cancelled` at once; steps not yet sent are not sent.
  void cancel(cancellation_source& source) { targets_.cancel(source); }

  /// Stops accepting requests and returns once every accepted one has its final response.
  /// `cancel` also stops sending further steps of requests in flight (they fail `cancelled`).
  void shutdown(shutdown_mode mode) {
    if (mode != shutdown_mode::drain) {
      cancelling_.store(true, std::memory_order_release);
    }
    stopping_.store(true, std::memory_order_release);
    std::unique_lock lock{idle_mutex_};
    idle_.wait(lock, [this] { return active_.load(std::memory_order_acquire) == 0; });
  }

  [[nodiscard]] ensemble_statistics statistics() const { return counters_.snapshot(); }
  /// Whether a step is decoupled: then every request gets a stream of responses (one per
  /// complete set of requested outputs) and then a final one, as from a decoupled model.
  [[nodiscard]] bool decoupled() const noexcept { return plan_.decoupled; }
  [[nodiscard]] const std::string& name() const noexcept { return plan_.name; }
  [[nodiscard]] std::int64_t version() const noexcept { return version_; }
  [[nodiscard]] std::int32_t max_batch_size() const noexcept { return plan_.max_batch_size; }
  /// Declared (configured form) or derived from the steps; data type `invalid` where unknown.
  [[nodiscard]] std::span<const tensor_config> inputs() const noexcept {
    return plan_.input_configs;
  }
  [[nodiscard]] std::span<const tensor_config> outputs() const noexcept {
    return plan_.output_configs;
  }
  /// The checked graph: tensors, steps in execution order, batch adaptation.
  [[nodiscard]] const detail::ensemble_plan& plan() const noexcept { return plan_; }

  /// Fills in what `config` leaves out, as Triton's config endpoint and metadata show an
  /// ensemble (a compile-time ensemble registered with the repository has no config file):
  /// platform "ensemble", and model_transaction_policy.decoupled when a step streams.
  void complete_options(model_options& config) const {
    if (config.platform.empty() && config.backend.empty()) {
      config.platform = "ensemble";
    }
    if (decoupled() && !config.model_transaction_policy) {
      config.model_transaction_policy = model_transaction_policy_options{.decoupled = true};
    }
  }

protected:
  /// Serves repeated byte-identical requests from `cache` (Triton's response cache at the
  /// ensemble's top level; null: the server has no cache). Call before the first submit, when
  /// the config enables the cache. A decoupled ensemble is refused, as Triton does.
  void use_response_cache(response_cache* cache) {
    check_response_cache_allowed(plan_.name, plan_.decoupled, /*sequence_batching=*/false);
    cache_ = cache;
  }

private:
  /// Starts validated request `r` on the steps.
  [[nodiscard]] status start(request&& r, response_sink sink, std::int64_t elements) {
    active_.fetch_add(1, std::memory_order_acq_rel);
    if (stopping_.load(std::memory_order_acquire)) {
      leave();
      return unavailable("ensemble '" + plan_.name + "' is shutting down");
    }
    r.arrival = clock::now();
    void* memory = detail::block_pool::allocate(sizeof(detail::ensemble_run));
    auto* run = ::new (memory) detail::ensemble_run{plan_, std::move(r), std::move(sink), elements};
    counters_.add_pending(1);
    detail::ready_steps ready;
    bool done = false;
    bool deliver_now = false;
    {
      std::lock_guard lock{run->mutex};
      run->start(ready);
      settle(*run, done, deliver_now);
    }
    launch(*run, ready); // the last launch may finish `run`: do not touch it after (unless
                         // this thread delivers its streamed responses: see `settle`)
    if (done) {
      finish(*run);
    }
    if (deliver_now) {
      deliver(*run);
    }
    return {};
  }

  /// A step's in-flight limit: a count, and the launches waiting for it to drop.
  struct gate {
    std::mutex mutex;
    std::uint32_t in_flight = 0;
    std::deque<std::pair<detail::ensemble_run*, detail::ensemble_run::launch>> waiting;
  };

  static std::vector<detail::ensemble_counters::step_info>
  step_infos(const detail::ensemble_plan& plan) {
    std::vector<detail::ensemble_counters::step_info> out;
    for (const auto& s : plan.steps) {
      out.push_back({s.model.name, s.model.version});
    }
    return out;
  }

  void launch(detail::ensemble_run& run, const detail::ready_steps& ready) {
    for (const auto& l : ready) {
      if (limit_ == 0 || enter_gate(l, run)) {
        send(run, l);
      }
    }
  }

  /// Takes a place in step `s`'s limit, or queues the launch until one frees.
  bool enter_gate(const detail::ensemble_run::launch& l, detail::ensemble_run& run) {
    gate& g = gates_[l.step];
    std::lock_guard lock{g.mutex};
    if (g.in_flight < limit_) {
      ++g.in_flight;
      return true;
    }
    g.waiting.emplace_back(&run, l);
    return false;
  }

  /// A request of step `s` finished: its place goes to the oldest waiting launch, if any.
  void leave_gate(std::size_t s) {
    gate& g = gates_[s];
    std::pair<detail::ensemble_run*, detail::ensemble_run::launch> next;
    {
      std::lock_guard lock{g.mutex};
      if (g.waiting.empty()) {
        --g.in_flight;
        return;
      }
      next = g.waiting.front();
      g.waiting.pop_front();
    }
    hand_over(*next.first, next.second);
  }

  /// Sends a launch that waited for a place. Such launches run one after another in a loop on
  /// this thread rather than nested: a submit that fails at once finishes its step, which hands
  /// its place on again, and a long queue would otherwise cost one stack frame per request.
  void hand_over(detail::ensemble_run& run, const detail::ensemble_run::launch& l) {
    struct launch_later {
      ensemble_executor* self;
      detail::ensemble_run* run;
      detail::ensemble_run::launch step;
    };
    static thread_local std::vector<launch_later>* later = nullptr;
    if (later != nullptr) {
      later->push_back({this, &run, l});
      return;
    }
    std::vector<launch_later> queue;
    later = &queue;
    send(run, l);
    while (!queue.empty()) {
      const launch_later next = queue.back();
      queue.pop_back();
      next.self->send(*next.run, next.step);
    }
    later = nullptr;
  }

  /// Sends a step of `run` to its model. After a successful submit `run` may already be gone.
  void send(detail::ensemble_run& run, const detail::ensemble_run::launch& l) {
    const std::size_t s = l.step;
    detail::ensemble_run::iteration* where = l.where;
    status why_not;
    if (cancelling_.load(std::memory_order_acquire)) {
      why_not = cancelled("ensemble '" + plan_.name + "' is shutting down");
    } else {
      std::lock_guard lock{run.mutex};
      if (run.cancelled()) {
        why_not = cancelled("Request cancelled");
      } else if (run.stopping()) {
        why_not = cancelled("not started: an earlier step failed");
      }
    }
    if (!why_not.ok()) {
      not_started(run, *where, s, why_not);
      return;
    }
    request step_request = run.make_step_request(l);
    where->steps[s].sent = clock::now();
    // Four words: fits the sink's inline storage (no allocation per step).
    auto s_ = targets_.submit(s, std::move(step_request), [this, &run, where, s](response&& r) {
      step_answered(run, *where, s, std::move(r));
    });
    if (!s_.ok()) {
      step_answered(run, *where, s, response::failure(std::move(s_)));
    }
  }

  /// One response of a step: a composing model's final one, or one of a decoupled step's.
  void step_answered(detail::ensemble_run& run, detail::ensemble_run::iteration& where,
                     std::size_t s, response&& r) {
    if (r.final) {
      counters_.record_step(s, r.ok(), elapsed_ns(where.steps[s].sent, clock::now()), r.timing);
      if (limit_ != 0) {
        leave_gate(s);
      }
    }
    detail::ready_steps ready;
    bool done = false;
    bool deliver_now = false;
    {
      std::lock_guard lock{run.mutex};
      run.step_answered(where, s, std::move(r), ready);
      settle(run, done, deliver_now);
    }
    launch(run, ready);
    if (done) {
      finish(run);
    }
    if (deliver_now) {
      deliver(run);
    }
  }

  void not_started(detail::ensemble_run& run, detail::ensemble_run::iteration& where, std::size_t s,
                   const status& why) {
    if (limit_ != 0) {
      leave_gate(s);
    }
    bool done = false;
    bool deliver_now = false;
    {
      std::lock_guard lock{run.mutex};
      run.step_not_started(where, s, why);
      settle(run, done, deliver_now);
    }
    if (done) {
      finish(run);
    }
    if (deliver_now) {
      deliver(run);
    }
  }

  /// Under `run.mutex`, after an event. Without decoupled steps: `done` says the one final
  /// response is due (`finish`). With them: once no step is in flight the final response is
  /// queued, and `deliver_now` says this thread is to deliver what is queued. The delivering
  /// thread is the only one that sends to the client's sink, and the only one that can free the
  /// run (on the final response), so while it delivers, `run` stays alive for it.
  void settle(detail::ensemble_run& run, bool& done, bool& deliver_now) {
    if (!plan_.decoupled) {
      done = run.done();
      return;
    }
    if (run.done()) {
      run.queue_final();
    }
    if (!run.draining && !run.outbox.empty()) {
      run.draining = true;
      deliver_now = true;
    }
  }

  /// Sends the queued responses in order, until none is left or the final one is sent.
  void deliver(detail::ensemble_run& run) {
    std::unique_lock lock{run.mutex};
    while (!run.outbox.empty()) {
      response r = std::move(run.outbox.front());
      run.outbox.pop_front();
      lock.unlock();
      if (r.final) {
        finish_streamed(run, std::move(r));
        return;
      }
      try {
        run.sink().send(std::move(r));
      } catch (...) { // NOLINT(bugprone-empty-catch): sinks must not throw; one must not stop us
      }
      lock.lock();
    }
    run.draining = false;
  }

  /// The final response of a decoupled ensemble request, then the run is freed.
  void finish_streamed(detail::ensemble_run& run, response&& out) {
    counters_.record_request(out.status, static_cast<std::uint64_t>(run.elements()),
                             elapsed_ns(run.original().arrival, clock::now()), run.step_timing());
    out.timing = run.step_timing();
    counters_.add_pending(-1);
    try {
      run.sink().send(std::move(out));
    } catch (...) { // NOLINT(bugprone-empty-catch): sinks must not throw; one must not stop us
    }
    run.~ensemble_run();
    detail::block_pool::release(&run, sizeof(detail::ensemble_run));
    leave();
  }

  /// Every step has answered: one final response, then the run is freed.
  void finish(detail::ensemble_run& run) {
    response out;
    {
      std::lock_guard lock{run.mutex};
      out = run.take_response();
      counters_.record_request(out.status, static_cast<std::uint64_t>(run.elements()),
                               elapsed_ns(run.original().arrival, clock::now()), run.step_timing());
      out.timing = run.step_timing();
    }
    counters_.add_pending(-1);
    try {
      run.sink().complete(std::move(out));
    } catch (...) { // NOLINT(bugprone-empty-catch): sinks must not throw; one must not stop us
    }
    run.~ensemble_run();
    detail::block_pool::release(&run, sizeof(detail::ensemble_run));
    leave();
  }

  void leave() {
    for (int n = active_.load(std::memory_order_acquire); n > 1;) {
      if (active_.compare_exchange_weak(n, n - 1, std::memory_order_acq_rel)) {
        return; // not the last: shutdown() cannot be waiting for this one
      }
    }
    // Possibly the last: drop to zero under the mutex shutdown() checks under, so it cannot see
    // zero, return and let the executor be destroyed while this thread still touches it.
    const std::lock_guard lock{idle_mutex_};
    if (active_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      idle_.notify_all();
    }
  }

  detail::ensemble_plan plan_;
  Targets targets_;
  detail::ensemble_counters counters_;
  response_cache* cache_ = nullptr; ///< set by use_response_cache (configured ensembles)
  std::int64_t version_ = 1;
  request_validator validator_;
  std::uint32_t limit_ = 0;
  std::unique_ptr<gate[]> gates_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> cancelling_{false};
  std::atomic<int> active_{0}; ///< accepted requests without their final response
  std::mutex idle_mutex_;      ///< guards the last leave() against shutdown()'s return
  std::condition_variable idle_;
};

} // namespace servekit
