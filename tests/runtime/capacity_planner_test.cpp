// capacity_planner.hpp: the latency fit, the replay of a load through the dynamic batcher in
// virtual time, and the search for the cheapest setting under a p99 target.
#include <servekit/runtime/capacity_planner.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace capacity_planner_test {

using namespace std::chrono_literals;
using servekit::latency_model;
using servekit::plan_setting;

TEST(CapacityPlanner, TheFitRecoversALinearLatencyAndWeighsSizesByCount) {
  // 3 ms + 0.5 ms per request, exactly, at three sizes.
  const auto fit = servekit::fit_latency({{1, 10, 3500}, {4, 5, 5000}, {8, 1, 7000}});
  ASSERT_TRUE(fit);
  EXPECT_NEAR(fit->fixed_us, 3000, 1e-6);
  EXPECT_NEAR(fit->per_element_us, 500, 1e-6);
  EXPECT_NEAR(fit->r2, 1, 1e-9);
  EXPECT_EQ(fit->model.fixed, 3ms);
  // One size only: its mean, as a fixed cost.
  const auto one = servekit::fit_latency({{2, 7, 4200}, {4, 0, 0}});
  ASSERT_TRUE(one);
  EXPECT_NEAR(one->fixed_us, 4200, 1e-6);
  EXPECT_EQ(one->per_element_us, 0);
  EXPECT_FALSE(servekit::fit_latency({}));
}

TEST(CapacityPlanner, AnUnloadedModelAnswersInOneExecution) {
  // One request every 10 ms, each execution 2 ms + 1 ms per request: never a queue.
  plan_setting s;
  s.max_batch_size = 8;
  const auto o =
      servekit::simulate_plan(s, latency_model{2ms, 1ms}, servekit::uniform_arrivals(100, 1));
  EXPECT_EQ(o.requests, 100U);
  EXPECT_EQ(o.refused, 0U);
  EXPECT_DOUBLE_EQ(o.p50_ms, 3.0);
  EXPECT_DOUBLE_EQ(o.p99_ms, 3.0);
  EXPECT_DOUBLE_EQ(o.mean_batch, 1.0);
}

TEST(CapacityPlanner, TheQueueDelayIsWaitedForWhenTheBatchDoesNotFill) {
  plan_setting s;
  s.max_batch_size = 8;
  s.max_queue_delay_microseconds = 4000; // 4 ms: no second request arrives in time
  const auto o =
      servekit::simulate_plan(s, latency_model{2ms, 1ms}, servekit::uniform_arrivals(100, 1));
  EXPECT_DOUBLE_EQ(o.p99_ms, 7.0); // 4 ms waiting + 3 ms executing
}

TEST(CapacityPlanner, ReplicasShareTheLoadRoundRobin) {
  // 1,000 req/s on 2 ms + 0 per request with batches of one: one instance saturates (500/s
  // capacity), two replicas each get 500/s, evenly spaced: exactly their capacity.
  plan_setting one;
  one.max_batch_size = 1;
  const auto arrivals = servekit::uniform_arrivals(1000, 2);
  const auto overloaded = servekit::simulate_plan(one, latency_model{2ms, 0ms}, arrivals);
  EXPECT_GT(overloaded.p99_ms, 500.0) << "the queue grows for the whole run";
  plan_setting two = one;
  two.replicas = 2;
  const auto shared = servekit::simulate_plan(two, latency_model{2ms, 0ms}, arrivals);
  EXPECT_NEAR(shared.p99_ms, 2.0, 1e-3);
  EXPECT_EQ(shared.requests, 2000U);
}

TEST(CapacityPlanner, TheSearchFindsTheCheapestSettingThatMeetsTheTarget) {
  // 1,500 req/s, 4 ms + 0.5 ms per request. One instance: a batch of b takes 4 + 0.5 b ms and
  // serves b requests, so it keeps up when b / (4 + 0.5 b) >= 1.5 per ms: b >= 24 (32 allowed
  // by the space). With a 40 ms target the answer is one instance with large batches; no
  // setting with batches of one (at most 222 req/s) could do it.
  servekit::plan_space space;
  space.max_instances = 2;
  space.max_replicas = 2;
  const auto answer = servekit::plan_capacity(space, latency_model{4ms, 500us},
                                              servekit::uniform_arrivals(1500, 2), 40.0);
  ASSERT_TRUE(answer.best);
  EXPECT_EQ(answer.best->setting.total_instances(), 1U);
  EXPECT_GE(answer.best->setting.max_batch_size, 32);
  EXPECT_LE(answer.best->p99_ms, 40.0);
  for (const auto& o : answer.tried) {
    EXPECT_EQ(o.setting.total_instances(), 1U) << "the search went past the first total that met "
                                                  "the target";
  }
  // A target nothing meets: every total tried, no answer.
  const auto none = servekit::plan_capacity(space, latency_model{4ms, 500us},
                                            servekit::uniform_arrivals(1500, 1), 0.5);
  EXPECT_FALSE(none.best);
  std::size_t most = 0;
  for (const auto& o : none.tried) {
    most = std::max(most, o.setting.total_instances());
  }
  EXPECT_EQ(most, 4U);
}

TEST(CapacityPlanner, PoissonArrivalsHaveTheirRate) {
  const auto a = servekit::poisson_arrivals(1000, 10, 7);
  EXPECT_NEAR(static_cast<double>(a.size()), 10000.0, 400.0);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(a, servekit::poisson_arrivals(1000, 10, 7)) << "seeded";
}

} // namespace capacity_planner_test
