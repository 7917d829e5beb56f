// infer_sync(): submit and wait on the calling thread for the final response. It answers with the
// backend's outputs, returns a rejected request's error, drops a decoupled model's partial
// responses, takes a response cache hit answered before submit returns, sleeps through a response
// slower than its spin, and keeps concurrent callers' responses apart. The same through model_ref.
#include "archetypes/gate.hpp"

#include <servekit/cache.hpp>
#include <servekit/runtime/model.hpp>
#include <servekit/runtime/model_ref.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace infer_sync_test {

using namespace std::chrono_literals;
using servekit::data_type;
using servekit::shape;

/// What the backend does before answering; set by a test before it builds its model.
std::function<void(servekit::batch&)> on_execute; // NOLINT: test-only global
std::atomic<int> executions{0};                   // NOLINT: test-only global

/// OUTPUT0 = INPUT0 * 2 (FP32 [4]).
struct doubler {
  static constexpr std::int32_t max_batch_size = 8;
  static constexpr servekit::tensor_declaration inputs[] = {{"INPUT0", data_type::fp32, {4}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"OUTPUT0", data_type::fp32, {4}}};

  explicit doubler(const servekit::instance_context& /*context*/) {}

  void execute(servekit::batch& b) {
    ++executions;
    if (on_execute) {
      on_execute(b);
    }
    for (std::size_t i = 0; i < b.size(); ++i) {
      const auto& in = *b.request(i).find_input("INPUT0");
      auto& out = b.response(i).add_output("OUTPUT0", data_type::fp32, in.shape);
      for (std::size_t k = 0; k < in.values<float>().size(); ++k) {
        out.values<float>()[k] = in.values<float>()[k] * 2;
      }
    }
  }
};

/// The same, decoupled: on_execute may send partial responses first.
struct streaming_doubler : doubler {
  static constexpr bool decoupled = true;
  using doubler::doubler;
};

using doubler_model =
    servekit::model<doubler, servekit::dynamic_batcher<>, servekit::instance_group<2>>;
using streaming_model = servekit::model<streaming_doubler>;

servekit::request make_request(float value, std::string id = "r") {
  servekit::request r;
  r.id = std::move(id);
  auto t = servekit::make_tensor("INPUT0", data_type::fp32, shape{1, 4});
  for (auto& v : t.values<float>()) {
    v = value;
  }
  r.inputs.push_back(std::move(t));
  return r;
}

servekit::model_options options(std::string name = "doubler") {
  servekit::model_options o;
  o.name = std::move(name);
  o.dynamic_batching = servekit::dynamic_batching_options{};
  return o;
}

float first_output(const servekit::response& r) {
  const servekit::tensor* out = r.find_output("OUTPUT0");
  return r.ok() && out != nullptr ? out->values<float>()[0] : -1;
}

class infer_sync_test : public ::testing::Test {
protected:
  void SetUp() override {
    on_execute = nullptr;
    executions = 0;
  }
  void TearDown() override { on_execute = nullptr; }
};

TEST_F(infer_sync_test, AnswersWithTheBackendsOutputs) {
  doubler_model m{options()};
  const servekit::response r = m.infer_sync(make_request(1.5F, "a"));
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_TRUE(r.final);
  EXPECT_EQ(r.id, "a");
  EXPECT_EQ(first_output(r), 3.0F);
  EXPECT_EQ(m.statistics().success.count, 1U);
}

TEST_F(infer_sync_test, ARejectedRequestReturnsItsErrorAndNeverExecutes) {
  doubler_model m{options()};
  servekit::request bad;
  bad.id = "bad";
  bad.inputs.push_back(servekit::make_tensor("INPUT0", data_type::int32, shape{1, 4}));
  const servekit::response r = m.infer_sync(std::move(bad));
  EXPECT_EQ(r.status.code(), servekit::status_code::invalid_argument);
  EXPECT_NE(r.status.message().find("'INPUT0'"), std::string::npos) << r.status.message();
  EXPECT_EQ(r.id, "bad");
  EXPECT_TRUE(r.final);
  EXPECT_EQ(executions.load(), 0);
}

