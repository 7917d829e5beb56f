#include <servekit/backend/request_validator.hpp>
#include <servekit/core/bytes.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <string>
#include <string_view>

namespace {

using servekit::data_type;
using servekit::shape;

servekit::request_validator simple_model(std::int32_t max_batch_size = 8) {
  return {"simple",
          max_batch_size,
          {{"INPUT0", data_type::fp32, shape{16}}, {"INPUT1", data_type::fp32, shape{16}}},
          {{"OUTPUT0", data_type::fp32, shape{16}}}};
}

servekit::tensor fp32(std::string name, shape s) {
  return servekit::make_tensor(std::move(name), data_type::fp32, s);
}

servekit::request good_request(std::int64_t batch = 1) {
  servekit::request r;
  r.inputs.push_back(fp32("INPUT0", {batch, 16}));
  r.inputs.push_back(fp32("INPUT1", {batch, 16}));
  return r;
}

servekit::status check(const servekit::request_validator& v, const servekit::request& r) {
  std::int64_t elements = 0;
  return v.validate(r, elements);
}

TEST(request_validator, accepts_a_good_request_and_reports_its_batch_size) {
  std::int64_t elements = 0;
  EXPECT_TRUE(simple_model().validate(good_request(3), elements).ok());
  EXPECT_EQ(elements, 3);
}

TEST(request_validator, unknown_input_is_named) {
  auto r = good_request();
  r.inputs.push_back(fp32("INPUT9", {1, 16}));
  const auto s = check(simple_model(), r);
  EXPECT_EQ(s.code(), servekit::status_code::invalid_argument);
  // Triton's wording first, then the inputs the model has.
  EXPECT_EQ(s.message(), "unexpected inference input 'INPUT9' for model 'simple' (the model's "
                         "inputs: INPUT0, INPUT1)");
}

TEST(request_validator, missing_input_is_named) {
  auto r = good_request();
  r.inputs.pop_back();
  EXPECT_EQ(check(simple_model(), r).message(),
            "missing inference input 'INPUT1' for model 'simple'");
}

TEST(request_validator, wrong_data_type_is_named) {
  auto r = good_request();
  r.inputs[1] = servekit::make_tensor("INPUT1", data_type::int32, shape{1, 16});
  EXPECT_EQ(check(simple_model(), r).message(),
            "inference input 'INPUT1' data-type is 'INT32', but model 'simple' expects 'FP32'");
}

TEST(request_validator, wrong_shape_is_named_with_expected_and_actual) {
  auto r = good_request();
  r.inputs[0] = fp32("INPUT0", {1, 15});
  EXPECT_EQ(check(simple_model(), r).message(),
            "unexpected shape for input 'INPUT0' for model 'simple'. Expected [-1,16], got [1,15]");
}

TEST(request_validator, batch_larger_than_max_batch_size_is_rejected) {
  const auto s = check(simple_model(8), good_request(9));
  EXPECT_EQ(s.code(), servekit::status_code::invalid_argument);
  EXPECT_NE(s.message().find("batch-size must be <= 8"), std::string::npos) << s.message();
}

TEST(request_validator, inputs_must_agree_on_the_batch_dimension) {
  auto r = good_request(2);
  r.inputs[1] = fp32("INPUT1", {3, 16});
  const auto s = check(simple_model(), r);
  EXPECT_NE(s.message().find("'INPUT1' batch size 3"), std::string::npos) << s.message();
}

TEST(request_validator, data_size_must_match_the_shape) {
  auto r = good_request();
  r.inputs[0].data = servekit::buffer::allocate(60);
  const auto s = check(simple_model(), r);
  EXPECT_NE(s.message().find("'INPUT0'"), std::string::npos);
  EXPECT_NE(s.message().find("60 bytes"), std::string::npos) << s.message();
}

TEST(request_validator, non_batching_model_matches_dims_exactly) {
  const auto v = simple_model(0);
  servekit::request r;
  r.inputs.push_back(fp32("INPUT0", {16}));
  r.inputs.push_back(fp32("INPUT1", {16}));
  std::int64_t elements = 0;
  EXPECT_TRUE(v.validate(r, elements).ok());
  EXPECT_EQ(elements, 1);
  EXPECT_FALSE(check(v, good_request()).ok()); // [1,16] is not [16]
}

TEST(request_validator, unknown_requested_output_is_named) {
  auto r = good_request();
  r.requested_outputs = {"OUTPUT7"};
  EXPECT_EQ(check(simple_model(), r).message(),
            "unexpected inference output 'OUTPUT7' for model 'simple'");
}

TEST(request_validator, duplicate_input_is_rejected) {
  auto r = good_request();
  r.inputs.push_back(fp32("INPUT0", {1, 16}));
  EXPECT_NE(check(simple_model(), r).message().find("more than once"), std::string::npos);
}

TEST(request_validator, bytes_inputs_are_counted_by_elements) {
  const servekit::request_validator v{"strings", 4, {{"TEXT", data_type::bytes, shape{-1}}}, {}};
  const std::array<std::string_view, 2> words{"a", "bc"};
  servekit::request r;
  r.inputs.push_back({"TEXT", data_type::bytes, shape{1, 2}, servekit::encode_bytes(words)});
  EXPECT_TRUE(check(v, r).ok());
  r.inputs[0].shape = shape{1, 3};
  EXPECT_NE(check(v, r).message().find("holds 2 BYTES elements"), std::string::npos);
  r.inputs[0].data = servekit::buffer::allocate(3);
  EXPECT_NE(check(v, r).message().find("malformed BYTES"), std::string::npos);
}

TEST(request_validator, optional_inputs_may_be_omitted) {
  const servekit::request_validator v{
      "opt",
      4,
      {{"A", data_type::fp32, shape{2}}, {"B", data_type::fp32, shape{2}, false, true}},
      {}};
  servekit::request r;
  r.inputs.push_back(fp32("A", {1, 2}));
  EXPECT_TRUE(check(v, r).ok());
}

} // namespace

