#include <servekit/config/model_config_json.hpp>
#include <servekit/config/model_config_pbtxt.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace model_config_json_test {

using servekit::config_error;
using servekit::config_error_code;
using servekit::load_model_config;
using servekit::model_options;
using servekit::save_model_config;

std::string_view code_name(config_error_code code) {
  switch (code) {
  case config_error_code::parse_error:
    return "parse_error";
  case config_error_code::unknown_field:
    return "unknown_field";
  case config_error_code::wrong_type:
    return "wrong_type";
  case config_error_code::bad_value:
    return "bad_value";
  case config_error_code::backend_error:
    return "backend_error";
  }
  return "?";
}

/// Success when loading `text` throws config_error with this code and path, and what() contains
/// `message_part`.
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
           << "got code " << code_name(e.code()) << ", path '" << e.path() << "', message '" << what
           << "'; expected code " << code_name(code) << ", path '" << path
           << "', message containing '" << message_part << "'";
  }
  return ::testing::AssertionFailure() << "no config_error for " << text;
}

/// A config that sets every field servekit accepts to a non-default value.
model_options every_field() {
  model_options o;
  o.name = "resnet/v2~beta";
  o.version = 7;
  o.backend = "onnxruntime";
  o.platform = "onnxruntime_onnx";
  o.max_batch_size = 16;
  o.input = {
      {"IMAGE", servekit::data_type::fp32, {3, -1, -1}, true, false, false},
      {"MASK", servekit::data_type::boolean, {-1}, false, true, false},
      {"SHAPE", servekit::data_type::int64, {2}, false, false, true},
      {"TEXT", servekit::data_type::bytes, {}, false, false, false},
  };
  o.output = {
      {"SCORES", servekit::data_type::fp16, {1000}, false, false, false},
      {"IDS", servekit::data_type::uint64, {-1, 5}, false, false, true},
  };
  servekit::dynamic_batching_options db;
  db.preferred_batch_size = {4, 8, 16};
  db.max_queue_delay_microseconds = std::numeric_limits<std::uint64_t>::max();
  db.preserve_ordering = false;
  db.priority.priority_levels = 3;
  db.priority.default_priority_level = 2;
  db.priority.default_queue_policy = {servekit::timeout_action::delay, 5000, true, 64};
  db.priority.priority_queue_policy[1] = {servekit::timeout_action::reject, 100, false, 8};
  db.priority.priority_queue_policy[3] = {};
  o.dynamic_batching = db;
  o.instance_group = {
      {"gpu_group", servekit::instance_group_kind::kind_gpu, 2, {0, 1}, std::nullopt},
      {"", servekit::instance_group_kind::kind_cpu, 3, {}, std::nullopt},
      {"auto", servekit::instance_group_kind::kind_auto, 1, {2}, std::nullopt},
      {"backend_placed", servekit::instance_group_kind::kind_model, 1, {}, std::nullopt},
  };
  o.parameters = {{"path/with~chars", "a"}, {"empty", ""}, {"threads", "4"}};
  return o;
}

/// An ensemble config that sets every ensemble field to a non-default value.
model_options every_ensemble_field() {
  model_options o;
  o.name = "ensemble_model";
  o.version = 2;
  o.platform = "ensemble";
  o.max_batch_size = 1;
  o.input = {{"RAW_IMAGE", servekit::data_type::bytes, {-1}, false, false, false}};
  o.output = {{"CLASSIFICATION", servekit::data_type::fp32, {1000}, false, false, false},
              {"SEGMENTATION", servekit::data_type::fp32, {3, -1, -1}, false, false, false}};
  servekit::ensemble_scheduling_options es;
  es.step = {
      {"image_preprocess_model",
       -1,
       {{"RAW_IMAGE", "RAW_IMAGE"}},
       {{"PREPROCESSED_OUTPUT", "preprocessed_image"}}},
      {"classification_model",
       std::numeric_limits<std::int64_t>::max(),
       {{"FORMATTED_IMAGE", "preprocessed_image"}},
       {{"CLASSIFICATION_OUTPUT", "CLASSIFICATION"}}},
      {"segmentation/model~v2", 1, {{"a/b~c", "preprocessed_image"}}, {}},
      {"sink", 3, {}, {{"OUT", "SEGMENTATION"}}},
  };
  es.max_inflight_requests = std::numeric_limits<std::uint32_t>::max();
  o.ensemble_scheduling = es;
  o.parameters = {{"note", "ensembles take parameters too"}};
  return o;
}

// ---------------------------------------------------------------------------------- loading

TEST(model_config_json, loads_the_example_from_tritons_docs) {
  const auto o = load_model_config(R"({
    "max_batch_size": 8,
    "dynamic_batching": {"preferred_batch_size": [4, 8], "max_queue_delay_microseconds": 100},
    "instance_group": [{"count": 2, "kind": "KIND_CPU"}]
  })");
  ASSERT_TRUE(o.max_batch_size.has_value());
  EXPECT_EQ(*o.max_batch_size, 8);
  ASSERT_TRUE(o.dynamic_batching.has_value());
  EXPECT_EQ(o.dynamic_batching->preferred_batch_size, (std::vector<std::int32_t>{4, 8}));
  EXPECT_EQ(o.dynamic_batching->max_queue_delay_microseconds, 100U);
  EXPECT_FALSE(o.dynamic_batching->preserve_ordering);
  EXPECT_EQ(o.dynamic_batching->priority, servekit::priority_options{});
  ASSERT_EQ(o.instance_group.size(), 1U);
  EXPECT_EQ(o.instance_group[0].count, 2);
  EXPECT_EQ(o.instance_group[0].kind, servekit::instance_group_kind::kind_cpu);
  EXPECT_TRUE(o.instance_group[0].gpus.empty());
  EXPECT_EQ(o.name, "model");
  EXPECT_TRUE(o.input.empty());
}

TEST(model_config_json, empty_object_gives_default_options) {
  EXPECT_EQ(load_model_config("{}"), model_options{});
  const auto o = load_model_config(R"({"dynamic_batching": {}})");
  ASSERT_TRUE(o.dynamic_batching.has_value());
  EXPECT_EQ(*o.dynamic_batching, servekit::dynamic_batching_options{});
  EXPECT_FALSE(o.max_batch_size.has_value());
}

