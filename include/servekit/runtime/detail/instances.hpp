#pragma once
/// \file
/// What every threaded shell does with backend instances: build them (with the backend's and
/// the model's optional shared state, and warmup), run `execute` catching
/// what it throws, and turn one execution into a statistics record.

#include <servekit/backend/backend.hpp>
#include <servekit/backend/batch.hpp>
#include <servekit/backend/batch_io.hpp>
#include <servekit/core/clock.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/metrics/statistics.hpp>
#include <servekit/runtime/detail/warmup.hpp>
#include <servekit/runtime/instance_group.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/runtime/resolved_config.hpp>

#include <concepts>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace servekit::detail {

// -- shared state: backend_state (per backend type) and model_state (per model) ----------------

/// Stands in for a state a backend does not declare.
struct no_state {};

template <class Backend>
struct backend_state_of {
  using type = no_state;
};
template <class Backend>
  requires declares_backend_state<Backend>
struct backend_state_of<Backend> {
  using type = typename Backend::backend_state;
};
template <class Backend>
struct model_state_of {
  using type = no_state;
};
template <class Backend>
  requires declares_model_state<Backend>
struct model_state_of<Backend> {
  using type = typename Backend::model_state;
};

/// A model_state constructor that takes the backend's state too.
template <class Backend>
concept model_state_takes_backend_state =
    declares_model_state<Backend> && declares_backend_state<Backend> &&
    std::constructible_from<typename Backend::model_state, const model_context&,
                            typename Backend::backend_state&>;

/// The one backend_state of `Backend` while any model of it holds the returned pointer: built by
/// the first model (on its thread), destroyed with the last. A model loaded while the previous
/// state is being destroyed waits for that to finish, so two never overlap.
template <class Backend>
[[nodiscard]] std::shared_ptr<typename Backend::backend_state> acquire_backend_state() {
  using state = typename Backend::backend_state;
  struct registry {
    std::mutex mutex;
    std::condition_variable destroyed;
    std::weak_ptr<state> current;
    bool alive = false;
  };
  static registry r; // one per backend type, shared by every model
  std::unique_lock lock{r.mutex};
  if (auto existing = r.current.lock()) {
    return existing;
  }
  r.destroyed.wait(lock, [] { return !r.alive; });
  std::shared_ptr<state> created{new state(), [](state* s) {
                                   delete s;
                                   const std::lock_guard done{r.mutex};
                                   r.alive = false;
                                   r.destroyed.notify_all();
                                 }};
  r.alive = true;
  r.current = created;
  return created;
}

/// A model's shared states. Members are destroyed in reverse: the model state, then (with the
/// model's last reference) the backend state.
template <class Backend>
struct model_states {
  using backend_state_type = typename backend_state_of<Backend>::type;
  using model_state_type = typename model_state_of<Backend>::type;

  std::shared_ptr<backend_state_type> backend;
  std::optional<model_state_type> model;
};

