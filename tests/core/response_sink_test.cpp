#include <servekit/core/response_sink.hpp>

#include <gtest/gtest.h>

#include <array>
#include <memory>

namespace response_sink_test {

TEST(response_sink, calls_the_callable_with_the_response) {
  std::string seen;
  servekit::response_sink sink = [&seen](servekit::response&& r) { seen = r.id; };
  servekit::response r;
  r.id = "42";
  sink.complete(std::move(r));
  EXPECT_EQ(seen, "42");
  EXPECT_TRUE(sink.final_sent());
}

TEST(response_sink, partial_responses_then_the_final_one) {
  int partials = 0;
  int finals = 0;
  servekit::response_sink sink = [&](servekit::response&& r) { (r.final ? finals : partials)++; };
  servekit::response a;
  a.final = false;
  sink.send(std::move(a));
  sink.send(servekit::response{});
  EXPECT_EQ(partials, 1);
  EXPECT_EQ(finals, 1);
}

TEST(response_sink, large_callables_live_on_the_heap_and_move_safely) {
  std::array<char, 256> big{};
  big[0] = 'x';
  char seen = 0;
  servekit::response_sink sink = [big, &seen](servekit::response&&) { seen = big[0]; };
  servekit::response_sink moved = std::move(sink);
  EXPECT_FALSE(static_cast<bool>(sink)); // NOLINT(bugprone-use-after-move)
  moved.complete(servekit::response{});
  EXPECT_EQ(seen, 'x');
}

TEST(response_sink, destroys_its_callable_once) {
  auto counter = std::make_shared<int>(0);
  {
    servekit::response_sink sink = [counter](servekit::response&&) {};
    EXPECT_EQ(counter.use_count(), 2);
    servekit::response_sink moved = std::move(sink);
    EXPECT_EQ(counter.use_count(), 2);
  }
  EXPECT_EQ(counter.use_count(), 1);
}

TEST(response_sink_death, sending_after_the_final_response_asserts) {
  servekit::response_sink sink = [](servekit::response&&) {};
  sink.complete(servekit::response{});
  EXPECT_DEATH(sink.complete(servekit::response{}), "after the final response");
}

} // namespace response_sink_test
