#pragma once
/// \file
/// runtime_ensemble: an ensemble built at run time from Triton's `ensemble_scheduling`
/// configuration over models registered by name. It runs on the same executor as the
/// compile-time `ensemble<...>` and applies the same checks, at load instead of at build.
///
///     servekit::model_registry registry;
///     registry.add(preprocess);  registry.add(classify);  registry.add(segment);
///     servekit::runtime_ensemble
///     pipeline{servekit::load_model_config(json_text),
///                                         registry};

#include <servekit/core/config_error.hpp>
#include <servekit/ensemble/detail/ensemble_plan.hpp>
#include <servekit/ensemble/ensemble_executor.hpp>
#include <servekit/metrics/ensemble_statistics.hpp>
#include <servekit/runtime/detail/infer.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/runtime/model_ref.hpp>
#include <servekit/runtime/model_registry.hpp>
#include <servekit/runtime/shutdown_mode.hpp>

#include <cstddef>
#include <cstdint>
#include <future>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace servekit {

/// A configured ensemble. Servable, so it can be registered and be a step of another ensemble.
/// The composing models must outlive it.
class runtime_ensemble {
  struct targets {
    std::vector<model_ref> steps;

    status submit(std::size_t s, request&& r, response_sink&& sink) {
      return steps[s].submit(std::move(r), std::move(sink));
    }
    void cancel(cancellation_source& source) {
      for (std::size_t i = 0; i < steps.size(); ++i) {
        bool seen = false;
        for (std::size_t j = 0; j < i; ++j) {
          seen = seen || steps[j].address() == steps[i].address();
        }
        if (!seen) {
          steps[i].cancel(source);
        }
      }
    }
  };

public:
  /// What is known at compile time: nothing (the configuration decides).
  struct traits {
    static constexpr std::int32_t max_batch_size = 0;
    static constexpr bool batching = true;
    static constexpr bool decoupled = false;
    static constexpr std::span<const tensor_spec> inputs{};
    static constexpr std::span<const tensor_spec> outputs{};
  };

  /// Builds the ensemble `config` describes (its `ensemble_scheduling`, `input`, `output`,
  /// `max_batch_size`) from the models in `registry`. Throws config_error naming the step and
  /// tensor at fault, as Triton does at load.
  runtime_ensemble(const model_options& config, const model_registry& registry)
      : options_{config}, executor_{plan(config, registry), resolve(config, registry),
                                    config.ensemble_scheduling
                                        ? config.ensemble_scheduling->max_inflight_requests
                                        : 0U} {}

  runtime_ensemble(const runtime_ensemble&) = delete;
  runtime_ensemble& operator=(const runtime_ensemble&) = delete;
  ~runtime_ensemble() = default;

  [[nodiscard]] status submit(request&& r, response_sink sink) {
    return executor_.submit(std::move(r), std::move(sink));
  }
  [[nodiscard]] std::future<response> infer(request&& r) {
    return detail::infer_with(
        [this](request&& q, response_sink sink) { return submit(std::move(q), std::move(sink)); },
        std::move(r));
  }
  void cancel(cancellation_source& source) { executor_.cancel(source); }
  void shutdown(shutdown_mode mode) { executor_.shutdown(mode); }

  [[nodiscard]] ensemble_statistics statistics() const { return executor_.statistics(); }
  [[nodiscard]] const std::string& name() const noexcept { return options_.name; }
  [[nodiscard]] std::int64_t version() const noexcept { return options_.version; }
  [[nodiscard]] std::int32_t max_batch_size() const noexcept {
    return executor_.plan().max_batch_size;
  }
  [[nodiscard]] std::span<const tensor_config> inputs() const noexcept {
    return executor_.plan().input_configs;
  }
  [[nodiscard]] std::span<const tensor_config> outputs() const noexcept {
    return executor_.plan().output_configs;
  }
  [[nodiscard]] const model_options& options() const noexcept { return options_; }

private:
  static const ensemble_scheduling_options& scheduling(const model_options& config) {
    if (!config.ensemble_scheduling) {
      throw config_error(config_error_code::bad_value, "/ensemble_scheduling",
                         "model '" + config.name +
                             "' is not an ensemble: it has no "
                             "ensemble_scheduling");
    }
    return *config.ensemble_scheduling;
  }

  static targets resolve(const model_options& config, const model_registry& registry) {
    targets out;
    const auto& steps = scheduling(config).step;
    for (std::size_t s = 0; s < steps.size(); ++s) {
      const auto found = registry.find(steps[s].model_name, steps[s].model_version);
      if (!found) {
        const std::string version = steps[s].model_version == -1
                                        ? std::string{}
                                        : " version " + std::to_string(steps[s].model_version);
        throw config_error(config_error_code::bad_value,
                           "/ensemble_scheduling/step/" + std::to_string(s) + "/model_name",
                           "ensemble '" + config.name + "' step " + std::to_string(s) +
                               " uses model '" + steps[s].model_name + "'" + version +
                               ", which is not loaded");
      }
      out.steps.push_back(*found);
    }
    return out;
  }

  static detail::ensemble_plan plan(const model_options& config, const model_registry& registry) {
    const auto t = resolve(config, registry);
    const auto& steps = scheduling(config).step;
    detail::ensemble_layout layout;
    layout.name = config.name;
    for (const auto& c : config.input) {
      layout.inputs.push_back(c.name);
    }
    for (const auto& c : config.output) {
      layout.outputs.push_back(c.name);
    }
    layout.declared_inputs = config.input;
    layout.declared_outputs = config.output;
    layout.max_batch_size = config.max_batch_size.value_or(0);
    std::vector<detail::composing_model_info> models;
    for (std::size_t s = 0; s < steps.size(); ++s) {
      auto& l = layout.steps.emplace_back();
      l.input_map.assign(steps[s].input_map.begin(), steps[s].input_map.end());
      l.output_map.assign(steps[s].output_map.begin(), steps[s].output_map.end());
      models.push_back(detail::composing_info(t.steps[s], t.steps[s].decoupled()));
    }
    return detail::build_plan(layout, std::move(models));
  }

  model_options options_;
  ensemble_executor<targets> executor_;
};

} // namespace servekit
