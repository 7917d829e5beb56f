#pragma once
/// \file
/// ensemble_run: one ensemble request on its way through the steps. It decides, event by event,
/// which steps may start and what the final response is; it starts nothing itself (the executor
/// does, outside the run's lock) and reads no clock.

#include <servekit/core/buffer.hpp>
#include <servekit/core/clock.hpp>
#include <servekit/core/detail/block_pool.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/response_sink.hpp>
#include <servekit/core/status.hpp>
#include <servekit/ensemble/detail/ensemble_plan.hpp>

#include <boost/container/small_vector.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace servekit::detail {

/// Bytes that several readers of one tensor share: each reader gets a buffer that aliases them
/// and drops a reference when destroyed. This is how one step output feeds two steps (or a step
/// and the response) without a copy. Readers must treat their inputs as read-only, as Triton's
/// backends do.
class shared_bytes {
public:
  /// Takes `bytes`; the caller holds the first reference.
  [[nodiscard]] static shared_bytes* adopt(buffer&& bytes) {
    void* memory = block_pool::allocate(sizeof(shared_bytes));
    return ::new (memory) shared_bytes{std::move(bytes)};
  }

  /// A new reference, as a buffer.
  [[nodiscard]] buffer alias() noexcept {
    refs_.fetch_add(1, std::memory_order_relaxed);
    return buffer::adopt(bytes_.data(), bytes_.size(), bytes_.location(), &release, this);
  }

  /// Drops the caller's reference.
  void drop() noexcept { release(this, nullptr, 0); }

private:
  explicit shared_bytes(buffer&& bytes) noexcept : bytes_{std::move(bytes)} {}

  static void release(void* context, std::byte*, std::size_t) noexcept {
    auto* self = static_cast<shared_bytes*>(context);
    if (self->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      self->~shared_bytes();
      block_pool::release(self, sizeof(shared_bytes));
    }
  }

  buffer bytes_;
  std::atomic<std::uint32_t> refs_{1};
};

/// One request's progress through an ensemble. Every member function except
/// `make_step_request` is called under `mutex`; see there for why that one need not be.
///
/// A request runs in iterations (Triton's ensemble scheduler): the request itself is the root
/// iteration, holding its inputs and every tensor computed once per request. Each response of a
/// decoupled step that carries outputs opens a child iteration at that step's level, holding
/// the tensors that vary with it; a step runs once per iteration of its level, reading the
/// tensors of that iteration and of its ancestors. A plan without decoupled steps only ever has
/// the root.
class ensemble_run {
public:
  enum class step_phase : std::uint8_t { waiting, started, finished, not_started };

  struct slot {
    tensor value;
    shared_bytes* shared = nullptr; ///< set when more than one reader takes the value
    std::uint32_t uses = 0;         ///< readers in this request (root: needed steps, response)
    bool present = false;
  };
  struct step_state {
    std::uint32_t missing = 0; ///< input mappings whose tensor has not arrived
    bool needed = false;       ///< meaningful in the root
    step_phase phase = step_phase::waiting;
    time_point sent{}; ///< when the executor sent it (written and read by the executor only)
  };

  /// The tensors and step states of one iteration.
  struct iteration {
    iteration(const ensemble_plan& plan, iteration* up, std::size_t at)
        : parent{up}, level{at}, slots(plan.tensors.size()), steps(plan.steps.size()) {}
    iteration(const iteration&) = delete;
    iteration& operator=(const iteration&) = delete;
    ~iteration() {
      for (auto& s : slots) {
        if (s.shared != nullptr) {
          s.shared->drop();
        }
      }
    }
    iteration* parent = nullptr;
    std::size_t level = no_index; ///< the decoupled step it is a response of (root: no_index)
    std::vector<slot, pool_allocator<slot>> slots;
    std::vector<step_state, pool_allocator<step_state>> steps;
    std::uint32_t response_missing = 0; ///< requested outputs not yet visible (decoupled plans)
  };

  /// A step to send, in the iteration it runs in.
  struct launch {
    std::size_t step = 0;
    iteration* where = nullptr;
  };

  ensemble_run(const ensemble_plan& plan, request&& r, response_sink&& sink, std::int64_t elements)
      : plan_{&plan}, request_{std::move(r)}, sink_{std::move(sink)}, elements_{elements},
        root_{plan, nullptr, no_index} {}

  ensemble_run(const ensemble_run&) = delete;
  ensemble_run& operator=(const ensemble_run&) = delete;
  ~ensemble_run() = default;

  std::mutex mutex;

