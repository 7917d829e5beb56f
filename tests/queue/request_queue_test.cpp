// request_queue: priority levels (Triton's mapping of priorities to levels), FIFO within a level,
// max_queue_size room, queue timeouts with the REJECT and DELAY actions and Triton's override
// rule, the deadline heap's next deadline, and removal (by pointer, cancellation, take_all).
// All in virtual time: the queue is told the time; times are µs since the epoch.
#include <servekit/queue/request_queue.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace request_queue_test {

using servekit::timeout_action;

servekit::time_point at_us(std::int64_t n) {
  return servekit::time_point{} + std::chrono::microseconds(n);
}

/// What to queue: id, priority, arrival (µs), own timeout (µs, 0: none), cancellation token.
struct arrival {
  std::string id;
  std::uint64_t priority = 0;
  std::int64_t at = 0;
  std::uint64_t timeout_us = 0;
  servekit::cancellation_token cancellation{};
};

/// Builds request queues and pushes requests into them the way a decision core does: the level
/// from the priority, a ticket in arrival order.
class request_queue : public ::testing::Test {
protected:
  servekit::pending_request* push(servekit::request_queue& q, arrival a) {
    servekit::request r;
    r.id = std::move(a.id);
    r.priority = a.priority;
    r.timeout_us = a.timeout_us;
    r.cancellation = std::move(a.cancellation);
    r.arrival = at_us(a.at);
    auto p =
        servekit::make_pending(std::move(r), servekit::response_sink{[](servekit::response&&) {}});
    p->level = q.level_of(p->request.priority);
    p->ticket = next_ticket_++;
    servekit::pending_request* raw = p.get();
    q.push(std::move(p));
    return raw;
  }

  /// The ids in walk order (the order of service).
  static std::vector<std::string> walk(const servekit::request_queue& q) {
    std::vector<std::string> ids;
    for (const servekit::pending_request* p = q.first(); p != nullptr; p = q.after(p)) {
      ids.push_back(p->request.id);
    }
    return ids;
  }

  /// Applies the timeouts due at `now`; the ids rejected, in the order they were rejected.
  static std::vector<std::string> expire(servekit::request_queue& q, std::int64_t now) {
    std::vector<std::string> rejected;
    q.expire(at_us(now),
             [&rejected](servekit::pending_ptr p) { rejected.push_back(p->request.id); });
    return rejected;
  }

  static std::vector<std::string> ids_of(const std::vector<servekit::pending_ptr>& ps) {
    std::vector<std::string> ids;
    for (const auto& p : ps) {
      ids.push_back(p->request.id);
    }
    return ids;
  }

  static servekit::queue_policy policy(timeout_action action, std::uint64_t timeout_us,
                                       bool allow_override = false, std::uint32_t max_size = 0) {
    servekit::queue_policy p;
    p.timeout_action = action;
    p.default_timeout_microseconds = timeout_us;
    p.allow_timeout_override = allow_override;
    p.max_queue_size = max_size;
    return p;
  }

  /// One queue (no priority levels) under `p`.
  static servekit::priority_options single(const servekit::queue_policy& p) {
    servekit::priority_options o;
    o.default_queue_policy = p;
    return o;
  }

  /// `levels` priority levels, default level `default_level`, every level under `p`.
  static servekit::priority_options levels(std::uint64_t count, std::uint64_t default_level,
                                           const servekit::queue_policy& p = {}) {
    servekit::priority_options o;
    o.priority_levels = count;
    o.default_priority_level = default_level;
    o.default_queue_policy = p;
    return o;
  }

private:
  std::uint64_t next_ticket_ = 0;
};

using Strings = std::vector<std::string>;

// --------------------------------------------------------------------------- levels and order

TEST_F(request_queue, without_priority_levels_there_is_one_level_for_every_priority) {
  servekit::request_queue q;
  EXPECT_EQ(q.level_count(), 1U);
  EXPECT_EQ(q.level_of(0), 0U);
  EXPECT_EQ(q.level_of(1), 0U);
  EXPECT_EQ(q.level_of(7), 0U);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.first(), nullptr);
}

