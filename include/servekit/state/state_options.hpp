#pragma once
/// \file
/// Triton's implicit state settings (ModelSequenceBatching.State and its InitialState): plain
/// data that a state store is built from. `sequence_batching_options` (schedule/) holds them as
/// its `state` field and validates them against the model's tensors.

#include <servekit/core/data_type.hpp>
#include <servekit/core/shape.hpp>

#include <string>
#include <vector>

namespace servekit {

/// How a sequence's state starts (Triton's ModelSequenceBatching.InitialState): zeros, or the
/// row-major contents of `<model directory>/initial_state/<data_file>`.
struct initial_state_options {
  servekit::data_type data_type = data_type::invalid;
  shape dims; ///< fully specified
  std::string name;
  bool zero_data = false; ///< the `zero_data` member of the oneof
  std::string data_file;  ///< the `data_file` member of the oneof (set exactly one of the two)
  friend bool operator==(const initial_state_options&, const initial_state_options&) = default;
};

/// One implicit state tensor (Triton's ModelSequenceBatching.State): the backend reads it as
/// input `input_name` and writes the next value as output `output_name`.
struct state_options {
  std::string input_name;
  std::string output_name;
  servekit::data_type data_type = data_type::invalid;
  shape dims;                                       ///< without the batch dimension; -1 is variable
  std::vector<initial_state_options> initial_state; ///< zero or one entry
  /// One buffer serves as input and output state: what the backend leaves in the input state
  /// is the next state, even if it produces no output state.
  bool use_same_buffer_for_input_output = false;
  /// The state grows by appending, old contents kept (needs a store that supports it).
  bool use_growable_memory = false;
  friend bool operator==(const state_options&, const state_options&) = default;
};

} // namespace servekit
