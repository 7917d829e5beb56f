#include "state/state_test_support.hpp"

#include <servekit/cuda/device.hpp>
#include <servekit/cuda/device_state_store.hpp>
#include <servekit/cuda/memory.hpp>

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace device_state_store_test {

namespace sk = servekit;
namespace skc = servekit::cuda;
using state_test::file_state;
using state_test::int_state;
using state_test::model_directory;

static_assert(sk::state_store<skc::device_state_store>);
static_assert(std::same_as<skc::device_state_store::policy_role, sk::state_store_role>);
static_assert(!skc::device_state_store::supports_growable_memory);

constexpr sk::memory_location cpu = sk::memory_location::cpu();
constexpr sk::memory_location gpu0 = sk::memory_location::gpu(0);

/// `slot_locations` empty: every slot on the CPU.
sk::state_store_config config_of(std::vector<sk::state_options> states,
                                 std::vector<sk::memory_location> slot_locations = {},
                                 std::size_t slots = 1, std::vector<std::string> outputs = {}) {
  sk::state_store_config c;
  c.model_name = "M";
  c.states = std::move(states);
  c.slots = slot_locations.empty() ? slots : slot_locations.size();
  c.slot_locations = std::move(slot_locations);
  c.model_outputs = std::move(outputs);
  return c;
}

/// The INT32 values of `t`, wherever they live.
std::vector<std::int32_t> values_of(const sk::tensor& t) {
  std::vector<std::int32_t> v(t.data.size() / sizeof(std::int32_t));
  if (t.data.location().host_accessible()) {
    const auto host = t.values<std::int32_t>();
    v.assign(host.begin(), host.end());
  } else if (!v.empty()) {
    // Device to pageable host memory: returns once the copy is complete.
    EXPECT_EQ(cudaMemcpy(v.data(), t.data.data(), t.data.size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
  }
  return v;
}

/// An INT32 tensor in device memory on GPU 0, as a GPU backend would produce it.
sk::tensor device_tensor(std::string name, sk::shape s, const std::vector<std::int32_t>& values) {
  auto data = skc::allocate_device(0, values.size() * sizeof(std::int32_t));
  EXPECT_EQ(cudaMemcpy(data.data(), values.data(), data.size(), cudaMemcpyHostToDevice),
            cudaSuccess);
  // From pageable memory cudaMemcpy may return before the DMA lands: wait, as a backend waits
  // for its stream before execute returns.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return sk::tensor{std::move(name), sk::data_type::int32, s, std::move(data)};
}

/// Plays an accumulator backend: OUTPUT_STATE = INPUT_STATE + add, same shape, on the host or
/// on GPU 0.
sk::response accumulate(const sk::request& r, std::int32_t add, bool on_gpu = false) {
  const auto* in = r.find_input("INPUT_STATE");
  EXPECT_NE(in, nullptr);
  auto next = values_of(*in);
  for (auto& v : next) {
    v += add;
  }
  sk::response out;
  if (on_gpu) {
    out.outputs.push_back(device_tensor("OUTPUT_STATE", in->shape, next));
  } else {
    out.outputs.push_back(sk::make_tensor("OUTPUT_STATE", sk::data_type::int32, in->shape,
                                          std::span<const std::int32_t>{next}));
  }
  return out;
}

/// One sequence step on `slot` through the accumulator; returns the bound input state.
std::vector<std::int32_t> step(skc::device_state_store& store, std::size_t slot, bool start,
                               std::int32_t add, bool on_gpu = false) {
  sk::request r;
  EXPECT_TRUE(store.bind(slot, start, r).ok());
  auto before = values_of(*r.find_input("INPUT_STATE"));
  auto out = accumulate(r, add, on_gpu);
  EXPECT_TRUE(store.update(slot, r, out).ok());
  return before;
}

// -- CPU slots: served as host_state_store serves them, no CUDA needed ---------------------------

TEST(device_state_store, cpu_slots_start_from_zeros_in_host_memory) {
  skc::device_state_store store{config_of({int_state({-1, 3})})};
  sk::request r;
  ASSERT_TRUE(store.bind(0, true, r).ok());
  ASSERT_EQ(r.inputs.size(), 1U);
  EXPECT_EQ(r.inputs[0].shape, (sk::shape{1, 3}));
  EXPECT_EQ(r.inputs[0].data.location(), cpu);
  EXPECT_EQ(values_of(r.inputs[0]), (std::vector<std::int32_t>{0, 0, 0}));
  EXPECT_EQ(store.live_sequences(), 1U);
  EXPECT_EQ(store.bytes_in_use(), 12U);
}

TEST(device_state_store, cpu_slots_start_from_the_data_file) {
  const model_directory dir;
  const std::array<std::int32_t, 3> initial{7, -2, 40};
  dir.write("initial_state_data", std::as_bytes(std::span{initial}));
  auto c = config_of({file_state("initial_state_data", {3})}, {cpu, cpu});
  c.model_directory = dir.string();
  skc::device_state_store store{c};
  EXPECT_EQ(step(store, 0, true, 1), (std::vector<std::int32_t>{7, -2, 40}));
  EXPECT_EQ(step(store, 0, false, 1), (std::vector<std::int32_t>{8, -1, 41}));
  EXPECT_EQ(step(store, 1, true, 0), (std::vector<std::int32_t>{7, -2, 40}));
}

TEST(device_state_store, cpu_slots_advance_with_the_output_state) {
  skc::device_state_store store{config_of({int_state({1})}, {cpu})};
  std::int32_t expected = 0;
  for (std::int32_t i = 1; i <= 5; ++i) {
    EXPECT_EQ(step(store, 0, i == 1, i), (std::vector<std::int32_t>{expected}));
    expected += i;
  }
  EXPECT_EQ(step(store, 0, false, 0), (std::vector<std::int32_t>{15}));
  EXPECT_EQ(step(store, 0, true, 0), (std::vector<std::int32_t>{0}));
}

TEST(device_state_store, cpu_slots_release_and_count) {
  skc::device_state_store store{config_of({int_state({4})}, {}, 3)};
  step(store, 0, true, 1);
  step(store, 2, true, 1);
  EXPECT_EQ(store.live_sequences(), 2U);
  EXPECT_EQ(store.bytes_in_use(), 32U);
  store.release(2);
  store.release(2);
  store.release(1);
  EXPECT_EQ(store.live_sequences(), 1U);
  EXPECT_EQ(store.bytes_in_use(), 16U);
  store.release(0);
  EXPECT_EQ(store.live_sequences(), 0U);
  EXPECT_EQ(store.bytes_in_use(), 0U);
}

TEST(device_state_store, cpu_slots_keep_type_string_state) {
  auto s = int_state({2});
  s.data_type = sk::data_type::bytes;
  skc::device_state_store store{config_of({s}, {cpu})};
  sk::request r;
  ASSERT_TRUE(store.bind(0, true, r).ok());
  const auto elements = sk::decode_bytes(r.inputs[0].data.bytes());
  ASSERT_TRUE(elements.has_value());
  EXPECT_EQ(*elements, (std::vector<std::string_view>{"", ""}));
}

TEST(device_state_store, refuses_growable_memory) {
  auto s = int_state({-1}, true);
  s.use_growable_memory = true;
  try {
    const skc::device_state_store store{config_of({int_state({1}), s})};
    FAIL() << "expected a config_error";
  } catch (const sk::config_error& e) {
    EXPECT_EQ(e.code(), sk::config_error_code::bad_value);
    EXPECT_EQ(e.path(), "/sequence_batching/state/1/use_growable_memory");
    EXPECT_NE(std::string{e.what()}.find("device_state_store does not offer"), std::string::npos)
        << e.what();
  }
}

TEST(device_state_store, refuses_type_string_state_with_a_gpu_slot) {
  auto s = int_state({2});
  s.data_type = sk::data_type::bytes;
  try {
    const skc::device_state_store store{config_of({int_state({1}), s}, {cpu, gpu0})};
    FAIL() << "expected a config_error";
  } catch (const sk::config_error& e) {
    EXPECT_EQ(e.code(), sk::config_error_code::bad_value);
    EXPECT_EQ(e.path(), "/sequence_batching/state/1/data_type");
    EXPECT_NE(std::string{e.what()}.find("TYPE_STRING, which cannot live in GPU memory"),
              std::string::npos)
        << e.what();
  }
}

TEST(device_state_store, a_missing_data_file_is_the_host_stores_config_error) {
  const model_directory dir;
  auto c = config_of({file_state("absent_data", {2})}, {gpu0});
  c.model_directory = dir.string();
  try {
    const skc::device_state_store store{c};
    FAIL() << "expected a config_error";
  } catch (const sk::config_error& e) {
    EXPECT_EQ(e.path(), "/sequence_batching/state/0/initial_state/0/data_file");
    EXPECT_NE(std::string{e.what()}.find("initial_state/absent_data"), std::string::npos);
  }
}

TEST(device_state_store, gpu_slots_need_no_device_until_their_first_bind) {
  // Construction makes pools but allocates nothing, so it works on any machine; the CPU slot
  // beside the GPU one is served at once.
  skc::device_state_store store{config_of({int_state({2})}, {cpu, gpu0})};
  EXPECT_EQ(store.device_pool_counters(0), skc::pool_counters{});
  EXPECT_EQ(step(store, 0, true, 3), (std::vector<std::int32_t>{0, 0}));
  EXPECT_EQ(step(store, 0, false, 0), (std::vector<std::int32_t>{3, 3}));
  EXPECT_EQ(store.live_sequences(), 1U);
}

TEST(device_state_store, without_a_device_a_gpu_slot_fails_its_start_and_loses_the_state) {
  if (skc::device_count() != 0) {
    GTEST_SKIP() << "a CUDA device is present: this case is about machines without one";
  }
  skc::device_state_store store{config_of({int_state({2})}, {gpu0})};
  sk::request r;
  const auto s = store.bind(0, true, r);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("state 'INPUT_STATE' of model 'M' could not be initialised on GPU 0: "
                             "CUDA call '"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(r.inputs.empty());
  sk::response nothing;
  EXPECT_TRUE(store.update(0, r, nothing).ok());

  sk::request next;
  EXPECT_EQ(store.bind(0, false, next).code(), sk::status_code::internal);
  EXPECT_EQ(store.bytes_in_use(), 0U);
  store.release(0);
  EXPECT_EQ(store.live_sequences(), 0U);
}

// -- GPU slots: state in device memory ----------------------------------------------------------

class device_state_store_gpu : public ::testing::Test {
protected:
  void SetUp() override {
    if (skc::device_count() == 0) {
      GTEST_SKIP() << "no CUDA device: GPU state store cases need one";
    }
  }
};

TEST_F(device_state_store_gpu, state_starts_as_zeros_in_device_memory) {
  skc::device_state_store store{config_of({int_state({-1, 3})}, {gpu0})};
  sk::request r;
  ASSERT_TRUE(store.bind(0, true, r).ok());
  ASSERT_EQ(r.inputs.size(), 1U);
  const auto& t = r.inputs[0];
  EXPECT_EQ(t.name, "INPUT_STATE");
  EXPECT_EQ(t.type, sk::data_type::int32);
  EXPECT_EQ(t.shape, (sk::shape{1, 3}));
  EXPECT_EQ(t.data.location(), gpu0);
  EXPECT_EQ(values_of(t), (std::vector<std::int32_t>{0, 0, 0}));
  EXPECT_EQ(store.live_sequences(), 1U);
  EXPECT_EQ(store.bytes_in_use(), 12U);
}

TEST_F(device_state_store_gpu, state_starts_from_the_uploaded_data_file) {
  const model_directory dir;
  const std::array<std::int32_t, 3> initial{7, -2, 40};
  dir.write("initial_state_data", std::as_bytes(std::span{initial}));
  auto c = config_of({file_state("initial_state_data", {3})}, {gpu0, gpu0});
  c.model_directory = dir.string();
  skc::device_state_store store{c};
  EXPECT_EQ(step(store, 0, true, 1, true), (std::vector<std::int32_t>{7, -2, 40}));
  EXPECT_EQ(step(store, 0, false, 1, true), (std::vector<std::int32_t>{8, -1, 41}));
  // Another sequence, and a restart, start from the file again.
  EXPECT_EQ(step(store, 1, true, 0, true), (std::vector<std::int32_t>{7, -2, 40}));
  EXPECT_EQ(step(store, 0, true, 0, true), (std::vector<std::int32_t>{7, -2, 40}));
}

TEST_F(device_state_store_gpu, a_hidden_device_output_state_is_kept_without_a_copy) {
  skc::device_state_store store{config_of({int_state({2})}, {gpu0})};
  sk::request r;
  ASSERT_TRUE(store.bind(0, true, r).ok());
  const std::byte* lent = r.inputs[0].data.data();
  sk::response nothing;
  ASSERT_TRUE(store.update(0, r, nothing).ok());
  EXPECT_TRUE(r.inputs.empty());

  // No output state: the same device buffer comes back.
  sk::request again;
  ASSERT_TRUE(store.bind(0, false, again).ok());
  EXPECT_EQ(again.inputs[0].data.data(), lent);

  // An output state on the slot's GPU that the client cannot see moves in as it is.
  auto out = accumulate(again, 5, true);
  const std::byte* produced = out.outputs[0].data.data();
  ASSERT_TRUE(store.update(0, again, out).ok());
  EXPECT_TRUE(out.outputs.empty());
  sk::request third;
  ASSERT_TRUE(store.bind(0, false, third).ok());
  EXPECT_EQ(third.inputs[0].data.data(), produced);
  EXPECT_EQ(third.inputs[0].data.location(), gpu0);
  EXPECT_EQ(values_of(third.inputs[0]), (std::vector<std::int32_t>{5, 5}));
}

TEST_F(device_state_store_gpu, a_host_output_state_is_uploaded) {
  skc::device_state_store store{config_of({int_state({-1})}, {gpu0})};
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
  EXPECT_EQ(next.inputs[0].data.location(), gpu0);
  EXPECT_EQ(values_of(next.inputs[0]), (std::vector<std::int32_t>{1, 2, 3}));
}

TEST_F(device_state_store_gpu, a_visible_device_output_state_is_copied_and_stays) {
  skc::device_state_store store{config_of({int_state({1})}, {gpu0}, 1, {"OUTPUT_STATE"})};
  sk::request r;
  ASSERT_TRUE(store.bind(0, true, r).ok());
  auto out = accumulate(r, 4, true);
  const std::byte* produced = out.outputs[0].data.data();
  ASSERT_TRUE(store.update(0, r, out).ok());
  ASSERT_EQ(out.outputs.size(), 1U);
  EXPECT_EQ(out.outputs[0].data.data(), produced);
  EXPECT_EQ(values_of(out.outputs[0]), (std::vector<std::int32_t>{4}));
  sk::request next;
  ASSERT_TRUE(store.bind(0, false, next).ok());
  EXPECT_NE(next.inputs[0].data.data(), produced);
  EXPECT_EQ(values_of(next.inputs[0]), (std::vector<std::int32_t>{4}));
}

TEST_F(device_state_store_gpu, same_buffer_state_is_updated_in_place_on_the_device) {
  skc::device_state_store store{config_of({int_state({2}, true)}, {gpu0})};
  for (std::int32_t i = 1; i <= 3; ++i) {
    sk::request r;
    ASSERT_TRUE(store.bind(0, i == 1, r).ok());
    auto* t = r.find_input("INPUT_STATE");
    auto values = values_of(*t);
    for (auto& v : values) {
      v += i;
    }
    ASSERT_EQ(cudaMemcpy(t->data.data(), values.data(), t->data.size(), cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    sk::response out;
    ASSERT_TRUE(store.update(0, r, out).ok());
  }
  EXPECT_EQ(step(store, 0, false, 0, true), (std::vector<std::int32_t>{6, 6}));
}

TEST_F(device_state_store_gpu, a_refused_output_state_keeps_the_device_state) {
  skc::device_state_store store{config_of({int_state({1})}, {gpu0})};
  step(store, 0, true, 2, true);
  sk::request r;
  ASSERT_TRUE(store.bind(0, false, r).ok());
  sk::response out;
  out.outputs.push_back(device_tensor("OUTPUT_STATE", {2}, {1, 1}));
  const auto s = store.update(0, r, out);
  EXPECT_EQ(s.code(), sk::status_code::invalid_argument);
  EXPECT_NE(s.message().find("state 'OUTPUT_STATE' of model 'M' has shape [2]"), std::string::npos)
      << s.message();
  EXPECT_TRUE(out.outputs.empty());
  EXPECT_EQ(step(store, 0, false, 0, true), (std::vector<std::int32_t>{2}));
}

TEST_F(device_state_store_gpu, release_frees_and_the_pool_reuses_the_memory) {
  constexpr std::size_t slots = 4;
  skc::device_state_store store{
      config_of({int_state({64})}, std::vector<sk::memory_location>(slots, gpu0))};
  // Sequences come and go; each step uploads a host output state into a pool buffer.
  const auto sequences = [&] {
    for (std::size_t sequence = 0; sequence < 8 * slots; ++sequence) {
      const auto slot = sequence % slots;
      store.release(slot);
      step(store, slot, true, 1);
      step(store, slot, false, 1);
    }
  };
  sequences();
  EXPECT_EQ(store.live_sequences(), slots);
  EXPECT_EQ(store.bytes_in_use(), slots * 64 * sizeof(std::int32_t));
  const auto warm = store.device_pool_counters(0);
  EXPECT_GT(warm.allocations, 0U);

  // After warm-up every state comes from, and goes back to, the pool.
  sequences();
  const auto steady = store.device_pool_counters(0);
  EXPECT_EQ(steady.allocations, warm.allocations);
  EXPECT_GT(steady.reuses, warm.reuses);
  EXPECT_EQ(steady.outstanding, slots);

  for (std::size_t slot = 0; slot < slots; ++slot) {
    store.release(slot);
    store.release(slot);
  }
  EXPECT_EQ(store.live_sequences(), 0U);
  EXPECT_EQ(store.bytes_in_use(), 0U);
  EXPECT_EQ(store.device_pool_counters(0).outstanding, 0U);
}

TEST_F(device_state_store_gpu, counters_cover_cpu_and_gpu_slots) {
  skc::device_state_store store{config_of({int_state({4})}, {cpu, gpu0})};
  step(store, 0, true, 1);
  step(store, 1, true, 1, true);
  EXPECT_EQ(store.live_sequences(), 2U);
  EXPECT_EQ(store.bytes_in_use(), 32U);
  store.release(1);
  EXPECT_EQ(store.live_sequences(), 1U);
  EXPECT_EQ(store.bytes_in_use(), 16U);
  store.release(0);
  EXPECT_EQ(store.live_sequences(), 0U);
  EXPECT_EQ(store.bytes_in_use(), 0U);
}

TEST_F(device_state_store_gpu, a_state_the_backend_took_away_is_lost_until_the_sequence_restarts) {
  skc::device_state_store store{config_of({int_state({1})}, {gpu0})};
  step(store, 0, true, 2, true);
  sk::request r;
  ASSERT_TRUE(store.bind(0, false, r).ok());
  const sk::buffer taken = std::move(r.inputs[0].data);
  sk::response out;
  const auto s = store.update(0, r, out);
  EXPECT_EQ(s.code(), sk::status_code::internal);
  EXPECT_EQ(store.bytes_in_use(), 0U);
  sk::request next;
  EXPECT_EQ(store.bind(0, false, next).code(), sk::status_code::internal);
  EXPECT_EQ(step(store, 0, true, 0, true), (std::vector<std::int32_t>{0}));
}

} // namespace device_state_store_test
