// adaptive_batch_core and its controllers, in virtual time through the simulated shell: the
// learned signals (latency profile, arrival rate), servekit's latency_target through a rising
// and falling load, a step in backend latency and a burst, deadline-aware admission, and the
// comparison rules (TF Serving's in-flight hill climb, Clipper's AIMD).

#include <servekit/core/clock.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/runtime/simulated_shell.hpp>
#include <servekit/schedule/adaptive_batcher.hpp>
#include <servekit/schedule/arrival_rate.hpp>
#include <servekit/schedule/batching_controllers.hpp>
#include <servekit/schedule/latency_profile.hpp>
#include <servekit/schedule/scheduler.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace adaptive_batcher_test {

using namespace std::chrono_literals;

servekit::time_point at_us(std::int64_t n) {
  return servekit::time_point{} + std::chrono::microseconds(n);
}
std::int64_t us_of(servekit::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t - servekit::time_point{}).count();
}
servekit::latency_model latency(std::int64_t fixed_us, std::int64_t per_element_us) {
  return servekit::latency_model{std::chrono::microseconds(fixed_us),
                                 std::chrono::microseconds(per_element_us)};
}

/// A model of max_batch_size `max_batch` aiming at `target_us` for its p99.
servekit::scheduler_settings objective(std::int32_t max_batch, std::uint64_t target_us,
                                       bool admission = false) {
  servekit::scheduler_settings s;
  s.model_name = "adaptive";
  s.max_batch_size = max_batch;
  s.dynamic_batching.adaptive.target_latency_microseconds = target_us;
  s.dynamic_batching.adaptive.target_percentile = 99.0;
  s.dynamic_batching.adaptive.deadline_admission = admission;
  return s;
}

/// One request's fate: when it arrived, when it was answered, and how.
struct fate {
  std::int64_t arrived_us = 0;
  std::int64_t answered_us = -1;
  bool ok = false;
  int answers = 0;
  std::string message;
};

/// The simulated model and every request's fate, by id.
template <class Controller = servekit::latency_target>
class rig {
public:
  using policy = servekit::dynamic_batcher<servekit::adaptive<Controller>>;

  rig(const servekit::scheduler_settings& s, std::size_t instances, servekit::latency_model m)
      : sim{s, instances, m} {}
  rig(const rig&) = delete;
  rig& operator=(const rig&) = delete;

  /// Arrivals at `rate` per second from `from_us` to `to_us`, at exponential (Poisson) gaps.
  void poisson(std::int64_t from_us, std::int64_t to_us, double rate) {
    std::exponential_distribution<double> gap{rate / 1e6};
    for (double t = static_cast<double>(from_us) + gap(random); t < static_cast<double>(to_us);
         t += gap(random)) {
      submit(static_cast<std::int64_t>(t));
    }
  }

  void submit(std::int64_t t) {
    const std::string id = std::to_string(next_id++);
    fates[id].arrived_us = t;
    servekit::request r;
    r.id = id;
    sim.submit_at(at_us(t), std::move(r), [this](servekit::response&& answer) {
      fate& f = fates[answer.id];
      f.answered_us = us_of(sim.now());
      f.ok = answer.status.ok();
      f.message = answer.status.message();
      ++f.answers;
    });
  }