TEST_F(request_queue, priority_n_is_level_n_and_zero_or_above_the_levels_is_the_default_level) {
  const servekit::request_queue q{levels(3, 2)};
  EXPECT_EQ(q.level_count(), 3U);
  EXPECT_EQ(q.level_of(1), 0U);
  EXPECT_EQ(q.level_of(2), 1U);
  EXPECT_EQ(q.level_of(3), 2U);
  EXPECT_EQ(q.level_of(0), 1U); // default_priority_level 2
  EXPECT_EQ(q.level_of(4), 1U);
  EXPECT_EQ(q.level_of(std::numeric_limits<std::uint64_t>::max()), 1U);
}

TEST_F(request_queue, a_level_without_its_own_policy_gets_the_default_queue_policy) {
  auto o = levels(3, 1, policy(timeout_action::reject, 100));
  o.priority_queue_policy[2] = policy(timeout_action::delay, 50, true, 4);
  const servekit::request_queue q{o};
  EXPECT_EQ(q.policy(0), policy(timeout_action::reject, 100));
  EXPECT_EQ(q.policy(1), policy(timeout_action::delay, 50, true, 4));
  EXPECT_EQ(q.policy(2), policy(timeout_action::reject, 100));
}

TEST_F(request_queue, per_level_policies_are_ignored_without_priority_levels) {
  auto o = single(policy(timeout_action::reject, 100));
  o.priority_queue_policy[1] = policy(timeout_action::delay, 5);
  const servekit::request_queue q{o};
  EXPECT_EQ(q.policy(0), policy(timeout_action::reject, 100));
}

TEST_F(request_queue, walk_order_is_level_by_level_highest_priority_first) {
  servekit::request_queue q{levels(3, 3)};
  push(q, {"a3", 3});
  push(q, {"b2", 2});
  push(q, {"c1", 1});
  push(q, {"d_default", 0});
  EXPECT_EQ(walk(q), (Strings{"c1", "b2", "a3", "d_default"}));
}

TEST_F(request_queue, requests_of_one_level_are_served_in_arrival_order) {
  servekit::request_queue q{levels(2, 2)};
  push(q, {"a", 2});
  push(q, {"b", 1});
  push(q, {"c", 2});
  push(q, {"d", 1});
  push(q, {"e", 2});
  EXPECT_EQ(walk(q), (Strings{"b", "d", "a", "c", "e"}));
}

TEST_F(request_queue, size_counts_the_whole_queue_and_each_level) {
  servekit::request_queue q{levels(2, 1)};
  push(q, {"a", 1});
  push(q, {"b", 2});
  push(q, {"c", 2});
  EXPECT_EQ(q.size(), 3U);
  EXPECT_EQ(q.size(0), 1U);
  EXPECT_EQ(q.size(1), 2U);
  EXPECT_FALSE(q.empty());
}

// --------------------------------------------------------------------------- max_queue_size

TEST_F(request_queue, a_level_has_room_until_it_holds_max_queue_size_requests) {
  auto o = levels(2, 1);
  o.priority_queue_policy[1] = policy(timeout_action::reject, 0, false, 2);
  servekit::request_queue q{o};
  EXPECT_TRUE(q.has_room(0));
  auto* a = push(q, {"a", 1});
  EXPECT_TRUE(q.has_room(0));
  push(q, {"b", 1});
  EXPECT_FALSE(q.has_room(0)); // full: the shell answers "Exceeds maximum queue size"
  push(q, {"c", 2});
  push(q, {"d", 2});
  push(q, {"e", 2});
  EXPECT_TRUE(q.has_room(1)); // 0: unbounded, and the other level's bound is its own
  (void)q.remove(a);
  EXPECT_TRUE(q.has_room(0));
}

TEST_F(request_queue, delayed_requests_still_count_toward_max_queue_size) {
  servekit::request_queue q{single(policy(timeout_action::delay, 10, false, 1))};
  push(q, {"a", 0, 0});
  EXPECT_TRUE(expire(q, 10).empty());
  ASSERT_TRUE(q.first()->delayed);
  EXPECT_FALSE(q.has_room(0));
  EXPECT_EQ(q.size(0), 1U);
}