  /// Marks the steps the requested outputs need (pruning the rest), places the inputs and
  /// collects the steps that can start at once.
  template <class Ready>
  void start(Ready& ready) {
    const auto& plan = *plan_;
    auto& slots = root_.slots;
    auto& steps = root_.steps;
    for (const std::size_t o : plan.outputs) {
      if (request_.wants_output(plan.tensors[o].name)) {
        ++slots[o].uses;
        ++root_.response_missing;
        const std::size_t l = plan.tensors[o].level;
        if (plan.level_contains(output_level_, l)) {
          output_level_ = l;
        }
      }
    }
    if (output_level_ != no_index) {
      root_.response_missing = 0; // responses are counted in the iterations of that level
    }
    for (auto it = plan.order.rbegin(); it != plan.order.rend(); ++it) {
      const std::size_t s = *it;
      const auto& step = plan.steps[s];
      bool needed = false;
      for (const std::size_t t : step.output_tensors) {
        needed = needed || slots[t].uses != 0;
      }
      if (!needed) {
        continue;
      }
      steps[s].needed = true;
      if (step.level == no_index) {
        steps[s].missing = static_cast<std::uint32_t>(step.input_tensors.size());
      }
      for (const std::size_t t : step.input_tensors) {
        ++slots[t].uses;
      }
    }
    for (std::size_t i = 0; i < plan.inputs.size(); ++i) {
      const std::size_t t = plan.inputs[i];
      if (tensor* in = request_.find_input(plan.tensors[t].name); in != nullptr) {
        arrive(root_, t, std::move(*in), ready);
      }
    }
    for (const std::size_t s : plan.order) {
      if (steps[s].needed && plan.steps[s].level == no_index && steps[s].missing == 0 &&
          steps[s].phase == step_phase::waiting) {
        begin(root_, s, ready); // a step without inputs
      }
    }
    request_.inputs.clear();
  }

  /// A response of step `s` (run in `where`) arrived, or its submit failed (pass the failure
  /// as a final response). A decoupled step's responses with outputs each open an iteration.
  template <class Ready>
  void step_answered(iteration& where, std::size_t s, response&& r, Ready& ready) {
    if (r.final) {
      --in_flight_;
      where.steps[s].phase = step_phase::finished;
    }
    if (!r.ok()) {
      fail(s, r.status);
      return;
    }
    const auto& step = plan_->steps[s];
    if (!r.final && !step.model.decoupled) {
      fail(s, internal_error("it sent a non-final response, but it is not declared decoupled"));
      return;
    }
    if (r.final) {
      timing_.queue_ns += r.timing.queue_ns;
      timing_.compute_input_ns += r.timing.compute_input_ns;
      timing_.compute_infer_ns += r.timing.compute_infer_ns;
      timing_.compute_output_ns += r.timing.compute_output_ns;
    }
    if (!error_.ok()) {
      return; // the request has failed: later outputs are dropped, nothing new starts
    }
    iteration* into = &where;
    if (step.model.decoupled) {
      if (r.outputs.empty()) {
        return; // an empty response (typically the final flag alone) is no iteration
      }
      into = &open_iteration(where, s);
    }
    for (std::size_t k = 0; k < step.output_tensors.size(); ++k) {
      const std::size_t t = step.output_tensors[k];
      if (root_.slots[t].uses == 0) {
        continue; // pruned: nobody reads it in this request
      }
      for (auto& out : r.outputs) {
        if (out.name == step.output_names[k]) {
          arrive(*into, t, std::move(out), ready);
          break;
        }
      }
    }
  }

  /// A step that became ready did not start (the request failed or was cancelled first).
  void step_not_started(iteration& where, std::size_t s, const status& why) {
    --in_flight_;
    where.steps[s].phase = step_phase::not_started;
    fail(s, why);
  }

  /// Whether new steps should not start: the request failed or was cancelled.
  [[nodiscard]] bool stopping() const noexcept { return !error_.ok(); }
  [[nodiscard]] bool cancelled() const noexcept { return request_.cancellation.cancelled(); }
  /// Every step that started has answered, and none is about to start.
  [[nodiscard]] bool done() const noexcept { return in_flight_ == 0; }

  /// The request a ready step sends to its model: the ensemble request's scheduling fields,
  /// and its inputs taken from the slots (moved when this step is the only reader, else an
  /// alias of shared bytes). Called without the lock: a ready step's input slots are complete
  /// (written under the lock before the step was made ready) and this step is the only one
  /// that moves from a slot it reads alone. (In a decoupled plan every read slot is shared, so
  /// readers in several iterations only ever alias it.)
  [[nodiscard]] request make_step_request(const launch& l) {
    const auto& step = plan_->steps[l.step];
    request out;
    out.id = request_.id;
    out.priority = request_.priority;
    out.timeout_us = request_.timeout_us;
    out.sequence_id = request_.sequence_id;
    out.sequence_start = request_.sequence_start;
    out.sequence_end = request_.sequence_end;
    out.cancellation = request_.cancellation;
    out.parameters = request_.parameters; // Triton forwards them to every composing model
    out.requested_outputs = step.requested_outputs;
    out.inputs.reserve(step.input_tensors.size());
    for (std::size_t i = 0; i < step.input_tensors.size(); ++i) {
      const std::size_t t = step.input_tensors[i];
      tensor in = take(*slot_of(*l.where, t));
      in.name = step.input_names[i];
      adapt_shape(in.shape, plan_->tensors[t].readers[step.input_readers[i]]);
      out.inputs.push_back(std::move(in));
    }
    return out;
  }

