// submit_here(), infer_sync's path: a synchronous caller executes on a free instance itself when
// the backend allows it (execute_on_any_thread), and otherwise queues as submit() does. Checked:
// which thread executes; that an instance never runs two batches at once, whoever holds it; that
// work arriving while a caller holds an instance goes to another instance; that a queue delay,
// requests queued ahead and a backend that does not allow it all take the instances' threads;
// statistics; a sink that throws on the caller's thread; shutdown waiting for a caller's
// execution.
#include "archetypes/gate.hpp"

#include <servekit/core/request_builder.hpp>
#include <servekit/runtime/model.hpp>
#include <servekit/runtime/model_ref.hpp>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace submit_here_test {

using namespace std::chrono_literals;
using servekit::data_type;
using servekit::shape;

/// What the backend does before answering; set by a test before it builds its model.
std::function<void(servekit::batch&)> on_execute; // NOLINT: test-only global

/// OUTPUT0 = INPUT0 * 2 (FP32 [4]); records the thread that executed, and fails the response if
/// the instance was already executing (two batches at once on one instance).
template <bool AnyThread>
struct recording_doubler {
  static constexpr std::int32_t max_batch_size = 8;
  static constexpr bool execute_on_any_thread = AnyThread;
  static constexpr servekit::tensor_declaration inputs[] = {{"INPUT0", data_type::fp32, {4}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"OUTPUT0", data_type::fp32, {4}},
                                                             {"THREAD", data_type::uint64, {1}}};

  explicit recording_doubler(const servekit::instance_context& /*context*/) {}

  void execute(servekit::batch& b) {
    const bool overlapped = executing_.exchange(true);
    if (on_execute) {
      on_execute(b);
    }
    const auto thread = std::hash<std::thread::id>{}(std::this_thread::get_id());
    for (std::size_t i = 0; i < b.size(); ++i) {
      if (overlapped) {
        b.response(i) = servekit::response::failure(
            servekit::internal_error("two batches at once on one instance"));
        continue;
      }
      const auto& in = *b.request(i).find_input("INPUT0");
      auto& out = b.response(i).add_output("OUTPUT0", data_type::fp32, in.shape);
      for (std::size_t k = 0; k < in.values<float>().size(); ++k) {
        out.values<float>()[k] = in.values<float>()[k] * 2;
      }
      auto& t = b.response(i).add_output("THREAD", data_type::uint64, shape{in.shape[0], 1});
      for (auto& v : t.values<std::uint64_t>()) {
        v = thread;
      }
    }
    executing_.store(false);
  }

private:
  std::atomic<bool> executing_{false};
};

using anywhere = recording_doubler<true>;
using own_thread_only = recording_doubler<false>;

template <class Backend, int Instances = 2>
using doubler_model =
    servekit::model<Backend, servekit::dynamic_batcher<>, servekit::instance_group<Instances>>;

servekit::request make_request(float value, std::string id = "r") {
  const std::array<float, 4> values{value, value, value, value};
  return servekit::request_builder{std::move(id)}.input("INPUT0", {1, 4}, values).build();
}

servekit::model_options options(std::uint64_t queue_delay_us = 0) {
  servekit::model_options o;
  o.name = "doubler";
  o.dynamic_batching = servekit::dynamic_batching_options{};
  if (queue_delay_us != 0) {
    o.dynamic_batching->max_queue_delay_microseconds = queue_delay_us;
    o.dynamic_batching->preferred_batch_size = {8};
  }
  return o;
}

std::uint64_t this_thread() { return std::hash<std::thread::id>{}(std::this_thread::get_id()); }

/// The thread that executed `r`'s request, and checks its output.
std::uint64_t executed_on(const servekit::response& r, float input) {
  EXPECT_TRUE(r.ok()) << r.status.message();
  if (!r.ok()) {
    return 0;
  }
  EXPECT_EQ(r.find_output("OUTPUT0")->values<float>()[0], input * 2);
  return r.find_output("THREAD")->values<std::uint64_t>()[0];
}

class submit_here_test : public ::testing::Test {
protected:
  void SetUp() override { on_execute = nullptr; }
  void TearDown() override { on_execute = nullptr; }
};

