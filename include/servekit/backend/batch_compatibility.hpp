#pragma once
/// \file
/// batch_compatibility: which requests may share a batch (Triton's "required equal inputs").

#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/request.hpp>

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace servekit {

/// Requests may share a batch when, for every input whose declared dims contain -1 and that is
/// not `allow_ragged_batch`, their shapes (without the batch dim) are equal; shape tensors must
/// also agree in contents; and when any input is optional, they must carry the same inputs.
/// Fixed-shape inputs need no check: validation already made them equal.
class batch_compatibility {
public:
  batch_compatibility() = default;
  batch_compatibility(std::span<const tensor_config> inputs, bool batched) : batched_{batched} {
    for (const auto& in : inputs) {
      if (in.is_shape_tensor) {
        shape_tensors_.push_back(in.name);
      } else if (in.dims.has_variable_dim() && !in.allow_ragged_batch) {
        equal_shape_.push_back(in.name);
      }
      compare_input_sets_ = compare_input_sets_ || in.optional;
    }
  }

  /// False when nothing needs comparing: every request fits with every other.
  [[nodiscard]] bool needs_check() const noexcept {
    return !equal_shape_.empty() || !shape_tensors_.empty() || compare_input_sets_;
  }

  /// Whether `other` may join a batch that `first` started.
  [[nodiscard]] SERVEKIT_DECL bool compatible(const request& first,
                                              const request& other) const noexcept;

private:
  [[nodiscard]] shape item_shape(const tensor& t) const noexcept {
    return batched_ ? t.shape.without_batch() : t.shape;
  }

  std::vector<std::string> equal_shape_;
  std::vector<std::string> shape_tensors_;
  bool compare_input_sets_ = false;
  bool batched_ = true;
};

} // namespace servekit

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/backend/impl/batch_compatibility.ipp>
#endif