/// Builds a model's states in Triton's order (backend, then model). Throws config_error naming
/// the model if a constructor throws; what was built is destroyed first.
template <class Backend>
[[nodiscard]] std::shared_ptr<model_states<Backend>>
create_model_states(const model_options& options, const resolved_config& config) {
  auto states = std::make_shared<model_states<Backend>>();
  if constexpr (declares_backend_state<Backend>) {
    try {
      states->backend = acquire_backend_state<Backend>();
    } catch (const std::exception& e) {
      throw config_error(config_error_code::backend_error, "/backend",
                         "the backend of model '" + options.name +
                             "' failed to initialize: " + e.what());
    }
  }
  if constexpr (declares_model_state<Backend>) {
    using state = typename Backend::model_state;
    model_context context;
    context.model_name = options.name;
    context.model_version = options.version;
    context.max_batch_size = config.max_batch_size;
    context.inputs = config.inputs;
    context.outputs = config.outputs;
    context.parameters = &options.parameters;
    context.directory = options.directory;
    context.default_model_filename = options.default_model_filename;
    std::vector<tensor_config> sequence_inputs;
    std::vector<tensor_config> state_outputs;
    if (options.sequence_batching) {
      for (const auto& input : options.sequence_batching->control_input) {
        if (!input.control.empty()) {
          sequence_inputs.push_back(
              {input.name, input.control.front().tensor_data_type(), shape{1}});
        }
      }
      for (const auto& s : options.sequence_batching->state) {
        sequence_inputs.push_back({s.input_name, s.data_type, s.dims});
        state_outputs.push_back({s.output_name, s.data_type, s.dims});
      }
    }
    context.sequence_inputs = sequence_inputs;
    context.state_outputs = state_outputs;
    try {
      if constexpr (model_state_takes_backend_state<Backend>) {
        states->model.emplace(std::as_const(context), *states->backend);
      } else if constexpr (std::constructible_from<state, const model_context&>) {
        states->model.emplace(std::as_const(context));
      } else {
        static_assert(std::default_initializable<state>,
                      "servekit: a backend's model_state needs a constructor taking "
                      "(const servekit::model_context&), (const servekit::model_context&, "
                      "backend_state&) or nothing");
        states->model.emplace();
      }
    } catch (const std::exception& e) {
      throw config_error(config_error_code::backend_error, "",
                         "model '" + options.name + "' failed to initialize: " + e.what());
    }
  }
  return states;
}

/// One backend instance and the thread that runs it. `states` is declared before `backend`, so
/// an instance is destroyed before the model state it may use.
template <class Backend>
struct backend_instance {
  instance_placement placement;
  instance_context context;
  std::shared_ptr<model_states<Backend>> states;
  std::optional<Backend> backend;
  std::thread thread;
};

/// Calls the constructor the backend declares: with its model state, its backend state, or the
/// context alone.
template <class Backend>
void construct_backend(backend_instance<Backend>& in) {
  const instance_context& context = in.context;
  if constexpr (constructible_with_model_state<Backend>) {
    in.backend.emplace(context, *in.states->model);
  } else if constexpr (constructible_with_backend_state<Backend>) {
    in.backend.emplace(context, *in.states->backend);
  } else {
    in.backend.emplace(context);
  }
}

/// Instance `index` at `placement`: its context filled from the model's options and resolved
/// config, its backend constructed (on this thread). Throws config_error at "/instance_group"
/// naming the instance if the constructor throws. Every shell builds its instances with it.
/// `states` is taken by reference and copied: with it by value, the TSan build (g++ 12, -O1)
/// released the shared states twice when the constructor threw (a heap-use-after-free in CI).
template <class Backend>
[[nodiscard]] std::unique_ptr<backend_instance<Backend>>
build_instance(const model_options& options, const resolved_config& config,
               const instance_placement& placement, std::size_t index,
               const std::shared_ptr<model_states<Backend>>& states) {
  auto in = std::make_unique<backend_instance<Backend>>();
  in->placement = placement;
  in->context.model_name = options.name;
  in->context.model_version = options.version;
  in->context.instance_name = in->placement.name;
  in->context.instance_index = index;
  in->context.kind = in->placement.kind;
  in->context.device_id = in->placement.device_id;
  in->context.max_batch_size = config.max_batch_size;
  in->context.inputs = config.inputs;
  in->context.outputs = config.outputs;
  in->context.parameters = &options.parameters;
  in->states = states;
  try {
    construct_backend(*in);
  } catch (const std::exception& e) {
    throw config_error(config_error_code::backend_error, "/instance_group",
                       "instance '" + in->placement.name + "' of model '" + options.name +
                           "' failed to initialize: " + e.what());
  }
  return in;
}

