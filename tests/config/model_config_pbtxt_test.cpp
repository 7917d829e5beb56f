// config.pbtxt: Triton's protobuf text format read through libprotobuf into the JSON reader.
// Syntax and validation errors name their line and column, every Triton field parses (those
// servekit does not run are refused by name, as in JSON), every config the reference documents
// print loads, and text -> options -> text and -> JSON agree.
#include <servekit/config/model_config_json.hpp>
#include <servekit/config/model_config_pbtxt.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace model_config_pbtxt_test {

using servekit::config_error;
using servekit::config_error_code;
using servekit::load_model_config;
using servekit::load_model_config_pbtxt;
using servekit::model_config_text;
using servekit::model_options;
using servekit::pbtxt_config_error;
using servekit::save_model_config;
using servekit::save_model_config_pbtxt;
using servekit::text_position;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const std::filesystem::path source_dir{SERVEKIT_SOURCE_DIR};

/// The error loading `text` throws; fails the test when it loads.
std::optional<pbtxt_config_error> error_of(std::string_view text) {
  try {
    (void)load_model_config_pbtxt(text);
  } catch (const pbtxt_config_error& e) {
    return e;
  }
  ADD_FAILURE() << "loaded:\n" << text;
  return std::nullopt;
}

TEST(ModelConfigPbtxt, ReadsTritonTextFormat) {
  const auto options = load_model_config_pbtxt(R"(
name: "simple"
platform: "ensemble_free"   # comments are allowed
max_batch_size: 8
input [
  { name: "INPUT0", data_type: TYPE_INT32, dims: [ 16 ] },
  { name: "INPUT1" data_type: TYPE_INT32 dims: [ -1 ] }
]
output { name: "OUTPUT0" data_type: TYPE_INT32 dims: 16 }
dynamic_batching {
  max_queue_delay_microseconds: 100 preferred_batch_size: [ 4, 8 ]
  priority_levels: 2 default_priority_level: 2
  priority_queue_policy { key: 1 value: { max_queue_size: 4 timeout_action: DELAY } }
}
instance_group [ { count: 2 kind: KIND_CPU } ]
parameters { key: "addend" value: { string_value: "3" } }
)");
  EXPECT_EQ(options.name, "simple");
  EXPECT_EQ(options.platform, "ensemble_free");
  EXPECT_EQ(options.max_batch_size, 8);
  ASSERT_EQ(options.input.size(), 2U);
  EXPECT_EQ(options.input[1].name, "INPUT1");
  EXPECT_EQ(options.input[1].dims, (servekit::shape{-1}));
  ASSERT_EQ(options.output.size(), 1U);
  EXPECT_EQ(options.output[0].dims, (servekit::shape{16}));
  ASSERT_TRUE(options.dynamic_batching);
  EXPECT_EQ(options.dynamic_batching->max_queue_delay_microseconds, 100U);
  EXPECT_EQ(options.dynamic_batching->priority.default_priority_level, 2U);
  EXPECT_EQ(options.dynamic_batching->priority.priority_queue_policy.at(1).max_queue_size, 4U);
  ASSERT_EQ(options.instance_group.size(), 1U);
  EXPECT_EQ(options.instance_group[0].count, 2);
  EXPECT_EQ(options.parameters.at("addend"), "3");

  // The same configuration as config.json reads the same.
  EXPECT_EQ(options, load_model_config(model_config_text{save_model_config_pbtxt(options)}.json()));
}

// Triton's `default_model_filename` (the model file in each version folder) reaches the options
// from either form, and is written back.
TEST(ModelConfigPbtxt, ReadsAndWritesDefaultModelFilename) {
  const auto options = load_model_config_pbtxt(
      "platform: \"pytorch_libtorch\"\ndefault_model_filename: \"traced.pt\"\n");
  EXPECT_EQ(options.platform, "pytorch_libtorch");
  EXPECT_EQ(options.default_model_filename, "traced.pt");
  EXPECT_EQ(load_model_config_pbtxt(save_model_config_pbtxt(options)), options);
  EXPECT_EQ(save_model_config(options).at("default_model_filename"), "traced.pt");
  EXPECT_EQ(load_model_config(R"({"default_model_filename": "net.pt"})").default_model_filename,
            "net.pt");
  EXPECT_FALSE(save_model_config(servekit::model_options{}).contains("default_model_filename"));
}

