// The gpu_accumulate kernel. nvcc compiles this file alone: no servekit, fmt or Asio headers.
#include "accumulate_kernels.hpp"

#include <algorithm>
#include <cstdint>

namespace cuda_examples::kernels {

namespace {

constexpr unsigned threads_per_block = 128;

// One thread per sequence: every state is a different sequence's, so the updates never race.
__global__ void accumulate_kernel(const accumulate_step* steps, std::int32_t* sums,
                                  std::int64_t count) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) {
    return;
  }
  const accumulate_step step = steps[i];
  const std::int32_t previous = step.start != 0 ? 0 : *step.state;
  // Unsigned addition wraps; signed overflow would be undefined behaviour.
  const auto sum = static_cast<std::int32_t>(static_cast<std::uint32_t>(previous) +
                                             static_cast<std::uint32_t>(step.value));
  *step.state = sum;
  sums[i] = sum;
}

} // namespace

cudaError_t launch_accumulate(const accumulate_step* steps, std::int32_t* sums, std::int64_t count,
                              cudaStream_t stream) noexcept {
  if (count <= 0) {
    return cudaSuccess;
  }
  const auto blocks = static_cast<unsigned>((count + threads_per_block - 1) / threads_per_block);
  static_cast<void>(cudaGetLastError()); // an earlier call's error is not this launch's
  accumulate_kernel<<<blocks, threads_per_block, 0, stream>>>(steps, sums, count);
  return cudaGetLastError();
}

} // namespace cuda_examples::kernels