// --------------------------------------------------------------------------- timeouts

TEST_F(request_queue, the_deadline_is_arrival_plus_the_default_timeout) {
  servekit::request_queue q{single(policy(timeout_action::reject, 100))};
  const auto* a = push(q, {"a", 0, 40});
  EXPECT_EQ(a->deadline, at_us(140));
  EXPECT_EQ(q.next_timeout(), at_us(140));
}

TEST_F(request_queue, without_a_default_timeout_nothing_expires_even_a_request_with_its_own) {
  // Triton's PolicyQueue: a request timeout only lowers a non-zero default.
  servekit::request_queue q{single(policy(timeout_action::reject, 0, true))};
  const auto* a = push(q, {"a", 0, 0, 10});
  EXPECT_EQ(q.timeout_us(a->request, 0), 0U);
  EXPECT_EQ(a->deadline, servekit::never);
  EXPECT_EQ(q.next_timeout(), servekit::never);
  EXPECT_TRUE(expire(q, 1'000'000).empty());
  EXPECT_EQ(walk(q), Strings{"a"});
}

TEST_F(request_queue, an_allowed_override_lowers_the_default_timeout_but_never_raises_it) {
  servekit::request_queue q{single(policy(timeout_action::reject, 100, true))};
  const auto* lower = push(q, {"lower", 0, 0, 30});
  const auto* higher = push(q, {"higher", 0, 0, 500});
  const auto* none = push(q, {"none", 0, 0, 0});
  EXPECT_EQ(lower->deadline, at_us(30));
  EXPECT_EQ(higher->deadline, at_us(100));
  EXPECT_EQ(none->deadline, at_us(100));
  EXPECT_EQ(q.next_timeout(), at_us(30));
}

TEST_F(request_queue, a_request_timeout_is_ignored_when_the_policy_does_not_allow_override) {
  servekit::request_queue q{single(policy(timeout_action::reject, 100, false))};
  const auto* a = push(q, {"a", 0, 0, 30});
  EXPECT_EQ(q.timeout_us(a->request, 0), 100U);
  EXPECT_EQ(a->deadline, at_us(100));
  EXPECT_TRUE(expire(q, 30).empty());
  EXPECT_EQ(expire(q, 100), Strings{"a"});
}

TEST_F(request_queue, a_timeout_past_the_end_of_time_is_no_deadline) {
  servekit::request_queue q{
      single(policy(timeout_action::reject, std::numeric_limits<std::uint64_t>::max()))};
  const auto* a = push(q, {"a", 0, 5});
  EXPECT_EQ(a->deadline, servekit::never);
  EXPECT_EQ(q.next_timeout(), servekit::never);
}

TEST_F(request_queue, reject_hands_over_a_request_at_its_deadline_not_before) {
  servekit::request_queue q{single(policy(timeout_action::reject, 100))};
  push(q, {"a", 0, 0});
  push(q, {"b", 0, 50});
  EXPECT_TRUE(expire(q, 99).empty());
  EXPECT_EQ(q.size(), 2U);
  EXPECT_EQ(expire(q, 100), Strings{"a"}); // deadline inclusive
  EXPECT_EQ(walk(q), Strings{"b"});
  EXPECT_EQ(q.size(0), 1U);
  EXPECT_EQ(q.next_timeout(), at_us(150));
  EXPECT_EQ(expire(q, 1000), Strings{"b"});
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.next_timeout(), servekit::never);
}

TEST_F(request_queue, reject_hands_over_expired_requests_in_deadline_order_then_arrival_order) {
  servekit::request_queue q{single(policy(timeout_action::reject, 100, true))};
  push(q, {"late", 0, 0});        // 100
  push(q, {"early", 0, 10, 20});  // 30
  push(q, {"tie_first", 0, 20});  // 120
  push(q, {"middle", 0, 40, 50}); // 90
  push(q, {"tie_second", 0, 20}); // 120
  push(q, {"unexpired", 0, 100}); // 200
  EXPECT_EQ(expire(q, 120), (Strings{"early", "middle", "late", "tie_first", "tie_second"}));
  EXPECT_EQ(walk(q), Strings{"unexpired"});
  EXPECT_EQ(q.next_timeout(), at_us(200));
}