TEST_F(submit_here_test, InferSyncExecutesOnTheCallersThreadWhenAnInstanceIsFree) {
  doubler_model<anywhere> m{options()};
  for (int i = 0; i < 50; ++i) {
    const auto r = m.infer_sync(make_request(static_cast<float>(i)));
    EXPECT_EQ(executed_on(r, static_cast<float>(i)), this_thread());
  }
  const auto s = m.statistics();
  EXPECT_EQ(s.inference_count, 50U);
  EXPECT_EQ(s.execution_count, 50U);
  EXPECT_EQ(s.success.count, 50U);
}

TEST_F(submit_here_test, AModelRefAndSubmitHereDoTheSameAndTheSinkHasTheResponseOnReturn) {
  doubler_model<anywhere> m{options()};
  const servekit::model_ref ref{m};
  EXPECT_EQ(executed_on(ref.infer_sync(make_request(3)), 3), this_thread());
  std::uint64_t on = 0;
  ASSERT_TRUE(
      m.submit_here(make_request(4), [&](servekit::response&& r) { on = executed_on(r, 4); }).ok());
  EXPECT_EQ(on, this_thread()); // answered before submit_here returned
}

TEST_F(submit_here_test, ABackendThatDoesNotAllowItRunsOnTheInstancesThreads) {
  doubler_model<own_thread_only> m{options()};
  for (int i = 0; i < 20; ++i) {
    const auto r = m.infer_sync(make_request(1));
    EXPECT_NE(executed_on(r, 1), this_thread());
  }
}

TEST_F(submit_here_test, PlainSubmitAndInferNeverExecuteOnTheCaller) {
  doubler_model<anywhere> m{options()};
  EXPECT_NE(executed_on(m.infer(make_request(2)).get(), 2), this_thread());
}

TEST_F(submit_here_test, AQueueDelayLeavesTheRequestToTheInstancesAtItsDeadline) {
  // The core waits up to 2 ms for a batch of 8: the caller does not execute, an instance forms
  // the batch when the delay ends.
  doubler_model<anywhere> m{options(2000)};
  const auto r = m.infer_sync(make_request(5));
  EXPECT_NE(executed_on(r, 5), this_thread());
  EXPECT_EQ(m.statistics().execution_count, 1U);
}

TEST_F(submit_here_test, WithEveryInstanceBusyTheCallerQueuesAndAnInstanceExecutesIt) {
  archetypes::gate release;
  std::atomic<int> blocked{0};
  on_execute = [&](servekit::batch& b) {
    if (b.request(0).id == "blocker") {
      ++blocked;
      EXPECT_TRUE(release.wait());
    }
  };
  doubler_model<anywhere, 1> m{options()};
  auto first = m.infer(make_request(1, "blocker"));
  while (blocked.load() == 0) {
    std::this_thread::yield();
  }
  // The only instance is held by its thread: this call queues, and returns once that thread
  // executes it after the blocker.
  std::thread opener{[&] {
    while (m.statistics().pending_request_count == 0) {
      std::this_thread::yield();
    }
    release.open();
  }};
  const auto r = m.infer_sync(make_request(6));
  opener.join();
  EXPECT_NE(executed_on(r, 6), this_thread());
  EXPECT_TRUE(first.get().ok());
}

TEST_F(submit_here_test, WorkArrivingWhileACallerHoldsAnInstanceGoesToAnotherInstance) {
  // The caller executes on one instance and blocks there until a request submitted meanwhile has
  // been answered: only the other instance can answer it. Whichever instance the caller took, and
  // whether that instance's thread was spinning or asleep, the request must not wait for it.
  std::unique_ptr<archetypes::gate> release;
  std::atomic<bool> caller_executing{false};
  on_execute = [&](servekit::batch& b) {
    if (b.request(0).id == "holder") {
      caller_executing = true;
      EXPECT_TRUE(release->wait());
    }
  };
  doubler_model<anywhere> m{options()};
  for (int round = 0; round < 20; ++round) {
    caller_executing = false;
    release = std::make_unique<archetypes::gate>();
    std::thread caller{[&] {
      const auto r = m.infer_sync(make_request(1, "holder"));
      EXPECT_EQ(executed_on(r, 1), this_thread());
    }};
    while (!caller_executing.load()) {
      std::this_thread::yield();
    }
    auto other = m.infer(make_request(7, "other"));
    ASSERT_EQ(other.wait_for(10s), std::future_status::ready) << "round " << round;
    EXPECT_EQ(other.get().find_output("OUTPUT0")->values<float>()[0], 14.0F);
    release->open();
    caller.join();
  }
}

