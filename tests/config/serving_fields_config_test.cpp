// JSON reading and writing of instance_group[].rate_limiter, model_transaction_policy,
// response_cache, model_warmup, version_policy and dynamic_batching.adaptive.

#include <servekit/config/model_config_json.hpp>
#include <servekit/config/model_config_pbtxt.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace serving_fields_config_test {

using servekit::config_error;
using servekit::config_error_code;
using servekit::load_model_config;
using servekit::model_options;
using servekit::save_model_config;
using servekit::version_policy_options;
using servekit::warmup_data_kind;

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
           << "got code " << static_cast<int>(e.code()) << ", path '" << e.path() << "', message '"
           << what << "'; expected path '" << path << "', message containing '" << message_part
           << "'";
  }
  return ::testing::AssertionFailure() << "no config_error for " << text;
}

// ------------------------------------------------------------------------ rate_limiter

TEST(serving_fields_config, loads_tritons_rate_limiter_example) {
  const auto o = load_model_config(R"({"instance_group": [{"count": 1, "kind": "KIND_GPU",
    "gpus": [0], "rate_limiter": {"resources": [{"name": "R1", "count": 4},
    {"name": "R2", "global": true, "count": "2"}], "priority": 2}}]})");
  ASSERT_EQ(o.instance_group.size(), 1U);
  const auto& limiter = o.instance_group[0].rate_limiter;
  ASSERT_TRUE(limiter.has_value());
  EXPECT_EQ(limiter->priority, 2U);
  ASSERT_EQ(limiter->resources.size(), 2U);
  EXPECT_EQ(limiter->resources[0], (servekit::rate_limiter_resource{"R1", false, 4}));
  EXPECT_EQ(limiter->resources[1], (servekit::rate_limiter_resource{"R2", true, 2}));
}

TEST(serving_fields_config, rate_limiter_defaults) {
  const auto o = load_model_config(R"({"instance_group": [{"rate_limiter": {}}, {}]})");
  ASSERT_TRUE(o.instance_group[0].rate_limiter.has_value());
  EXPECT_EQ(*o.instance_group[0].rate_limiter, servekit::rate_limiter_options{});
  EXPECT_EQ(o.instance_group[0].rate_limiter->priority, 1U);
  EXPECT_FALSE(o.instance_group[1].rate_limiter.has_value());
}

TEST(serving_fields_config, rate_limiter_errors_name_the_field) {
  EXPECT_TRUE(fails_with(R"({"instance_group": [{"rate_limiter": {"resources": [{"count": 1}]}}]})",
                         config_error_code::bad_value,
                         "/instance_group/0/rate_limiter/resources/0/name",
                         "required field 'name' is missing"));
  EXPECT_TRUE(fails_with(R"({"instance_group": [{"rate_limiter": {"resources": [{"name": ""}]}}]})",
                         config_error_code::bad_value,
                         "/instance_group/0/rate_limiter/resources/0/name", "must not be empty"));
  EXPECT_TRUE(fails_with(
      R"({"instance_group": [{"rate_limiter": {"resources": [{"name": "R", "count": -1}]}}]})",
      config_error_code::bad_value, "/instance_group/0/rate_limiter/resources/0/count",
      "non-negative"));
  EXPECT_TRUE(fails_with(
      R"({"instance_group": [{"rate_limiter": {"resources": [{"name": "R", "global": 1}]}}]})",
      config_error_code::wrong_type, "/instance_group/0/rate_limiter/resources/0/global",
      "a boolean"));
  EXPECT_TRUE(fails_with(R"({"instance_group": [{"rate_limiter": {"priority": "high"}}]})",
                         config_error_code::bad_value, "/instance_group/0/rate_limiter/priority",
                         "expected an integer"));
  EXPECT_TRUE(fails_with(R"({"instance_group": [{"rate_limiter": {"resource": []}}]})",
                         config_error_code::unknown_field,
                         "/instance_group/0/rate_limiter/resource", "did you mean 'resources'?"));
  EXPECT_TRUE(fails_with(R"({"instance_group": [{"rate_limiter": {"resources": [
      {"name": "R", "count": 1}, {"name": "R", "count": 2}]}}]})",
                         config_error_code::bad_value,
                         "/instance_group/0/rate_limiter/resources/1/name",
                         "duplicate rate limiter resource 'R'"));
}

