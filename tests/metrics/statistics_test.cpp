// model_statistics and statistics_snapshot: the counters Triton's statistics extension and
// metrics report, fed with the count examples of Triton's metrics documentation.

#include <servekit/metrics/statistics.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace statistics_test {

using servekit::batch_close_reason;
using servekit::duration_stat;
using servekit::failure_reason;
using servekit::model_statistics;

/// An execution whose requests all succeeded.
model_statistics::execution ok_batch(std::uint64_t requests, std::uint64_t elements,
                                     batch_close_reason reason, std::size_t instance = 0) {
  model_statistics::execution e;
  e.instance = instance;
  e.batch_size = elements;
  e.requests = requests;
  e.ok_requests = requests;
  e.ok_elements = elements;
  e.queue_ns = 1'000 * requests;
  e.request_ok_ns = 10'000 * requests;
  e.compute_input_ns = 100;
  e.compute_infer_ns = 2'000;
  e.compute_output_ns = 300;
  e.reason = reason;
  return e;
}

model_statistics make_stats(std::size_t max_batch_size = 16) {
  return model_statistics(max_batch_size, {"model_0", "model_1"});
}

TEST(model_statistics, starts_at_zero) {
  const auto s = make_stats().snapshot();
  EXPECT_EQ(s.last_inference_ms, 0u);
  EXPECT_EQ(s.inference_count, 0u);
  EXPECT_EQ(s.execution_count, 0u);
  EXPECT_EQ(s.success, duration_stat{});
  EXPECT_EQ(s.fail, duration_stat{});
  EXPECT_EQ(s.pending_request_count, 0u);
  EXPECT_TRUE(s.batch_stats.empty());
  ASSERT_EQ(s.instances.size(), 2u);
  EXPECT_EQ(s.instances[0].name, "model_0");
  EXPECT_EQ(s.instances[1].name, "model_1");
  EXPECT_EQ(s.instances[1].execution_count, 0u);
}

// metrics.md: a single batch-8 request -> requests 1, inferences 8, executions 1.
TEST(model_statistics, one_batch_8_request_counts_1_8_1) {
  auto stats = make_stats();
  stats.record_execution(ok_batch(1, 8, batch_close_reason::queue_drained));
  const auto s = stats.snapshot();
  EXPECT_EQ(s.success.count, 1u);
  EXPECT_EQ(s.inference_count, 8u);
  EXPECT_EQ(s.execution_count, 1u);
  EXPECT_NE(s.last_inference_ms, 0u);
}

// metrics.md: two batch-1 requests batched together -> 2 / 2 / 1.
TEST(model_statistics, two_batch_1_requests_batched_count_2_2_1) {
  auto stats = make_stats();
  stats.record_execution(ok_batch(2, 2, batch_close_reason::queue_delay_expired));
  const auto s = stats.snapshot();
  EXPECT_EQ(s.success.count, 2u);
  EXPECT_EQ(s.inference_count, 2u);
  EXPECT_EQ(s.execution_count, 1u);
}

// metrics.md: batch-1 and batch-8 batched together -> 2 / 9 / 1.
TEST(model_statistics, batch_1_and_batch_8_batched_count_2_9_1) {
  auto stats = make_stats();
  stats.record_execution(ok_batch(2, 9, batch_close_reason::preferred_batch_size));
  const auto s = stats.snapshot();
  EXPECT_EQ(s.success.count, 2u);
  EXPECT_EQ(s.inference_count, 9u);
  EXPECT_EQ(s.execution_count, 1u);
  ASSERT_EQ(s.batch_stats.size(), 1u);
  EXPECT_EQ(s.batch_stats[0].batch_size, 9u);
}

// metrics.md: batch-1 and batch-8 without dynamic batching -> 2 / 9 / 2.
TEST(model_statistics, batch_1_and_batch_8_unbatched_count_2_9_2) {
  auto stats = make_stats();
  stats.record_execution(ok_batch(1, 1, batch_close_reason::no_batching));
  stats.record_execution(ok_batch(1, 8, batch_close_reason::no_batching));
  const auto s = stats.snapshot();
  EXPECT_EQ(s.success.count, 2u);
  EXPECT_EQ(s.inference_count, 9u);
  EXPECT_EQ(s.execution_count, 2u);
  EXPECT_EQ(s.closed_by(batch_close_reason::no_batching), 2u);
}

