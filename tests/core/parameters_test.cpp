#include <servekit/core/parameters.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace parameters_test {

using servekit::parameter_list;
using servekit::parameter_value;

// Moving a request or response with parameters stays a pointer swap, never a throw.
static_assert(std::is_nothrow_move_constructible_v<parameter_list>);
static_assert(std::is_nothrow_move_assignable_v<parameter_list>);
static_assert(std::is_nothrow_move_constructible_v<servekit::request>);
static_assert(std::is_nothrow_move_constructible_v<servekit::response>);
// The types a parameter can be read as.
static_assert(servekit::detail::parameter_readable<bool>);
static_assert(servekit::detail::parameter_readable<std::int64_t>);
static_assert(servekit::detail::parameter_readable<int>);
static_assert(servekit::detail::parameter_readable<std::uint32_t>);
static_assert(servekit::detail::parameter_readable<double>);
static_assert(servekit::detail::parameter_readable<std::string_view>);
static_assert(!servekit::detail::parameter_readable<std::string>); // would copy: read a view
static_assert(!servekit::detail::parameter_readable<float>);

TEST(parameter_list, is_empty_and_finds_nothing_by_default) {
  const parameter_list l;
  EXPECT_TRUE(l.empty());
  EXPECT_EQ(l.size(), 0U);
  EXPECT_EQ(l.find("max_tokens"), nullptr);
  EXPECT_FALSE(l.contains("max_tokens"));
  EXPECT_FALSE(l.get<std::int64_t>("max_tokens").has_value());
}

TEST(parameter_list, set_stores_each_kind_and_keeps_the_order) {
  parameter_list l;
  l.set("max_tokens", 64);
  l.set("temperature", 0.25);
  l.set("stream", true);
  l.set("stop", "\n");
  l.set("user", std::string{"ann"});
  l.set("big", std::numeric_limits<std::uint64_t>::max());
  l.set("small", std::uint64_t{7});
  l.set("ratio", 0.5F);
  ASSERT_EQ(l.size(), 8U);
  const std::string_view names[] = {"max_tokens", "temperature", "stream", "stop",
                                    "user",       "big",         "small",  "ratio"};
  std::size_t i = 0;
  for (const auto& p : l) {
    EXPECT_EQ(p.name, names[i++]);
  }
  // Integers are int64 unless only uint64 holds them, as the JSON decoder types them.
  EXPECT_EQ(*l.find("max_tokens"), parameter_value{std::int64_t{64}});
  EXPECT_EQ(*l.find("small"), parameter_value{std::int64_t{7}});
  EXPECT_EQ(*l.find("big"), parameter_value{std::numeric_limits<std::uint64_t>::max()});
  EXPECT_EQ(*l.find("temperature"), parameter_value{0.25});
  EXPECT_EQ(*l.find("ratio"), parameter_value{0.5});
  EXPECT_EQ(*l.find("stream"), parameter_value{true});
  EXPECT_EQ(*l.find("stop"), parameter_value{std::string{"\n"}});
  EXPECT_EQ(servekit::parameter_type_name(*l.find("big")), "uint64");
  EXPECT_EQ(servekit::parameter_type_name(*l.find("stop")), "string");
}

TEST(parameter_list, set_replaces_a_value_in_place_and_erase_removes_it) {
  parameter_list l;
  l.set("a", 1);
  l.set("b", 2);
  l.set("a", "one");
  ASSERT_EQ(l.size(), 2U);
  EXPECT_EQ(l[0].name, "a");
  EXPECT_EQ(l.get<std::string_view>("a"), "one");
  EXPECT_TRUE(l.erase("a"));
  EXPECT_FALSE(l.erase("a"));
  ASSERT_EQ(l.size(), 1U);
  EXPECT_EQ(l[0].name, "b");
}

TEST(parameter_list, get_reads_each_kind_as_itself) {
  parameter_list l;
  l.set("n", -3);
  l.set("x", 1.5);
  l.set("on", false);
  l.set("s", "text");
  EXPECT_EQ(l.get<std::int64_t>("n"), -3);
  EXPECT_EQ(l.get<int>("n"), -3);
  EXPECT_EQ(l.get<double>("x"), 1.5);
  EXPECT_EQ(l.get<bool>("on"), false);
  EXPECT_EQ(l.get<std::string_view>("s"), "text");
  // The view points into the list: no copy.
  EXPECT_EQ(l.get<std::string_view>("s")->data(), std::get<std::string>(*l.find("s")).data());
}