TEST(serving_fields_config, resource_both_global_and_per_device_is_tritons_error) {
  EXPECT_TRUE(fails_with(R"({"instance_group": [
      {"rate_limiter": {"resources": [{"name": "R", "count": 1}]}},
      {"rate_limiter": {"resources": [{"name": "X"}, {"name": "R", "global": true}]}}]})",
                         config_error_code::bad_value, "/instance_group/1/rate_limiter/resources/1",
                         "Resource \"R\" is present as both global and device-specific resource "
                         "in the model configuration."));
}

// ------------------------------------------------------------ model_transaction_policy

TEST(serving_fields_config, loads_model_transaction_policy) {
  const auto o = load_model_config(R"({"model_transaction_policy": {"decoupled": true,
    "final_response_timeout_microseconds": "18446744073709551615"}})");
  ASSERT_TRUE(o.model_transaction_policy.has_value());
  EXPECT_TRUE(o.model_transaction_policy->decoupled);
  EXPECT_EQ(o.model_transaction_policy->final_response_timeout_microseconds,
            std::numeric_limits<std::uint64_t>::max());
  const auto empty = load_model_config(R"({"model_transaction_policy": {}})");
  ASSERT_TRUE(empty.model_transaction_policy.has_value());
  EXPECT_FALSE(empty.model_transaction_policy->decoupled);
}

TEST(serving_fields_config, model_transaction_policy_errors) {
  EXPECT_TRUE(fails_with(R"({"model_transaction_policy": {"decoupled": "true"}})",
                         config_error_code::wrong_type, "/model_transaction_policy/decoupled",
                         "a boolean"));
  EXPECT_TRUE(fails_with(R"({"model_transaction_policy": {"decouple": true}})",
                         config_error_code::unknown_field, "/model_transaction_policy/decouple",
                         "did you mean 'decoupled'?"));
  EXPECT_TRUE(fails_with(
      R"({"model_transaction_policy": {"final_response_timeout_microseconds": 100}})",
      config_error_code::bad_value, "/model_transaction_policy/final_response_timeout_microseconds",
      "decoupled models only"));
}

// ---------------------------------------------------------------- dynamic_batching.adaptive

TEST(serving_fields_config, loads_adaptive_batching_from_json_and_pbtxt) {
  const auto json = load_model_config(R"({"max_batch_size": 32, "dynamic_batching": {"adaptive":
    {"target_latency_microseconds": 50000, "target_percentile": 95, "deadline_admission": true,
     "max_queue_delay_bound_microseconds": "20000", "rate_window_microseconds": 250000}}})");
  ASSERT_TRUE(json.dynamic_batching.has_value());
  const auto& a = json.dynamic_batching->adaptive;
  EXPECT_EQ(a.target_latency_microseconds, 50000U);
  EXPECT_EQ(a.target_percentile, 95.0F);
  EXPECT_TRUE(a.deadline_admission);
  EXPECT_EQ(a.max_queue_delay_bound_microseconds, 20000U);
  EXPECT_EQ(a.rate_window_microseconds, 250000U);
  const auto pbtxt = servekit::load_model_config_pbtxt(R"(max_batch_size: 32
dynamic_batching {
  adaptive {
    target_latency_microseconds: 50000
    target_percentile: 95
    max_queue_delay_bound_microseconds: 20000
    rate_window_microseconds: 250000
    deadline_admission: true
  }
})");
  EXPECT_EQ(pbtxt, json);
  // Written back (JSON and config.pbtxt) and read again, unchanged; absent, the defaults.
  EXPECT_EQ(load_model_config(save_model_config(json)), json);
  EXPECT_EQ(servekit::load_model_config_pbtxt(servekit::save_model_config_pbtxt(json)), json);
  const auto plain = load_model_config(R"({"dynamic_batching": {}})");
  EXPECT_EQ(plain.dynamic_batching->adaptive, servekit::adaptive_batching_options{});
  EXPECT_FALSE(save_model_config(plain).at("dynamic_batching").contains("adaptive"));
}

