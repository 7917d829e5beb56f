// default_scheduler_core: Triton's default scheduler (triton-semantics.md §2.1): every request is
// its own execution, in arrival order, on whichever instance is free. Checked in virtual time
// through the simulated shell; times are µs since the simulation began.

#include <servekit/core/batch_close_reason.hpp>
#include <servekit/core/cancellation.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/status.hpp>
#include <servekit/runtime/simulated_shell.hpp>
#include <servekit/schedule/default_scheduler.hpp>
#include <servekit/schedule/scheduler.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace default_scheduler_test {

using servekit::batch_close_reason;

servekit::time_point at_us(std::int64_t n) {
  return servekit::time_point{} + std::chrono::microseconds(n);
}

std::int64_t us_of(servekit::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t - servekit::time_point{}).count();
}

servekit::scheduler_settings unbatched(std::int32_t max_batch_size = 8) {
  servekit::scheduler_settings s;
  s.model_name = "m";
  s.max_batch_size = max_batch_size;
  return s;
}

/// One executed request: when it started, on which instance, how many elements.
struct execution {
  std::string id;
  std::int64_t start_us = 0;
  std::size_t instance = 0;
  std::int64_t elements = 1;
  friend bool operator==(const execution&, const execution&) = default;
};

void PrintTo(const execution& r, std::ostream* os) {
  *os << "{" << r.id << " at " << r.start_us << "us on " << r.instance << ", " << r.elements
      << " elements}";
}

/// The simulated model and what each request's sink received: status code and virtual time.
class rig {
public:
  rig(const servekit::scheduler_settings& s, std::size_t instances, std::int64_t latency_us)
      : sim{s, instances, servekit::latency_model{std::chrono::microseconds(latency_us), {}}} {}
  rig(const rig&) = delete;
  rig& operator=(const rig&) = delete;

  void submit(std::int64_t t, std::string id, std::int64_t elements = 1) {
    servekit::request r;
    r.id = std::move(id);
    submit(t, std::move(r), elements);
  }
  void submit(std::int64_t t, servekit::request r, std::int64_t elements = 1) {
    sim.submit_at(
        at_us(t), std::move(r),
        [this](servekit::response&& out) {
          answers[out.id].emplace_back(servekit::to_string(out.status.code()), us_of(sim.now()));
        },
        elements);
  }

  /// Every execution as an `execution`; each must hold exactly one request and say no_batching.
  [[nodiscard]] std::vector<execution> runs() const {
    std::vector<execution> out;
    for (const auto& b : sim.batches()) {
      EXPECT_EQ(b.request_ids.size(), 1u) << "the default scheduler never batches requests";
      EXPECT_EQ(b.reason, batch_close_reason::no_batching);
      if (!b.request_ids.empty()) {
        out.push_back({b.request_ids.front(), us_of(b.start), b.instance, b.elements});
      }
    }
    return out;
  }

  servekit::simulated_shell<servekit::default_scheduler> sim;
  std::map<std::string, std::vector<std::pair<std::string, std::int64_t>>> answers;
};

TEST(default_scheduler, runs_one_request_per_execution_in_arrival_order) {
  rig r{unbatched(), 1, 1000};
  r.submit(0, "a");
  r.submit(100, "b");
  r.submit(200, "c");
  r.submit(300, "d");
  r.sim.run();
  EXPECT_EQ(r.runs(), (std::vector<execution>{
                          {"a", 0, 0, 1},
                          {"b", 1000, 0, 1},
                          {"c", 2000, 0, 1},
                          {"d", 3000, 0, 1},
                      }));
  for (const char* id : {"a", "b", "c", "d"}) {
    ASSERT_EQ(r.answers[id].size(), 1u) << id;
    EXPECT_EQ(r.answers[id].front().first, "OK") << id;
  }
  EXPECT_EQ(r.answers["d"].front().second, 4000);
}

TEST(default_scheduler, a_batched_request_still_runs_alone) {
  rig r{unbatched(8), 1, 1000};
  r.submit(0, "a", 4);
  r.submit(100, "b", 1); // would fit beside a or c, but the default scheduler never combines
  r.submit(200, "c", 4);
  r.sim.run();
  EXPECT_EQ(r.runs(), (std::vector<execution>{
                          {"a", 0, 0, 4},
                          {"b", 1000, 0, 1},
                          {"c", 2000, 0, 4},
                      }));
  const auto stats = r.sim.statistics();
  EXPECT_EQ(stats.success.count, 3u);
  EXPECT_EQ(stats.inference_count, 9u);
  EXPECT_EQ(stats.execution_count, 3u);
}

