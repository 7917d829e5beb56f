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

/// The generative test model (tiny_lm.pt, the bundled repository's tiny_lm): a decoder-only
/// transformer over byte tokens, in FP64, pre-norm, with sinusoidal positions, tied input and
/// output embeddings, and an output mask that leaves printable ASCII and the newline (so its
/// text is valid UTF-8). This is the CPU reference: the whole sequence recomputed for every
/// token, with no cache, no batching and no chunking, which tests compare LibTorch's paged,
/// batched, chunked and preempted generation with.
struct tiny_lm {
  static constexpr std::int64_t vocab = 256;
  static constexpr std::int64_t width = 32; ///< d_model
  static constexpr std::int64_t heads = 4;
  static constexpr std::int64_t head_dim = width / heads;
  static constexpr std::int64_t layers = 2;
  static constexpr std::int64_t hidden = 128; ///< the feed-forward width

  // Weights, row-major, stacked over layers; projections are applied as x · W (W is [in, out]).
  std::vector<double> embedding; ///< [vocab, width], also the output projection (tied)
  std::vector<double> ln1_w, ln1_b, ln2_w, ln2_b; ///< [layers, width]
  std::vector<double> wq, wk, wv, wo;             ///< [layers, width, width]
  std::vector<double> w1;                         ///< [layers, width, hidden]
  std::vector<double> b1;                         ///< [layers, hidden]
  std::vector<double> w2;                         ///< [layers, hidden, width]
  std::vector<double> lnf_w, lnf_b;               ///< [width]
  std::vector<double> mask;                       ///< [vocab]: 0 allowed, -1e9 not

  [[nodiscard]] static tiny_lm seeded() {
    seeded_values values{20261128};
    auto take = [&](std::int64_t n, double scale, double offset = 0.0) {
      std::vector<double> out(static_cast<std::size_t>(n));
      for (auto& v : out) {
        v = offset + scale * static_cast<double>(values.next());
      }
      return out;
    };
    tiny_lm m;
    m.embedding = take(vocab * width, 1.0);
    m.ln1_w = take(layers * width, 0.2, 1.0);
    m.ln1_b = take(layers * width, 0.2);
    m.ln2_w = take(layers * width, 0.2, 1.0);
    m.ln2_b = take(layers * width, 0.2);
    m.wq = take(layers * width * width, 3.0);
    m.wk = take(layers * width * width, 3.0);
    m.wv = take(layers * width * width, 0.8);
    m.wo = take(layers * width * width, 0.8);
    m.w1 = take(layers * width * hidden, 3.0);
    m.b1 = take(layers * hidden, 0.2);
    m.w2 = take(layers * hidden * width, 0.4);
    m.lnf_w = take(width, 0.2, 1.0);
    m.lnf_b = take(width, 0.2);
    m.mask.assign(static_cast<std::size_t>(vocab), -1e9);
    for (std::int64_t t = 32; t < 127; ++t) {
      m.mask[static_cast<std::size_t>(t)] = 0.0;
    }
    m.mask['\n'] = 0.0;
    return m;
  }

  /// The sinusoidal position code of position `p`, dimension `i`.
  [[nodiscard]] static double position_code(std::int64_t p, std::int64_t i) {
    const double frequency =
        std::pow(10000.0, -static_cast<double>(2 * (i / 2)) / static_cast<double>(width));
    const double angle = static_cast<double>(p) * frequency;
    return i % 2 == 0 ? std::sin(angle) : std::cos(angle);
  }