TEST(serving_fields_config, adaptive_batching_errors_name_the_field) {
  EXPECT_TRUE(fails_with(R"({"dynamic_batching": {"adaptive": {"target_percentile": 0}}})",
                         config_error_code::bad_value,
                         "/dynamic_batching/adaptive/target_percentile", "(0, 100]"));
  EXPECT_TRUE(fails_with(R"({"dynamic_batching": {"adaptive": {"target_percentile": 101}}})",
                         config_error_code::bad_value,
                         "/dynamic_batching/adaptive/target_percentile", "(0, 100]"));
  EXPECT_TRUE(fails_with(R"({"dynamic_batching": {"adaptive": {"rate_window_microseconds": 0}}})",
                         config_error_code::bad_value,
                         "/dynamic_batching/adaptive/rate_window_microseconds", "positive"));
  EXPECT_TRUE(fails_with(R"({"dynamic_batching": {"adaptive": {"deadline_admission": true}}})",
                         config_error_code::bad_value,
                         "/dynamic_batching/adaptive/deadline_admission",
                         "set target_latency_microseconds"));
  EXPECT_TRUE(fails_with(R"({"dynamic_batching": {"adaptive": {"target_latency": 5}}})",
                         config_error_code::unknown_field,
                         "/dynamic_batching/adaptive/target_latency",
                         "unknown field 'target_latency' (known: "
                         "target_latency_microseconds"));
}

// ---------------------------------------------------------------------- response_cache

TEST(serving_fields_config, loads_response_cache) {
  const auto o = load_model_config(R"({"response_cache": {"enable": true}})");
  ASSERT_TRUE(o.response_cache.has_value());
  EXPECT_TRUE(o.response_cache->enable);
  EXPECT_FALSE(load_model_config(R"({"response_cache": {}})").response_cache->enable);
  EXPECT_TRUE(fails_with(R"({"response_cache": {"enable": 1}})", config_error_code::wrong_type,
                         "/response_cache/enable", "a boolean"));
  EXPECT_TRUE(fails_with(R"({"response_cache": {"enabled": true}})",
                         config_error_code::unknown_field, "/response_cache/enabled",
                         "did you mean 'enable'?"));
}

TEST(serving_fields_config, response_cache_refuses_decoupled_and_sequence_models) {
  EXPECT_TRUE(fails_with(R"({"name": "m", "response_cache": {"enable": true},
      "model_transaction_policy": {"decoupled": true}})",
                         config_error_code::bad_value, "/response_cache/enable",
                         "Response Cache does not currently support model m with 'decoupled' "
                         "transaction policy"));
  EXPECT_TRUE(fails_with(R"({"name": "s", "max_batch_size": 1, "response_cache": {"enable": true},
      "sequence_batching": {}})",
                         config_error_code::bad_value, "/response_cache/enable",
                         "Response Cache does not currently support model s with sequence "
                         "batching scheduler"));
  // A disabled cache is fine on either.
  EXPECT_NO_THROW((void)load_model_config(R"({"response_cache": {"enable": false},
      "model_transaction_policy": {"decoupled": true}})"));
}

// ------------------------------------------------------------------------ model_warmup

TEST(serving_fields_config, loads_tritons_warmup_example) {
  const auto o = load_model_config(R"({"max_batch_size": 8, "model_warmup": [
    {"name": "zero sample", "batch_size": 8, "count": 3, "inputs": {
      "INPUT0": {"data_type": "TYPE_FP32", "dims": [16], "zero_data": true},
      "INPUT1": {"data_type": "TYPE_INT32", "dims": ["2", 4], "random_data": true}}},
    {"name": "from file", "inputs": {
      "TEXT": {"data_type": "TYPE_STRING", "dims": [1], "input_data_file": "text.bin"}}}]})");
  ASSERT_EQ(o.model_warmup.size(), 2U);
  const auto& zero = o.model_warmup[0];
  EXPECT_EQ(zero.name, "zero sample");
  EXPECT_EQ(zero.batch_size, 8U);
  EXPECT_EQ(zero.count, 3U);
  ASSERT_EQ(zero.inputs.size(), 2U);
  EXPECT_EQ(zero.inputs.at("INPUT0").type, servekit::data_type::fp32);
  EXPECT_EQ(zero.inputs.at("INPUT0").dims, (std::vector<std::int64_t>{16}));
  EXPECT_EQ(zero.inputs.at("INPUT0").kind, warmup_data_kind::zero_data);
  EXPECT_EQ(zero.inputs.at("INPUT1").dims, (std::vector<std::int64_t>{2, 4}));
  EXPECT_EQ(zero.inputs.at("INPUT1").kind, warmup_data_kind::random_data);
  const auto& file = o.model_warmup[1];
  EXPECT_EQ(file.batch_size, 1U); // left out: 1 (Triton's protobuf default 0 skips the sample)
  EXPECT_EQ(file.count, 0U);
  EXPECT_EQ(file.inputs.at("TEXT").type, servekit::data_type::bytes);
  EXPECT_EQ(file.inputs.at("TEXT").kind, warmup_data_kind::input_data_file);
  EXPECT_EQ(file.inputs.at("TEXT").input_data_file, "text.bin");
}

