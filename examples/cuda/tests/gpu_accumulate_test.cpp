// The gpu_accumulate backend's CPU path, in every build: the bundled config on CPU instances,
// state updated in place in host memory, under both sequence strategies.
#include "gpu_accumulate_test_support.hpp"

#include "gpu_accumulate/gpu_accumulate_backend.hpp"

#include <servekit/runtime/model.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace {

using accumulate_test::accumulate_model;
using servekit::instance_group_kind;

TEST(GpuAccumulate, CpuInstancesKeepTheRunningSumInPlace) {
  accumulate_model<servekit::direct> m{accumulate_test::bundled(instance_group_kind::kind_cpu)};
  accumulate_test::expect_running_sums(m, 6, 5);
  m.shutdown(servekit::shutdown_mode::drain);
  EXPECT_EQ(m.states().live_sequences(), 0U) << "every sequence ended with END";
}

TEST(GpuAccumulate, CpuInstancesUnderTheOldestStrategy) {
  auto o = accumulate_test::bundled(instance_group_kind::kind_cpu);
  o.sequence_batching->strategy = servekit::sequence_strategy::oldest;
  accumulate_model<servekit::oldest> m{o};
  accumulate_test::expect_running_sums(m, 5, 4);
}

TEST(GpuAccumulate, TheBundledConfigServesOnThisMachine) {
  // KIND_AUTO: the CPU here, the GPU (state in device memory) on a GPU machine.
  accumulate_model<servekit::direct> m{accumulate_test::bundled(instance_group_kind::kind_auto)};
  accumulate_test::expect_running_sums(m, 3, 4);
}

TEST(GpuAccumulate, WithoutSequenceBatchingEveryRequestFails) {
  servekit::model_options o;
  o.name = "no_sequences";
  o.max_batch_size = 4;
  servekit::model<cuda_examples::gpu_accumulate_backend, servekit::dynamic_batcher<>> m{o};
  const std::array<std::int32_t, 1> v{1};
  servekit::request r;
  r.inputs.push_back(servekit::make_tensor("INPUT", servekit::data_type::int32,
                                           servekit::shape{1, 1},
                                           std::span<const std::int32_t>{v}));
  const auto response = m.infer(std::move(r)).get();
  ASSERT_FALSE(response.ok());
  EXPECT_NE(response.status.message().find("needs sequence_batching"), std::string::npos)
      << response.status.message();
}

} // namespace
