#pragma once
/// \file
/// Definitions for servekit/backend/request_validator.hpp. Compiled once into servekit::servekit,
/// or included by its header with SERVEKIT_HEADER_ONLY.

#include <servekit/backend/request_validator.hpp>
#include <servekit/core/detail/linkage.hpp>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace servekit {

[[nodiscard]] SERVEKIT_DECL status request_validator::validate(const request& r,
                                                               std::int64_t& batch_elements) const {
  batch_elements = 1;
  const bool batched = max_batch_size_ > 0;
  std::int64_t batch = -1;
  // Duplicate names: pairwise for the usual handful of inputs (no allocation); past that, the
  // names sorted once, so a request with tens of thousands of inputs costs n log n, not n².
  constexpr std::size_t pairwise_up_to = 16;
  if (r.inputs.size() > pairwise_up_to) {
    std::vector<std::string_view> names;
    names.reserve(r.inputs.size());
    for (const tensor& t : r.inputs) {
      names.emplace_back(t.name);
    }
    std::sort(names.begin(), names.end());
    if (const auto twice = std::adjacent_find(names.begin(), names.end()); twice != names.end()) {
      return invalid_argument("input '" + std::string{*twice} +
                              "' appears more than once in request for model '" + model_name_ +
                              "'");
    }
  }
  for (std::size_t i = 0; i < r.inputs.size(); ++i) {
    const tensor& t = r.inputs[i];
    for (std::size_t j = 0; j < i && r.inputs.size() <= pairwise_up_to; ++j) {
      if (r.inputs[j].name == t.name) {
        return invalid_argument("input '" + t.name + "' appears more than once in request for " +
                                "model '" + model_name_ + "'");
      }
    }
    const tensor_config* spec = find(inputs_, t.name);
    if (spec == nullptr && !inputs_.empty()) {
      // Triton's message, then what Triton leaves the client to look up: the inputs there are.
      std::string message =
          "unexpected inference input '" + t.name + "' for model '" + model_name_ + "' (";
      message += inputs_.size() == 1 ? "the model's input: " : "the model's inputs: ";
      for (std::size_t k = 0; k < inputs_.size(); ++k) {
        message += (k == 0 ? "" : ", ") + inputs_[k].name;
      }
      message += ')';
      return invalid_argument(std::move(message));
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
        return invalid_argument("input '" + t.name + "' batch size " + std::to_string(t.shape[0]) +
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

SERVEKIT_DECL status request_validator::check_input(const tensor& t, const tensor_config& spec,
                                                    bool batched) const {
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

SERVEKIT_DECL status request_validator::check_data_size(const tensor& t) const {
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

} // namespace servekit