TEST(serving_fields_config, warmup_input_needs_exactly_one_data_source) {
  EXPECT_TRUE(fails_with(R"({"model_warmup": [{"inputs": {"A": {"data_type": "FP32",
      "dims": [1]}}}]})",
                         config_error_code::bad_value, "/model_warmup/0/inputs/A",
                         "set one of 'zero_data', 'random_data' or 'input_data_file'"));
  EXPECT_TRUE(fails_with(R"({"model_warmup": [{"inputs": {"A": {"data_type": "FP32",
      "dims": [1], "zero_data": true, "random_data": true}}}]})",
                         config_error_code::bad_value, "/model_warmup/0/inputs/A/random_data",
                         "'zero_data' and 'random_data' are both set"));
  EXPECT_TRUE(fails_with(R"({"model_warmup": [{"inputs": {"A": {"data_type": "FP32",
      "dims": [1], "zero_data": false}}}]})",
                         config_error_code::bad_value, "/model_warmup/0/inputs/A/zero_data",
                         "must be true"));
}

TEST(serving_fields_config, warmup_inputs_are_checked) {
  EXPECT_TRUE(fails_with(R"({"model_warmup": [{"inputs": {"A": {"data_type": "FP32",
      "dims": [-1], "zero_data": true}}}]})",
                         config_error_code::bad_value, "/model_warmup/0/inputs/A/dims/0",
                         "-1 is not allowed"));
  EXPECT_TRUE(fails_with(R"({"model_warmup": [{"inputs": {"A": {"data_type": "FLOAT",
      "dims": [1], "zero_data": true}}}]})",
                         config_error_code::bad_value, "/model_warmup/0/inputs/A/data_type",
                         "expected one of"));
  EXPECT_TRUE(
      fails_with(R"({"model_warmup": [{"inputs": {"A": {"dims": [1], "zero_data": true}}}]})",
                 config_error_code::bad_value, "/model_warmup/0/inputs/A/data_type",
                 "required field 'data_type' is missing"));
  EXPECT_TRUE(fails_with(R"({"model_warmup": [{"inputs": {"A": {"data_type": "FP32",
      "zero_data": true}}}]})",
                         config_error_code::bad_value, "/model_warmup/0/inputs/A/dims",
                         "required field 'dims' is missing"));
  EXPECT_TRUE(fails_with(R"({"model_warmup": [{"inputs": {"A": {"data_type": "FP32",
      "dims": [1], "input_data_file": "../secret"}}}]})",
                         config_error_code::bad_value, "/model_warmup/0/inputs/A/input_data_file",
                         "under the model's warmup/ folder"));
  EXPECT_TRUE(fails_with(R"({"model_warmup": [{"inputs": []}]})", config_error_code::wrong_type,
                         "/model_warmup/0/inputs", "expected an object"));
  EXPECT_TRUE(fails_with(R"({"model_warmup": [{"batch_size": -1}]})", config_error_code::bad_value,
                         "/model_warmup/0/batch_size", "non-negative"));
  EXPECT_TRUE(fails_with(R"({"model_warmup": [{"input": {}}]})", config_error_code::unknown_field,
                         "/model_warmup/0/input", "did you mean 'inputs'?"));
  EXPECT_TRUE(fails_with(R"({"model_warmup": {}})", config_error_code::wrong_type, "/model_warmup",
                         "an array"));
}