TEST(model_statistics, durations_are_summed_and_compute_is_charged_per_request) {
  auto stats = make_stats();
  stats.record_execution(ok_batch(3, 3, batch_close_reason::max_batch_size));
  const auto s = stats.snapshot();
  EXPECT_EQ(s.success, (duration_stat{3, 30'000}));
  EXPECT_EQ(s.queue, (duration_stat{3, 3'000}));
  // Each of the three requests is charged the whole batch's compute time.
  EXPECT_EQ(s.compute_input, (duration_stat{3, 300}));
  EXPECT_EQ(s.compute_infer, (duration_stat{3, 6'000}));
  EXPECT_EQ(s.compute_output, (duration_stat{3, 900}));
}

TEST(model_statistics, batch_stats_has_one_entry_per_executed_size_ascending) {
  auto stats = make_stats();
  stats.record_execution(ok_batch(4, 4, batch_close_reason::max_batch_size));
  stats.record_execution(ok_batch(1, 1, batch_close_reason::queue_delay_expired));
  stats.record_execution(ok_batch(2, 4, batch_close_reason::max_batch_size));
  const auto s = stats.snapshot();
  ASSERT_EQ(s.batch_stats.size(), 2u);
  EXPECT_EQ(s.batch_stats[0].batch_size, 1u);
  EXPECT_EQ(s.batch_stats[1].batch_size, 4u);

  const auto* four = s.batch_size(4);
  ASSERT_NE(four, nullptr);
  // Per batch size, each execution counts once with the batch's (not per-request) time.
  EXPECT_EQ(four->compute_input, (duration_stat{2, 200}));
  EXPECT_EQ(four->compute_infer, (duration_stat{2, 4'000}));
  EXPECT_EQ(four->compute_output, (duration_stat{2, 600}));
  EXPECT_EQ(s.batch_size(2), nullptr);
}

TEST(model_statistics, counts_close_reasons_per_batch) {
  auto stats = make_stats();
  stats.record_execution(ok_batch(8, 8, batch_close_reason::max_batch_size));
  stats.record_execution(ok_batch(8, 8, batch_close_reason::max_batch_size));
  stats.record_execution(ok_batch(2, 2, batch_close_reason::shape_mismatch));
  stats.record_execution(ok_batch(1, 1, batch_close_reason::batch_rule));
  const auto s = stats.snapshot();
  EXPECT_EQ(s.closed_by(batch_close_reason::max_batch_size), 2u);
  EXPECT_EQ(s.closed_by(batch_close_reason::shape_mismatch), 1u);
  EXPECT_EQ(s.closed_by(batch_close_reason::batch_rule), 1u);
  EXPECT_EQ(s.closed_by(batch_close_reason::preferred_batch_size), 0u);
  EXPECT_EQ(s.closed_by(batch_close_reason::queue_drained), 0u);
}

TEST(model_statistics, counts_per_instance) {
  auto stats = make_stats();
  stats.record_execution(ok_batch(2, 5, batch_close_reason::max_batch_size, 1));
  stats.record_execution(ok_batch(1, 3, batch_close_reason::max_batch_size, 1));
  stats.record_execution(ok_batch(1, 1, batch_close_reason::max_batch_size, 0));
  const auto s = stats.snapshot();
  ASSERT_EQ(s.instances.size(), 2u);
  EXPECT_EQ(s.instances[0].execution_count, 1u);
  EXPECT_EQ(s.instances[0].inference_count, 1u);
  EXPECT_EQ(s.instances[1].execution_count, 2u);
  EXPECT_EQ(s.instances[1].inference_count, 8u);
  EXPECT_EQ(s.instances[1].compute_infer, (duration_stat{2, 4'000}));
}

TEST(model_statistics, backend_failure_counts_failed_requests_not_inferences) {
  auto stats = make_stats();
  model_statistics::execution e;
  e.batch_size = 3;
  e.requests = 3;
  e.ok_requests = 1;
  e.ok_elements = 1;
  e.request_ok_ns = 500;
  e.request_fail_ns = 4'000;
  e.compute_infer_ns = 100;
  e.backend_failed = true;
  e.reason = batch_close_reason::max_batch_size;
  stats.record_execution(e);
  const auto s = stats.snapshot();
  EXPECT_EQ(s.success, (duration_stat{1, 500}));
  EXPECT_EQ(s.fail, (duration_stat{2, 4'000}));
  EXPECT_EQ(s.failed_by(failure_reason::backend), 2u);
  EXPECT_EQ(s.failed_by(failure_reason::other), 0u);
  EXPECT_EQ(s.inference_count, 1u);
  EXPECT_EQ(s.execution_count, 1u);
  EXPECT_EQ(s.compute_infer, (duration_stat{1, 100}));
}

TEST(model_statistics, early_failures_count_by_reason) {
  auto stats = make_stats();
  stats.record_early_failure(failure_reason::rejected, 700);
  stats.record_early_failure(failure_reason::rejected, 300);
  stats.record_early_failure(failure_reason::canceled, 50);
  const auto s = stats.snapshot();
  EXPECT_EQ(s.fail, (duration_stat{3, 1'050}));
  EXPECT_EQ(s.failed_by(failure_reason::rejected), 2u);
  EXPECT_EQ(s.failed_by(failure_reason::canceled), 1u);
  EXPECT_EQ(s.failed_by(failure_reason::backend), 0u);
  EXPECT_EQ(s.success.count, 0u);
  EXPECT_EQ(s.execution_count, 0u);
}

TEST(model_statistics, pending_goes_up_and_down) {
  auto stats = make_stats();
  stats.add_pending(3);
  stats.add_pending(-1);
  EXPECT_EQ(stats.snapshot().pending_request_count, 2u);
  stats.add_pending(-2);
  EXPECT_EQ(stats.snapshot().pending_request_count, 0u);
}

TEST(failure_reason, names_match_triton_reason_labels) {
  EXPECT_EQ(to_string(failure_reason::rejected), "REJECTED");
  EXPECT_EQ(to_string(failure_reason::canceled), "CANCELED");
  EXPECT_EQ(to_string(failure_reason::backend), "BACKEND");
  EXPECT_EQ(to_string(failure_reason::other), "OTHER");
}

} // namespace statistics_test
