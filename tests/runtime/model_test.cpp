// The threaded shell: composition, validation at submit, failures, timeouts while busy,
// cancellation, shutdown, ordering and concurrency of instances. No test sleeps to wait for a
// timing rule: threads are coordinated with latches and gates, and timing rules themselves are
// tested in virtual time (tests/schedule).
#include "archetypes/gate.hpp"

#include <servekit/runtime/model.hpp>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace model_test {

using namespace std::chrono_literals;
using servekit::data_type;
using servekit::shape;

using archetypes::gate;

/// What the test backend does on execute; set by each test before building its model.
std::function<void(servekit::batch&)> on_execute; // NOLINT: test-only global

/// Copies INPUT0 (FP32 [4]) to OUTPUT0 and OUTPUT1 after running the test's hook.
struct scripted_backend {
  static constexpr std::int32_t max_batch_size = 8;
  static constexpr servekit::tensor_declaration inputs[] = {{"INPUT0", data_type::fp32, {4}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"OUTPUT0", data_type::fp32, {4}},
                                                             {"OUTPUT1", data_type::fp32, {4}}};

  explicit scripted_backend(const servekit::instance_context& context) {
    if (context.parameter("fail_to_load")) {
      throw std::runtime_error("weights not found");
    }
  }

  void execute(servekit::batch& b) {
    if (on_execute) {
      on_execute(b);
    }
    for (std::size_t i = 0; i < b.size(); ++i) {
      const auto& in = *b.request(i).find_input("INPUT0");
      for (const char* name : {"OUTPUT0", "OUTPUT1"}) {
        auto& out = b.response(i).add_output(name, data_type::fp32, in.shape);
        std::copy(in.values<float>().begin(), in.values<float>().end(),
                  out.values<float>().begin());
      }
    }
  }
};

servekit::request make_request(std::string id, float value = 1.0F, std::int64_t batch = 1) {
  servekit::request r;
  r.id = std::move(id);
  auto t = servekit::make_tensor("INPUT0", data_type::fp32, shape{batch, 4});
  for (auto& v : t.values<float>()) {
    v = value;
  }
  r.inputs.push_back(std::move(t));
  return r;
}

servekit::model_options batching_options(std::uint64_t delay_us = 0) {
  servekit::model_options o;
  o.name = "scripted";
  servekit::dynamic_batching_options d;
  d.max_queue_delay_microseconds = delay_us;
  o.dynamic_batching = d;
  return o;
}

/// Collects final responses by request id.
class collector {
public:
  servekit::response_sink sink() {
    return [this](servekit::response&& r) {
      const std::lock_guard lock{mutex_};
      const std::string id = r.id;
      ++finals_[id];
      last_[id] = std::move(r);
      order_.push_back(id);
      cv_.notify_all();
    };
  }
  [[nodiscard]] bool wait_for(std::size_t count) {
    std::unique_lock lock{mutex_};
    return cv_.wait_for(lock, 10s, [&] { return order_.size() >= count; });
  }
  servekit::response get(const std::string& id) {
    const std::lock_guard lock{mutex_};
    return std::move(last_.at(id));
  }
  int finals(const std::string& id) {
    const std::lock_guard lock{mutex_};
    return finals_[id];
  }
  std::vector<std::string> order() {
    const std::lock_guard lock{mutex_};
    return order_;
  }

private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, int> finals_;
  std::map<std::string, servekit::response> last_;
  std::vector<std::string> order_;
};

class model_test : public ::testing::Test {
protected:
  void SetUp() override { on_execute = nullptr; }
  void TearDown() override { on_execute = nullptr; }
};

using batched_model = servekit::model<scripted_backend, servekit::dynamic_batcher<>>;
using two_instance_model =
    servekit::model<scripted_backend, servekit::dynamic_batcher<>, servekit::instance_group<2>>;

TEST_F(model_test, executes_and_answers_with_outputs) {
  batched_model m{batching_options()};
  auto r = m.infer(make_request("a", 2.5F)).get();
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(r.id, "a");
  ASSERT_NE(r.find_output("OUTPUT0"), nullptr);
  EXPECT_EQ(r.find_output("OUTPUT0")->values<float>()[3], 2.5F);
  EXPECT_EQ(m.statistics().success.count, 1U);
}

