// The MLP's kernels. nvcc compiles this file alone: no servekit, fmt or Asio headers here (fmt 9
// does not compile under nvcc 13 in C++20 mode), only the launch functions' own header.
#include "mlp_kernels.hpp"

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

namespace cuda_examples::kernels {

namespace {

constexpr unsigned threads_per_block = 256;
// Enough blocks to fill any current GPU several times over; a grid-stride loop covers the rest,
// so a launch never exceeds the grid limit whatever the tensor size.
constexpr std::int64_t max_blocks = 4096;

unsigned blocks_for(std::int64_t count) {
  const std::int64_t blocks = (count + threads_per_block - 1) / threads_per_block;
  return static_cast<unsigned>(std::min(blocks, max_blocks));
}

__device__ std::int64_t first_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ std::int64_t grid_stride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

__device__ float bias_activation(float y, float bias, bool relu) {
  const float v = y + bias;
  return relu ? fmaxf(v, 0.0F) : v;
}

__global__ void bias_activation_kernel(float* y, const float* bias, std::int64_t count,
                                       std::int64_t cols, bool relu) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    y[i] = bias_activation(y[i], bias[i % cols], relu);
  }
}

__global__ void bias_activation_to_half_kernel(const float* y, const float* bias, __half* out,
                                               std::int64_t count, std::int64_t cols, bool relu) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    out[i] = __float2half_rn(bias_activation(y[i], bias[i % cols], relu));
  }
}

__global__ void float_to_half_kernel(const float* in, __half* out, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    out[i] = __float2half_rn(in[i]);
  }
}

} // namespace

cudaError_t launch_bias_activation(float* y, const float* bias, std::int64_t rows,
                                   std::int64_t cols, bool relu, cudaStream_t stream) noexcept {
  const std::int64_t count = rows * cols;
  if (count <= 0) {
    return cudaSuccess; // a grid of zero blocks is an invalid launch, and there is nothing to do
  }
  static_cast<void>(cudaGetLastError()); // an earlier call's error is not this launch's
  bias_activation_kernel<<<blocks_for(count), threads_per_block, 0, stream>>>(y, bias, count, cols,
                                                                              relu);
  return cudaGetLastError();
}

cudaError_t launch_bias_activation_to_half(const float* y, const float* bias, void* out_half,
                                           std::int64_t rows, std::int64_t cols, bool relu,
                                           cudaStream_t stream) noexcept {
  const std::int64_t count = rows * cols;
  if (count <= 0) {
    return cudaSuccess;
  }
  static_cast<void>(cudaGetLastError()); // an earlier call's error is not this launch's
  bias_activation_to_half_kernel<<<blocks_for(count), threads_per_block, 0, stream>>>(
      y, bias, static_cast<__half*>(out_half), count, cols, relu);
  return cudaGetLastError();
}

cudaError_t launch_float_to_half(const float* in, void* out_half, std::int64_t count,
                                 cudaStream_t stream) noexcept {
  if (count <= 0) {
    return cudaSuccess;
  }
  static_cast<void>(cudaGetLastError()); // an earlier call's error is not this launch's
  float_to_half_kernel<<<blocks_for(count), threads_per_block, 0, stream>>>(
      in, static_cast<__half*>(out_half), count);
  return cudaGetLastError();
}

} // namespace cuda_examples::kernels
