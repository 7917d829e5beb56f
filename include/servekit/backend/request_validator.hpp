#pragma once
/// \file
/// request_validator: rejects bad requests at submit, before they are queued, with a message
/// that names the model and the offending input (Triton's wording where it has one).

#include <servekit/backend/tensor_spec.hpp>
#include <servekit/core/bytes.hpp>
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
/// Built once per model; `validate` allocates nothing unless it reports an error.
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
  [[nodiscard]] status validate(const request& r, std::int64_t& batch_elements) const {
    batch_elements = 1;
    const bool batched = max_batch_size_ > 0;
    std::int64_t batch = -1;
    for (std::size_t i = 0; i < r.inputs.size(); ++i) {
      const tensor& t = r.inputs[i];
      for (std::size_t j = 0; j < i; ++j) {
        if (r.inputs[j].name == t.name) {
          return invalid_argument("input '" + t.name + "' appears more than once in request for " +
                                  "model '" + model_name_ + "'");
        }
      }
      const tensor_config* spec = find(inputs_, t.name);
      if (spec == nullptr && !inputs_.empty()) {
        return invalid_argument("unexpected inference input '" + t.name + "' for model '" +
                                model_name_ + "'");
      }
      if (batched) {
        if (t.shape.rank() == 0 || t.shape[0] < 1) {
          return invalid_argument("input '" + t.name + "' for model '" + model_name_ +
                                  "' must have a batch dimension of at least 1, got shape " +
                                  to_string(t.shape));
        }
        if (batch == -1) {
          batch = t.shape[0];
        } else if (batch != t.shape[0]) {
          return invalid_argument("input '" + t.name + "' batch size " +
                                  std::to_string(t.shape[0]) +
                                  " does not match the other inputs' batch size " +
                                  std::to_string(batch) + " for model '" + model_name_ + "'");
        }
      }
      if (spec != nullptr && spec->type != data_type::invalid) {
        if (auto s = check_input(t, *spec, batched); !s.ok()) {
          return s;
        }
      } else if (auto s = check_data_size(t); !s.ok()) {
        return s;
      }
    }
    for (const auto& spec : inputs_) {
      if (!spec.optional && r.find_input(spec.name) == nullptr) {
        return invalid_argument("missing inference input '" + spec.name + "' for model '" +
                                model_name_ + "'");
      }
    }
    if (batched && batch > max_batch_size_) {
      return invalid_argument(
          "inference request batch-size must be <= " + std::to_string(max_batch_size_) + " for '" +
          model_name_ + "', got " + std::to_string(batch));
    }
    if (!outputs_.empty()) {
      for (const auto& name : r.requested_outputs) {
        if (find(outputs_, name) == nullptr) {
          return invalid_argument("unexpected inference output '" + name + "' for model '" +
                                  model_name_ + "'");
        }
      }
    }
    if (batched && batch > 0) {
      batch_elements = batch;
    }
    return {};
  }

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

  status check_input(const tensor& t, const tensor_config& spec, bool batched) const {
    if (t.type != spec.type) {
      return invalid_argument("inference input '" + t.name + "' data-type is '" +
                              std::string{to_string(t.type)} + "', but model '" + model_name_ +
                              "' expects '" + std::string{to_string(spec.type)} + "'");
    }
    const shape item = batched ? t.shape.without_batch() : t.shape;
    if (!spec.dims.admits(item)) {
      const shape expected = batched ? spec.dims.with_batch(-1) : spec.dims;
      return invalid_argument("unexpected shape for input '" + t.name + "' for model '" +
                              model_name_ + "'. Expected " + to_string(expected) + ", got " +
                              to_string(t.shape));
    }
    return check_data_size(t);
  }

  status check_data_size(const tensor& t) const {
    for (const auto d : t.shape) {
      if (d < 0) {
        return invalid_argument("input '" + t.name + "' for model '" + model_name_ +
                                "' has a negative dimension in shape " + to_string(t.shape));
      }
    }
    const auto elements = static_cast<std::size_t>(t.shape.element_count());
    if (t.type == data_type::bytes) {
      if (!t.data.location().host_accessible()) {
        return {};
      }
      const auto count = count_bytes_elements(t.data.bytes());
      if (!count) {
        return invalid_argument("input '" + t.name + "' for model '" + model_name_ +
                                "' holds malformed BYTES data (each element needs a 4-byte "
                                "length prefix followed by that many bytes)");
      }
      if (*count != elements) {
        return invalid_argument("input '" + t.name + "' for model '" + model_name_ + "' holds " +
                                std::to_string(*count) + " BYTES elements, but its shape " +
                                to_string(t.shape) + " needs " + std::to_string(elements));
      }
      return {};
    }
    const std::size_t expected = elements * byte_size(t.type);
    if (t.data.size() != expected) {
      return invalid_argument("input '" + t.name + "' for model '" + model_name_ + "' has " +
                              std::to_string(t.data.size()) + " bytes of data, but shape " +
                              to_string(t.shape) + " of " + std::string{to_string(t.type)} +
                              " needs " + std::to_string(expected));
    }
    return {};
  }

  std::string model_name_;
  std::int32_t max_batch_size_ = 0;
  std::vector<tensor_config> inputs_;
  std::vector<tensor_config> outputs_;
};

} // namespace servekit