// Field presence: `max_batch_size: 0` turns batching off even for a backend that declares a
// batch size, which leaving it out does not.
TEST(ModelConfigPbtxt, MaxBatchSizeZeroIsKeptApartFromAbsent) {
  EXPECT_EQ(load_model_config_pbtxt("max_batch_size: 0").max_batch_size, 0);
  EXPECT_FALSE(load_model_config_pbtxt("name: \"m\"").max_batch_size.has_value());
  EXPECT_EQ(model_config_text{"max_batch_size: 0"}.json(),
            nlohmann::json::parse(R"({"max_batch_size": 0})"));
}

TEST(ModelConfigPbtxt, SyntaxErrorNamesLineAndColumn) {
  const auto e =
      error_of("name: \"m\"\nmax_batch_size: 8\ninput [\n  { name: \"X\" dims: [ 4, ] }\n]\n");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), config_error_code::parse_error);
  EXPECT_EQ(e->path(), "");
  ASSERT_TRUE(e->where());
  EXPECT_EQ(*e->where(), (text_position{4, 26}));
  EXPECT_EQ(std::string{e->what()}.rfind("4:26: model config is not valid protobuf text format", 0),
            0U)
      << e->what();
  EXPECT_EQ(e->located_in("m/config.pbtxt").rfind("m/config.pbtxt:4:26: ", 0), 0U);
}

TEST(ModelConfigPbtxt, UnknownFieldAndEnumNameAreSyntaxErrorsWithPosition) {
  const auto typo = error_of("name: \"m\"\n  max_batch_sise: 8\n");
  ASSERT_TRUE(typo && typo->where());
  EXPECT_EQ(*typo->where(), (text_position{2, 17}));
  EXPECT_NE(std::string{typo->what()}.find("max_batch_sise"), std::string::npos) << typo->what();

  const auto type = error_of("input { name: \"X\"\n        data_type: TYPE_FLOAT32 dims: 1 }");
  ASSERT_TRUE(type && type->where());
  EXPECT_EQ(type->where()->line, 2);
  EXPECT_NE(std::string{type->what()}.find("TYPE_FLOAT32"), std::string::npos) << type->what();

  // Triton's oneof scheduling_choice: one scheduler per model.
  const auto both = error_of("dynamic_batching {}\nsequence_batching {}\n");
  ASSERT_TRUE(both && both->where());
  EXPECT_EQ(both->where()->line, 2);
}

TEST(ModelConfigPbtxt, ValidationErrorNamesLineAndColumnOfTheField) {
  const std::string text = "name: \"m\"\n"
                           "max_batch_size: 8\n"
                           "input [\n"
                           "  { name: \"A\" data_type: TYPE_FP32 dims: [ 4 ] },\n"
                           "  { name: \"B\" data_type: TYPE_FP32\n"
                           "    dims: [ 4, -2 ] }\n"
                           "]\n";
  const auto e = error_of(text);
  ASSERT_TRUE(e);
  // The same error as the same config in JSON...
  std::optional<config_error> json_error;
  try {
    (void)load_model_config(model_config_text{text}.json());
  } catch (const config_error& j) {
    json_error = j;
  }
  ASSERT_TRUE(json_error);
  EXPECT_EQ(e->code(), json_error->code());
  EXPECT_EQ(e->path(), json_error->path());
  EXPECT_EQ(e->path().rfind("/input/1/dims", 0), 0U) << e->path();
  // ... placed at the list it is in.
  ASSERT_TRUE(e->where());
  EXPECT_EQ(*e->where(), (text_position{6, 5}));
  EXPECT_EQ(std::string{e->what()}, "6:5: " + std::string{json_error->what()});
}

TEST(ModelConfigPbtxt, MissingFieldIsPlacedAtItsEnclosingField) {
  const auto e = error_of("max_batch_size: 8\n"
                          "input [\n"
                          "  { name: \"A\" data_type: TYPE_FP32 dims: [ 4 ] },\n"
                          "  { name: \"B\" dims: [ 4 ] }\n"
                          "]\n");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->path(), "/input/1/data_type") << e->what();
  ASSERT_TRUE(e->where());
  EXPECT_EQ(*e->where(), (text_position{4, 5})); // an element of a list: its first field

  // In a map's value: placed at the entry.
  const auto w = error_of("max_batch_size: 8\n"
                          "input { name: \"X\" data_type: TYPE_FP32 dims: 4 }\n"
                          "model_warmup {\n"
                          "  name: \"w\" batch_size: 1\n"
                          "  inputs { key: \"Y\" value: { data_type: TYPE_FP32 dims: 4 } }\n"
                          "  inputs { key: \"X\" value: { data_type: TYPE_FP32 } }\n"
                          "}\n");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->path().rfind("/model_warmup/0/inputs/", 0), 0U) << w->what();
  ASSERT_TRUE(w->where());
  EXPECT_GE(w->where()->line, 5) << w->what();
}

