// to_statistics_json: Triton's statistics-extension `$model_stat` shape plus our extensions.

#include <servekit/metrics/statistics_json.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace {

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

TEST(statistics_json, has_triton_model_stat_keys) {
  const auto j = to_statistics_json("simple", "1", sample_snapshot());
  for (const char* key : {"name", "version", "last_inference", "inference_count", "execution_count",
                          "inference_stats", "batch_stats", "response_stats"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["name"], "simple");
  EXPECT_EQ(j["version"], "1");
  EXPECT_TRUE(j["version"].is_string());
  EXPECT_TRUE(j["response_stats"].is_object());
  EXPECT_TRUE(j["response_stats"].empty());
}

TEST(statistics_json, counts_are_unsigned_numbers) {
  const auto j = to_statistics_json("simple", "1", sample_snapshot());
  EXPECT_TRUE(j["inference_count"].is_number_unsigned());
  EXPECT_TRUE(j["execution_count"].is_number_unsigned());
  EXPECT_TRUE(j["last_inference"].is_number_unsigned());
  EXPECT_TRUE(j["inference_stats"]["success"]["count"].is_number_unsigned());
  EXPECT_TRUE(j["inference_stats"]["success"]["ns"].is_number_unsigned());
  EXPECT_EQ(j["inference_count"], 3u);
  EXPECT_EQ(j["execution_count"], 1u);
  EXPECT_GT(j["last_inference"].get<std::uint64_t>(), 0u);
}

TEST(statistics_json, inference_stats_hold_every_duration) {
  const auto j = to_statistics_json("simple", "1", sample_snapshot());
  const auto& is = j["inference_stats"];
  EXPECT_EQ(is.size(), 8u);
  EXPECT_EQ(is["success"], dur(2, 9'000));
  EXPECT_EQ(is["fail"], dur(1, 77));
  EXPECT_EQ(is["queue"], dur(2, 400));
  EXPECT_EQ(is["compute_input"], dur(2, 20));
  EXPECT_EQ(is["compute_infer"], dur(2, 2'000));
  EXPECT_EQ(is["compute_output"], dur(2, 40));
  EXPECT_EQ(is["cache_hit"], dur(0, 0));
  EXPECT_EQ(is["cache_miss"], dur(0, 0));
}

TEST(statistics_json, batch_stats_list_executed_sizes) {
  const auto j = to_statistics_json("simple", "1", sample_snapshot());
  const json expected = json::array({json{{"batch_size", 3u},
                                          {"compute_input", dur(1, 10)},
                                          {"compute_infer", dur(1, 1'000)},
                                          {"compute_output", dur(1, 20)}}});
  EXPECT_EQ(j["batch_stats"], expected);
}

TEST(statistics_json, batch_close_reasons_name_every_reason) {
  const auto j = to_statistics_json("simple", "1", sample_snapshot());
  const json expected = {{"max_batch_size", 0u}, {"preferred_batch_size", 0u},
                         {"queue_delay_expired", 1u}, {"shape_mismatch", 0u},
                         {"queue_drained", 0u},  {"batch_rule", 0u},
                         {"no_batching", 0u}};
  EXPECT_EQ(j["batch_close_reasons"], expected);
}

TEST(statistics_json, instance_stats_list_every_instance) {
  const auto j = to_statistics_json("simple", "1", sample_snapshot());
  const json expected = json::array(
      {json{{"name", "m_0"}, {"execution_count", 0u}, {"inference_count", 0u},
            {"compute_infer", dur(0, 0)}},
       json{{"name", "m_1"}, {"execution_count", 1u}, {"inference_count", 3u},
            {"compute_infer", dur(1, 1'000)}}});
  EXPECT_EQ(j["instance_stats"], expected);
}

TEST(statistics_json, empty_statistics_give_empty_arrays_not_null) {
  const auto j = to_statistics_json("idle", "2", model_statistics(4, {}).snapshot());
  EXPECT_TRUE(j["batch_stats"].is_array());
  EXPECT_TRUE(j["batch_stats"].empty());
  EXPECT_TRUE(j["instance_stats"].is_array());
  EXPECT_TRUE(j["instance_stats"].empty());
  EXPECT_EQ(j["inference_count"], 0u);
  EXPECT_EQ(j["last_inference"], 0u);
}

TEST(statistics_json, dumps_and_parses_back) {
  const auto j = to_statistics_json("we\"ird", "1", sample_snapshot());
  const auto back = json::parse(j.dump());
  EXPECT_EQ(back, j);
  EXPECT_EQ(back["name"], "we\"ird");
}

} // namespace
