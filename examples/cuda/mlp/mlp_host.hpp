#pragma once
/// \file
/// The MLP on the host: the float32 forward pass the CPU instances serve with, and the float64
/// reference the tests hold both paths to. CUDA-free.

#include "mlp_weights.hpp"

#include <servekit/core/assert.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace cuda_examples {

namespace detail {

/// o[0..n) += a * w[0..n). `__restrict` tells the compiler the rows do not overlap, so it
/// vectorises the loop without a run-time alias check (which -O2's cost model would not emit).
inline void axpy_row(float* __restrict o, const float* __restrict w, float a,
                     std::int64_t n) noexcept {
  for (std::int64_t j = 0; j < n; ++j) {
    o[j] += a * w[j];
  }
}

} // namespace detail

/// One dense layer in float32: out[rows][layer.out] = in[rows][layer.in] x weights + bias, then
/// ReLU if `relu`. `in` and `out` must not overlap.
///
/// Cache-friendly order: a block of rows times a tile of columns of `out` (8 x 256 floats, 8 KiB)
/// stays in L1 while the matching tile of every weight row streams past once. Each weight is
/// then read rows/8 times instead of rows times, and the inner loop is a contiguous, vectorised
/// axpy. Zero inputs (half of them after a ReLU) are skipped.
inline void dense_layer_host(const mlp_layer& layer, const float* in, std::int64_t rows, float* out,
                             bool relu) noexcept {
  constexpr std::int64_t row_block = 8;
  constexpr std::int64_t column_tile = 256;
  const std::int64_t k_count = layer.in;
  const std::int64_t n_count = layer.out;
  const float* const weights = layer.weights.data();
  const float* const bias = layer.bias.data();
  for (std::int64_t r0 = 0; r0 < rows; r0 += row_block) {
    const std::int64_t block = std::min(row_block, rows - r0);
    for (std::int64_t j0 = 0; j0 < n_count; j0 += column_tile) {
      const std::int64_t tile = std::min(column_tile, n_count - j0);
      for (std::int64_t r = 0; r < block; ++r) {
        std::copy_n(bias + j0, tile, out + (r0 + r) * n_count + j0);
      }
      for (std::int64_t k = 0; k < k_count; ++k) {
        const float* const w = weights + k * n_count + j0;
        for (std::int64_t r = 0; r < block; ++r) {
          const float a = in[(r0 + r) * k_count + k];
          if (a != 0.0F) {
            detail::axpy_row(out + (r0 + r) * n_count + j0, w, a, tile);
          }
        }
      }
      if (relu) {
        for (std::int64_t r = 0; r < block; ++r) {
          float* const o = out + (r0 + r) * n_count + j0;
          for (std::int64_t j = 0; j < tile; ++j) {
            o[j] = std::max(o[j], 0.0F);
          }
        }
      }
    }
  }
}

/// The float32 forward pass of a CPU instance. Owns its scratch activations, sized once for the
/// largest batch so that serving allocates nothing. One object per instance (not thread-safe).
class mlp_host_runner {
public:
  /// `max_rows`: the most rows forward() will be given (the model's max_batch_size, or 1).
  mlp_host_runner(mlp_weights weights, std::int64_t max_rows)
      : weights_{std::move(weights)}, max_rows_{std::max<std::int64_t>(max_rows, 1)} {
    std::int64_t widest = 0;
    for (const auto& layer : weights_.layers) {
      widest = std::max(widest, layer.out);
    }
    const auto size = static_cast<std::size_t>(widest * max_rows_);
    scratch_[0].resize(size);
    scratch_[1].resize(size);
  }

  [[nodiscard]] const mlp_weights& weights() const noexcept { return weights_; }
  [[nodiscard]] std::int64_t max_rows() const noexcept { return max_rows_; }

  /// `output[rows][output_width] = mlp(input[rows][input_width])`.
  void forward(std::span<const float> input, std::int64_t rows, std::span<float> output) {
    SERVEKIT_ASSERT(rows >= 1 && rows <= max_rows_, "mlp_host_runner: rows out of range");
    SERVEKIT_ASSERT(input.size() == static_cast<std::size_t>(rows * weights_.input_width()),
                    "mlp_host_runner: input size does not match rows x input width");
    SERVEKIT_ASSERT(output.size() == static_cast<std::size_t>(rows * weights_.output_width()),
                    "mlp_host_runner: output size does not match rows x output width");
    const float* in = input.data();
    const std::size_t last = weights_.layers.size() - 1;
    for (std::size_t l = 0; l <= last; ++l) {
      float* const out = l == last ? output.data() : scratch_[l % 2].data();
      dense_layer_host(weights_.layers[l], in, rows, out, l != last);
      in = out;
    }
  }

private:
  mlp_weights weights_;
  std::int64_t max_rows_;
  std::vector<float> scratch_[2]; ///< hidden activations, ping-pong
};

/// The float64 reference: the same weights widened to double, accumulated in double, with no
/// blocking or skipping. Tests compare both paths against it.
[[nodiscard]] inline std::vector<double>
mlp_reference(const mlp_weights& w, std::span<const float> input, std::int64_t rows) {
  std::vector<double> in(input.begin(), input.end());
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const mlp_layer& layer = w.layers[l];
    const bool relu = l + 1 < w.layers.size();
    const auto k_count = static_cast<std::size_t>(layer.in);
    const auto n_count = static_cast<std::size_t>(layer.out);
    std::vector<double> out(static_cast<std::size_t>(rows) * n_count);
    for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
      double* const o = out.data() + r * n_count;
      std::copy(layer.bias.begin(), layer.bias.end(), o);
      for (std::size_t k = 0; k < k_count; ++k) {
        const double a = in[r * k_count + k];
        for (std::size_t j = 0; j < n_count; ++j) {
          o[j] += a * static_cast<double>(layer.weights[k * n_count + j]);
        }
      }
      if (relu) {
        std::for_each(o, o + n_count, [](double& v) { v = std::max(v, 0.0); });
      }
    }
    in = std::move(out);
  }
  return in;
}

} // namespace cuda_examples