TEST_F(request_queue, delay_moves_an_expired_request_behind_the_unexpired_ones_of_its_level) {
  servekit::request_queue q{single(policy(timeout_action::delay, 100))};
  push(q, {"a", 0, 0});  // 100
  push(q, {"b", 0, 50}); // 150
  push(q, {"c", 0, 80}); // 180
  EXPECT_TRUE(expire(q, 100).empty());
  EXPECT_EQ(walk(q), (Strings{"b", "c", "a"}));
  EXPECT_EQ(q.size(), 3U);
  EXPECT_EQ(q.next_timeout(), at_us(150));
  EXPECT_TRUE(expire(q, 150).empty());
  EXPECT_EQ(walk(q), (Strings{"c", "a", "b"})); // the delayed keep their expiry order
  push(q, {"d", 0, 160});                       // 260: new arrivals go before the delayed
  EXPECT_EQ(walk(q), (Strings{"c", "d", "a", "b"}));
}

TEST_F(request_queue, a_delayed_request_is_never_dropped_and_has_no_deadline_left) {
  servekit::request_queue q{single(policy(timeout_action::delay, 100))};
  auto* a = push(q, {"a", 0, 0});
  push(q, {"b", 0, 10});
  EXPECT_TRUE(expire(q, 1'000'000).empty());
  EXPECT_TRUE(a->delayed);
  EXPECT_EQ(a->deadline, servekit::never);
  EXPECT_EQ(q.next_timeout(), servekit::never);
  EXPECT_TRUE(expire(q, 2'000'000).empty());
  EXPECT_EQ(walk(q), (Strings{"a", "b"}));
  EXPECT_EQ(q.size(), 2U);
}

TEST_F(request_queue, a_level_s_delayed_requests_come_before_the_next_level) {
  auto o = levels(2, 1, policy(timeout_action::delay, 100));
  servekit::request_queue q{o};
  push(q, {"high_expired", 1, 0});
  push(q, {"low", 2, 0});
  push(q, {"high", 1, 50});
  EXPECT_TRUE(expire(q, 100).empty()); // high_expired and low both expire
  EXPECT_EQ(walk(q), (Strings{"high", "high_expired", "low"}));
}

TEST_F(request_queue, each_level_applies_its_own_timeout_action) {
  auto o = levels(2, 1);
  o.priority_queue_policy[1] = policy(timeout_action::reject, 100);
  o.priority_queue_policy[2] = policy(timeout_action::delay, 100);
  servekit::request_queue q{o};
  push(q, {"rejected", 1, 0});
  push(q, {"delayed", 2, 0});
  push(q, {"waiting", 2, 10});
  EXPECT_EQ(expire(q, 100), Strings{"rejected"});
  EXPECT_EQ(walk(q), (Strings{"waiting", "delayed"}));
  EXPECT_EQ(q.size(0), 0U);
  EXPECT_EQ(q.size(1), 2U);
}

TEST_F(request_queue, next_timeout_is_the_earliest_deadline_of_any_level) {
  auto o = levels(2, 1);
  o.priority_queue_policy[1] = policy(timeout_action::reject, 500);
  o.priority_queue_policy[2] = policy(timeout_action::reject, 100);
  servekit::request_queue q{o};
  push(q, {"high", 1, 0}); // 500
  EXPECT_EQ(q.next_timeout(), at_us(500));
  push(q, {"low", 2, 50}); // 150
  EXPECT_EQ(q.next_timeout(), at_us(150));
}

// --------------------------------------------------------------------------- removal

