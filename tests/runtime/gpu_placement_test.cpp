// Instance placement on GPUs (Triton's KIND_AUTO / KIND_GPU rules), as a pure function and
// through model<>, with backends that declare how many GPUs they see; where sequence slots'
// state lives; padding reported by a backend reaching the statistics. No GPU is needed: the
// placement is what servekit decides, and the backends here only record what they were told.
#include <servekit/runtime/instance_group.hpp>
#include <servekit/runtime/model.hpp>
#include <servekit/state/host_state_store.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace gpu_placement_test {

using servekit::config_error;
using servekit::data_type;
using servekit::instance_group_kind;
using servekit::instance_group_options;
using servekit::instance_kind;
using servekit::instance_placement;
using servekit::memory_location;
using servekit::place_instances;
using servekit::shape;

/// The config path of the config_error `f` throws, or "" if it throws none.
template <class F>
std::string error_path(F&& f) {
  try {
    f();
  } catch (const config_error& e) {
    return e.path();
  }
  return "";
}

std::vector<std::string> describe(const std::vector<instance_placement>& placed) {
  std::vector<std::string> out;
  for (const auto& p : placed) {
    out.push_back(p.name +
                  (p.kind == instance_kind::gpu ? "@gpu" + std::to_string(p.device_id) : "@cpu"));
  }
  return out;
}

instance_group_options group(instance_group_kind kind, std::int32_t count,
                             std::vector<std::int32_t> gpus = {}) {
  return {.name = "", .kind = kind, .count = count, .gpus = std::move(gpus), .rate_limiter = {}};
}

// -- place_instances -----------------------------------------------------------------------------

TEST(place_instances, backend_without_device_count_trusts_the_config) {
  // KIND_AUTO without gpus is the CPU; listed GPUs go unchecked; KIND_GPU must list them.
  EXPECT_EQ(describe(place_instances("m", {group(instance_group_kind::kind_auto, 2)}, 1)),
            (std::vector<std::string>{"m_0_0@cpu", "m_0_1@cpu"}));
  EXPECT_EQ(describe(place_instances("m", {group(instance_group_kind::kind_auto, 1, {7})}, 1)),
            (std::vector<std::string>{"m_0_0@gpu7"}));
  EXPECT_EQ(
      error_path([] { (void)place_instances("m", {group(instance_group_kind::kind_gpu, 1)}, 1); }),
      "/instance_group/0/gpus");
  EXPECT_EQ(describe(place_instances("m", {}, 2)),
            (std::vector<std::string>{"m_0_0@cpu", "m_0_1@cpu"}));
}

TEST(place_instances, kind_auto_takes_every_visible_gpu_or_the_cpu) {
  EXPECT_EQ(describe(place_instances("m", {group(instance_group_kind::kind_auto, 2)}, 1, 2)),
            (std::vector<std::string>{"m_0_0@gpu0", "m_0_1@gpu0", "m_0_2@gpu1", "m_0_3@gpu1"}));
  EXPECT_EQ(describe(place_instances("m", {group(instance_group_kind::kind_auto, 2)}, 1, 0)),
            (std::vector<std::string>{"m_0_0@cpu", "m_0_1@cpu"}));
}

TEST(place_instances, kind_gpu_without_gpus_means_every_visible_gpu) {
  EXPECT_EQ(describe(place_instances("m", {group(instance_group_kind::kind_gpu, 1)}, 1, 3)),
            (std::vector<std::string>{"m_0_0@gpu0", "m_0_1@gpu1", "m_0_2@gpu2"}));
  // No GPU at all: Triton refuses to load a KIND_GPU model, and so do we.
  EXPECT_EQ(error_path([] {
              (void)place_instances("m", {group(instance_group_kind::kind_gpu, 1)}, 1, 0);
            }),
            "/instance_group/0/kind");
}

TEST(place_instances, listed_gpus_must_be_visible) {
  EXPECT_EQ(describe(place_instances("m", {group(instance_group_kind::kind_gpu, 2, {1})}, 1, 2)),
            (std::vector<std::string>{"m_0_0@gpu1", "m_0_1@gpu1"}));
  try {
    (void)place_instances("m", {group(instance_group_kind::kind_gpu, 1, {0, 3})}, 1, 2);
    FAIL() << "GPU 3 of 2 was accepted";
  } catch (const config_error& e) {
    EXPECT_EQ(e.path(), "/instance_group/0/gpus/1");
    EXPECT_NE(std::string{e.what()}.find("lists GPU 3, but 2 GPUs are visible"), std::string::npos)
        << e.what();
  }
}

