#pragma once
/// \file
/// The test models' seeded weights and the classifier's forward pass in plain C++: the same
/// numbers make_models.cpp stores in classifier.pt and the tests compute the expected outputs
/// with, so LibTorch's result is checked against an independent computation. No torch here.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace reference_models {

/// A small deterministic generator (a 64-bit LCG, Knuth's MMIX constants): the same sequence on
/// every platform, unlike the standard distributions.
class seeded_values {
public:
  explicit seeded_values(std::uint64_t seed) : state_{seed} {}

  /// The next value, uniform in [-0.5, 0.5).
  float next() {
    state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
    const auto top = static_cast<std::uint32_t>(state_ >> 40); // 24 bits
    return static_cast<float>(top) / static_cast<float>(1U << 24) - 0.5F;
  }

  [[nodiscard]] std::vector<float> take(std::size_t n) {
    std::vector<float> out(n);
    for (auto& v : out) {
      v = next();
    }
    return out;
  }

private:
  std::uint64_t state_;
};

/// The image classifier: a 1x8x8 image, a 3x3 convolution to 4 channels (padding 1), ReLU, 2x2
/// max pooling, and a linear layer from the 4x4x4 features to 10 classes.
struct classifier {
  static constexpr std::int64_t side = 8;
  static constexpr std::int64_t channels = 4;
  static constexpr std::int64_t kernel = 3;
  static constexpr std::int64_t pooled = side / 2;
  static constexpr std::int64_t features = channels * pooled * pooled;
  static constexpr std::int64_t classes = 10;
  static constexpr std::int64_t pixels = side * side;

  std::vector<float> conv_weight; ///< [channels, 1, kernel, kernel]
  std::vector<float> conv_bias;   ///< [channels]
  std::vector<float> fc_weight;   ///< [classes, features]
  std::vector<float> fc_bias;     ///< [classes]

  /// The weights classifier.pt holds.
  [[nodiscard]] static classifier seeded() {
    seeded_values values{20261127};
    classifier c;
    c.conv_weight = values.take(static_cast<std::size_t>(channels * kernel * kernel));
    c.conv_bias = values.take(static_cast<std::size_t>(channels));
    c.fc_weight = values.take(static_cast<std::size_t>(classes * features));
    c.fc_bias = values.take(static_cast<std::size_t>(classes));
    return c;
  }

  /// The 10 class scores of one 8x8 image (row-major `pixels` values).
  [[nodiscard]] std::array<float, classes> forward(const float* image) const {
    // convolution (padding 1) and ReLU
    std::array<float, channels * pixels> conv{};
    for (std::int64_t c = 0; c < channels; ++c) {
      for (std::int64_t y = 0; y < side; ++y) {
        for (std::int64_t x = 0; x < side; ++x) {
          double sum = conv_bias[static_cast<std::size_t>(c)];
          for (std::int64_t ky = 0; ky < kernel; ++ky) {
            for (std::int64_t kx = 0; kx < kernel; ++kx) {
              const std::int64_t iy = y + ky - 1;
              const std::int64_t ix = x + kx - 1;
              if (iy < 0 || iy >= side || ix < 0 || ix >= side) {
                continue;
              }
              sum += static_cast<double>(
                         conv_weight[static_cast<std::size_t>((c * kernel + ky) * kernel + kx)]) *
                     static_cast<double>(image[iy * side + ix]);
            }
          }
          conv[static_cast<std::size_t>(c * pixels + y * side + x)] =
              std::max(0.0F, static_cast<float>(sum));
        }
      }
    }
    // 2x2 max pooling, flattened as [channel, row, column]
    std::array<float, features> pooled_features{};
    for (std::int64_t c = 0; c < channels; ++c) {
      for (std::int64_t y = 0; y < pooled; ++y) {
        for (std::int64_t x = 0; x < pooled; ++x) {
          float best = conv[static_cast<std::size_t>(c * pixels + (2 * y) * side + 2 * x)];
          for (std::int64_t dy = 0; dy < 2; ++dy) {
            for (std::int64_t dx = 0; dx < 2; ++dx) {
              best = std::max(
                  best,
                  conv[static_cast<std::size_t>(c * pixels + (2 * y + dy) * side + 2 * x + dx)]);
            }
          }
          pooled_features[static_cast<std::size_t>((c * pooled + y) * pooled + x)] = best;
        }
      }
    }
    // linear layer
    std::array<float, classes> out{};
    for (std::int64_t k = 0; k < classes; ++k) {
      double sum = fc_bias[static_cast<std::size_t>(k)];
      for (std::int64_t f = 0; f < features; ++f) {
        sum += static_cast<double>(fc_weight[static_cast<std::size_t>(k * features + f)]) *
               static_cast<double>(pooled_features[static_cast<std::size_t>(f)]);
      }
      out[static_cast<std::size_t>(k)] = static_cast<float>(sum);
    }
    return out;
  }
};

