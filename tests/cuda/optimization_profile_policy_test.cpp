#include <servekit/cuda/optimization_profile.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace optimization_profile_policy_test {

namespace sk = servekit;
namespace skc = servekit::cuda;

skc::input_range range(std::string name, sk::shape min, sk::shape opt, sk::shape max) {
  return {std::move(name), min, opt, max};
}

/// Three profiles over [batch, length] inputs, as a sequence model might declare them: short
/// sequences, long sequences, and long sequences at large batch.
std::vector<skc::optimization_profile> three_profiles() {
  return {
      {"short", {range("INPUT0", {1, 1}, {4, 64}, {16, 128}), range("MASK", {1}, {4}, {16})}},
      {"long", {range("INPUT0", {1, 64}, {4, 384}, {16, 512}), range("MASK", {1}, {4}, {16})}},
      {"wide", {range("INPUT0", {8, 64}, {32, 384}, {64, 512}), range("MASK", {8}, {32}, {64})}},
  };
}

/// The profile `selector` picks for `shapes`, or the failure's message.
std::pair<std::optional<std::size_t>, std::string>
pick(const skc::profile_selector& selector, const std::vector<skc::named_shape>& shapes) {
  std::size_t index = 99;
  const auto s = selector.select(shapes, index);
  if (!s.ok()) {
    EXPECT_EQ(s.code(), sk::status_code::invalid_argument);
    EXPECT_EQ(index, 99U) << "a failed select leaves the index alone";
    return {std::nullopt, s.message()};
  }
  return {index, ""};
}

/// The config_error message of building a selector from `profiles`.
std::string refusal(std::vector<skc::optimization_profile> profiles) {
  try {
    const skc::profile_selector selector{std::move(profiles)};
  } catch (const sk::config_error& e) {
    EXPECT_EQ(e.code(), sk::config_error_code::bad_value);
    EXPECT_EQ(e.path(), "");
    return e.what();
  }
  ADD_FAILURE() << "expected a config_error";
  return {};
}

// -- selection ---------------------------------------------------------------------------------

TEST(profile_selector, picks_the_admitting_profile_nearest_to_opt) {
  const skc::profile_selector selector{three_profiles()};
  // Only "short" admits length 32.
  EXPECT_EQ(pick(selector, {{"INPUT0", {2, 32}}, {"MASK", {2}}}).first, 0U);
  // "short" and "long" admit length 100. Distances: short |2-4| + |100-64| + |2-4| = 40; long |2-4|
  // + |100-384| + |2-4| = 288.
  EXPECT_EQ(pick(selector, {{"INPUT0", {2, 100}}, {"MASK", {2}}}).first, 0U);
  // Length 300: only "long" (batch 2 < wide's min 8).
  EXPECT_EQ(pick(selector, {{"INPUT0", {2, 300}}, {"MASK", {2}}}).first, 1U);
  // Batch 12, length 300: long |12-4| + |300-384| + 8 = 100; wide 20 + 84 + 20 = 124.
  EXPECT_EQ(pick(selector, {{"INPUT0", {12, 300}}, {"MASK", {12}}}).first, 1U);
  // Batch 16: long 12 + 84 + 12 = 108; wide 16 + 84 + 16 = 116.
  EXPECT_EQ(pick(selector, {{"INPUT0", {16, 300}}, {"MASK", {16}}}).first, 1U);
  // Batch 20 is past long's max: wide.
  EXPECT_EQ(pick(selector, {{"INPUT0", {20, 300}}, {"MASK", {20}}}).first, 2U);
}

TEST(profile_selector, bounds_are_inclusive) {
  const skc::profile_selector selector{three_profiles()};
  EXPECT_EQ(pick(selector, {{"INPUT0", {1, 1}}}).first, 0U);
  EXPECT_EQ(pick(selector, {{"INPUT0", {64, 512}}}).first, 2U);
  EXPECT_FALSE(pick(selector, {{"INPUT0", {65, 512}}}).first);
  EXPECT_FALSE(pick(selector, {{"INPUT0", {1, 0}}}).first);
}

TEST(profile_selector, the_distance_sums_every_input) {
  // On INPUT0 alone "a" is nearer (0 against 2); with MASK "b" is (2 + 0 against 0 + 8).
  const skc::profile_selector selector{{
      {"a", {range("INPUT0", {1, 1}, {2, 8}, {4, 8}), range("MASK", {1}, {1}, {16})}},
      {"b", {range("INPUT0", {1, 1}, {4, 8}, {4, 8}), range("MASK", {1}, {9}, {16})}},
  }};
  EXPECT_EQ(pick(selector, {{"INPUT0", {2, 8}}}).first, 0U);
  EXPECT_EQ(pick(selector, {{"INPUT0", {2, 8}}, {"MASK", {9}}}).first, 1U);
}

