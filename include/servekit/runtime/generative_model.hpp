#pragma once
/// \file
/// model<Backend, iteration_batcher<>, ...>: the composition root of a generative model. The
/// same class template as every other model (runtime/model.hpp), specialised for the iteration
/// batcher, whose backend executes step plans rather than batches of requests:
///
///     using llm = servekit::model<my_llm, servekit::iteration_batcher<>,
///                                 servekit::instance_group<1>>;
///     llm m{options};   // options.parameters: max_num_seqs, num_gpu_blocks, ... (see
///                       // schedule/iteration_batching_parameters.hpp)
///     m.submit(std::move(request), sink);   // one response per token when `stream` is true
///
/// The model validates requests against the backend's declared inputs, resolves the iteration
/// scheduler's knobs from the config's `parameters` and runs an iteration_shell.

#include <servekit/backend/request_validator.hpp>
#include <servekit/cache/cache_eligibility.hpp>
#include <servekit/core/clock.hpp>
#include <servekit/runtime/auto_complete.hpp>
#include <servekit/runtime/detail/infer.hpp>
#include <servekit/runtime/detail/policy_pack.hpp>
#include <servekit/runtime/generative_backend.hpp>
#include <servekit/runtime/instance_group.hpp>
#include <servekit/runtime/iteration_shell.hpp>
#include <servekit/runtime/model.hpp>
#include <servekit/runtime/model_environment.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/runtime/resolved_config.hpp>
#include <servekit/schedule/iteration_batcher.hpp>
#include <servekit/schedule/iteration_batching_parameters.hpp>

#include <algorithm>
#include <future>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace servekit {

namespace detail {
/// A scheduler policy that schedules per iteration (iteration_batcher).
template <class P>
concept iteration_policy = requires {
  requires P::iterates;
};
template <class... Policies>
concept has_iteration_policy = (iteration_policy<Policies> || ...);
} // namespace detail

/// A generative model: `Backend` (a generative_backend) instances, each with its own
/// iteration_scheduler_core and KV cache, behind the iteration batcher.
template <class Backend, class... Policies>
  requires detail::has_iteration_policy<Policies...>
class model<Backend, Policies...> {
  static_assert(check_generative_backend<Backend>());
  static_assert(detail::check_policies<Policies...>());
  static_assert(check_instance_group_policy<
                detail::find_role_t<instance_group_role, instance_group<1>, Policies...>>());

public:
  using backend_type = Backend;
  using traits = backend_traits<Backend>;
  using scheduler_policy = detail::find_role_t<scheduler_role, void, Policies...>;
  using instance_group_policy =
      detail::find_role_t<instance_group_role, instance_group<1>, Policies...>;
  using core_type = typename scheduler_policy::core_type;
  static constexpr bool sequence_batching = false;
  using shell_type = iteration_shell<Backend>;

  /// Builds every instance (each backend constructor allocates its KV cache), then the cores,
  /// and starts the instance threads. Throws config_error for a bad configuration (the
  /// iteration knobs at "/parameters/<key>") or a backend that throws.
  explicit model(model_options options = {}, test_hooks hooks = {},
                 model_environment environment = {})
      : options_{with_placed_instance_groups(auto_completed<Backend>(std::move(options)))},
        config_{resolve_config<Backend>(options_, scheduler_kind::iteration, hooks)},
        validator_{options_.name, config_.max_batch_size, config_.inputs, config_.outputs},
        placements_{expand_instance_groups(options_.instance_group)}, stats_{statistics_batch_sizes(
                                                                                 options_),
                                                                             instance_names()},
        environment_{std::move(environment)}, shell_{options_, config_,
                                                     checked_iteration_options(options_),
                                                     placements_, stats_} {}

  model(const model&) = delete;
  model& operator=(const model&) = delete;
  ~model() = default; // the shell drains first

  /// Accepts `r` for generation, or says why not (`invalid_argument` for bad input, naming it;
  /// `unavailable` while shutting down). Accepted requests get their responses through `sink`
  /// on an instance thread: one per token when `stream` is true, the last one final.
  [[nodiscard]] status submit(request&& r, response_sink sink) {
    if (!sink) {
      return invalid_argument("submit to model '" + options_.name + "' needs a response sink");
    }
    std::int64_t elements = 1;
    if (auto s = validator_.validate(r, elements); !s.ok()) {
      return s;
    }
    return shell_.submit(std::move(r), std::move(sink), elements);
  }