TEST(parameter_list, get_converts_numbers_only_without_loss) {
  parameter_list l;
  l.set("one", 1);
  l.set("neg", -1);
  l.set("big", std::uint64_t{1} << 63U);
  l.set("huge", (std::int64_t{1} << 53) + 1);
  l.set("half", 0.5);
  l.set("two", 2.0);
  // An integer reads as double when exact (a client's "temperature": 1).
  EXPECT_EQ(l.get<double>("one"), 1.0);
  EXPECT_EQ(l.get<double>("big"), 9223372036854775808.0);
  EXPECT_FALSE(l.get<double>("huge").has_value()); // 2^53 + 1 has no double
  // Integers read as any integer type they fit.
  EXPECT_EQ(l.get<std::uint8_t>("one"), std::uint8_t{1});
  EXPECT_FALSE(l.get<std::uint64_t>("neg").has_value());
  EXPECT_EQ(l.get<std::uint64_t>("big"), std::uint64_t{1} << 63U);
  EXPECT_FALSE(l.get<std::int64_t>("big").has_value());
  // A double never reads as an integer, nor a number as a bool or a string.
  EXPECT_FALSE(l.get<std::int64_t>("two").has_value());
  EXPECT_FALSE(l.get<bool>("one").has_value());
  EXPECT_FALSE(l.get<std::string_view>("half").has_value());
}

TEST(parameter_list, get_into_keeps_the_default_when_absent) {
  parameter_list l;
  std::int64_t max_tokens = 16;
  EXPECT_TRUE(l.get("max_tokens", max_tokens).ok());
  EXPECT_EQ(max_tokens, 16);
  l.set("max_tokens", 64);
  EXPECT_TRUE(l.get("max_tokens", max_tokens).ok());
  EXPECT_EQ(max_tokens, 64);
}

TEST(parameter_list, get_into_names_the_parameter_and_both_types_when_they_differ) {
  parameter_list l;
  l.set("max_tokens", "64");
  l.set("stream", 1);
  l.set("top_k", -1);
  l.set("temperature", true);
  std::int64_t max_tokens = 16;
  const servekit::status s = l.get("max_tokens", max_tokens);
  EXPECT_EQ(s.code(), servekit::status_code::invalid_argument);
  EXPECT_EQ(s.message(), "parameter 'max_tokens' is a string, expected an integer");
  EXPECT_EQ(max_tokens, 16); // untouched
  bool stream = false;
  EXPECT_EQ(l.get("stream", stream).message(), "parameter 'stream' is an int64, expected a bool");
  std::uint32_t top_k = 0;
  EXPECT_EQ(l.get("top_k", top_k).message(),
            "parameter 'top_k' is an int64, expected an integer in [0, 4294967295]");
  double temperature = 1.0;
  EXPECT_EQ(l.get("temperature", temperature).message(),
            "parameter 'temperature' is a bool, expected a number");
  std::string_view text;
  EXPECT_EQ(l.get("stream", text).message(), "parameter 'stream' is an int64, expected a string");
}

TEST(parameter_list, compares_by_names_values_and_order) {
  parameter_list a;
  a.set("x", 1);
  a.set("y", "z");
  parameter_list b;
  b.set("x", 1);
  b.set("y", "z");
  EXPECT_EQ(a, b);
  parameter_list c;
  c.set("y", "z");
  c.set("x", 1);
  EXPECT_NE(a, c);
  b.set("x", 1.0);
  EXPECT_NE(a, b); // int64 1 and double 1.0 are different values
}

TEST(parameter_list, travels_with_a_moved_request_and_response) {
  servekit::request r;
  r.parameters.set("max_tokens", 8);
  const servekit::request moved = std::move(r);
  EXPECT_EQ(moved.parameters.get<std::int64_t>("max_tokens"), 8);

  servekit::response out;
  out.parameters.set("generated", 3);
  const servekit::response moved_out = std::move(out);
  EXPECT_EQ(moved_out.parameters.get<int>("generated"), 3);
}

} // namespace parameters_test
