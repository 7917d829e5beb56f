// Loading and saving Triton's `sequence_batching` message: the examples of Triton's model
// configuration docs (direct, oldest, implicit state), round trips through save, the protobuf
// oneofs, unknown and not-yet-supported fields, and validate()'s rules as load reports them.

#include <servekit/config/model_config_json.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sequence_batching_config_test {

using servekit::config_error;
using servekit::config_error_code;
using servekit::control_kind;
using servekit::data_type;
using servekit::load_model_config;
using servekit::model_options;
using servekit::save_model_config;
using servekit::sequence_batching_options;
using servekit::sequence_strategy;

/// Success when loading `text` throws config_error with this code and path, and what()
/// contains `message_part`.
::testing::AssertionResult fails_with(std::string_view text, config_error_code code,
                                      std::string_view path, std::string_view message_part) {
  try {
    (void)load_model_config(text);
  } catch (const config_error& e) {
    const std::string what = e.what();
    if (e.code() == code && e.path() == path && what.find(message_part) != std::string::npos) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << "got code " << static_cast<int>(e.code()) << ", path '" << e.path() << "', message '"
           << what << "'; expected code " << static_cast<int>(code) << ", path '" << path
           << "', message containing '" << message_part << "'";
  }
  return ::testing::AssertionFailure() << "no config_error for " << text;
}

/// A model config whose sequence_batching is `sequence_batching` (a JSON object's text).
std::string with_sequence_batching(std::string_view sequence_batching) {
  return std::string{R"({"max_batch_size": 4, "sequence_batching": )"} +
         std::string{sequence_batching} + "}";
}

/// A boolean control input as Triton's examples write it.
servekit::control_input fp32_control(std::string name, control_kind kind) {
  servekit::sequence_control control;
  control.kind = kind;
  control.fp32_false_true = {0.0F, 1.0F};
  return {std::move(name), {control}};
}

servekit::state_options int32_state() {
  servekit::state_options state;
  state.input_name = "INPUT_STATE";
  state.output_name = "OUTPUT_STATE";
  state.data_type = data_type::int32;
  state.dims = {-1};
  return state;
}

servekit::tensor_config fp32_tensor(std::string name, servekit::shape dims) {
  return {std::move(name), data_type::fp32, dims, false, false, false};
}

/// A sequence_batching that sets every field (oldest strategy) to a non-default value.
sequence_batching_options every_sequence_field() {
  sequence_batching_options o;
  o.strategy = sequence_strategy::oldest;
  o.max_sequence_idle_microseconds = 0; // not the default, so it is written
  o.oldest.max_candidate_sequences = 16;
  o.oldest.preferred_batch_size = {2, 4};
  o.oldest.max_queue_delay_microseconds = 250;
  o.oldest.preserve_ordering = true;
  servekit::sequence_control start;
  start.kind = control_kind::sequence_start;
  start.fp32_false_true = {0.1F, -2.5F};
  servekit::sequence_control ready;
  ready.kind = control_kind::sequence_ready;
  ready.int32_false_true = {-1, 7};
  servekit::sequence_control end;
  end.kind = control_kind::sequence_end;
  end.bool_false_true = {false, true};
  servekit::sequence_control corrid;
  corrid.kind = control_kind::sequence_corrid;
  corrid.data_type = data_type::bytes;
  o.control_input = {{"START", {start}}, {"READY", {ready}}, {"END", {end}}, {"CORRID", {corrid}}};
  auto zeros = int32_state();
  zeros.dims = {-1, 3};
  zeros.initial_state = {{data_type::int32, {2, 3}, "zeros", true, ""}};
  zeros.use_same_buffer_for_input_output = true;
  zeros.use_growable_memory = true;
  servekit::state_options from_file;
  from_file.input_name = "H_IN";
  from_file.output_name = "H_OUT";
  from_file.data_type = data_type::fp16;
  from_file.dims = {8};
  from_file.initial_state = {{data_type::fp16, {8}, "h0", false, "h0.bin"}};
  o.state = {zeros, from_file};
  return o;
}

// ---------------------------------------------------------------------------------- loading