  /// The greedy next token after `tokens` (at least one).
  [[nodiscard]] std::int32_t next(const std::vector<std::int32_t>& tokens) const {
    const auto n = static_cast<std::int64_t>(tokens.size());
    using row = std::vector<double>;
    std::vector<row> x(static_cast<std::size_t>(n), row(static_cast<std::size_t>(width)));
    for (std::int64_t p = 0; p < n; ++p) {
      for (std::int64_t i = 0; i < width; ++i) {
        x[at(p)][at(i)] = embedding[at(tokens[at(p)] * width + i)] + position_code(p, i);
      }
    }
    for (std::int64_t l = 0; l < layers; ++l) {
      std::vector<row> h(x.size());
      for (std::int64_t p = 0; p < n; ++p) {
        h[at(p)] = layer_norm(x[at(p)], ln1_w, ln1_b, l * width);
      }
      const auto q = project(h, wq, l * width * width, width, width);
      const auto k = project(h, wk, l * width * width, width, width);
      const auto v = project(h, wv, l * width * width, width, width);
      std::vector<row> attended(x.size(), row(static_cast<std::size_t>(width), 0.0));
      const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
      for (std::int64_t p = 0; p < n; ++p) {
        for (std::int64_t hd = 0; hd < heads; ++hd) {
          std::vector<double> scores(static_cast<std::size_t>(p + 1));
          double top = -1e300;
          for (std::int64_t c = 0; c <= p; ++c) {
            double dot = 0.0;
            for (std::int64_t d = 0; d < head_dim; ++d) {
              dot += q[at(p)][at(hd * head_dim + d)] * k[at(c)][at(hd * head_dim + d)];
            }
            scores[at(c)] = dot * scale;
            top = std::max(top, scores[at(c)]);
          }
          double total = 0.0;
          for (auto& sc : scores) {
            sc = std::exp(sc - top);
            total += sc;
          }
          for (std::int64_t c = 0; c <= p; ++c) {
            for (std::int64_t d = 0; d < head_dim; ++d) {
              attended[at(p)][at(hd * head_dim + d)] +=
                  scores[at(c)] / total * v[at(c)][at(hd * head_dim + d)];
            }
          }
        }
      }
      const auto o = project(attended, wo, l * width * width, width, width);
      for (std::int64_t p = 0; p < n; ++p) {
        for (std::int64_t i = 0; i < width; ++i) {
          x[at(p)][at(i)] += o[at(p)][at(i)];
        }
        const auto h2 = layer_norm(x[at(p)], ln2_w, ln2_b, l * width);
        const auto up = project({h2}, w1, l * width * hidden, width, hidden).front();
        row act(static_cast<std::size_t>(hidden));
        for (std::int64_t j = 0; j < hidden; ++j) {
          const double u = up[at(j)] + b1[at(l * hidden + j)];
          act[at(j)] = 0.5 * u * (1.0 + std::erf(u / std::sqrt(2.0)));
        }
        const auto down = project({act}, w2, l * hidden * width, hidden, width).front();
        for (std::int64_t i = 0; i < width; ++i) {
          x[at(p)][at(i)] += down[at(i)];
        }
      }
    }
    const auto last = layer_norm(x.back(), lnf_w, lnf_b, 0);
    std::int32_t best = 0;
    double best_score = -1e300;
    for (std::int64_t t = 0; t < vocab; ++t) {
      double score = mask[at(t)];
      for (std::int64_t i = 0; i < width; ++i) {
        score += last[at(i)] * embedding[at(t * width + i)];
      }
      if (score > best_score) { // the first of equal scores, as argmax
        best_score = score;
        best = static_cast<std::int32_t>(t);
      }
    }
    return best;
  }

  /// Greedy generation of `count` tokens after `prompt`, stopping after `end` when given.
  [[nodiscard]] std::vector<std::int32_t> generate(std::vector<std::int32_t> tokens,
                                                   std::size_t count, int end = -1) const {
    std::vector<std::int32_t> out;
    while (out.size() < count) {
      const auto t = next(tokens);
      tokens.push_back(t);
      out.push_back(t);
      if (t == end) {
        break;
      }
    }
    return out;
  }

private:
  static std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }

  [[nodiscard]] static std::vector<double> layer_norm(const std::vector<double>& x,
                                                      const std::vector<double>& w,
                                                      const std::vector<double>& b,
                                                      std::int64_t offset) {
    double mean = 0.0;
    for (const double v : x) {
      mean += v;
    }
    mean /= static_cast<double>(x.size());
    double var = 0.0;
    for (const double v : x) {
      var += (v - mean) * (v - mean);
    }
    var /= static_cast<double>(x.size());
    std::vector<double> out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      out[i] = (x[i] - mean) / std::sqrt(var + 1e-5) * w[at(offset) + i] + b[at(offset) + i];
    }
    return out;
  }

  /// rows · W, with W the [in, out] matrix at `offset` of `w`.
  [[nodiscard]] static std::vector<std::vector<double>>
  project(const std::vector<std::vector<double>>& rows, const std::vector<double>& w,
          std::int64_t offset, std::int64_t in, std::int64_t out) {
    std::vector<std::vector<double>> result(rows.size(),
                                            std::vector<double>(static_cast<std::size_t>(out)));
    for (std::size_t r = 0; r < rows.size(); ++r) {
      for (std::int64_t j = 0; j < out; ++j) {
        double sum = 0.0;
        for (std::int64_t i = 0; i < in; ++i) {
          sum += rows[r][at(i)] * w[at(offset + i * out + j)];
        }
        result[r][at(j)] = sum;
      }
    }
    return result;
  }
};

/// A seeded test image (row-major 8x8), a different one per `seed`.
[[nodiscard]] inline std::vector<float> image(std::uint64_t seed) {
  return seeded_values{seed}.take(static_cast<std::size_t>(classifier::pixels));
}

} // namespace reference_models
