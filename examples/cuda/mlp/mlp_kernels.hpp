#pragma once
/// \file
/// The MLP's own kernels (bias + ReLU, FP32 -> FP16), as plain host functions. The kernels live
/// in mlp_kernels.cu, the only file nvcc compiles; everything else (cuBLAS, copies, graphs,
/// servekit) is host C++ built by the host compiler. This header is the seam: it needs nothing
/// but the CUDA runtime's types, so both compilers read it.
///
/// Each function only enqueues work on `stream` and returns the launch's error (a bad
/// configuration, a missing kernel image for this GPU); errors of the work itself surface at the
/// next synchronisation. Launches are legal inside stream capture, so CUDA graphs record them.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cuda_examples::kernels {

/// In place, row-major `rows` x `cols` FP32: y[r][j] = y[r][j] + bias[j], then max(., 0) when
/// `relu`.
[[nodiscard]] cudaError_t launch_bias_activation(float* y, const float* bias, std::int64_t rows,
                                                 std::int64_t cols, bool relu,
                                                 cudaStream_t stream) noexcept;

/// The same, written as FP16 into `out_half` (rows x cols `__half`, passed untyped so that host
/// code needs no cuda_fp16.h): the next layer's input in FP16 precision.
[[nodiscard]] cudaError_t launch_bias_activation_to_half(const float* y, const float* bias,
                                                         void* out_half, std::int64_t rows,
                                                         std::int64_t cols, bool relu,
                                                         cudaStream_t stream) noexcept;

/// out_half[i] = __float2half_rn(in[i]) for `count` elements (round to nearest even).
[[nodiscard]] cudaError_t launch_float_to_half(const float* in, void* out_half, std::int64_t count,
                                               cudaStream_t stream) noexcept;

} // namespace cuda_examples::kernels
