// validate(sequence_batching_options): each of Triton's sequence batching rules (and servekit's
// few stricter ones), checked on a valid config changed in one place, with the JSON pointer of
// the offending field and words of the message.

#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/schedule/sequence_batching_options.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sequence_batching_options_test {

using servekit::config_error;
using servekit::config_error_code;
using servekit::control_kind;
using servekit::data_type;
using servekit::sequence_batching_options;
using servekit::sequence_strategy;
using servekit::tensor_config;

/// The model's declared (ordinary) tensors in these tests.
const std::vector<tensor_config> declared_inputs = {
    {"INPUT", data_type::fp32, {16}, false, false, false}};
const std::vector<tensor_config> declared_outputs = {
    {"OUTPUT", data_type::fp32, {16}, false, false, false},
    {"OUTPUT_STATE", data_type::int32, {-1}, false, false, false}};

constexpr std::int32_t max_batch_size = 4;

servekit::sequence_control boolean_control(control_kind kind) {
  servekit::sequence_control c;
  c.kind = kind;
  c.fp32_false_true = {0.0F, 1.0F};
  return c;
}

/// Every control kind, a state with an initial value, the direct strategy: valid.
sequence_batching_options valid() {
  sequence_batching_options o;
  servekit::sequence_control ready;
  ready.kind = control_kind::sequence_ready;
  ready.int32_false_true = {0, 1};
  servekit::sequence_control end;
  end.kind = control_kind::sequence_end;
  end.bool_false_true = {false, true};
  servekit::sequence_control corrid;
  corrid.kind = control_kind::sequence_corrid;
  corrid.data_type = data_type::uint64;
  o.control_input = {{"START", {boolean_control(control_kind::sequence_start)}},
                     {"READY", {ready}},
                     {"END", {end}},
                     {"CORRID", {corrid}}};
  servekit::state_options state;
  state.input_name = "INPUT_STATE";
  state.output_name = "OUTPUT_STATE";
  state.data_type = data_type::int32;
  state.dims = {-1, 3};
  state.initial_state = {{data_type::int32, {1, 3}, "initial state", true, ""}};
  o.state = {state};
  o.direct.minimum_slot_utilization = 0.5F;
  return o;
}

/// Success when validate() throws a bad_value config_error at `path` whose what() contains
/// `message_part`.
::testing::AssertionResult fails_with(const sequence_batching_options& o, std::string_view path,
                                      std::string_view message_part,
                                      std::int32_t batch_size = max_batch_size) {
  try {
    validate(o, batch_size, declared_inputs, declared_outputs);
  } catch (const config_error& e) {
    const std::string what = e.what();
    if (e.code() == config_error_code::bad_value && e.path() == path &&
        what.find(message_part) != std::string::npos) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << "got path '" << e.path() << "', message '" << what << "'; expected path '" << path
           << "', message containing '" << message_part << "'";
  }
  return ::testing::AssertionFailure() << "no config_error";
}

/// The first (only) control of control input `i`.
servekit::sequence_control& control_of(sequence_batching_options& o, std::size_t i) {
  return o.control_input.at(i).control.at(0);
}

const std::string controls = "/sequence_batching/control_input";
const std::string states = "/sequence_batching/state";

TEST(sequence_batching_options, valid_configs_pass) {
  EXPECT_NO_THROW(validate(valid(), max_batch_size, declared_inputs, declared_outputs));
  EXPECT_NO_THROW(validate(sequence_batching_options{}, 0, {}, {}));
  auto oldest = valid();
  oldest.strategy = sequence_strategy::oldest;
  oldest.direct = {};
  oldest.oldest.max_candidate_sequences = 8;
  oldest.oldest.preferred_batch_size = {2, 4};
  EXPECT_NO_THROW(validate(oldest, max_batch_size, declared_inputs, declared_outputs));
}

