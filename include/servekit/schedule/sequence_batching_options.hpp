#pragma once
/// \file
/// Triton's `sequence_batching` settings (control inputs, implicit state, the direct and oldest
/// strategies), and the checks Triton applies to them at load. The implicit state's settings
/// (`state_options`) are state/'s, which builds its stores from them.

#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/detail/linkage.hpp>
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

  /// The data type of the tensor the control fills: CORRID's `data_type`, else that of the
  /// [false, true] pair it sets (FP32, INT32 or BOOL).
  [[nodiscard]] servekit::data_type tensor_data_type() const noexcept {
    if (kind == control_kind::sequence_corrid) {
      return data_type;
    }
    if (!fp32_false_true.empty()) {
      return servekit::data_type::fp32;
    }
    if (!int32_false_true.empty()) {
      return servekit::data_type::int32;
    }
    return servekit::data_type::boolean;
  }

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
  /// The most max_candidate_sequences accepted: every candidate is a slot (with its state) on
  /// every instance, allocated when the model loads.
  static constexpr std::int32_t max_candidate_sequences_limit = 65536;
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
  /// Triton's `iterative_sequence`: a generative model scheduled per forward pass. servekit's
  /// iteration scheduler (docs/iteration-batching.md) reads its knobs from the model's
  /// `parameters` (schedule/iteration_batching_parameters.hpp).
  bool iterative_sequence = false;

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
[[nodiscard]] SERVEKIT_DECL config_error sequence_error(const std::string& path,
                                                        const std::string& message);

[[nodiscard]] SERVEKIT_DECL const tensor_config* find_tensor(std::span<const tensor_config> tensors,
                                                             std::string_view name);

/// A dimension as Triton allows it in a config: >= 1, or -1 for a variable size.
[[nodiscard]] constexpr bool is_config_dim(std::int64_t dim) noexcept {
  return dim >= 1 || dim == shape::variable;
}

/// One of a control's three [false, true] fields, by name and entry count.
struct false_true_field {
  std::string_view name;
  std::size_t size = 0;
};

[[nodiscard]] SERVEKIT_DECL std::vector<false_true_field>
false_true_fields(const sequence_control& c);

/// START, READY and END: the batcher writes the [false, true] pair's values, so exactly one
/// pair, of two entries, says both the values and the tensor's type (Triton's
/// GetBooleanSequenceControlProperties).
SERVEKIT_DECL void validate_boolean_control(const sequence_control& c, const std::string& path);

/// CORRID: the batcher writes the correlation id itself, in the integer or string type the
/// model asks for (Triton's GetTypedSequenceControlProperties and ValidateModelConfig).
SERVEKIT_DECL void validate_corrid_control(const sequence_control& c, const std::string& path);

/// Each control input names one model input that the batcher fills with one control, and
/// each kind is filled at most once; the batcher provides the tensor, so the config must not
/// declare it as an ordinary input too.
SERVEKIT_DECL void validate_control_inputs(const sequence_batching_options& o,
                                           std::span<const tensor_config> inputs,
                                           const std::string& base);

/// Only the chosen strategy may carry settings (Triton's strategy_choice is a oneof), and they
/// must make sense for the model's max_batch_size.
SERVEKIT_DECL void validate_strategy(const sequence_batching_options& o,
                                     std::int32_t max_batch_size, const std::string& base);

/// The initial value must be a tensor the state admits, so that its bytes can be read once at
/// load and copied into every new sequence (Triton's GenerateInitialStateData).
SERVEKIT_DECL void validate_initial_state(const initial_state_options& init,
                                          const state_options& state, const std::string& path);

/// One state on its own: a named pair of tensors of a fixed, non-BYTES type the store can
/// allocate, and its initial value.
SERVEKIT_DECL void validate_state(const state_options& state,
                                  std::span<const tensor_config> outputs, const std::string& path);

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
SERVEKIT_DECL void validate(const sequence_batching_options& o, std::int32_t max_batch_size,
                            std::span<const tensor_config> inputs,
                            std::span<const tensor_config> outputs);

} // namespace servekit

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/schedule/impl/sequence_batching_options.ipp>
#endif