TEST(model_config_json, loads_inputs_outputs_and_parameters) {
  const auto o = load_model_config(R"({
    "name": "add_sub", "version": 3, "backend": "python", "max_batch_size": 4,
    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [16], "format": "FORMAT_NONE"},
              {"name": "INPUT1", "data_type": "INT32", "dims": [-1, 2], "optional": true,
               "allow_ragged_batch": true, "is_shape_tensor": false}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_STRING", "dims": []}],
    "parameters": {"mode": {"string_value": "fast"}, "blank": {}}
  })");
  EXPECT_EQ(o.name, "add_sub");
  EXPECT_EQ(o.version, 3);
  EXPECT_EQ(o.backend, "python");
  ASSERT_EQ(o.input.size(), 2U);
  EXPECT_EQ(o.input[0].type, servekit::data_type::fp32);
  EXPECT_EQ(o.input[0].dims, (servekit::shape{16}));
  EXPECT_EQ(o.input[1].type, servekit::data_type::int32);
  EXPECT_EQ(o.input[1].dims, (servekit::shape{-1, 2}));
  EXPECT_TRUE(o.input[1].optional);
  EXPECT_TRUE(o.input[1].allow_ragged_batch);
  ASSERT_EQ(o.output.size(), 1U);
  EXPECT_EQ(o.output[0].type, servekit::data_type::bytes);
  EXPECT_TRUE(o.output[0].dims.empty());
  EXPECT_EQ(o.parameters.at("mode"), "fast");
  EXPECT_EQ(o.parameters.at("blank"), "");
}

TEST(model_config_json, accepts_integers_written_as_decimal_strings) {
  const auto o = load_model_config(R"({
    "max_batch_size": "8", "version": "2",
    "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": ["-1", "4"]}],
    "dynamic_batching": {
      "preferred_batch_size": ["4"], "max_queue_delay_microseconds": "100",
      "priority_levels": "2", "default_priority_level": "1",
      "default_queue_policy": {"default_timeout_microseconds": "18446744073709551615",
                               "max_queue_size": "4294967295"}},
    "instance_group": [{"count": "2", "gpus": ["0", "3"]}]
  })");
  EXPECT_EQ(o.max_batch_size, 8);
  EXPECT_EQ(o.version, 2);
  EXPECT_EQ(o.input[0].dims, (servekit::shape{-1, 4}));
  const auto& db = *o.dynamic_batching;
  EXPECT_EQ(db.preferred_batch_size, (std::vector<std::int32_t>{4}));
  EXPECT_EQ(db.max_queue_delay_microseconds, 100U);
  EXPECT_EQ(db.priority.priority_levels, 2U);
  EXPECT_EQ(db.priority.default_priority_level, 1U);
  EXPECT_EQ(db.priority.default_queue_policy.default_timeout_microseconds,
            std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(db.priority.default_queue_policy.max_queue_size,
            std::numeric_limits<std::uint32_t>::max());
  EXPECT_EQ(o.instance_group[0].count, 2);
  EXPECT_EQ(o.instance_group[0].gpus, (std::vector<std::int32_t>{0, 3}));
}

TEST(model_config_json, accepts_integral_numbers_written_with_a_fraction_or_exponent) {
  const auto o = load_model_config(
      R"({"max_batch_size": 8.0, "dynamic_batching": {"max_queue_delay_microseconds": 1e3}})");
  EXPECT_EQ(o.max_batch_size, 8);
  EXPECT_EQ(o.dynamic_batching->max_queue_delay_microseconds, 1000U);
}

TEST(model_config_json, accepts_priority_queue_policy_keyed_by_level_string) {
  const auto o = load_model_config(R"({"dynamic_batching": {
    "priority_levels": 2, "default_priority_level": 2,
    "priority_queue_policy": {"1": {"timeout_action": "DELAY", "default_timeout_microseconds": 10},
                              "2": {"max_queue_size": 5, "allow_timeout_override": true}}}})");
  const auto& policies = o.dynamic_batching->priority.priority_queue_policy;
  ASSERT_EQ(policies.size(), 2U);
  EXPECT_EQ(policies.at(1).timeout_action, servekit::timeout_action::delay);
  EXPECT_EQ(policies.at(1).default_timeout_microseconds, 10U);
  EXPECT_EQ(policies.at(2).max_queue_size, 5U);
  EXPECT_TRUE(policies.at(2).allow_timeout_override);
}

TEST(model_config_json, loads_from_parsed_json_and_from_std_string) {
  const nlohmann::json j = {{"max_batch_size", 2}, {"name", "m"}};
  const std::string text = j.dump();
  EXPECT_EQ(load_model_config(j), load_model_config(text));
  EXPECT_EQ(load_model_config(j).name, "m");
}

TEST(model_config_json, default_model_filename_is_read_and_written) {
  const auto o = load_model_config(R"({"name": "m", "default_model_filename": "net.onnx"})");
  EXPECT_EQ(o.default_model_filename, "net.onnx");
  EXPECT_EQ(save_model_config(o).at("default_model_filename"), "net.onnx");
  EXPECT_FALSE(
      save_model_config(load_model_config(R"({"name": "m"})")).contains("default_model_filename"));
  EXPECT_EQ(servekit::load_model_config_pbtxt("default_model_filename: \"model.pt\"")
                .default_model_filename,
            "model.pt");
}

TEST(model_config_json, dynamic_batching_without_max_batch_size_leaves_the_bound_to_the_model) {
  // max_batch_size comes from the backend when the config leaves it out.
  const auto o = load_model_config(R"({"dynamic_batching": {"preferred_batch_size": [4, 8]}})");
  EXPECT_FALSE(o.max_batch_size.has_value());
  EXPECT_EQ(o.dynamic_batching->preferred_batch_size, (std::vector<std::int32_t>{4, 8}));
  EXPECT_TRUE(fails_with(R"({"dynamic_batching": {"preferred_batch_size": [0]}})",
                         config_error_code::bad_value, "/dynamic_batching/preferred_batch_size/0",
                         "must be positive"));
}

// ---------------------------------------------------------------------------------- ensembles