TEST(serving_fields_config, warmup_batch_size_must_fit_the_model) {
  EXPECT_TRUE(fails_with(R"({"max_batch_size": 4, "model_warmup": [{}, {"name": "big",
      "batch_size": 5}]})",
                         config_error_code::bad_value, "/model_warmup/1/batch_size",
                         "warmup sample 'big' has batch_size 5, more than the model's "
                         "max_batch_size 4"));
  EXPECT_TRUE(fails_with(R"({"max_batch_size": 0, "model_warmup": [{"batch_size": 2}]})",
                         config_error_code::bad_value, "/model_warmup/0/batch_size",
                         "the model does not batch"));
  // 0 is accepted (the sample is skipped, as Triton does).
  EXPECT_EQ(load_model_config(R"({"max_batch_size": 0, "model_warmup": [{"batch_size": 0}]})")
                .model_warmup[0]
                .batch_size,
            0U);
}

TEST(serving_fields_config, ensembles_take_no_warmup) {
  EXPECT_TRUE(fails_with(R"({"platform": "ensemble", "ensemble_scheduling": {"step": [
      {"model_name": "a", "model_version": -1}]}, "model_warmup": [{}]})",
                         config_error_code::bad_value, "/model_warmup",
                         "must not set 'model_warmup'"));
}

// ---------------------------------------------------------------------- version_policy

TEST(serving_fields_config, loads_each_version_policy) {
  using kind = version_policy_options::kind_type;
  const auto latest = load_model_config(R"({"version_policy": {"latest": {"num_versions": 2}}})");
  ASSERT_TRUE(latest.version_policy.has_value());
  EXPECT_EQ(latest.version_policy->kind, kind::latest);
  EXPECT_EQ(latest.version_policy->num_versions, 2U);

  const auto all = load_model_config(R"({"version_policy": {"all": {}}})");
  EXPECT_EQ(all.version_policy->kind, kind::all);

  const auto specific =
      load_model_config(R"({"version_policy": {"specific": {"versions": [1, "3"]}}})");
  EXPECT_EQ(specific.version_policy->kind, kind::specific);
  EXPECT_EQ(specific.version_policy->versions, (std::vector<std::int64_t>{1, 3}));

  const auto none_chosen = load_model_config(R"({"version_policy": {}})");
  EXPECT_EQ(none_chosen.version_policy, version_policy_options{}); // latest 1, Triton's default
  const auto latest_default = load_model_config(R"({"version_policy": {"latest": {}}})");
  EXPECT_EQ(latest_default.version_policy->num_versions, 1U);
  EXPECT_FALSE(load_model_config("{}").version_policy.has_value());
}

TEST(serving_fields_config, version_policy_errors) {
  EXPECT_TRUE(fails_with(R"({"version_policy": {"latest": {}, "all": {}}})",
                         config_error_code::bad_value, "/version_policy/all",
                         "'latest' and 'all' are both set"));
  EXPECT_TRUE(fails_with(R"({"version_policy": {"latest": {"num_versions": 0}}})",
                         config_error_code::bad_value, "/version_policy/latest/num_versions",
                         "at least 1"));
  EXPECT_TRUE(fails_with(R"({"version_policy": {"specific": {"versions": [0]}}})",
                         config_error_code::bad_value, "/version_policy/specific/versions/0",
                         "must be >= 1"));
  EXPECT_TRUE(fails_with(R"({"version_policy": {"specific": {"versions": [2, 2]}}})",
                         config_error_code::bad_value, "/version_policy/specific/versions/1",
                         "listed twice"));
  EXPECT_TRUE(fails_with(R"({"version_policy": {"specific": {}}})", config_error_code::bad_value,
                         "/version_policy/specific/versions", "at least one version"));
  EXPECT_TRUE(fails_with(R"({"version_policy": {"all": {"x": 1}}})",
                         config_error_code::unknown_field, "/version_policy/all/x",
                         "unknown field 'x'"));
  EXPECT_TRUE(fails_with(R"({"version_policy": {"lastest": {}}})", config_error_code::unknown_field,
                         "/version_policy/lastest", "did you mean 'latest'?"));
}

