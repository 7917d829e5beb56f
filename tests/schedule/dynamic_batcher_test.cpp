// dynamic_batch_core: Triton's dynamic-batcher rules (triton-semantics.md §1.2, §2.2), each
// checked in virtual time through the simulated shell. Times are µs since the simulation began;
// the timelines in docs/dynamic-batching.md are these tests.

#include <servekit/backend/batch_compatibility.hpp>
#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/core/batch_close_reason.hpp>
#include <servekit/core/cancellation.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/status.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/queue/queue_policy.hpp>
#include <servekit/runtime/simulated_shell.hpp>
#include <servekit/schedule/dynamic_batcher.hpp>
#include <servekit/schedule/scheduler.hpp>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace dynamic_batcher_test {

using namespace std::chrono_literals;
using servekit::batch_close_reason;

/// Final status codes as `answer::code` spells them.
const std::string ok_code{"OK"};
const std::string unavailable_code{"UNAVAILABLE"};
const std::string cancelled_code{"CANCELLED"};

/// The virtual time point `n` µs after the simulation starts.
servekit::time_point at_us(std::int64_t n) {
  return servekit::time_point{} + std::chrono::microseconds(n);
}

/// Virtual µs since the simulation started.
std::int64_t us_of(servekit::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t - servekit::time_point{}).count();
}

/// Every execution takes `fixed` µs plus `per_element` µs per batch element.
servekit::latency_model latency(std::int64_t fixed, std::int64_t per_element = 0) {
  return servekit::latency_model{std::chrono::microseconds(fixed),
                                 std::chrono::microseconds(per_element)};
}

/// A dynamic-batching model: max_batch_size, max_queue_delay_microseconds, preferred sizes.
servekit::scheduler_settings batching(std::int32_t max_batch_size, std::uint64_t delay_us = 0,
                                      std::vector<std::int32_t> preferred = {}) {
  servekit::scheduler_settings s;
  s.model_name = "m";
  s.max_batch_size = max_batch_size;
  s.dynamic_batching.max_queue_delay_microseconds = delay_us;
  s.dynamic_batching.preferred_batch_size = std::move(preferred);
  return s;
}

/// One response a sink received, and the virtual time it ran. `code` is Triton's spelling
/// ("OK", "UNAVAILABLE", "CANCELLED") so that failures print readably.
struct answer {
  std::string code;
  std::string message;
  std::int64_t at_us = -1;
  bool final = false;
};

/// An executed batch, in the terms the tests state rules in.
struct seen_batch {
  std::int64_t start_us = 0;
  std::vector<std::string> ids;
  batch_close_reason reason = batch_close_reason::queue_drained;
  friend bool operator==(const seen_batch&, const seen_batch&) = default;
};

void PrintTo(const seen_batch& b, std::ostream* os) {
  *os << "{start " << b.start_us << "us, [";
  for (std::size_t i = 0; i < b.ids.size(); ++i) {
    *os << (i == 0 ? "" : ",") << b.ids[i];
  }
  *os << "], " << servekit::to_string(b.reason) << "}";
}

/// A simulated model and a record of every response its sinks received (id -> answers).
template <class Policy = servekit::dynamic_batcher<>>
class rig {
public:
  rig(const servekit::scheduler_settings& settings, std::size_t instances,
      servekit::latency_model model)
      : sim{settings, instances, model} {}
  rig(const rig&) = delete;
  rig& operator=(const rig&) = delete;

  /// Request `id` arrives at `t` µs.
  void submit(std::int64_t t, std::string id, std::int64_t elements = 1, std::uint64_t priority = 0,
              std::uint64_t timeout_us = 0) {
    servekit::request r;
    r.id = std::move(id);
    r.priority = priority;
    r.timeout_us = timeout_us;
    submit(t, std::move(r), elements);
  }
  void submit(std::int64_t t, servekit::request r, std::int64_t elements = 1) {
    sim.submit_at(at_us(t), std::move(r), sink(), elements);
  }

  /// A sink that records the response with the virtual time at which it ran.
  servekit::response_sink sink() {
    return [this](servekit::response&& r) {
      answers[r.id].push_back({std::string{servekit::to_string(r.status.code())},
                               r.status.message(), us_of(sim.now()), r.final});
    };
  }

  /// The single answer of `id`; a default answer (at_us -1) if there is none.
  [[nodiscard]] answer only(const std::string& id) const {
    const auto it = answers.find(id);
    if (it == answers.end()) {
      return {};
    }
    EXPECT_EQ(it->second.size(), 1u) << id << " was answered more than once";
    return it->second.front();
  }
  [[nodiscard]] bool answered(const std::string& id) const { return answers.contains(id); }

  [[nodiscard]] std::vector<seen_batch> batches() const {
    std::vector<seen_batch> out;
    for (const auto& b : sim.batches()) {
      out.push_back({us_of(b.start), b.request_ids, b.reason});
    }
    return out;
  }

  servekit::simulated_shell<Policy> sim;
  std::map<std::string, std::vector<answer>> answers;
};

using ids = std::vector<std::string>;

/// A request whose input INPUT0 is a [1, length] FP32 tensor (batch dim 1).
servekit::request with_input(std::string id, std::int64_t length) {
  servekit::request r;
  r.id = std::move(id);
  r.inputs.push_back(
      servekit::make_tensor("INPUT0", servekit::data_type::fp32, servekit::shape{1, length}));
  return r;
}

