// dynamic_batcher<Rule>: the compile-time custom batch rule (Triton's custom batching hook,
// TRITONBACKEND_ModelBatchIncludeRequest), applied on top of the standard rules, in virtual time.
#include <servekit/runtime/simulated_shell.hpp>
#include <servekit/schedule/dynamic_batcher.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace batch_rule_test {

using namespace std::chrono_literals;

/// Admits requests while their summed "cost" (the request's priority field, reused here as a
/// stand-in for a token count) stays within 10.
struct cost_budget {
  std::uint64_t spent = 0;
  void begin_batch() noexcept { spent = 0; }
  bool include(const servekit::request& r) noexcept {
    spent += r.priority;
    return spent <= 10;
  }
};
static_assert(servekit::batch_rule<cost_budget>);

struct batch_rule_test : ::testing::Test {
  servekit::scheduler_settings settings() {
    servekit::scheduler_settings s;
    s.max_batch_size = 8;
    return s;
  }
  void submit(servekit::simulated_shell<servekit::dynamic_batcher<cost_budget>>& sim,
              std::int64_t at_us, std::string id, std::uint64_t cost) {
    servekit::request r;
    r.id = std::move(id);
    r.priority = cost; // one priority level: the priority only feeds the rule here
    sim.submit_at(servekit::time_point{} + std::chrono::microseconds(at_us), std::move(r),
                  [this](servekit::response&& resp) { answered.push_back(resp.id); });
  }
  std::vector<std::string> answered;
};

TEST_F(batch_rule_test, the_rule_closes_a_batch_before_the_request_it_declines) {
  servekit::simulated_shell<servekit::dynamic_batcher<cost_budget>> sim{
      settings(), 1, {1000us, {}}};
  submit(sim, 0, "x", 1);
  submit(sim, 100, "a", 4);
  submit(sim, 200, "b", 5);
  submit(sim, 300, "c", 4); // 4 + 5 + 4 > 10: declined, starts the next batch
  submit(sim, 400, "d", 6);
  sim.run();
  ASSERT_EQ(sim.batches().size(), 3U);
  EXPECT_EQ(sim.batches()[1].request_ids, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(sim.batches()[1].reason, servekit::batch_close_reason::batch_rule);
  EXPECT_EQ(sim.batches()[2].request_ids, (std::vector<std::string>{"c", "d"}));
  EXPECT_EQ(answered.size(), 5U);
  EXPECT_EQ(sim.statistics().closed_by(servekit::batch_close_reason::batch_rule), 1U);
}

TEST_F(batch_rule_test, a_request_the_rule_declines_even_alone_runs_alone_instead_of_stalling) {
  servekit::simulated_shell<servekit::dynamic_batcher<cost_budget>> sim{
      settings(), 1, {1000us, {}}};
  submit(sim, 0, "huge", 50);
  submit(sim, 0, "small", 1);
  sim.run();
  ASSERT_EQ(sim.batches().size(), 2U);
  EXPECT_EQ(sim.batches()[0].request_ids, (std::vector<std::string>{"huge"}));
  EXPECT_EQ(sim.batches()[1].request_ids, (std::vector<std::string>{"small"}));
}

} // namespace batch_rule_test
