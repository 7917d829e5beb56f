#pragma once
/// \file
/// graph_batch_sizes: which batch sizes get a CUDA graph, and how much padding that costs. The
/// pure decision behind graph_cache, free of CUDA so it is tested everywhere.

#include <servekit/core/assert.hpp>
#include <servekit/core/config_error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace servekit::cuda {

/// The batch sizes that run as CUDA graphs. A graph is fixed to the sizes it was captured with,
/// so every distinct batch size needs its own capture (and its own device memory for the graph).
/// Listing sizes bounds that; padding a batch up to the next listed size, as TF Serving's
/// allowed_batch_sizes and TGI's CUDA-graph sizes do, lets a few graphs serve every batch at the
/// price of computing some rows for nothing.
class graph_batch_sizes {
public:
  /// How to run a batch of n elements.
  struct choice {
    std::int64_t run_size; ///< the size to execute (n, or the listed size n is padded to)
    std::int64_t padding;  ///< run_size - n: rows computed and thrown away
    bool graph;            ///< true: capture or replay a graph of run_size; false: run eagerly

    friend bool operator==(const choice&, const choice&) = default;
  };

  /// `sizes` in any order, duplicates allowed; empty means "a graph for every size seen". With
  /// `pad`, a batch runs at the smallest listed size that holds it. Throws config_error
  /// (bad_value, at Triton's field /optimization/cuda/graph_spec/I/batch_size) for a size < 1.
  explicit graph_batch_sizes(std::vector<std::int64_t> sizes = {}, bool pad = false)
      : sizes_{std::move(sizes)}, pad_{pad} {
    for (std::size_t i = 0; i < sizes_.size(); ++i) {
      if (sizes_[i] < 1) {
        throw config_error(config_error_code::bad_value,
                           "/optimization/cuda/graph_spec/" + std::to_string(i) + "/batch_size",
                           "a CUDA graph batch size must be at least 1, got " +
                               std::to_string(sizes_[i]));
      }
    }
    std::sort(sizes_.begin(), sizes_.end());
    sizes_.erase(std::unique(sizes_.begin(), sizes_.end()), sizes_.end());
  }

  /// How to run a batch of `n` (> 0) elements:
  /// - no sizes listed: {n, 0, graph}, every size seen is captured;
  /// - `pad` and a listed size >= n: {the smallest such size, its excess, graph};
  /// - n listed (without pad): {n, 0, graph};
  /// - otherwise {n, 0, eager}: a size no graph covers runs without one.
  [[nodiscard]] choice choose(std::int64_t n) const noexcept {
    SERVEKIT_ASSERT(n > 0, "graph_batch_sizes::choose needs a batch of at least one element");
    if (sizes_.empty()) {
      return {n, 0, true};
    }
    const auto it = std::lower_bound(sizes_.begin(), sizes_.end(), n);
    if (it != sizes_.end() && (pad_ || *it == n)) {
      return {*it, *it - n, true};
    }
    return {n, 0, false};
  }

  /// The listed sizes, sorted and without duplicates.
  [[nodiscard]] std::span<const std::int64_t> sizes() const noexcept { return sizes_; }
  [[nodiscard]] bool pad() const noexcept { return pad_; }

private:
  std::vector<std::int64_t> sizes_;
  bool pad_;
};

} // namespace servekit::cuda