/// A model whose one input INPUT0 is declared dims [-1].
servekit::scheduler_settings variable_length_model(bool ragged, std::uint64_t delay_us = 0) {
  auto s = batching(8, delay_us);
  const std::vector<servekit::tensor_config> inputs{
      {"INPUT0", servekit::data_type::fp32, servekit::shape{-1}, ragged, false, false}};
  s.compatibility = servekit::batch_compatibility{inputs, true};
  return s;
}

servekit::queue_policy reject_after(std::uint64_t timeout_us, bool allow_override = false) {
  servekit::queue_policy p;
  p.timeout_action = servekit::timeout_action::reject;
  p.default_timeout_microseconds = timeout_us;
  p.allow_timeout_override = allow_override;
  return p;
}

servekit::queue_policy delay_after(std::uint64_t timeout_us) {
  servekit::queue_policy p;
  p.timeout_action = servekit::timeout_action::delay;
  p.default_timeout_microseconds = timeout_us;
  return p;
}

// ---------------------------------------------------------------------------------------------
// max_queue_delay_microseconds = 0: never wait
// ---------------------------------------------------------------------------------------------

TEST(dynamic_batcher, delay0_request_at_idle_instance_runs_alone_at_once) {
  rig r{batching(8), 1, latency(1000)};
  r.submit(0, "a");
  r.sim.run();
  EXPECT_EQ(r.batches(), (std::vector<seen_batch>{{0, {"a"}, batch_close_reason::queue_drained}}));
  EXPECT_EQ(r.only("a").code, ok_code);
  EXPECT_EQ(r.only("a").at_us, 1000);
}

TEST(dynamic_batcher, delay0_requests_arriving_while_busy_all_join_the_next_batch) {
  rig r{batching(8), 1, latency(1000)};
  r.submit(0, "a");
  r.submit(100, "b");
  r.submit(400, "c");
  r.submit(999, "d");
  r.submit(1000, "e"); // arrives exactly when the instance frees up: it still joins
  r.submit(1001, "f"); // the batch started at 1000: too late
  r.sim.run();
  EXPECT_EQ(r.batches(), (std::vector<seen_batch>{
                             {0, {"a"}, batch_close_reason::queue_drained},
                             {1000, {"b", "c", "d", "e"}, batch_close_reason::queue_drained},
                             {2000, {"f"}, batch_close_reason::queue_drained},
                         }));
}

TEST(dynamic_batcher, delay0_next_batch_closes_at_max_batch_size_when_full) {
  rig r{batching(4), 1, latency(1000)};
  r.submit(0, "a");
  for (int i = 0; i < 6; ++i) {
    r.submit(100 * (i + 1), std::string(1, static_cast<char>('b' + i)));
  }
  r.sim.run();
  EXPECT_EQ(r.batches(), (std::vector<seen_batch>{
                             {0, {"a"}, batch_close_reason::queue_drained},
                             {1000, {"b", "c", "d", "e"}, batch_close_reason::max_batch_size},
                             {2000, {"f", "g"}, batch_close_reason::queue_drained},
                         }));
}

// Triton (dynamic_batch_scheduler.cc GetDynamicBatch) computes
//   delay_is_exceeded = (pending_batch_delay_ns_ != 0) && (delay_ns >= pending_batch_delay_ns_)
// so with max_queue_delay_microseconds 0 the delay is NEVER exceeded and the first decision,
// "best preferred size found and delay not exceeded -> execute exactly best" (§2.2 step 4),
// still applies: preferred sizes are honoured with delay 0 (the payload is then marked
// saturated so it does not grow past them). Six unit requests queued behind a busy instance
// with preferred [4, 8] give a batch of 4, then 2. (Whether Triton's batcher sees them one by
// one, growing its payload, or all at once, it hits 4 and saturates.)
TEST(dynamic_batcher, delay0_still_sends_the_largest_reachable_preferred_size) {
  rig r{batching(16, 0, {4, 8}), 1, latency(1000)};
  r.submit(0, "x");
  for (int i = 0; i < 6; ++i) {
    r.submit(100 * (i + 1), std::string(1, static_cast<char>('a' + i)));
  }
  r.sim.run();
  EXPECT_EQ(r.batches(), (std::vector<seen_batch>{
                             {0, {"x"}, batch_close_reason::queue_drained},
                             {1000, {"a", "b", "c", "d"}, batch_close_reason::preferred_batch_size},
                             {2000, {"e", "f"}, batch_close_reason::queue_drained},
                         }));
}

// ---------------------------------------------------------------------------------------------
// preferred_batch_size (with a delay)
// ---------------------------------------------------------------------------------------------