TEST(model_config_json, loads_tritons_ensemble_example) {
  const auto o = load_model_config(R"({
    "name": "ensemble_model", "platform": "ensemble", "max_batch_size": 1,
    "input": [{"name": "RAW_IMAGE", "data_type": "TYPE_STRING", "dims": [-1]}],
    "output": [{"name": "CLASSIFICATION", "data_type": "TYPE_FP32", "dims": [1000]},
               {"name": "SEGMENTATION", "data_type": "TYPE_FP32", "dims": [3, -1, -1]}],
    "ensemble_scheduling": {
      "step": [
        {"model_name": "image_preprocess_model", "model_version": -1,
         "input_map": {"RAW_IMAGE": "RAW_IMAGE"},
         "output_map": {"PREPROCESSED_OUTPUT": "preprocessed_image"}},
        {"model_name": "classification_model", "model_version": "3",
         "input_map": {"FORMATTED_IMAGE": "preprocessed_image"},
         "output_map": {"CLASSIFICATION_OUTPUT": "CLASSIFICATION"}},
        {"model_name": "segmentation_model", "model_version": "-1", "model_namespace": "",
         "input_map": {"FORMATTED_IMAGE": "preprocessed_image", "SCALE": "RAW_IMAGE"},
         "output_map": {"SEGMENTATION_OUTPUT": "SEGMENTATION"}}
      ],
      "max_inflight_requests": "16"
    }
  })");
  EXPECT_EQ(o.platform, "ensemble");
  EXPECT_FALSE(o.dynamic_batching.has_value());
  EXPECT_TRUE(o.instance_group.empty());
  ASSERT_TRUE(o.ensemble_scheduling.has_value());
  servekit::ensemble_scheduling_options expected;
  expected.step = {
      {"image_preprocess_model",
       -1,
       {{"RAW_IMAGE", "RAW_IMAGE"}},
       {{"PREPROCESSED_OUTPUT", "preprocessed_image"}}},
      {"classification_model",
       3,
       {{"FORMATTED_IMAGE", "preprocessed_image"}},
       {{"CLASSIFICATION_OUTPUT", "CLASSIFICATION"}}},
      {"segmentation_model",
       -1,
       {{"FORMATTED_IMAGE", "preprocessed_image"}, {"SCALE", "RAW_IMAGE"}},
       {{"SEGMENTATION_OUTPUT", "SEGMENTATION"}}},
  };
  expected.max_inflight_requests = 16;
  EXPECT_EQ(*o.ensemble_scheduling, expected);
}

TEST(model_config_json, ensemble_defaults_and_platform_filled_in) {
  const auto o = load_model_config(R"({"ensemble_scheduling": {"step": [{"model_name": "m"}]}})");
  EXPECT_EQ(o.platform, "ensemble");
  ASSERT_TRUE(o.ensemble_scheduling.has_value());
  ASSERT_EQ(o.ensemble_scheduling->step.size(), 1U);
  const auto& step = o.ensemble_scheduling->step[0];
  EXPECT_EQ(step.model_name, "m");
  EXPECT_EQ(step.model_version, -1);
  EXPECT_TRUE(step.input_map.empty());
  EXPECT_TRUE(step.output_map.empty());
  EXPECT_EQ(o.ensemble_scheduling->max_inflight_requests, 0U);
  // An empty instance_group is no instance group (protobuf cannot tell the two apart).
  EXPECT_NO_THROW((void)load_model_config(
      R"({"instance_group": [], "ensemble_scheduling": {"step": [{"model_name": "m"}]}})"));
}

TEST(model_config_json, ensemble_steps_are_checked) {
  EXPECT_TRUE(fails_with(R"({"ensemble_scheduling": {"step": []}})", config_error_code::bad_value,
                         "/ensemble_scheduling/step",
                         "ensemble_scheduling needs at least one step"));
  EXPECT_TRUE(fails_with(R"({"ensemble_scheduling": {}})", config_error_code::bad_value,
                         "/ensemble_scheduling/step",
                         "ensemble_scheduling needs at least one step"));
  EXPECT_TRUE(fails_with(R"({"ensemble_scheduling": {"step": [{"model_name": "a"}, {}]}})",
                         config_error_code::bad_value, "/ensemble_scheduling/step/1/model_name",
                         "required field 'model_name' is missing"));
  EXPECT_TRUE(fails_with(R"({"ensemble_scheduling": {"step": [{"model_name": ""}]}})",
                         config_error_code::bad_value, "/ensemble_scheduling/step/0/model_name",
                         "model_name must not be empty"));
  EXPECT_TRUE(fails_with(R"({"ensemble_scheduling": {"step": [{"model_name": 7}]}})",
                         config_error_code::wrong_type, "/ensemble_scheduling/step/0/model_name",
                         "expected a string, got number 7"));
  EXPECT_TRUE(fails_with(R"({"ensemble_scheduling": {"step": {"model_name": "a"}}})",
                         config_error_code::wrong_type, "/ensemble_scheduling/step",
                         "expected an array, got object"));
  EXPECT_TRUE(fails_with(R"({"ensemble_scheduling": {"step": ["a"]}})",
                         config_error_code::wrong_type, "/ensemble_scheduling/step/0",
                         "expected an object"));
  EXPECT_TRUE(fails_with(R"({"ensemble_scheduling": [{"model_name": "a"}]})",
                         config_error_code::wrong_type, "/ensemble_scheduling",
                         "expected an object, got array"));
}

TEST(model_config_json, ensemble_step_model_version_is_an_int64) {
  EXPECT_TRUE(fails_with(
      R"({"ensemble_scheduling": {"step": [{"model_name": "a", "model_version": "v1"}]}})",
      config_error_code::bad_value, "/ensemble_scheduling/step/0/model_version",
      "a decimal string"));
  EXPECT_TRUE(fails_with(
      R"({"ensemble_scheduling": {"step": [{"model_name": "a", "model_version": 1.5}]}})",
      config_error_code::bad_value, "/ensemble_scheduling/step/0/model_version",
      "expected an integer, got number 1.5"));
  EXPECT_TRUE(fails_with(
      R"({"ensemble_scheduling": {"step": [{"model_name": "a", "model_version": true}]}})",
      config_error_code::wrong_type, "/ensemble_scheduling/step/0/model_version",
      "expected an integer"));
  EXPECT_TRUE(fails_with(
      R"({"ensemble_scheduling": {"step": [{"model_name": "a",
                                            "model_version": "9223372036854775808"}]}})",
      config_error_code::bad_value, "/ensemble_scheduling/step/0/model_version",
      "out of range for int64"));
  for (const auto* version : {"0", "-2"}) {
    const std::string text =
        std::string{R"({"ensemble_scheduling": {"step": [{"model_name": "a", "model_version": )"} +
        version + "}]}}";
    EXPECT_TRUE(fails_with(
        text, config_error_code::bad_value, "/ensemble_scheduling/step/0/model_version",
        "must be -1 (the latest version) or a version >= 1, got " + std::string{version}));
  }
}