TEST(place_instances, cpu_groups_stay_on_the_cpu_beside_gpu_groups) {
  const auto placed = place_instances(
      "m", {group(instance_group_kind::kind_gpu, 1), group(instance_group_kind::kind_cpu, 1)}, 1,
      1);
  EXPECT_EQ(describe(placed), (std::vector<std::string>{"m_0_0@gpu0", "m_1_0@cpu"}));
  EXPECT_EQ(error_path([] {
              (void)place_instances("m", {group(instance_group_kind::kind_cpu, 1, {0})}, 1, 1);
            }),
            "/instance_group/0/gpus");
}

TEST(place_instances, without_groups_the_default_count_runs_on_every_visible_gpu) {
  EXPECT_EQ(describe(place_instances("m", {}, 2, 2)),
            (std::vector<std::string>{"m_0_0@gpu0", "m_0_1@gpu0", "m_0_2@gpu1", "m_0_3@gpu1"}));
}

// -- through model<> -----------------------------------------------------------------------------

/// How many GPUs the test backends claim to see; set by each test before building its model.
std::atomic<int> claimed_gpus{0}; // NOLINT: test-only global

/// What the instances were told, in construction order.
struct told {
  std::mutex mutex;
  std::vector<std::string> contexts;
};
told seen; // NOLINT: test-only global

/// Declares device_count() and records its instance_context; reports one padding row per
/// execution, as a backend replaying a CUDA graph of the next larger size would.
struct gpu_aware_backend {
  static constexpr std::int32_t max_batch_size = 4;
  static constexpr servekit::tensor_declaration inputs[] = {{"INPUT", data_type::int32, {1}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"OUTPUT", data_type::int32, {1}}};

  static int device_count() noexcept { return claimed_gpus.load(); }

  explicit gpu_aware_backend(const servekit::instance_context& c) {
    const std::lock_guard lock{seen.mutex};
    seen.contexts.push_back(
        std::string{c.instance_name} +
        (c.kind == instance_kind::gpu ? "@gpu" + std::to_string(c.device_id) : "@cpu"));
  }

  void execute(servekit::batch& b) {
    b.record_padding(1);
    for (std::size_t i = 0; i < b.size(); ++i) {
      const auto& in = *b.request(i).find_input("INPUT");
      b.response(i).add_output("OUTPUT", data_type::int32, in.shape).values<std::int32_t>()[0] =
          in.values<std::int32_t>()[0];
    }
  }
};

static_assert(servekit::backend_traits<gpu_aware_backend>::runs_on_gpus);

