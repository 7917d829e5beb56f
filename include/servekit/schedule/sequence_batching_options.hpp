#pragma once
/// \file
/// Triton's `sequence_batching` settings (control inputs, implicit state, the direct and oldest
/// strategies), and the checks Triton applies to them at load. The implicit state's settings
/// (`state_options`) are state/'s, which builds its stores from them.

#include <servekit/backend/tensor_spec.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/state/state_options.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace servekit {

/// What a control input tells the model (Triton's ModelSequenceBatching.Control.Kind).
enum class control_kind : std::uint8_t {
  sequence_start, ///< CONTROL_SEQUENCE_START: the slot's request starts a sequence
  sequence_ready, ///< CONTROL_SEQUENCE_READY: the slot holds a request (false: padding)
  sequence_end,   ///< CONTROL_SEQUENCE_END: the slot's request ends its sequence
  sequence_corrid ///< CONTROL_SEQUENCE_CORRID: the slot's correlation id
};

/// Triton's name of a control kind ("CONTROL_SEQUENCE_START"), as configs and messages spell it.
[[nodiscard]] constexpr std::string_view to_config_string(control_kind kind) noexcept {
  switch (kind) {
  case control_kind::sequence_start:
    return "CONTROL_SEQUENCE_START";
  case control_kind::sequence_ready:
    return "CONTROL_SEQUENCE_READY";
  case control_kind::sequence_end:
    return "CONTROL_SEQUENCE_END";
  case control_kind::sequence_corrid:
    return "CONTROL_SEQUENCE_CORRID";
  }
  return "CONTROL_INVALID";
}

/// One control of a control input. Boolean kinds set exactly one of the three [false, true]
/// pairs; CORRID sets `data_type` (TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 or
/// TYPE_STRING).
struct sequence_control {
  control_kind kind = control_kind::sequence_start;
  std::vector<std::int32_t> int32_false_true;
  std::vector<float> fp32_false_true;
  std::vector<bool> bool_false_true;
  servekit::data_type data_type = data_type::invalid; ///< CORRID only

  friend bool operator==(const sequence_control&, const sequence_control&) = default;
};

/// A model input the sequence batcher fills (Triton's ModelSequenceBatching.ControlInput).
struct control_input {
  std::string name;
  std::vector<sequence_control> control; ///< exactly one entry
  friend bool operator==(const control_input&, const control_input&) = default;
};

/// Which requests share a batch.
enum class sequence_strategy : std::uint8_t {
  direct, ///< each sequence owns a batch slot of an instance
  oldest  ///< a per-instance dynamic batcher over candidate sequences
};

/// `sequence_batching.direct`.
struct direct_strategy_options {
  /// How long a batch waits for more ready slots; honoured only with a non-zero
  /// minimum_slot_utilization.
  std::uint64_t max_queue_delay_microseconds = 0;
  /// Fraction of slots that must hold a ready request before a batch runs without waiting;
  /// in [0, 1].
  float minimum_slot_utilization = 0.0F;
  friend bool operator==(const direct_strategy_options&, const direct_strategy_options&) = default;
};

/// `sequence_batching.oldest`.
struct oldest_strategy_options {
  /// Candidate sequences per instance; 0 means max_batch_size.
  std::int32_t max_candidate_sequences = 0;
  /// As the dynamic batcher's; empty means [max_batch_size].
  std::vector<std::int32_t> preferred_batch_size;
  std::uint64_t max_queue_delay_microseconds = 0;
  bool preserve_ordering = false;
  friend bool operator==(const oldest_strategy_options&, const oldest_strategy_options&) = default;
};

/// The `sequence_batching` message of a Triton model config, field for field.
struct sequence_batching_options {
  sequence_strategy strategy = sequence_strategy::direct;
  /// A sequence that receives no request for this long loses its slot; 0 means 1 s.
  std::uint64_t max_sequence_idle_microseconds = 1'000'000;
  /// Model inputs the batcher fills with controls (qualified type: the member shares its name,
  /// which GCC refuses when spelled unqualified).
  std::vector<servekit::control_input> control_input;
  /// Implicit state tensors the batcher keeps per sequence.
  std::vector<state_options> state;
  direct_strategy_options direct; ///< used when strategy is direct
  oldest_strategy_options oldest; ///< used when strategy is oldest

  /// The data type of the CORRID control, or invalid when there is none.
  [[nodiscard]] servekit::data_type corrid_data_type() const noexcept {
    for (const auto& input : control_input) {
      for (const auto& c : input.control) {
        if (c.kind == control_kind::sequence_corrid) {
          return c.data_type;
        }
      }
    }
    return data_type::invalid;
  }

  /// The idle limit with Triton's "0 means the default" applied.
  [[nodiscard]] std::uint64_t idle_microseconds() const noexcept {
    return max_sequence_idle_microseconds == 0 ? 1'000'000 : max_sequence_idle_microseconds;
  }

  friend bool operator==(const sequence_batching_options&,
                         const sequence_batching_options&) = default;
};