TEST_F(model_test, returns_only_requested_outputs) {
  batched_model m{batching_options()};
  auto req = make_request("a");
  req.requested_outputs = {"OUTPUT1"};
  auto r = m.infer(std::move(req)).get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.outputs.size(), 1U);
  EXPECT_NE(r.find_output("OUTPUT1"), nullptr);
}

TEST_F(model_test, bad_input_is_rejected_at_submit_and_never_queued) {
  std::atomic<int> executed{0};
  on_execute = [&](servekit::batch&) { ++executed; };
  batched_model m{batching_options()};
  servekit::request bad;
  bad.inputs.push_back(servekit::make_tensor("INPUT0", data_type::int32, shape{1, 4}));
  int answered = 0;
  const auto s = m.submit(std::move(bad), [&](servekit::response&&) { ++answered; });
  EXPECT_EQ(s.code(), servekit::status_code::invalid_argument);
  EXPECT_NE(s.message().find("'INPUT0'"), std::string::npos);
  auto too_big = m.infer(make_request("big", 1.0F, 9)).get();
  EXPECT_EQ(too_big.status.code(), servekit::status_code::invalid_argument);
  m.shutdown(servekit::shutdown_mode::drain);
  EXPECT_EQ(answered, 0);
  EXPECT_EQ(executed.load(), 0);
}

TEST_F(model_test, a_throwing_backend_fails_only_its_batch) {
  std::atomic<int> calls{0};
  on_execute = [&](servekit::batch&) {
    if (calls++ == 0) {
      throw std::runtime_error("CUDA out of memory");
    }
  };
  batched_model m{batching_options()};
  auto first = m.infer(make_request("first")).get();
  EXPECT_EQ(first.status.code(), servekit::status_code::internal);
  EXPECT_NE(first.status.message().find("CUDA out of memory"), std::string::npos);
  EXPECT_EQ(first.id, "first");
  auto second = m.infer(make_request("second")).get();
  EXPECT_TRUE(second.ok()) << second.status.message();
  const auto stats = m.statistics();
  EXPECT_EQ(stats.fail.count, 1U);
  EXPECT_EQ(stats.failed_by(servekit::failure_reason::backend), 1U);
  EXPECT_EQ(stats.success.count, 1U);
}

TEST_F(model_test, a_backend_that_fails_to_construct_fails_the_model_with_its_message) {
  auto o = batching_options();
  o.parameters["fail_to_load"] = "1";
  try {
    batched_model m{o};
    FAIL() << "expected config_error";
  } catch (const servekit::config_error& e) {
    EXPECT_EQ(e.code(), servekit::config_error_code::backend_error);
    EXPECT_NE(std::string{e.what()}.find("weights not found"), std::string::npos);
  }
}

TEST_F(model_test, configuration_errors_name_the_field) {
  auto o = batching_options();
  o.dynamic_batching->preferred_batch_size = {4, 16};
  try {
    batched_model m{o};
    FAIL() << "expected config_error";
  } catch (const servekit::config_error& e) {
    EXPECT_EQ(e.path(), "/dynamic_batching/preferred_batch_size/1");
  }
  EXPECT_THROW(servekit::model<scripted_backend>{batching_options()}, servekit::config_error);
  o = batching_options();
  o.max_batch_size = 64; // the backend allows 8
  EXPECT_THROW(batched_model{o}, servekit::config_error);
}

TEST_F(model_test, a_full_queue_level_refuses_at_submit) {
  gate release;
  gate started;
  on_execute = [&](servekit::batch&) {
    started.open();
    ASSERT_TRUE(release.wait());
  };
  auto o = batching_options();
  o.dynamic_batching->priority.default_queue_policy.max_queue_size = 2;
  batched_model m{o};
  collector c;
  ASSERT_TRUE(m.submit(make_request("running"), c.sink()).ok());
  ASSERT_TRUE(started.wait());
  ASSERT_TRUE(m.submit(make_request("q1"), c.sink()).ok());
  ASSERT_TRUE(m.submit(make_request("q2"), c.sink()).ok());
  const auto s = m.submit(make_request("q3"), c.sink());
  EXPECT_EQ(s.code(), servekit::status_code::unavailable);
  EXPECT_EQ(s.message(), "Exceeds maximum queue size");
  EXPECT_EQ(m.statistics().failed_by(servekit::failure_reason::rejected), 1U);
  release.open();
  ASSERT_TRUE(c.wait_for(3));
  // Room again once the queue moved on.
  EXPECT_TRUE(m.infer(make_request("later")).get().ok());
}