TEST(sequence_batching_options, to_config_string_spells_tritons_kinds) {
  EXPECT_EQ(to_config_string(control_kind::sequence_start), "CONTROL_SEQUENCE_START");
  EXPECT_EQ(to_config_string(control_kind::sequence_ready), "CONTROL_SEQUENCE_READY");
  EXPECT_EQ(to_config_string(control_kind::sequence_end), "CONTROL_SEQUENCE_END");
  EXPECT_EQ(to_config_string(control_kind::sequence_corrid), "CONTROL_SEQUENCE_CORRID");
}

// ---------------------------------------------------------------------------------- controls

TEST(sequence_batching_options, control_input_needs_a_name) {
  auto o = valid();
  o.control_input[1].name.clear();
  EXPECT_TRUE(
      fails_with(o, controls + "/1/name", "sequence batching control tensor must have a name"));
}

TEST(sequence_batching_options, control_input_has_exactly_one_control) {
  auto o = valid();
  o.control_input[2].control.clear();
  EXPECT_TRUE(
      fails_with(o, controls + "/2/control", "must have exactly one 'control' entry, got 0"));
  o = valid();
  o.control_input[0].control.push_back(boolean_control(control_kind::sequence_end));
  EXPECT_TRUE(
      fails_with(o, controls + "/0/control", "must have exactly one 'control' entry, got 2"));
}

TEST(sequence_batching_options, control_tensor_names_are_unique) {
  auto o = valid();
  o.control_input[3].name = "READY";
  EXPECT_TRUE(fails_with(o, controls + "/3/name",
                         "sequence batching control tensor 'READY' is specified for multiple "
                         "control kinds (first at /sequence_batching/control_input/1)"));
}

TEST(sequence_batching_options, each_control_kind_at_most_once) {
  auto o = valid();
  o.control_input.push_back({"START2", {boolean_control(control_kind::sequence_start)}});
  EXPECT_TRUE(fails_with(o, controls + "/4/control/0/kind",
                         "sequence batching specifies multiple CONTROL_SEQUENCE_START tensors"));
}

TEST(sequence_batching_options, boolean_control_needs_one_false_true_pair) {
  auto o = valid();
  control_of(o, 0).fp32_false_true.clear();
  EXPECT_TRUE(fails_with(o, controls + "/0/control/0",
                         "sequence batching must specify either 'int32_false_true', "
                         "'fp32_false_true' or 'bool_false_true' for CONTROL_SEQUENCE_START"));
  o = valid();
  control_of(o, 1).bool_false_true = {false, true};
  EXPECT_TRUE(fails_with(o, controls + "/1/control/0/bool_false_true",
                         "sequence batching specifies more than one from 'int32_false_true', "
                         "'fp32_false_true' and 'bool_false_true' for CONTROL_SEQUENCE_READY"));
}

TEST(sequence_batching_options, false_true_pair_has_exactly_two_entries) {
  auto o = valid();
  control_of(o, 0).fp32_false_true = {0.0F, 1.0F, 2.0F};
  EXPECT_TRUE(fails_with(o, controls + "/0/control/0/fp32_false_true",
                         "sequence batching control 'fp32_false_true' must have exactly 2 entries "
                         "for CONTROL_SEQUENCE_START, got 3"));
  o = valid();
  control_of(o, 1).int32_false_true = {1};
  EXPECT_TRUE(fails_with(o, controls + "/1/control/0/int32_false_true",
                         "'int32_false_true' must have exactly 2 entries"));
  o = valid();
  control_of(o, 2).bool_false_true = {false, true, true};
  EXPECT_TRUE(fails_with(o, controls + "/2/control/0/bool_false_true",
                         "'bool_false_true' must have exactly 2 entries for CONTROL_SEQUENCE_END"));
}

TEST(sequence_batching_options, boolean_control_must_not_set_data_type) {
  auto o = valid();
  control_of(o, 2).data_type = data_type::boolean;
  EXPECT_TRUE(fails_with(o, controls + "/2/control/0/data_type",
                         "CONTROL_SEQUENCE_END must not specify 'data_type'"));
}