  /// Latencies (µs) of the requests that arrived in [from_us, to_us) and were served.
  [[nodiscard]] std::vector<std::int64_t> served_between(std::int64_t from_us,
                                                         std::int64_t to_us) const {
    std::vector<std::int64_t> out;
    for (const auto& [id, f] : fates) {
      if (f.arrived_us >= from_us && f.arrived_us < to_us && f.ok) {
        out.push_back(f.answered_us - f.arrived_us);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  /// Mean batch size of the batches that started in [from_us, to_us).
  [[nodiscard]] double mean_batch_between(std::int64_t from_us, std::int64_t to_us) const {
    double elements = 0;
    double batches = 0;
    for (const auto& b : sim.batches()) {
      const std::int64_t start = us_of(b.start);
      if (start >= from_us && start < to_us) {
        elements += static_cast<double>(b.elements);
        batches += 1;
      }
    }
    return batches == 0 ? 0.0 : elements / batches;
  }

  servekit::simulated_shell<policy> sim;
  std::map<std::string, fate> fates;
  std::mt19937_64 random{42};
  std::uint64_t next_id = 0;
};

/// The `p` quantile (0..1) of sorted `values`.
std::int64_t quantile(const std::vector<std::int64_t>& values, double p) {
  if (values.empty()) {
    return 0;
  }
  const auto i = static_cast<std::size_t>(std::ceil(p * static_cast<double>(values.size()))) - 1;
  return values[std::min(i, values.size() - 1)];
}

// -- the signals -----------------------------------------------------------------------------

TEST(LatencyProfile, FitsTheFixedAndPerElementPartsOfBatchesOfSeveralSizes) {
  servekit::latency_profile profile;
  for (int round = 0; round < 20; ++round) {
    for (const std::int64_t b : {1, 4, 8, 16}) {
      profile.observe(b, std::chrono::microseconds(2000 + 250 * b));
    }
  }
  EXPECT_NEAR(profile.fixed_seconds() * 1e6, 2000.0, 1.0);
  EXPECT_NEAR(profile.per_element_seconds() * 1e6, 250.0, 0.1);
  EXPECT_EQ(profile.predict(32), std::chrono::microseconds(10000));
}

TEST(LatencyProfile, OneBatchSizeAloneIsReadAsAllPerElement) {
  servekit::latency_profile profile;
  for (int i = 0; i < 10; ++i) {
    profile.observe(4, 8ms);
  }
  EXPECT_EQ(profile.fixed_seconds(), 0.0);
  EXPECT_NEAR(profile.per_element_seconds(), 0.002, 1e-9);
}

TEST(LatencyProfile, FollowsABackendThatBecomesSlowerWithinAFewDozenBatches) {
  servekit::latency_profile profile;
  for (int i = 0; i < 200; ++i) {
    profile.observe(1 + i % 8, std::chrono::microseconds(1000 + 100 * (1 + i % 8)));
  }
  EXPECT_NEAR(profile.seconds(8) * 1e6, 1800.0, 1.0);
  const auto slower = [&](int batches) {
    for (int i = 0; i < batches; ++i) {
      profile.observe(1 + i % 8, std::chrono::microseconds(2000 + 200 * (1 + i % 8)));
    }
  };
  slower(50); // 0.98^50: the old line keeps about a third of the weight
  EXPECT_GT(profile.seconds(8) * 1e6, 1800.0 + 0.6 * 1800.0);
  slower(150);
  EXPECT_NEAR(profile.seconds(8) * 1e6, 3600.0, 0.02 * 3600.0);
}

TEST(ArrivalRate, SettlesAtASteadyRateAndCoversMostOfAStepWithinOneWindow) {
  servekit::arrival_rate rate{500ms};
  std::int64_t t = 0;
  for (; t < 3'000'000; t += 1000) { // 1000/s for 3 s
    rate.observe(at_us(t), 1);
  }
  EXPECT_NEAR(rate.per_second(at_us(t)), 1000.0, 20.0);
  const std::int64_t step = t;
  for (; t < step + 500'000; t += 250) { // 4000/s for one window
    rate.observe(at_us(t), 1);
  }
  const double covered = (rate.per_second(at_us(t)) - 1000.0) / 3000.0;
  EXPECT_NEAR(covered, 1.0 - std::exp(-1.0), 0.03);
  // Nothing arrives: the estimate decays by e per window.
  EXPECT_NEAR(rate.per_second(at_us(t + 500'000)) / rate.per_second(at_us(t)), std::exp(-1.0),
              0.01);
}

// -- latency_target ----------------------------------------------------------------------------

TEST(LatencyTarget, AtLowLoadBatchesAreSentAtOnceAlone) {
  // 100/s on 2 instances of 5 ms + 0.5 ms/element: nothing is worth waiting for.
  rig r{objective(32, 50'000), 2, latency(5000, 500)};
  r.poisson(0, 2'000'000, 100);
  r.sim.run();
  const auto served = r.served_between(500'000, 2'000'000);
  ASSERT_FALSE(served.empty());
  EXPECT_LE(quantile(served, 0.99), 5500 + 5500); // at most one execution ahead of it
  EXPECT_LT(r.mean_batch_between(500'000, 2'000'000), 1.2);
}

TEST(LatencyTarget, ThroughARisingAndFallingLoadBatchesGrowAndShrinkAndTheP99MeetsTheTarget) {
  // Capacity with batches of 32 on 2 instances of 5 ms + 0.5 ms/element: 2·32/21 ms ≈ 3050/s.
  rig r{objective(32, 50'000), 2, latency(5000, 500)};
  const std::vector<double> levels{150, 600, 1500, 2400, 1500, 600, 150};
  std::int64_t t = 0;
  for (const double rate : levels) {
    r.poisson(t, t + 2'000'000, rate);
    t += 2'000'000;
  }
  r.sim.run();
  std::vector<double> mean_batch;
  for (std::size_t i = 0; i < levels.size(); ++i) {
    const std::int64_t from = static_cast<std::int64_t>(i) * 2'000'000 + 500'000; // settled
    const std::int64_t to = from + 1'500'000;
    const auto served = r.served_between(from, to);
    ASSERT_FALSE(served.empty()) << "level " << i;
    EXPECT_LE(quantile(served, 0.99), 50'000) << "level " << i << " at " << levels[i] << "/s";
    mean_batch.push_back(r.mean_batch_between(from, to));
  }
  EXPECT_LT(mean_batch[0], 1.5);
  EXPECT_GT(mean_batch[3], 2.0 * mean_batch[1]); // peak batches are larger
  EXPECT_LT(mean_batch[6], 1.5);                 // and small again at night
  for (const auto& [id, f] : r.fates) {
    EXPECT_EQ(f.answers, 1) << id;
    EXPECT_TRUE(f.ok) << id << ": " << f.message;
  }
}

TEST(LatencyTarget, AStepInBackendLatencyIsLearnedAndTheTargetIsMetAgain) {
  rig r{objective(32, 50'000), 2, latency(5000, 500)};
  r.poisson(0, 6'000'000, 1200);
  r.sim.run_until(at_us(2'000'000));
  r.sim.set_latency(latency(8000, 800)); // the backend becomes 60 % slower
  r.sim.run();
  const auto before = r.served_between(500'000, 2'000'000);
  const auto after = r.served_between(3'000'000, 6'000'000);
  EXPECT_LE(quantile(before, 0.99), 50'000);
  EXPECT_LE(quantile(after, 0.99), 50'000);
  const auto s = r.sim.statistics().adaptive_batching;
  ASSERT_TRUE(s.has_value());
  EXPECT_NEAR(s->fixed_latency_us, 8000.0, 800.0);
  EXPECT_NEAR(s->per_element_latency_us, 800.0, 80.0);
  EXPECT_EQ(s->target_latency_us, 50'000U);
  EXPECT_GT(s->profile_samples, 100U);
  EXPECT_NEAR(s->arrival_rate, 1200.0, 300.0);
}

TEST(LatencyTarget, ABurstIsServedInLargeBatchesAndEveryRequestIsAnsweredOnce) {
  rig r{objective(32, 50'000), 2, latency(5000, 500)};
  r.poisson(0, 1'000'000, 300);
  for (int i = 0; i < 200; ++i) {
    r.submit(1'000'000); // 200 at one instant
  }
  r.poisson(1'000'000, 2'000'000, 300);
  r.sim.run();
  EXPECT_GT(r.mean_batch_between(1'000'000, 1'100'000), 16.0);
  for (const auto& [id, f] : r.fates) {
    EXPECT_EQ(f.answers, 1) << id;
    EXPECT_TRUE(f.ok) << id;
  }
  const auto after = r.served_between(1'500'000, 2'000'000);
  EXPECT_LE(quantile(after, 0.99), 50'000);
}

// -- deadline-aware admission --------------------------------------------------------------------

TEST(DeadlineAdmission, UnderOverloadRefusesWhatWouldBeLateAndServesTheRestInTime) {
  // 150 % of capacity for 2 s.
  rig r{objective(32, 50'000, true), 2, latency(5000, 500)};
  r.poisson(0, 500'000, 1000); // learn the profile first
  r.poisson(500'000, 2'500'000, 4500);
  r.sim.run();
  std::size_t refused = 0;
  std::size_t served = 0;
  for (const auto& [id, f] : r.fates) {
    ASSERT_EQ(f.answers, 1) << id;
    if (f.ok) {
      ++served;
      continue;
    }
    ++refused;
    EXPECT_NE(f.message.find("would miss its deadline"), std::string::npos) << f.message;
    EXPECT_EQ(f.answered_us, f.arrived_us) << "refused at once";
  }
  EXPECT_GT(refused, 0u);
  const auto late = r.served_between(500'000, 2'500'000);
  EXPECT_LE(quantile(late, 0.95), 50'000);
  EXPECT_EQ(r.sim.statistics().adaptive_batching->refused_for_deadline, refused);
  EXPECT_GT(served, refused);
}

TEST(DeadlineAdmission, OffAnOverloadedModelQueuesEverything) {
  rig r{objective(32, 50'000, false), 2, latency(5000, 500)};
  r.poisson(0, 500'000, 1000);
  r.poisson(500'000, 1'500'000, 4500);
  r.sim.run();
  for (const auto& [id, f] : r.fates) {
    EXPECT_TRUE(f.ok) << id;
  }
  EXPECT_GT(quantile(r.served_between(500'000, 1'500'000), 0.99), 50'000);
}

// -- the comparison rules ------------------------------------------------------------------------

TEST(InFlightHillClimb, HoldsTheNextBatchWhileTheLimitIsReached) {
  servekit::batching_signals s{{}, 32, 4};
  servekit::in_flight_hill_climb rule;
  servekit::batch_observation o;
  o.requests = 1;
  rule.observe(o, s); // starts at the instance count
  EXPECT_EQ(rule.value(), 4.0);
  servekit::batching_view v;
  v.in_flight = 3;
  EXPECT_FALSE(rule.decide(v, s).hold);
  v.in_flight = 4;
  EXPECT_TRUE(rule.decide(v, s).hold);
  EXPECT_EQ(rule.decide(v, s).max_delay, servekit::duration::zero());
}

TEST(InFlightHillClimb, StepsTheLimitAndReversesWhenTheMeanLatencyGetsWorse) {
  servekit::batching_signals s{{}, 32, 8};
  servekit::in_flight_hill_climb rule;
  const auto window = [&](std::int64_t latency_us) {
    servekit::batch_observation o;
    o.requests = 4;
    o.started = at_us(0);
    o.finished = at_us(latency_us);
    o.worst_latency = std::chrono::microseconds(latency_us);
    for (std::size_t i = 0; i < servekit::in_flight_hill_climb::window; ++i) {
      rule.observe(o, s);
    }
  };
  window(1000);
  EXPECT_NEAR(rule.value(), 7.2, 1e-9); // first step: down by a tenth
  window(900);                          // better: keep going
  EXPECT_NEAR(rule.value(), 6.48, 1e-9);
  window(2000); // worse: turn around
  EXPECT_NEAR(rule.value(), 6.48 + 0.648, 1e-9);
}

TEST(ClipperAimd, RaisesTheCapByOneWhenWithinTheObjectiveAndCutsItByATenthWhenNot) {
  servekit::adaptive_batching_options o;
  o.target_latency_microseconds = 10'000;
  servekit::batching_signals s{o, 32, 1};
  servekit::clipper_aimd rule;
  servekit::batch_observation fast;
  fast.started = at_us(0);
  fast.finished = at_us(5000);
  for (int i = 0; i < 9; ++i) {
    fast.elements = static_cast<std::int64_t>(rule.value());
    rule.observe(fast, s);
  }
  EXPECT_EQ(rule.value(), 10.0);
  servekit::batch_observation slow = fast;
  slow.finished = at_us(20'000);
  rule.observe(slow, s);
  EXPECT_NEAR(rule.value(), 9.0, 1e-9);
  servekit::batching_view v;
  EXPECT_EQ(rule.decide(v, s).at_most, 9);
  // A batch smaller than the cap says nothing about the cap.
  fast.elements = 3;
  rule.observe(fast, s);
  EXPECT_NEAR(rule.value(), 9.0, 1e-9);
}

TEST(AdaptiveBatcher, ComparisonRulesServeEveryRequestOnce) {
  rig<servekit::in_flight_hill_climb> hill{objective(32, 50'000), 4, latency(5000, 500)};
  hill.poisson(0, 2'000'000, 2000);
  hill.sim.run();
  rig<servekit::clipper_aimd> aimd{objective(32, 50'000), 4, latency(5000, 500)};
  aimd.poisson(0, 2'000'000, 2000);
  aimd.sim.run();
  for (const auto* fates : {&hill.fates, &aimd.fates}) {
    for (const auto& [id, f] : *fates) {
      EXPECT_EQ(f.answers, 1) << id;
      EXPECT_TRUE(f.ok) << id;
    }
  }
  EXPECT_GT(aimd.sim.core().controller().value(), 1.0);
}

} // namespace adaptive_batcher_test