/// Builds the model's shared states, then an instance per placement (calling each backend's
/// constructor on this thread), running the model's warmup samples on each right after it is
/// built; warmup executions are recorded into `stats` when given. Throws config_error if a
/// constructor throws or warmup fails: the instances already built are destroyed in reverse
/// order, then the model state, then (if no other model holds it) the backend state.
template <class Backend>
[[nodiscard]] std::vector<std::unique_ptr<backend_instance<Backend>>>
create_instances(const model_options& options, const resolved_config& config,
                 const std::vector<instance_placement>& placements,
                 model_statistics* stats = nullptr) {
  if (!options.model_warmup.empty() && backend_traits<Backend>::decoupled) {
    throw config_error(config_error_code::bad_value, "/model_warmup",
                       "model '" + options.name +
                           "': model_warmup on a decoupled model is not supported by this build "
                           "of servekit yet");
  }
  auto states = create_model_states<Backend>(options, config);
  std::vector<std::unique_ptr<backend_instance<Backend>>> out;
  out.reserve(placements.size());
  try {
    for (std::size_t i = 0; i < placements.size(); ++i) {
      out.push_back(build_instance<Backend>(options, config, placements[i], i, states));
      run_warmup(*out.back()->backend, out.back()->context, options, config.max_batch_size,
                 config.inputs, stats);
    }
  } catch (...) {
    while (!out.empty()) {
      out.pop_back(); // reverse order of construction
    }
    throw; // `states` goes last: the model state, then the backend state
  }
  return out;
}

/// Runs the backend on `b`. Returns what it threw (nothing when it returned normally), so that
/// one failing execution fails its requests, not the instance: a batch_io_error (from the
/// *_or_throw gather and scatter) keeps its status code, anything else is internal.
template <class Backend>
[[nodiscard]] std::optional<status> run_backend(Backend& backend, batch& b) noexcept {
  try {
    try {
      backend.execute(b);
      return std::nullopt;
    } catch (const batch_io_error& e) {
      return e.status();
    } catch (const std::exception& e) {
      return internal_error(e.what());
    } catch (...) {
      return internal_error("unknown exception");
    }
  } catch (...) { // out of memory copying the message
    return status{status_code::internal, {}};
  }
}

/// The statistics record of one execution from `start` to `end`, before its requests are
/// counted (the shell adds each request's outcome).
[[nodiscard]] inline model_statistics::execution
execution_record(std::size_t instance, const batch& b, time_point start, time_point end,
                 std::int64_t elements, std::size_t requests, batch_close_reason reason) noexcept {
  model_statistics::execution e;
  e.instance = instance;
  e.batch_size = static_cast<std::uint64_t>(elements);
  e.requests = requests;
  e.padding_elements = static_cast<std::uint64_t>(b.padding());
  e.reason = reason;
  e.backend_failed = true;
  const time_point input_end =
      b.compute_input_end() == time_point{} ? start : b.compute_input_end();
  const time_point output_start =
      b.compute_output_start() == time_point{} ? end : b.compute_output_start();
  e.compute_input_ns = elapsed_ns(start, input_end);
  e.compute_infer_ns = elapsed_ns(input_end, output_start);
  e.compute_output_ns = elapsed_ns(output_start, end);
  return e;
}

/// Tells the client where the request's time went (ensembles aggregate it per step).
inline void stamp_timing(response& r, const request& req, time_point start,
                         const model_statistics::execution& e) noexcept {
  r.timing = {elapsed_ns(req.arrival, start), e.compute_input_ns, e.compute_infer_ns,
              e.compute_output_ns};
}

/// Counts one request's outcome into `e`.
inline void count_request(model_statistics::execution& e, const request& r, std::int64_t elements,
                          bool ok, time_point start, time_point end) noexcept {
  const std::uint64_t duration_ns = elapsed_ns(r.arrival, end);
  if (ok) {
    ++e.ok_requests;
    e.ok_elements += static_cast<std::uint64_t>(elements);
    e.queue_ns += elapsed_ns(r.arrival, start);
    e.request_ok_ns += duration_ns;
  } else {
    e.request_fail_ns += duration_ns;
  }
}

} // namespace servekit::detail