TEST(model_config_json, ensemble_step_model_namespace_must_be_empty) {
  EXPECT_TRUE(fails_with(
      R"({"ensemble_scheduling": {"step": [{"model_name": "a", "model_namespace": "team"}]}})",
      config_error_code::bad_value, "/ensemble_scheduling/step/0/model_namespace",
      "'model_namespace' is reserved by Triton and must be empty, got \"team\""));
  EXPECT_TRUE(fails_with(
      R"({"ensemble_scheduling": {"step": [{"model_name": "a", "model_namespace": 1}]}})",
      config_error_code::wrong_type, "/ensemble_scheduling/step/0/model_namespace",
      "expected a string"));
}

TEST(model_config_json, ensemble_tensor_maps_are_objects_of_strings) {
  EXPECT_TRUE(fails_with(
      R"({"ensemble_scheduling": {"step": [{"model_name": "a",
          "input_map": {"IMAGE": "IMAGE", "RAW_IMAGE": 3}}]}})",
      config_error_code::wrong_type, "/ensemble_scheduling/step/0/input_map/RAW_IMAGE",
      "expected a string, got number 3"));
  EXPECT_TRUE(fails_with(
      R"({"ensemble_scheduling": {"step": [{"model_name": "a"},
          {"model_name": "b", "output_map": {"a/b": null}}]}})",
      config_error_code::wrong_type, "/ensemble_scheduling/step/1/output_map/a~1b",
      "expected a string, got null"));
  EXPECT_TRUE(fails_with(
      R"({"ensemble_scheduling": {"step": [{"model_name": "a", "input_map": ["IMAGE"]}]}})",
      config_error_code::wrong_type, "/ensemble_scheduling/step/0/input_map",
      "expected an object of {\"model tensor\": \"ensemble tensor\"}, got array"));
}

TEST(model_config_json, ensemble_unknown_fields_are_named) {
  EXPECT_TRUE(
      fails_with(R"({"ensemble_scheduling": {"step": [{"model_name": "a", "input_maps": {}}]}})",
                 config_error_code::unknown_field, "/ensemble_scheduling/step/0/input_maps",
                 "did you mean 'input_map'?"));
  EXPECT_TRUE(fails_with(
      R"({"ensemble_scheduling": {"step": [{"model_name": "a"}], "steps": []}})",
      config_error_code::unknown_field, "/ensemble_scheduling/steps",
      "unknown field 'steps'; did you mean 'step'? (known: step, max_inflight_requests)"));
  EXPECT_TRUE(
      fails_with(R"({"ensemble_scheduling": {"step": [{"model_name": "a", "modelVersion": 1}]}})",
                 config_error_code::unknown_field, "/ensemble_scheduling/step/0/modelVersion",
                 "known: model_name, model_version, input_map, output_map, model_namespace)"));
}

TEST(model_config_json, ensemble_max_inflight_requests_is_a_uint32) {
  EXPECT_TRUE(fails_with(
      R"({"ensemble_scheduling": {"step": [{"model_name": "a"}], "max_inflight_requests": -1}})",
      config_error_code::bad_value, "/ensemble_scheduling/max_inflight_requests",
      "expected a non-negative integer (uint32)"));
  EXPECT_TRUE(fails_with(
      R"({"ensemble_scheduling": {"step": [{"model_name": "a"}],
                                  "max_inflight_requests": 4294967296}})",
      config_error_code::bad_value, "/ensemble_scheduling/max_inflight_requests",
      "out of range for uint32"));
  EXPECT_TRUE(fails_with(
      R"({"ensemble_scheduling": {"step": [{"model_name": "a"}], "max_inflight_requests": "x"}})",
      config_error_code::bad_value, "/ensemble_scheduling/max_inflight_requests",
      "a decimal string"));
}

TEST(model_config_json, ensemble_platform_must_be_ensemble) {
  EXPECT_TRUE(fails_with(
      R"({"platform": "onnxruntime_onnx", "ensemble_scheduling": {"step": [{"model_name": "a"}]}})",
      config_error_code::bad_value, "/platform",
      "its platform must be \"ensemble\" or left out, got \"onnxruntime_onnx\""));
  EXPECT_TRUE(fails_with(R"({"platform": "ensemble"})", config_error_code::bad_value,
                         "/ensemble_scheduling", "an ensemble needs 'ensemble_scheduling'"));
  // Other platforms without ensemble_scheduling are recorded as before.
  EXPECT_EQ(load_model_config(R"({"platform": "tensorrt_plan"})").platform, "tensorrt_plan");
}

TEST(model_config_json, ensemble_must_not_set_a_scheduler_or_instance_groups) {
  EXPECT_TRUE(fails_with(R"({"ensemble_scheduling": {"step": [{"model_name": "a"}]},
                             "instance_group": [{"kind": "KIND_CPU"}]})",
                         config_error_code::bad_value, "/instance_group",
                         "an ensemble (a model with 'ensemble_scheduling') must not set "
                         "'instance_group'"));
  EXPECT_TRUE(fails_with(R"({"ensemble_scheduling": {"step": [{"model_name": "a"}]},
                             "dynamic_batching": {}})",
                         config_error_code::bad_value, "/dynamic_batching",
                         "an ensemble (a model with 'ensemble_scheduling') must not set "
                         "'dynamic_batching'"));
  EXPECT_TRUE(fails_with(R"({"platform": "ensemble", "sequence_batching": {},
                             "ensemble_scheduling": {"step": [{"model_name": "a"}]}})",
                         config_error_code::bad_value, "/sequence_batching",
                         "must not set 'sequence_batching'"));
}

