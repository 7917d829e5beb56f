#pragma once
/// \file
/// request_validator: rejects bad requests at submit, before they are queued, with a message
/// that names the model and the offending input (Triton's wording where it has one).

#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/core/bytes.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/status.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace servekit {

/// Checks requests against a model's declared inputs and outputs and its max_batch_size. An
/// input declared with data type `invalid` (an ensemble input no step declares) is checked by
/// name only.
/// Built once per model; `validate` allocates nothing unless it reports an error or the request
/// has more than 16 inputs (their names are then sorted to find duplicates).
class request_validator {
public:
  request_validator() = default;
  request_validator(std::string model_name, std::int32_t max_batch_size,
                    std::vector<tensor_config> inputs, std::vector<tensor_config> outputs)
      : model_name_{std::move(model_name)},
        max_batch_size_{max_batch_size}, inputs_{std::move(inputs)}, outputs_{std::move(outputs)} {}

  [[nodiscard]] std::int32_t max_batch_size() const noexcept { return max_batch_size_; }
  [[nodiscard]] std::span<const tensor_config> inputs() const noexcept { return inputs_; }
  [[nodiscard]] std::span<const tensor_config> outputs() const noexcept { return outputs_; }

  /// On success stores in `batch_elements` the request's batch dimension (1 when the model has
  /// none), which is what the request counts toward a batch.
  [[nodiscard]] SERVEKIT_DECL status validate(const request& r, std::int64_t& batch_elements) const;

private:
  static const tensor_config* find(std::span<const tensor_config> specs,
                                   std::string_view name) noexcept {
    for (const auto& s : specs) {
      if (s.name == name) {
        return &s;
      }
    }
    return nullptr;
  }

  SERVEKIT_DECL status check_input(const tensor& t, const tensor_config& spec, bool batched) const;

  SERVEKIT_DECL status check_data_size(const tensor& t) const;

  std::string model_name_;
  std::int32_t max_batch_size_ = 0;
  std::vector<tensor_config> inputs_;
  std::vector<tensor_config> outputs_;
};

} // namespace servekit

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/backend/impl/request_validator.ipp>
#endif