TEST(sequence_batching_config, loads_tritons_direct_example) {
  const auto o = load_model_config(R"({
    "name": "direct_stateful_model",
    "platform": "tensorrt_plan",
    "max_batch_size": 2,
    "sequence_batching": {
      "max_sequence_idle_microseconds": 5000000,
      "direct": {},
      "control_input": [
        {"name": "START",
         "control": [{"kind": "CONTROL_SEQUENCE_START", "fp32_false_true": [0, 1]}]},
        {"name": "READY",
         "control": [{"kind": "CONTROL_SEQUENCE_READY", "fp32_false_true": [0, 1]}]}
      ]
    },
    "input": [{"name": "INPUT", "data_type": "TYPE_FP32", "dims": [100, 100]}],
    "output": [{"name": "OUTPUT", "data_type": "TYPE_FP32", "dims": [10]}],
    "instance_group": [{"count": 2}]
  })");
  sequence_batching_options expected;
  expected.max_sequence_idle_microseconds = 5'000'000;
  expected.control_input = {fp32_control("START", control_kind::sequence_start),
                            fp32_control("READY", control_kind::sequence_ready)};
  ASSERT_TRUE(o.sequence_batching.has_value());
  EXPECT_EQ(*o.sequence_batching, expected);
  EXPECT_EQ(o.sequence_batching->strategy, sequence_strategy::direct);
  EXPECT_FALSE(o.dynamic_batching.has_value());
  EXPECT_EQ(o.input, (std::vector{fp32_tensor("INPUT", {100, 100})}));
}

TEST(sequence_batching_config, loads_tritons_oldest_example) {
  const auto o = load_model_config(R"({
    "name": "oldest_stateful_model",
    "platform": "tensorflow_savedmodel",
    "max_batch_size": 2,
    "sequence_batching": {
      "max_sequence_idle_microseconds": "5000000",
      "oldest": {"max_candidate_sequences": 4},
      "control_input": [
        {"name": "START",
         "control": [{"kind": "CONTROL_SEQUENCE_START", "fp32_false_true": [0, 1]}]},
        {"name": "END",
         "control": [{"kind": "CONTROL_SEQUENCE_END", "fp32_false_true": [0, 1]}]},
        {"name": "CORRID",
         "control": [{"kind": "CONTROL_SEQUENCE_CORRID", "data_type": "TYPE_UINT64"}]}
      ]
    },
    "input": [{"name": "INPUT", "data_type": "TYPE_FP32", "dims": [100, 100]}],
    "output": [{"name": "OUTPUT", "data_type": "TYPE_FP32", "dims": [10]}]
  })");
  sequence_batching_options expected;
  expected.strategy = sequence_strategy::oldest;
  expected.max_sequence_idle_microseconds = 5'000'000;
  expected.oldest.max_candidate_sequences = 4;
  servekit::sequence_control corrid;
  corrid.kind = control_kind::sequence_corrid;
  corrid.data_type = data_type::uint64;
  expected.control_input = {fp32_control("START", control_kind::sequence_start),
                            fp32_control("END", control_kind::sequence_end),
                            {"CORRID", {corrid}}};
  ASSERT_TRUE(o.sequence_batching.has_value());
  EXPECT_EQ(*o.sequence_batching, expected);
}

TEST(sequence_batching_config, loads_tritons_implicit_state_examples) {
  const auto plain = load_model_config(R"({"sequence_batching": {"state": [{
      "input_name": "INPUT_STATE", "output_name": "OUTPUT_STATE",
      "data_type": "TYPE_INT32", "dims": [-1]}]}})");
  sequence_batching_options expected;
  expected.state = {int32_state()};
  ASSERT_TRUE(plain.sequence_batching.has_value());
  EXPECT_EQ(*plain.sequence_batching, expected);
}