// ------------------------------------------------------------------------ round trips

/// Every new field at a non-default value.
model_options every_serving_field() {
  model_options o;
  o.name = "served";
  o.max_batch_size = 8;
  servekit::rate_limiter_options limiter;
  limiter.resources = {{"R1", false, 4}, {"R2", true, 0}};
  limiter.priority = 0;
  o.instance_group = {{"g", servekit::instance_group_kind::kind_cpu, 2, {}, limiter},
                      {"h",
                       servekit::instance_group_kind::kind_cpu,
                       1,
                       {},
                       servekit::rate_limiter_options{{{"R1", false, 1}}, 3}}};
  o.model_transaction_policy = servekit::model_transaction_policy_options{true, 250000};
  o.response_cache = servekit::response_cache_options{false};
  servekit::model_warmup_options zero;
  zero.name = "zeros";
  zero.batch_size = 8;
  zero.count = 2;
  zero.inputs["A"] = {servekit::data_type::fp32, {3, 0}, warmup_data_kind::zero_data, ""};
  zero.inputs["B/~"] = {servekit::data_type::bytes, {}, warmup_data_kind::random_data, ""};
  servekit::model_warmup_options file;
  file.batch_size = 0;
  file.inputs["C"] = {
      servekit::data_type::int8, {2}, warmup_data_kind::input_data_file, "sub/c.bin"};
  o.model_warmup = {zero, file, servekit::model_warmup_options{}};
  o.version_policy = version_policy_options{version_policy_options::kind_type::specific, 1, {4, 2}};
  return o;
}

TEST(serving_fields_config, round_trips_every_serving_field) {
  const auto original = every_serving_field();
  const auto saved = save_model_config(original);
  EXPECT_EQ(load_model_config(saved), original);
  EXPECT_EQ(load_model_config(saved.dump(2)), original);
}

TEST(serving_fields_config, round_trips_each_version_policy_and_the_cache) {
  for (const auto& policy :
       {version_policy_options{},
        version_policy_options{version_policy_options::kind_type::latest, 5, {}},
        version_policy_options{version_policy_options::kind_type::all, 1, {}}}) {
    model_options o;
    o.version_policy = policy;
    o.response_cache = servekit::response_cache_options{true};
    o.model_transaction_policy = servekit::model_transaction_policy_options{};
    EXPECT_EQ(load_model_config(save_model_config(o)), o);
  }
}

TEST(serving_fields_config, save_writes_tritons_spelling) {
  const auto saved = save_model_config(every_serving_field());
  EXPECT_EQ(saved.at("instance_group").at(0).at("rate_limiter"),
            nlohmann::json::parse(R"({"resources": [{"name": "R1", "count": 4},
                {"name": "R2", "global": true, "count": 0}], "priority": 0})"));
  EXPECT_EQ(saved.at("model_transaction_policy"),
            nlohmann::json::parse(
                R"({"decoupled": true, "final_response_timeout_microseconds": 250000})"));
  EXPECT_EQ(saved.at("response_cache"), nlohmann::json::object());
  EXPECT_EQ(saved.at("model_warmup").at(0),
            nlohmann::json::parse(R"({"name": "zeros", "batch_size": 8, "count": 2, "inputs": {
                "A": {"data_type": "TYPE_FP32", "dims": [3, 0], "zero_data": true},
                "B/~": {"data_type": "TYPE_STRING", "dims": [], "random_data": true}}})"));
  EXPECT_EQ(saved.at("model_warmup").at(1).at("inputs").at("C"),
            nlohmann::json::parse(
                R"({"data_type": "TYPE_INT8", "dims": [2], "input_data_file": "sub/c.bin"})"));
  EXPECT_EQ(saved.at("version_policy"),
            nlohmann::json::parse(R"({"specific": {"versions": [4, 2]}})"));
  model_options plain;
  plain.version_policy.emplace();
  EXPECT_EQ(save_model_config(plain).at("version_policy"),
            nlohmann::json::parse(R"({"latest": {"num_versions": 1}})"));
}

} // namespace serving_fields_config_test
