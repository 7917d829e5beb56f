#include <servekit/core/bytes.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/request_builder.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/tensor.hpp>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace request_builder_test {

using servekit::data_type;
using servekit::data_type_of_v;

// -- data types from element types ---------------------------------------------------------

static_assert(data_type_of_v<float> == data_type::fp32);
static_assert(data_type_of_v<double> == data_type::fp64);
static_assert(data_type_of_v<bool> == data_type::boolean);
static_assert(data_type_of_v<std::int8_t> == data_type::int8);
static_assert(data_type_of_v<std::int16_t> == data_type::int16);
static_assert(data_type_of_v<std::int32_t> == data_type::int32);
static_assert(data_type_of_v<std::int64_t> == data_type::int64);
static_assert(data_type_of_v<long long> == data_type::int64);
static_assert(data_type_of_v<std::uint8_t> == data_type::uint8);
static_assert(data_type_of_v<std::uint16_t> == data_type::uint16);
static_assert(data_type_of_v<std::uint32_t> == data_type::uint32);
static_assert(data_type_of_v<std::uint64_t> == data_type::uint64);
static_assert(data_type_of_v<const float> == data_type::fp32);
// Text is BYTES, not a tensor of chars; a type with no data type is not an element type.
static_assert(!servekit::element_type<char>);
static_assert(!servekit::element_type<std::string>);
static_assert(!servekit::element_type<const char*>);

TEST(make_tensor, deduces_the_data_type_from_a_vector) {
  const std::vector<float> values{1.0F, 2.0F, 3.0F, 4.0F};
  const servekit::tensor t = servekit::make_tensor("X", {2, 2}, values);
  EXPECT_EQ(t.name, "X");
  EXPECT_EQ(t.type, data_type::fp32);
  EXPECT_EQ(t.shape, (servekit::shape{2, 2}));
  ASSERT_EQ(t.values<float>().size(), 4U);
  EXPECT_EQ(t.values<float>()[3], 4.0F);
}

TEST(make_tensor, deduces_the_data_type_from_an_array_a_span_and_a_braced_list) {
  const std::array<std::int32_t, 3> a{7, 8, 9};
  EXPECT_EQ(servekit::make_tensor("A", {3}, a).type, data_type::int32);
  EXPECT_EQ(servekit::make_tensor("S", {3}, std::span{a}).values<std::int32_t>()[1], 8);
  const servekit::tensor b = servekit::make_tensor("B", {1, 2}, {true, false});
  EXPECT_EQ(b.type, data_type::boolean);
  EXPECT_EQ(b.data.size(), 2U);
  EXPECT_EQ(servekit::make_tensor("D", {2}, {1.5, 2.5}).type, data_type::fp64);
  EXPECT_EQ(servekit::make_tensor("U", {1}, {std::uint64_t{5}}).type, data_type::uint64);
}

TEST(make_tensor, builds_bytes_from_a_braced_list_of_strings) {
  const servekit::tensor t = servekit::make_tensor("TEXT", {1, 2}, {"hello", "world"});
  EXPECT_EQ(t.type, data_type::bytes);
  EXPECT_EQ(t.shape, (servekit::shape{1, 2}));
  // Triton's encoding: a 4-byte little-endian length, then the bytes.
  EXPECT_EQ(t.data.size(), 2U * (4U + 5U));
  EXPECT_EQ(t.data.bytes()[0], std::byte{5});
  EXPECT_EQ(t.data.bytes()[1], std::byte{0});
}

TEST(make_tensor, bytes_round_trip_through_strings) {
  const std::vector<std::string> texts{"", "a", std::string(300, 'x'), std::string{"nul\0in", 6}};
  const servekit::tensor t = servekit::make_tensor("T", {4}, texts);
  const std::vector<std::string_view> back = t.strings();
  ASSERT_EQ(back.size(), texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(back[i], texts[i]) << i;
  }
  // The same bytes as encode_bytes, so either way of building reads the same.
  const std::vector<std::string_view> views{texts.begin(), texts.end()};
  const servekit::buffer encoded = servekit::encode_bytes(views);
  ASSERT_EQ(encoded.size(), t.data.size());
  EXPECT_TRUE(std::equal(encoded.bytes().begin(), encoded.bytes().end(), t.data.bytes().begin()));
}

