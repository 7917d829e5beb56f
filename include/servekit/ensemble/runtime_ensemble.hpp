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

#include <servekit/cache/response_cache.hpp>
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

namespace detail {
/// Sends step `s` to the model registered for it (one indirect call).
struct registry_targets {
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
} // namespace detail

/// A configured ensemble. Servable, so it can be registered and be a step of another ensemble.
/// The composing models must outlive it. Members as `ensemble<...>` (from ensemble_executor),
/// plus `options()`.
class runtime_ensemble : public ensemble_executor<detail::registry_targets> {
public:
  /// What is known at compile time: nothing (the configuration decides). Whether it is
  /// decoupled (a step is) is known once built: `decoupled()`.
  struct traits {
    static constexpr std::int32_t max_batch_size = 0;
    static constexpr bool batching = true;
    static constexpr bool decoupled = false;
    static constexpr std::span<const tensor_declaration> inputs{};
    static constexpr std::span<const tensor_declaration> outputs{};
  };

  /// Builds the ensemble `config` describes (its `ensemble_scheduling`, `input`, `output`,
  /// `max_batch_size`) from the models in `registry`. Throws config_error naming the step and
  /// tensor at fault, as Triton does at load. With `response_cache { enable: true }` and a
  /// `cache`, repeated byte-identical requests are answered from it without running a step
  /// (Triton's top-level ensemble cache); a decoupled ensemble with the cache enabled is refused.
  runtime_ensemble(const model_options& config, const model_registry& registry,
                   response_cache* cache = nullptr)
      : runtime_ensemble{config, resolve(config, registry)} {
    if (config.response_cache && config.response_cache->enable) {
      use_response_cache(cache); // refuses a decoupled ensemble, with or without a cache
    }
  }

  [[nodiscard]] const model_options& options() const noexcept { return options_; }

private:
  runtime_ensemble(const model_options& config, const detail::registry_targets& targets)
      : ensemble_executor{plan(config, targets), targets, config.version,
                          scheduling(config).max_inflight_requests},
        options_{config} {}

  static const ensemble_scheduling_options& scheduling(const model_options& config) {
    if (!config.ensemble_scheduling) {
      throw config_error(config_error_code::bad_value, "/ensemble_scheduling",
                         "model '" + config.name +
                             "' is not an ensemble: it has no "
                             "ensemble_scheduling");
    }
    return *config.ensemble_scheduling;
  }

  static detail::registry_targets resolve(const model_options& config,
                                          const model_registry& registry) {
    detail::registry_targets out;
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

  static detail::ensemble_plan plan(const model_options& config,
                                    const detail::registry_targets& targets) {
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
      const model_ref m = targets.steps[s];
      models.push_back(detail::composing_info(m, m.decoupled()));
    }
    return detail::build_plan(layout, std::move(models));
  }

  model_options options_;
};

} // namespace servekit
