#pragma once
/// \file
/// iteration_shell: runs a generative backend under iteration_scheduler_core on real threads,
/// one thread, one core and one KV cache per instance. Each thread repeats: apply
/// cancellations, schedule a step, execute it on the backend (without the lock, so submits go
/// on), apply the sampled tokens, and stream the responses.

#include <servekit/core/clock.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/response_sink.hpp>
#include <servekit/core/status.hpp>
#include <servekit/metrics/generation_statistics.hpp>
#include <servekit/metrics/statistics.hpp>
#include <servekit/runtime/detail/generation_parameters.hpp>
#include <servekit/runtime/detail/instances.hpp>
#include <servekit/runtime/detail/shell_support.hpp>
#include <servekit/runtime/generative_backend.hpp>
#include <servekit/runtime/instance_group.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/runtime/resolved_config.hpp>
#include <servekit/runtime/shutdown_mode.hpp>
#include <servekit/schedule/iteration_batching_options.hpp>
#include <servekit/schedule/iteration_batching_parameters.hpp>
#include <servekit/schedule/iteration_scheduler_core.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace servekit {

/// Drives iteration_scheduler_core with one thread per instance of generative backend
/// `Backend`.
///
/// - **Submit** (the caller's thread) reads `max_tokens`, `stream` and `ignore_eos`
///   (detail::read_generation_settings), has the backend tokenize the prompt and adds the
///   sequence to the least loaded instance's core: a prompt the model cannot take is refused
///   there (`invalid_argument`), never queued.
/// - **Streaming**: with `stream` true a request gets one response per generated token, the last
///   one final; otherwise one final response with every generated token. The final response's
///   parameters: `finish_reason`, "length" (max_tokens or the model's length) or "stop" (the end
///   token or the backend's stop), as OpenAI names them; `prompt_tokens` and
///   `completion_tokens`, the counts OpenAI's `usage` reports.
/// - **Cancellation**: model::cancel(source) (the HTTP and gRPC servers call it when a client
///   goes away) has each instance answer the requests whose tokens fired `cancelled` and free
///   their blocks before its next step (a step in flight finishes first).
/// - **Failure**: a step whose execute_step throws, or returns outputs that do not match the
///   plan, fails every sequence of that step (`internal`, naming the model and instance); the
///   instance keeps serving the others.
/// - **Shutdown**: `drain` generates every accepted sequence to its end; `cancel` and `abort`
///   answer them `cancelled` between steps.
template <class Backend>
class iteration_shell {
public:
  iteration_shell(const model_options& options, const resolved_config& config,
                  iteration_batching_options iteration,
                  const std::vector<instance_placement>& placements, model_statistics& stats)
      : options_{options}, stats_{stats} {
    const auto states = detail::create_model_states<Backend>(options, config);
    for (std::size_t i = 0; i < placements.size(); ++i) {
      auto l = std::make_unique<lane>();
      l->in = detail::build_instance<Backend>(options, config, placements[i], i, states);
      lanes_.push_back(std::move(l));
    }
    if (iteration.num_blocks == 0 && !lanes_.empty()) {
      // The backend sized its cache from its memory; every instance has the same.
      iteration.num_blocks = kv_cache_blocks_of(*lanes_.front()->in->backend);
    }
    validate(iteration, "/parameters");
    iteration_ = iteration;
    for (auto& l : lanes_) {
      l->core.emplace(iteration_);
    }
    std::uint32_t max_tokens = defaults_.max_tokens;
    detail::read_iteration_count(options.parameters, {"default_max_tokens"}, max_tokens);
    if (max_tokens < 1 ||
        max_tokens > static_cast<std::uint32_t>(std::numeric_limits<std::int32_t>::max())) {
      throw config_error(config_error_code::bad_value, "/parameters/default_max_tokens",
                         "must be at least 1 and below 2^31, got " + std::to_string(max_tokens));
    }
    defaults_.max_tokens = max_tokens;
    end_token_ = lanes_.empty() ? std::nullopt : end_token_of(*lanes_.front()->in->backend);
    for (auto& l : lanes_) {
      l->in->thread = std::thread{[this, raw = l.get()] { run(*raw); }};
    }
  }

  iteration_shell(const iteration_shell&) = delete;
  iteration_shell& operator=(const iteration_shell&) = delete;