TEST(make_tensor, builds_bytes_from_string_views) {
  const std::array<std::string_view, 2> texts{"left", "right"};
  const servekit::tensor t = servekit::make_tensor("T", {2}, texts);
  EXPECT_EQ(t.type, data_type::bytes);
  EXPECT_EQ(t.strings(), (std::vector<std::string_view>{"left", "right"}));
}

TEST(tensor_strings, names_the_tensor_when_it_is_not_bytes) {
  const servekit::tensor t = servekit::make_tensor("X", {1}, {1.0F});
  try {
    (void)t.strings();
    FAIL() << "strings() of an FP32 tensor returned";
  } catch (const servekit::bytes_error& e) {
    EXPECT_EQ(std::string{e.what()}, "tensor 'X' holds FP32, not BYTES: read it with values<T>()");
  }
}

TEST(tensor_strings, names_the_tensor_and_the_place_when_the_buffer_is_malformed) {
  servekit::tensor t = servekit::make_tensor("TEXT", {2}, {"ab", "cd"});
  // Cut the last element short: its length says 2, one byte is left.
  std::vector<std::byte> cut{t.data.bytes().begin(), t.data.bytes().end() - 1};
  t.data = servekit::buffer::copy_of(cut);
  try {
    (void)t.strings();
    FAIL() << "strings() of a malformed buffer returned";
  } catch (const servekit::bytes_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("tensor 'TEXT' holds malformed BYTES data (after 1 elements"),
              std::string::npos)
        << what;
  }
}

TEST(make_tensor_death, asserts_when_the_values_do_not_fill_the_shape) {
  const std::vector<float> three{1.0F, 2.0F, 3.0F};
  EXPECT_DEATH((void)servekit::make_tensor("X", {1, 4}, three), "element count");
  EXPECT_DEATH((void)servekit::make_tensor("T", {3}, {"a", "b"}), "element count");
}

TEST(make_tensor_death, sizing_bytes_points_at_the_strings_overload) {
  EXPECT_DEATH((void)servekit::make_tensor("T", data_type::bytes, {2}), "strings");
}

// -- request accessors ---------------------------------------------------------------------

TEST(request_input, returns_the_input_by_reference) {
  servekit::request r =
      servekit::request_builder{}.input("A", {1}, {1}).input("B", {1}, {2}).build();
  EXPECT_EQ(r.input("B").values<std::int32_t>()[0], 2);
  r.input("A").values<std::int32_t>()[0] = 5;
  EXPECT_EQ(r.find_input("A")->values<std::int32_t>()[0], 5);
}

TEST(request_input_death, asserts_on_an_input_the_request_lacks) {
  const servekit::request r;
  EXPECT_DEATH((void)r.input("MISSING"), "find_input");
}

TEST(response_output, returns_the_output_by_reference_and_asserts_when_missing) {
  servekit::response r;
  r.add_output("Y", data_type::int32, {1}).values<std::int32_t>()[0] = 3;
  EXPECT_EQ(r.output("Y").values<std::int32_t>()[0], 3);
  EXPECT_DEATH((void)r.output("Z"), "find_output");
}

// -- request_builder ------------------------------------------------------------------------