TEST_F(model_test, reject_timeout_fires_while_every_instance_is_busy) {
  // The only instance is held until the queued request has timed out: if timeouts were only
  // applied when an instance frees up (or polled late), this would never finish.
  collector c;
  gate timed_out;
  gate started;
  on_execute = [&](servekit::batch& b) {
    if (b.request(0).id == "blocker") {
      started.open();
      EXPECT_TRUE(timed_out.wait());
    }
  };
  auto o = batching_options();
  auto& policy = o.dynamic_batching->priority.default_queue_policy;
  policy.default_timeout_microseconds = 60'000'000; // the blocker must not time out
  policy.allow_timeout_override = true;
  batched_model m{o};
  ASSERT_TRUE(m.submit(make_request("blocker"), c.sink()).ok());
  ASSERT_TRUE(started.wait());
  auto late = make_request("late");
  late.timeout_us = 2000;
  ASSERT_TRUE(m.submit(std::move(late), [&](servekit::response&& r) {
                 EXPECT_EQ(r.status.code(), servekit::status_code::unavailable);
                 EXPECT_EQ(r.status.message(), "Request timeout expired");
                 timed_out.open();
               }).ok());
  ASSERT_TRUE(c.wait_for(1));
  EXPECT_TRUE(c.get("blocker").ok());
  EXPECT_EQ(m.statistics().failed_by(servekit::failure_reason::rejected), 1U);
}

TEST_F(model_test, cancelling_a_queued_request_answers_it_at_once) {
  gate release;
  gate started;
  on_execute = [&](servekit::batch& b) {
    if (b.request(0).id == "blocker") {
      started.open();
      EXPECT_TRUE(release.wait());
    }
  };
  batched_model m{batching_options()};
  collector c;
  ASSERT_TRUE(m.submit(make_request("blocker"), c.sink()).ok());
  ASSERT_TRUE(started.wait());
  servekit::cancellation_source source;
  auto req = make_request("victim");
  req.cancellation = source.token();
  ASSERT_TRUE(m.submit(std::move(req), c.sink()).ok());
  m.cancel(source);
  ASSERT_TRUE(c.wait_for(1));
  EXPECT_EQ(c.get("victim").status.code(), servekit::status_code::cancelled);
  release.open();
  ASSERT_TRUE(c.wait_for(2));
  EXPECT_TRUE(c.get("blocker").ok());
  EXPECT_EQ(c.finals("victim"), 1);
}

TEST_F(model_test, cancelling_shutdown_answers_queued_requests_and_finishes_running_ones) {
  gate release;
  gate started;
  on_execute = [&](servekit::batch& b) {
    if (b.request(0).id == "running") {
      started.open();
      EXPECT_TRUE(release.wait());
    }
  };
  batched_model m{batching_options()};
  collector c;
  ASSERT_TRUE(m.submit(make_request("running"), c.sink()).ok());
  ASSERT_TRUE(started.wait());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(m.submit(make_request("queued" + std::to_string(i)), c.sink()).ok());
  }
  std::thread stopper{[&] { m.shutdown(servekit::shutdown_mode::cancel); }};
  ASSERT_TRUE(c.wait_for(5)); // the queued ones, while "running" still runs
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(c.get("queued" + std::to_string(i)).status.code(), servekit::status_code::cancelled);
  }
  release.open();
  stopper.join();
  EXPECT_TRUE(c.get("running").ok());
  EXPECT_EQ(m.submit(make_request("after"), c.sink()).code(), servekit::status_code::unavailable);
}

