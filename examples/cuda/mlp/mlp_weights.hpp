#pragma once
/// \file
/// Deterministic MLP weights: the same seed gives the same float values on every machine, in
/// every instance, for the CPU path, the GPU path and the float64 reference alike. Each value is
/// a pure function of (seed, layer, tensor, index), so no generator state is shared between
/// layers or instances, and the order of generation does not matter.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace cuda_examples {

/// One dense layer: `out = in x weights + bias`, with `weights` row-major [in][out]. That layout
/// serves both paths without a transpose: the CPU loop streams whole rows of it, and cuBLAS
/// (column-major) reads it as the transposed matrix it needs (see mlp_device.hpp).
struct mlp_layer {
  std::int64_t in = 0;
  std::int64_t out = 0;
  std::vector<float> weights; ///< in * out values, row k holds the weights from input k
  std::vector<float> bias;    ///< out values
};

/// All layers, input first.
struct mlp_weights {
  std::vector<mlp_layer> layers;

  [[nodiscard]] std::int64_t input_width() const noexcept { return layers.front().in; }
  [[nodiscard]] std::int64_t output_width() const noexcept { return layers.back().out; }
};

namespace detail {

/// Steele, Lea and Flood's SplitMix64 finaliser: a bijective 64-bit mix, good enough to turn
/// consecutive counters into independent-looking values.
[[nodiscard]] constexpr std::uint64_t splitmix64(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30U)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27U)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31U);
}

/// Which tensor of a layer a value belongs to.
enum class mlp_tensor : std::uint64_t { weights = 0, bias = 1 };

/// Uniform in [-bound, bound), from the top 53 bits of the hash (exact in a double).
[[nodiscard]] inline float init_value(std::uint64_t seed, std::size_t layer, mlp_tensor which,
                                      std::uint64_t index, double bound) noexcept {
  std::uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ (std::uint64_t{layer} * 2U + static_cast<std::uint64_t>(which)));
  h = splitmix64(h ^ index);
  const double unit = static_cast<double>(h >> 11U) * 0x1.0p-53; // [0, 1)
  return static_cast<float>((2.0 * unit - 1.0) * bound);
}

} // namespace detail

/// The weights of an MLP with layer widths `widths` (input first, at least two). Weights and
/// biases are uniform in +-1/sqrt(fan_in), PyTorch's nn.Linear default, which keeps activations
/// of order one through the layers.
[[nodiscard]] inline mlp_weights make_mlp_weights(std::span<const std::int64_t> widths,
                                                  std::uint64_t seed) {
  mlp_weights w;
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
    mlp_layer layer;
    layer.in = widths[l];
    layer.out = widths[l + 1];
    const double bound = 1.0 / std::sqrt(static_cast<double>(layer.in));
    const auto count = static_cast<std::uint64_t>(layer.in * layer.out);
    layer.weights.resize(count);
    for (std::uint64_t i = 0; i < count; ++i) {
      layer.weights[i] = detail::init_value(seed, l, detail::mlp_tensor::weights, i, bound);
    }
    layer.bias.resize(static_cast<std::size_t>(layer.out));
    for (std::uint64_t j = 0; j < layer.bias.size(); ++j) {
      layer.bias[j] = detail::init_value(seed, l, detail::mlp_tensor::bias, j, bound);
    }
    w.layers.push_back(std::move(layer));
  }
  return w;
}

} // namespace cuda_examples