/// Triton's docs write `initial_state: {...}` in protobuf text format, where a repeated field
/// may be given one entry at a time; in JSON it is a list.
TEST(sequence_batching_config, loads_initial_state_from_zero_and_from_file) {
  const auto zeros = load_model_config(R"({"sequence_batching": {"state": [{
      "input_name": "INPUT_STATE", "output_name": "OUTPUT_STATE",
      "data_type": "TYPE_INT32", "dims": [-1],
      "initial_state": [{"data_type": "TYPE_INT32", "dims": [1], "zero_data": true,
                         "name": "initial state"}]}]}})");
  auto state = int32_state();
  state.initial_state = {{data_type::int32, {1}, "initial state", true, ""}};
  ASSERT_TRUE(zeros.sequence_batching.has_value());
  EXPECT_EQ(zeros.sequence_batching->state, (std::vector{state}));

  const auto from_file = load_model_config(R"({"sequence_batching": {"state": [{
      "input_name": "INPUT_STATE", "output_name": "OUTPUT_STATE",
      "data_type": "TYPE_INT32", "dims": [-1],
      "initial_state": [{"data_type": "TYPE_INT32", "dims": [1],
                         "data_file": "initial_state_data", "name": "initial state"}]}]}})");
  state.initial_state = {{data_type::int32, {1}, "initial state", false, "initial_state_data"}};
  ASSERT_TRUE(from_file.sequence_batching.has_value());
  EXPECT_EQ(from_file.sequence_batching->state, (std::vector{state}));
}

TEST(sequence_batching_config, empty_message_is_direct_with_the_defaults) {
  const auto o = load_model_config(R"({"sequence_batching": {}})");
  ASSERT_TRUE(o.sequence_batching.has_value());
  EXPECT_EQ(*o.sequence_batching, sequence_batching_options{});
  EXPECT_EQ(o.sequence_batching->idle_microseconds(), 1'000'000U);
}

TEST(sequence_batching_config, reads_direct_settings_and_floats_written_as_strings) {
  const auto o = load_model_config(with_sequence_batching(R"({
    "direct": {"max_queue_delay_microseconds": "100", "minimum_slot_utilization": "0.5"},
    "control_input": [{"name": "S", "control": [{"kind": "CONTROL_SEQUENCE_START",
                                                 "fp32_false_true": ["0", 1.5]}]}]})"));
  ASSERT_TRUE(o.sequence_batching.has_value());
  EXPECT_EQ(o.sequence_batching->direct.max_queue_delay_microseconds, 100U);
  EXPECT_EQ(o.sequence_batching->direct.minimum_slot_utilization, 0.5F);
  EXPECT_EQ(o.sequence_batching->control_input.at(0).control.at(0).fp32_false_true,
            (std::vector<float>{0.0F, 1.5F}));
}

// ---------------------------------------------------------------------------------- saving

TEST(sequence_batching_config, round_trips_a_config_using_every_field) {
  model_options original;
  original.max_batch_size = 4;
  original.input = {fp32_tensor("INPUT", {16})};
  original.output = {fp32_tensor("OUTPUT", {16})};
  original.sequence_batching = every_sequence_field();
  const auto saved = save_model_config(original);
  EXPECT_EQ(load_model_config(saved), original);
  EXPECT_EQ(load_model_config(saved.dump(2)), original);
}

TEST(sequence_batching_config, round_trips_direct_and_default_configs) {
  model_options a;
  a.sequence_batching.emplace();
  EXPECT_EQ(save_model_config(a).at("sequence_batching"), nlohmann::json::object());
  EXPECT_EQ(load_model_config(save_model_config(a)), a);

  model_options b;
  b.max_batch_size = 8;
  b.sequence_batching.emplace();
  b.sequence_batching->direct = {300, 0.75F};
  b.sequence_batching->control_input = {fp32_control("READY", control_kind::sequence_ready)};
  b.sequence_batching->state = {int32_state()};
  EXPECT_EQ(load_model_config(save_model_config(b)), b);
  EXPECT_EQ(load_model_config(save_model_config(b).dump()), b);

  model_options c; // oldest with every oldest field at its default still says "oldest"
  c.sequence_batching.emplace();
  c.sequence_batching->strategy = sequence_strategy::oldest;
  EXPECT_EQ(save_model_config(c).at("sequence_batching"),
            nlohmann::json::parse(R"({"oldest": {}})"));
  EXPECT_EQ(load_model_config(save_model_config(c)), c);
}

