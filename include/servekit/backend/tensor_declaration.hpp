#pragma once
/// \file
/// A model's inputs and outputs, in two forms: `tensor_declaration`, what a backend declares at
/// compile time (`static constexpr servekit::tensor_declaration inputs[]`), and `tensor_config`, a
/// tensor as a model config (Triton's ModelInput/ModelOutput) says it at run time.

#include <servekit/core/data_type.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/shape.hpp>

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace servekit {

/// An input or output as a backend declares it at compile time (a string_view name, constexpr):
///
///     static constexpr servekit::tensor_declaration inputs[] = {
///         {"INPUT0", servekit::data_type::fp32, {16}},
///     };
///
/// `dims` excludes the batch dimension; -1 means any size.
struct tensor_declaration {
  std::string_view name;
  data_type type = data_type::invalid;
  shape dims;
  bool allow_ragged_batch = false; ///< variable dims may differ inside one batch
  bool optional = false;           ///< a request may omit this input
  bool is_shape_tensor = false;    ///< batched requests must agree on its contents
};

/// Old name of tensor_declaration, kept for existing backends.
using tensor_spec [[deprecated("servekit: tensor_spec is now tensor_declaration")]] =
    tensor_declaration;

/// A tensor as a model config says it at run time (Triton's ModelInput/ModelOutput fields): read
/// from config.json, or made `from` a backend's tensor_declaration.
struct tensor_config {
  std::string name;
  data_type type = data_type::invalid;
  shape dims;
  bool allow_ragged_batch = false;
  bool optional = false;
  bool is_shape_tensor = false;

  [[nodiscard]] static tensor_config from(const tensor_declaration& spec) {
    return {std::string{spec.name},  spec.type,     spec.dims,
            spec.allow_ragged_batch, spec.optional, spec.is_shape_tensor};
  }
  friend bool operator==(const tensor_config&, const tensor_config&) = default;
};

[[nodiscard]] SERVEKIT_DECL std::vector<tensor_config>
to_configs(std::span<const tensor_declaration> specs);

} // namespace servekit

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/backend/impl/tensor_declaration.ipp>
#endif