TEST(model_config_json, save_writes_ensemble_scheduling_in_tritons_spelling) {
  const auto j = save_model_config(every_ensemble_field());
  EXPECT_EQ(j.at("platform"), "ensemble");
  const auto& es = j.at("ensemble_scheduling");
  EXPECT_EQ(es.at("max_inflight_requests"), std::numeric_limits<std::uint32_t>::max());
  ASSERT_EQ(es.at("step").size(), 4U);
  EXPECT_EQ(es.at("step").at(0), nlohmann::json::parse(R"({
    "model_name": "image_preprocess_model", "model_version": -1,
    "input_map": {"RAW_IMAGE": "RAW_IMAGE"},
    "output_map": {"PREPROCESSED_OUTPUT": "preprocessed_image"}})"));
  EXPECT_FALSE(es.at("step").at(2).contains("output_map"));
  EXPECT_FALSE(es.at("step").at(3).contains("input_map"));

  // model_version is always written (protobuf's default 0 is not "latest"); platform too.
  model_options o;
  o.ensemble_scheduling.emplace();
  o.ensemble_scheduling->step.push_back({"m", -1, {}, {}});
  EXPECT_EQ(save_model_config(o), nlohmann::json::parse(R"({
    "name": "model", "version": 1, "platform": "ensemble",
    "ensemble_scheduling": {"step": [{"model_name": "m", "model_version": -1}]}})"));
  o.platform = "ensemble";
  EXPECT_EQ(load_model_config(save_model_config(o)), o);
}

TEST(model_config_json, round_trips_an_ensemble_using_every_field) {
  const auto original = every_ensemble_field();
  const auto saved = save_model_config(original);
  EXPECT_EQ(load_model_config(saved), original);
  EXPECT_EQ(load_model_config(saved.dump(2)), original);
}

// ---------------------------------------------------------------------------------- unknown

TEST(model_config_json, unknown_top_level_field_is_named_with_the_known_ones) {
  EXPECT_TRUE(fails_with(R"({"max_batch": 8})", config_error_code::unknown_field, "/max_batch",
                         "unknown field 'max_batch'"));
  EXPECT_TRUE(fails_with(R"({"max_batch": 8})", config_error_code::unknown_field, "/max_batch",
                         "known: name, version, backend, platform, max_batch_size, input, output, "
                         "dynamic_batching, sequence_batching, ensemble_scheduling, "
                         "instance_group, model_transaction_policy, response_cache, "
                         "model_warmup, version_policy, parameters, default_model_filename)"));
}

TEST(model_config_json, unknown_nested_field_points_into_its_message) {
  EXPECT_TRUE(fails_with(R"({"dynamic_batching": {"max_queue_delay_us": 100}})",
                         config_error_code::unknown_field, "/dynamic_batching/max_queue_delay_us",
                         "unknown field 'max_queue_delay_us' (known: preferred_batch_size, "
                         "max_queue_delay_microseconds, preserve_ordering"));
  EXPECT_TRUE(fails_with(
      R"({"dynamic_batching": {"priority_levels": 2, "default_priority_level": 1,
          "priority_queue_policy": {"2": {"timeout": 5}}}})",
      config_error_code::unknown_field, "/dynamic_batching/priority_queue_policy/2/timeout",
      "known: timeout_action, default_timeout_microseconds"));
  EXPECT_TRUE(fails_with(R"({"input": [{"name": "A", "data_type": "FP32", "dims": [1]},
                                        {"name": "B", "data_type": "FP32", "dims": [1], "dim": 1}]})",
                         config_error_code::unknown_field, "/input/1/dim", "unknown field 'dim'"));
  EXPECT_TRUE(fails_with(R"({"parameters": {"k": {"value": "v"}}})",
                         config_error_code::unknown_field, "/parameters/k/value",
                         "known: string_value"));
}

TEST(model_config_json, unknown_field_suggests_the_closest_known_name) {
  EXPECT_TRUE(fails_with(R"({"max_batch_sise": 8})", config_error_code::unknown_field,
                         "/max_batch_sise", "did you mean 'max_batch_size'?"));
  EXPECT_TRUE(fails_with(R"({"maxBatchSize": 8})", config_error_code::unknown_field,
                         "/maxBatchSize", "did you mean 'max_batch_size'?"));
  EXPECT_TRUE(fails_with(R"({"instance_group": [{"kind": "KIND_CPU", "cout": 2}]})",
                         config_error_code::unknown_field, "/instance_group/0/cout",
                         "did you mean 'count'?"));
}

