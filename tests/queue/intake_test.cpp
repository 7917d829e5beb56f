// intake: the lock-free MPSC hand-off from submitting threads to a decision core's thread. FIFO
// for one producer, every request delivered exactly once with each producer's order kept under
// contention, the node popped is the node pushed, and maybe_nonempty() is exact once pushes
// have finished. The concurrent cases are meant for ThreadSanitizer too, e.g.
//   g++ -std=c++20 -O1 -g -fsanitize=thread -Iinclude -Itests tests/queue/intake_test.cpp
//       -lgtest -lgtest_main -pthread -o /tmp/intake_tsan && setarch $(uname -m) -R
//       /tmp/intake_tsan
#include <servekit/queue/intake.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace intake_test {

servekit::pending_ptr pending(std::uint64_t ticket) {
  servekit::request r;
  r.id = std::to_string(ticket);
  auto p =
      servekit::make_pending(std::move(r), servekit::response_sink{[](servekit::response&&) {}});
  p->ticket = ticket;
  return p;
}

/// Pops everything ready now, by ticket.
std::vector<std::uint64_t> drain(servekit::intake& in) {
  std::vector<std::uint64_t> out;
  while (auto p = in.pop()) {
    out.push_back(p->ticket);
  }
  return out;
}

TEST(intake, a_fresh_intake_is_empty) {
  servekit::intake in;
  EXPECT_EQ(in.pop(), nullptr);
  EXPECT_FALSE(in.maybe_nonempty());
}

TEST(intake, one_producer_s_requests_come_out_in_push_order) {
  servekit::intake in;
  for (std::uint64_t i = 0; i < 100; ++i) {
    in.push(pending(i));
  }
  std::vector<std::uint64_t> expected;
  for (std::uint64_t i = 0; i < 100; ++i) {
    expected.push_back(i);
  }
  EXPECT_EQ(drain(in), expected);
  EXPECT_EQ(in.pop(), nullptr);
  EXPECT_FALSE(in.maybe_nonempty());
}

TEST(intake, the_node_popped_is_the_node_pushed) {
  servekit::intake in;
  auto a = pending(1);
  auto b = pending(2);
  const servekit::pending_request* const a_node = a.get();
  const servekit::pending_request* const b_node = b.get();
  in.push(std::move(a));
  in.push(std::move(b));
  const auto first = in.pop();
  const auto second = in.pop();
  EXPECT_EQ(first.get(), a_node);
  EXPECT_EQ(second.get(), b_node);
  EXPECT_EQ(first->request.id, "1");
  EXPECT_EQ(second->request.id, "2");
}

TEST(intake, maybe_nonempty_stays_true_until_the_last_pushed_request_is_popped) {
  servekit::intake in;
  in.push(pending(1));
  EXPECT_TRUE(in.maybe_nonempty());
  in.push(pending(2));
  EXPECT_TRUE(in.maybe_nonempty());
  EXPECT_EQ(in.pop()->ticket, 1U);
  EXPECT_TRUE(in.maybe_nonempty());
  EXPECT_EQ(in.pop()->ticket, 2U);
  EXPECT_FALSE(in.maybe_nonempty());
  EXPECT_EQ(in.pop(), nullptr);
}

TEST(intake, keeps_order_when_pushes_and_pops_interleave_and_it_drains_to_empty_between) {
  // Alternating single push/pop goes through the path that re-links the stub node each time;
  // pushing a few before popping a few goes through the path that does not.
  servekit::intake in;
  std::uint64_t next_push = 0;
  std::uint64_t next_pop = 0;
  for (std::uint64_t round = 0; round < 50; ++round) {
    const std::uint64_t pushes = 1 + round % 4;
    for (std::uint64_t i = 0; i < pushes; ++i) {
      in.push(pending(next_push++));
    }
    const std::uint64_t pops = round % 3 == 0 ? pushes : 1;
    for (std::uint64_t i = 0; i < pops && next_pop < next_push; ++i) {
      auto p = in.pop();
      ASSERT_NE(p, nullptr) << "round " << round;
      EXPECT_EQ(p->ticket, next_pop++);
    }
  }
  for (const auto ticket : drain(in)) {
    EXPECT_EQ(ticket, next_pop++);
  }
  EXPECT_EQ(next_pop, next_push);
  EXPECT_FALSE(in.maybe_nonempty());
}