TEST(dynamic_batcher, preferred_eight_queued_go_at_once_as_the_largest_preferred_size) {
  rig r{batching(16, 10'000, {4, 8}), 1, latency(1000)};
  const ids all{"a", "b", "c", "d", "e", "f", "g", "h"};
  for (const auto& id : all) {
    r.submit(0, id);
  }
  r.sim.run();
  EXPECT_EQ(r.batches(),
            (std::vector<seen_batch>{{0, all, batch_close_reason::preferred_batch_size}}));
}

TEST(dynamic_batcher, preferred_six_queued_send_four_at_once_and_two_wait_for_the_delay) {
  rig r{batching(16, 10'000, {4, 8}), 1, latency(1000)};
  for (const char* id : {"a", "b", "c", "d", "e", "f"}) {
    r.submit(0, id);
  }
  r.sim.run();
  EXPECT_EQ(r.batches(), (std::vector<seen_batch>{
                             {0, {"a", "b", "c", "d"}, batch_close_reason::preferred_batch_size},
                             {10'000, {"e", "f"}, batch_close_reason::queue_delay_expired},
                         }));
}

TEST(dynamic_batcher, preferred_size_reached_by_an_arrival_goes_at_that_arrival) {
  rig r{batching(16, 10'000, {4, 8}), 1, latency(1000)};
  r.submit(0, "a");
  r.submit(100, "b");
  r.submit(200, "c");
  r.submit(300, "d");
  r.submit(400, "e");
  r.sim.run();
  EXPECT_EQ(r.batches(), (std::vector<seen_batch>{
                             {300, {"a", "b", "c", "d"}, batch_close_reason::preferred_batch_size},
                             {10'400, {"e"}, batch_close_reason::queue_delay_expired},
                         }));
}

TEST(dynamic_batcher, preferred_prefix_goes_when_next_request_would_pass_largest_preferred) {
  rig r{batching(16, 10'000, {4, 8}), 1, latency(1000)};
  r.submit(0, "a", 3);
  r.submit(100, "b", 3); // 6: no preferred size, still below 8: wait
  r.submit(200, "c", 3); // 9 would pass 8: send the 6 before it
  r.sim.run();
  EXPECT_EQ(r.batches(), (std::vector<seen_batch>{
                             {200, {"a", "b"}, batch_close_reason::preferred_batch_size},
                             {10'200, {"c"}, batch_close_reason::queue_delay_expired},
                         }));
  ASSERT_EQ(r.sim.batches().size(), 2u);
  EXPECT_EQ(r.sim.batches()[0].elements, 6);
  EXPECT_EQ(r.sim.batches()[1].elements, 3);
}

TEST(dynamic_batcher, empty_preferred_list_means_max_batch_size) {
  rig r{batching(4, 10'000), 1, latency(1000)};
  r.submit(0, "a");
  r.submit(100, "b");
  r.submit(200, "c");
  r.submit(300, "d"); // 4 = max_batch_size = the only preferred size: at once
  r.submit(400, "e");
  r.submit(500, "f");
  r.submit(600, "g"); // 3 of 4: they wait for the delay
  r.sim.run();
  EXPECT_EQ(r.batches(), (std::vector<seen_batch>{
                             {300, {"a", "b", "c", "d"}, batch_close_reason::max_batch_size},
                             {10'400, {"e", "f", "g"}, batch_close_reason::queue_delay_expired},
                         }));
}

// ---------------------------------------------------------------------------------------------
// max_queue_delay_microseconds: measured from the oldest pending request
// ---------------------------------------------------------------------------------------------

TEST(dynamic_batcher, delay_lone_request_waits_exactly_max_queue_delay) {
  rig r{batching(8, 500), 1, latency(1000)};
  r.submit(100, "a");
  r.sim.run_until(at_us(599));
  EXPECT_TRUE(r.sim.batches().empty());
  r.sim.run();
  EXPECT_EQ(r.batches(),
            (std::vector<seen_batch>{{600, {"a"}, batch_close_reason::queue_delay_expired}}));
}

TEST(dynamic_batcher, delay_a_later_request_does_not_extend_the_wait) {
  rig r{batching(8, 500), 1, latency(1000)};
  r.submit(100, "a");
  r.submit(400, "b");
  r.sim.run();
  EXPECT_EQ(r.batches(),
            (std::vector<seen_batch>{{600, {"a", "b"}, batch_close_reason::queue_delay_expired}}));
}

TEST(dynamic_batcher, delay_expired_ignores_preferred_sizes_and_fills_to_max_batch_size) {
  rig r{batching(8, 500, {4}), 1, latency(2000)};
  r.submit(0, "x"); // waits its 500 µs, then keeps the instance busy until 2500
  const ids late{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"};
  for (std::size_t i = 0; i < late.size(); ++i) {
    r.submit(600 + 100 * static_cast<std::int64_t>(i), late[i]);
  }
  r.sim.run();
  EXPECT_EQ(
      r.batches(),
      (std::vector<seen_batch>{
          {500, {"x"}, batch_close_reason::queue_delay_expired},
          {2500, {"a", "b", "c", "d", "e", "f", "g", "h"}, batch_close_reason::max_batch_size},
          {4500, {"i", "j"}, batch_close_reason::queue_delay_expired},
      }));
}

// ---------------------------------------------------------------------------------------------
// batch dimension and max_batch_size
// ---------------------------------------------------------------------------------------------

TEST(dynamic_batcher, request_batch_dimension_counts_that_many_elements) {
  rig r{batching(8), 1, latency(1000)};
  r.submit(0, "x");
  r.submit(100, "a", 4);
  r.submit(200, "b", 4);
  r.sim.run();
  EXPECT_EQ(r.batches(), (std::vector<seen_batch>{
                             {0, {"x"}, batch_close_reason::queue_drained},
                             {1000, {"a", "b"}, batch_close_reason::max_batch_size},
                         }));
  EXPECT_EQ(r.sim.batches()[1].elements, 8);
  EXPECT_EQ(r.sim.statistics().inference_count, 9u);
}

TEST(dynamic_batcher, a_batch_with_room_but_not_for_the_next_request_says_so) {
  // 30 of 32 is not "closed by max_batch_size": the batch had room, the next request did not fit.
  rig r{batching(32), 1, latency(1000)};
  r.submit(0, "x");
  r.submit(100, "a", 10);
  r.submit(200, "b", 10);
  r.submit(300, "c", 10);
  r.submit(400, "d", 4);
  r.submit(500, "e", 2);
  r.sim.run();
  EXPECT_EQ(r.batches(), (std::vector<seen_batch>{
                             {0, {"x"}, batch_close_reason::queue_drained},
                             {1000, {"a", "b", "c"}, batch_close_reason::next_request_does_not_fit},
                             {2000, {"d", "e"}, batch_close_reason::queue_drained},
                         }));
  EXPECT_EQ(r.sim.batches()[1].elements, 30);
  EXPECT_EQ(r.sim.statistics().closed_by(batch_close_reason::max_batch_size), 0U);
  EXPECT_EQ(r.sim.statistics().closed_by(batch_close_reason::next_request_does_not_fit), 1U);
}

TEST(dynamic_batcher, request_that_would_pass_max_batch_size_waits_and_nothing_jumps_ahead) {
  rig r{batching(8), 1, latency(1000)};
  r.submit(0, "x");
  r.submit(100, "a", 3);
  r.submit(200, "b", 3);
  r.submit(300, "c", 3); // 9 > 8: waits for the next batch
  r.submit(400, "d", 1); // would fit, but does not pass c
  r.sim.run();
  EXPECT_EQ(r.batches(), (std::vector<seen_batch>{
                             {0, {"x"}, batch_close_reason::queue_drained},
                             // 6 of 8: not full, c would not fit
                             {1000, {"a", "b"}, batch_close_reason::next_request_does_not_fit},
                             {2000, {"c", "d"}, batch_close_reason::queue_drained},
                         }));
  EXPECT_EQ(r.sim.batches()[1].elements, 6);
  EXPECT_EQ(r.sim.batches()[2].elements, 4);
}

// ---------------------------------------------------------------------------------------------
// equal shapes: inputs with -1 dims that are not allow_ragged_batch
// ---------------------------------------------------------------------------------------------

TEST(dynamic_batcher, shape_mismatch_closes_the_batch_and_the_odd_request_starts_the_next) {
  rig r{variable_length_model(false), 1, latency(1000)};
  r.submit(0, with_input("x", 4));
  r.submit(100, with_input("a", 4));
  r.submit(200, with_input("b", 4));
  r.submit(300, with_input("c", 5));
  r.submit(400, with_input("d", 4));
  r.sim.run();
  EXPECT_EQ(r.batches(), (std::vector<seen_batch>{
                             {0, {"x"}, batch_close_reason::queue_drained},
                             {1000, {"a", "b"}, batch_close_reason::shape_mismatch},
                             {2000, {"c"}, batch_close_reason::shape_mismatch},
                             {3000, {"d"}, batch_close_reason::queue_drained},
                         }));
}

TEST(dynamic_batcher, shape_mismatch_sends_the_batch_at_once_without_waiting_for_the_delay) {
  rig r{variable_length_model(false, 10'000), 1, latency(1000)};
  r.submit(0, with_input("a", 4));
  r.submit(100, with_input("b", 4));
  r.submit(200, with_input("c", 5));
  r.sim.run();
  EXPECT_EQ(r.batches(), (std::vector<seen_batch>{
                             {200, {"a", "b"}, batch_close_reason::shape_mismatch},
                             {10'200, {"c"}, batch_close_reason::queue_delay_expired},
                         }));
}

TEST(dynamic_batcher, allow_ragged_batch_batches_different_lengths_together) {
  rig r{variable_length_model(true), 1, latency(1000)};
  r.submit(0, with_input("x", 4));
  r.submit(100, with_input("a", 4));
  r.submit(200, with_input("b", 4));
  r.submit(300, with_input("c", 5));
  r.submit(400, with_input("d", 4));
  r.sim.run();
  EXPECT_EQ(r.batches(), (std::vector<seen_batch>{
                             {0, {"x"}, batch_close_reason::queue_drained},
                             {1000, {"a", "b", "c", "d"}, batch_close_reason::queue_drained},
                         }));
}

// ---------------------------------------------------------------------------------------------
// priority levels
// ---------------------------------------------------------------------------------------------

servekit::scheduler_settings with_levels(std::int32_t max_batch_size, std::uint64_t levels,
                                         std::uint64_t default_level) {
  auto s = batching(max_batch_size);
  s.dynamic_batching.priority.priority_levels = levels;
  s.dynamic_batching.priority.default_priority_level = default_level;
  return s;
}

TEST(dynamic_batcher, priority_level_1_is_served_first_regardless_of_arrival) {
  rig r{with_levels(2, 2, 2), 1, latency(1000)};
  r.submit(0, "x", 1, 2);
  r.submit(100, "a", 1, 2);
  r.submit(200, "b", 1, 2);
  r.submit(300, "c", 1, 1);
  r.submit(400, "d", 1, 1);
  r.sim.run();
  EXPECT_EQ(r.batches(), (std::vector<seen_batch>{
                             {0, {"x"}, batch_close_reason::queue_drained},
                             {1000, {"c", "d"}, batch_close_reason::max_batch_size},
                             {2000, {"a", "b"}, batch_close_reason::max_batch_size},
                         }));
}

TEST(dynamic_batcher, priority_requests_of_one_level_are_served_fifo) {
  rig r{with_levels(1, 2, 2), 1, latency(1000)};
  r.submit(0, "x", 1, 1);
  r.submit(100, "a", 1, 1);
  r.submit(200, "b", 1, 2);
  r.submit(300, "c", 1, 1);
  r.submit(400, "d", 1, 2);
  r.submit(500, "e", 1, 1);
  r.sim.run();
  std::vector<std::string> order;
  for (const auto& b : r.sim.batches()) {
    ASSERT_EQ(b.request_ids.size(), 1u);
    order.push_back(b.request_ids.front());
  }
  EXPECT_EQ(order, (ids{"x", "a", "c", "e", "b", "d"}));
}

TEST(dynamic_batcher, priority_0_and_above_priority_levels_use_default_priority_level) {
  rig r{with_levels(1, 3, 2), 1, latency(1000)};
  r.submit(0, "x", 1, 3);
  r.submit(100, "a", 1, 3);
  r.submit(200, "b", 1, 0); // default level 2
  r.submit(300, "c", 1, 9); // > 3 levels: default level 2
  r.submit(400, "d", 1, 2);
  r.submit(500, "e", 1, 1);
  r.sim.run();
  std::vector<std::string> order;
  for (const auto& b : r.sim.batches()) {
    order.push_back(b.request_ids.front());
  }
  EXPECT_EQ(order, (ids{"x", "e", "b", "c", "d", "a"}));

  servekit::request q;
  q.priority = 0;
  EXPECT_EQ(r.sim.core().level_of(q), 1u); // 0-based index of level 2
  q.priority = 9;
  EXPECT_EQ(r.sim.core().level_of(q), 1u);
  q.priority = 3;
  EXPECT_EQ(r.sim.core().level_of(q), 2u);
}

// ---------------------------------------------------------------------------------------------
// queue policy: REJECT timeouts
// ---------------------------------------------------------------------------------------------

TEST(dynamic_batcher, reject_timeout_answers_at_its_exact_deadline_while_every_instance_is_busy) {
  auto s = batching(8);
  s.dynamic_batching.priority.default_queue_policy = reject_after(500);
  rig r{s, 1, latency(2000)};
  r.submit(0, "x");    // busy until 2000
  r.submit(100, "a");  // deadline 600: the instance is still busy then
  r.submit(1700, "b"); // deadline 2200: the instance frees at 2000, b runs
  r.sim.run_until(at_us(599));
  EXPECT_FALSE(r.answered("a"));
  r.sim.run_until(at_us(600));
  const answer a = r.only("a");
  EXPECT_EQ(a.code, unavailable_code);
  EXPECT_EQ(a.message, "Request timeout expired");
  EXPECT_EQ(a.at_us, 600);
  EXPECT_TRUE(a.final);
  r.sim.run();
  EXPECT_EQ(r.batches(), (std::vector<seen_batch>{
                             {0, {"x"}, batch_close_reason::queue_drained},
                             {2000, {"b"}, batch_close_reason::queue_drained},
                         }));
  EXPECT_EQ(r.only("b").code, ok_code);
  const auto stats = r.sim.statistics();
  EXPECT_EQ(stats.failed_by(servekit::failure_reason::rejected), 1u);
  EXPECT_EQ(stats.fail.count, 1u);
  EXPECT_EQ(stats.success.count, 2u);
}

/// max_batch_size 1 and a 10 ms execution: x runs, everything else stays queued.
template <class Policy = servekit::dynamic_batcher<>>
void submit_behind_a_long_execution(rig<Policy>& r,
                                    std::vector<std::pair<std::string, std::uint64_t>> timeouts) {
  r.submit(0, "x");
  for (auto& [id, timeout] : timeouts) {
    r.submit(0, id, 1, 0, timeout);
  }
}

TEST(dynamic_batcher, timeout_override_lets_a_request_lower_the_default) {
  auto s = batching(1);
  s.dynamic_batching.priority.default_queue_policy = reject_after(1000, true);
  rig r{s, 1, latency(10'000)};
  submit_behind_a_long_execution(r, {{"lower", 300}, {"unset", 0}});
  r.sim.run();
  EXPECT_EQ(r.only("lower").code, unavailable_code);
  EXPECT_EQ(r.only("lower").at_us, 300);
  EXPECT_EQ(r.only("unset").at_us, 1000);
}

TEST(dynamic_batcher, timeout_override_cannot_raise_the_default) {
  auto s = batching(1);
  s.dynamic_batching.priority.default_queue_policy = reject_after(1000, true);
  rig r{s, 1, latency(10'000)};
  submit_behind_a_long_execution(r, {{"higher", 5000}});
  r.sim.run();
  EXPECT_EQ(r.only("higher").code, unavailable_code);
  EXPECT_EQ(r.only("higher").at_us, 1000);
}

TEST(dynamic_batcher, timeout_override_is_ignored_when_not_allowed) {
  auto s = batching(1);
  s.dynamic_batching.priority.default_queue_policy = reject_after(1000, false);
  rig r{s, 1, latency(10'000)};
  submit_behind_a_long_execution(r, {{"lower", 300}, {"higher", 5000}});
  r.sim.run();
  EXPECT_EQ(r.only("lower").at_us, 1000);
  EXPECT_EQ(r.only("higher").at_us, 1000);
}

// Triton's PriorityQueue::PolicyQueue::Enqueue (scheduler_utils.cc):
//   auto timeout_us = default_timeout_us_;
//   if (allow_timeout_override_) {
//     if (override_timeout_us != 0 && override_timeout_us < timeout_us) timeout_us = override;
//   }
// With default_timeout_microseconds 0 ("no timeout is set") nothing is below 0, so a request's
// own timeout is ignored even when override is allowed: it may only LOWER the default, and
// the request waits without a deadline and runs.
TEST(dynamic_batcher, timeout_override_cannot_add_a_timeout_when_the_default_is_none) {
  auto s = batching(1);
  s.dynamic_batching.priority.default_queue_policy = reject_after(0, true);
  rig r{s, 1, latency(10'000)};
  submit_behind_a_long_execution(r, {{"own", 300}});
  r.sim.run();
  EXPECT_EQ(r.only("own").code, ok_code);
  EXPECT_EQ(r.only("own").at_us, 20'000);
}

// ---------------------------------------------------------------------------------------------
// queue policy: DELAY timeouts
// ---------------------------------------------------------------------------------------------

TEST(dynamic_batcher, delay_timeout_moves_an_expired_request_behind_unexpired_ones) {
  auto s = batching(1);
  s.dynamic_batching.priority.default_queue_policy = delay_after(500);
  rig r{s, 1, latency(1000)};
  r.submit(0, "x");
  r.submit(100, "a"); // expires at 600: moves to the back
  r.submit(900, "b"); // unexpired when the instance frees at 1000
  r.sim.run();
  EXPECT_EQ(r.batches(), (std::vector<seen_batch>{
                             {0, {"x"}, batch_close_reason::max_batch_size},
                             {1000, {"b"}, batch_close_reason::max_batch_size},
                             {2000, {"a"}, batch_close_reason::max_batch_size},
                         }));
  EXPECT_EQ(r.only("a").code, ok_code); // late, never dropped
  EXPECT_EQ(r.only("a").at_us, 3000);
  EXPECT_EQ(r.sim.statistics().fail.count, 0u);
}

TEST(dynamic_batcher, delay_timeout_expired_request_still_joins_a_batch_after_unexpired_ones) {
  auto s = batching(8);
  s.dynamic_batching.priority.default_queue_policy = delay_after(500);
  rig r{s, 1, latency(1000)};
  r.submit(0, "x");
  r.submit(100, "a");
  r.submit(900, "b");
  r.sim.run();
  EXPECT_EQ(r.batches(), (std::vector<seen_batch>{
                             {0, {"x"}, batch_close_reason::queue_drained},
                             {1000, {"b", "a"}, batch_close_reason::queue_drained},
                         }));
}

TEST(dynamic_batcher, delay_timeout_expired_request_still_precedes_lower_priority_levels) {
  auto s = with_levels(1, 2, 1);
  s.dynamic_batching.priority.priority_queue_policy[1] = delay_after(500);
  rig r{s, 1, latency(1000)};
  r.submit(0, "x", 1, 1);
  r.submit(100, "a", 1, 1); // level 1, expires at 600
  r.submit(200, "b", 1, 2); // level 2, no timeout
  r.submit(900, "c", 1, 1); // level 1, unexpired at 1000
  r.sim.run();
  std::vector<std::string> order;
  for (const auto& b : r.sim.batches()) {
    order.push_back(b.request_ids.front());
  }
  EXPECT_EQ(order, (ids{"x", "c", "a", "b"}));
}

// ---------------------------------------------------------------------------------------------
// queue policy: max_queue_size
// ---------------------------------------------------------------------------------------------

TEST(dynamic_batcher, max_queue_size_full_level_refuses_the_next_arrival_other_levels_unaffected) {
  auto s = with_levels(1, 2, 2);
  servekit::queue_policy small;
  small.max_queue_size = 2;
  s.dynamic_batching.priority.priority_queue_policy[1] = small;
  rig r{s, 1, latency(1000)};
  r.submit(0, "x", 1, 2);   // runs at once; it never counts against a queue
  r.submit(100, "a", 1, 1); // level 1: 1 of 2
  r.submit(200, "b", 1, 1); // level 1: 2 of 2
  r.submit(300, "c", 1, 1); // level 1 full: refused at 300
  r.submit(400, "d", 1, 2); // level 2 is unbounded
  r.submit(500, "e", 1, 2);
  r.submit(600, "f", 1, 2);
  r.submit(1100, "g", 1, 1); // a left the queue at 1000: room again
  r.sim.run();
  const answer c = r.only("c");
  EXPECT_EQ(c.code, unavailable_code);
  EXPECT_EQ(c.message, "Exceeds maximum queue size");
  EXPECT_EQ(c.at_us, 300);
  std::vector<std::string> order;
  for (const auto& b : r.sim.batches()) {
    order.push_back(b.request_ids.front());
  }
  EXPECT_EQ(order, (ids{"x", "a", "b", "g", "d", "e", "f"}));
  for (const char* id : {"x", "a", "b", "d", "e", "f", "g"}) {
    EXPECT_EQ(r.only(id).code, ok_code) << id;
  }
  EXPECT_EQ(r.sim.statistics().failed_by(servekit::failure_reason::rejected), 1u);
}

// ---------------------------------------------------------------------------------------------
// cancellation
// ---------------------------------------------------------------------------------------------

TEST(dynamic_batcher, cancel_queued_request_is_answered_cancelled_and_never_executed) {
  rig r{batching(8), 1, latency(1000)};
  servekit::cancellation_source running;
  servekit::cancellation_source queued;
  servekit::request x;
  x.id = "x";
  x.cancellation = running.token();
  servekit::request a;
  a.id = "a";
  a.cancellation = queued.token();
  r.submit(0, std::move(x));
  r.submit(100, std::move(a));
  r.submit(200, "b");
  r.sim.cancel_at(at_us(500), queued);
  r.sim.run();
  EXPECT_EQ(r.only("a").code, cancelled_code);
  EXPECT_EQ(r.only("a").at_us, 500);
  EXPECT_EQ(r.batches(), (std::vector<seen_batch>{
                             {0, {"x"}, batch_close_reason::queue_drained},
                             {1000, {"b"}, batch_close_reason::queue_drained},
                         }));
  EXPECT_EQ(r.sim.statistics().failed_by(servekit::failure_reason::canceled), 1u);
}

TEST(dynamic_batcher, cancel_of_an_executing_request_has_no_effect) {
  rig r{batching(8), 1, latency(1000)};
  servekit::cancellation_source source;
  servekit::request x;
  x.id = "x";
  x.cancellation = source.token();
  r.submit(0, std::move(x));
  r.sim.cancel_at(at_us(500), source);
  r.sim.run();
  EXPECT_EQ(r.only("x").code, ok_code);
  EXPECT_EQ(r.only("x").at_us, 1000);
  EXPECT_EQ(r.sim.statistics().fail.count, 0u);
}

// ---------------------------------------------------------------------------------------------
// hold hook (Triton's TRITONSERVER_DELAY_SCHEDULER)
// ---------------------------------------------------------------------------------------------

TEST(dynamic_batcher, hold_hook_runs_nothing_until_n_requests_are_queued) {
  auto s = batching(8);
  s.hold_until_queued = 3;
  rig r{s, 1, latency(1000)};
  r.submit(0, "a");
  r.submit(100, "b");
  r.submit(200, "c");
  r.sim.run_until(at_us(199));
  EXPECT_TRUE(r.sim.batches().empty());
  EXPECT_EQ(r.sim.queued(), 2u);
  r.sim.run();
  EXPECT_EQ(r.batches(),
            (std::vector<seen_batch>{{200, {"a", "b", "c"}, batch_close_reason::queue_drained}}));
}

TEST(dynamic_batcher, hold_hook_never_holds_again) {
  auto s = batching(8);
  s.hold_until_queued = 3;
  rig r{s, 1, latency(1000)};
  r.submit(0, "a");
  r.submit(100, "b");
  r.submit(200, "c");
  r.submit(2000, "d"); // alone in the queue: runs at once
  r.submit(2100, "e");
  r.sim.run();
  EXPECT_EQ(r.batches(), (std::vector<seen_batch>{
                             {200, {"a", "b", "c"}, batch_close_reason::queue_drained},
                             {2000, {"d"}, batch_close_reason::queue_drained},
                             {3000, {"e"}, batch_close_reason::queue_drained},
                         }));
}

// ---------------------------------------------------------------------------------------------
// instances
// ---------------------------------------------------------------------------------------------

/// No instance starts a batch before its previous one ended.
void expect_no_overlap(const std::vector<servekit::executed_batch>& batches,
                       std::size_t instances) {
  std::vector<servekit::time_point> free_at(instances, servekit::time_point{});
  for (const auto& b : batches) {
    ASSERT_LT(b.instance, instances);
    EXPECT_GE(b.start, free_at[b.instance])
        << "batch at " << us_of(b.start) << "us started on busy instance " << b.instance;
    free_at[b.instance] = b.end;
  }
}

TEST(dynamic_batcher, two_instances_take_batches_as_they_become_idle) {
  rig r{batching(8), 2, latency(1000)};
  r.submit(0, "a");   // instance 0: 0..1000
  r.submit(100, "b"); // instance 1: 100..1100
  r.submit(200, "c"); // both busy: waits
  r.submit(300, "d");
  r.submit(1050, "e"); // instance 0 busy again (1000..2000), instance 1 frees at 1100
  r.submit(1500, "f");
  r.sim.run();
  EXPECT_EQ(r.batches(), (std::vector<seen_batch>{
                             {0, {"a"}, batch_close_reason::queue_drained},
                             {100, {"b"}, batch_close_reason::queue_drained},
                             {1000, {"c", "d"}, batch_close_reason::queue_drained},
                             {1100, {"e"}, batch_close_reason::queue_drained},
                             {2000, {"f"}, batch_close_reason::queue_drained},
                         }));
  std::vector<std::size_t> instances;
  for (const auto& b : r.sim.batches()) {
    instances.push_back(b.instance);
  }
  EXPECT_EQ(instances, (std::vector<std::size_t>{0, 1, 0, 1, 0}));
  expect_no_overlap(r.sim.batches(), 2);
}

// ---------------------------------------------------------------------------------------------
// exactly one final response per request, under everything at once
// ---------------------------------------------------------------------------------------------

TEST(dynamic_batcher, every_request_gets_exactly_one_final_response_randomized) {
  auto s = with_levels(8, 3, 2);
  s.dynamic_batching.preferred_batch_size = {4, 8};
  s.dynamic_batching.max_queue_delay_microseconds = 300;
  auto& levels = s.dynamic_batching.priority.priority_queue_policy;
  levels[1] = reject_after(3000, true);
  levels[2] = delay_after(2000);
  levels[3] = reject_after(0, true); // only requests that bring their own timeout expire
  levels[3].max_queue_size = 8;
  constexpr std::size_t instances = 2;
  rig r{s, instances, latency(500, 50)};

  constexpr int count = 5000;
  std::mt19937_64 rng{20240607};
  // Mostly heavier than two instances can serve, with quiet spells in which the queue drains.
  std::uniform_int_distribution<std::int64_t> gap{0, 150};
  std::uniform_int_distribution<std::int64_t> quiet{1000, 6000};
  std::uniform_int_distribution<std::uint64_t> priority{0, 4};
  std::uniform_int_distribution<std::int64_t> elements{1, 3};
  std::uniform_int_distribution<int> percent{0, 99};
  std::uniform_int_distribution<std::uint64_t> own_timeout{100, 5000};
  std::uniform_int_distribution<std::int64_t> cancel_after{0, 4000};
  std::map<std::string, std::int64_t> elements_of;
  std::set<std::string> on_delay_level;
  std::int64_t t = 0;
  for (int i = 0; i < count; ++i) {
    t += percent(rng) < 3 ? quiet(rng) : gap(rng);
    servekit::request q;
    q.id = "r" + std::to_string(i);
    q.priority = priority(rng);
    q.timeout_us = percent(rng) < 30 ? own_timeout(rng) : 0;
    if (percent(rng) < 10) {
      servekit::cancellation_source source;
      q.cancellation = source.token();
      r.sim.cancel_at(at_us(t + cancel_after(rng)), std::move(source));
    }
    if (r.sim.core().level_of(q) == 1) {
      on_delay_level.insert(q.id);
    }
    const std::int64_t n = elements(rng);
    elements_of[q.id] = n;
    r.submit(t, std::move(q), n);
  }
  r.sim.run();

  std::map<std::string, std::uint64_t> by_code;
  std::map<std::string, std::uint64_t> by_message;
  for (int i = 0; i < count; ++i) {
    const std::string id = "r" + std::to_string(i);
    const auto it = r.answers.find(id);
    ASSERT_NE(it, r.answers.end()) << id << " never answered";
    ASSERT_EQ(it->second.size(), 1u) << id << " answered " << it->second.size() << " times";
    const answer& a = it->second.front();
    EXPECT_TRUE(a.final);
    ++by_code[a.code];
    ++by_message[a.message];
    if (on_delay_level.contains(id)) {
      EXPECT_NE(a.code, unavailable_code) << id << ": a DELAY level never drops a request";
    }
  }
  EXPECT_EQ(r.answers.size(), static_cast<std::size_t>(count));

  // Every executed request ran once, in a batch no larger than max_batch_size, and succeeded.
  std::set<std::string> executed;
  std::uint64_t executed_elements = 0;
  std::array<std::uint64_t, servekit::batch_close_reason_count> reasons{};
  for (const auto& b : r.sim.batches()) {
    EXPECT_LE(b.elements, 8);
    std::int64_t sum = 0;
    for (const auto& id : b.request_ids) {
      EXPECT_TRUE(executed.insert(id).second) << id << " executed twice";
      EXPECT_EQ(r.only(id).code, ok_code);
      EXPECT_EQ(r.only(id).at_us, us_of(b.end));
      sum += elements_of[id];
    }
    EXPECT_EQ(sum, b.elements);
    executed_elements += static_cast<std::uint64_t>(b.elements);
    ++reasons[static_cast<std::size_t>(b.reason)];
  }
  expect_no_overlap(r.sim.batches(), instances);

  // Only the three outcomes, and each of them happened.
  EXPECT_EQ(by_code[ok_code] + by_code[unavailable_code] + by_code[cancelled_code],
            static_cast<std::uint64_t>(count));
  EXPECT_GT(by_code[ok_code], 0u);
  EXPECT_GT(by_code[unavailable_code], 0u);
  EXPECT_GT(by_code[cancelled_code], 0u);
  EXPECT_GT(by_message["Request timeout expired"], 0u);
  EXPECT_GT(by_message["Exceeds maximum queue size"], 0u);
  EXPECT_EQ(by_message["Request timeout expired"] + by_message["Exceeds maximum queue size"],
            by_code[unavailable_code]);
  EXPECT_EQ(executed.size(), by_code[ok_code]);

  const auto stats = r.sim.statistics();
  EXPECT_EQ(stats.success.count + stats.fail.count, static_cast<std::uint64_t>(count));
  EXPECT_EQ(stats.success.count, by_code[ok_code]);
  EXPECT_EQ(stats.failed_by(servekit::failure_reason::rejected), by_code[unavailable_code]);
  EXPECT_EQ(stats.failed_by(servekit::failure_reason::canceled), by_code[cancelled_code]);
  EXPECT_EQ(stats.execution_count, r.sim.batches().size());
  EXPECT_EQ(stats.inference_count, executed_elements);
  EXPECT_EQ(stats.pending_request_count, 0u);
  EXPECT_EQ(r.sim.queued(), 0u);
  for (const batch_close_reason reason : servekit::all_batch_close_reasons) {
    EXPECT_EQ(stats.closed_by(reason), reasons[static_cast<std::size_t>(reason)])
        << servekit::to_string(reason);
  }
}

// ---------------------------------------------------------------------------------------------
// capacity
// ---------------------------------------------------------------------------------------------

TEST(dynamic_batcher, saturating_load_runs_full_batches_at_99_percent_of_capacity) {
  // 1000 µs + 20 µs per element: a full batch of 32 takes 1640 µs, so one instance can do at
  // most 32 / 1640 µs. Offer one request every 40 µs (25 per ms, above the 19.5 it can do).
  rig r{batching(32), 1, latency(1000, 20)};
  constexpr int count = 20'000;
  for (int i = 0; i < count; ++i) {
    r.submit(40 * static_cast<std::int64_t>(i), "r" + std::to_string(i));
  }
  r.sim.run();
  const auto& batches = r.sim.batches();
  ASSERT_FALSE(batches.empty());
  std::int64_t elements = 0;
  for (const auto& b : batches) {
    elements += b.elements;
  }
  EXPECT_EQ(elements, count);
  const double busy_us =
      static_cast<double>(us_of(batches.back().end) - us_of(batches.front().start));
  const double achieved = static_cast<double>(elements) / busy_us;
  const double capacity = 32.0 / 1640.0;
  EXPECT_GE(achieved / capacity, 0.99) << "achieved " << achieved * 1000 << " per ms";
  EXPECT_GE(r.sim.statistics().closed_by(batch_close_reason::max_batch_size),
            static_cast<std::uint64_t>(count / 32 - 5));
}

} // namespace dynamic_batcher_test
