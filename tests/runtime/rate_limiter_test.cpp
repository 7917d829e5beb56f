// servekit::rate_limiter (thread-safe, shared by models), its flag parser, and the per-shell
// adapter detail::instance_rate_limits, driven by real threads.
#include <servekit/runtime/detail/instance_rate_limits.hpp>
#include <servekit/runtime/rate_limiter.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace rate_limiter_test {

using servekit::instance_group_kind;
using servekit::instance_group_options;
using servekit::rate_limiter;
using servekit::rate_limiter_options;
using servekit::detail::instance_rate_limits;

// One CPU group of `count` instances, with a rate_limiter when `limits` is given.
instance_group_options group(std::int32_t count, std::optional<rate_limiter_options> limits) {
  instance_group_options g;
  g.kind = instance_group_kind::kind_cpu;
  g.count = count;
  g.rate_limiter = std::move(limits);
  return g;
}

struct placed_model {
  std::vector<instance_group_options> groups;
  std::vector<servekit::instance_placement> placements;
};

placed_model place(const std::string& name, std::vector<instance_group_options> groups) {
  placed_model m;
  m.groups = servekit::resolve_instance_groups(name, groups, 1);
  m.placements = servekit::expand_instance_groups(m.groups);
  return m;
}

rate_limiter_options needs_r(std::uint32_t count, std::uint32_t priority = 1) {
  return rate_limiter_options{{{"R", false, count}}, priority};
}

TEST(rate_limit_resource_flag, parses_name_count_and_optional_device) {
  const auto any = servekit::parse_rate_limit_resource("R1:4");
  EXPECT_EQ(any.name, "R1");
  EXPECT_EQ(any.count, 4U);
  EXPECT_FALSE(any.device.has_value());
  const auto on_device = servekit::parse_rate_limit_resource("mem:2:1");
  EXPECT_EQ(on_device.name, "mem");
  EXPECT_EQ(on_device.count, 2U);
  EXPECT_EQ(on_device.device, 1);
}