TEST_F(submit_here_test, CallersAndSubmittersTogetherNeverRunTwoBatchesOnOneInstance) {
  // Four synchronous callers and two asynchronous submitters on two instances: every response
  // right (the backend fails one that overlaps another batch on its instance), nothing lost.
  on_execute = [](servekit::batch&) {
    for (int spin = 0; spin < 200; ++spin) {
      std::atomic_signal_fence(std::memory_order_seq_cst); // a little work the compiler keeps
    }
  };
  doubler_model<anywhere> m{options()};
  constexpr int per_thread = 300;
  std::atomic<int> wrong{0};
  std::atomic<int> answered{0};
  std::atomic<int> here{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const auto value = static_cast<float>(t * 1000 + i);
        const auto r = m.infer_sync(make_request(value), i % 2 == 0 ? 0us : 50us);
        const bool right = r.ok() && r.find_output("OUTPUT0")->values<float>()[0] == value * 2;
        wrong += right ? 0 : 1;
        here += r.ok() && r.find_output("THREAD")->values<std::uint64_t>()[0] == this_thread();
      }
    });
  }
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::future<servekit::response>> futures;
      for (int i = 0; i < per_thread; ++i) {
        futures.push_back(m.infer(make_request(static_cast<float>(-t * 1000 - i))));
      }
      for (int i = 0; i < per_thread; ++i) {
        const auto r = futures[static_cast<std::size_t>(i)].get();
        const auto value = static_cast<float>(-t * 1000 - i);
        wrong += r.ok() && r.find_output("OUTPUT0")->values<float>()[0] == value * 2 ? 0 : 1;
        ++answered;
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(answered.load(), 2 * per_thread);
  EXPECT_EQ(m.statistics().inference_count, 6U * per_thread);
  std::printf("executed on the caller's thread: %d of %d synchronous calls\n", here.load(),
              4 * per_thread);
}

TEST_F(submit_here_test, ASinkThatThrowsOnTheCallersThreadIsContainedAsOnAnInstancesThread) {
  // Sinks must not throw; one that does is swallowed where the response is delivered, here on the
  // caller's thread, and the instance goes on serving.
  doubler_model<anywhere, 1> m{options()};
  bool called = false;
  EXPECT_TRUE(m.submit_here(make_request(1), [&](servekit::response&&) {
                 called = true;
                 throw std::runtime_error{"sink"};
               }).ok());
  EXPECT_TRUE(called); // on this thread, before submit_here returned
  auto next = m.infer(make_request(2));
  ASSERT_EQ(next.wait_for(10s), std::future_status::ready);
  EXPECT_NE(executed_on(next.get(), 2), this_thread());
  // (Wherever this one runs: the instance's thread may still be finishing the last batch.)
  EXPECT_NE(executed_on(m.infer_sync(make_request(3)), 3), 0U);
}

TEST_F(submit_here_test, ShutdownWaitsForACallersExecutionAndThenRefuses) {
  archetypes::gate release;
  std::atomic<bool> caller_executing{false};
  std::atomic<bool> caller_executed{false};
  on_execute = [&](servekit::batch& b) {
    if (b.request(0).id == "holder") {
      caller_executing = true;
      EXPECT_TRUE(release.wait());
      caller_executed = true;
    }
  };
  doubler_model<anywhere> m{options()};
  std::thread caller{[&] {
    const auto r = m.infer_sync(make_request(1, "holder"));
    EXPECT_EQ(executed_on(r, 1), this_thread());
  }};
  while (!caller_executing.load()) {
    std::this_thread::yield();
  }
  std::thread stopper{[&] {
    m.shutdown(servekit::shutdown_mode::drain);
    EXPECT_TRUE(caller_executed.load()) << "shutdown returned during a caller's execution";
  }};
  // Requests are refused once shutdown has begun (until then the other instance answers them);
  // only then may the caller's execution end.
  while (m.infer(make_request(0, "probe")).get().ok()) {
    std::this_thread::yield();
  }
  release.open();
  caller.join();
  stopper.join();
  const auto refused = m.infer_sync(make_request(2));
  EXPECT_EQ(refused.status.code(), servekit::status_code::unavailable);
}

} // namespace submit_here_test