TEST(sequence_batching_config, save_writes_tritons_spelling_and_leaves_out_defaults) {
  model_options o;
  o.max_batch_size = 2;
  o.sequence_batching.emplace();
  o.sequence_batching->max_sequence_idle_microseconds = 5'000'000;
  servekit::sequence_control corrid;
  corrid.kind = control_kind::sequence_corrid;
  corrid.data_type = data_type::uint64;
  o.sequence_batching->control_input = {fp32_control("START", control_kind::sequence_start),
                                        {"CORRID", {corrid}}};
  o.sequence_batching->state = {int32_state()};
  EXPECT_EQ(save_model_config(o).at("sequence_batching"), nlohmann::json::parse(R"({
    "max_sequence_idle_microseconds": 5000000,
    "control_input": [
      {"name": "START", "control": [{"kind": "CONTROL_SEQUENCE_START",
                                     "fp32_false_true": [0.0, 1.0]}]},
      {"name": "CORRID", "control": [{"kind": "CONTROL_SEQUENCE_CORRID",
                                      "data_type": "TYPE_UINT64"}]}
    ],
    "state": [{"input_name": "INPUT_STATE", "output_name": "OUTPUT_STATE",
               "data_type": "TYPE_INT32", "dims": [-1]}]
  })"));
}

// ---------------------------------------------------------------------------------- oneofs

TEST(sequence_batching_config, direct_and_oldest_together_are_refused) {
  EXPECT_TRUE(fails_with(with_sequence_batching(R"({"direct": {}, "oldest": {}})"),
                         config_error_code::bad_value, "/sequence_batching/oldest",
                         "'direct' and 'oldest' are both set; set at most one (they are the "
                         "oneof strategy_choice)"));
}

TEST(sequence_batching_config, zero_data_and_data_file_together_are_refused) {
  EXPECT_TRUE(fails_with(R"({"sequence_batching": {"state": [{
      "input_name": "I", "output_name": "O", "data_type": "TYPE_INT32", "dims": [1],
      "initial_state": [{"data_type": "TYPE_INT32", "dims": [1], "name": "init",
                         "zero_data": true, "data_file": "f"}]}]}})",
                         config_error_code::bad_value,
                         "/sequence_batching/state/0/initial_state/0/data_file",
                         "oneof state_data"));
}

TEST(sequence_batching_config, zero_data_false_is_refused) {
  EXPECT_TRUE(fails_with(R"({"sequence_batching": {"state": [{
      "input_name": "I", "output_name": "O", "data_type": "TYPE_INT32", "dims": [1],
      "initial_state": [{"data_type": "TYPE_INT32", "dims": [1], "name": "init",
                         "zero_data": false}]}]}})",
                         config_error_code::bad_value,
                         "/sequence_batching/state/0/initial_state/0/zero_data",
                         "'zero_data' must be true when present"));
}

TEST(sequence_batching_config, dynamic_and_sequence_batching_together_are_refused) {
  EXPECT_TRUE(fails_with(R"({"dynamic_batching": {}, "sequence_batching": {}})",
                         config_error_code::bad_value, "/sequence_batching",
                         "'dynamic_batching' and 'sequence_batching' are both set"));
}

// ---------------------------------------------------------------------------------- fields

TEST(sequence_batching_config, unknown_fields_suggest_the_closest_known_name) {
  EXPECT_TRUE(fails_with(with_sequence_batching(R"({"max_sequence_idle_microsecond": 5})"),
                         config_error_code::unknown_field,
                         "/sequence_batching/max_sequence_idle_microsecond",
                         "did you mean 'max_sequence_idle_microseconds'?"));
  EXPECT_TRUE(fails_with(with_sequence_batching(R"({"controlInput": []})"),
                         config_error_code::unknown_field, "/sequence_batching/controlInput",
                         "did you mean 'control_input'?"));
  EXPECT_TRUE(fails_with(
      with_sequence_batching(R"({"control_input": [{"name": "S", "control": [{"knd": 0}]}]})"),
      config_error_code::unknown_field, "/sequence_batching/control_input/0/control/0/knd",
      "did you mean 'kind'?"));
  EXPECT_TRUE(fails_with(with_sequence_batching(R"({"oldest": {"max_candidate_sequence": 4}})"),
                         config_error_code::unknown_field,
                         "/sequence_batching/oldest/max_candidate_sequence",
                         "did you mean 'max_candidate_sequences'?"));
  EXPECT_TRUE(fails_with(with_sequence_batching(R"({"state": [{"input_nam": "I"}]})"),
                         config_error_code::unknown_field, "/sequence_batching/state/0/input_nam",
                         "did you mean 'input_name'?"));
}