  ~iteration_shell() { shutdown(shutdown_mode::drain); }

  /// Queues a validated request, or says why not: `invalid_argument` for bad generation
  /// settings, a prompt the backend cannot tokenize or the core refuses (too long, never fits
  /// the KV cache), `unavailable` while shutting down.
  [[nodiscard]] status submit(request&& r, response_sink&& sink, std::int64_t elements) {
    const detail::submit_guard guard{submitters_};
    if (state_.load(std::memory_order_seq_cst) != state::running) {
      return unavailable("model '" + options_.name +
                         "' is shutting down and accepts no new requests");
    }
    if (elements != 1) {
      return invalid_argument("model '" + options_.name +
                              "' generates one sequence per request; the request holds a batch "
                              "of " +
                              std::to_string(elements));
    }
    detail::generation_settings settings = defaults_;
    if (status s = detail::read_generation_settings(r, settings); !s.ok()) {
      return invalid_argument("model '" + options_.name + "': " + s.message());
    }
    generation_request g;
    if (status s = lanes_.front()->in->backend->tokenize(r, g.prompt); !s.ok()) {
      return status{s.code(), "model '" + options_.name + "': " + s.message()};
    }
    const std::uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
    g.id = id;
    g.max_new_tokens = settings.max_tokens;
    g.end_token = settings.ignore_eos ? std::nullopt : end_token_;
    // Triton's priority: 1 is the highest level, 0 the default (after every explicit level).
    g.priority =
        r.priority == 0
            ? default_priority
            : static_cast<std::uint32_t>(std::min<std::uint64_t>(r.priority, default_priority));
    r.arrival = clock::now();
    g.arrival = r.arrival;
    const std::size_t prompt_tokens = g.prompt.size();
    lane& l = least_loaded();
    {
      const std::lock_guard lock{l.mutex};
      if (status s = l.core->add(std::move(g)); !s.ok()) {
        return status{s.code(), "model '" + options_.name + "': " + s.message()};
      }
      sequence_entry& e = l.entries[id];
      e.req = std::move(r);
      e.sink = std::move(sink);
      e.stream = settings.stream;
      e.prompt_tokens = static_cast<std::uint32_t>(prompt_tokens);
      l.load.fetch_add(1, std::memory_order_relaxed);
      l.prompt_tokens.fetch_add(prompt_tokens, std::memory_order_relaxed);
      publish(l);
    }
    stats_.add_pending(1);
    l.wake.notify_one();
    return {};
  }

  /// Cancels the requests whose tokens come from `source`: each is answered `cancelled` and its
  /// KV blocks freed before its instance's next step.
  void cancel(cancellation_source& source) {
    source.cancel();
    for (auto& l : lanes_) {
      {
        const std::lock_guard lock{l->mutex};
        l->cancel_scan = true;
      }
      l->wake.notify_one();
    }
  }

  /// Stops accepting requests, then generates what was accepted to its end (`drain`) or answers
  /// it `cancelled` (`cancel`, `abort`); returns when every instance thread has finished.
  /// Idempotent; a cancel may follow a drain.
  void shutdown(shutdown_mode mode) {
    const state next = mode == shutdown_mode::drain ? state::draining : state::cancelling;
    state expected = state::running;
    if (!state_.compare_exchange_strong(expected, next, std::memory_order_acq_rel) &&
        next == state::cancelling) {
      state_.store(state::cancelling, std::memory_order_release);
    }
    while (submitters_.load(std::memory_order_acquire) != 0) {
      std::this_thread::yield(); // a submit that passed the state check finishes its push
    }
    for (auto& l : lanes_) {
      { const std::lock_guard lock{l->mutex}; }
      l->wake.notify_all();
    }
    const std::lock_guard join{join_mutex_};
    for (auto& l : lanes_) {
      if (l->in->thread.joinable()) {
        l->in->thread.join();
      }
    }
  }

  [[nodiscard]] std::size_t instance_count() const noexcept { return lanes_.size(); }
  [[nodiscard]] const iteration_batching_options& iteration_options() const noexcept {
    return iteration_;
  }