TEST(default_scheduler, every_execution_is_counted_as_no_batching) {
  rig r{unbatched(), 2, 1000};
  for (int i = 0; i < 10; ++i) {
    r.submit(50 * i, "r" + std::to_string(i));
  }
  r.sim.run();
  const auto stats = r.sim.statistics();
  EXPECT_EQ(stats.closed_by(batch_close_reason::no_batching), 10u);
  for (const batch_close_reason reason : servekit::all_batch_close_reasons) {
    if (reason != batch_close_reason::no_batching) {
      EXPECT_EQ(stats.closed_by(reason), 0u) << servekit::to_string(reason);
    }
  }
}

TEST(default_scheduler, priority_and_request_timeout_do_not_reorder_or_expire) {
  rig r{unbatched(), 1, 1000};
  r.submit(0, "a");
  servekit::request b;
  b.id = "b";
  b.timeout_us = 10; // no queue policy here: ignored
  servekit::request c;
  c.id = "c";
  c.priority = 1; // one FIFO queue: no jumping ahead
  r.submit(100, std::move(b));
  r.submit(200, std::move(c));
  r.sim.run();
  EXPECT_EQ(r.runs(),
            (std::vector<execution>{{"a", 0, 0, 1}, {"b", 1000, 0, 1}, {"c", 2000, 0, 1}}));
  EXPECT_EQ(r.answers["b"].front().first, "OK");
}

TEST(default_scheduler, two_instances_each_take_the_next_request_when_free) {
  rig r{unbatched(), 2, 1000};
  r.submit(0, "a");    // instance 0
  r.submit(100, "b");  // instance 1
  r.submit(200, "c");  // both busy: instance 0 at 1000
  r.submit(300, "d");  // instance 1 at 1100
  r.submit(1050, "e"); // instance 0 at 2000
  r.sim.run();
  EXPECT_EQ(r.runs(), (std::vector<execution>{
                          {"a", 0, 0, 1},
                          {"b", 100, 1, 1},
                          {"c", 1000, 0, 1},
                          {"d", 1100, 1, 1},
                          {"e", 2000, 0, 1},
                      }));
}

TEST(default_scheduler, hold_hook_runs_nothing_until_n_requests_are_queued_then_never_holds) {
  auto s = unbatched();
  s.hold_until_queued = 3;
  rig r{s, 1, 1000};
  r.submit(0, "a");
  r.submit(100, "b");
  r.submit(200, "c");
  r.submit(5000, "d"); // the hook held once; d runs at once
  r.sim.run_until(at_us(199));
  EXPECT_TRUE(r.sim.batches().empty());
  r.sim.run();
  EXPECT_EQ(r.runs(), (std::vector<execution>{
                          {"a", 200, 0, 1},
                          {"b", 1200, 0, 1},
                          {"c", 2200, 0, 1},
                          {"d", 5000, 0, 1},
                      }));
}

TEST(default_scheduler, cancel_removes_a_queued_request_and_leaves_a_running_one) {
  rig r{unbatched(), 1, 1000};
  servekit::cancellation_source running;
  servekit::cancellation_source queued;
  servekit::request a;
  a.id = "a";
  a.cancellation = running.token();
  servekit::request b;
  b.id = "b";
  b.cancellation = queued.token();
  r.submit(0, std::move(a));
  r.submit(100, std::move(b));
  r.submit(200, "c");
  r.sim.cancel_at(at_us(500), running);
  r.sim.cancel_at(at_us(500), queued);
  r.sim.run();
  EXPECT_EQ(r.runs(), (std::vector<execution>{{"a", 0, 0, 1}, {"c", 1000, 0, 1}}));
  ASSERT_EQ(r.answers["a"].size(), 1u);
  EXPECT_EQ(r.answers["a"].front(), (std::pair<std::string, std::int64_t>{"OK", 1000}));
  ASSERT_EQ(r.answers["b"].size(), 1u);
  EXPECT_EQ(r.answers["b"].front(), (std::pair<std::string, std::int64_t>{"CANCELLED", 500}));
  const auto stats = r.sim.statistics();
  EXPECT_EQ(stats.failed_by(servekit::failure_reason::canceled), 1u);
  EXPECT_EQ(stats.success.count + stats.fail.count, 3u);
}

} // namespace default_scheduler_test