namespace detail {

/// The error every sequence batching rule throws: a bad value at `path`.
[[nodiscard]] inline config_error sequence_error(const std::string& path,
                                                 const std::string& message) {
  return config_error(config_error_code::bad_value, path, message);
}

[[nodiscard]] inline const tensor_config* find_tensor(std::span<const tensor_config> tensors,
                                                      std::string_view name) {
  const auto it = std::find_if(tensors.begin(), tensors.end(),
                               [&](const tensor_config& t) { return t.name == name; });
  return it == tensors.end() ? nullptr : &*it;
}

/// A dimension as Triton allows it in a config: >= 1, or -1 for a variable size.
[[nodiscard]] constexpr bool is_config_dim(std::int64_t dim) noexcept {
  return dim >= 1 || dim == shape::variable;
}

/// One of a control's three [false, true] fields, by name and entry count.
struct false_true_field {
  std::string_view name;
  std::size_t size = 0;
};

[[nodiscard]] inline std::vector<false_true_field> false_true_fields(const sequence_control& c) {
  return {{"int32_false_true", c.int32_false_true.size()},
          {"fp32_false_true", c.fp32_false_true.size()},
          {"bool_false_true", c.bool_false_true.size()}};
}

/// START, READY and END: the batcher writes the [false, true] pair's values, so exactly one
/// pair, of two entries, says both the values and the tensor's type (Triton's
/// GetBooleanSequenceControlProperties).
inline void validate_boolean_control(const sequence_control& c, const std::string& path) {
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

/// CORRID: the batcher writes the correlation id itself, in the integer or string type the
/// model asks for (Triton's GetTypedSequenceControlProperties and ValidateModelConfig).
inline void validate_corrid_control(const sequence_control& c, const std::string& path) {
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

/// Each control input names one model input that the batcher fills with one control, and
/// each kind is filled at most once; the batcher provides the tensor, so the config must not
/// declare it as an ordinary input too.
inline void validate_control_inputs(const sequence_batching_options& o,
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

/// Only the chosen strategy may carry settings (Triton's strategy_choice is a oneof), and they
/// must make sense for the model's max_batch_size.
inline void validate_strategy(const sequence_batching_options& o, std::int32_t max_batch_size,
                              const std::string& base) {
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

/// The initial value must be a tensor the state admits, so that its bytes can be read once at
/// load and copied into every new sequence (Triton's GenerateInitialStateData).
inline void validate_initial_state(const initial_state_options& init, const state_options& state,
                                   const std::string& path) {
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

/// One state on its own: a named pair of tensors of a fixed, non-BYTES type the store can
/// allocate, and its initial value.
inline void validate_state(const state_options& state, std::span<const tensor_config> outputs,
                           const std::string& path) {
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

/// Every state's names are set and its own: input names differ from each other, from the
/// declared inputs and from the control inputs (the batcher provides all of them), and
/// output names differ from each other.
inline void validate_states(const sequence_batching_options& o,
                            std::span<const tensor_config> inputs,
                            std::span<const tensor_config> outputs, const std::string& base) {
  std::map<std::string_view, std::size_t> first_by_input;
  std::map<std::string_view, std::size_t> first_by_output;
  for (std::size_t i = 0; i < o.state.size(); ++i) {
    const auto& state = o.state[i];
    const std::string path = base + "/state/" + std::to_string(i);
    if (state.input_name.empty()) {
      throw sequence_error(path + "/input_name", "state must specify 'input_name'");
    }
    if (state.output_name.empty()) {
      throw sequence_error(path + "/output_name",
                           "state '" + state.input_name + "' must specify 'output_name'");
    }
    if (const auto [it, added] = first_by_input.emplace(state.input_name, i); !added) {
      throw sequence_error(path + "/input_name", "duplicate state input_name '" + state.input_name +
                                                     "' (first declared at " + base + "/state/" +
                                                     std::to_string(it->second) + ")");
    }
    if (const auto [it, added] = first_by_output.emplace(state.output_name, i); !added) {
      throw sequence_error(path + "/output_name", "duplicate state output_name '" +
                                                      state.output_name + "' (first declared at " +
                                                      base + "/state/" +
                                                      std::to_string(it->second) + ")");
    }
    if (find_tensor(inputs, state.input_name) != nullptr) {
      throw sequence_error(path + "/input_name", "state input '" + state.input_name +
                                                     "' must not also be declared in 'input': "
                                                     "the sequence batcher provides it");
    }
    const auto control =
        std::find_if(o.control_input.begin(), o.control_input.end(),
                     [&](const control_input& c) { return c.name == state.input_name; });
    if (control != o.control_input.end()) {
      throw sequence_error(path + "/input_name",
                           "state input '" + state.input_name +
                               "' has the same name as control input " + base + "/control_input/" +
                               std::to_string(control - o.control_input.begin()));
    }
    validate_state(state, outputs, path);
  }
}

} // namespace detail

/// Throws config_error (with the JSON pointer of the field) when `o` breaks one of Triton's
/// rules for a model whose max_batch_size is `max_batch_size` and whose declared (ordinary)
/// inputs and outputs are `inputs` and `outputs`. Control and state inputs are provided by the
/// sequence batcher, so they must not be among `inputs`; a state output may be among `outputs`
/// (clients may then request it) if the data types agree.
inline void validate(const sequence_batching_options& o, std::int32_t max_batch_size,
                     std::span<const tensor_config> inputs,
                     std::span<const tensor_config> outputs) {
  const std::string base = "/sequence_batching";
  detail::validate_control_inputs(o, inputs, base);
  detail::validate_strategy(o, max_batch_size, base);
  detail::validate_states(o, inputs, outputs, base);
}

} // namespace servekit