  /// The figures LLM gateways route by, summed over the instances.
  [[nodiscard]] generation_snapshot generation() const {
    generation_snapshot g;
    g.block_size = iteration_.block_size;
    std::uint64_t used = 0;
    for (const auto& l : lanes_) {
      g.num_requests_running += l->running.load(std::memory_order_relaxed);
      g.num_requests_waiting += l->waiting.load(std::memory_order_relaxed);
      used += l->used_blocks.load(std::memory_order_relaxed);
      g.num_blocks += iteration_.num_blocks;
      g.prompt_tokens += l->prompt_tokens.load(std::memory_order_relaxed);
      g.generation_tokens += l->generation_tokens.load(std::memory_order_relaxed);
      g.preemptions += l->preemptions.load(std::memory_order_relaxed);
      g.prefix_cache_queries += l->prefix_queries.load(std::memory_order_relaxed);
      g.prefix_cache_hits += l->prefix_hits.load(std::memory_order_relaxed);
      g.steps += l->steps.load(std::memory_order_relaxed);
    }
    g.kv_cache_usage =
        g.num_blocks == 0 ? 0.0 : static_cast<double>(used) / static_cast<double>(g.num_blocks);
    ttft_.load_into(g.time_to_first_token);
    tpot_.load_into(g.time_per_output_token);
    return g;
  }

private:
  static constexpr std::uint32_t default_priority = 0x7fffffff;
  enum class state : std::uint8_t { running, draining, cancelling };

  struct sequence_entry {
    request req;
    response_sink sink;
    bool stream = false;
    bool started = false;            // has appeared in a plan (no longer pending)
    std::vector<token_id> generated; // not streaming: what the final response carries
    std::uint32_t tokens = 0;        // generated so far
    std::uint32_t prompt_tokens = 0; // the prompt's length
    time_point last_token{};
  };

  /// A response to send once the lock is released (and the entry to erase after a final one).
  struct delivery {
    std::uint64_t id = 0;
    sequence_entry* entry = nullptr;
    std::optional<token_id> token; // a generated token (else: `failure`)
    bool final = false;
    finish_reason reason = finish_reason::max_tokens;
    status failure;
    failure_reason why = failure_reason::other;
  };

  struct lane {
    std::unique_ptr<detail::backend_instance<Backend>> in;
    std::mutex mutex;
    std::condition_variable wake;
    std::optional<iteration_scheduler_core> core;
    std::unordered_map<std::uint64_t, sequence_entry> entries; // inserted by submit only
    bool cancel_scan = false;
    std::vector<response> responses; // deliver's scratch
    std::atomic<std::uint64_t> load{0};
    // Published for generation() after every change.
    std::atomic<std::uint64_t> running{0};
    std::atomic<std::uint64_t> waiting{0};
    std::atomic<std::uint64_t> used_blocks{0};
    std::atomic<std::uint64_t> prompt_tokens{0};
    std::atomic<std::uint64_t> generation_tokens{0};
    std::atomic<std::uint64_t> preemptions{0};
    std::atomic<std::uint64_t> prefix_queries{0};
    std::atomic<std::uint64_t> prefix_hits{0};
    std::atomic<std::uint64_t> steps{0};
  };

  lane& least_loaded() noexcept {
    lane* best = lanes_.front().get();
    for (auto& l : lanes_) {
      if (l->load.load(std::memory_order_relaxed) < best->load.load(std::memory_order_relaxed)) {
        best = l.get();
      }
    }
    return *best;
  }

  /// Under the lane's lock.
  void publish(lane& l) noexcept {
    const auto& c = *l.core;
    l.running.store(c.num_running(), std::memory_order_relaxed);
    l.waiting.store(c.num_waiting(), std::memory_order_relaxed);
    l.used_blocks.store(c.blocks().num_blocks() - c.blocks().free_blocks(),
                        std::memory_order_relaxed);
    l.preemptions.store(c.stats().preemptions, std::memory_order_relaxed);
    l.prefix_queries.store(c.blocks().stats().prefix_query_tokens, std::memory_order_relaxed);
    l.prefix_hits.store(c.blocks().stats().prefix_hit_tokens, std::memory_order_relaxed);
    l.steps.store(c.stats().steps, std::memory_order_relaxed);
  }

