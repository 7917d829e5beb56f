#include <servekit/core/buffer.hpp>
#include <servekit/core/bytes.hpp>
#include <servekit/core/tensor.hpp>

#include <gtest/gtest.h>

#include <array>
#include <string_view>
#include <vector>

namespace buffer_test {

TEST(buffer, moving_keeps_the_bytes_where_they_are) {
  auto b = servekit::buffer::allocate(16);
  const std::byte* where = b.data();
  servekit::buffer moved = std::move(b);
  EXPECT_EQ(moved.data(), where);
  EXPECT_EQ(moved.size(), 16U);
  EXPECT_EQ(b.data(), nullptr); // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_EQ(b.size(), 0U);
}

TEST(buffer, tensor_data_stays_valid_when_a_vector_of_outputs_grows) {
  servekit::tensor_list outputs;
  auto& first = outputs.emplace_back(
      servekit::make_tensor("A", servekit::data_type::fp32, servekit::shape{4}));
  float* p = first.values<float>().data();
  for (int i = 0; i < 64; ++i) {
    outputs.emplace_back(servekit::make_tensor("B", servekit::data_type::fp32, {4}));
  }
  EXPECT_EQ(outputs[0].values<float>().data(), p);
}

TEST(buffer, adopted_memory_is_released_once_with_its_context) {
  static int released = 0;
  static std::array<std::byte, 8> storage{};
  released = 0;
  {
    auto b = servekit::buffer::adopt(
        storage.data(), storage.size(), servekit::memory_location::gpu(1),
        [](void* context, std::byte*, std::size_t) noexcept { *static_cast<int*>(context) += 1; },
        &released);
    EXPECT_EQ(b.location(), servekit::memory_location::gpu(1));
    servekit::buffer other = std::move(b);
    EXPECT_EQ(released, 0);
  }
  EXPECT_EQ(released, 1);
}

TEST(buffer, zeroed_and_copy_of) {
  const auto z = servekit::buffer::zeroed(5);
  for (auto byte : z.bytes()) {
    EXPECT_EQ(byte, std::byte{0});
  }
  const std::array<std::byte, 3> src{std::byte{1}, std::byte{2}, std::byte{3}};
  const auto c = servekit::buffer::copy_of(src);
  ASSERT_EQ(c.size(), 3U);
  EXPECT_EQ(c.bytes()[2], std::byte{3});
}

TEST(bytes, encode_then_decode_round_trips) {
  const std::array<std::string_view, 3> words{"alpha", "", "gamma"};
  const auto b = servekit::encode_bytes(words);
  EXPECT_EQ(b.size(), 4U * 3U + 10U);
  const auto decoded = servekit::decode_bytes(b.bytes());
  ASSERT_TRUE(decoded);
  ASSERT_EQ(decoded->size(), 3U);
  EXPECT_EQ((*decoded)[0], "alpha");
  EXPECT_EQ((*decoded)[1], "");
  EXPECT_EQ((*decoded)[2], "gamma");
}

TEST(bytes, truncated_data_is_malformed) {
  const std::array<std::string_view, 1> words{"alpha"};
  const auto b = servekit::encode_bytes(words);
  EXPECT_FALSE(servekit::count_bytes_elements(b.bytes().first(b.size() - 1)));
  EXPECT_FALSE(servekit::count_bytes_elements(b.bytes().first(3)));
  EXPECT_EQ(servekit::count_bytes_elements(b.bytes()), 1U);
}

} // namespace buffer_test
