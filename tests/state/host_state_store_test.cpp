#include "state/state_test_support.hpp"

#include <servekit/state.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace host_state_store_test {

namespace sk = servekit;
using state_test::file_state;
using state_test::int_state;
using state_test::model_directory;

static_assert(sk::state_store<sk::host_state_store>);
static_assert(std::same_as<sk::host_state_store::policy_role, sk::state_store_role>);

/// Has everything but update.
struct store_without_update {
  static constexpr bool supports_growable_memory = false;
  explicit store_without_update(const sk::state_store_config&) {}
  sk::status bind(std::size_t, bool, sk::request&) { return {}; }
  void release(std::size_t) {}
  [[nodiscard]] std::size_t live_sequences() const { return 0; }
  [[nodiscard]] std::size_t bytes_in_use() const { return 0; }
};
static_assert(!sk::state_store<store_without_update>);
static_assert(!sk::detail::state_store_has_update<store_without_update>);

/// `s` under other names, for models with several states.
sk::state_options renamed(sk::state_options s, const std::string& prefix) {
  s.input_name = prefix + "_IN";
  s.output_name = prefix + "_OUT";
  return s;
}

sk::state_store_config config_of(std::vector<sk::state_options> states, std::size_t slots = 1,
                                 bool batched = false, std::vector<std::string> outputs = {}) {
  sk::state_store_config c;
  c.model_name = "M";
  c.states = std::move(states);
  c.slots = slots;
  c.batched = batched;
  c.model_outputs = std::move(outputs);
  return c;
}

std::vector<std::int32_t> values_of(const sk::tensor& t) {
  const auto v = t.values<std::int32_t>();
  return {v.begin(), v.end()};
}

/// Plays an accumulator backend: OUTPUT_STATE = INPUT_STATE + add, same shape.
sk::response accumulate(const sk::request& r, std::int32_t add) {
  const auto* in = r.find_input("INPUT_STATE");
  EXPECT_NE(in, nullptr);
  sk::response out;
  auto& t = out.add_output("OUTPUT_STATE", sk::data_type::int32, in->shape);
  const auto src = in->values<std::int32_t>();
  auto dst = t.values<std::int32_t>();
  for (std::size_t i = 0; i < src.size(); ++i) {
    dst[i] = src[i] + add;
  }
  return out;
}

/// One sequence step on `slot` through the accumulator; returns the bound input state.
std::vector<std::int32_t> step(sk::host_state_store& store, std::size_t slot, bool start,
                               std::int32_t add) {
  sk::request r;
  EXPECT_TRUE(store.bind(slot, start, r).ok());
  auto before = values_of(*r.find_input("INPUT_STATE"));
  auto out = accumulate(r, add);
  EXPECT_TRUE(store.update(slot, r, out).ok());
  return before;
}

// -- initialisation ----------------------------------------------------------------------------

TEST(host_state_store, start_without_initial_state_is_zeros_with_variable_dims_as_one) {
  sk::host_state_store store{config_of({int_state({-1, 3, -1})})};
  sk::request r;
  ASSERT_TRUE(store.bind(0, true, r).ok());
  ASSERT_EQ(r.inputs.size(), 1U);
  const auto& t = r.inputs[0];
  EXPECT_EQ(t.name, "INPUT_STATE");
  EXPECT_EQ(t.type, sk::data_type::int32);
  EXPECT_EQ(t.shape, (sk::shape{1, 3, 1}));
  EXPECT_EQ(values_of(t), (std::vector<std::int32_t>{0, 0, 0}));
  EXPECT_EQ(store.live_sequences(), 1U);
  EXPECT_EQ(store.bytes_in_use(), 12U);
}

