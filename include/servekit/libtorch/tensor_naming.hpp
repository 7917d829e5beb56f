#pragma once
/// \file
/// Triton's PyTorch-backend naming rules: which argument of a TorchScript model's forward() each
/// configured input feeds, and which of its results each configured output reads. Plain string
/// logic, no torch: the LibTorch backend applies it to forward()'s schema when a model loads.
///
/// Inputs, the first rule that fits every configured name:
///   1. `forward_argument`: every name is one of forward()'s argument names;
///   2. `named_index`: every name is `<anything>__<index>` (`INPUT__0`), the index a position;
///   3. `config_order`: the config's order is forward()'s argument order.
/// Outputs: `named_index` when every name is `<anything>__<index>` (`OUTPUT__1` is the second
/// element of the tuple forward() returns), else `config_order`.

#include <servekit/core/detail/linkage.hpp>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace servekit::libtorch {

/// How configured names were matched to forward()'s arguments or results.
enum class naming_convention : unsigned char { forward_argument, named_index, config_order };

/// "forward_argument", "named_index" or "config_order".
[[nodiscard]] SERVEKIT_DECL std::string_view to_string(naming_convention convention) noexcept;

/// The index of a `<anything>__<index>` name: the decimal digits after its first "__" (as Triton
/// reads it); nothing when the name has no "__" or anything but digits (at least one) follows.
[[nodiscard]] SERVEKIT_DECL std::optional<std::size_t> named_index(std::string_view name) noexcept;

/// Where each configured name goes: `positions[k]` is the forward() argument (or result) of
/// configured name k.
struct tensor_binding {
  naming_convention convention = naming_convention::config_order;
  std::vector<std::size_t> positions;
};

/// Binds the configured inputs to forward()'s `arguments` (their names, `self` left out). Throws
/// std::invalid_argument, naming both lists, when the counts differ or named indices repeat or
/// reach past the last argument.
[[nodiscard]] SERVEKIT_DECL tensor_binding bind_inputs(std::span<const std::string> configured,
                                                       std::span<const std::string> arguments);

/// Binds the configured outputs to the `results` tensors forward() returns (1 for a Tensor, the
/// size of a returned tuple). Throws std::invalid_argument when a named index repeats or reaches
/// past the last result, or the config lists more outputs than forward() returns.
[[nodiscard]] SERVEKIT_DECL tensor_binding bind_outputs(std::span<const std::string> configured,
                                                        std::size_t results);

} // namespace servekit::libtorch

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/libtorch/impl/tensor_naming.ipp>
#endif