TEST(sequence_batching_config, iterative_sequence_loads_and_saves_with_its_knobs_checked) {
  const auto options = load_model_config(
      R"({"max_batch_size": 4, "sequence_batching": {"iterative_sequence": true},
          "parameters": {"max_num_seqs": {"string_value": "64"},
                         "batch_scheduler_policy": {"string_value": "guaranteed_no_evict"}}})");
  ASSERT_TRUE(options.sequence_batching);
  EXPECT_TRUE(options.sequence_batching->iterative_sequence);
  EXPECT_EQ(load_model_config(save_model_config(options)), options);
  EXPECT_TRUE(save_model_config(options).at("sequence_batching").contains("iterative_sequence"));
  EXPECT_FALSE(save_model_config(load_model_config(with_sequence_batching("{}")))
                   .at("sequence_batching")
                   .contains("iterative_sequence"))
      << "left out at its default";
  // A knob of the iteration scheduler that does not parse fails the load, naming it...
  EXPECT_TRUE(fails_with(
      R"({"max_batch_size": 4, "sequence_batching": {"iterative_sequence": true},
          "parameters": {"max_num_seqs": {"string_value": "many"}}})",
      config_error_code::bad_value, "/parameters/max_num_seqs", "expected a non-negative integer"));
  // ...but without iterative_sequence the parameters are the backend's own business.
  EXPECT_NO_THROW((void)load_model_config(
      R"({"max_batch_size": 4, "sequence_batching": {},
          "parameters": {"max_num_seqs": {"string_value": "many"}}})"));
}

TEST(sequence_batching_config, wrong_types_and_values_are_refused) {
  EXPECT_TRUE(fails_with(
      with_sequence_batching(R"({"control_input": [{"name": "S", "control": [{"kind": 0}]}]})"),
      config_error_code::wrong_type, "/sequence_batching/control_input/0/control/0/kind",
      "CONTROL_SEQUENCE_START, CONTROL_SEQUENCE_READY, CONTROL_SEQUENCE_END, "
      "CONTROL_SEQUENCE_CORRID"));
  EXPECT_TRUE(fails_with(
      with_sequence_batching(
          R"({"control_input": [{"name": "S", "control": [{"kind": "CONTROL_SEQUENCE_BEGIN"}]}]})"),
      config_error_code::bad_value, "/sequence_batching/control_input/0/control/0/kind",
      "got \"CONTROL_SEQUENCE_BEGIN\""));
  EXPECT_TRUE(
      fails_with(with_sequence_batching(R"({"direct": {"minimum_slot_utilization": true}})"),
                 config_error_code::wrong_type,
                 "/sequence_batching/direct/minimum_slot_utilization", "a number"));
  EXPECT_TRUE(
      fails_with(with_sequence_batching(R"({"direct": {"minimum_slot_utilization": 1e39}})"),
                 config_error_code::bad_value, "/sequence_batching/direct/minimum_slot_utilization",
                 "out of range for float"));
  EXPECT_TRUE(
      fails_with(with_sequence_batching(R"({"direct": {"minimum_slot_utilization": "half"}})"),
                 config_error_code::bad_value, "/sequence_batching/direct/minimum_slot_utilization",
                 "got string \"half\""));
  EXPECT_TRUE(fails_with(with_sequence_batching(R"({"max_sequence_idle_microseconds": -1})"),
                         config_error_code::bad_value,
                         "/sequence_batching/max_sequence_idle_microseconds",
                         "expected a non-negative integer (uint64)"));
  EXPECT_TRUE(fails_with(with_sequence_batching(R"({"state": {}})"), config_error_code::wrong_type,
                         "/sequence_batching/state", "expected an array"));
  EXPECT_TRUE(fails_with(with_sequence_batching(R"({"state": [{"dims": [0]}]})"),
                         config_error_code::bad_value, "/sequence_batching/state/0/dims/0",
                         "dimension must be >= 1, or -1"));
}

