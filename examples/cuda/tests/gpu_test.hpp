#pragma once
// The fixture of every GPU test: its cases skip, with a message ctest reports, on a machine
// without a visible CUDA device (CI builds and runs everything else there).

#include <servekit/cuda/device.hpp>

#include <gtest/gtest.h>

namespace gpu_test {

class on_gpu : public ::testing::Test {
protected:
  void SetUp() override {
    if (servekit::cuda::device_count() == 0) {
      GTEST_SKIP() << "no CUDA device visible (servekit::cuda::device_count() == 0): GPU test "
                      "skipped";
    }
  }
};

} // namespace gpu_test
