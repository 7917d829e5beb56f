#include <servekit/core/data_type.hpp>

#include <gtest/gtest.h>

namespace data_type_test {

using servekit::data_type;

TEST(data_type, byte_sizes_match_triton) {
  EXPECT_EQ(servekit::byte_size(data_type::boolean), 1U);
  EXPECT_EQ(servekit::byte_size(data_type::uint16), 2U);
  EXPECT_EQ(servekit::byte_size(data_type::int32), 4U);
  EXPECT_EQ(servekit::byte_size(data_type::uint64), 8U);
  EXPECT_EQ(servekit::byte_size(data_type::fp16), 2U);
  EXPECT_EQ(servekit::byte_size(data_type::bf16), 2U);
  EXPECT_EQ(servekit::byte_size(data_type::fp32), 4U);
  EXPECT_EQ(servekit::byte_size(data_type::fp64), 8U);
  EXPECT_EQ(servekit::byte_size(data_type::bytes), 0U);
}

TEST(data_type, byte_size_agrees_with_the_type_table) {
  for (const auto& info : servekit::detail::data_type_table) {
    EXPECT_EQ(servekit::byte_size(info.type), info.byte_size) << servekit::to_string(info.type);
  }
  EXPECT_EQ(servekit::byte_size(data_type::invalid), 0U);
}

TEST(data_type, names_round_trip_in_both_spellings) {
  for (const auto& info : servekit::detail::data_type_table) {
    EXPECT_EQ(servekit::parse_data_type(servekit::to_string(info.type)), info.type);
    EXPECT_EQ(servekit::parse_data_type(servekit::to_config_string(info.type)), info.type);
  }
  EXPECT_EQ(servekit::to_string(data_type::fp32), "FP32");
  EXPECT_EQ(servekit::to_config_string(data_type::bytes), "TYPE_STRING");
  EXPECT_EQ(servekit::parse_data_type("TYPE_STRING"), data_type::bytes);
  EXPECT_EQ(servekit::parse_data_type("BYTES"), data_type::bytes);
}

TEST(data_type, unknown_names_do_not_parse) {
  EXPECT_FALSE(servekit::parse_data_type("FLOAT"));
  EXPECT_FALSE(servekit::parse_data_type("fp32"));
  EXPECT_FALSE(servekit::parse_data_type(""));
}

static_assert(servekit::parse_data_type("TYPE_INT8") == data_type::int8);

} // namespace data_type_test