TEST(model_config_json, unsupported_triton_fields_are_refused_by_name) {
  EXPECT_TRUE(fails_with(R"({"optimization": {}})", config_error_code::unknown_field,
                         "/optimization",
                         "field 'optimization' is not supported by this build of servekit yet"));
  for (const auto* field :
       {"optimization", "batch_input", "batch_output", "model_metrics", "metric_tags"}) {
    const std::string text = std::string{R"({")"} + field + R"(": {}})";
    EXPECT_TRUE(fails_with(text, config_error_code::unknown_field, std::string{"/"} + field,
                           "is not supported by this build of servekit yet"));
  }
}

TEST(model_config_json, unsupported_nested_triton_fields_are_refused_by_name) {
  EXPECT_TRUE(fails_with(R"({"instance_group": [{"count": 1, "passive": true}]})",
                         config_error_code::unknown_field, "/instance_group/0/passive",
                         "field 'passive' is not supported by this build of servekit yet"));
  EXPECT_TRUE(fails_with(
      R"({"input": [{"name": "A", "data_type": "FP32", "dims": [1], "reshape": {"shape": []}}]})",
      config_error_code::unknown_field, "/input/0/reshape", "field 'reshape' is not supported"));
  EXPECT_TRUE(fails_with(
      R"({"output": [{"name": "A", "data_type": "FP32", "dims": [1], "label_filename": "l.txt"}]})",
      config_error_code::unknown_field, "/output/0/label_filename",
      "field 'label_filename' is not supported"));
}

// ---------------------------------------------------------------------------------- types

TEST(model_config_json, wrong_json_types_are_refused) {
  EXPECT_TRUE(fails_with(R"({"max_batch_size": true})", config_error_code::wrong_type,
                         "/max_batch_size", "expected an integer"));
  EXPECT_TRUE(fails_with(R"({"max_batch_size": null})", config_error_code::wrong_type,
                         "/max_batch_size", "got null"));
  EXPECT_TRUE(fails_with(R"({"dynamic_batching": {"preserve_ordering": "true"}})",
                         config_error_code::wrong_type, "/dynamic_batching/preserve_ordering",
                         "expected a boolean (true or false), got string \"true\""));
  EXPECT_TRUE(fails_with(R"({"dynamic_batching": {"preserve_ordering": 1}})",
                         config_error_code::wrong_type, "/dynamic_batching/preserve_ordering",
                         "expected a boolean"));
  EXPECT_TRUE(fails_with(R"({"dynamic_batching": [4, 8]})", config_error_code::wrong_type,
                         "/dynamic_batching", "expected an object, got array"));
  EXPECT_TRUE(fails_with(R"({"input": {"name": "A"}})", config_error_code::wrong_type, "/input",
                         "expected an array, got object"));
  EXPECT_TRUE(fails_with(R"({"name": 5})", config_error_code::wrong_type, "/name",
                         "expected a string, got number 5"));
  EXPECT_TRUE(fails_with(R"({"parameters": {"k": "v"}})", config_error_code::wrong_type,
                         "/parameters/k", "string_value"));
  EXPECT_TRUE(fails_with(R"({"instance_group": [{"kind": 2}]})", config_error_code::wrong_type,
                         "/instance_group/0/kind", "KIND_CPU"));
}

TEST(model_config_json, document_that_is_not_an_object_is_a_wrong_type_at_the_root) {
  EXPECT_TRUE(fails_with("[1, 2]", config_error_code::wrong_type, "", "got array"));
  EXPECT_TRUE(fails_with("8", config_error_code::wrong_type, "", "a Triton model config"));
}

TEST(model_config_json, negative_values_for_unsigned_fields_are_refused) {
  EXPECT_TRUE(fails_with(R"({"dynamic_batching": {"max_queue_delay_microseconds": -1}})",
                         config_error_code::bad_value,
                         "/dynamic_batching/max_queue_delay_microseconds",
                         "expected a non-negative integer (uint64), got number -1"));
  EXPECT_TRUE(fails_with(R"({"dynamic_batching": {"priority_levels": "-2"}})",
                         config_error_code::bad_value, "/dynamic_batching/priority_levels",
                         "non-negative"));
  EXPECT_TRUE(
      fails_with(R"({"dynamic_batching": {"default_queue_policy": {"max_queue_size": -5}}})",
                 config_error_code::bad_value,
                 "/dynamic_batching/default_queue_policy/max_queue_size", "(uint32)"));
}

TEST(model_config_json, out_of_range_and_non_integral_numbers_are_refused) {
  EXPECT_TRUE(fails_with(R"({"max_batch_size": 2147483648})", config_error_code::bad_value,
                         "/max_batch_size",
                         "out of range for int32 (allowed: -2147483648 to 2147483647)"));
  EXPECT_TRUE(fails_with(
      R"({"dynamic_batching": {"default_queue_policy": {"max_queue_size": "4294967296"}}})",
      config_error_code::bad_value, "/dynamic_batching/default_queue_policy/max_queue_size",
      "out of range for uint32"));
  EXPECT_TRUE(fails_with(
      R"({"dynamic_batching": {"max_queue_delay_microseconds": "18446744073709551616"}})",
      config_error_code::bad_value, "/dynamic_batching/max_queue_delay_microseconds",
      "out of range for uint64"));
  EXPECT_TRUE(fails_with(R"({"dynamic_batching": {"max_queue_delay_microseconds": 1e30}})",
                         config_error_code::bad_value,
                         "/dynamic_batching/max_queue_delay_microseconds",
                         "out of range for uint64"));
  EXPECT_TRUE(fails_with(R"({"max_batch_size": 2.5})", config_error_code::bad_value,
                         "/max_batch_size", "expected an integer, got number 2.5"));
}

TEST(model_config_json, integer_strings_must_be_plain_decimal) {
  for (const auto* text : {R"({"max_batch_size": "8ms"})", R"({"max_batch_size": " 8"})",
                           R"({"max_batch_size": "+8"})", R"({"max_batch_size": ""})",
                           R"({"max_batch_size": "0x10"})", R"({"max_batch_size": "-"})"}) {
    EXPECT_TRUE(
        fails_with(text, config_error_code::bad_value, "/max_batch_size", "a decimal string"))
        << text;
  }
}

// ---------------------------------------------------------------------------------- values

TEST(model_config_json, negative_max_batch_size_is_refused_with_tritons_message) {
  EXPECT_TRUE(fails_with(R"({"max_batch_size": -1})", config_error_code::bad_value,
                         "/max_batch_size", "'max_batch_size' must be non-negative value"));
}

TEST(model_config_json, bad_data_type_lists_the_allowed_names) {
  const auto text = R"({"input": [
    {"name": "A", "data_type": "TYPE_FP32", "dims": [1]},
    {"name": "B", "data_type": "FP16", "dims": [1]},
    {"name": "C", "data_type": "TYPE_FLOAT", "dims": [1]}]})";
  EXPECT_TRUE(fails_with(text, config_error_code::bad_value, "/input/2/data_type",
                         "expected one of TYPE_BOOL, TYPE_UINT8, TYPE_UINT16"));
  EXPECT_TRUE(fails_with(text, config_error_code::bad_value, "/input/2/data_type",
                         "TYPE_STRING, got \"TYPE_FLOAT\""));
  EXPECT_TRUE(fails_with(R"({"output": [{"name": "A", "data_type": "TYPE_INVALID", "dims": [1]}]})",
                         config_error_code::bad_value, "/output/0/data_type",
                         "got \"TYPE_INVALID\""));
}

TEST(model_config_json, bad_enum_values_are_refused_with_the_allowed_names) {
  EXPECT_TRUE(fails_with(R"({"instance_group": [{"count": 1}, {"kind": "KIND_TPU"}]})",
                         config_error_code::bad_value, "/instance_group/1/kind",
                         "expected one of KIND_AUTO, KIND_GPU, KIND_CPU, KIND_MODEL, got "
                         "\"KIND_TPU\""));
  EXPECT_TRUE(fails_with(
      R"({"dynamic_batching": {"default_queue_policy": {"timeout_action": "reject"}}})",
      config_error_code::bad_value, "/dynamic_batching/default_queue_policy/timeout_action",
      "expected one of REJECT, DELAY, got \"reject\""));
  EXPECT_TRUE(fails_with(
      R"({"input": [{"name": "A", "data_type": "FP32", "dims": [2, 2, 3], "format": "FORMAT_NHWC"}]})",
      config_error_code::bad_value, "/input/0/format",
      "only FORMAT_NONE is supported by this build of servekit yet, got \"FORMAT_NHWC\""));
}