TEST(host_state_store, zero_data_initial_state_uses_the_initial_dims) {
  auto s = int_state({-1});
  sk::initial_state_options init;
  init.data_type = sk::data_type::int32;
  init.dims = {4};
  init.zero_data = true;
  s.initial_state.push_back(init);
  sk::host_state_store store{config_of({s})};
  sk::request r;
  ASSERT_TRUE(store.bind(0, true, r).ok());
  EXPECT_EQ(r.inputs[0].shape, sk::shape{4});
  EXPECT_EQ(values_of(r.inputs[0]), (std::vector<std::int32_t>{0, 0, 0, 0}));
}

TEST(host_state_store, data_file_initial_state_is_the_files_bytes_for_every_sequence) {
  const model_directory dir;
  const std::array<std::int32_t, 3> initial{7, -2, 40};
  dir.write("initial_state_data", std::as_bytes(std::span{initial}));
  auto c = config_of({file_state("initial_state_data", {3})}, 2);
  c.model_directory = dir.string();
  sk::host_state_store store{c};

  EXPECT_EQ(step(store, 0, true, 1), (std::vector<std::int32_t>{7, -2, 40}));
  EXPECT_EQ(step(store, 0, false, 1), (std::vector<std::int32_t>{8, -1, 41}));
  // Another sequence, and a restart, start from the file again: the loaded bytes are not lent.
  EXPECT_EQ(step(store, 1, true, 0), (std::vector<std::int32_t>{7, -2, 40}));
  EXPECT_EQ(step(store, 0, true, 0), (std::vector<std::int32_t>{7, -2, 40}));
}

