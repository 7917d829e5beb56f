#pragma once
/// \file
/// Declared model inputs and outputs: `tensor_spec` (compile time, in a backend's traits) and
/// `tensor_config` (run time, from a model's JSON config), named after Triton's ModelInput.

#include <servekit/core/data_type.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/shape.hpp>

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace servekit {

/// A declared input or output as a backend states it at compile time:
///
///     static constexpr servekit::tensor_spec inputs[] = {
///         {"INPUT0", servekit::data_type::fp32, {16}},
///     };
///
/// `dims` excludes the batch dimension; -1 means any size.
struct tensor_spec {
  std::string_view name;
  data_type type = data_type::invalid;
  shape dims;
  bool allow_ragged_batch = false; ///< variable dims may differ inside one batch
  bool optional = false;           ///< a request may omit this input
  bool is_shape_tensor = false;    ///< batched requests must agree on its contents
};

/// The run-time form of a declared tensor (Triton's ModelInput/ModelOutput fields).
struct tensor_config {
  std::string name;
  data_type type = data_type::invalid;
  shape dims;
  bool allow_ragged_batch = false;
  bool optional = false;
  bool is_shape_tensor = false;

  [[nodiscard]] static tensor_config from(const tensor_spec& spec) {
    return {std::string{spec.name},  spec.type,     spec.dims,
            spec.allow_ragged_batch, spec.optional, spec.is_shape_tensor};
  }
  friend bool operator==(const tensor_config&, const tensor_config&) = default;
};

[[nodiscard]] SERVEKIT_DECL std::vector<tensor_config>
to_configs(std::span<const tensor_spec> specs);

} // namespace servekit

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/backend/impl/tensor_spec.ipp>
#endif