TEST(model_config_json, dims_must_be_positive_or_minus_one) {
  EXPECT_TRUE(fails_with(R"({"input": [{"name": "A", "data_type": "FP32", "dims": [4, 0]}]})",
                         config_error_code::bad_value, "/input/0/dims/1",
                         "dimension must be >= 1, or -1 for a variable size; got 0"));
  EXPECT_TRUE(fails_with(R"({"output": [{"name": "A", "data_type": "FP32", "dims": [-2]}]})",
                         config_error_code::bad_value, "/output/0/dims/0", "got -2"));
  EXPECT_TRUE(
      fails_with(R"({"input": [{"name": "A", "data_type": "FP32", "dims": [1,1,1,1,1,1,1,1,1]}]})",
                 config_error_code::bad_value, "/input/0/dims", "at most 8 dimensions"));
}

TEST(model_config_json, tensor_names_must_be_present_non_empty_and_unique) {
  EXPECT_TRUE(fails_with(R"({"input": [{"name": "A", "data_type": "FP32", "dims": [1]},
                                       {"name": "A", "data_type": "INT8", "dims": [2]}]})",
                         config_error_code::bad_value, "/input/1/name",
                         "duplicate input name 'A' (first declared at /input/0)"));
  EXPECT_TRUE(fails_with(R"({"output": [{"name": "", "data_type": "FP32", "dims": [1]}]})",
                         config_error_code::bad_value, "/output/0/name", "must not be empty"));
  EXPECT_TRUE(fails_with(R"({"output": [{"name": "A", "dims": [1]}]})",
                         config_error_code::bad_value, "/output/0/data_type",
                         "required field 'data_type' is missing"));
  EXPECT_TRUE(fails_with(R"({"input": [{"data_type": "FP32", "dims": [1]}]})",
                         config_error_code::bad_value, "/input/0/name",
                         "required field 'name' is missing"));
  // The same name as an input and an output is fine.
  EXPECT_NO_THROW((void)load_model_config(R"({
    "input": [{"name": "A", "data_type": "FP32", "dims": [1]}],
    "output": [{"name": "A", "data_type": "FP32", "dims": [1]}]})"));
}

TEST(model_config_json, preferred_batch_size_above_max_batch_size_points_at_the_entry) {
  EXPECT_TRUE(
      fails_with(R"({"max_batch_size": 8, "dynamic_batching": {"preferred_batch_size": [4, 16]}})",
                 config_error_code::bad_value, "/dynamic_batching/preferred_batch_size/1",
                 "dynamic batching preferred size must be <= max batch size (8)"));
}

TEST(model_config_json, default_priority_level_must_be_within_the_levels) {
  EXPECT_TRUE(
      fails_with(R"({"dynamic_batching": {"priority_levels": 2, "default_priority_level": 3}})",
                 config_error_code::bad_value, "/dynamic_batching/default_priority_level",
                 "default priority level must be in range [1, 2]"));
  EXPECT_TRUE(fails_with(R"({"dynamic_batching": {"priority_levels": 2}})",
                         config_error_code::bad_value, "/dynamic_batching/default_priority_level",
                         "in range [1, 2]"));
}

TEST(model_config_json, preserve_ordering_cannot_combine_with_two_priority_levels) {
  EXPECT_TRUE(fails_with(R"({"dynamic_batching": {"preserve_ordering": true,
                             "priority_levels": 2, "default_priority_level": 1}})",
                         config_error_code::bad_value, "/dynamic_batching/preserve_ordering",
                         "preserve_ordering cannot be combined with priority_levels > 1"));
}

TEST(model_config_json, priority_queue_policy_keys_are_checked) {
  EXPECT_TRUE(fails_with(R"({"dynamic_batching": {"priority_levels": 2, "default_priority_level": 1,
                             "priority_queue_policy": {"3": {}}}})",
                         config_error_code::bad_value, "/dynamic_batching/priority_queue_policy/3",
                         "priority level in range [1, 2]"));
  EXPECT_TRUE(fails_with(R"({"dynamic_batching": {"priority_levels": 2, "default_priority_level": 1,
                             "priority_queue_policy": {"one": {}}}})",
                         config_error_code::bad_value,
                         "/dynamic_batching/priority_queue_policy/one",
                         "priority level key must be a decimal integer"));
  EXPECT_TRUE(fails_with(R"({"dynamic_batching": {"priority_levels": 2, "default_priority_level": 1,
                             "priority_queue_policy": {"01": {}}}})",
                         config_error_code::bad_value, "/dynamic_batching/priority_queue_policy/01",
                         "leading zeros"));
}

TEST(model_config_json, instance_group_count_and_gpus_are_checked) {
  EXPECT_TRUE(fails_with(R"({"instance_group": [{"count": 0}]})", config_error_code::bad_value,
                         "/instance_group/0/count", "at least 1"));
  EXPECT_TRUE(fails_with(R"({"instance_group": [{"kind": "KIND_CPU", "gpus": [0]}]})",
                         config_error_code::bad_value, "/instance_group/0/gpus",
                         "kind KIND_CPU must not list gpus"));
  EXPECT_TRUE(fails_with(R"({"instance_group": [{"kind": "KIND_GPU", "gpus": [0, -1]}]})",
                         config_error_code::bad_value, "/instance_group/0/gpus/1",
                         "GPU id must be non-negative"));
}

TEST(model_config_json, model_name_and_version_are_checked) {
  EXPECT_TRUE(fails_with(R"({"name": ""})", config_error_code::bad_value, "/name",
                         "model name must not be empty"));
  EXPECT_TRUE(fails_with(R"({"version": 0})", config_error_code::bad_value, "/version",
                         "model version must be >= 1"));
}

TEST(model_config_json, keys_with_slash_or_tilde_are_escaped_in_the_path) {
  EXPECT_TRUE(fails_with(R"({"parameters": {"a/b~c": {"string_value": 3}}})",
                         config_error_code::wrong_type, "/parameters/a~1b~0c/string_value",
                         "expected a string, got number 3"));
}

