#pragma once
/// \file
/// Definitions for servekit/runtime/config_bounds.hpp. Compiled once into servekit::servekit, or
/// included by its header with SERVEKIT_HEADER_ONLY.

#include <servekit/core/config_error.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/runtime/config_bounds.hpp>
#include <servekit/runtime/detail/warmup.hpp>

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace servekit::detail {

SERVEKIT_DECL std::optional<std::uint64_t> checked_byte_size(std::span<const std::int64_t> dims,
                                                             std::uint64_t element_bytes,
                                                             std::uint64_t rows) noexcept {
  constexpr auto max = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t total = element_bytes;
  const auto times = [&](std::uint64_t factor) {
    if (factor != 0 && total > max / factor) {
      return false;
    }
    total *= factor;
    return true;
  };
  if (!times(rows)) {
    return std::nullopt;
  }
  for (const auto d : dims) {
    if (d > 0 && !times(static_cast<std::uint64_t>(d))) {
      return std::nullopt;
    }
  }
  return total;
}

namespace bounds {

/// "[2, 3]".
SERVEKIT_DECL std::string dims_text(std::span<const std::int64_t> dims) {
  std::string out = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    out += (i == 0 ? "" : ", ") + std::to_string(dims[i]);
  }
  return out + "]";
}

/// The bytes one element of `type` takes where the config sizes it (BYTES: its 4-byte length).
SERVEKIT_DECL std::uint64_t element_bytes(data_type type) {
  const auto size = byte_size(type);
  return type == data_type::bytes ? 4 : size == 0 ? 1 : size;
}

SERVEKIT_DECL void check_tensor_bytes(std::span<const std::int64_t> dims, data_type type,
                                      std::uint64_t rows, const std::string& path,
                                      std::string_view what) {
  const auto bytes = checked_byte_size(dims, element_bytes(type), rows);
  if (!bytes || *bytes > max_config_tensor_bytes) {
    throw config_error(config_error_code::bad_value, path,
                       std::string{what} + " may take at most " +
                           std::to_string(max_config_tensor_bytes) + " bytes (4 GiB), dims " +
                           dims_text(dims) +
                           (rows != 1 ? " x " + std::to_string(rows) + " rows" : "") + " make it " +
                           (bytes ? std::to_string(*bytes) : std::string{"more than 2^64"}));
  }
}

SERVEKIT_DECL void check_warmup(const model_options& options, std::int32_t max_batch_size) {
  for (std::size_t k = 0; k < options.model_warmup.size(); ++k) {
    const auto& sample = options.model_warmup[k];
    const std::string path = warmup_path(k);
    if (sample.count > max_warmup_count) {
      throw config_error(config_error_code::bad_value, path + "/count",
                         warmup_sample_label(sample, k) + " may run at most " +
                             std::to_string(max_warmup_count) + " times, got count " +
                             std::to_string(sample.count));
    }
    // A batch_size past max_batch_size is refused when the sample is built, with its own message.
    const std::uint64_t rows =
        max_batch_size > 0
            ? std::min<std::uint64_t>(sample.batch_size, static_cast<std::uint64_t>(max_batch_size))
            : 1;
    for (const auto& [name, input] : sample.inputs) {
      check_tensor_bytes(input.dims, input.type, rows,
                         path + "/inputs/" + warmup_pointer_token(name) + "/dims",
                         "warmup input '" + name + "'");
    }
  }
}

SERVEKIT_DECL void check_states(const model_options& options) {
  if (!options.sequence_batching) {
    return;
  }
  const auto& states = options.sequence_batching->state;
  for (std::size_t i = 0; i < states.size(); ++i) {
    const auto& state = states[i];
    const std::string path = "/sequence_batching/state/" + std::to_string(i);
    check_tensor_bytes(state.dims.dims(), state.data_type, 1, path + "/dims",
                       "state '" + state.input_name + "'");
    for (std::size_t j = 0; j < state.initial_state.size(); ++j) {
      const auto& init = state.initial_state[j];
      check_tensor_bytes(init.dims.dims(), init.data_type, 1,
                         path + "/initial_state/" + std::to_string(j) + "/dims",
                         "initial state '" + init.name + "'");
    }
  }
}

/// A resource named twice in one group adds up (options built in C++; the JSON reader refuses
/// it): the sum must still be a count.
SERVEKIT_DECL void check_rate_limits(const model_options& options) {
  for (std::size_t g = 0; g < options.instance_group.size(); ++g) {
    const auto& limiter = options.instance_group[g].rate_limiter;
    if (!limiter) {
      continue;
    }
    std::map<std::pair<std::string_view, bool>, std::uint64_t> sums;
    for (std::size_t k = 0; k < limiter->resources.size(); ++k) {
      const auto& r = limiter->resources[k];
      auto& sum = sums[{r.name, r.global}];
      sum += r.count;
      if (sum > std::numeric_limits<std::uint32_t>::max()) {
        throw config_error(config_error_code::bad_value,
                           "/instance_group/" + std::to_string(g) + "/rate_limiter/resources/" +
                               std::to_string(k) + "/count",
                           "rate limiter resource '" + r.name + "' adds up to " +
                               std::to_string(sum) + " in this group, more than " +
                               std::to_string(std::numeric_limits<std::uint32_t>::max()));
      }
    }
  }
}

} // namespace bounds

SERVEKIT_DECL void check_config_bounds(const model_options& options, std::int32_t max_batch_size) {
  if (max_batch_size > max_batch_size_limit) {
    throw config_error(config_error_code::bad_value, "/max_batch_size",
                       "'max_batch_size' must be at most " + std::to_string(max_batch_size_limit) +
                           " (statistics and sequence slots are kept per batch entry), got " +
                           std::to_string(max_batch_size));
  }
  bounds::check_warmup(options, max_batch_size);
  bounds::check_states(options);
  bounds::check_rate_limits(options);
}

SERVEKIT_DECL void check_sequence_slots(std::size_t instances, std::size_t slots_per_instance) {
  const auto slots = checked_byte_size({}, instances, slots_per_instance);
  if (!slots || *slots > max_sequence_slots_per_model) {
    throw config_error(
        config_error_code::bad_value, "/sequence_batching",
        "a sequence model may have at most " + std::to_string(max_sequence_slots_per_model) +
            " sequence slots in all (instances x slots per instance), " +
            std::to_string(instances) + " instances of " + std::to_string(slots_per_instance) +
            " slots make " + (slots ? std::to_string(*slots) : std::string{"more than 2^64"}));
  }
}

} // namespace servekit::detail
