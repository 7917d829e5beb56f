#pragma once
/// \file
/// The `mlp` backend's model parameters, parsed and checked once at instance construction.
/// CUDA-free: the CPU path and the tests use it in every build.
///
///     "parameters": {
///       "layers":                  {"string_value": "1024,4096,1024"},
///       "precision":               {"string_value": "FP16"},
///       "cuda_graphs":             {"string_value": "true"},
///       "graph_batch_sizes":       {"string_value": "1,2,4,8,16,32,64"},
///       "pad_to_graph_batch_size": {"string_value": "true"},
///       "seed":                    {"string_value": "7"}
///     }

#include <servekit/backend/instance_context.hpp>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace cuda_examples {

/// What the GPU path multiplies in. I/O tensors are TYPE_FP32 either way: FP16 converts on the
/// device, so clients never see it.
enum class mlp_precision : std::uint8_t {
  fp32, ///< FP32 weights and activations, FP32 accumulation
  fp16, ///< FP16 weights and activations, FP32 accumulation (cuBLAS tensor cores)
};

/// The parsed parameters, with their defaults.
struct mlp_options {
  /// Layer widths, input first: {1024, 4096, 1024} is one hidden layer of 4096. Each step is a
  /// dense layer with bias; ReLU follows every layer but the last.
  std::vector<std::int64_t> layers{1024, 4096, 1024};
  mlp_precision precision = mlp_precision::fp32;
  /// Capture the forward pass as a CUDA graph per batch size (Triton's TensorRT backend leaves
  /// graphs off unless asked, and so do we).
  bool cuda_graphs = false;
  /// The sizes that get a graph; empty: every size seen.
  std::vector<std::int64_t> graph_batch_sizes;
  /// Run a batch at the smallest listed graph size that holds it (the rows beyond are padding).
  bool pad_to_graph_batch_size = false;
  /// Seeds the deterministic weights (mlp_weights.hpp).
  std::uint64_t seed = 1;

  [[nodiscard]] std::int64_t input_width() const noexcept { return layers.front(); }
  [[nodiscard]] std::int64_t output_width() const noexcept { return layers.back(); }
};

/// The largest layer width and weight count accepted: beyond them, int32 GEMM dimensions and
/// host memory for the weights would overflow long before a GPU ran out of memory.
inline constexpr std::int64_t mlp_max_width = std::int64_t{1} << 20;
inline constexpr std::int64_t mlp_max_weights = std::int64_t{1} << 28;

namespace detail {

[[noreturn]] inline void bad_parameter(std::string_view name, std::string_view value,
                                       std::string_view expected) {
  throw std::invalid_argument("parameter '" + std::string{name} + "' must be " +
                              std::string{expected} + ", got \"" + std::string{value} + "\"");
}

/// Parses a comma-separated list of positive integers ("1,2,4"); nullopt on any other text.
[[nodiscard]] inline std::optional<std::vector<std::int64_t>>
parse_positive_list(std::string_view text) {
  std::vector<std::int64_t> out;
  std::size_t from = 0;
  for (;;) {
    const std::size_t comma = std::min(text.find(',', from), text.size());
    std::string_view item = text.substr(from, comma - from);
    while (!item.empty() && item.front() == ' ') {
      item.remove_prefix(1);
    }
    while (!item.empty() && item.back() == ' ') {
      item.remove_suffix(1);
    }
    std::int64_t value = 0;
    const char* const end = item.data() + item.size();
    const auto [ptr, ec] = std::from_chars(item.data(), end, value);
    if (item.empty() || ec != std::errc{} || ptr != end || value < 1) {
      return std::nullopt;
    }
    out.push_back(value);
    if (comma == text.size()) {
      return out;
    }
    from = comma + 1;
  }
}

[[nodiscard]] inline bool parse_bool(std::string_view name, std::string_view text) {
  if (text == "true") {
    return true;
  }
  if (text == "false") {
    return false;
  }
  bad_parameter(name, text, "\"true\" or \"false\"");
}

} // namespace detail

/// Reads the parameters from `context`; absent ones keep their defaults. Throws
/// std::invalid_argument naming the parameter (the model then fails to load with that message).
[[nodiscard]] inline mlp_options parse_mlp_options(const servekit::instance_context& context) {
  mlp_options o;
  if (const auto text = context.parameter("layers")) {
    auto layers = detail::parse_positive_list(*text);
    if (!layers || layers->size() < 2) {
      detail::bad_parameter("layers", *text,
                            "at least two positive layer widths separated by commas, input "
                            "first (e.g. \"1024,4096,1024\")");
    }
    std::int64_t weights = 0;
    for (std::size_t l = 0; l < layers->size(); ++l) {
      if ((*layers)[l] > mlp_max_width) {
        detail::bad_parameter("layers", *text,
                              "widths of at most " + std::to_string(mlp_max_width));
      }
      if (l > 0) {
        weights += (*layers)[l - 1] * (*layers)[l];
      }
    }
    if (weights > mlp_max_weights) {
      detail::bad_parameter("layers", *text,
                            "a model of at most " + std::to_string(mlp_max_weights) +
                                " weights (this one has " + std::to_string(weights) + ")");
    }
    o.layers = std::move(*layers);
  }
  if (const auto text = context.parameter("precision")) {
    if (*text == "FP32") {
      o.precision = mlp_precision::fp32;
    } else if (*text == "FP16") {
      o.precision = mlp_precision::fp16;
    } else {
      detail::bad_parameter("precision", *text, "\"FP32\" or \"FP16\"");
    }
  }
  if (const auto text = context.parameter("cuda_graphs")) {
    o.cuda_graphs = detail::parse_bool("cuda_graphs", *text);
  }
  if (const auto text = context.parameter("graph_batch_sizes")) {
    auto sizes = detail::parse_positive_list(*text);
    if (!sizes) {
      detail::bad_parameter("graph_batch_sizes", *text,
                            "positive batch sizes separated by commas (e.g. \"1,2,4,8\")");
    }
    o.graph_batch_sizes = std::move(*sizes);
  }
  if (const auto text = context.parameter("pad_to_graph_batch_size")) {
    o.pad_to_graph_batch_size = detail::parse_bool("pad_to_graph_batch_size", *text);
  }
  if (const auto text = context.parameter("seed")) {
    std::uint64_t seed = 0;
    const char* const end = text->data() + text->size();
    const auto [ptr, ec] = std::from_chars(text->data(), end, seed);
    if (text->empty() || ec != std::errc{} || ptr != end) {
      detail::bad_parameter("seed", *text, "a non-negative integer");
    }
    o.seed = seed;
  }
  return o;
}

} // namespace cuda_examples