TEST(model_config_json, what_starts_with_the_path) {
  try {
    (void)load_model_config(R"({"instance_group": [{"kind": "KIND_XPU"}]})");
    FAIL() << "no config_error";
  } catch (const config_error& e) {
    EXPECT_EQ(std::string{e.what()}.rfind("/instance_group/0/kind: ", 0), 0U) << e.what();
  }
}

TEST(model_config_json, text_that_is_not_json_is_a_parse_error) {
  EXPECT_TRUE(fails_with(R"({"max_batch_size": })", config_error_code::parse_error, "",
                         "parse error at line 1, column 20"));
  EXPECT_TRUE(fails_with("", config_error_code::parse_error, "", "not valid JSON"));
  EXPECT_TRUE(fails_with(R"({"max_batch_size": 8,})", config_error_code::parse_error, "",
                         "not valid JSON"));
}

// ---------------------------------------------------------------------------------- helpers

TEST(model_config_json, json_pointer_escaping_follows_rfc_6901) {
  EXPECT_EQ(servekit::to_json_pointer_escaped("plain"), "plain");
  EXPECT_EQ(servekit::to_json_pointer_escaped("a/b"), "a~1b");
  EXPECT_EQ(servekit::to_json_pointer_escaped("m~n"), "m~0n");
  EXPECT_EQ(servekit::to_json_pointer_escaped("~1"), "~01"); // not "~1" read back as '/'
  EXPECT_EQ(servekit::to_json_pointer_escaped("/~/"), "~1~0~1");
  EXPECT_EQ(servekit::to_json_pointer_escaped(""), "");
}

// ---------------------------------------------------------------------------------- saving

TEST(model_config_json, save_writes_tritons_spelling) {
  const auto j = save_model_config(every_field());
  EXPECT_EQ(j.at("input").at(0).at("data_type"), "TYPE_FP32");
  EXPECT_EQ(j.at("input").at(3).at("data_type"), "TYPE_STRING");
  EXPECT_EQ(j.at("input").at(0).at("dims"), nlohmann::json::parse("[3, -1, -1]"));
  EXPECT_EQ(j.at("input").at(0).at("allow_ragged_batch"), true);
  EXPECT_FALSE(j.at("input").at(0).contains("optional"));
  EXPECT_EQ(j.at("instance_group").at(0).at("kind"), "KIND_GPU");
  EXPECT_EQ(j.at("instance_group").at(1).at("kind"), "KIND_CPU");
  EXPECT_FALSE(j.at("instance_group").at(1).contains("name"));
  const auto& db = j.at("dynamic_batching");
  EXPECT_EQ(db.at("default_queue_policy").at("timeout_action"), "DELAY");
  EXPECT_EQ(db.at("priority_queue_policy").at("1").at("default_timeout_microseconds"), 100);
  EXPECT_EQ(db.at("priority_queue_policy").at("3"), nlohmann::json::object());
  EXPECT_TRUE(db.at("max_queue_delay_microseconds").is_number_unsigned());
  EXPECT_EQ(db.at("max_queue_delay_microseconds").get<std::uint64_t>(),
            std::numeric_limits<std::uint64_t>::max());
  EXPECT_TRUE(j.at("max_batch_size").is_number_integer());
  EXPECT_EQ(j.at("parameters").at("threads"), (nlohmann::json{{"string_value", "4"}}));
}

TEST(model_config_json, save_leaves_out_unset_options) {
  model_options o;
  const auto j = save_model_config(o);
  EXPECT_FALSE(j.contains("dynamic_batching"));
  EXPECT_FALSE(j.contains("max_batch_size"));
  EXPECT_EQ(j, (nlohmann::json{{"name", "model"}, {"version", 1}}));
  o.max_batch_size = 0;
  o.dynamic_batching.emplace();
  const auto k = save_model_config(o);
  EXPECT_EQ(k.at("max_batch_size"), 0);
  EXPECT_EQ(k.at("dynamic_batching"), nlohmann::json::object());
}

TEST(model_config_json, round_trips_a_config_using_every_field) {
  const auto original = every_field();
  const auto saved = save_model_config(original);
  EXPECT_EQ(load_model_config(saved), original);
  EXPECT_EQ(load_model_config(saved.dump(2)), original);
}

TEST(model_config_json, round_trips_small_configs) {
  model_options a;
  EXPECT_EQ(load_model_config(save_model_config(a)), a);

  model_options b;
  b.max_batch_size = 0;
  b.dynamic_batching.emplace();
  b.dynamic_batching->preserve_ordering = true;
  b.instance_group = {{"g", servekit::instance_group_kind::kind_model, 4, {}, std::nullopt}};
  EXPECT_EQ(load_model_config(save_model_config(b)), b);

  model_options c;
  c.max_batch_size = 1;
  c.dynamic_batching.emplace();
  c.dynamic_batching->priority.priority_levels = 1;
  c.dynamic_batching->priority.default_priority_level = 1;
  c.dynamic_batching->preserve_ordering = true;
  c.dynamic_batching->priority.default_queue_policy.timeout_action =
      servekit::timeout_action::delay; // DELAY with a zero timeout may preserve ordering
  EXPECT_EQ(load_model_config(save_model_config(c)), c);

  model_options d;
  d.platform = "ensemble";
  d.ensemble_scheduling.emplace();
  d.ensemble_scheduling->step = {{"only", 4, {{"IN", "X"}}, {{"OUT", "Y"}}}};
  EXPECT_EQ(load_model_config(save_model_config(d)), d);
}

TEST(model_config_json, round_trips_tritons_example_through_save) {
  const auto loaded = load_model_config(R"({"max_batch_size": 8,
    "dynamic_batching": {"preferred_batch_size": [4, 8], "max_queue_delay_microseconds": 100},
    "instance_group": [{"count": 2, "kind": "KIND_CPU"}]})");
  const auto saved = save_model_config(loaded);
  EXPECT_EQ(saved.at("dynamic_batching"),
            nlohmann::json::parse(
                R"({"preferred_batch_size": [4, 8], "max_queue_delay_microseconds": 100})"));
  EXPECT_EQ(saved.at("instance_group"),
            nlohmann::json::parse(R"([{"kind": "KIND_CPU", "count": 2}])"));
  EXPECT_EQ(load_model_config(saved), loaded);
}

} // namespace model_config_json_test