  /// Under the lane's lock, between steps, after a cancel(): cancels every sequence whose token
  /// fired (all of them when shutting down by cancel) and queues its answer.
  void collect_cancelled(lane& l, std::vector<delivery>& out) {
    const bool all = state_.load(std::memory_order_acquire) == state::cancelling;
    if (!all && !l.cancel_scan) {
      return; // no cancel() since the last scan: no step pays for a walk of every sequence
    }
    l.cancel_scan = false;
    for (auto& [id, e] : l.entries) {
      if (e.sink.final_sent() || !(all || e.req.cancellation.cancelled())) {
        continue;
      }
      if (!l.core->cancel(id)) {
        continue; // finished in the last step; its final response is on its way
      }
      delivery d;
      d.id = id;
      d.entry = &e;
      d.final = true;
      d.failure =
          all ? cancelled("Request cancelled: model '" + options_.name + "' is shutting down")
              : cancelled("Request cancelled");
      d.why = failure_reason::canceled;
      out.push_back(std::move(d));
    }
  }

  /// Fails every sequence of `plan` (the step failed): cancelled in the core, answered `why`.
  void fail_step(lane& l, const step_plan& plan, const status& why, std::vector<delivery>& out) {
    for (const auto& s : plan.sequences) {
      const auto it = l.entries.find(s.id);
      if (it == l.entries.end() || !l.core->cancel(s.id)) {
        continue; // cancelled during the step: already answered
      }
      delivery d;
      d.id = s.id;
      d.entry = &it->second;
      d.final = true;
      d.failure = why;
      d.why = failure_reason::backend;
      out.push_back(std::move(d));
    }
  }

