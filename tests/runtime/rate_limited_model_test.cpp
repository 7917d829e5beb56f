// Models given a servekit::rate_limiter (model_environment::limiter): instances of two models
// whose groups share a resource of count 1 never execute at once, the waits are in the
// statistics, and a server count below a need fails the model's construction.
#include <servekit/runtime/model.hpp>
#include <servekit/runtime/rate_limiter.hpp>
#include <servekit/schedule/sequence_batcher.hpp>
#include <servekit/state/host_state_store.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace rate_limited_model_test {

using servekit::data_type;

std::atomic<int> executing{0}; // NOLINT: test-only globals, shared by the two models
std::atomic<int> most_at_once{0};

/// Copies INPUT0 (FP32 [4]) to OUTPUT0, noting how many executions overlap.
struct counting_backend {
  static constexpr std::int32_t max_batch_size = 4;
  static constexpr servekit::tensor_declaration inputs[] = {{"INPUT0", data_type::fp32, {4}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"OUTPUT0", data_type::fp32, {4}}};

  explicit counting_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    const int now = ++executing;
    int seen = most_at_once.load();
    while (now > seen && !most_at_once.compare_exchange_weak(seen, now)) {
    }
    // Long enough that the other model's instance, with work queued, must wait for the
    // resource: the waits counted below then happen whatever the machine's load.
    std::this_thread::sleep_for(std::chrono::microseconds{300});
    for (std::size_t i = 0; i < b.size(); ++i) {
      const auto& in = *b.request(i).find_input("INPUT0");
      auto& out = b.response(i).add_output("OUTPUT0", data_type::fp32, in.shape);
      std::copy(in.values<float>().begin(), in.values<float>().end(), out.values<float>().begin());
    }
    --executing;
  }
};

using model_t = servekit::model<counting_backend, servekit::instance_group<1>>;

servekit::request make_request(std::string id) {
  servekit::request r;
  r.id = std::move(id);
  r.inputs.push_back(servekit::make_tensor("INPUT0", data_type::fp32, servekit::shape{1, 4}));
  return r;
}

servekit::model_options limited_options(std::string name, std::uint32_t r_count,
                                        std::uint32_t priority = 1) {
  servekit::model_options o;
  o.name = std::move(name);
  servekit::instance_group_options g;
  g.kind = servekit::instance_group_kind::kind_cpu;
  g.count = 2;
  g.rate_limiter = servekit::rate_limiter_options{{{"R", false, r_count}}, priority};
  o.instance_group.push_back(g);
  return o;
}

TEST(rate_limited_model, two_models_sharing_a_resource_of_count_one_never_execute_at_once) {
  executing = 0;
  most_at_once = 0;
  auto limiter = std::make_shared<servekit::rate_limiter>();
  model_t a{limited_options("a", 1), {}, {.limiter = limiter, .cache = nullptr}};
  model_t b{limited_options("b", 1, 2), {}, {.limiter = limiter, .cache = nullptr}};
  EXPECT_EQ(limiter->pool_count("R", 0), 1U);

  std::vector<std::future<servekit::response>> answers;
  for (int i = 0; i < 100; ++i) {
    answers.push_back(a.infer(make_request("a" + std::to_string(i))));
    answers.push_back(b.infer(make_request("b" + std::to_string(i))));
  }
  for (auto& f : answers) {
    EXPECT_TRUE(f.get().ok());
  }
  EXPECT_EQ(most_at_once.load(), 1);
  const auto sa = a.statistics();
  const auto sb = b.statistics();
  EXPECT_GT(sa.rate_limiter_wait.count + sb.rate_limiter_wait.count, 0U);
}

TEST(rate_limited_model, a_sequence_model_and_a_plain_model_share_the_resource_too) {
  executing = 0;
  most_at_once = 0;
  using sequence_model_t =
      servekit::model<counting_backend,
                      servekit::sequence_batcher<servekit::direct, servekit::host_state_store>,
                      servekit::instance_group<1>>;
  auto limiter = std::make_shared<servekit::rate_limiter>();
  model_t plain{limited_options("plain", 1), {}, {.limiter = limiter, .cache = nullptr}};
  sequence_model_t stateful{
      limited_options("stateful", 1), {}, {.limiter = limiter, .cache = nullptr}};
  std::vector<std::future<servekit::response>> answers;
  for (std::uint64_t i = 1; i <= 100; ++i) {
    auto r = make_request("s" + std::to_string(i));
    r.sequence_id = i;
    r.sequence_start = true;
    r.sequence_end = true;
    answers.push_back(stateful.infer(std::move(r)));
    answers.push_back(plain.infer(make_request("p" + std::to_string(i))));
  }
  for (auto& f : answers) {
    EXPECT_TRUE(f.get().ok());
  }
  EXPECT_EQ(most_at_once.load(), 1);
  EXPECT_GT(stateful.statistics().rate_limiter_wait.count +
                plain.statistics().rate_limiter_wait.count,
            0U);
}

TEST(rate_limited_model, without_a_limiter_the_groups_rate_limiter_is_ignored) {
  executing = 0;
  most_at_once = 0;
  model_t a{limited_options("a", 1)};
  EXPECT_EQ(a.infer(make_request("x")).get().ok(), true);
  EXPECT_EQ(a.statistics().rate_limiter_wait.count, 0U);
}

TEST(rate_limited_model, a_server_count_below_a_need_fails_the_model_with_the_field) {
  auto limiter = std::make_shared<servekit::rate_limiter>(
      servekit::rate_limiter_settings{{{"R", 1, std::nullopt}}, {}});
  try {
    model_t a{limited_options("a", 2), {}, {.limiter = limiter, .cache = nullptr}};
    FAIL() << "expected config_error";
  } catch (const servekit::config_error& e) {
    EXPECT_EQ(e.path(), "/instance_group/0/rate_limiter/resources/0/count");
  }
  // The failed model left nothing registered: a model that fits loads.
  model_t ok{limited_options("ok", 1), {}, {.limiter = limiter, .cache = nullptr}};
  EXPECT_TRUE(ok.infer(make_request("x")).get().ok());
}

TEST(rate_limited_model, unloading_a_model_leaves_the_other_serving) {
  auto limiter = std::make_shared<servekit::rate_limiter>();
  model_t small{limited_options("small", 1), {}, {.limiter = limiter, .cache = nullptr}};
  {
    model_t big{limited_options("big", 3), {}, {.limiter = limiter, .cache = nullptr}};
    EXPECT_EQ(limiter->pool_count("R", 0), 3U);
    EXPECT_TRUE(big.infer(make_request("x")).get().ok());
  }
  EXPECT_EQ(limiter->pool_count("R", 0), 1U);
  EXPECT_TRUE(small.infer(make_request("y")).get().ok());
}

} // namespace rate_limited_model_test