TEST(ModelConfigPbtxt, LocateFollowsIndicesAndMapKeys) {
  const model_config_text text{"name: \"m\"\n"
                               "parameters { key: \"a\" value: { string_value: \"1\" } }\n"
                               "parameters {\n"
                               "  key: \"b/c\"\n"
                               "  value: { string_value: \"2\" }\n"
                               "}\n"
                               "output { name: \"A\" dims: 1 }\n"
                               "output { name: \"B\" dims: 1 dims: 2 }\n"
                               "dynamic_batching {\n"
                               "  priority_levels: 2\n"
                               "  priority_queue_policy { key: 2 value: { max_queue_size: 4 } }\n"
                               "}\n"};
  EXPECT_EQ(text.locate("/name"), (text_position{1, 1}));
  EXPECT_EQ(text.locate("/parameters/a"), (text_position{2, 1}));
  EXPECT_EQ(text.locate("/parameters/b~1c/string_value"), (text_position{5, 12}));
  // Elements written one by one: each at its own field name.
  EXPECT_EQ(text.locate("/output/1"), (text_position{8, 1}));
  EXPECT_EQ(text.locate("/output/1/dims/1"), (text_position{8, 28}));
  EXPECT_EQ(text.locate("/dynamic_batching/priority_levels"), (text_position{10, 3}));
  EXPECT_EQ(text.locate("/dynamic_batching/priority_queue_policy/2/max_queue_size"),
            (text_position{11, 43}));
  // Not written: the closest enclosing field that is; the root: nowhere.
  EXPECT_EQ(text.locate("/dynamic_batching/preserve_ordering"), (text_position{9, 1}));
  EXPECT_EQ(text.locate("/output/7"), (text_position{7, 1}));
  EXPECT_EQ(text.locate("/platform"), std::nullopt);
  EXPECT_EQ(text.locate(""), std::nullopt);
}

// Fields servekit does not run parse (the .proto has all of Triton's) and are refused by name
// with the JSON reader's message, at their position.
TEST(ModelConfigPbtxt, EveryTritonFieldParsesAndUnsupportedOnesAreRefusedByName) {
  const std::string text =
      "name: \"m\"\n"
      "optimization { graph { level: 1 }\n"
      "  execution_accelerators { gpu_execution_accelerator: [ { name: "
      "\"tensorrt\" parameters { key: \"precision_mode\" value: \"FP16\" } } ] }\n"
      "  input_pinned_memory { enable: false } eager_batching: true }\n"
      "batch_input [ { kind: BATCH_ITEM_SHAPE target_name: \"S\" "
      "data_type: TYPE_INT32 source_input: \"X\" } ]\n"
      "model_metrics { metric_control [ { metric_identifier { family: "
      "\"nv_inference_first_response_histogram_ms\" } histogram_options { "
      "buckets: [ 1, 2, 4 ] } } ] }\n"
      "model_repository_agents { agents [ { name: \"checksum\" } ] }\n"
      "cc_model_filenames { key: \"7.5:\" value: \"model_t4.plan\" }\n"
      "sequence_batching { iterative_sequence: true }\n";
  const model_config_text parsed{text};
  EXPECT_TRUE(parsed.json().contains("optimization"));
  EXPECT_TRUE(parsed.json().contains("model_metrics"));
  const auto e = error_of(text);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), config_error_code::unknown_field);
  EXPECT_EQ(e->path(), "/batch_input"); // the JSON reader's order of fields
  ASSERT_TRUE(e->where());
  EXPECT_EQ(*e->where(), (text_position{5, 1}));
  try {
    (void)load_model_config(parsed.json());
    ADD_FAILURE() << "loaded";
  } catch (const config_error& j) {
    EXPECT_EQ(std::string{e->what()}, "5:1: " + std::string{j.what()});
  }
  // Without batch_input, the next one.
  const auto next_text =
      text.substr(0, text.find("batch_input")) + text.substr(text.find("model_metrics"));
  const auto next = error_of(next_text);
  ASSERT_TRUE(next && next->where());
  EXPECT_NE(next->path(), "/batch_input");
  EXPECT_EQ(next->where(), model_config_text{next_text}.locate(next->path()));
}

