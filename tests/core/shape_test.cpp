#include <servekit/core/shape.hpp>

#include <gtest/gtest.h>

#include <array>

namespace shape_test {

using servekit::shape;

TEST(shape, element_count_and_rank) {
  const shape s{2, 3, 4};
  EXPECT_EQ(s.rank(), 3U);
  EXPECT_EQ(s.element_count(), 24);
  EXPECT_EQ(shape{}.element_count(), 1);
}

TEST(shape, batch_dimension_added_and_removed) {
  const shape item{16};
  EXPECT_EQ(item.with_batch(4), (shape{4, 16}));
  EXPECT_EQ((shape{4, 16}).without_batch(), item);
}

TEST(shape, spec_with_variable_dims_admits_concrete_shapes) {
  const shape spec{-1, 8};
  EXPECT_TRUE(spec.has_variable_dim());
  EXPECT_TRUE(spec.admits(shape{3, 8}));
  EXPECT_FALSE(spec.admits(shape{3, 7}));
  EXPECT_FALSE(spec.admits(shape{3, 8, 1}));
}

TEST(shape, from_refuses_ranks_above_the_limit) {
  const std::array<std::int64_t, shape::max_rank + 1> too_many{};
  EXPECT_FALSE(shape::from(too_many));
  const std::array<std::int64_t, 2> fine{1, 2};
  EXPECT_EQ(shape::from(fine), (shape{1, 2}));
}

TEST(shape, prints_like_triton) { EXPECT_EQ(servekit::to_string(shape{-1, 16}), "[-1,16]"); }

} // namespace shape_test
