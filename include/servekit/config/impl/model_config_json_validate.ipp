#pragma once
/// \file
/// Definitions for config/model_config_json.hpp: the checks that involve more than one field
/// (Triton's rules for ensembles, rate limiter resources, the response cache and warmup batch
/// sizes, and the batchers' validate()), run once every field is read. Compiled once into
/// servekit::server, or included by model_config_json.hpp with SERVEKIT_HEADER_ONLY.

#include <servekit/cache/cache_eligibility.hpp>
#include <servekit/config/detail/model_config_json.hpp>
#include <servekit/config/model_config_json.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/schedule/dynamic_batching_options.hpp>
#include <servekit/schedule/iteration_batching_parameters.hpp>
#include <servekit/schedule/sequence_batching_options.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <string_view>

namespace servekit::detail {

/// Triton's rules for ensembles that the config alone decides: `ensemble_scheduling` and
/// `platform: "ensemble"` go together, and an ensemble has no scheduler or instances of its own
/// (its steps run on the composing models').
SERVEKIT_DECL void check_ensemble(const model_options& options) {
  if (!options.ensemble_scheduling) {
    if (options.platform == ensemble_platform) {
      fail_bad_value("/ensemble_scheduling",
                     "an ensemble needs 'ensemble_scheduling' (platform is \"ensemble\")");
    }
    return;
  }
  if (!options.platform.empty() && options.platform != ensemble_platform) {
    fail_bad_value("/platform", "a model with 'ensemble_scheduling' is an ensemble; its platform "
                                "must be \"ensemble\" or left out, got " +
                                    quoted_json(json(options.platform)));
  }
  const auto refuse = [](std::string_view field, std::string_view why) {
    fail_bad_value(member_path("", field), "an ensemble (a model with 'ensemble_scheduling') "
                                           "must not set '" +
                                               std::string{field} + "'; " + std::string{why});
  };
  constexpr std::string_view scheduler_why =
      "its steps are scheduled by the composing models (dynamic_batching, sequence_batching and "
      "ensemble_scheduling are the oneof scheduling_choice)";
  if (options.dynamic_batching) {
    refuse("dynamic_batching", scheduler_why);
  }
  if (options.sequence_batching) {
    refuse("sequence_batching", scheduler_why);
  }
  if (!options.instance_group.empty()) {
    refuse("instance_group", "the composing models have the instances");
  }
  if (!options.model_warmup.empty()) {
    refuse("model_warmup", "the composing models are warmed up themselves");
  }
}

/// Triton's rule: a resource name is either global or per device across a model's groups.
SERVEKIT_DECL void check_rate_limiter_resources(const model_options& options) {
  std::map<std::string_view, bool, std::less<>> global_by_name;
  for (std::size_t g = 0; g < options.instance_group.size(); ++g) {
    const auto& limiter = options.instance_group[g].rate_limiter;
    if (!limiter) {
      continue;
    }
    for (std::size_t r = 0; r < limiter->resources.size(); ++r) {
      const auto& resource = limiter->resources[r];
      const auto [it, inserted] = global_by_name.emplace(resource.name, resource.global);
      if (!inserted && it->second != resource.global) {
        fail_bad_value(element_path(member_path(member_path(element_path("/instance_group", g),
                                                            "rate_limiter"),
                                                "resources"),
                                    r),
                       "Resource \"" + resource.name +
                           "\" is present as both global and device-specific resource in the "
                           "model configuration.");
      }
    }
  }
}

/// Triton's restrictions of the response cache, and the servekit timeout extension's.
SERVEKIT_DECL void check_transaction_policy_and_cache(const model_options& options) {
  const bool decoupled =
      options.model_transaction_policy && options.model_transaction_policy->decoupled;
  if (options.model_transaction_policy &&
      options.model_transaction_policy->final_response_timeout_microseconds != 0 && !decoupled) {
    fail_bad_value("/model_transaction_policy/final_response_timeout_microseconds",
                   "final_response_timeout_microseconds applies to decoupled models only; set "
                   "'decoupled': true or leave it out");
  }
  if (!options.response_cache || !options.response_cache->enable) {
    return;
  }
  check_response_cache_allowed(options.name, decoupled, options.sequence_batching.has_value());
}

/// A warmup sample's batch must fit the model: 1 for a model that does not batch
/// (max_batch_size 0), at most max_batch_size otherwise. batch_size 0 is accepted and the
/// sample skipped, as Triton does. Without max_batch_size the model checks it when built.
SERVEKIT_DECL void check_warmup_batch_sizes(const model_options& options) {
  if (!options.max_batch_size) {
    return;
  }
  const auto largest = static_cast<std::uint32_t>(std::max(*options.max_batch_size, 1));
  for (std::size_t k = 0; k < options.model_warmup.size(); ++k) {
    const auto& sample = options.model_warmup[k];
    if (sample.batch_size > largest) {
      fail_bad_value(member_path(element_path("/model_warmup", k), "batch_size"),
                     "warmup sample '" + sample.name + "' has batch_size " +
                         std::to_string(sample.batch_size) + ", more than the model's " +
                         (*options.max_batch_size == 0
                              ? std::string{"1 (max_batch_size 0: the model does not batch)"}
                              : "max_batch_size " + std::to_string(*options.max_batch_size)));
    }
  }
}

SERVEKIT_DECL void check_model_options(const model_options& options) {
  check_ensemble(options);
  check_rate_limiter_resources(options);
  check_transaction_policy_and_cache(options);
  check_warmup_batch_sizes(options);
  if (options.dynamic_batching && options.sequence_batching) {
    fail_bad_value("/sequence_batching",
                   "'dynamic_batching' and 'sequence_batching' are both set; a model has one "
                   "scheduler (they are the oneof scheduling_choice)");
  }
  // Without max_batch_size the bound comes from the backend; the model checks it then.
  const auto max_batch_size =
      options.max_batch_size.value_or(std::numeric_limits<std::int32_t>::max());
  if (options.dynamic_batching) {
    validate(*options.dynamic_batching, max_batch_size);
  }
  if (options.sequence_batching) {
    validate(*options.sequence_batching, max_batch_size, options.input, options.output);
    if (options.sequence_batching->iterative_sequence) {
      // The iteration scheduler's knobs, read as it will read them: a bad one fails the load.
      (void)read_iteration_batching(options.parameters);
    }
  }
}

} // namespace servekit::detail
