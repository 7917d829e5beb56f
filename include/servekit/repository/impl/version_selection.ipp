#pragma once
/// \file
/// Definitions for repository/detail/version_selection.hpp: version_folders and
/// select_versions. Compiled once into servekit::server, or included by version_selection.hpp
/// with SERVEKIT_HEADER_ONLY.

#include <servekit/core/config_error.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/repository/detail/version_selection.hpp>
#include <servekit/runtime/model_options.hpp>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace servekit::detail {

SERVEKIT_DECL std::vector<std::int64_t> version_folders(const std::filesystem::path& folder) {
  std::vector<std::int64_t> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it{folder, ec}, end; !ec && it != end;
       it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_directory(type_ec)) {
      continue;
    }
    const std::string name = it->path().filename().string();
    std::int64_t version = 0;
    const auto* first = name.data();
    const auto* last = name.data() + name.size();
    const auto [end_ptr, error] = std::from_chars(first, last, version);
    if (name.empty() || error != std::errc{} || end_ptr != last || name.front() == '-' ||
        name.front() == '+' || version < 1) {
      continue;
    }
    out.push_back(version);
  }
  std::sort(out.begin(), out.end());
  return out;
}

SERVEKIT_DECL version_selection select_versions(const std::optional<version_policy_options>& policy,
                                                const std::vector<std::int64_t>& available) {
  using kind = version_policy_options::kind_type;
  version_selection out;
  if (!policy || policy->kind == kind::latest) {
    const std::uint32_t n = policy ? policy->num_versions : 1U;
    if (n == 0) {
      throw config_error(config_error_code::bad_value, "/version_policy/latest/num_versions",
                         "num_versions must be at least 1 (0 would serve no version)");
    }
    const std::size_t take = std::min<std::size_t>(n, available.size());
    out.served.assign(available.end() - static_cast<std::ptrdiff_t>(take), available.end());
    return out;
  }
  if (policy->kind == kind::all) {
    out.served = available;
    return out;
  }
  if (policy->versions.empty()) {
    throw config_error(config_error_code::bad_value, "/version_policy/specific/versions",
                       "a specific version policy needs at least one version");
  }
  std::vector<std::int64_t> wanted = policy->versions;
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    if (wanted[i] < 1) {
      throw config_error(config_error_code::bad_value,
                         "/version_policy/specific/versions/" + std::to_string(i),
                         "version " + std::to_string(wanted[i]) +
                             " is not a version (versions are numbered from 1)");
    }
  }
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  for (const auto v : wanted) {
    (std::binary_search(available.begin(), available.end(), v) ? out.served : out.missing)
        .push_back(v);
  }
  return out;
}

} // namespace servekit::detail
