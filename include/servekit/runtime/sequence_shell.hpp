#pragma once
/// \file
/// sequence_shell: runs the sequence batcher's cores (requests pinned to instances) and a
/// model's backend instances on real threads, with control inputs and implicit state.

#include <servekit/backend/backend.hpp>
#include <servekit/backend/batch.hpp>
#include <servekit/backend/sequence_controls.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/response_sink.hpp>
#include <servekit/metrics/statistics.hpp>
#include <servekit/runtime/detail/control_tensors.hpp>
#include <servekit/runtime/detail/finish.hpp>
#include <servekit/runtime/detail/instances.hpp>
#include <servekit/runtime/detail/parking_spot.hpp>
#include <servekit/runtime/detail/shell_runtime.hpp>
#include <servekit/runtime/detail/shell_support.hpp>
#include <servekit/runtime/instance_group.hpp>
#include <servekit/runtime/model_environment.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/runtime/resolved_config.hpp>
#include <servekit/runtime/threaded_shell.hpp>
#include <servekit/schedule/scheduler.hpp>
#include <servekit/state/state_store.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace servekit {

/// Drives pinned decision core `Core` (direct_sequence_core or oldest_sequence_core) with one
/// thread per `Backend` instance and keeps implicit state in a `Store`.
///
/// Submitting takes the core's lock briefly: whether a request is accepted depends on the
/// sequences open at that moment (Triton's START-flag rule), and the answer is the return
/// value. The core names the instance that received work and only that instance is woken. Each
/// instance thread forms its own batches; before executing it binds every entry's state and
/// control inputs, after executing it takes the output state back, ends finished sequences in
/// the store and tells the backend (optional `sequence_ended` hook). A timekeeper thread
/// applies idle expiry and backlog timeouts.
///
/// `model<Backend, sequence_batcher<...>, ...>` builds one.
template <class Backend, pinned_scheduler_core Core, state_store Store>
class sequence_shell {
public:
  using traits = backend_traits<Backend>;

  sequence_shell(const model_options& options, const resolved_config& config,
                 std::vector<instance_placement> placements, model_statistics& stats,
                 const model_environment& environment)
      : stats_{stats}, core_{detail::with_instances(config.scheduler, placements.size())},
        store_{store_config(options, config, placements, core_.slots_per_instance())},
        controls_{config.scheduler.sequence_batching}, placements_{std::move(placements)},
        lanes_(placements_.size()), runtime_{options, config, placements_, stats, environment} {
    runtime_.start_instances([this](std::size_t i) { run_instance(i); });
    runtime_.start_timekeeper(
        [this, exits = early_exits{}, due = never]() mutable { return apply_timeouts(exits, due); },
        [this](time_point next) {
          const std::lock_guard lock{core_mutex_};
          return core_.next_timeout() < next; // a submit made an earlier deadline meanwhile
        });
  }

  sequence_shell(const sequence_shell&) = delete;
  sequence_shell& operator=(const sequence_shell&) = delete;

  ~sequence_shell() { shutdown(shutdown_mode::drain); }

  /// Queues a validated request, or says why not: `invalid_argument` for a request that breaks
  /// the sequence rules (Triton's messages), `unavailable` while shutting down.
  [[nodiscard]] status submit(request&& r, response_sink&& sink, std::int64_t elements) {
    const auto guard = runtime_.guard_submit();
    if (!runtime_.running()) {
      return runtime_.refusal();
    }
    r.arrival = clock::now();
    pending_ptr p = make_pending(std::move(r), std::move(sink));
    p->batch_elements = elements;
    routing to;
    time_point next_timeout = never;
    {
      const std::lock_guard lock{core_mutex_};
      to = core_.enqueue(p, p->request.arrival);
      if (to.result.ok() && to.instance != routing::no_instance) {
        lanes_[to.instance].generation.fetch_add(1, std::memory_order_seq_cst);
      }
      next_timeout = core_.next_timeout();
    }
    if (!to.result.ok()) {
      return to.result;
    }
    stats_.add_pending(1);
    if (to.instance != routing::no_instance) {
      wake(to.instance);
    }
    runtime_.wake_timekeeper_before(next_timeout);
    return {};
  }

  /// Cancels the requests whose tokens come from `source`, and with each its whole sequence.
  void cancel(cancellation_source& source) {
    source.cancel();
    early_exits exits;
    {
      const std::lock_guard lock{core_mutex_};
      core_.collect_cancelled(exits);
    }
    detail::answer_early_exits(exits, stats_, clock::now());
    wake_all(); // slots may have gone to backlogged sequences; notices wait for their threads
  }

  /// Stops accepting requests and stops the threads. `drain` executes everything queued (open
  /// sequences with nothing queued give their slots to the backlog); `cancel` answers it with
  /// `cancelled`. Sequences still open are ended with reason `shutdown`. Idempotent. A
  /// decoupled model's requests still owed a final response are waited for (`drain`) or
  /// answered `cancelled` (`cancel`).
  void shutdown(shutdown_mode mode) {
    runtime_.shutdown(
        mode, core_mutex_,
        [&](early_exits& exits) {
          if (mode != shutdown_mode::drain) {
            core_.drain(exits);
          }
          core_.flush();
        },
        [&] { wake_all(); });
  }