  /// The final response as a future (with `stream` true, the last token's).
  [[nodiscard]] std::future<response> infer(request&& r) {
    return detail::infer_with(*this, std::move(r));
  }

  /// The same, waiting on this thread for the final response: spins for `spin`, then sleeps
  /// (see sync_response_spin). A rejected request returns the failed response.
  [[nodiscard]] response infer_sync(request&& r, duration spin = sync_response_spin) {
    return detail::infer_sync_with(*this, std::move(r), spin);
  }

  /// Cancels the requests whose tokens come from `source`: answered `cancelled`, their KV
  /// blocks freed before their instance's next step.
  void cancel(cancellation_source& source) { shell_.cancel(source); }

  void shutdown(shutdown_mode mode) { shell_.shutdown(mode); }

  /// Triton's statistics (an execution per step that finished sequences; inference_count counts
  /// finished sequences) with `generation` set.
  [[nodiscard]] statistics_snapshot statistics() const {
    statistics_snapshot s = stats_.snapshot();
    s.generation = shell_.generation();
    return s;
  }
  [[nodiscard]] generation_snapshot generation() const { return shell_.generation(); }
  /// The scheduler's knobs as resolved (num_blocks from the backend when the config gave none).
  [[nodiscard]] const iteration_batching_options& iteration_options() const noexcept {
    return shell_.iteration_options();
  }

  [[nodiscard]] const model_options& options() const noexcept { return options_; }
  [[nodiscard]] const std::string& name() const noexcept { return options_.name; }
  [[nodiscard]] std::int64_t version() const noexcept { return options_.version; }

  /// Fills in what `config` leaves to the model's type: inputs, outputs, max_batch_size,
  /// `sequence_batching { iterative_sequence: true }` and the decoupled transaction policy.
  void complete_options(model_options& config) const {
    if (config.input.empty()) {
      config.input = config_.inputs;
    }
    if (config.output.empty()) {
      config.output = config_.outputs;
    }
    if (!config.max_batch_size) {
      config.max_batch_size = config_.max_batch_size;
    }
    if (!config.sequence_batching) {
      sequence_batching_options s;
      s.iterative_sequence = true;
      config.sequence_batching = s;
    }
    if (!config.model_transaction_policy) {
      config.model_transaction_policy = model_transaction_policy_options{.decoupled = true};
    }
  }

  [[nodiscard]] std::int32_t max_batch_size() const noexcept { return config_.max_batch_size; }
  [[nodiscard]] std::span<const tensor_config> inputs() const noexcept { return config_.inputs; }
  [[nodiscard]] std::span<const tensor_config> outputs() const noexcept { return config_.outputs; }
  [[nodiscard]] std::size_t instance_count() const noexcept { return shell_.instance_count(); }
  [[nodiscard]] const model_environment& environment() const noexcept { return environment_; }

private:
  [[nodiscard]] static model_options with_placed_instance_groups(model_options options) {
    options.instance_group = resolve_instance_groups(
        options.name, options.instance_group, instance_group_policy::default_count,
        traits::runs_on_gpus ? std::optional<int>{traits::device_count()} : std::nullopt);
    if (options.response_cache && options.response_cache->enable) {
      check_response_cache_allowed(options.name, true, false);
    }
    return options;
  }

  /// Per-size execution counters up to max_num_seqs (a step's finished sequences), at most 1024.
  [[nodiscard]] static std::size_t statistics_batch_sizes(const model_options& options) {
    return std::min<std::size_t>(read_iteration_batching(options.parameters).max_num_seqs, 1024);
  }

  /// The knobs from `parameters` (num_blocks may stay 0: the shell asks the backend).
  [[nodiscard]] static iteration_batching_options
  checked_iteration_options(const model_options& options) {
    return read_iteration_batching(options.parameters);
  }

  [[nodiscard]] std::vector<std::string> instance_names() const {
    std::vector<std::string> names;
    for (const auto& p : placements_) {
      names.push_back(p.name);
    }
    return names;
  }

  model_options options_;
  resolved_config config_;
  request_validator validator_;
  std::vector<instance_placement> placements_;
  model_statistics stats_;
  model_environment environment_;
  shell_type shell_; // last: destroyed, and so drained, first
};

} // namespace servekit