  /// Without the lock: builds each delivery's response, counts the finished ones, then sends
  /// them (counted first, so that a client that got its final response sees it counted).
  void deliver(lane& l, std::vector<delivery>& out) {
    const time_point now = clock::now();
    std::uint64_t ok = 0;
    std::uint64_t ok_ns = 0;
    auto& responses = l.responses;
    responses.clear();
    for (auto& d : out) {
      sequence_entry& e = *d.entry;
      if (!e.started) {
        e.started = true;
        stats_.add_pending(-1);
      }
      response& r = responses.emplace_back();
      if (d.token) {
        if (e.tokens == 0) {
          ttft_.observe(seconds_between(e.req.arrival, now));
        } else {
          tpot_.observe(seconds_between(e.last_token, now));
        }
        ++e.tokens;
        e.last_token = now;
        if (e.stream) {
          l.in->backend->respond(e.req, std::span<const token_id>{&*d.token, 1}, r);
        } else {
          e.generated.push_back(*d.token);
          if (!d.final) {
            d.entry = nullptr; // nothing to send yet
            continue;
          }
          l.in->backend->respond(e.req, e.generated, r);
        }
        if (d.final) {
          r.parameters.set("finish_reason", std::string{finish_reason_name(d.reason)});
          r.parameters.set("prompt_tokens", std::int64_t{e.prompt_tokens});
          r.parameters.set("completion_tokens", std::int64_t{e.tokens});
          ++ok;
          ok_ns += elapsed_ns(e.req.arrival, now);
        }
      } else {
        r = response::failure(std::move(d.failure));
        stats_.record_early_failure(d.why, elapsed_ns(e.req.arrival, now));
      }
      r.id = e.req.id;
      r.final = d.final;
    }
    if (ok != 0) {
      model_statistics::execution x;
      x.instance = l.in->context.instance_index;
      x.batch_size = ok;
      x.requests = ok;
      x.ok_requests = ok;
      x.ok_elements = ok;
      x.request_ok_ns = ok_ns;
      x.backend_failed = false;
      stats_.record_execution(x);
    }
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (out[i].entry != nullptr) {
        out[i].entry->sink.send(std::move(responses[i]));
      }
    }
  }

  [[nodiscard]] static double seconds_between(time_point from, time_point to) noexcept {
    return static_cast<double>(elapsed_ns(from, to)) * 1e-9;
  }

  [[nodiscard]] static std::string_view finish_reason_name(finish_reason r) noexcept {
    return r == finish_reason::max_tokens || r == finish_reason::max_model_len ? "length" : "stop";
  }

  /// Runs the backend on `plan`: what it threw, or nothing.
  [[nodiscard]] static std::optional<status> execute(Backend& b, const step_plan& plan,
                                                     std::vector<step_output>& out) noexcept {
    try {
      try {
        b.execute_step(plan, out);
        return std::nullopt;
      } catch (const std::exception& e) {
        return internal_error(e.what());
      } catch (...) {
        return internal_error("unknown exception");
      }
    } catch (...) {
      return status{status_code::internal, {}};
    }
  }

  void run(lane& l) {
    std::vector<step_output> outputs;
    std::vector<generation_event> events;
    std::vector<delivery> out;
    std::unique_lock lock{l.mutex};
    for (;;) {
      l.wake.wait(lock, [&] {
        return !l.core->idle() || l.cancel_scan ||
               state_.load(std::memory_order_acquire) != state::running;
      });
      out.clear();
      collect_cancelled(l, out);
      if (l.core->idle() && out.empty()) {
        if (state_.load(std::memory_order_seq_cst) != state::running) {
          // A submit that saw `running` before shutdown began may still be adding its sequence:
          // it counts itself in submitters_ before it reads the state, so none is in flight
          // once this reads 0 after the state changed.
          if (submitters_.load(std::memory_order_seq_cst) == 0) {
            break;
          }
          l.wake.wait_for(lock, std::chrono::microseconds{100});
        }
        continue;
      }
      const step_plan* plan = nullptr;
      if (!l.core->idle()) {
        plan = &l.core->schedule(clock::now());
      }
      publish(l);
      lock.unlock();
      finish(l, out);
      const bool act = plan != nullptr &&
                       (!plan->empty() || !plan->finished.empty() || !plan->preempted.empty());
      std::optional<status> failure;
      if (act) {
        outputs.clear();
        failure = execute(*l.in->backend, *plan, outputs);
      }
      lock.lock();
      if (!act) {
        if (plan != nullptr) {
          // Nothing could run (cannot happen while add() refuses what never fits): wait for a
          // change rather than spin.
          l.wake.wait_for(lock, std::chrono::milliseconds{1});
        }
        continue;
      }
      if (failure) {
        fail_step(l, *plan, step_failure(l, *failure), out);
        outputs.clear();
      }
      if (!plan->empty()) {
        events.clear();
        if (status u = l.core->update(outputs, events); !u.ok()) {
          fail_step(l, *plan, step_failure(l, u), out);
          events.clear();
          outputs.clear();
          (void)l.core->update(outputs, events); // every sampler cancelled: accepted
        }
      }
      for (const auto& ev : events) {
        const auto it = l.entries.find(ev.id);
        if (it == l.entries.end()) {
          continue;
        }
        delivery d;
        d.id = ev.id;
        d.entry = &it->second;
        d.token = ev.token;
        d.final = ev.finished;
        d.reason = ev.reason;
        out.push_back(std::move(d));
      }
      l.generation_tokens.fetch_add(events.size(), std::memory_order_relaxed);
      publish(l);
      lock.unlock();
      finish(l, out);
      lock.lock();
    }
  }

  /// Without the lock: sends `out`, then erases the entries that got their final response.
  void finish(lane& l, std::vector<delivery>& out) {
    if (out.empty()) {
      return;
    }
    deliver(l, out);
    {
      const std::lock_guard lock{l.mutex};
      for (const auto& d : out) {
        if (d.final) {
          l.entries.erase(d.id);
          l.load.fetch_sub(1, std::memory_order_relaxed);
        }
      }
    }
    out.clear();
  }

  [[nodiscard]] status step_failure(const lane& l, const status& why) const {
    return internal_error("backend of model '" + options_.name + "' failed in instance '" +
                          l.in->placement.name + "': " + why.message());
  }

  const model_options& options_;
  model_statistics& stats_;
  std::vector<std::unique_ptr<lane>> lanes_;
  iteration_batching_options iteration_;
  detail::generation_settings defaults_;
  std::optional<token_id> end_token_;
  detail::atomic_histogram ttft_{ttft_buckets_seconds};
  detail::atomic_histogram tpot_{tpot_buckets_seconds};
  std::atomic<std::uint64_t> next_id_{1};
  std::atomic<state> state_{state::running};
  std::atomic<int> submitters_{0};
  std::mutex join_mutex_;
};

} // namespace servekit