namespace {
TEST(request_validator, an_input_of_unknown_type_is_checked_by_name_only) {
  const servekit::request_validator v{
      "ensemble", 0, {{"IN", data_type::invalid, shape{}}}, {{"OUT", data_type::invalid, shape{}}}};
  servekit::request any_type;
  any_type.inputs.push_back(servekit::make_tensor("IN", data_type::int32, shape{3, 5}));
  EXPECT_TRUE(check(v, any_type).ok());

  servekit::request unknown;
  unknown.inputs.push_back(servekit::make_tensor("PICTURE", data_type::int32, shape{3}));
  const auto s = check(v, unknown);
  EXPECT_EQ(s.code(), servekit::status_code::invalid_argument);
  EXPECT_EQ(s.message(), "unexpected inference input 'PICTURE' for model 'ensemble' (the model's "
                         "input: IN)");

  const auto missing = check(v, servekit::request{});
  EXPECT_NE(missing.message().find("missing inference input 'IN'"), std::string::npos);
}
} // namespace

namespace {

/// A request with `n` distinct one-element FP32 inputs, and the seconds validate takes on it.
double seconds_to_validate(const servekit::request_validator& v, std::size_t n) {
  servekit::request r;
  r.inputs.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    r.inputs.push_back(fp32("in" + std::to_string(i), shape{1}));
  }
  std::int64_t batch = 0;
  const auto start = std::chrono::steady_clock::now();
  const auto s = v.validate(r, batch);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(s.ok()) << s.message();
  return took.count();
}

} // namespace

// Issue 16: 40,000 inputs in one request took 14 s to check (every pair of names compared).
// The check is linear now: 16x the inputs must cost far under 256x the time, the quadratic
// figure (a ratio measured in one run, best of three, not an absolute time). The bound, 64x,
// leaves a factor of 4 for a machine shared with other jobs (the former bound, 8x for 4x the
// inputs, failed once under a load average of 7).
TEST(RequestValidator, ManyInputsCostLinearTime) {
  const servekit::request_validator v{"any_inputs", 0, {}, {}}; // declares none: accepts any
  constexpr std::size_t n = 5'000;
  double small = 1e9;
  double large = 1e9;
  for (int round = 0; round < 3; ++round) {
    small = std::min(small, seconds_to_validate(v, n));
    large = std::min(large, seconds_to_validate(v, 16 * n));
  }
  EXPECT_LT(large / small, 64.0) << "n: " << small << " s, 16n: " << large << " s";
}

TEST(RequestValidator, DuplicateAmongManyInputsIsFound) {
  const servekit::request_validator v{"any_inputs", 0, {}, {}};
  servekit::request r;
  for (std::size_t i = 0; i < 100; ++i) {
    r.inputs.push_back(fp32("in" + std::to_string(i), shape{1}));
  }
  r.inputs.push_back(fp32("in42", shape{1}));
  std::int64_t batch = 0;
  const auto s = v.validate(r, batch);
  EXPECT_EQ(s.code(), servekit::status_code::invalid_argument);
  EXPECT_NE(s.message().find("'in42' appears more than once"), std::string::npos) << s.message();
}