TEST_F(model_test, draining_shutdown_executes_everything_accepted) {
  auto o = batching_options(1'000'000); // a long delay that the drain must not wait out
  batched_model m{o};
  collector c;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(m.submit(make_request(std::to_string(i)), c.sink()).ok());
  }
  m.shutdown(servekit::shutdown_mode::drain);
  EXPECT_EQ(c.order().size(), 20U);
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(c.get(std::to_string(i)).ok());
  }
}

TEST_F(model_test, instances_execute_concurrently) {
  // Each execution waits until two executions are inside execute at once: with one instance at
  // a time this would never happen.
  std::atomic<int> inside{0};
  gate both;
  on_execute = [&](servekit::batch&) {
    if (++inside == 2) {
      both.open();
    }
    EXPECT_TRUE(both.wait());
  };
  auto o = batching_options();
  o.dynamic_batching->priority.default_queue_policy.max_queue_size = 0;
  two_instance_model m{o};
  EXPECT_EQ(m.instance_count(), 2U);
  collector c;
  ASSERT_TRUE(m.submit(make_request("a"), c.sink()).ok());
  // The second request must land in a second batch: wait until the first batch started.
  while (inside.load() == 0) {
    std::this_thread::yield();
  }
  ASSERT_TRUE(m.submit(make_request("b"), c.sink()).ok());
  ASSERT_TRUE(c.wait_for(2));
  const auto stats = m.statistics();
  ASSERT_EQ(stats.instances.size(), 2U);
  EXPECT_EQ(stats.instances[0].execution_count, 1U);
  EXPECT_EQ(stats.instances[1].execution_count, 1U);
}

TEST_F(model_test, preserve_ordering_releases_responses_in_submit_order) {
  // "first" runs on one instance and is held until "second" has finished executing on the
  // other (its execution is recorded in the statistics before delivery); "second" must still
  // be delivered after "first". (The release mechanism itself is tested deterministically in
  // ordered_completion_test.)
  gate release_first;
  std::atomic<int> inside{0};
  on_execute = [&](servekit::batch& b) {
    ++inside;
    if (b.request(0).id == "first") {
      EXPECT_TRUE(release_first.wait());
    }
  };
  auto o = batching_options();
  o.dynamic_batching->preserve_ordering = true;
  two_instance_model m{o};
  collector c;
  ASSERT_TRUE(m.submit(make_request("first"), c.sink()).ok());
  while (inside.load() == 0) {
    std::this_thread::yield();
  }
  ASSERT_TRUE(m.submit(make_request("second"), c.sink()).ok());
  while (m.statistics().execution_count < 1) {
    std::this_thread::yield();
  }
  EXPECT_TRUE(c.order().empty());
  release_first.open();
  ASSERT_TRUE(c.wait_for(2));
  EXPECT_EQ(c.order(), (std::vector<std::string>{"first", "second"}));
}

TEST_F(model_test, hold_hook_waits_for_n_requests_then_batches_them) {
  batched_model m{batching_options(), servekit::test_hooks{.delay_scheduler = 4}};
  collector c;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(m.submit(make_request(std::to_string(i)), c.sink()).ok());
  }
  ASSERT_TRUE(c.wait_for(4));
  const auto stats = m.statistics();
  EXPECT_EQ(stats.execution_count, 1U);
  ASSERT_NE(stats.batch_size(4), nullptr);
}

TEST_F(model_test, default_scheduler_runs_each_request_alone) {
  servekit::model_options o;
  o.name = "unbatched";
  servekit::model<scripted_backend> m{o, servekit::test_hooks{.delay_scheduler = 3}};
  collector c;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(m.submit(make_request(std::to_string(i), 1.0F, 2), c.sink()).ok());
  }
  ASSERT_TRUE(c.wait_for(3));
  const auto stats = m.statistics();
  EXPECT_EQ(stats.execution_count, 3U);
  EXPECT_EQ(stats.inference_count, 6U);
  EXPECT_EQ(stats.closed_by(servekit::batch_close_reason::no_batching), 3U);
  EXPECT_EQ(c.order(), (std::vector<std::string>{"0", "1", "2"}));
}

} // namespace model_test