TEST(sequence_batching_options, corrid_must_not_set_false_true_pairs) {
  auto o = valid();
  control_of(o, 3).int32_false_true = {0, 1};
  EXPECT_TRUE(fails_with(o, controls + "/3/control/0/int32_false_true",
                         "sequence batching must not specify either 'int32_false_true', "
                         "'fp32_false_true' or 'bool_false_true' for CONTROL_SEQUENCE_CORRID"));
}

TEST(sequence_batching_options, corrid_data_type_is_an_integer_or_string) {
  for (const auto type : {data_type::uint64, data_type::int64, data_type::uint32, data_type::int32,
                          data_type::bytes}) {
    auto o = valid();
    control_of(o, 3).data_type = type;
    EXPECT_NO_THROW(validate(o, max_batch_size, declared_inputs, declared_outputs));
  }
  for (const auto type : {data_type::invalid, data_type::fp32, data_type::uint8}) {
    auto o = valid();
    control_of(o, 3).data_type = type;
    EXPECT_TRUE(fails_with(o, controls + "/3/control/0/data_type",
                           "unexpected data type for control CONTROL_SEQUENCE_CORRID. Allowed "
                           "data types are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and "
                           "TYPE_STRING; got " +
                               std::string{to_config_string(type)}));
  }
}

TEST(sequence_batching_options, control_inputs_must_not_be_declared_inputs) {
  auto o = valid();
  o.control_input[0].name = "INPUT";
  EXPECT_TRUE(fails_with(o, controls + "/0/name",
                         "sequence batching control tensor 'INPUT' must not also be declared in "
                         "'input'"));
}

// ---------------------------------------------------------------------------------- strategies

TEST(sequence_batching_options, minimum_slot_utilization_is_within_zero_and_one) {
  for (const float utilization : {0.0F, 0.25F, 1.0F}) {
    auto o = valid();
    o.direct.minimum_slot_utilization = utilization;
    EXPECT_NO_THROW(validate(o, max_batch_size, declared_inputs, declared_outputs));
  }
  for (const float utilization : {-0.1F, 1.5F, std::numeric_limits<float>::quiet_NaN()}) {
    auto o = valid();
    o.direct.minimum_slot_utilization = utilization;
    EXPECT_TRUE(fails_with(o, "/sequence_batching/direct/minimum_slot_utilization",
                           "sequence batching minimum slot utilization must be in range "
                           "[0.0, 1.0]"));
  }
}

TEST(sequence_batching_options, only_the_chosen_strategy_has_settings) {
  auto o = valid();
  o.oldest.max_candidate_sequences = 2;
  EXPECT_TRUE(fails_with(o, "/sequence_batching/oldest",
                         "'oldest' settings are set but the strategy is 'direct'"));
  o = valid();
  o.strategy = sequence_strategy::oldest;
  EXPECT_TRUE(fails_with(o, "/sequence_batching/direct",
                         "'direct' settings are set but the strategy is 'oldest'"));
}

TEST(sequence_batching_options, max_candidate_sequences_is_not_negative) {
  auto o = valid();
  o.strategy = sequence_strategy::oldest;
  o.direct = {};
  o.oldest.max_candidate_sequences = -1;
  EXPECT_TRUE(fails_with(o, "/sequence_batching/oldest/max_candidate_sequences",
                         "max candidate sequences must be non-negative"));
}

// Every candidate is a slot (with its state) on every instance, allocated at load: the value
// has an upper bound instead of sizing an allocation by itself.
TEST(sequence_batching_options, max_candidate_sequences_has_an_upper_bound) {
  auto o = valid();
  o.strategy = sequence_strategy::oldest;
  o.direct = {};
  o.oldest.max_candidate_sequences =
      servekit::oldest_strategy_options::max_candidate_sequences_limit;
  EXPECT_NO_THROW(validate(o, max_batch_size, declared_inputs, declared_outputs));
  o.oldest.max_candidate_sequences = std::numeric_limits<std::int32_t>::max();
  EXPECT_TRUE(fails_with(o, "/sequence_batching/oldest/max_candidate_sequences",
                         "max candidate sequences must be at most 65536"));
}

