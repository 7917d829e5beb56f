// model<> with the adaptive dynamic batcher on the threaded shell: every request is answered
// once while the controller learns from real executions (the shell reports each batch it ran),
// and deadline-aware admission answers the requests it refuses with `unavailable`. The timing
// rules themselves are tested in virtual time (tests/schedule/adaptive_batcher_test.cpp).
#include <servekit/runtime/model.hpp>
#include <servekit/schedule/adaptive_batcher.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace adaptive_model_test {

using servekit::data_type;

/// Doubles INPUT0 (INT32 [1]) into OUTPUT0, taking 200 µs + 20 µs per element of the batch.
struct timed_backend {
  static constexpr std::int32_t max_batch_size = 16;
  static constexpr servekit::tensor_declaration inputs[] = {{"INPUT0", data_type::int32, {1}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"OUTPUT0", data_type::int32, {1}}};

  explicit timed_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    std::this_thread::sleep_for(std::chrono::microseconds(200 + 20 * b.size()));
    for (std::size_t i = 0; i < b.size(); ++i) {
      const auto& in = *b.request(i).find_input("INPUT0");
      auto& out = b.response(i).add_output("OUTPUT0", data_type::int32, in.shape);
      out.values<std::int32_t>()[0] = 2 * in.values<std::int32_t>()[0];
    }
  }
};

template <class Controller>
using adaptive_model =
    servekit::model<timed_backend, servekit::dynamic_batcher<servekit::adaptive<Controller>>,
                    servekit::instance_group<2>>;

servekit::model_options options(bool admission) {
  servekit::model_options o;
  o.name = "timed";
  servekit::dynamic_batching_options d;
  d.adaptive.target_latency_microseconds = 20'000;
  d.adaptive.deadline_admission = admission;
  o.dynamic_batching = d;
  return o;
}

servekit::request make_request(std::int32_t value) {
  servekit::request r;
  r.id = std::to_string(value);
  auto t = servekit::make_tensor("INPUT0", data_type::int32, servekit::shape{1, 1});
  t.values<std::int32_t>()[0] = value;
  r.inputs.push_back(std::move(t));
  return r;
}

/// 4 threads submit `each` requests apiece without waiting; returns every answer's promise.
template <class Model>
std::vector<std::future<servekit::response>> flood(Model& m, int each) {
  std::vector<std::future<servekit::response>> answers(static_cast<std::size_t>(4 * each));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < each; ++i) {
        const int n = t * each + i;
        answers[static_cast<std::size_t>(n)] = m.infer(make_request(n));
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  return answers;
}

template <class Controller>
void every_request_is_answered_correctly() {
  adaptive_model<Controller> m{options(false)};
  auto answers = flood(m, 100);
  for (std::size_t n = 0; n < answers.size(); ++n) {
    const servekit::response r = answers[n].get();
    ASSERT_TRUE(r.status.ok()) << n << ": " << r.status.message();
    EXPECT_EQ(r.outputs.at(0).template values<std::int32_t>()[0], 2 * static_cast<std::int32_t>(n));
  }
  // What the controller learned is in the model's statistics. A batch reaches the controller
  // when its instance next takes the core's lock, so the last one or two may still be on their
  // way once every response is in.
  const auto s = m.statistics().adaptive_batching;
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->target_latency_us, 20'000U);
  EXPECT_GT(s->profile_samples, 0U);
  // A batch of 16 sleeps 520 µs; the profile's line predicts at least most of that.
  EXPECT_GT(s->fixed_latency_us + 16.0 * s->per_element_latency_us, 300.0);
  EXPECT_LE(s->requests, answers.size());
  EXPECT_GE(s->requests + 2 * 16, answers.size());
}

TEST(AdaptiveModel, LatencyTargetAnswersEveryRequestOnTheThreadedShell) {
  every_request_is_answered_correctly<servekit::latency_target>();
}
TEST(AdaptiveModel, InFlightHillClimbAnswersEveryRequestOnTheThreadedShell) {
  every_request_is_answered_correctly<servekit::in_flight_hill_climb>();
}
TEST(AdaptiveModel, ClipperAimdAnswersEveryRequestOnTheThreadedShell) {
  every_request_is_answered_correctly<servekit::clipper_aimd>();
}

TEST(AdaptiveModel, DeadlineAdmissionAnswersEveryRequestOnceOkOrUnavailable) {
  adaptive_model<servekit::latency_target> m{options(true)};
  // Warm the profile with batches of several sizes, then flood far past capacity.
  for (int round = 0; round < 3; ++round) {
    auto warm = flood(m, 8);
    for (auto& f : warm) {
      ASSERT_TRUE(f.get().status.ok());
    }
  }
  auto answers = flood(m, 500);
  std::size_t ok = 0;
  std::size_t refused = 0;
  for (auto& f : answers) {
    const servekit::response r = f.get();
    if (r.status.ok()) {
      ++ok;
    } else {
      ASSERT_EQ(r.status.code(), servekit::status_code::unavailable) << r.status.message();
      EXPECT_NE(r.status.message().find("would miss its deadline"), std::string::npos)
          << r.status.message();
      ++refused;
    }
  }
  EXPECT_EQ(ok + refused, answers.size());
  EXPECT_GT(ok, 0u);
}

} // namespace adaptive_model_test