TEST_F(request_queue, remove_takes_a_request_from_anywhere_and_gives_back_that_request) {
  servekit::request_queue q{levels(2, 1, policy(timeout_action::reject, 100))};
  push(q, {"a", 1, 0});
  auto* b = push(q, {"b", 1, 10});
  push(q, {"c", 1, 20});
  push(q, {"d", 2, 30});
  const auto removed = q.remove(b);
  EXPECT_EQ(removed.get(), b);
  EXPECT_EQ(walk(q), (Strings{"a", "c", "d"}));
  EXPECT_EQ(q.size(), 3U);
  EXPECT_EQ(q.size(0), 2U);
  EXPECT_EQ(expire(q, 1000), (Strings{"a", "c", "d"})); // b's deadline left with it
}

TEST_F(request_queue, removing_the_earliest_deadline_moves_next_timeout_to_the_next_one) {
  servekit::request_queue q{single(policy(timeout_action::reject, 100))};
  auto* a = push(q, {"a", 0, 0});
  push(q, {"b", 0, 30});
  EXPECT_EQ(q.next_timeout(), at_us(100));
  (void)q.remove(a);
  EXPECT_EQ(q.next_timeout(), at_us(130));
}

TEST_F(request_queue, removing_a_delayed_request_takes_it_off_the_delayed_list) {
  servekit::request_queue q{single(policy(timeout_action::delay, 100))};
  auto* a = push(q, {"a", 0, 0});
  push(q, {"b", 0, 0});
  push(q, {"c", 0, 500});
  EXPECT_TRUE(expire(q, 100).empty());
  ASSERT_EQ(walk(q), (Strings{"c", "a", "b"}));
  const auto removed = q.remove(a);
  EXPECT_EQ(removed->request.id, "a");
  EXPECT_EQ(walk(q), (Strings{"c", "b"}));
  EXPECT_EQ(q.size(), 2U);
}

TEST_F(request_queue, the_deadline_heap_stays_ordered_when_requests_leave_from_its_middle) {
  // Deadlines 0..63 µs in a scrambled arrival order; every third leaves early; the rest must
  // still expire one at a time in deadline order, with next_timeout naming each in turn.
  servekit::request_queue q{single(policy(timeout_action::reject, 1000, true))};
  std::vector<servekit::pending_request*> by_deadline(64);
  for (std::int64_t i = 0; i < 64; ++i) {
    const std::int64_t d = (i * 37) % 64; // a permutation of 0..63
    by_deadline[static_cast<std::size_t>(d)] =
        push(q, {std::to_string(d), 0, 0, static_cast<std::uint64_t>(d + 1)});
  }
  for (std::size_t d = 0; d < 64; d += 3) {
    (void)q.remove(by_deadline[d]);
  }
  for (std::int64_t d = 0; d < 64; ++d) {
    if (d % 3 == 0) {
      continue;
    }
    ASSERT_EQ(q.next_timeout(), at_us(d + 1));
    ASSERT_EQ(expire(q, d + 1), Strings{std::to_string(d)});
  }
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.next_timeout(), servekit::never);
}

TEST_F(request_queue, take_cancelled_removes_only_cancelled_requests_in_walk_order) {
  servekit::request_queue q{levels(2, 1, policy(timeout_action::delay, 100))};
  servekit::cancellation_source cancel_a;
  servekit::cancellation_source cancel_c;
  servekit::cancellation_source keep_d;
  push(q, {"a", 2, 0, 0, cancel_a.token()});
  push(q, {"b", 2, 200});
  push(q, {"c", 1, 0, 0, cancel_c.token()}); // delayed below
  push(q, {"d", 1, 150, 0, keep_d.token()});
  EXPECT_TRUE(expire(q, 100).empty());
  ASSERT_EQ(walk(q), (Strings{"d", "c", "b", "a"}));
  cancel_a.cancel();
  cancel_c.cancel();
  std::vector<servekit::pending_ptr> out;
  q.take_cancelled(out);
  EXPECT_EQ(ids_of(out), (Strings{"c", "a"}));
  EXPECT_EQ(walk(q), (Strings{"d", "b"}));
  EXPECT_EQ(q.size(), 2U);
  EXPECT_EQ(q.next_timeout(), at_us(250)); // d's; c and a had no deadline left
}