// Every model configuration printed in ../shared/reference/ (copied to tests/config/pbtxt/ with
// its source noted) loads.
TEST(ModelConfigPbtxt, EveryReferenceDocumentConfigLoads) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator{source_dir / "tests/config/pbtxt"}) {
    if (entry.path().extension() == ".pbtxt") {
      files.push_back(entry.path());
    }
  }
  EXPECT_EQ(files.size(), 8U);
  for (const auto& file : files) {
    SCOPED_TRACE(file.filename().string());
    try {
      const auto options = load_model_config_pbtxt(read_file(file));
      EXPECT_EQ(load_model_config_pbtxt(save_model_config_pbtxt(options)), options);
    } catch (const pbtxt_config_error& e) {
      ADD_FAILURE() << e.located_in(file.filename().string());
    }
  }
  const auto ensemble = load_model_config_pbtxt(
      read_file(source_dir / "tests/config/pbtxt/triton_ensemble_model.pbtxt"));
  EXPECT_EQ(ensemble.platform, "ensemble");
  ASSERT_TRUE(ensemble.ensemble_scheduling);
  ASSERT_EQ(ensemble.ensemble_scheduling->step.size(), 3U);
  EXPECT_EQ(ensemble.ensemble_scheduling->step[2].output_map.at("SEGMENTATION_OUTPUT"),
            "SEGMENTATION");
  const auto oldest = load_model_config_pbtxt(
      read_file(source_dir / "tests/config/pbtxt/triton_oldest_stateful_model.pbtxt"));
  ASSERT_TRUE(oldest.sequence_batching);
  EXPECT_EQ(oldest.sequence_batching->control_input.size(), 3U);
}

// The bundled Triton example models (examples/models-triton, config.pbtxt as in Triton's repo).
TEST(ModelConfigPbtxt, BundledTritonExampleModelsLoad) {
  int pbtxt = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator{source_dir / "examples/models-triton"}) {
    const auto file = entry.path() / "config.pbtxt";
    if (!std::filesystem::exists(file)) {
      continue;
    }
    ++pbtxt;
    SCOPED_TRACE(file.string());
    try {
      const auto options = load_model_config_pbtxt(read_file(file));
      EXPECT_EQ(options.name, entry.path().filename().string());
    } catch (const pbtxt_config_error& e) {
      ADD_FAILURE() << e.what();
    }
  }
  EXPECT_GE(pbtxt, 1);
}

// pbtxt -> options -> pbtxt gives the same options, and so does the JSON of either text.
TEST(ModelConfigPbtxt, RoundTripThroughTextAndJsonAgrees) {
  const std::string text = R"(
name: "seq"
backend: "accumulate"
max_batch_size: 4
version_policy { specific { versions: [ 1, 3 ] } }
input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 1 ] } ]
sequence_batching {
  max_sequence_idle_microseconds: 9000000000
  oldest { max_candidate_sequences: 8 preferred_batch_size: [ 2, 4 ] max_queue_delay_microseconds: 50 }
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
  ]
  state [ { input_name: "S_IN" output_name: "S_OUT" data_type: TYPE_FP32 dims: [ 2 ]
            initial_state { data_type: TYPE_FP32 dims: [ 2 ] zero_data: true name: "zero" } } ]
}
instance_group [ { name: "g" count: 2 kind: KIND_CPU
                   rate_limiter { resources [ { name: "R" count: 1 } ] priority: 2 } } ]
model_transaction_policy { decoupled: true final_response_timeout_microseconds: 1000000 }
parameters [ { key: "k" value { string_value: "v" } } ]
)";
  const auto options = load_model_config_pbtxt(text);
  EXPECT_EQ(options.sequence_batching->max_sequence_idle_microseconds, 9000000000U);
  const auto again = save_model_config_pbtxt(options);
  EXPECT_EQ(load_model_config_pbtxt(again), options) << again;
  EXPECT_EQ(save_model_config_pbtxt(load_model_config_pbtxt(again)), again);
  EXPECT_EQ(load_model_config(save_model_config(options)), options);
  EXPECT_EQ(load_model_config(model_config_text{again}.json()), options);
  // Triton's layout: two-space indents, short lists on one line, enums by name.
  EXPECT_NE(again.find("\n  dims: [1]\n"), std::string::npos) << again;
  EXPECT_NE(again.find("data_type: TYPE_INT64"), std::string::npos) << again;
}

} // namespace model_config_pbtxt_test
