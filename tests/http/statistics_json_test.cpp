// to_statistics_json: Triton's statistics-extension `$model_stat` shape plus our extensions.

#include <servekit/http/statistics_json.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace statistics_json_test {

using nlohmann::json;
using servekit::batch_close_reason;
using servekit::model_statistics;
using servekit::statistics_snapshot;
using servekit::to_statistics_json;

statistics_snapshot sample_snapshot() {
  model_statistics stats(8, {"m_0", "m_1"});
  model_statistics::execution e;
  e.instance = 1;
  e.batch_size = 3;
  e.requests = 2;
  e.ok_requests = 2;
  e.ok_elements = 3;
  e.queue_ns = 400;
  e.request_ok_ns = 9'000;
  e.compute_input_ns = 10;
  e.compute_infer_ns = 1'000;
  e.compute_output_ns = 20;
  e.reason = batch_close_reason::queue_delay_expired;
  stats.record_execution(e);
  stats.record_early_failure(servekit::failure_reason::rejected, 77);
  return stats.snapshot();
}

json dur(std::uint64_t count, std::uint64_t ns) { return json{{"count", count}, {"ns", ns}}; }

TEST(statistics_json, has_triton_keys_plus_extensions_only) {
  const auto j = to_statistics_json("simple", "1", sample_snapshot());
  std::vector<std::string> keys;
  for (const auto& [key, value] : j.items()) {
    keys.push_back(key);
  }
  // Triton's keys and servekit's extensions (batch_close_reasons, batch_padding,
  // instance_stats, rate_limiter_wait, warmup); nothing else.
  const std::vector<std::string> expected = {"batch_close_reasons",
                                             "batch_padding",
                                             "batch_stats",
                                             "execution_count",
                                             "inference_count",
                                             "inference_stats",
                                             "instance_stats",
                                             "last_inference",
                                             "memory_usage",
                                             "name",
                                             "rate_limiter_wait",
                                             "response_stats",
                                             "version",
                                             "warmup"};
  EXPECT_EQ(keys, expected); // nlohmann::json objects iterate in key order
  EXPECT_TRUE(j.at("memory_usage").is_array());
  EXPECT_EQ(j.at("name"), "simple");
  EXPECT_EQ(j.at("version"), "1");
  EXPECT_TRUE(j.at("version").is_string());
  EXPECT_TRUE(j.at("response_stats").is_object());
  EXPECT_TRUE(j.at("response_stats").empty());
}

TEST(statistics_json, counts_are_unsigned_numbers) {
  const auto j = to_statistics_json("simple", "1", sample_snapshot());
  EXPECT_TRUE(j.at("inference_count").is_number_unsigned());
  EXPECT_TRUE(j.at("execution_count").is_number_unsigned());
  EXPECT_TRUE(j.at("last_inference").is_number_unsigned());
  EXPECT_TRUE(j.at("inference_stats").at("success").at("count").is_number_unsigned());
  EXPECT_TRUE(j.at("inference_stats").at("success").at("ns").is_number_unsigned());
  EXPECT_EQ(j.at("inference_count"), 3u);
  EXPECT_EQ(j.at("execution_count"), 1u);
  EXPECT_GT(j.at("last_inference").get<std::uint64_t>(), 0u);
}

