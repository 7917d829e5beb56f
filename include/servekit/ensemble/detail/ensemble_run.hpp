#pragma once
/// \file
/// ensemble_run: one ensemble request on its way through the steps. It decides, event by event,
/// which steps may start and what the final response is; it starts nothing itself (the executor
/// does, outside the run's lock) and reads no clock.

#include <servekit/core/buffer.hpp>
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
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace servekit::detail {

/// Steps that became ready in one event (rarely more than a few).
using ready_steps = boost::container::small_vector<std::size_t, 8>;

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
class ensemble_run {
public:
  ensemble_run(const ensemble_plan& plan, request&& r, response_sink&& sink, std::int64_t elements)
      : plan_{&plan}, request_{std::move(r)}, sink_{std::move(sink)}, elements_{elements},
        slots_(plan.tensors.size()), steps_(plan.steps.size()) {}

  ensemble_run(const ensemble_run&) = delete;
  ensemble_run& operator=(const ensemble_run&) = delete;
  ~ensemble_run() {
    for (auto& s : slots_) {
      if (s.shared != nullptr) {
        s.shared->drop();
      }
    }
  }

  std::mutex mutex;

  /// Marks the steps the requested outputs need (pruning the rest), places the inputs and
  /// collects the steps that can start at once.
  void start(ready_steps& ready) {
    const auto& plan = *plan_;
    for (const std::size_t o : plan.outputs) {
      if (request_.wants_output(plan.tensors[o].name)) {
        ++slots_[o].uses;
      }
    }
    for (auto it = plan.order.rbegin(); it != plan.order.rend(); ++it) {
      const std::size_t s = *it;
      const auto& step = plan.steps[s];
      bool needed = false;
      for (const std::size_t t : step.output_tensors) {
        needed = needed || slots_[t].uses != 0;
      }
      if (!needed) {
        continue;
      }
      steps_[s].needed = true;
      steps_[s].missing = static_cast<std::uint32_t>(step.input_tensors.size());
      for (const std::size_t t : step.input_tensors) {
        ++slots_[t].uses;
      }
    }
    for (std::size_t i = 0; i < plan.inputs.size(); ++i) {
      const std::size_t t = plan.inputs[i];
      if (tensor* in = request_.find_input(plan.tensors[t].name); in != nullptr) {
        arrive(t, std::move(*in), ready);
      }
    }
    for (const std::size_t s : plan.order) {
      if (steps_[s].needed && steps_[s].missing == 0 && steps_[s].phase == step_phase::waiting) {
        begin(s, ready); // a step without inputs
      }
    }
    request_.inputs.clear();
  }

  /// A step's response arrived (or its submit failed: pass the failure as a response).
  void step_finished(std::size_t s, response&& r, ready_steps& ready) {
    --in_flight_;
    steps_[s].phase = step_phase::finished;
    if (!r.ok()) {
      fail(s, r.status);
      return;
    }
    timing_.queue_ns += r.timing.queue_ns;
    timing_.compute_input_ns += r.timing.compute_input_ns;
    timing_.compute_infer_ns += r.timing.compute_infer_ns;
    timing_.compute_output_ns += r.timing.compute_output_ns;
    if (!error_.ok()) {
      return; // the request has failed: later outputs are dropped, nothing new starts
    }
    const auto& step = plan_->steps[s];
    for (std::size_t k = 0; k < step.output_tensors.size(); ++k) {
      const std::size_t t = step.output_tensors[k];
      if (slots_[t].uses == 0) {
        continue; // pruned: nobody reads it in this request
      }
      for (auto& out : r.outputs) {
        if (out.name == step.output_names[k]) {
          arrive(t, std::move(out), ready);
          break;
        }
      }
    }
  }

  /// A step that became ready did not start (the request failed or was cancelled first).
  void step_not_started(std::size_t s, const status& why) {
    --in_flight_;
    steps_[s].phase = step_phase::not_started;
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
  /// that moves from a slot it reads alone.
  [[nodiscard]] request make_step_request(std::size_t s) {
    const auto& step = plan_->steps[s];
    request out;
    out.id = request_.id;
    out.priority = request_.priority;
    out.timeout_us = request_.timeout_us;
    out.sequence_id = request_.sequence_id;
    out.sequence_start = request_.sequence_start;
    out.sequence_end = request_.sequence_end;
    out.cancellation = request_.cancellation;
    out.requested_outputs = step.requested_outputs;
    out.inputs.reserve(step.input_tensors.size());
    for (std::size_t i = 0; i < step.input_tensors.size(); ++i) {
      const std::size_t t = step.input_tensors[i];
      tensor in = take(t);
      in.name = step.input_names[i];
      adapt_shape(in.shape, plan_->tensors[t].readers[step.input_readers[i]]);
      out.inputs.push_back(std::move(in));
    }
    return out;
  }

  /// The final response, once `done()`: the first failure, or every requested output.
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
      if (!slots_[t].present) {
        out.status =
            invalid_argument("in ensemble '" + plan.name + "', output '" + plan.tensors[t].name +
                             "' was not produced: " + why_missing(t));
        out.outputs.clear();
        return out;
      }
      tensor value = take(t);
      value.name = plan.tensors[t].name;
      adapt_shape(value.shape, *plan.tensors[t].output);
      out.outputs.push_back(std::move(value));
    }
    return out;
  }

  [[nodiscard]] const request& original() const noexcept { return request_; }
  [[nodiscard]] response_sink& sink() noexcept { return sink_; }
  [[nodiscard]] std::int64_t elements() const noexcept { return elements_; }
  /// The steps' timings summed (for the ensemble's own queue and compute statistics).
  [[nodiscard]] const request_timing& step_timing() const noexcept { return timing_; }

private:
  enum class step_phase : std::uint8_t { waiting, started, finished, not_started };

  struct slot {
    tensor value;
    shared_bytes* shared = nullptr; ///< set when more than one reader takes the value
    std::uint32_t uses = 0;         ///< readers in this request (needed steps, the response)
    bool present = false;
  };
  struct step_state {
    std::uint32_t missing = 0; ///< input mappings whose tensor has not arrived
    bool needed = false;
    step_phase phase = step_phase::waiting;
  };

  void arrive(std::size_t t, tensor&& value, ready_steps& ready) {
    slot& sl = slots_[t];
    sl.value = std::move(value);
    sl.present = true;
    if (sl.uses > 1) {
      sl.shared = shared_bytes::adopt(std::move(sl.value.data));
    }
    for (const auto& reader : plan_->tensors[t].readers) {
      step_state& st = steps_[reader.step];
      if (st.needed && --st.missing == 0) {
        begin(reader.step, ready);
      }
    }
  }

  void begin(std::size_t s, ready_steps& ready) {
    steps_[s].phase = step_phase::started;
    ++in_flight_;
    ready.push_back(s);
  }

  [[nodiscard]] tensor take(std::size_t t) {
    slot& sl = slots_[t];
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
    if (steps_[p].phase == step_phase::finished) {
      return who + " did not return output '" + step.output_names[plan.tensors[t].produced_as] +
             "'";
    }
    for (const std::size_t in : step.input_tensors) {
      if (!slots_[in].present) {
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
  std::vector<slot, pool_allocator<slot>> slots_;
  std::vector<step_state, pool_allocator<step_state>> steps_;
  std::uint32_t in_flight_ = 0; ///< steps started (or about to start) and not yet answered
  status error_;
  request_timing timing_;
};

} // namespace servekit::detail