TEST(request_builder, sets_every_field_in_one_expression) {
  const std::vector<float> values(16, 0.5F);
  servekit::cancellation_source cancel;
  const servekit::request r = servekit::request_builder{"req-1"}
                                  .input("INPUT0", {1, 16}, values)
                                  .input("TEXT", {1, 2}, {"hello", "world"})
                                  .input("N", {1, 1}, {std::int64_t{3}})
                                  .output("OUTPUT0")
                                  .output("OUTPUT1")
                                  .sequence(42, {.start = true})
                                  .priority(1)
                                  .timeout(std::chrono::milliseconds{5})
                                  .cancellation(cancel.token())
                                  .build();
  EXPECT_EQ(r.id, "req-1");
  ASSERT_EQ(r.inputs.size(), 3U);
  EXPECT_EQ(r.input("INPUT0").type, data_type::fp32);
  EXPECT_EQ(r.input("INPUT0").shape, (servekit::shape{1, 16}));
  EXPECT_EQ(r.input("TEXT").strings(), (std::vector<std::string_view>{"hello", "world"}));
  EXPECT_EQ(r.input("N").type, data_type::int64);
  EXPECT_EQ(r.requested_outputs, (std::vector<std::string>{"OUTPUT0", "OUTPUT1"}));
  EXPECT_EQ(r.sequence_id, servekit::correlation_id{42U});
  EXPECT_TRUE(r.sequence_start);
  EXPECT_FALSE(r.sequence_end);
  EXPECT_EQ(r.priority, 1U);
  EXPECT_EQ(r.timeout_us, 5000U);
  EXPECT_FALSE(r.cancellation.cancelled());
  cancel.cancel();
  EXPECT_TRUE(r.cancellation.cancelled());
}

TEST(request_builder, takes_string_correlation_ids_and_a_tensor_built_elsewhere) {
  const servekit::request r =
      servekit::request_builder{}
          .sequence("session-7", {.end = true})
          .input(servekit::make_tensor("H", data_type::fp16, servekit::shape{2}))
          .build();
  EXPECT_EQ(r.sequence_id.as_string(), "session-7");
  EXPECT_FALSE(r.sequence_start);
  EXPECT_TRUE(r.sequence_end);
  EXPECT_EQ(r.input("H").type, data_type::fp16);
  EXPECT_TRUE(r.requested_outputs.empty()); // every output
}

TEST(request_builder, sets_parameters_for_the_backend) {
  const std::string user = "ann";
  const servekit::request r = servekit::request_builder{}
                                  .parameter("max_tokens", 64)
                                  .parameter("temperature", 0.7)
                                  .parameter("stream", true)
                                  .parameter("stop", "\n")
                                  .parameter("user", user)
                                  .parameter("max_tokens", 32) // again: replaces
                                  .priority(2)
                                  .build();
  ASSERT_EQ(r.parameters.size(), 5U);
  EXPECT_EQ(r.parameters[0].name, "max_tokens");
  EXPECT_EQ(r.parameters.get<std::int64_t>("max_tokens"), 32);
  EXPECT_EQ(r.parameters.get<double>("temperature"), 0.7);
  EXPECT_EQ(r.parameters.get<bool>("stream"), true);
  EXPECT_EQ(r.parameters.get<std::string_view>("stop"), "\n");
  EXPECT_EQ(r.parameters.get<std::string_view>("user"), "ann");
  // The scheduling fields are members, not parameters.
  EXPECT_EQ(r.priority, 2U);
  EXPECT_FALSE(r.parameters.contains("priority"));
}

TEST(request_builder, build_hands_the_request_over_and_leaves_the_builder_empty) {
  servekit::request_builder builder{"a"};
  builder.input("X", {1}, {1.0F}).output("Y").parameter("k", 1);
  const servekit::request first = builder.build();
  EXPECT_EQ(first.inputs.size(), 1U);
  EXPECT_EQ(first.parameters.size(), 1U);
  const servekit::request second = builder.build();
  EXPECT_TRUE(second.id.empty());
  EXPECT_TRUE(second.inputs.empty());
  EXPECT_TRUE(second.requested_outputs.empty());
  EXPECT_TRUE(second.parameters.empty());
}

} // namespace request_builder_test