TEST(statistics_json, inference_stats_hold_every_duration) {
  const auto j = to_statistics_json("simple", "1", sample_snapshot());
  const auto& is = j.at("inference_stats");
  EXPECT_EQ(is.size(), 8u);
  EXPECT_EQ(is.at("success"), dur(2, 9'000));
  EXPECT_EQ(is.at("fail"), dur(1, 77));
  EXPECT_EQ(is.at("queue"), dur(2, 400));
  EXPECT_EQ(is.at("compute_input"), dur(2, 20));
  EXPECT_EQ(is.at("compute_infer"), dur(2, 2'000));
  EXPECT_EQ(is.at("compute_output"), dur(2, 40));
  EXPECT_EQ(is.at("cache_hit"), dur(0, 0));
  EXPECT_EQ(is.at("cache_miss"), dur(0, 0));
}

TEST(statistics_json, batch_stats_list_executed_sizes) {
  const auto j = to_statistics_json("simple", "1", sample_snapshot());
  const json expected = json::array({json{{"batch_size", 3u},
                                          {"compute_input", dur(1, 10)},
                                          {"compute_infer", dur(1, 1'000)},
                                          {"compute_output", dur(1, 20)}}});
  EXPECT_EQ(j.at("batch_stats"), expected);
}

TEST(statistics_json, batch_close_reasons_name_every_reason) {
  const auto j = to_statistics_json("simple", "1", sample_snapshot());
  const json expected = {{"max_batch_size", 0u},      {"preferred_batch_size", 0u},
                         {"queue_delay_expired", 1u}, {"shape_mismatch", 0u},
                         {"queue_drained", 0u},       {"batch_rule", 0u},
                         {"no_batching", 0u},         {"next_request_does_not_fit", 0u}};
  EXPECT_EQ(j.at("batch_close_reasons"), expected);
}

TEST(statistics_json, instance_stats_list_every_instance) {
  const auto j = to_statistics_json("simple", "1", sample_snapshot());
  const json expected = json::array({json{{"name", "m_0"},
                                          {"execution_count", 0u},
                                          {"inference_count", 0u},
                                          {"compute_infer", dur(0, 0)}},
                                     json{{"name", "m_1"},
                                          {"execution_count", 1u},
                                          {"inference_count", 3u},
                                          {"compute_infer", dur(1, 1'000)}}});
  EXPECT_EQ(j.at("instance_stats"), expected);
}

TEST(statistics_json, empty_statistics_give_empty_arrays_not_null) {
  const auto j = to_statistics_json("idle", "2", model_statistics(4, {}).snapshot());
  EXPECT_TRUE(j.at("batch_stats").is_array());
  EXPECT_TRUE(j.at("batch_stats").empty());
  EXPECT_TRUE(j.at("instance_stats").is_array());
  EXPECT_TRUE(j.at("instance_stats").empty());
  EXPECT_EQ(j.at("inference_count"), 0u);
  EXPECT_EQ(j.at("last_inference"), 0u);
}

TEST(statistics_json, adaptive_batching_appears_only_for_adaptive_models) {
  statistics_snapshot stats = sample_snapshot();
  EXPECT_FALSE(to_statistics_json("m", "1", stats).contains("adaptive_batching"));
  servekit::adaptive_batching_snapshot a;
  a.target_latency_us = 50'000;
  a.wait_for = 12;
  a.max_delay_us = 3'000;
  a.per_element_latency_us = 250.5;
  a.requests = 1'000;
  a.within_target = 995;
  a.refused_for_deadline = 7;
  stats.adaptive_batching = a;
  const json j = to_statistics_json("m", "1", stats).at("adaptive_batching");
  EXPECT_EQ(j.at("target_latency_us"), 50'000);
  EXPECT_EQ(j.at("wait_for"), 12);
  EXPECT_EQ(j.at("max_delay_us"), 3'000);
  EXPECT_EQ(j.at("per_element_latency_us"), 250.5);
  EXPECT_EQ(j.at("within_target"), 995);
  EXPECT_EQ(j.at("refused_for_deadline"), 7);
  EXPECT_EQ(j.size(), 14u);
}

TEST(statistics_json, numeric_version_is_a_decimal_string) {
  const auto j = to_statistics_json("simple", std::int64_t{7}, sample_snapshot());
  EXPECT_EQ(j.at("version"), "7");
}

TEST(statistics_json, dumps_and_parses_back) {
  const auto j = to_statistics_json("we\"ird", "1", sample_snapshot());
  const auto back = json::parse(j.dump());
  EXPECT_EQ(back, j);
  EXPECT_EQ(back.at("name"), "we\"ird");
}

} // namespace statistics_json_test