TEST(sequence_batching_options, oldest_preferred_batch_sizes_are_positive_and_bounded) {
  auto o = valid();
  o.strategy = sequence_strategy::oldest;
  o.direct = {};
  o.oldest.preferred_batch_size = {2, 0};
  EXPECT_TRUE(fails_with(o, "/sequence_batching/oldest/preferred_batch_size/1",
                         "sequence batching preferred batch size must be positive"));
  o.oldest.preferred_batch_size = {4, 5};
  EXPECT_TRUE(fails_with(o, "/sequence_batching/oldest/preferred_batch_size/1",
                         "sequence batching preferred batch size must be <= max batch size (4)"));
  // A model that does not batch still runs batches of one.
  o.oldest.preferred_batch_size = {1};
  EXPECT_NO_THROW(validate(o, 0, declared_inputs, declared_outputs));
  o.oldest.preferred_batch_size = {2};
  EXPECT_TRUE(fails_with(o, "/sequence_batching/oldest/preferred_batch_size/0",
                         "must be <= max batch size (0)", 0));
}

// ---------------------------------------------------------------------------------- states

TEST(sequence_batching_options, state_names_are_set) {
  auto o = valid();
  o.state[0].input_name.clear();
  EXPECT_TRUE(fails_with(o, states + "/0/input_name", "state must specify 'input_name'"));
  o = valid();
  o.state[0].output_name.clear();
  EXPECT_TRUE(
      fails_with(o, states + "/0/output_name", "state 'INPUT_STATE' must specify 'output_name'"));
}

TEST(sequence_batching_options, state_names_are_unique_across_states) {
  auto o = valid();
  auto second = o.state[0];
  second.output_name = "OTHER_OUTPUT";
  o.state.push_back(second);
  EXPECT_TRUE(fails_with(o, states + "/1/input_name",
                         "duplicate state input_name 'INPUT_STATE' (first declared at "
                         "/sequence_batching/state/0)"));
  o.state[1].input_name = "OTHER_INPUT";
  o.state[1].output_name = "OUTPUT_STATE";
  EXPECT_TRUE(fails_with(o, states + "/1/output_name",
                         "duplicate state output_name 'OUTPUT_STATE' (first declared at "
                         "/sequence_batching/state/0)"));
}

TEST(sequence_batching_options, state_inputs_must_not_be_declared_or_control_inputs) {
  auto o = valid();
  o.state[0].input_name = "INPUT";
  EXPECT_TRUE(fails_with(o, states + "/0/input_name",
                         "state input 'INPUT' must not also be declared in 'input'"));
  o = valid();
  o.state[0].input_name = "END";
  EXPECT_TRUE(fails_with(o, states + "/0/input_name",
                         "state input 'END' has the same name as control input "
                         "/sequence_batching/control_input/2"));
}

TEST(sequence_batching_options, state_data_type_is_set_and_not_bytes) {
  auto o = valid();
  o.state[0].data_type = data_type::invalid;
  EXPECT_TRUE(
      fails_with(o, states + "/0/data_type", "state 'INPUT_STATE' must specify 'data_type'"));
  o = valid();
  o.state[0].data_type = data_type::bytes;
  o.state[0].initial_state.clear();
  EXPECT_TRUE(fails_with(o, states + "/0/data_type",
                         "BYTES/TYPE_STRING state is not supported by servekit"));
}

TEST(sequence_batching_options, state_dims_are_set_and_valid) {
  auto o = valid();
  o.state[0].dims = {};
  o.state[0].initial_state.clear();
  EXPECT_TRUE(fails_with(o, states + "/0/dims", "state 'INPUT_STATE' must specify 'dims'"));
  o.state[0].dims = {4, 0};
  EXPECT_TRUE(fails_with(o, states + "/0/dims/1", "dimension must be integer >= 1, or -1"));
}

TEST(sequence_batching_options, state_output_declared_as_output_has_the_states_type) {
  auto o = valid();
  o.state[0].output_name = "OUTPUT"; // declared FP32, the state is INT32
  EXPECT_TRUE(fails_with(o, states + "/0/data_type",
                         "state 'INPUT_STATE' has data type TYPE_INT32 but its output 'OUTPUT' is "
                         "declared in 'output' with data type TYPE_FP32"));
}