struct cpu_only_backend {
  explicit cpu_only_backend(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};
static_assert(!servekit::backend_traits<cpu_only_backend>::runs_on_gpus);

class gpu_model_test : public ::testing::Test {
protected:
  void SetUp() override {
    const std::lock_guard lock{seen.mutex};
    seen.contexts.clear();
  }
  static std::vector<std::string> contexts() {
    const std::lock_guard lock{seen.mutex};
    return seen.contexts;
  }
};

servekit::request one(std::int32_t value) {
  servekit::request r;
  const std::array<std::int32_t, 1> v{value};
  r.inputs.push_back(servekit::make_tensor("INPUT", data_type::int32, shape{1, 1},
                                           std::span<const std::int32_t>{v}));
  return r;
}

TEST(backend_traits, a_backend_without_device_count_runs_on_the_cpu_only) {
  EXPECT_EQ(servekit::backend_traits<cpu_only_backend>::device_count(), 0);
  claimed_gpus = 3;
  EXPECT_EQ(servekit::backend_traits<gpu_aware_backend>::device_count(), 3);
}

TEST_F(gpu_model_test, kind_auto_instances_learn_their_gpu) {
  claimed_gpus = 2;
  servekit::model_options o;
  o.name = "g";
  o.instance_group = {group(instance_group_kind::kind_auto, 1)};
  servekit::model<gpu_aware_backend> m{o};
  EXPECT_EQ(contexts(), (std::vector<std::string>{"g_0_0@gpu0", "g_0_1@gpu1"}));
  EXPECT_EQ(m.instance_count(), 2U);
}

TEST_F(gpu_model_test, kind_auto_runs_on_the_cpu_without_gpus) {
  claimed_gpus = 0;
  servekit::model_options o;
  o.name = "g";
  o.instance_group = {group(instance_group_kind::kind_auto, 2)};
  servekit::model<gpu_aware_backend> m{o};
  EXPECT_EQ(contexts(), (std::vector<std::string>{"g_0_0@cpu", "g_0_1@cpu"}));
  const auto r = m.infer(one(5)).get();
  ASSERT_TRUE(r.ok()) << r.status.message();
}

TEST_F(gpu_model_test, kind_gpu_without_gpus_fails_the_load) {
  claimed_gpus = 0;
  servekit::model_options o;
  o.name = "g";
  o.instance_group = {group(instance_group_kind::kind_gpu, 1)};
  EXPECT_EQ(error_path([&] { servekit::model<gpu_aware_backend> m{o}; }), "/instance_group/0/kind");
  EXPECT_TRUE(contexts().empty());
}

TEST_F(gpu_model_test, padding_reported_by_the_backend_reaches_the_statistics) {
  claimed_gpus = 0;
  servekit::model_options o;
  o.name = "g";
  servekit::model<gpu_aware_backend, servekit::dynamic_batcher<>> m{o};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(m.infer(one(i)).get().ok());
  }
  const auto s = m.statistics();
  EXPECT_EQ(s.padded_executions, s.execution_count);
  EXPECT_EQ(s.padding_elements, s.execution_count);
  EXPECT_EQ(s.inference_count, 3U); // padding is not inference
}

// -- where sequence state lives ------------------------------------------------------------------

/// A host store that records the slot locations it was built with.
std::vector<memory_location> recorded_slots; // NOLINT: test-only global

struct recording_store : servekit::host_state_store {
  explicit recording_store(const servekit::state_store_config& c) : servekit::host_state_store{c} {
    recorded_slots = c.slot_locations;
  }
};
static_assert(servekit::state_store<recording_store>);

/// Sums INPUT into the implicit state (the accumulate contract).
struct gpu_aware_accumulator {
  static constexpr std::int32_t max_batch_size = 2;
  static int device_count() noexcept { return claimed_gpus.load(); }
  explicit gpu_aware_accumulator(const servekit::instance_context&) {}
  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      if (!b.sequence(i).ready) {
        continue;
      }
      const auto& r = b.request(i);
      const auto& state = *r.find_input("INPUT_STATE");
      const auto sum =
          state.values<std::int32_t>()[0] + r.find_input("INPUT")->values<std::int32_t>()[0];
      b.response(i).add_output("OUTPUT", data_type::int32, shape{1, 1}).values<std::int32_t>()[0] =
          sum;
      b.response(i)
          .add_output("OUTPUT_STATE", data_type::int32, state.shape)
          .values<std::int32_t>()[0] = sum;
    }
  }
};

TEST(sequence_state_placement, each_slot_is_where_its_instance_runs) {
  claimed_gpus = 2;
  servekit::model_options o;
  o.name = "acc";
  o.input = {{"INPUT", data_type::int32, shape{1}}};
  o.output = {{"OUTPUT", data_type::int32, shape{1}}};
  servekit::sequence_batching_options sb;
  sb.state.push_back({"INPUT_STATE", "OUTPUT_STATE", data_type::int32, shape{1}, {}, false, false});
  o.sequence_batching = sb;
  o.instance_group = {group(instance_group_kind::kind_gpu, 1),
                      group(instance_group_kind::kind_cpu, 1)};
  servekit::model<gpu_aware_accumulator,
                  servekit::sequence_batcher<servekit::direct, recording_store>>
      m{o};
  // Three instances (gpu0, gpu1, cpu), max_batch_size 2 slots each, in instance order.
  const std::vector<memory_location> expected = {memory_location::gpu(0), memory_location::gpu(0),
                                                 memory_location::gpu(1), memory_location::gpu(1),
                                                 memory_location::cpu(),  memory_location::cpu()};
  EXPECT_EQ(recorded_slots, expected);
}

} // namespace gpu_placement_test