TEST_F(infer_sync_test, ABackendFailureComesBackAsTheResponse) {
  on_execute = [](servekit::batch&) { throw std::runtime_error("device lost"); };
  doubler_model m{options()};
  const servekit::response r = m.infer_sync(make_request(1.0F));
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status.message().find("device lost"), std::string::npos) << r.status.message();
}

TEST_F(infer_sync_test, ADecoupledModelsPartialResponsesAreDroppedAndTheFinalReturned) {
  on_execute = [](servekit::batch& b) {
    for (int k = 0; k < 3; ++k) {
      servekit::response partial;
      partial.add_output("OUTPUT0", data_type::fp32, shape{1, 4});
      ASSERT_TRUE(b.send_partial(0, std::move(partial)).ok());
    }
  };
  servekit::model_options o;
  o.name = "stream";
  o.model_transaction_policy = servekit::model_transaction_policy_options{.decoupled = true};
  streaming_model m{o};
  const servekit::response r = m.infer_sync(make_request(2.0F, "s"));
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_TRUE(r.final);
  EXPECT_EQ(first_output(r), 4.0F);
}

TEST_F(infer_sync_test, AResponseCacheHitAnsweredBeforeSubmitReturnsIsTaken) {
  servekit::model_options o = options("cached");
  o.response_cache = servekit::response_cache_options{true};
  servekit::response_cache_settings settings;
  settings.size_bytes = 1 << 20;
  servekit::model_environment environment;
  environment.cache = std::make_shared<servekit::response_cache>(settings);
  doubler_model m{o, {}, environment};
  EXPECT_EQ(first_output(m.infer_sync(make_request(3.0F, "miss"))), 6.0F);
  const servekit::response hit = m.infer_sync(make_request(3.0F, "hit"));
  EXPECT_EQ(first_output(hit), 6.0F);
  EXPECT_EQ(hit.id, "hit");
  EXPECT_EQ(executions.load(), 1);
  EXPECT_EQ(m.statistics().cache_hit.count, 1U);
}

TEST_F(infer_sync_test, AResponseSlowerThanTheSpinWakesTheSleepingCaller) {
  archetypes::gate executing;
  archetypes::gate release;
  on_execute = [&](servekit::batch&) {
    executing.open();
    ASSERT_TRUE(release.wait());
  };
  doubler_model m{options()};
  servekit::response r;
  // No spin: the caller goes to sleep on its first look and only the instance's notify wakes it.
  std::thread caller{[&] { r = m.infer_sync(make_request(4.0F), 0us); }};
  ASSERT_TRUE(executing.wait());
  release.open();
  caller.join();
  EXPECT_EQ(first_output(r), 8.0F);
}

TEST_F(infer_sync_test, ConcurrentCallersEachGetTheirOwnResponse) {
  doubler_model m{options()};
  constexpr int callers = 4;
  constexpr int calls = 200;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < callers; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < calls; ++i) {
        const auto value = static_cast<float>(t * calls + i);
        // Alternate spinning and sleeping callers, so both ways of waiting meet batches.
        const servekit::response r =
            m.infer_sync(make_request(value), i % 2 == 0 ? servekit::sync_response_spin : 0us);
        if (first_output(r) != value * 2) {
          ++wrong;
        }
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(m.statistics().success.count, static_cast<std::uint64_t>(callers * calls));
}

TEST_F(infer_sync_test, AModelRefWaitsTheSameWayAndAsAFuture) {
  doubler_model m{options()};
  const servekit::model_ref ref{m};
  EXPECT_EQ(first_output(ref.infer_sync(make_request(5.0F))), 10.0F);
  EXPECT_EQ(first_output(ref.infer(make_request(6.0F)).get()), 12.0F);
  servekit::request bad = make_request(1.0F, "bad");
  bad.inputs[0].shape = shape{1, 3};
  EXPECT_EQ(ref.infer_sync(std::move(bad)).status.code(), servekit::status_code::invalid_argument);
}

} // namespace infer_sync_test