  [[nodiscard]] std::size_t instance_count() const noexcept { return runtime_.instance_count(); }
  /// The implicit-state store (its live_sequences() and bytes_in_use() are safe to read).
  [[nodiscard]] const Store& states() const noexcept { return store_; }

private:
  using instance = detail::backend_instance<Backend>;

  /// An instance's wake-up channel: work routed to it bumps `generation`.
  struct alignas(64) lane {
    std::atomic<std::uint64_t> generation{0};
    std::atomic<bool> idle{false};
    detail::parking_spot spot;
  };

  static state_store_config store_config(const model_options& options,
                                         const resolved_config& config,
                                         const std::vector<instance_placement>& placements,
                                         std::size_t slots_per_instance) {
    state_store_config c;
    c.model_name = options.name;
    c.states = config.scheduler.sequence_batching.state;
    c.slots = placements.size() * slots_per_instance;
    // Slot s belongs to instance s / slots_per_instance (see global_slot).
    c.slot_locations.reserve(c.slots);
    for (const auto& p : placements) {
      const auto where =
          p.kind == instance_kind::gpu ? memory_location::gpu(p.device_id) : memory_location::cpu();
      c.slot_locations.insert(c.slot_locations.end(), slots_per_instance, where);
    }
    c.batched = config.max_batch_size > 0;
    for (const auto& o : config.outputs) {
      c.model_outputs.push_back(o.name);
    }
    c.model_directory = options.directory;
    return c;
  }

  // -- waking ------------------------------------------------------------------------------------

  void wake(std::size_t i) noexcept {
    if (lanes_[i].idle.load(std::memory_order_seq_cst)) {
      lanes_[i].spot.wake_one();
    }
  }

  void wake_all() noexcept {
    for (auto& l : lanes_) {
      l.generation.fetch_add(1, std::memory_order_seq_cst);
      l.spot.wake_all();
    }
  }

  // -- instance threads --------------------------------------------------------------------------

  void run_instance(std::size_t index) {
    instance& self = runtime_.at(index);
    lane& my = lanes_[index];
    batch_plan plan;
    early_exits exits;
    batch b;
    std::vector<request> padding(core_.slots_per_instance());
    std::vector<status> bound;                // per entry: how binding its state went
    std::vector<std::size_t> woken;           // other instances this one gave work to
    response_sink discard{[](response&&) {}}; // padding entries' (never called)
    bool executed = false;
    for (;;) {
      bool formed = false;
      bool finished = false;
      bool emptied = false;
      time_point deadline = never;
      std::uint64_t generation = 0;
      {
        const std::lock_guard lock{core_mutex_};
        const time_point now = clock::now();
        if (executed) {
          core_.batch_done(index, now, plan);
          plan.clear();
          emptied = !runtime_.running() && core_.size() == 0;
        }
        formed = core_.form_batch(index, now, plan, exits);
        if (!formed) {
          finished = !runtime_.running() && core_.size() == 0;
          if (finished) {
            core_.close_instance(index, plan.ended);
          }
          deadline = core_.next_deadline(index);
          generation = my.generation.load(std::memory_order_relaxed);
        }
        mark_woken(index, woken);
      }
      for (const std::size_t other : woken) {
        wake(other);
      }
      woken.clear();
      executed = false;
      end_sequences(self, plan.ended);
      if (!exits.empty()) {
        detail::answer_early_exits(exits, stats_, clock::now());
      }
      if (emptied) {
        wake_all(); // the others may be waiting for the last queued request to go
      }
      if (formed) {
        execute(self, plan, b, padding, bound, discard);
        executed = true;
        continue;
      }
      if (finished) {
        return;
      }
      if (!spin_for_work(my, deadline, generation)) {
        park(my, deadline, generation);
      }
    }
  }

  /// Under the core's lock: instances other than `self` that a promotion from the backlog gave
  /// work to (a drain, an expiry or a cancellation can free a slot of any instance).
  void mark_woken(std::size_t self, std::vector<std::size_t>& out) {
    for (std::size_t i = 0; i < lanes_.size(); ++i) {
      if (core_.take_woken(i) && i != self) {
        lanes_[i].generation.fetch_add(1, std::memory_order_seq_cst);
        out.push_back(i);
      }
    }
  }

  [[nodiscard]] bool spin_for_work(const lane& my, time_point deadline,
                                   std::uint64_t generation) const noexcept {
    return detail::spin_for_work(deadline, [&] {
      return my.generation.load(std::memory_order_relaxed) != generation ||
             !runtime_.running(std::memory_order_relaxed);
    });
  }