  /// The final response of a non-decoupled plan, once `done()`: the first failure, or every
  /// requested output.
  [[nodiscard]] response take_response() {
    response out;
    out.id = request_.id;
    if (!error_.ok()) {
      out.status = error_;
      return out;
    }
    const auto& plan = *plan_;
    for (const std::size_t t : plan.outputs) {
      if (!request_.wants_output(plan.tensors[t].name)) {
        continue;
      }
      if (!root_.slots[t].present) {
        out.status =
            invalid_argument("in ensemble '" + plan.name + "', output '" + plan.tensors[t].name +
                             "' was not produced: " + why_missing(t));
        out.outputs.clear();
        return out;
      }
      out.outputs.push_back(output_value(root_, t));
    }
    return out;
  }

  // --- Streaming (decoupled plans): responses wait in `outbox` for the one thread that
  // delivers them (`draining`), so the client's sink is never called by two threads at once
  // and the final response is the last one it sees.

  std::deque<response> outbox;
  bool draining = false;

  /// Once `done()`: queues the final response (once). It is the error, if any; else the last
  /// queued response, when not yet delivered, becomes final (as Triton sets FINAL on the
  /// response made when no step is left in flight); else an empty final response.
  void queue_final() {
    if (final_queued_) {
      return;
    }
    final_queued_ = true;
    if (!error_.ok()) {
      outbox.push_back(response::failure(error_, request_.id));
      return;
    }
    if (!outbox.empty() && outbox.back().ok()) {
      outbox.back().final = true;
      return;
    }
    response out;
    out.id = request_.id;
    outbox.push_back(std::move(out));
  }

  [[nodiscard]] const request& original() const noexcept { return request_; }
  [[nodiscard]] response_sink& sink() noexcept { return sink_; }
  [[nodiscard]] std::int64_t elements() const noexcept { return elements_; }
  /// The steps' timings summed (for the ensemble's own queue and compute statistics).
  [[nodiscard]] const request_timing& step_timing() const noexcept { return timing_; }
  [[nodiscard]] const status& error() const noexcept { return error_; }
  /// Responses queued or delivered so far (decoupled plans).
  [[nodiscard]] std::uint64_t responses() const noexcept { return responses_; }

private:
  /// The iteration at tensor `t`'s level seen from `from` (`from` or an ancestor).
  [[nodiscard]] iteration* owner_of(iteration& from, std::size_t t) noexcept {
    const std::size_t level = plan_->tensors[t].level;
    for (iteration* i = &from; i != nullptr; i = i->parent) {
      if (i->level == level) {
        return i;
      }
    }
    return nullptr;
  }
  [[nodiscard]] slot* slot_of(iteration& from, std::size_t t) noexcept {
    iteration* i = owner_of(from, t);
    return i == nullptr ? nullptr : &i->slots[t];
  }
  [[nodiscard]] bool visible(iteration& from, std::size_t t) noexcept {
    const slot* s = slot_of(from, t);
    return s != nullptr && s->present;
  }
  [[nodiscard]] static bool within(const iteration& inner, const iteration& outer) noexcept {
    for (const iteration* i = &inner; i != nullptr; i = i->parent) {
      if (i == &outer) {
        return true;
      }
    }
    return false;
  }

  /// A response of decoupled step `s` run in `parent`: a new iteration at level `s`, with the
  /// steps of that level waiting for whatever is not visible from it yet.
  iteration& open_iteration(iteration& parent, std::size_t s) {
    auto& it = *more_.emplace_back(std::make_unique<iteration>(*plan_, &parent, s));
    const auto& plan = *plan_;
    for (std::size_t r = 0; r < plan.steps.size(); ++r) {
      if (!root_.steps[r].needed || plan.steps[r].level != s) {
        continue;
      }
      for (const std::size_t t : plan.steps[r].input_tensors) {
        it.steps[r].missing += visible(it, t) ? 0U : 1U;
      }
    }
    if (output_level_ == s) {
      for (const std::size_t o : plan.outputs) {
        if (request_.wants_output(plan.tensors[o].name) && !visible(it, o)) {
          ++it.response_missing;
        }
      }
    }
    return it;
  }