TEST_F(request_queue, take_all_empties_the_queue_in_walk_order) {
  servekit::request_queue q{levels(2, 1, policy(timeout_action::delay, 100))};
  push(q, {"low", 2, 50});
  push(q, {"high_delayed", 1, 0});
  push(q, {"high", 1, 60});
  EXPECT_TRUE(expire(q, 100).empty());
  std::vector<servekit::pending_ptr> out;
  q.take_all(out);
  EXPECT_EQ(ids_of(out), (Strings{"high", "high_delayed", "low"}));
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.first(), nullptr);
  EXPECT_EQ(q.next_timeout(), servekit::never);
}

TEST_F(request_queue, destroying_the_queue_frees_requests_still_in_it) {
  auto alive = std::make_shared<int>(0);
  {
    servekit::request_queue q{single(policy(timeout_action::delay, 10))};
    for (int i = 0; i < 3; ++i) {
      auto p = servekit::make_pending(servekit::request{},
                                      servekit::response_sink{[alive](servekit::response&&) {}});
      p->request.arrival = at_us(i * 10);
      q.push(std::move(p));
    }
    q.expire(at_us(10), [](servekit::pending_ptr) {}); // two waiting, one delayed
    EXPECT_EQ(alive.use_count(), 4);
  }
  EXPECT_EQ(alive.use_count(), 1);
}

// ------------------------------------------------------------------- sparse priority levels

// Triton accepts any uint64 priority_levels and keeps only the levels in use; a queue with
// 2^64 - 1 levels must not size anything by that number.
TEST_F(request_queue, priority_levels_up_to_uint64_max_are_stored_sparsely) {
  constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  servekit::priority_options o = levels(max, max / 2);
  o.priority_queue_policy[7] = policy(timeout_action::reject, 0, false, 1);
  servekit::request_queue q{o};
  EXPECT_LE(q.level_count(), 5U);
  EXPECT_EQ(servekit::priority_class_count(o), q.level_count());
  EXPECT_EQ(q.levels_in_use(), 0U);

  push(q, {"default", 0});
  push(q, {"max", max});
  push(q, {"three", 3});
  push(q, {"seven", 7});
  push(q, {"three-again", 3});
  push(q, {"half", max / 2});
  EXPECT_EQ(q.levels_in_use(), 4U);
  EXPECT_EQ(walk(q), (Strings{"three", "three-again", "seven", "default", "half", "max"}));

  // Level 7's own policy (max_queue_size 1) applies to it alone.
  EXPECT_FALSE(q.has_room(q.level_of(7)));
  EXPECT_TRUE(q.has_room(q.level_of(8)));
  EXPECT_EQ(q.level_of(0), q.level_of(max / 2));
  EXPECT_NE(q.level_of(7), q.level_of(6));

  std::vector<servekit::pending_ptr> all;
  q.take_all(all);
  EXPECT_EQ(ids_of(all), (Strings{"three", "three-again", "seven", "default", "half", "max"}));
  EXPECT_EQ(q.levels_in_use(), 0U);
  EXPECT_TRUE(q.empty());
}

TEST_F(request_queue, sparse_levels_keep_delay_timeouts_and_cancellation_per_level) {
  servekit::request_queue q{levels(1000, 1000, policy(timeout_action::delay, 10))};
  push(q, {"a", 500, 0});
  push(q, {"b", 500, 5});
  push(q, {"c", 2, 5});
  EXPECT_TRUE(expire(q, 10).empty()); // "a" moves behind "b" within level 500
  EXPECT_EQ(walk(q), (Strings{"c", "b", "a"}));
  servekit::cancellation_source source;
  push(q, {"d", 900, 20, 0, source.token()});
  source.cancel();
  std::vector<servekit::pending_ptr> cancelled;
  q.take_cancelled(cancelled);
  EXPECT_EQ(ids_of(cancelled), Strings{"d"});
  EXPECT_EQ(q.levels_in_use(), 2U);
  EXPECT_EQ(walk(q), (Strings{"c", "b", "a"}));
}

} // namespace request_queue_test
