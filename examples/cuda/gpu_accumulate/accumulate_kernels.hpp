#pragma once
/// \file
/// The gpu_accumulate kernel as a plain host function (the kernel itself is in
/// accumulate_kernels.cu, compiled by nvcc). Needs only the CUDA runtime's types.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cuda_examples::kernels {

/// One request's step of its sequence: where the sequence's state lives on the device, the
/// value to add, and whether the request starts the sequence. The same layout on both sides of
/// the host/device seam: the host fills an array of them in pinned memory and copies it over.
struct accumulate_step {
  std::int32_t* state = nullptr; ///< the sequence's INPUT_STATE, INT32 [1], device memory
  std::int32_t value = 0;        ///< INPUT
  std::int32_t start = 0;        ///< 1 on START: the previous sum counts as 0
};
static_assert(sizeof(accumulate_step) == 16, "accumulate_step is copied as raw bytes");

/// For i < count: sum = (steps[i].start ? 0 : *steps[i].state) + steps[i].value, wrapping like
/// the int32 it is; then *steps[i].state = sum and sums[i] = sum. `steps` and `sums` are device
/// memory. Enqueues on `stream` and returns the launch's error.
[[nodiscard]] cudaError_t launch_accumulate(const accumulate_step* steps, std::int32_t* sums,
                                            std::int64_t count, cudaStream_t stream) noexcept;

} // namespace cuda_examples::kernels