  /// Sleeps until `deadline` unless work was routed here since `generation` (Dekker's pattern
  /// with wake(): either the waker sees `idle` or this thread sees the new generation).
  void park(lane& my, time_point deadline, std::uint64_t generation) {
    my.idle.store(true, std::memory_order_seq_cst);
    const std::uint32_t seen = my.spot.epoch();
    if (my.generation.load(std::memory_order_seq_cst) == generation &&
        runtime_.running(std::memory_order_seq_cst)) {
      my.spot.wait(seen, deadline);
    }
    my.idle.store(false, std::memory_order_seq_cst);
  }

  /// Frees the state of sequences that left their slots and tells the backend.
  void end_sequences(instance& self, std::vector<sequence_end>& ended) {
    for (const auto& e : ended) {
      end_sequence(self, e);
    }
    ended.clear();
  }

  void end_sequence(instance& self, const sequence_end& e) {
    store_.release(global_slot(self, e.slot));
    if constexpr (has_sequence_end_hook<Backend>) {
      try {
        self.backend->sequence_ended(e);
      } catch (...) { // NOLINT(bugprone-empty-catch): a hook must not take down the instance
      }
    }
  }

  [[nodiscard]] std::size_t global_slot(const instance& self, std::uint32_t slot) const noexcept {
    return self.context.instance_index * core_.slots_per_instance() + slot;
  }

  // -- the timekeeper ----------------------------------------------------------------------------

  /// The timekeeper's tick: applies idle expiry and backlog timeouts that are due, even while
  /// every instance is busy, then wakes the instances (a reaped slot may have gone to a
  /// backlogged sequence) if the deadline `due` it slept for has come; returns, and keeps in
  /// `due`, when the next one is.
  time_point apply_timeouts(early_exits& exits, time_point& due) {
    time_point next = never;
    const time_point now = clock::now();
    {
      const std::lock_guard lock{core_mutex_};
      core_.expire(now, exits);
      next = core_.next_timeout();
    }
    if (!exits.empty()) {
      detail::answer_early_exits(exits, stats_, clock::now());
    }
    if (now >= due) {
      wake_all();
    }
    due = next;
    return next;
  }

  // -- execution ---------------------------------------------------------------------------------

  void execute(instance& self, batch_plan& plan, batch& b, std::vector<request>& padding,
               std::vector<status>& bound, response_sink& discard) {
    const std::size_t n = plan.requests.size();
    const request* model = nullptr; // the first real request: padding copies its inputs
    std::size_t real = 0;
    for (const auto& p : plan.requests) {
      if (p) {
        model = model == nullptr ? &p->request : model;
        ++real;
      }
    }
    // State first: a padding entry gets zeros shaped like a real entry's inputs, state
    // included, so that the batch gathers; then each entry gets its own control values.
    bound.assign(n, status{});
    for (std::size_t i = 0; i < n; ++i) {
      if (auto& p = plan.requests[i]) {
        const sequence_controls& c = plan.sequence[i];
        bound[i] = store_.bind(global_slot(self, c.slot), c.start, p->request);
      }
    }
    b.clear();
    b.bind(self.context, traits::decoupled);
    b.bind_sequence(plan.sequence.data());
    for (std::size_t i = 0; i < n; ++i) {
      if (auto& p = plan.requests[i]) {
        b.add(p->request, p->batch_elements, p->sink);
        continue;
      }
      request& stand_in = padding[i];
      stand_in.inputs.clear();
      for (const auto& t : model->inputs) {
        stand_in.inputs.push_back(tensor{t.name, t.type, t.shape, buffer::zeroed(t.data.size())});
      }
      b.add(stand_in, 1, discard);
    }
    for (std::size_t i = 0; i < n; ++i) {
      controls_.write(b.request(i), plan.sequence[i], b.request(i).sequence_id);
    }
    runtime_.execute(self, plan, b, real, [&](std::size_t i, response& r, bool backend_threw) {
      if (!backend_threw && !bound[i].ok()) {
        r = response::failure(bound[i]);
      }
      const std::size_t slot = global_slot(self, plan.sequence[i].slot);
      if (auto s = store_.update(slot, plan.requests[i]->request, r); !s.ok() && r.ok()) {
        r = response::failure(std::move(s));
      }
    });
    for (std::size_t i = 0; i < n; ++i) {
      if (auto& p = plan.requests[i]) {
        const sequence_controls& c = plan.sequence[i];
        if (c.end) { // before the response: a client that saw it finds the state freed
          end_sequence(self, {p->request.sequence_id, c.slot, sequence_end_reason::end});
        }
        if constexpr (traits::decoupled) {
          detail::send_final_response(b, i);
        } else {
          detail::deliver(*p, std::move(b.response(i)));
        }
      }
    }
    b.clear();
  }

  // The model's statistics (the model owns them and outlives this shell).
  model_statistics& stats_;

  std::mutex core_mutex_;
  Core core_;
  Store store_;
  detail::control_tensors controls_;
  std::vector<instance_placement> placements_;
  std::vector<lane> lanes_;
  // The instances, their threads and the lifecycle; built after everything above it.
  detail::shell_runtime<Backend> runtime_;
};

} // namespace servekit