  template <class Ready>
  void arrive(iteration& at, std::size_t t, tensor&& value, Ready& ready) {
    const auto& plan = *plan_;
    slot& sl = at.slots[t];
    sl.value = std::move(value);
    sl.present = true;
    const std::uint32_t uses = root_.slots[t].uses;
    if (uses > 1 || (plan.decoupled && uses > 0)) {
      sl.shared = shared_bytes::adopt(std::move(sl.value.data));
    }
    for (const auto& reader : plan.tensors[t].readers) {
      const std::size_t r = reader.step;
      if (!root_.steps[r].needed) {
        continue;
      }
      const std::size_t level = plan.steps[r].level;
      if (level == at.level) {
        input_arrived(at, r, ready);
        continue;
      }
      for (auto& deeper : more_) { // a tensor an iteration below was waiting for
        if (deeper->level == level && within(*deeper, at)) {
          input_arrived(*deeper, r, ready);
        }
      }
    }
    if (!plan.decoupled || !plan.tensors[t].output ||
        !request_.wants_output(plan.tensors[t].name)) {
      return;
    }
    if (output_level_ == at.level) {
      output_arrived(at);
      return;
    }
    for (auto& deeper : more_) {
      if (deeper->level == output_level_ && within(*deeper, at)) {
        output_arrived(*deeper);
      }
    }
  }

  template <class Ready>
  void input_arrived(iteration& at, std::size_t s, Ready& ready) {
    step_state& st = at.steps[s];
    if (st.missing != 0 && --st.missing == 0 && st.phase == step_phase::waiting) {
      begin(at, s, ready);
    }
  }

  /// Every requested output of an iteration is there: one streamed response.
  void output_arrived(iteration& at) {
    if (at.response_missing == 0 || --at.response_missing != 0) {
      return;
    }
    response out;
    out.id = request_.id;
    out.final = false;
    for (const std::size_t t : plan_->outputs) {
      if (request_.wants_output(plan_->tensors[t].name)) {
        out.outputs.push_back(output_value(at, t));
      }
    }
    ++responses_;
    outbox.push_back(std::move(out));
  }

  [[nodiscard]] tensor output_value(iteration& from, std::size_t t) {
    tensor value = take(*slot_of(from, t));
    value.name = plan_->tensors[t].name;
    adapt_shape(value.shape, *plan_->tensors[t].output);
    return value;
  }

  template <class Ready>
  void begin(iteration& at, std::size_t s, Ready& ready) {
    at.steps[s].phase = step_phase::started;
    ++in_flight_;
    ready.push_back(launch{s, &at});
  }

  [[nodiscard]] static tensor take(slot& sl) {
    if (sl.shared == nullptr) {
      return std::move(sl.value);
    }
    return tensor{{}, sl.value.type, sl.value.shape, sl.shared->alias()}; // the reader names it
  }

  void fail(std::size_t s, const status& why) {
    if (!error_.ok()) {
      return; // the first failure is the answer
    }
    const auto& model = plan_->steps[s].model;
    error_ = status{why.code(), "in ensemble '" + plan_->name + "', step " + std::to_string(s) +
                                    " (model '" + model.name + "'): " + why.message()};
  }

  /// Why tensor `t` never arrived, following the chain back to the step that did not emit it.
  [[nodiscard]] std::string why_missing(std::size_t t) const {
    const auto& plan = *plan_;
    const std::size_t p = plan.tensors[t].producer;
    if (p == no_index) {
      return "ensemble input '" + plan.tensors[t].name + "' was not given";
    }
    const auto& step = plan.steps[p];
    const std::string who = "step " + std::to_string(p) + " (model '" + step.model.name + "')";
    if (root_.steps[p].phase == step_phase::finished) {
      return who + " did not return output '" + step.output_names[plan.tensors[t].produced_as] +
             "'";
    }
    for (const std::size_t in : step.input_tensors) {
      if (!root_.slots[in].present) {
        return who + " did not run: tensor '" + plan.tensors[in].name +
               "' was not produced: " + why_missing(in);
      }
    }
    return who + " did not run";
  }

  const ensemble_plan* plan_;
  request request_;
  response_sink sink_;
  std::int64_t elements_ = 1;
  iteration root_;
  std::vector<std::unique_ptr<iteration>> more_; ///< iterations opened by decoupled steps
  std::size_t output_level_ = no_index;          ///< the level the requested outputs vary with
  std::uint32_t in_flight_ = 0; ///< steps started (or about to start) and not yet answered
  std::uint64_t responses_ = 0;
  bool final_queued_ = false;
  status error_;
  request_timing timing_;
};

/// Steps that became ready in one event (rarely more than a few).
using ready_steps = boost::container::small_vector<ensemble_run::launch, 8>;

} // namespace servekit::detail
