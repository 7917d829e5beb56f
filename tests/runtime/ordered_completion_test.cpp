#include <servekit/runtime/detail/ordered_completion.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ordered_completion_test {

struct finished {
  servekit::batch_plan plan;
  servekit::batch b;
  servekit::instance_context context;
};

void fill(finished& f, std::vector<std::string>& delivered, const std::string& id) {
  f.b.bind(f.context, false);
  auto p = servekit::make_pending(
      servekit::request{}, [&delivered, id](servekit::response&&) { delivered.push_back(id); });
  f.b.add(p->request, 1, p->sink);
  f.plan.requests.push_back(std::move(p));
}

TEST(ordered_completion, a_later_batch_waits_for_every_earlier_one) {
  std::vector<std::string> delivered;
  servekit::detail::ordered_completion ordering;
  finished b0;
  finished b1;
  finished b2;
  fill(b0, delivered, "0");
  fill(b1, delivered, "1");
  fill(b2, delivered, "2");
  ordering.complete(2, b2.plan, b2.b);
  ordering.complete(1, b1.plan, b1.b);
  EXPECT_TRUE(delivered.empty());
  ordering.complete(0, b0.plan, b0.b);
  EXPECT_EQ(delivered, (std::vector<std::string>{"0", "1", "2"}));
}

} // namespace ordered_completion_test
