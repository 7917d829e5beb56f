#pragma once
/// \file
/// Triton's PyTorch-backend naming rules (libtorch/tensor_naming.hpp). Compiled once by
/// src/libtorch/tensor_naming.cpp; see core/detail/linkage.hpp.

#include <servekit/libtorch/tensor_naming.hpp>

#include <algorithm>
#include <stdexcept>

namespace servekit::libtorch {

namespace detail {

/// "a, b, c" (or "none").
[[nodiscard]] inline std::string join_names(std::span<const std::string> names) {
  if (names.empty()) {
    return "none";
  }
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) {
      out += ", ";
    }
    out += n;
  }
  return out;
}

/// Each configured name's index, or nothing when one of them has none.
[[nodiscard]] inline std::optional<std::vector<std::size_t>>
named_indices(std::span<const std::string> configured) {
  std::vector<std::size_t> out;
  out.reserve(configured.size());
  for (const auto& name : configured) {
    const auto index = named_index(name);
    if (!index) {
      return std::nullopt;
    }
    out.push_back(*index);
  }
  return out;
}

/// Refuses a repeated index or one at or past `count`.
inline void check_indices(std::span<const std::string> configured,
                          std::span<const std::size_t> indices, std::size_t count,
                          std::string_view what) {
  for (std::size_t k = 0; k < indices.size(); ++k) {
    if (indices[k] >= count) {
      throw std::invalid_argument(std::string{what} + " '" + configured[k] + "' names index " +
                                  std::to_string(indices[k]) + " but forward() has " +
                                  std::to_string(count) +
                                  (what == "input" ? " arguments" : " results"));
    }
    for (std::size_t j = 0; j < k; ++j) {
      if (indices[j] == indices[k]) {
        throw std::invalid_argument(std::string{what} + "s '" + configured[j] + "' and '" +
                                    configured[k] + "' both name index " +
                                    std::to_string(indices[k]));
      }
    }
  }
}

[[nodiscard]] inline std::vector<std::size_t> in_order(std::size_t n) {
  std::vector<std::size_t> out(n);
  for (std::size_t k = 0; k < n; ++k) {
    out[k] = k;
  }
  return out;
}

} // namespace detail

SERVEKIT_DECL std::string_view to_string(naming_convention convention) noexcept {
  switch (convention) {
  case naming_convention::forward_argument:
    return "forward_argument";
  case naming_convention::named_index:
    return "named_index";
  case naming_convention::config_order:
    return "config_order";
  }
  return "config_order";
}

SERVEKIT_DECL std::optional<std::size_t> named_index(std::string_view name) noexcept {
  const auto at = name.find("__");
  if (at == std::string_view::npos) {
    return std::nullopt;
  }
  const std::string_view digits = name.substr(at + 2);
  // More than 9 digits is no position a forward() has, and would overflow below.
  if (digits.empty() || digits.size() > 9) {
    return std::nullopt;
  }
  std::size_t index = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    index = index * 10 + static_cast<std::size_t>(c - '0');
  }
  return index;
}

SERVEKIT_DECL tensor_binding bind_inputs(std::span<const std::string> configured,
                                         std::span<const std::string> arguments) {
  if (configured.size() != arguments.size()) {
    throw std::invalid_argument("the config declares " + std::to_string(configured.size()) +
                                " input(s) (" + detail::join_names(configured) +
                                ") but forward() takes " + std::to_string(arguments.size()) + " (" +
                                detail::join_names(arguments) + ")");
  }
  tensor_binding out;
  const bool all_arguments =
      std::all_of(configured.begin(), configured.end(), [&](const std::string& name) {
        return std::find(arguments.begin(), arguments.end(), name) != arguments.end();
      });
  if (all_arguments) {
    out.convention = naming_convention::forward_argument;
    for (const auto& name : configured) {
      const auto found = std::find(arguments.begin(), arguments.end(), name);
      out.positions.push_back(static_cast<std::size_t>(found - arguments.begin()));
    }
    // Distinct configured names (the config reader checks) land on distinct arguments.
    return out;
  }
  if (auto indices = detail::named_indices(configured)) {
    detail::check_indices(configured, *indices, arguments.size(), "input");
    out.convention = naming_convention::named_index;
    out.positions = std::move(*indices);
    return out;
  }
  out.convention = naming_convention::config_order;
  out.positions = detail::in_order(configured.size());
  return out;
}

SERVEKIT_DECL tensor_binding bind_outputs(std::span<const std::string> configured,
                                          std::size_t results) {
  tensor_binding out;
  if (auto indices = detail::named_indices(configured)) {
    detail::check_indices(configured, *indices, results, "output");
    out.convention = naming_convention::named_index;
    out.positions = std::move(*indices);
    return out;
  }
  if (configured.size() > results) {
    throw std::invalid_argument("the config declares " + std::to_string(configured.size()) +
                                " outputs (" + detail::join_names(configured) +
                                ") but forward() returns " + std::to_string(results) +
                                " tensor(s); outputs not named <name>__<index> are read in the "
                                "config's order");
  }
  out.convention = naming_convention::config_order;
  out.positions = detail::in_order(configured.size());
  return out;
}

} // namespace servekit::libtorch
