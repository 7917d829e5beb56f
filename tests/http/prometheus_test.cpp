// prometheus_writer: Triton's metric families in text exposition format 0.0.4.

#include <servekit/http/prometheus.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace prometheus_test {

using servekit::batch_close_reason;
using servekit::failure_reason;
using servekit::model_statistics;
using servekit::prometheus_writer;
using servekit::statistics_snapshot;

std::size_t count_of(std::string_view text, std::string_view needle) {
  std::size_t n = 0;
  for (auto pos = text.find(needle); pos != std::string_view::npos;
       pos = text.find(needle, pos + needle.size())) {
    ++n;
  }
  return n;
}

/// The lines of `text` that start with `prefix`.
std::vector<std::string> lines_starting(std::string_view text, std::string_view prefix) {
  std::vector<std::string> out;
  std::size_t begin = 0;
  while (begin < text.size()) {
    auto end = text.find('\n', begin);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    const auto line = text.substr(begin, end - begin);
    if (line.substr(0, prefix.size()) == prefix) {
      out.emplace_back(line);
    }
    begin = end + 1;
  }
  return out;
}

statistics_snapshot busy_snapshot() {
  statistics_snapshot s;
  s.inference_count = 5;
  s.execution_count = 2;
  s.success = {3, 12'345'678};
  s.fail = {1, 999'000};
  s.queue = {3, 4'500};
  s.compute_input = {3, 1'999};
  s.compute_infer = {3, 30'000};
  s.compute_output = {3, 999};
  s.pending_request_count = 2;
  s.failures[static_cast<std::size_t>(failure_reason::rejected)] = 1;
  s.close_reasons[static_cast<std::size_t>(batch_close_reason::max_batch_size)] = 1;
  s.close_reasons[static_cast<std::size_t>(batch_close_reason::queue_delay_expired)] = 1;
  s.instances.push_back({"a_0", 2, 5, {2, 10'000}});
  return s;
}

// The whole exposition for two models, one busy and one idle whose name needs escaping.
TEST(prometheus_writer, writes_exact_exposition_for_two_models) {
  prometheus_writer w;
  w.add("a", "1", busy_snapshot());
  w.add("we\"ird\\name\nline", "2", statistics_snapshot{});
  const std::string expected =
      R"prom(# HELP nv_inference_request_success Number of successful inference requests; a request counts once whatever its batch size
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="a",version="1"} 3
nv_inference_request_success{model="we\"ird\\name\nline",version="2"} 0
# HELP nv_inference_request_failure Number of failed inference requests by reason; a request counts once whatever its batch size
# TYPE nv_inference_request_failure counter
nv_inference_request_failure{model="a",version="1",reason="REJECTED"} 1
nv_inference_request_failure{model="a",version="1",reason="CANCELED"} 0
nv_inference_request_failure{model="a",version="1",reason="BACKEND"} 0
nv_inference_request_failure{model="a",version="1",reason="OTHER"} 0
nv_inference_request_failure{model="we\"ird\\name\nline",version="2",reason="REJECTED"} 0
nv_inference_request_failure{model="we\"ird\\name\nline",version="2",reason="CANCELED"} 0
nv_inference_request_failure{model="we\"ird\\name\nline",version="2",reason="BACKEND"} 0
nv_inference_request_failure{model="we\"ird\\name\nline",version="2",reason="OTHER"} 0
# HELP nv_inference_count Number of inferences performed; a request of batch size n counts n
# TYPE nv_inference_count counter
nv_inference_count{model="a",version="1"} 5
nv_inference_count{model="we\"ird\\name\nline",version="2"} 0
# HELP nv_inference_exec_count Number of model executions (batches) performed
# TYPE nv_inference_exec_count counter
nv_inference_exec_count{model="a",version="1"} 2
nv_inference_exec_count{model="we\"ird\\name\nline",version="2"} 0
# HELP nv_inference_request_duration_us Cumulative end-to-end duration of successful inference requests, in microseconds
# TYPE nv_inference_request_duration_us counter
nv_inference_request_duration_us{model="a",version="1"} 12345
nv_inference_request_duration_us{model="we\"ird\\name\nline",version="2"} 0
# HELP nv_inference_queue_duration_us Cumulative time successful requests waited in the scheduling queue, in microseconds
# TYPE nv_inference_queue_duration_us counter
nv_inference_queue_duration_us{model="a",version="1"} 4
nv_inference_queue_duration_us{model="we\"ird\\name\nline",version="2"} 0
# HELP nv_inference_compute_input_duration_us Cumulative input preparation time of the executions, charged to each successful request of a batch, in microseconds
# TYPE nv_inference_compute_input_duration_us counter
nv_inference_compute_input_duration_us{model="a",version="1"} 1
nv_inference_compute_input_duration_us{model="we\"ird\\name\nline",version="2"} 0
# HELP nv_inference_compute_infer_duration_us Cumulative model execution time, charged to each successful request of a batch, in microseconds
# TYPE nv_inference_compute_infer_duration_us counter
nv_inference_compute_infer_duration_us{model="a",version="1"} 30
nv_inference_compute_infer_duration_us{model="we\"ird\\name\nline",version="2"} 0
# HELP nv_inference_compute_output_duration_us Cumulative output extraction time of the executions, charged to each successful request of a batch, in microseconds
# TYPE nv_inference_compute_output_duration_us counter
nv_inference_compute_output_duration_us{model="a",version="1"} 0
nv_inference_compute_output_duration_us{model="we\"ird\\name\nline",version="2"} 0
# HELP nv_inference_pending_request_count Number of requests accepted and not yet started by a model instance
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="a",version="1"} 2
nv_inference_pending_request_count{model="we\"ird\\name\nline",version="2"} 0
# HELP nv_cache_num_hits_per_model Number of cache hits per model
# TYPE nv_cache_num_hits_per_model counter
nv_cache_num_hits_per_model{model="a",version="1"} 0
nv_cache_num_hits_per_model{model="we\"ird\\name\nline",version="2"} 0
# HELP nv_cache_num_misses_per_model Number of cache misses per model
# TYPE nv_cache_num_misses_per_model counter
nv_cache_num_misses_per_model{model="a",version="1"} 0
nv_cache_num_misses_per_model{model="we\"ird\\name\nline",version="2"} 0
# HELP nv_cache_hit_duration_per_model Total cache hit duration per model, in microseconds
# TYPE nv_cache_hit_duration_per_model counter
nv_cache_hit_duration_per_model{model="a",version="1"} 0
nv_cache_hit_duration_per_model{model="we\"ird\\name\nline",version="2"} 0
# HELP nv_cache_miss_duration_per_model Total cache miss (lookup and insertion) duration per model, in microseconds
# TYPE nv_cache_miss_duration_per_model counter
nv_cache_miss_duration_per_model{model="a",version="1"} 0
nv_cache_miss_duration_per_model{model="we\"ird\\name\nline",version="2"} 0
# HELP servekit_response_count Number of responses of decoupled requests by outcome (servekit extension)
# TYPE servekit_response_count counter
servekit_response_count{model="a",version="1",outcome="success"} 0
servekit_response_count{model="a",version="1",outcome="fail"} 0
servekit_response_count{model="a",version="1",outcome="empty"} 0
servekit_response_count{model="we\"ird\\name\nline",version="2",outcome="success"} 0
servekit_response_count{model="we\"ird\\name\nline",version="2",outcome="fail"} 0
servekit_response_count{model="we\"ird\\name\nline",version="2",outcome="empty"} 0
# HELP servekit_rate_limiter_wait_count Number of executions that waited for rate-limiter resources (servekit extension)
# TYPE servekit_rate_limiter_wait_count counter
servekit_rate_limiter_wait_count{model="a",version="1"} 0
servekit_rate_limiter_wait_count{model="we\"ird\\name\nline",version="2"} 0
# HELP servekit_rate_limiter_wait_duration_us Cumulative time executions waited for rate-limiter resources, in microseconds (servekit extension)
# TYPE servekit_rate_limiter_wait_duration_us counter
servekit_rate_limiter_wait_duration_us{model="a",version="1"} 0
servekit_rate_limiter_wait_duration_us{model="we\"ird\\name\nline",version="2"} 0
# HELP servekit_batch_close_total Number of batches closed, by the reason the batch stopped growing (servekit extension)
# TYPE servekit_batch_close_total counter
servekit_batch_close_total{model="a",version="1",reason="max_batch_size"} 1
servekit_batch_close_total{model="a",version="1",reason="preferred_batch_size"} 0
servekit_batch_close_total{model="a",version="1",reason="queue_delay_expired"} 1
servekit_batch_close_total{model="a",version="1",reason="shape_mismatch"} 0
servekit_batch_close_total{model="a",version="1",reason="queue_drained"} 0
servekit_batch_close_total{model="a",version="1",reason="batch_rule"} 0
servekit_batch_close_total{model="a",version="1",reason="no_batching"} 0
servekit_batch_close_total{model="a",version="1",reason="next_request_does_not_fit"} 0
servekit_batch_close_total{model="we\"ird\\name\nline",version="2",reason="max_batch_size"} 0
servekit_batch_close_total{model="we\"ird\\name\nline",version="2",reason="preferred_batch_size"} 0
servekit_batch_close_total{model="we\"ird\\name\nline",version="2",reason="queue_delay_expired"} 0
servekit_batch_close_total{model="we\"ird\\name\nline",version="2",reason="shape_mismatch"} 0
servekit_batch_close_total{model="we\"ird\\name\nline",version="2",reason="queue_drained"} 0
servekit_batch_close_total{model="we\"ird\\name\nline",version="2",reason="batch_rule"} 0
servekit_batch_close_total{model="we\"ird\\name\nline",version="2",reason="no_batching"} 0
servekit_batch_close_total{model="we\"ird\\name\nline",version="2",reason="next_request_does_not_fit"} 0
# HELP servekit_batch_padding_elements_total Number of padding rows backends executed beyond the requests' batch sizes (servekit extension)
# TYPE servekit_batch_padding_elements_total counter
servekit_batch_padding_elements_total{model="a",version="1"} 0
servekit_batch_padding_elements_total{model="we\"ird\\name\nline",version="2"} 0
# HELP servekit_padded_exec_count Number of model executions that ran padding rows (servekit extension)
# TYPE servekit_padded_exec_count counter
servekit_padded_exec_count{model="a",version="1"} 0
servekit_padded_exec_count{model="we\"ird\\name\nline",version="2"} 0
# HELP servekit_instance_exec_count Number of model executions per model instance (servekit extension)
# TYPE servekit_instance_exec_count counter
servekit_instance_exec_count{model="a",version="1",instance="a_0"} 2
)prom";
  EXPECT_EQ(w.str(), expected);
}

// docs/metrics.md shows this text as its sample; change both together.
TEST(prometheus_writer, documented_sample_is_exact) {
  model_statistics stats(8, {"resnet50_0_0", "resnet50_0_1"});
  model_statistics::execution e;
  e.instance = 0;
  e.batch_size = 8;
  e.requests = 8;
  e.ok_requests = 8;
  e.ok_elements = 8;
  e.queue_ns = 8 * 1'200'000;
  e.request_ok_ns = 8 * 4'500'000;
  e.compute_input_ns = 150'000;
  e.compute_infer_ns = 3'000'000;
  e.compute_output_ns = 100'000;
  e.reason = batch_close_reason::max_batch_size;
  stats.record_execution(e);
  e.instance = 1;
  e.batch_size = 3;
  e.requests = 2;
  e.ok_requests = 2;
  e.ok_elements = 3;
  e.queue_ns = 2 * 500'000;
  e.request_ok_ns = 2 * 2'900'000;
  e.compute_input_ns = 80'000;
  e.compute_infer_ns = 2'200'000;
  e.compute_output_ns = 70'000;
  e.padding_elements = 1; // run as a batch of 4, e.g. to replay a CUDA graph
  e.reason = batch_close_reason::queue_delay_expired;
  stats.record_execution(e);
  stats.record_early_failure(failure_reason::rejected, 10'000'000);
  stats.add_pending(4);

  prometheus_writer w;
  w.add("resnet50", 1, stats.snapshot());
  const std::string expected =
      R"prom(# HELP nv_inference_request_success Number of successful inference requests; a request counts once whatever its batch size
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="resnet50",version="1"} 10
# HELP nv_inference_request_failure Number of failed inference requests by reason; a request counts once whatever its batch size
# TYPE nv_inference_request_failure counter
nv_inference_request_failure{model="resnet50",version="1",reason="REJECTED"} 1
nv_inference_request_failure{model="resnet50",version="1",reason="CANCELED"} 0
nv_inference_request_failure{model="resnet50",version="1",reason="BACKEND"} 0
nv_inference_request_failure{model="resnet50",version="1",reason="OTHER"} 0
# HELP nv_inference_count Number of inferences performed; a request of batch size n counts n
# TYPE nv_inference_count counter
nv_inference_count{model="resnet50",version="1"} 11
# HELP nv_inference_exec_count Number of model executions (batches) performed
# TYPE nv_inference_exec_count counter
nv_inference_exec_count{model="resnet50",version="1"} 2
# HELP nv_inference_request_duration_us Cumulative end-to-end duration of successful inference requests, in microseconds
# TYPE nv_inference_request_duration_us counter
nv_inference_request_duration_us{model="resnet50",version="1"} 41800
# HELP nv_inference_queue_duration_us Cumulative time successful requests waited in the scheduling queue, in microseconds
# TYPE nv_inference_queue_duration_us counter
nv_inference_queue_duration_us{model="resnet50",version="1"} 10600
# HELP nv_inference_compute_input_duration_us Cumulative input preparation time of the executions, charged to each successful request of a batch, in microseconds
# TYPE nv_inference_compute_input_duration_us counter
nv_inference_compute_input_duration_us{model="resnet50",version="1"} 1360
# HELP nv_inference_compute_infer_duration_us Cumulative model execution time, charged to each successful request of a batch, in microseconds
# TYPE nv_inference_compute_infer_duration_us counter
nv_inference_compute_infer_duration_us{model="resnet50",version="1"} 28400
# HELP nv_inference_compute_output_duration_us Cumulative output extraction time of the executions, charged to each successful request of a batch, in microseconds
# TYPE nv_inference_compute_output_duration_us counter
nv_inference_compute_output_duration_us{model="resnet50",version="1"} 940
# HELP nv_inference_pending_request_count Number of requests accepted and not yet started by a model instance
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="resnet50",version="1"} 4
# HELP nv_cache_num_hits_per_model Number of cache hits per model
# TYPE nv_cache_num_hits_per_model counter
nv_cache_num_hits_per_model{model="resnet50",version="1"} 0
# HELP nv_cache_num_misses_per_model Number of cache misses per model
# TYPE nv_cache_num_misses_per_model counter
nv_cache_num_misses_per_model{model="resnet50",version="1"} 0
# HELP nv_cache_hit_duration_per_model Total cache hit duration per model, in microseconds
# TYPE nv_cache_hit_duration_per_model counter
nv_cache_hit_duration_per_model{model="resnet50",version="1"} 0
# HELP nv_cache_miss_duration_per_model Total cache miss (lookup and insertion) duration per model, in microseconds
# TYPE nv_cache_miss_duration_per_model counter
nv_cache_miss_duration_per_model{model="resnet50",version="1"} 0
# HELP servekit_response_count Number of responses of decoupled requests by outcome (servekit extension)
# TYPE servekit_response_count counter
servekit_response_count{model="resnet50",version="1",outcome="success"} 0
servekit_response_count{model="resnet50",version="1",outcome="fail"} 0
servekit_response_count{model="resnet50",version="1",outcome="empty"} 0
# HELP servekit_rate_limiter_wait_count Number of executions that waited for rate-limiter resources (servekit extension)
# TYPE servekit_rate_limiter_wait_count counter
servekit_rate_limiter_wait_count{model="resnet50",version="1"} 0
# HELP servekit_rate_limiter_wait_duration_us Cumulative time executions waited for rate-limiter resources, in microseconds (servekit extension)
# TYPE servekit_rate_limiter_wait_duration_us counter
servekit_rate_limiter_wait_duration_us{model="resnet50",version="1"} 0
# HELP servekit_batch_close_total Number of batches closed, by the reason the batch stopped growing (servekit extension)
# TYPE servekit_batch_close_total counter
servekit_batch_close_total{model="resnet50",version="1",reason="max_batch_size"} 1
servekit_batch_close_total{model="resnet50",version="1",reason="preferred_batch_size"} 0
servekit_batch_close_total{model="resnet50",version="1",reason="queue_delay_expired"} 1
servekit_batch_close_total{model="resnet50",version="1",reason="shape_mismatch"} 0
servekit_batch_close_total{model="resnet50",version="1",reason="queue_drained"} 0
servekit_batch_close_total{model="resnet50",version="1",reason="batch_rule"} 0
servekit_batch_close_total{model="resnet50",version="1",reason="no_batching"} 0
servekit_batch_close_total{model="resnet50",version="1",reason="next_request_does_not_fit"} 0
# HELP servekit_batch_padding_elements_total Number of padding rows backends executed beyond the requests' batch sizes (servekit extension)
# TYPE servekit_batch_padding_elements_total counter
servekit_batch_padding_elements_total{model="resnet50",version="1"} 1
# HELP servekit_padded_exec_count Number of model executions that ran padding rows (servekit extension)
# TYPE servekit_padded_exec_count counter
servekit_padded_exec_count{model="resnet50",version="1"} 1
# HELP servekit_instance_exec_count Number of model executions per model instance (servekit extension)
# TYPE servekit_instance_exec_count counter
servekit_instance_exec_count{model="resnet50",version="1",instance="resnet50_0_0"} 1
servekit_instance_exec_count{model="resnet50",version="1",instance="resnet50_0_1"} 1
)prom";
  EXPECT_EQ(w.str(), expected);
}

TEST(prometheus_writer, help_and_type_appear_once_per_family) {
  prometheus_writer w;
  w.add("a", "1", busy_snapshot());
  w.add("b", "1", busy_snapshot());
  w.add("b", "2", busy_snapshot());
  const auto text = w.str();
  const std::vector<std::string_view> families = {"nv_inference_request_success",
                                                  "nv_inference_request_failure",
                                                  "nv_inference_count",
                                                  "nv_inference_exec_count",
                                                  "nv_inference_request_duration_us",
                                                  "nv_inference_queue_duration_us",
                                                  "nv_inference_compute_input_duration_us",
                                                  "nv_inference_compute_infer_duration_us",
                                                  "nv_inference_compute_output_duration_us",
                                                  "nv_inference_pending_request_count",
                                                  "nv_cache_num_hits_per_model",
                                                  "nv_cache_num_misses_per_model",
                                                  "nv_cache_hit_duration_per_model",
                                                  "nv_cache_miss_duration_per_model",
                                                  "servekit_response_count",
                                                  "servekit_rate_limiter_wait_count",
                                                  "servekit_rate_limiter_wait_duration_us",
                                                  "servekit_batch_close_total",
                                                  "servekit_batch_padding_elements_total",
                                                  "servekit_padded_exec_count",
                                                  "servekit_instance_exec_count"};
  for (const auto f : families) {
    EXPECT_EQ(count_of(text, "# HELP " + std::string(f) + " "), 1u) << f;
    EXPECT_EQ(count_of(text, "# TYPE " + std::string(f) + " "), 1u) << f;
  }
  // No other family, and the families come in the documented order.
  const auto types = lines_starting(text, "# TYPE ");
  ASSERT_EQ(types.size(), families.size());
  for (std::size_t i = 0; i < families.size(); ++i) {
    EXPECT_EQ(types[i].substr(0, 7 + families[i].size() + 1),
              "# TYPE " + std::string(families[i]) + " ")
        << i;
  }
}

TEST(prometheus_writer, one_sample_per_model_per_label_value) {
  prometheus_writer w;
  w.add("a", "1", busy_snapshot());
  w.add("b", "1", busy_snapshot());
  const auto text = w.str();
  EXPECT_EQ(lines_starting(text, "nv_inference_count{").size(), 2u);
  EXPECT_EQ(lines_starting(text, "nv_inference_request_failure{").size(), 2u * 4u);
  EXPECT_EQ(lines_starting(text, "servekit_batch_close_total{").size(),
            2u * servekit::batch_close_reason_count);
  EXPECT_EQ(lines_starting(text, "servekit_instance_exec_count{").size(), 2u);
}

TEST(prometheus_writer, only_pending_is_a_gauge) {
  prometheus_writer w;
  w.add("a", "1", busy_snapshot());
  const auto text = w.str();
  EXPECT_EQ(count_of(text, " gauge\n"), 1u);
  EXPECT_EQ(count_of(text, "# TYPE nv_inference_pending_request_count gauge\n"), 1u);
  EXPECT_EQ(count_of(text, " counter\n"), 20u);
}

TEST(prometheus_writer, adaptive_models_add_their_families) {
  statistics_snapshot plain;
  statistics_snapshot adaptive;
  servekit::adaptive_batching_snapshot a;
  a.wait_for = 8;
  a.max_delay_us = 2'500;
  a.recent_within_target = 0.995;
  a.refused_for_deadline = 3;
  adaptive.adaptive_batching = a;
  prometheus_writer w;
  w.add("a", "1", plain);
  EXPECT_EQ(w.str().find("servekit_adaptive_"), std::string::npos);
  w.add("b", "1", adaptive);
  const auto text = w.str();
  EXPECT_NE(text.find("# TYPE servekit_adaptive_wait_for gauge\n"
                      "servekit_adaptive_wait_for{model=\"b\",version=\"1\"} 8\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("servekit_adaptive_max_delay_us{model=\"b\",version=\"1\"} 2500\n"),
            std::string::npos);
  EXPECT_NE(text.find("servekit_adaptive_recent_within_target{model=\"b\",version=\"1\"} 0.995\n"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE servekit_adaptive_refused_total counter\n"
                      "servekit_adaptive_refused_total{model=\"b\",version=\"1\"} 3\n"),
            std::string::npos);
  EXPECT_EQ(lines_starting(text, "servekit_adaptive_wait_for{").size(), 1u);
}

TEST(prometheus_writer, generative_models_add_vllm_families) {
  statistics_snapshot plain;
  statistics_snapshot llm;
  servekit::generation_snapshot g;
  g.num_requests_running = 3;
  g.num_requests_waiting = 2;
  g.kv_cache_usage = 0.25;
  g.block_size = 16;
  g.num_blocks = 1024;
  g.generation_tokens = 40;
  g.time_to_first_token.buckets[0] = 1; // <= 1 ms
  g.time_to_first_token.buckets[8] = 2; // <= 250 ms
  g.time_to_first_token.count = 3;
  g.time_to_first_token.sum_seconds = 0.5;
  llm.generation = g;
  prometheus_writer w;
  w.add("a", "1", plain);
  w.add("lm", "1", llm);
  const auto text = w.str();
  const std::string labels = R"({model="lm",version="1",model_name="lm")";
  for (const std::string& line : std::vector<std::string>{
           "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running" + labels + "} 3\n",
           "vllm:num_requests_waiting" + labels + "} 2\n",
           "vllm:kv_cache_usage_perc" + labels + "} 0.25\n",
           "vllm:cache_config_info" + labels + R"(,block_size="16",num_gpu_blocks="1024"} 1)",
           "vllm:generation_tokens_total" + labels + "} 40\n",
           "# TYPE vllm:time_to_first_token_seconds histogram\n",
           "vllm:time_to_first_token_seconds_bucket" + labels + R"(,le="0.001"} 1)",
           "vllm:time_to_first_token_seconds_bucket" + labels + R"(,le="0.1"} 1)",
           "vllm:time_to_first_token_seconds_bucket" + labels + R"(,le="0.25"} 3)",
           "vllm:time_to_first_token_seconds_bucket" + labels + R"(,le="+Inf"} 3)",
           "vllm:time_to_first_token_seconds_sum" + labels + "} 0.5\n",
           "vllm:time_to_first_token_seconds_count" + labels + "} 3\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  EXPECT_EQ(text.find(R"(model_name="a")"), std::string::npos) << "a is not generative";
  prometheus_writer none;
  none.add("a", "1", plain);
  EXPECT_EQ(none.str().find("vllm:"), std::string::npos);
}

TEST(prometheus_writer, escapes_label_values) {
  statistics_snapshot s;
  s.instances.push_back({"in\"st\\0\n", 4, 0, {}});
  prometheus_writer w;
  w.add("m\\", "v\"1\n", s);
  const auto text = w.str();
  EXPECT_NE(text.find("nv_inference_count{model=\"m\\\\\",version=\"v\\\"1\\n\"} 0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(",instance=\"in\\\"st\\\\0\\n\"} 4\n"), std::string::npos) << text;
  // Every raw line feed ends a line: no sample line is split by a label value.
  for (const auto& line : lines_starting(text, "nv_")) {
    EXPECT_NE(line.find("} "), std::string::npos) << line;
  }
}

TEST(prometheus_writer, durations_are_truncated_microseconds) {
  statistics_snapshot s;
  s.success = {1, 1'999};
  s.queue = {1, 999};
  s.compute_infer = {1, 2'000'001};
  prometheus_writer w;
  w.add("m", "1", s);
  const auto text = w.str();
  EXPECT_NE(text.find("nv_inference_request_duration_us{model=\"m\",version=\"1\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("nv_inference_queue_duration_us{model=\"m\",version=\"1\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("nv_inference_compute_infer_duration_us{model=\"m\",version=\"1\"} 2000\n"),
            std::string::npos);
}

// Triton adds only successful requests to nv_inference_request_duration_us; failed requests
// are in the statistics' fail.ns and nowhere in the metrics.
TEST(prometheus_writer, request_duration_counts_successful_requests_only) {
  statistics_snapshot s;
  s.success = {2, 5'000};
  s.fail = {7, 1'000'000};
  prometheus_writer w;
  w.add("m", "1", s);
  EXPECT_NE(w.str().find("nv_inference_request_duration_us{model=\"m\",version=\"1\"} 5\n"),
            std::string::npos);
}

TEST(prometheus_writer, writes_large_counters_exactly) {
  statistics_snapshot s;
  s.inference_count = 18'446'744'073'709'551'615u; // UINT64_MAX, no float rounding
  prometheus_writer w;
  w.add("m", "1", s);
  EXPECT_NE(w.str().find("nv_inference_count{model=\"m\",version=\"1\"} 18446744073709551615\n"),
            std::string::npos);
}

TEST(prometheus_writer, leaves_out_instance_family_without_instances) {
  prometheus_writer w;
  w.add("m", "1", statistics_snapshot{});
  const auto text = w.str();
  EXPECT_EQ(text.find("servekit_instance_exec_count"), std::string::npos);
  EXPECT_NE(text.find("servekit_batch_close_total"), std::string::npos);
}

TEST(prometheus_writer, empty_writer_writes_nothing_and_clear_resets) {
  prometheus_writer w;
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(w.str(), "");
  w.add("m", "1", statistics_snapshot{});
  EXPECT_EQ(w.size(), 1u);
  EXPECT_FALSE(w.str().empty());
  w.clear();
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(w.str(), "");
}

TEST(prometheus_writer, numeric_version_is_written_in_decimal) {
  prometheus_writer w;
  w.add("m", std::int64_t{42}, statistics_snapshot{});
  w.add("m", 0, statistics_snapshot{});
  const auto text = w.str();
  EXPECT_NE(text.find("nv_inference_count{model=\"m\",version=\"42\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("nv_inference_count{model=\"m\",version=\"0\"} 0\n"), std::string::npos);
}

TEST(prometheus_writer, write_appends_to_existing_text) {
  prometheus_writer w;
  w.add("m", "1", statistics_snapshot{});
  std::string out = "# before\n";
  w.write(out);
  EXPECT_EQ(out, "# before\n" + w.str());
}

// The count examples of Triton's metrics documentation, from live statistics to metrics.
TEST(prometheus_writer, reports_triton_count_examples_from_live_statistics) {
  const auto run = [](std::vector<std::pair<std::uint64_t, std::uint64_t>> batches) {
    model_statistics stats(16, {"m_0"});
    for (const auto& [requests, elements] : batches) {
      model_statistics::execution e;
      e.batch_size = elements;
      e.requests = requests;
      e.ok_requests = requests;
      e.ok_elements = elements;
      e.reason = batch_close_reason::queue_delay_expired;
      stats.record_execution(e);
    }
    prometheus_writer w;
    w.add("m", "1", stats.snapshot());
    return w.str();
  };
  const auto has = [](const std::string& text, std::string_view family, int value) {
    return text.find(std::string(family) + "{model=\"m\",version=\"1\"} " + std::to_string(value) +
                     "\n") != std::string::npos;
  };
  const auto one_bs8 = run({{1, 8}});
  EXPECT_TRUE(has(one_bs8, "nv_inference_request_success", 1));
  EXPECT_TRUE(has(one_bs8, "nv_inference_count", 8));
  EXPECT_TRUE(has(one_bs8, "nv_inference_exec_count", 1));

  const auto two_bs1_batched = run({{2, 2}});
  EXPECT_TRUE(has(two_bs1_batched, "nv_inference_request_success", 2));
  EXPECT_TRUE(has(two_bs1_batched, "nv_inference_count", 2));
  EXPECT_TRUE(has(two_bs1_batched, "nv_inference_exec_count", 1));

  const auto bs1_bs8_batched = run({{2, 9}});
  EXPECT_TRUE(has(bs1_bs8_batched, "nv_inference_request_success", 2));
  EXPECT_TRUE(has(bs1_bs8_batched, "nv_inference_count", 9));
  EXPECT_TRUE(has(bs1_bs8_batched, "nv_inference_exec_count", 1));

  const auto bs1_bs8_unbatched = run({{1, 1}, {1, 8}});
  EXPECT_TRUE(has(bs1_bs8_unbatched, "nv_inference_request_success", 2));
  EXPECT_TRUE(has(bs1_bs8_unbatched, "nv_inference_count", 9));
  EXPECT_TRUE(has(bs1_bs8_unbatched, "nv_inference_exec_count", 2));
  EXPECT_NE(bs1_bs8_unbatched.find(
                "servekit_instance_exec_count{model=\"m\",version=\"1\",instance=\"m_0\"} 2\n"),
            std::string::npos);
}

} // namespace prometheus_test