TEST(profile_selector, ties_go_to_the_lowest_index) {
  const skc::profile_selector selector{{
      {"p0", {range("X", {1}, {2}, {8})}},
      {"p1", {range("X", {1}, {6}, {8})}},
      {"p2", {range("X", {1}, {2}, {8})}},
  }};
  EXPECT_EQ(pick(selector, {{"X", {4}}}).first, 0U); // p0 and p1 both 2 away
  EXPECT_EQ(pick(selector, {{"X", {2}}}).first, 0U); // p0 and p2 both exact
  EXPECT_EQ(pick(selector, {{"X", {7}}}).first, 1U);
}

TEST(profile_selector, a_single_profile_still_checks_its_ranges) {
  // Triton takes the only profile unchecked and lets TensorRT fail; the selector says why.
  const skc::profile_selector selector{{{"only", {range("X", {1, 4}, {4, 4}, {8, 4})}}}};
  EXPECT_EQ(pick(selector, {{"X", {8, 4}}}).first, 0U);
  const auto [index, message] = pick(selector, {{"X", {9, 4}}});
  EXPECT_FALSE(index);
  EXPECT_EQ(message, "failed to find any optimization profile among [ only[0]] to support the "
                     "requested dimensions: X [9,4]");
}

TEST(profile_selector, no_admitting_profile_lists_profiles_and_dims_as_triton_does) {
  const skc::profile_selector selector{three_profiles()};
  const auto [index, message] = pick(selector, {{"INPUT0", {8, 600}}, {"MASK", {8}}});
  EXPECT_FALSE(index);
  EXPECT_EQ(message, "failed to find any optimization profile among [ short[0] long[1] wide[2]] "
                     "to support the requested dimensions: INPUT0 [8,600], MASK [8]");
}

TEST(profile_selector, a_shape_of_another_rank_is_admitted_by_no_profile) {
  const skc::profile_selector selector{three_profiles()};
  const auto [index, message] = pick(selector, {{"INPUT0", {4}}});
  EXPECT_FALSE(index);
  EXPECT_NE(message.find("INPUT0 [4]"), std::string::npos) << message;
}

TEST(profile_selector, inputs_left_out_are_not_checked) {
  const skc::profile_selector selector{three_profiles()};
  // MASK at 100 would fit no profile; without it, INPUT0 decides.
  EXPECT_FALSE(pick(selector, {{"INPUT0", {2, 32}}, {"MASK", {100}}}).first);
  EXPECT_EQ(pick(selector, {{"INPUT0", {2, 32}}}).first, 0U);
  // Nothing to check: every profile admits, all at distance 0, so the first.
  EXPECT_EQ(pick(selector, {}).first, 0U);
}

TEST(profile_selector, an_input_no_profile_lists_is_an_error_naming_it) {
  const skc::profile_selector selector{three_profiles()};
  const auto [index, message] = pick(selector, {{"INPUT0", {2, 32}}, {"INPUT1", {2, 32}}});
  EXPECT_FALSE(index);
  EXPECT_EQ(message, "input 'INPUT1' is in no optimization profile; the profiles cover 'INPUT0', "
                     "'MASK'");
}

TEST(profile_selector, profiles_may_list_their_inputs_in_any_order) {
  const skc::profile_selector selector{{
      {"a", {range("X", {1}, {1}, {4}), range("Y", {1}, {1}, {4})}},
      {"b", {range("Y", {1}, {4}, {4}), range("X", {1}, {4}, {4})}},
  }};
  EXPECT_EQ(pick(selector, {{"Y", {3}}, {"X", {4}}}).first, 1U);
  EXPECT_EQ(pick(selector, {{"X", {2}}, {"Y", {1}}}).first, 0U);
  ASSERT_EQ(selector.profiles().size(), 2U);
  EXPECT_EQ(selector.profiles()[1].inputs[0].name, "Y");
}

TEST(profile_selector, scalars_are_admitted_at_distance_zero) {
  const skc::profile_selector selector{{{"p", {range("S", {}, {}, {})}}}};
  EXPECT_EQ(pick(selector, {{"S", {}}}).first, 0U);
}

// -- validation --------------------------------------------------------------------------------

TEST(profile_selector, refuses_an_empty_list) {
  EXPECT_EQ(refusal({}), "a profile_selector needs at least one optimization profile");
}

TEST(profile_selector, refuses_unnamed_and_repeated_profiles) {
  EXPECT_EQ(refusal({{"", {range("X", {1}, {1}, {1})}}}), "optimization profile [0] has no name");
  EXPECT_EQ(refusal({{"p", {range("X", {1}, {1}, {1})}}, {"p", {range("X", {1}, {1}, {1})}}}),
            "optimization profile 'p' [1] has the name of profile [0]");
}

TEST(profile_selector, refuses_a_profile_without_inputs_or_with_one_twice) {
  EXPECT_EQ(refusal({{"p", {}}}), "optimization profile 'p' [0] lists no input");
  EXPECT_EQ(refusal({{"p", {range("X", {1}, {1}, {1}), range("X", {1}, {1}, {1})}}}),
            "optimization profile 'p' [0] lists input 'X' twice");
  EXPECT_EQ(refusal({{"p", {range("", {1}, {1}, {1})}}}),
            "optimization profile 'p' [0] lists an input with no name");
}

