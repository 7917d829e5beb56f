// The sequence cores driven by hand, for what a shell needs from them beyond the timelines of
// sequence_batcher_test.cpp: routing answers and wake-ups of other instances.
#include <servekit/schedule/sequence_batcher.hpp>

#include <gtest/gtest.h>

#include <cstdint>

namespace sequence_core_test {

servekit::pending_ptr request(std::uint64_t id, bool start, bool end = false) {
  servekit::request r;
  r.id = std::to_string(id);
  r.sequence_id = id;
  r.sequence_start = start;
  r.sequence_end = end;
  return servekit::make_pending(std::move(r), servekit::response_sink{[](servekit::response&&) {}});
}

servekit::scheduler_settings two_instances_one_slot() {
  servekit::scheduler_settings s;
  s.model_name = "m";
  s.max_batch_size = 1;
  s.instances = 2;
  return s;
}

TEST(direct_sequence_core, enqueue_names_the_instance_to_wake) {
  servekit::direct_sequence_core core{two_instances_one_slot()};
  const servekit::time_point t{};
  auto a = request(1, true);
  auto b = request(2, true);
  auto c = request(3, true);
  EXPECT_EQ(core.enqueue(a, t).instance, 0U);
  EXPECT_EQ(core.enqueue(b, t).instance, 1U);
  EXPECT_EQ(core.enqueue(c, t).instance, servekit::routing::no_instance); // backlogged
  EXPECT_FALSE(a || b || c);                                              // all taken
  auto refused = request(9, false);
  EXPECT_FALSE(core.enqueue(refused, t).result.ok());
  EXPECT_TRUE(refused); // left with the caller
}

// A draining shutdown frees the slot of a sequence with nothing queued on instance 1 while
// instance 0 forms its batch: the backlogged sequence lands on instance 1, which must be told.
TEST(direct_sequence_core, a_promotion_for_another_instance_is_reported) {
  servekit::direct_sequence_core core{two_instances_one_slot()};
  const servekit::time_point t{};
  servekit::batch_plan plan;
  servekit::early_exits exits;
  auto a1 = request(1, true);
  auto b1 = request(2, true);
  ASSERT_EQ(core.enqueue(a1, t).instance, 0U);
  ASSERT_EQ(core.enqueue(b1, t).instance, 1U);
  ASSERT_TRUE(core.form_batch(1, t, plan, exits)); // b's START runs; b then waits, open
  core.batch_done(1, t, plan);
  plan.clear();
  auto a2 = request(1, false);
  auto c1 = request(3, true, true);
  ASSERT_EQ(core.enqueue(a2, t).instance, 0U);
  ASSERT_EQ(core.enqueue(c1, t).instance, servekit::routing::no_instance);
  EXPECT_FALSE(core.take_woken(0));
  EXPECT_FALSE(core.take_woken(1));

  core.flush();
  ASSERT_TRUE(core.form_batch(0, t, plan, exits)); // a's two requests keep slot 0 busy
  EXPECT_TRUE(core.take_woken(1));                 // b left slot 1 of instance 1 to c
  EXPECT_FALSE(core.take_woken(1));                // reported once
  EXPECT_FALSE(core.take_woken(0));
  ASSERT_EQ(plan.requests.size(), 1U);
  EXPECT_EQ(plan.requests[0]->request.id, "1");
  servekit::batch_plan other;
  ASSERT_TRUE(core.form_batch(1, t, other, exits));
  ASSERT_EQ(other.requests.size(), 1U);
  EXPECT_EQ(other.requests[0]->request.id, "3");
  ASSERT_EQ(other.ended.size(), 1U); // b left its slot without an END
  EXPECT_EQ(other.ended[0].reason, servekit::sequence_end_reason::shutdown);
}

} // namespace sequence_core_test
