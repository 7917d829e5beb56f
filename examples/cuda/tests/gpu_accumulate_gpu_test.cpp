// The gpu_accumulate backend on a GPU instance (CUDA builds; skips without a device): the state
// lives in device memory (servekit::cuda::device_state_store) and one kernel updates it in place.
#include "gpu_accumulate_test_support.hpp"
#include "gpu_test.hpp"

#include "gpu_accumulate/gpu_accumulate_backend.hpp"

#include <servekit/cuda/device.hpp>
#include <servekit/runtime/model.hpp>

#include <gtest/gtest.h>

namespace {

using accumulate_test::accumulate_model;
using servekit::instance_group_kind;

class GpuAccumulateGpu : public gpu_test::on_gpu {};

TEST_F(GpuAccumulateGpu, KeepsTheRunningSumInDeviceMemory) {
  accumulate_model<servekit::direct> m{accumulate_test::bundled(instance_group_kind::kind_gpu)};
  accumulate_test::expect_running_sums(m, 6, 5);
  m.shutdown(servekit::shutdown_mode::drain);
  EXPECT_EQ(m.states().live_sequences(), 0U) << "END freed every sequence's device state";
}

TEST_F(GpuAccumulateGpu, UnderTheOldestStrategy) {
  auto o = accumulate_test::bundled(instance_group_kind::kind_gpu);
  o.sequence_batching->strategy = servekit::sequence_strategy::oldest;
  accumulate_model<servekit::oldest> m{o};
  accumulate_test::expect_running_sums(m, 5, 4);
}

TEST_F(GpuAccumulateGpu, TwoInstancesEachWithItsOwnStream) {
  auto o = accumulate_test::bundled(instance_group_kind::kind_gpu);
  o.instance_group[0].count = 2;
  accumulate_model<servekit::direct> m{o};
  accumulate_test::expect_running_sums(m, 8, 6);
}

} // namespace