TEST(intake, destroying_it_frees_the_requests_never_popped) {
  auto alive = std::make_shared<int>(0);
  {
    servekit::intake in;
    for (int i = 0; i < 3; ++i) {
      in.push(servekit::make_pending(servekit::request{},
                                     servekit::response_sink{[alive](servekit::response&&) {}}));
    }
    EXPECT_EQ(alive.use_count(), 4);
    (void)in.pop(); // one popped and freed here; two left in the intake
    EXPECT_EQ(alive.use_count(), 3);
  }
  EXPECT_EQ(alive.use_count(), 1);
}

// ------------------------------------------------------------------------------ many producers

constexpr std::uint64_t producer_shift = 32;

TEST(intake, many_producers_each_request_arrives_once_and_each_producer_s_order_is_kept) {
  constexpr std::size_t producers = 4;
  constexpr std::uint64_t per_producer = 20000;
  servekit::intake in;
  std::latch start{static_cast<std::ptrdiff_t>(producers + 1)};
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < producers; ++t) {
    threads.emplace_back([&in, &start, t] {
      start.arrive_and_wait();
      for (std::uint64_t i = 0; i < per_producer; ++i) {
        in.push(pending((static_cast<std::uint64_t>(t) << producer_shift) | i));
      }
    });
  }

  // Consume while the producers push: the next sequence number expected from each producer.
  std::vector<std::uint64_t> next(producers, 0);
  std::uint64_t received = 0;
  std::uint64_t out_of_order = 0;
  start.arrive_and_wait();
  while (received < producers * per_producer) {
    auto p = in.pop();
    if (p == nullptr) {
      std::this_thread::yield(); // empty, or a push between its exchange and its link
      continue;
    }
    const auto producer = static_cast<std::size_t>(p->ticket >> producer_shift);
    const std::uint64_t seq = p->ticket & ((std::uint64_t{1} << producer_shift) - 1);
    ASSERT_LT(producer, producers);
    if (seq != next[producer]) {
      ++out_of_order; // a duplicate, a loss or a reordering
    }
    next[producer] = seq + 1;
    ++received;
  }
  for (auto& thread : threads) {
    thread.join();
  }

  EXPECT_EQ(out_of_order, 0U);
  for (std::size_t t = 0; t < producers; ++t) {
    EXPECT_EQ(next[t], per_producer) << "producer " << t;
  }
  EXPECT_EQ(in.pop(), nullptr); // nothing delivered twice or invented
  EXPECT_FALSE(in.maybe_nonempty());
}

TEST(intake, after_the_pushes_finish_draining_while_maybe_nonempty_gets_every_request) {
  constexpr std::size_t producers = 4;
  constexpr std::uint64_t per_producer = 5000;
  servekit::intake in;
  std::latch start{static_cast<std::ptrdiff_t>(producers)};
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < producers; ++t) {
    threads.emplace_back([&in, &start, t] {
      start.arrive_and_wait();
      for (std::uint64_t i = 0; i < per_producer; ++i) {
        in.push(pending((static_cast<std::uint64_t>(t) << producer_shift) | i));
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }

  // Every push has returned: pop() may no longer report "not ready", so the loop the shell
  // runs (pop while maybe_nonempty) must see every request, each producer's in order.
  std::vector<std::uint64_t> next(producers, 0);
  std::uint64_t received = 0;
  while (in.maybe_nonempty()) {
    auto p = in.pop();
    ASSERT_NE(p, nullptr) << "maybe_nonempty() with no push in flight, yet pop() had nothing";
    const auto producer = static_cast<std::size_t>(p->ticket >> producer_shift);
    ASSERT_LT(producer, producers);
    EXPECT_EQ(p->ticket & ((std::uint64_t{1} << producer_shift) - 1), next[producer]);
    ++next[producer];
    ++received;
  }
  EXPECT_EQ(received, producers * per_producer);
  EXPECT_EQ(in.pop(), nullptr);
}

} // namespace intake_test