/// A GRU cell (torch.gru_cell's equations, gates in its order r, z, n): 3 inputs, a hidden state
/// of 4, kept between the steps of a sequence as implicit state.
struct gru_cell {
  static constexpr std::int64_t inputs = 3;
  static constexpr std::int64_t hidden = 4;

  std::vector<float> weight_ih; ///< [3 * hidden, inputs]
  std::vector<float> weight_hh; ///< [3 * hidden, hidden]
  std::vector<float> bias_ih;   ///< [3 * hidden]
  std::vector<float> bias_hh;   ///< [3 * hidden]

  /// The weights gru.pt holds.
  [[nodiscard]] static gru_cell seeded() {
    seeded_values values{424242};
    gru_cell g;
    g.weight_ih = values.take(static_cast<std::size_t>(3 * hidden * inputs));
    g.weight_hh = values.take(static_cast<std::size_t>(3 * hidden * hidden));
    g.bias_ih = values.take(static_cast<std::size_t>(3 * hidden));
    g.bias_hh = values.take(static_cast<std::size_t>(3 * hidden));
    return g;
  }

  /// The next hidden state from input `x` and hidden state `h`.
  [[nodiscard]] std::array<float, hidden> step(const std::array<float, inputs>& x,
                                               const std::array<float, hidden>& h) const {
    // gate rows: [0, hidden) r, [hidden, 2 hidden) z, [2 hidden, 3 hidden) n
    auto input_part = [&](std::int64_t row) {
      double sum = bias_ih[static_cast<std::size_t>(row)];
      for (std::int64_t i = 0; i < inputs; ++i) {
        sum += static_cast<double>(weight_ih[static_cast<std::size_t>(row * inputs + i)]) *
               static_cast<double>(x[static_cast<std::size_t>(i)]);
      }
      return sum;
    };
    auto hidden_part = [&](std::int64_t row) {
      double sum = bias_hh[static_cast<std::size_t>(row)];
      for (std::int64_t j = 0; j < hidden; ++j) {
        sum += static_cast<double>(weight_hh[static_cast<std::size_t>(row * hidden + j)]) *
               static_cast<double>(h[static_cast<std::size_t>(j)]);
      }
      return sum;
    };
    auto sigmoid = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
    std::array<float, hidden> out{};
    for (std::int64_t k = 0; k < hidden; ++k) {
      const double r = sigmoid(input_part(k) + hidden_part(k));
      const double z = sigmoid(input_part(hidden + k) + hidden_part(hidden + k));
      const double n = std::tanh(input_part(2 * hidden + k) + r * hidden_part(2 * hidden + k));
      out[static_cast<std::size_t>(k)] = static_cast<float>(
          (1.0 - z) * n + z * static_cast<double>(h[static_cast<std::size_t>(k)]));
    }
    return out;
  }
};

/// The bundled repository's preprocessing (examples/models/image_preprocess): one UINT8 pixel
/// (0..255) to the classifier's input range [-0.5, 0.5], in FP32 as torch computes it.
[[nodiscard]] inline float preprocess(std::uint8_t pixel) {
  return static_cast<float>(pixel) / 255.0F - 0.5F;
}

/// A seeded test image (row-major 8x8), a different one per `seed`.
[[nodiscard]] inline std::vector<float> image(std::uint64_t seed) {
  return seeded_values{seed}.take(static_cast<std::size_t>(classifier::pixels));
}

} // namespace reference_models