TEST(sequence_batching_config, tritons_single_object_initial_state_is_refused_as_not_a_list) {
  EXPECT_TRUE(fails_with(R"({"sequence_batching": {"state": [{
      "input_name": "I", "output_name": "O", "data_type": "TYPE_INT32", "dims": [-1],
      "initial_state": {"data_type": "TYPE_INT32", "dims": [1], "zero_data": true,
                        "name": "initial state"}}]}})",
                         config_error_code::wrong_type, "/sequence_batching/state/0/initial_state",
                         "expected an array"));
}

// ---------------------------------------------------------------------------------- validate()

TEST(sequence_batching_config, load_applies_validate_with_the_declared_tensors) {
  EXPECT_TRUE(fails_with(with_sequence_batching(R"({"control_input": [
      {"name": "S", "control": [{"kind": "CONTROL_SEQUENCE_START", "int32_false_true": [0, 1]}]},
      {"name": "R", "control": [{"kind": "CONTROL_SEQUENCE_READY",
                                 "fp32_false_true": [0, 1, 1]}]}]})"),
                         config_error_code::bad_value,
                         "/sequence_batching/control_input/1/control/0/fp32_false_true",
                         "sequence batching control 'fp32_false_true' must have exactly 2 entries "
                         "for CONTROL_SEQUENCE_READY"));
  EXPECT_TRUE(fails_with(with_sequence_batching(R"({"control_input": [
      {"name": "C", "control": [{"kind": "CONTROL_SEQUENCE_CORRID", "data_type": "TYPE_FP32"}]}]})"),
                         config_error_code::bad_value,
                         "/sequence_batching/control_input/0/control/0/data_type",
                         "unexpected data type for control CONTROL_SEQUENCE_CORRID"));
  EXPECT_TRUE(fails_with(with_sequence_batching(R"({"oldest": {"preferred_batch_size": [2, 8]}})"),
                         config_error_code::bad_value,
                         "/sequence_batching/oldest/preferred_batch_size/1",
                         "sequence batching preferred batch size must be <= max batch size (4)"));
  EXPECT_TRUE(fails_with(
      R"({"input": [{"name": "S", "data_type": "TYPE_FP32", "dims": [1]}],
          "sequence_batching": {"state": [{"input_name": "S", "output_name": "S_OUT",
                                            "data_type": "TYPE_FP32", "dims": [1]}]}})",
      config_error_code::bad_value, "/sequence_batching/state/0/input_name",
      "state input 'S' must not also be declared in 'input'"));
  EXPECT_TRUE(fails_with(
      R"({"output": [{"name": "S_OUT", "data_type": "TYPE_FP16", "dims": [1]}],
          "sequence_batching": {"state": [{"input_name": "S", "output_name": "S_OUT",
                                            "data_type": "TYPE_FP32", "dims": [1]}]}})",
      config_error_code::bad_value, "/sequence_batching/state/0/data_type",
      "is declared in 'output' with data type TYPE_FP16"));
}

TEST(sequence_batching_config, without_max_batch_size_the_bound_is_left_to_the_model) {
  const auto o = load_model_config(R"({"sequence_batching": {
      "oldest": {"preferred_batch_size": [64]}}})");
  ASSERT_TRUE(o.sequence_batching.has_value());
  EXPECT_EQ(o.sequence_batching->oldest.preferred_batch_size, (std::vector<std::int32_t>{64}));
  EXPECT_TRUE(fails_with(R"({"max_batch_size": 0, "sequence_batching": {
      "oldest": {"preferred_batch_size": [2]}}})",
                         config_error_code::bad_value,
                         "/sequence_batching/oldest/preferred_batch_size/0",
                         "must be <= max batch size (0)"));
}

} // namespace sequence_batching_config_test