TEST(host_state_store, data_file_of_the_wrong_size_is_a_config_error_naming_the_file) {
  const model_directory dir;
  const std::array<std::byte, 5> five{};
  dir.write("short_data", five);
  auto c = config_of({renamed(int_state({2}), "OTHER"), file_state("short_data", {2})});
  c.model_directory = dir.string();
  try {
    const sk::host_state_store store{c};
    FAIL() << "expected a config_error";
  } catch (const sk::config_error& e) {
    EXPECT_EQ(e.code(), sk::config_error_code::bad_value);
    EXPECT_EQ(e.path(), "/sequence_batching/state/1/initial_state/0/data_file");
    const std::string what = e.what();
    EXPECT_NE(what.find(dir.string()), std::string::npos) << what;
    EXPECT_NE(what.find("initial_state/short_data"), std::string::npos) << what;
    EXPECT_NE(what.find("holds 5 bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("8 bytes"), std::string::npos) << what;
  }
}

TEST(host_state_store, missing_data_file_is_a_config_error_naming_the_file) {
  const model_directory dir;
  auto c = config_of({file_state("absent_data", {2})});
  c.model_directory = dir.string();
  try {
    const sk::host_state_store store{c};
    FAIL() << "expected a config_error";
  } catch (const sk::config_error& e) {
    EXPECT_EQ(e.code(), sk::config_error_code::bad_value);
    EXPECT_EQ(e.path(), "/sequence_batching/state/0/initial_state/0/data_file");
    const std::string what = e.what();
    EXPECT_NE(what.find(dir.string()), std::string::npos) << what;
    EXPECT_NE(what.find("initial_state/absent_data"), std::string::npos) << what;
    EXPECT_NE(what.find("8 bytes"), std::string::npos) << what;
  }
}

TEST(host_state_store, refuses_growable_memory) {
  auto s = int_state({-1}, true);
  s.use_growable_memory = true;
  try {
    const sk::host_state_store store{config_of({renamed(int_state({1}), "OTHER"), s})};
    FAIL() << "expected a config_error";
  } catch (const sk::config_error& e) {
    EXPECT_EQ(e.code(), sk::config_error_code::bad_value);
    EXPECT_EQ(e.path(), "/sequence_batching/state/1/use_growable_memory");
    EXPECT_NE(std::string{e.what()}.find("device state store"), std::string::npos);
  }
  static_assert(!sk::host_state_store::supports_growable_memory);
}

TEST(host_state_store, bytes_state_starts_as_empty_strings) {
  auto s = int_state({2});
  s.data_type = sk::data_type::bytes;
  sk::host_state_store store{config_of({s})};
  sk::request r;
  ASSERT_TRUE(store.bind(0, true, r).ok());
  const auto elements = sk::decode_bytes(r.inputs[0].data.bytes());
  ASSERT_TRUE(elements.has_value());
  EXPECT_EQ(*elements, (std::vector<std::string_view>{"", ""}));
}

// -- the sequence ------------------------------------------------------------------------------

TEST(host_state_store, output_state_of_one_step_is_input_state_of_the_next) {
  sk::host_state_store store{config_of({int_state({-1})})};
  std::int32_t expected = 0;
  for (std::int32_t i = 1; i <= 5; ++i) {
    sk::request r;
    r.inputs.push_back(sk::make_tensor("INPUT", sk::data_type::int32, {1}));
    ASSERT_TRUE(store.bind(0, i == 1, r).ok());
    ASSERT_EQ(r.inputs.size(), 2U);
    EXPECT_EQ(values_of(*r.find_input("INPUT_STATE")), (std::vector<std::int32_t>{expected}));
    auto out = accumulate(r, i);
    out.add_output("OUTPUT", sk::data_type::int32, {1});
    ASSERT_TRUE(store.update(0, r, out).ok());
    // The state input left the request; the undeclared output state left the response.
    ASSERT_EQ(r.inputs.size(), 1U);
    EXPECT_EQ(r.inputs[0].name, "INPUT");
    ASSERT_EQ(out.outputs.size(), 1U);
    EXPECT_EQ(out.outputs[0].name, "OUTPUT");
    expected += i;
  }
  EXPECT_EQ(expected, 15);
  EXPECT_EQ(step(store, 0, false, 0), (std::vector<std::int32_t>{15}));
}

TEST(host_state_store, variable_dims_follow_the_output_state) {
  sk::host_state_store store{config_of({int_state({-1})})};
  sk::request r;
  ASSERT_TRUE(store.bind(0, true, r).ok());
  sk::response out;
  const std::array<std::int32_t, 3> three{1, 2, 3};
  out.outputs.push_back(sk::make_tensor("OUTPUT_STATE", sk::data_type::int32, sk::shape{3},
                                        std::span<const std::int32_t>{three}));
  ASSERT_TRUE(store.update(0, r, out).ok());
  EXPECT_EQ(store.bytes_in_use(), 12U);
  sk::request next;
  ASSERT_TRUE(store.bind(0, false, next).ok());
  EXPECT_EQ(next.inputs[0].shape, sk::shape{3});
  EXPECT_EQ(values_of(next.inputs[0]), (std::vector<std::int32_t>{1, 2, 3}));
}

TEST(host_state_store, state_is_lent_without_a_copy) {
  sk::host_state_store store{config_of({int_state({2})})};
  sk::request r;
  ASSERT_TRUE(store.bind(0, true, r).ok());
  const std::byte* lent = r.inputs[0].data.data();
  sk::response nothing;
  ASSERT_TRUE(store.update(0, r, nothing).ok());
  EXPECT_TRUE(r.inputs.empty());

  // No output state: the same buffer comes back.
  sk::request again;
  ASSERT_TRUE(store.bind(0, false, again).ok());
  EXPECT_EQ(again.inputs[0].data.data(), lent);

  // An output state the client cannot see moves in: the next bind lends that very buffer.
  auto out = accumulate(again, 1);
  const std::byte* produced = out.outputs[0].data.data();
  ASSERT_TRUE(store.update(0, again, out).ok());
  sk::request third;
  ASSERT_TRUE(store.bind(0, false, third).ok());
  EXPECT_EQ(third.inputs[0].data.data(), produced);
}

TEST(host_state_store, same_buffer_state_is_updated_in_place) {
  sk::host_state_store store{config_of({int_state({2}, true)})};
  const std::byte* lent = nullptr;
  for (std::int32_t i = 1; i <= 3; ++i) {
    sk::request r;
    ASSERT_TRUE(store.bind(0, i == 1, r).ok());
    auto* t = r.find_input("INPUT_STATE");
    if (lent == nullptr) {
      lent = t->data.data();
    }
    EXPECT_EQ(t->data.data(), lent);
    for (auto& v : t->values<std::int32_t>()) {
      v += i; // the backend writes the state where it reads it, and outputs nothing
    }
    sk::response out;
    ASSERT_TRUE(store.update(0, r, out).ok());
  }
  sk::request r;
  ASSERT_TRUE(store.bind(0, false, r).ok());
  EXPECT_EQ(values_of(r.inputs[0]), (std::vector<std::int32_t>{6, 6}));
}

TEST(host_state_store, start_again_reinitialises_the_slot) {
  sk::host_state_store store{config_of({int_state({1})})};
  step(store, 0, true, 5);
  EXPECT_EQ(step(store, 0, false, 5), (std::vector<std::int32_t>{5}));
  EXPECT_EQ(step(store, 0, true, 1), (std::vector<std::int32_t>{0}));
  EXPECT_EQ(step(store, 0, false, 0), (std::vector<std::int32_t>{1}));
  EXPECT_EQ(store.live_sequences(), 1U);
  EXPECT_EQ(store.bytes_in_use(), 4U);
}

TEST(host_state_store, a_failed_response_does_not_advance_the_state) {
  sk::host_state_store store{config_of({int_state({1})})};
  step(store, 0, true, 3);
  sk::request r;
  ASSERT_TRUE(store.bind(0, false, r).ok());
  auto out = accumulate(r, 100);
  out.status = sk::internal_error("the backend failed");
  ASSERT_TRUE(store.update(0, r, out).ok());
  EXPECT_TRUE(out.outputs.empty());
  EXPECT_EQ(step(store, 0, false, 0), (std::vector<std::int32_t>{3}));
}

// -- release and memory ------------------------------------------------------------------------

TEST(host_state_store, release_frees_the_slot_and_is_idempotent) {
  sk::host_state_store store{config_of({int_state({4}), renamed(int_state({2}), "OTHER")}, 3)};
  sk::request r;
  ASSERT_TRUE(store.bind(1, true, r).ok());
  EXPECT_EQ(store.live_sequences(), 1U);
  EXPECT_EQ(store.bytes_in_use(), 24U); // lent buffers count
  sk::response out;
  ASSERT_TRUE(store.update(1, r, out).ok());
  EXPECT_EQ(store.bytes_in_use(), 24U);
  store.release(1);
  EXPECT_EQ(store.live_sequences(), 0U);
  EXPECT_EQ(store.bytes_in_use(), 0U);
  store.release(1);
  store.release(2);
  EXPECT_EQ(store.live_sequences(), 0U);
  EXPECT_EQ(store.bytes_in_use(), 0U);
}

TEST(host_state_store, memory_is_bounded_by_the_live_sequences) {
  constexpr std::size_t slots = 8;
  constexpr std::size_t state_bytes = 64 * sizeof(std::int32_t);
  sk::host_state_store store{config_of({int_state({64})}, slots)};
  std::size_t peak = 0;
  for (std::size_t sequence = 0; sequence < 1000; ++sequence) {
    const auto slot = sequence % slots;
    store.release(slot); // the previous sequence in this slot ended
    step(store, slot, true, 1);
    step(store, slot, false, 1);
    peak = std::max(peak, store.bytes_in_use());
    ASSERT_LE(store.live_sequences(), slots);
  }
  EXPECT_EQ(peak, slots * state_bytes);
  for (std::size_t slot = 0; slot < slots; ++slot) {
    store.release(slot);
  }
  EXPECT_EQ(store.bytes_in_use(), 0U);
  EXPECT_EQ(store.live_sequences(), 0U);
}

TEST(host_state_store, a_slot_released_while_lent_keeps_nothing) {
  sk::host_state_store store{config_of({int_state({1})}, 1, false, {"OUTPUT_STATE"})};
  sk::request r;
  r.requested_outputs = {"OTHER"};
  ASSERT_TRUE(store.bind(0, true, r).ok());
  store.release(0); // e.g. a cancelling shutdown
  auto out = accumulate(r, 1);
  ASSERT_TRUE(store.update(0, r, out).ok());
  EXPECT_TRUE(r.inputs.empty());
  EXPECT_TRUE(out.outputs.empty());
  EXPECT_EQ(store.live_sequences(), 0U);
  EXPECT_EQ(store.bytes_in_use(), 0U);
}

// -- what the client sees ----------------------------------------------------------------------

TEST(host_state_store, a_declared_and_requested_output_state_stays_in_the_response) {
  sk::host_state_store store{config_of({int_state({1})}, 1, false, {"OUTPUT_STATE"})};
  sk::request r;
  ASSERT_TRUE(store.bind(0, true, r).ok());
  auto out = accumulate(r, 4);
  const std::byte* produced = out.outputs[0].data.data();
  ASSERT_TRUE(store.update(0, r, out).ok());
  ASSERT_EQ(out.outputs.size(), 1U);
  EXPECT_EQ(out.outputs[0].name, "OUTPUT_STATE");
  EXPECT_EQ(out.outputs[0].data.data(), produced);
  EXPECT_EQ(values_of(out.outputs[0]), (std::vector<std::int32_t>{4}));
  // The store kept its own copy.
  out.outputs[0].values<std::int32_t>()[0] = 99;
  sk::request next;
  ASSERT_TRUE(store.bind(0, false, next).ok());
  EXPECT_NE(next.inputs[0].data.data(), produced);
  EXPECT_EQ(values_of(next.inputs[0]), (std::vector<std::int32_t>{4}));
}

TEST(host_state_store, an_undeclared_output_state_is_stripped) {
  sk::host_state_store store{config_of({int_state({1})}, 1, false, {"OUTPUT"})};
  sk::request r;
  r.requested_outputs = {"OUTPUT_STATE"};
  ASSERT_TRUE(store.bind(0, true, r).ok());
  auto out = accumulate(r, 4);
  ASSERT_TRUE(store.update(0, r, out).ok());
  EXPECT_TRUE(out.outputs.empty());
}

TEST(host_state_store, a_declared_output_state_the_client_did_not_request_is_stripped) {
  sk::host_state_store store{config_of({int_state({1})}, 1, false, {"OUTPUT", "OUTPUT_STATE"})};
  sk::request r;
  r.requested_outputs = {"OUTPUT"};
  ASSERT_TRUE(store.bind(0, true, r).ok());
  auto out = accumulate(r, 4);
  out.add_output("OUTPUT", sk::data_type::int32, {1});
  ASSERT_TRUE(store.update(0, r, out).ok());
  ASSERT_EQ(out.outputs.size(), 1U);
  EXPECT_EQ(out.outputs[0].name, "OUTPUT");
  EXPECT_EQ(step(store, 0, false, 0), (std::vector<std::int32_t>{4}));
}

TEST(host_state_store, a_request_may_not_provide_the_state_input) {
  sk::host_state_store store{config_of({int_state({1})})};
  sk::request r;
  r.inputs.push_back(sk::make_tensor("INPUT_STATE", sk::data_type::int32, {1}));
  const auto s = store.bind(0, true, r);
  EXPECT_EQ(s.code(), sk::status_code::invalid_argument);
  EXPECT_NE(s.message().find("'INPUT_STATE'"), std::string::npos);
  EXPECT_EQ(store.live_sequences(), 0U);
  EXPECT_EQ(r.inputs.size(), 1U);
}

// -- errors ------------------------------------------------------------------------------------

TEST(host_state_store, an_output_state_of_the_wrong_type_is_refused_and_the_state_kept) {
  sk::host_state_store store{config_of({int_state({1})})};
  step(store, 0, true, 2);
  sk::request r;
  ASSERT_TRUE(store.bind(0, false, r).ok());
  sk::response out;
  out.add_output("OUTPUT_STATE", sk::data_type::fp32, {1});
  const auto s = store.update(0, r, out);
  EXPECT_EQ(s.code(), sk::status_code::invalid_argument);
  EXPECT_EQ(s.message(),
            "state 'OUTPUT_STATE' of model 'M' has data type TYPE_FP32 but the config says "
            "TYPE_INT32");
  EXPECT_TRUE(r.inputs.empty());
  EXPECT_TRUE(out.outputs.empty());
  EXPECT_EQ(step(store, 0, false, 0), (std::vector<std::int32_t>{2}));
}

TEST(host_state_store, an_output_state_of_the_wrong_shape_is_refused_and_the_state_kept) {
  sk::host_state_store store{config_of({int_state({2})})};
  step(store, 0, true, 2);
  sk::request r;
  ASSERT_TRUE(store.bind(0, false, r).ok());
  sk::response out;
  out.add_output("OUTPUT_STATE", sk::data_type::int32, {3});
  const auto s = store.update(0, r, out);
  EXPECT_EQ(s.code(), sk::status_code::invalid_argument);
  EXPECT_NE(s.message().find("state 'OUTPUT_STATE' of model 'M' has shape [3]"), std::string::npos)
      << s.message();
  EXPECT_EQ(step(store, 0, false, 0), (std::vector<std::int32_t>{2, 2}));
}

TEST(host_state_store, an_output_state_of_the_wrong_byte_size_is_refused_and_the_state_kept) {
  sk::host_state_store store{config_of({int_state({2})})};
  step(store, 0, true, 2);
  sk::request r;
  ASSERT_TRUE(store.bind(0, false, r).ok());
  sk::response out;
  out.outputs.push_back(
      sk::tensor{"OUTPUT_STATE", sk::data_type::int32, {2}, sk::buffer::zeroed(12)});
  const auto s = store.update(0, r, out);
  EXPECT_EQ(s.code(), sk::status_code::invalid_argument);
  EXPECT_NE(s.message().find("holds 12 bytes"), std::string::npos) << s.message();
  EXPECT_EQ(step(store, 0, false, 0), (std::vector<std::int32_t>{2, 2}));
}

TEST(host_state_store, a_state_the_backend_took_away_is_lost_until_the_sequence_restarts) {
  sk::host_state_store store{config_of({int_state({1})})};
  step(store, 0, true, 2);
  sk::request r;
  ASSERT_TRUE(store.bind(0, false, r).ok());
  const sk::buffer taken = std::move(r.inputs[0].data);
  sk::response out;
  const auto s = store.update(0, r, out);
  EXPECT_EQ(s.code(), sk::status_code::internal);
  EXPECT_NE(s.message().find("state 'INPUT_STATE' of model 'M'"), std::string::npos);
  EXPECT_EQ(store.bytes_in_use(), 0U);

  sk::request next;
  const auto again = store.bind(0, false, next);
  EXPECT_EQ(again.code(), sk::status_code::internal);
  EXPECT_TRUE(next.inputs.empty());
  EXPECT_EQ(step(store, 0, true, 0), (std::vector<std::int32_t>{0}));
}

// -- batching ----------------------------------------------------------------------------------

TEST(host_state_store, batched_state_has_a_leading_batch_dim_of_one) {
  sk::host_state_store store{config_of({int_state({-1})}, 1, true)};
  sk::request r;
  ASSERT_TRUE(store.bind(0, true, r).ok());
  EXPECT_EQ(r.inputs[0].shape, (sk::shape{1, 1}));
  sk::response out;
  const std::array<std::int32_t, 2> two{3, 4};
  out.outputs.push_back(sk::make_tensor("OUTPUT_STATE", sk::data_type::int32, sk::shape{1, 2},
                                        std::span<const std::int32_t>{two}));
  ASSERT_TRUE(store.update(0, r, out).ok());
  sk::request next;
  ASSERT_TRUE(store.bind(0, false, next).ok());
  EXPECT_EQ(next.inputs[0].shape, (sk::shape{1, 2}));
  EXPECT_EQ(values_of(next.inputs[0]), (std::vector<std::int32_t>{3, 4}));
}

TEST(host_state_store, batched_output_state_needs_a_batch_dim_of_one) {
  sk::host_state_store store{config_of({int_state({2})}, 1, true)};
  step(store, 0, true, 1);
  sk::request r;
  ASSERT_TRUE(store.bind(0, false, r).ok());
  sk::response out;
  out.add_output("OUTPUT_STATE", sk::data_type::int32, {2, 2});
  const auto s = store.update(0, r, out);
  EXPECT_EQ(s.code(), sk::status_code::invalid_argument);
  EXPECT_NE(s.message().find("leading batch dimension of 1"), std::string::npos) << s.message();
  EXPECT_EQ(step(store, 0, false, 0), (std::vector<std::int32_t>{1, 1}));
}

TEST(host_state_store, unbatched_state_has_no_batch_dim) {
  sk::host_state_store store{config_of({int_state({2})}, 1, false)};
  sk::request r;
  ASSERT_TRUE(store.bind(0, true, r).ok());
  EXPECT_EQ(r.inputs[0].shape, sk::shape{2});
  sk::response out;
  out.add_output("OUTPUT_STATE", sk::data_type::int32, {1, 2});
  EXPECT_EQ(store.update(0, r, out).code(), sk::status_code::invalid_argument);
}

// -- threads -----------------------------------------------------------------------------------

TEST(host_state_store, distinct_slots_may_be_used_from_distinct_threads) {
  constexpr std::size_t threads = 4;
  constexpr std::size_t slots_per_thread = 2;
  constexpr int steps = 500;
  sk::host_state_store store{config_of({int_state({-1})}, threads * slots_per_thread)};
  std::atomic<int> failures{0};
  std::vector<std::thread> workers;
  for (std::size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&store, &failures, t] {
      for (int i = 0; i < steps; ++i) {
        for (std::size_t k = 0; k < slots_per_thread; ++k) {
          const auto slot = t * slots_per_thread + k;
          const bool start = i % 50 == 0;
          if (start) {
            store.release(slot);
          }
          sk::request r;
          if (!store.bind(slot, start, r).ok()) {
            ++failures;
            continue;
          }
          const auto expected = static_cast<std::int32_t>(i % 50) * static_cast<std::int32_t>(t);
          if (r.inputs[0].values<std::int32_t>()[0] != expected) {
            ++failures;
          }
          auto out = accumulate(r, static_cast<std::int32_t>(t));
          if (!store.update(slot, r, out).ok()) {
            ++failures;
          }
          (void)store.bytes_in_use();
          (void)store.live_sequences();
        }
      }
    });
  }
  for (auto& w : workers) {
    w.join();
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(store.live_sequences(), threads * slots_per_thread);
  EXPECT_EQ(store.bytes_in_use(), threads * slots_per_thread * sizeof(std::int32_t));
}

// -- preconditions -----------------------------------------------------------------------------

TEST(host_state_store_death, binding_twice_without_update_aborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  sk::host_state_store store{config_of({int_state({1})})};
  sk::request r;
  ASSERT_TRUE(store.bind(0, true, r).ok());
  EXPECT_DEATH((void)store.bind(0, false, r), "bind twice without update");
}

} // namespace host_state_store_test