TEST(sequence_batching_options, growable_memory_needs_one_buffer) {
  auto o = valid();
  o.state[0].use_growable_memory = true;
  EXPECT_TRUE(fails_with(o, states + "/0/use_growable_memory",
                         "In order to 'use_growable_memory', you must also enable "
                         "'use_same_buffer_for_input_output' for state input name "
                         "'INPUT_STATE'."));
  o.state[0].use_same_buffer_for_input_output = true;
  EXPECT_NO_THROW(validate(o, max_batch_size, declared_inputs, declared_outputs));
}

// ---------------------------------------------------------------------------------- initial state

TEST(sequence_batching_options, at_most_one_initial_state) {
  auto o = valid();
  o.state[0].initial_state.push_back(o.state[0].initial_state[0]);
  EXPECT_TRUE(fails_with(o, states + "/0/initial_state",
                         "initial_state field for state input 'INPUT_STATE' must contain exactly "
                         "one or zero element. Found '2' elements."));
}

TEST(sequence_batching_options, initial_state_has_the_states_data_type) {
  auto o = valid();
  o.state[0].initial_state[0].data_type = data_type::int64;
  EXPECT_TRUE(fails_with(o, states + "/0/initial_state/0/data_type",
                         "The data type used for 'initial_state' field of state 'INPUT_STATE' "
                         "does not match the state data type."));
}

TEST(sequence_batching_options, initial_state_needs_a_name) {
  auto o = valid();
  o.state[0].initial_state[0].name.clear();
  EXPECT_TRUE(fails_with(o, states + "/0/initial_state/0/name",
                         "Field 'name' must be set when using initial_state for state input "
                         "'INPUT_STATE'."));
}

TEST(sequence_batching_options, initial_state_dims_are_fixed_and_admitted_by_the_state) {
  auto o = valid();
  o.state[0].initial_state[0].dims = {3};
  EXPECT_TRUE(fails_with(o, states + "/0/initial_state/0/dims",
                         "Number of dimensions in 'initial_state' doesn't match the size of "
                         "'state' dimensions for state input 'INPUT_STATE'. 1 != 2"));
  o.state[0].initial_state[0].dims = {-1, 3};
  EXPECT_TRUE(fails_with(o, states + "/0/initial_state/0/dims/0",
                         "'initial_state' field for state input name 'INPUT_STATE' contains "
                         "variable dimensions."));
  o.state[0].initial_state[0].dims = {2, 4};
  EXPECT_TRUE(fails_with(o, states + "/0/initial_state/0/dims/1",
                         "'initial_state' dim for input name 'INPUT_STATE' doesn't match 'state' "
                         "dim description. 4 != 3"));
  o.state[0].initial_state[0].dims = {0, 3};
  EXPECT_TRUE(fails_with(o, states + "/0/initial_state/0/dims/0", "must be integer >= 1, got 0"));
  o.state[0].initial_state[0].dims = {7, 3}; // the state's -1 admits any size
  EXPECT_NO_THROW(validate(o, max_batch_size, declared_inputs, declared_outputs));
}

TEST(sequence_batching_options, initial_state_sets_exactly_one_source) {
  auto o = valid();
  o.state[0].initial_state[0].zero_data = false;
  EXPECT_TRUE(fails_with(o, states + "/0/initial_state/0",
                         "initial_state setting expects state 'INPUT_STATE' to have state_data "
                         "set"));
  o.state[0].initial_state[0].data_file = "init.bin";
  EXPECT_NO_THROW(validate(o, max_batch_size, declared_inputs, declared_outputs));
  o.state[0].initial_state[0].zero_data = true;
  EXPECT_TRUE(fails_with(o, states + "/0/initial_state/0/data_file",
                         "sets both 'zero_data' and 'data_file'"));
}

} // namespace sequence_batching_options_test