TEST(rate_limit_resource_flag, refuses_malformed_values_saying_why) {
  for (const char* bad :
       {"R", ":3", "R:", "R:x", "R:-1", "R:3:", "R:3:-1", "R:3:a", "R:3:0:1", "R:99999999999"}) {
    try {
      (void)servekit::parse_rate_limit_resource(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("<name>:<count>[:<device>]"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(rate_limiter, registers_only_instances_of_groups_with_a_rate_limiter_until_destroyed) {
  rate_limiter limiter;
  const auto m = place("m", {group(2, needs_r(3)), group(1, std::nullopt)});
  {
    const auto reg = limiter.register_model("m", m.groups, m.placements);
    ASSERT_EQ(reg.size(), 3U);
    EXPECT_TRUE(reg.id(0).has_value());
    EXPECT_TRUE(reg.id(1).has_value());
    EXPECT_FALSE(reg.id(2).has_value());
    EXPECT_EQ(limiter.pool_count("R", 0), 3U);
  }
  EXPECT_EQ(limiter.pool_count("R", 0), 0U); // unregistered with the registration
}

TEST(rate_limiter, a_server_count_below_a_need_fails_registration_at_the_resource) {
  rate_limiter limiter{{.resources = {{"R", 1, std::nullopt}}, .aging = {}}};
  const auto m = place("m", {group(1, std::nullopt), group(1, needs_r(2))});
  try {
    (void)limiter.register_model("m", m.groups, m.placements);
    FAIL() << "expected config_error";
  } catch (const servekit::config_error& e) {
    EXPECT_EQ(e.path(), "/instance_group/1/rate_limiter/resources/0/count");
    EXPECT_NE(std::string(e.what()).find("Resource count for \"R\" is limited to 1"),
              std::string::npos)
        << e.what();
  }
}

TEST(instance_rate_limits, without_a_limiter_or_a_group_rate_limiter_acquire_is_free) {
  const auto m = place("m", {group(1, needs_r(1)), group(1, std::nullopt)});
  instance_rate_limits none{nullptr, "m", m.groups, m.placements};
  EXPECT_FALSE(none.limited(0));
  EXPECT_EQ(none.acquire(0), 0U);
  none.release(0);

  auto limiter = std::make_shared<rate_limiter>();
  instance_rate_limits some{limiter, "m", m.groups, m.placements};
  EXPECT_TRUE(some.limited(0));
  EXPECT_FALSE(some.limited(1));
  EXPECT_EQ(some.acquire(1), 0U);
  some.release(1);
}

// Two models, each with several instance threads, share resource R of count 1: at no time do
// two executions hold it, and every execution happens.
TEST(instance_rate_limits, two_models_sharing_a_resource_of_count_one_never_execute_at_once) {
  auto limiter = std::make_shared<rate_limiter>();
  const auto a = place("a", {group(3, needs_r(1))});
  const auto b = place("b", {group(2, needs_r(1, 2))});
  instance_rate_limits limits_a{limiter, "a", a.groups, a.placements};
  instance_rate_limits limits_b{limiter, "b", b.groups, b.placements};
  EXPECT_EQ(limiter->pool_count("R", 0), 1U);

  std::atomic<int> executing{0};
  std::atomic<int> most{0};
  std::atomic<std::uint64_t> waited{0};
  std::atomic<int> done{0};
  constexpr int rounds = 200;
  const auto run = [&](instance_rate_limits& limits, std::size_t instance) {
    for (int r = 0; r < rounds; ++r) {
      waited += limits.acquire(instance);
      const int now = ++executing;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      std::this_thread::yield();
      --executing;
      limits.release(instance);
      ++done;
    }
  };
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < 3; ++i) {
    threads.emplace_back(run, std::ref(limits_a), i);
  }
  for (std::size_t i = 0; i < 2; ++i) {
    threads.emplace_back(run, std::ref(limits_b), i);
  }
  for (auto& t : threads) {
    t.join();
  }
  EXPECT_EQ(most.load(), 1);
  EXPECT_EQ(done.load(), 5 * rounds);
  (void)waited.load(); // whether the threads above overlapped is the scheduler's business

  // A wait is counted: B's instance asks while A's holds the resource, and A lets go only
  // after B has been asking for a while.
  ASSERT_EQ(limits_a.acquire(0), 0U);
  std::atomic<bool> asking{false};
  std::uint64_t b_waited = 0;
  std::thread b_thread{[&] {
    asking = true;
    b_waited = limits_b.acquire(0);
    limits_b.release(0);
  }};
  while (!asking) {
    std::this_thread::yield();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds{50});
  limits_a.release(0);
  b_thread.join();
  EXPECT_GT(b_waited, 0U);
}

// A model unregistering (destroyed) while another keeps serving: the other's waiting instance
// is not left behind, and the pool follows the remaining needs.
TEST(instance_rate_limits, a_model_destroyed_while_another_serves_leaves_the_other_running) {
  auto limiter = std::make_shared<rate_limiter>();
  const auto big = place("big", {group(1, needs_r(4))});
  const auto small = place("small", {group(2, needs_r(1))});
  instance_rate_limits limits_small{limiter, "small", small.groups, small.placements};
  {
    instance_rate_limits limits_big{limiter, "big", big.groups, big.placements};
    EXPECT_EQ(limiter->pool_count("R", 0), 4U);
    EXPECT_EQ(limits_big.acquire(0), 0U);
    std::atomic<bool> got{false};
    std::thread waiter{[&] {
      limits_small.acquire(0); // R is all taken by big
      got = true;
      limits_small.release(0);
    }};
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
    EXPECT_FALSE(got.load());
    limits_big.release(0);
    waiter.join();
    EXPECT_TRUE(got.load());
  }
  EXPECT_EQ(limiter->pool_count("R", 0), 1U);
  EXPECT_EQ(limits_small.acquire(1), 0U);
  limits_small.release(1);
}

} // namespace rate_limiter_test
