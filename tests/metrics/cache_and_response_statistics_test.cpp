// Statistics of the response cache, decoupled responses, rate-limiter waits and warmup: the
// snapshot, the statistics JSON and the Prometheus families.

#include <servekit/http/prometheus.hpp>
#include <servekit/http/statistics_json.hpp>
#include <servekit/metrics/statistics.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <thread>
#include <vector>

namespace cache_and_response_statistics_test {

using servekit::model_statistics;
using servekit::response_outcome;

TEST(cache_statistics, hits_count_as_successes_but_not_as_inferences_or_executions) {
  model_statistics stats(4, {});
  stats.record_cache_hit(/*lookup_ns=*/300, /*request_ns=*/1'000);
  stats.record_cache_hit(500, 2'000);
  stats.record_cache_miss(700);
  const auto s = stats.snapshot();
  EXPECT_EQ(s.cache_hit.count, 2U);
  EXPECT_EQ(s.cache_hit.ns, 800U);
  EXPECT_EQ(s.cache_miss.count, 1U);
  EXPECT_EQ(s.cache_miss.ns, 700U);
  // Triton: success and queue include cache hits; inference and execution counts do not.
  EXPECT_EQ(s.success.count, 2U);
  EXPECT_EQ(s.success.ns, 3'000U);
  EXPECT_EQ(s.queue.count, 2U);
  EXPECT_EQ(s.inference_count, 0U);
  EXPECT_EQ(s.execution_count, 0U);
  EXPECT_EQ(s.compute_infer.count, 0U);

  const nlohmann::json j = servekit::to_statistics_json("m", 1, s);
  EXPECT_EQ(j.at("inference_stats").at("cache_hit"), (nlohmann::json{{"count", 2}, {"ns", 800}}));
  EXPECT_EQ(j.at("inference_stats").at("cache_miss"), (nlohmann::json{{"count", 1}, {"ns", 700}}));

  servekit::prometheus_writer w;
  w.add("m", 1, s);
  const std::string text = w.str();
  EXPECT_NE(text.find("nv_cache_num_hits_per_model{model=\"m\",version=\"1\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("nv_cache_num_misses_per_model{model=\"m\",version=\"1\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("nv_cache_hit_duration_per_model{model=\"m\",version=\"1\"} 0\n"),
            std::string::npos); // 800 ns is 0 whole microseconds
}

TEST(response_statistics, counts_each_response_index_by_outcome) {
  model_statistics stats(1, {});
  EXPECT_TRUE(stats.snapshot().response_stats.empty()); // a model that never streamed
  stats.record_response(0, response_outcome::success, 10);
  stats.record_response(1, response_outcome::success, 20);
  stats.record_response(0, response_outcome::success, 30);
  stats.record_response(2, response_outcome::empty, 40);
  stats.record_response(1, response_outcome::fail, 50);
  const auto s = stats.snapshot();
  ASSERT_EQ(s.response_stats.size(), 3U);
  EXPECT_EQ(s.response_stats[0].index, 0U);
  EXPECT_EQ(s.response_stats[0].success.count, 2U);
  EXPECT_EQ(s.response_stats[0].success.ns, 40U);
  EXPECT_EQ(s.response_stats[1].fail.count, 1U);
  EXPECT_EQ(s.response_stats[1].success.count, 1U);
  EXPECT_EQ(s.response_stats[2].empty_response.count, 1U);

  const nlohmann::json j = servekit::to_statistics_json("m", 1, s).at("response_stats");
  EXPECT_EQ(j.at("0").at("success").at("count"), 2);
  EXPECT_EQ(j.at("1").at("fail").at("ns"), 50);
  EXPECT_EQ(j.at("2").at("empty_response").at("count"), 1);

  servekit::prometheus_writer w;
  w.add("m", 1, s);
  const std::string text = w.str();
  EXPECT_NE(text.find("servekit_response_count{model=\"m\",version=\"1\",outcome=\"success\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("servekit_response_count{model=\"m\",version=\"1\",outcome=\"empty\"} 1\n"),
            std::string::npos);
}

TEST(response_statistics, indices_beyond_the_lock_free_table_are_kept_in_order) {
  model_statistics stats(1, {});
  const std::uint64_t late = model_statistics::response_index_capacity + 5;
  stats.record_response(late, response_outcome::success, 7);
  stats.record_response(3, response_outcome::success, 1);
  const auto s = stats.snapshot();
  ASSERT_EQ(s.response_stats.size(), 2U);
  EXPECT_EQ(s.response_stats[0].index, 3U);
  EXPECT_EQ(s.response_stats[1].index, late);
  EXPECT_EQ(s.response_stats[1].success.ns, 7U);
}

// Many threads racing to record the first response: one table is published, nothing is lost
// (run under TSan in CI).
TEST(response_statistics, concurrent_first_responses_lose_nothing) {
  model_statistics stats(1, {});
  constexpr int threads = 4;
  constexpr int per_thread = 1000;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (int i = 0; i < per_thread; ++i) {
        stats.record_response(static_cast<std::uint64_t>(i % 3), response_outcome::success, 1);
      }
    });
  }
  for (auto& t : pool) {
    t.join();
  }
  std::uint64_t total = 0;
  for (const auto& r : stats.snapshot().response_stats) {
    total += r.success.count;
  }
  EXPECT_EQ(total, static_cast<std::uint64_t>(threads * per_thread));
}

TEST(rate_limiter_and_warmup_statistics, appear_in_the_snapshot_json_and_prometheus) {
  model_statistics stats(1, {});
  stats.record_rate_limiter_wait(2'500'000);
  stats.record_warmup(1'000);
  stats.record_warmup(2'000);
  const auto s = stats.snapshot();
  EXPECT_EQ(s.rate_limiter_wait.count, 1U);
  EXPECT_EQ(s.warmup.count, 2U);
  EXPECT_EQ(s.warmup.ns, 3'000U);
  EXPECT_EQ(s.execution_count, 0U); // warmup counts nowhere else
  const nlohmann::json j = servekit::to_statistics_json("m", 1, s);
  EXPECT_EQ(j.at("rate_limiter_wait"), (nlohmann::json{{"count", 1}, {"ns", 2'500'000}}));
  EXPECT_EQ(j.at("warmup"), (nlohmann::json{{"count", 2}, {"ns", 3'000}}));
  servekit::prometheus_writer w;
  w.add("m", 1, s);
  EXPECT_NE(
      w.str().find("servekit_rate_limiter_wait_duration_us{model=\"m\",version=\"1\"} 2500\n"),
      std::string::npos);
}

} // namespace cache_and_response_statistics_test
