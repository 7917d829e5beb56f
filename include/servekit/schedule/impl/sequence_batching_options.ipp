#pragma once
/// \file
/// Definitions for servekit/schedule/sequence_batching_options.hpp. Compiled once into
/// servekit::servekit, or included by its header with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/schedule/sequence_batching_options.hpp>

namespace servekit::detail {

[[nodiscard]] SERVEKIT_DECL config_error sequence_error(const std::string& path,
                                                        const std::string& message) {
  return config_error(config_error_code::bad_value, path, message);
}

[[nodiscard]] SERVEKIT_DECL const tensor_config* find_tensor(std::span<const tensor_config> tensors,
                                                             std::string_view name) {
  const auto it = std::find_if(tensors.begin(), tensors.end(),
                               [&](const tensor_config& t) { return t.name == name; });
  return it == tensors.end() ? nullptr : &*it;
}

[[nodiscard]] SERVEKIT_DECL std::vector<false_true_field>
false_true_fields(const sequence_control& c) {
  return {{"int32_false_true", c.int32_false_true.size()},
          {"fp32_false_true", c.fp32_false_true.size()},
          {"bool_false_true", c.bool_false_true.size()}};
}

SERVEKIT_DECL void validate_boolean_control(const sequence_control& c, const std::string& path) {
  const std::string kind{to_config_string(c.kind)};
  std::optional<false_true_field> chosen;
  for (const auto& field : false_true_fields(c)) {
    if (field.size == 0) {
      continue;
    }
    if (chosen) {
      throw sequence_error(path + '/' + std::string{field.name},
                           "sequence batching specifies more than one from 'int32_false_true', "
                           "'fp32_false_true' and 'bool_false_true' for " +
                               kind);
    }
    chosen = field;
  }
  if (!chosen) {
    throw sequence_error(path, "sequence batching must specify either 'int32_false_true', "
                               "'fp32_false_true' or 'bool_false_true' for " +
                                   kind);
  }
  if (chosen->size != 2) {
    throw sequence_error(path + '/' + std::string{chosen->name},
                         "sequence batching control '" + std::string{chosen->name} +
                             "' must have exactly 2 entries for " + kind + ", got " +
                             std::to_string(chosen->size));
  }
  if (c.data_type != data_type::invalid) {
    throw sequence_error(path + "/data_type",
                         "sequence batching control " + kind +
                             " must not specify 'data_type': its type follows from '" +
                             std::string{chosen->name} + "'");
  }
}

SERVEKIT_DECL void validate_corrid_control(const sequence_control& c, const std::string& path) {
  const std::string kind{to_config_string(c.kind)};
  for (const auto& field : false_true_fields(c)) {
    if (field.size != 0) {
      throw sequence_error(path + '/' + std::string{field.name},
                           "sequence batching must not specify either 'int32_false_true', "
                           "'fp32_false_true' or 'bool_false_true' for " +
                               kind);
    }
  }
  constexpr data_type allowed[] = {data_type::uint64, data_type::int64, data_type::uint32,
                                   data_type::int32, data_type::bytes};
  if (std::find(std::begin(allowed), std::end(allowed), c.data_type) == std::end(allowed)) {
    throw sequence_error(path + "/data_type",
                         "unexpected data type for control " + kind +
                             ". Allowed data types are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, "
                             "TYPE_INT32 and TYPE_STRING; got " +
                             std::string{to_config_string(c.data_type)});
  }
}

SERVEKIT_DECL void validate_control_inputs(const sequence_batching_options& o,
                                           std::span<const tensor_config> inputs,
                                           const std::string& base) {
  std::map<std::string_view, std::size_t> first_by_name;
  std::map<control_kind, std::size_t> first_by_kind;
  for (std::size_t i = 0; i < o.control_input.size(); ++i) {
    const auto& input = o.control_input[i];
    const std::string path = base + "/control_input/" + std::to_string(i);
    if (input.name.empty()) {
      throw sequence_error(path + "/name", "sequence batching control tensor must have a name");
    }
    if (const auto [it, added] = first_by_name.emplace(input.name, i); !added) {
      throw sequence_error(path + "/name", "sequence batching control tensor '" + input.name +
                                               "' is specified for multiple control kinds "
                                               "(first at " +
                                               base + "/control_input/" +
                                               std::to_string(it->second) + ")");
    }
    if (find_tensor(inputs, input.name) != nullptr) {
      throw sequence_error(path + "/name", "sequence batching control tensor '" + input.name +
                                               "' must not also be declared in 'input': the "
                                               "sequence batcher provides it");
    }
    if (input.control.size() != 1) {
      throw sequence_error(path + "/control", "sequence batching control tensor '" + input.name +
                                                  "' must have exactly one 'control' entry, got " +
                                                  std::to_string(input.control.size()));
    }
    const auto& control = input.control.front();
    const std::string control_path = path + "/control/0";
    if (!first_by_kind.emplace(control.kind, i).second) {
      throw sequence_error(control_path + "/kind", "sequence batching specifies multiple " +
                                                       std::string{to_config_string(control.kind)} +
                                                       " tensors");
    }
    if (control.kind == control_kind::sequence_corrid) {
      validate_corrid_control(control, control_path);
    } else {
      validate_boolean_control(control, control_path);
    }
  }
}

SERVEKIT_DECL void validate_strategy(const sequence_batching_options& o,
                                     std::int32_t max_batch_size, const std::string& base) {
  if (o.strategy == sequence_strategy::direct) {
    if (o.oldest != oldest_strategy_options{}) {
      throw sequence_error(base + "/oldest",
                           "'oldest' settings are set but the strategy is 'direct' ('direct' and "
                           "'oldest' are the oneof strategy_choice)");
    }
    const float utilization = o.direct.minimum_slot_utilization;
    if (!(utilization >= 0.0F && utilization <= 1.0F)) {
      throw sequence_error(base + "/direct/minimum_slot_utilization",
                           "sequence batching minimum slot utilization must be in range "
                           "[0.0, 1.0] (0 turns it off), got " +
                               std::to_string(utilization));
    }
    return;
  }
  if (o.direct != direct_strategy_options{}) {
    throw sequence_error(base + "/direct",
                         "'direct' settings are set but the strategy is 'oldest' ('direct' and "
                         "'oldest' are the oneof strategy_choice)");
  }
  const std::string path = base + "/oldest";
  if (o.oldest.max_candidate_sequences < 0) {
    throw sequence_error(path + "/max_candidate_sequences",
                         "sequence batching max candidate sequences must be non-negative "
                         "(0 means max_batch_size), got " +
                             std::to_string(o.oldest.max_candidate_sequences));
  }
  // Each candidate is a slot, with its state, on every instance: storage the value sizes.
  if (o.oldest.max_candidate_sequences > oldest_strategy_options::max_candidate_sequences_limit) {
    throw sequence_error(
        path + "/max_candidate_sequences",
        "sequence batching max candidate sequences must be at most " +
            std::to_string(oldest_strategy_options::max_candidate_sequences_limit) + ", got " +
            std::to_string(o.oldest.max_candidate_sequences));
  }
  for (std::size_t i = 0; i < o.oldest.preferred_batch_size.size(); ++i) {
    const auto size = o.oldest.preferred_batch_size[i];
    const std::string size_path = path + "/preferred_batch_size/" + std::to_string(i);
    if (size <= 0) {
      throw sequence_error(size_path, "sequence batching preferred batch size must be positive");
    }
    if (size > std::max(max_batch_size, std::int32_t{1})) {
      throw sequence_error(size_path,
                           "sequence batching preferred batch size must be <= max batch size (" +
                               std::to_string(max_batch_size) + ")");
    }
  }
}

SERVEKIT_DECL void validate_initial_state(const initial_state_options& init,
                                          const state_options& state, const std::string& path) {
  const std::string name = "'" + state.input_name + "'";
  if (init.data_type != state.data_type) {
    throw sequence_error(path + "/data_type",
                         "The data type used for 'initial_state' field of state " + name +
                             " does not match the state data type.");
  }
  if (init.name.empty()) {
    throw sequence_error(path + "/name",
                         "Field 'name' must be set when using initial_state for state input " +
                             name + ".");
  }
  if (init.dims.rank() != state.dims.rank()) {
    throw sequence_error(path + "/dims",
                         "Number of dimensions in 'initial_state' doesn't match the size of "
                         "'state' dimensions for state input " +
                             name + ". " + std::to_string(init.dims.rank()) +
                             " != " + std::to_string(state.dims.rank()));
  }
  for (std::size_t k = 0; k < init.dims.rank(); ++k) {
    const std::string dim_path = path + "/dims/" + std::to_string(k);
    if (init.dims[k] == shape::variable) {
      throw sequence_error(dim_path, "'initial_state' field for state input name " + name +
                                         " contains variable dimensions.");
    }
    if (init.dims[k] < 1) {
      throw sequence_error(dim_path, "'initial_state' dimension for state input name " + name +
                                         " must be integer >= 1, got " +
                                         std::to_string(init.dims[k]));
    }
    if (state.dims[k] != shape::variable && init.dims[k] != state.dims[k]) {
      throw sequence_error(dim_path, "'initial_state' dim for input name " + name +
                                         " doesn't match 'state' dim description. " +
                                         std::to_string(init.dims[k]) +
                                         " != " + std::to_string(state.dims[k]));
    }
  }
  if (init.zero_data && !init.data_file.empty()) {
    throw sequence_error(path + "/data_file",
                         "initial_state for state " + name +
                             " sets both 'zero_data' and 'data_file'; set exactly one (they are "
                             "the oneof state_data)");
  }
  if (!init.zero_data && init.data_file.empty()) {
    throw sequence_error(path, "initial_state setting expects state " + name +
                                   " to have state_data set: 'zero_data' (true) or 'data_file'");
  }
}

SERVEKIT_DECL void validate_state(const state_options& state,
                                  std::span<const tensor_config> outputs, const std::string& path) {
  const std::string name = "'" + state.input_name + "'";
  if (state.data_type == data_type::invalid) {
    throw sequence_error(path + "/data_type", "state " + name + " must specify 'data_type'");
  }
  if (state.data_type == data_type::bytes) {
    throw sequence_error(path + "/data_type",
                         "state " + name +
                             " has data type TYPE_STRING: BYTES/TYPE_STRING state is not "
                             "supported by servekit");
  }
  if (state.dims.empty()) {
    throw sequence_error(path + "/dims", "state " + name + " must specify 'dims'");
  }
  for (std::size_t k = 0; k < state.dims.rank(); ++k) {
    if (!is_config_dim(state.dims[k])) {
      throw sequence_error(path + "/dims/" + std::to_string(k),
                           "state " + name +
                               " dimension must be integer >= 1, or -1 to indicate a "
                               "variable-size dimension");
    }
  }
  if (state.use_growable_memory && !state.use_same_buffer_for_input_output) {
    throw sequence_error(path + "/use_growable_memory",
                         "In order to 'use_growable_memory', you must also enable "
                         "'use_same_buffer_for_input_output' for state input name " +
                             name + ".");
  }
  if (const auto* output = find_tensor(outputs, state.output_name);
      output != nullptr && output->type != state.data_type) {
    throw sequence_error(path + "/data_type", "state " + name + " has data type " +
                                                  std::string{to_config_string(state.data_type)} +
                                                  " but its output '" + state.output_name +
                                                  "' is declared in 'output' with data type " +
                                                  std::string{to_config_string(output->type)});
  }
  if (state.initial_state.size() > 1) {
    throw sequence_error(path + "/initial_state",
                         "initial_state field for state input " + name +
                             " must contain exactly one or zero element. Found '" +
                             std::to_string(state.initial_state.size()) + "' elements.");
  }
  if (!state.initial_state.empty()) {
    validate_initial_state(state.initial_state.front(), state, path + "/initial_state/0");
  }
}

} // namespace servekit::detail

namespace servekit {

SERVEKIT_DECL void validate(const sequence_batching_options& o, std::int32_t max_batch_size,
                            std::span<const tensor_config> inputs,
                            std::span<const tensor_config> outputs) {
  const std::string base = "/sequence_batching";
  detail::validate_control_inputs(o, inputs, base);
  detail::validate_strategy(o, max_batch_size, base);
  detail::validate_states(o, inputs, outputs, base);
}

} // namespace servekit
