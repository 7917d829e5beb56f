#include <servekit/core/status.hpp>

#include <gtest/gtest.h>

namespace status_test {

TEST(status, default_is_ok_with_empty_message) {
  const servekit::status s;
  EXPECT_TRUE(s.ok());
  EXPECT_TRUE(static_cast<bool>(s));
  EXPECT_EQ(s.code(), servekit::status_code::ok);
  EXPECT_TRUE(s.message().empty());
}

TEST(status, factories_set_code_and_message) {
  const auto s = servekit::unavailable("Exceeds maximum queue size");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), servekit::status_code::unavailable);
  EXPECT_EQ(s.message(), "Exceeds maximum queue size");
  EXPECT_EQ(servekit::invalid_argument("x").code(), servekit::status_code::invalid_argument);
  EXPECT_EQ(servekit::cancelled("x").code(), servekit::status_code::cancelled);
  EXPECT_EQ(servekit::internal_error("x").code(), servekit::status_code::internal);
  EXPECT_EQ(servekit::not_found("x").code(), servekit::status_code::not_found);
}

TEST(status, codes_print_with_tritons_names) {
  EXPECT_EQ(servekit::to_string(servekit::status_code::invalid_argument), "INVALID_ARG");
  EXPECT_EQ(servekit::to_string(servekit::status_code::unavailable), "UNAVAILABLE");
  EXPECT_EQ(servekit::to_string(servekit::status_code::cancelled), "CANCELLED");
}

} // namespace status_test