TEST(profile_selector, refuses_ranges_out_of_order) {
  EXPECT_EQ(refusal({{"p", {range("X", {1, 8}, {4, 2}, {8, 8})}}}),
            "optimization profile 'p' [0] input 'X' breaks 0 <= min <= opt <= max at dim 1: "
            "min [1,8], opt [4,2], max [8,8]");
  EXPECT_NE(refusal({{"p", {range("X", {4}, {2}, {8})}}}).find("at dim 0"), std::string::npos);
  EXPECT_NE(refusal({{"p", {range("X", {1}, {9}, {8})}}}).find("at dim 0"), std::string::npos);
  // -1 is a wildcard in model configs, never in a profile: dims are concrete.
  EXPECT_NE(refusal({{"p", {range("X", {-1}, {1}, {8})}}}).find("at dim 0"), std::string::npos);
}

TEST(profile_selector, refuses_shapes_of_different_ranks) {
  EXPECT_EQ(refusal({{"p", {range("X", {1}, {1, 1}, {1, 1})}}}),
            "optimization profile 'p' [0] input 'X' has shapes of different ranks: min [1], "
            "opt [1,1], max [1,1]");
  EXPECT_EQ(
      refusal({{"p", {range("X", {1}, {1}, {1})}}, {"q", {range("X", {1, 1}, {1, 1}, {1, 1})}}}),
      "optimization profile 'q' [1] gives input 'X' rank 2 but profile 'p' [0] gives rank 1");
}

TEST(profile_selector, refuses_profiles_over_different_inputs) {
  EXPECT_EQ(refusal({{"p", {range("X", {1}, {1}, {1})}}, {"q", {range("Y", {1}, {1}, {1})}}}),
            "optimization profile 'q' [1] does not list input 'X', which profile 'p' [0] lists; "
            "every profile covers the same inputs");
  EXPECT_EQ(refusal({{"p", {range("X", {1}, {1}, {1})}},
                     {"q", {range("X", {1}, {1}, {1}), range("Y", {1}, {1}, {1})}}}),
            "optimization profile 'q' [1] lists 2 inputs but profile 'p' [0] lists 1; every "
            "profile covers the same inputs");
}

// -- batch_input_shape -------------------------------------------------------------------------

class batch_input_shape : public ::testing::Test {
protected:
  /// A batch of requests, each carrying INPUT0 of one of `shapes`.
  void make_batch(std::int32_t max_batch_size, const std::vector<sk::shape>& shapes) {
    context_.max_batch_size = max_batch_size;
    requests_.clear();
    requests_.reserve(shapes.size()); // the batch points into the vector
    batch_.clear();
    batch_.bind(context_, false);
    for (const auto& s : shapes) {
      auto& r = requests_.emplace_back();
      r.inputs.push_back(sk::make_tensor("INPUT0", sk::data_type::fp32, s));
      batch_.add(r, max_batch_size > 0 ? s[0] : 1, sink_);
    }
  }

  sk::instance_context context_;
  std::vector<sk::request> requests_;
  sk::response_sink sink_ = [](sk::response&&) {};
  sk::batch batch_;
};

TEST_F(batch_input_shape, sums_the_batch_dimension_when_the_model_batches) {
  make_batch(16, {{2, 300}, {1, 300}, {4, 300}});
  EXPECT_EQ(skc::batch_input_shape(batch_, "INPUT0"), (sk::shape{7, 300}));
}

TEST_F(batch_input_shape, is_the_request_shape_when_the_model_does_not_batch) {
  make_batch(0, {{5, 300}});
  EXPECT_EQ(skc::batch_input_shape(batch_, "INPUT0"), (sk::shape{5, 300}));
}

TEST_F(batch_input_shape, is_nothing_for_an_input_the_requests_omit_or_an_empty_batch) {
  make_batch(16, {{2, 300}});
  EXPECT_EQ(skc::batch_input_shape(batch_, "MASK"), std::nullopt);
  make_batch(16, {});
  EXPECT_EQ(skc::batch_input_shape(batch_, "INPUT0"), std::nullopt);
}

TEST_F(batch_input_shape, feeds_the_selector) {
  make_batch(64, {{8, 300}, {8, 300}});
  const skc::profile_selector selector{three_profiles()};
  const auto dims = skc::batch_input_shape(batch_, "INPUT0");
  ASSERT_TRUE(dims);
  const std::vector<skc::named_shape> shapes{{"INPUT0", *dims}};
  std::size_t index = 0;
  ASSERT_TRUE(selector.select(shapes, index).ok());
  // [16,300]: long 12 + 84 = 96, wide 16 + 84 = 100.
  EXPECT_EQ(index, 1U);
}

} // namespace optimization_profile_policy_test
