#include <servekit/cuda/graph_batch_sizes.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace graph_batch_sizes_policy_test {

using servekit::cuda::graph_batch_sizes;
using choice = graph_batch_sizes::choice;

TEST(graph_batch_sizes, without_sizes_every_batch_size_gets_its_own_graph) {
  const graph_batch_sizes sizes;
  EXPECT_EQ(sizes.choose(1), (choice{1, 0, true}));
  EXPECT_EQ(sizes.choose(7), (choice{7, 0, true}));
  EXPECT_EQ(sizes.choose(64), (choice{64, 0, true}));
}

TEST(graph_batch_sizes, padding_rounds_up_to_the_smallest_listed_size) {
  const graph_batch_sizes sizes{{1, 2, 4, 8, 16, 32}, /*pad=*/true};
  EXPECT_EQ(sizes.choose(1), (choice{1, 0, true}));
  EXPECT_EQ(sizes.choose(3), (choice{4, 1, true}));
  EXPECT_EQ(sizes.choose(8), (choice{8, 0, true}));
  EXPECT_EQ(sizes.choose(9), (choice{16, 7, true}));
  EXPECT_EQ(sizes.choose(17), (choice{32, 15, true}));
}

TEST(graph_batch_sizes, padding_past_the_largest_size_runs_eagerly) {
  const graph_batch_sizes sizes{{4, 8}, /*pad=*/true};
  EXPECT_EQ(sizes.choose(9), (choice{9, 0, false}));
}

TEST(graph_batch_sizes, without_padding_only_listed_sizes_get_graphs) {
  const graph_batch_sizes sizes{{4, 8}, /*pad=*/false};
  EXPECT_EQ(sizes.choose(4), (choice{4, 0, true}));
  EXPECT_EQ(sizes.choose(8), (choice{8, 0, true}));
  EXPECT_EQ(sizes.choose(3), (choice{3, 0, false}));
  EXPECT_EQ(sizes.choose(5), (choice{5, 0, false}));
  EXPECT_EQ(sizes.choose(100), (choice{100, 0, false}));
}

TEST(graph_batch_sizes, sizes_are_sorted_and_deduplicated) {
  const graph_batch_sizes sizes{{16, 4, 8, 4, 1}, true};
  const std::vector<std::int64_t> expected{1, 4, 8, 16};
  EXPECT_EQ(std::vector<std::int64_t>(sizes.sizes().begin(), sizes.sizes().end()), expected);
  EXPECT_TRUE(sizes.pad());
  EXPECT_EQ(sizes.choose(5), (choice{8, 3, true}));
}

TEST(graph_batch_sizes, a_size_below_one_is_a_config_error_naming_it) {
  try {
    const graph_batch_sizes sizes{{4, 0, 8}};
    FAIL() << "expected config_error";
  } catch (const servekit::config_error& e) {
    EXPECT_EQ(e.code(), servekit::config_error_code::bad_value);
    EXPECT_EQ(e.path(), "/optimization/cuda/graph_spec/1/batch_size");
    EXPECT_NE(std::string{e.what()}.find("at least 1, got 0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(graph_batch_sizes({-3}, true), servekit::config_error);
}

} // namespace graph_batch_sizes_policy_test
