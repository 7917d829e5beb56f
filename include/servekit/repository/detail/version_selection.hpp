#pragma once
/// \file
/// Which versions of a model a repository serves: the numeric version folders of a model folder
/// and Triton's version_policy over them (latest N, all, specific). Pure functions, no state;
/// compiled once into servekit::server (repository/impl/version_selection.ipp).

#include <servekit/core/config_error.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/runtime/model_options.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace servekit::detail {

/// The numeric subfolders of `folder` (Triton's version folders: "1", "2", ...; no sign, no
/// leading junk, >= 1), ascending. Other entries ("notes", "-1", files) are not versions.
[[nodiscard]] SERVEKIT_DECL std::vector<std::int64_t>
version_folders(const std::filesystem::path& folder);

/// The versions a policy asks for, ascending and without duplicates, split into those that have
/// a folder (`served`) and those named by a `specific` policy that do not (`missing`: each is
/// reported UNAVAILABLE, as Triton reports a version it fails to load).
struct version_selection {
  std::vector<std::int64_t> served;
  std::vector<std::int64_t> missing;
  friend bool operator==(const version_selection&, const version_selection&) = default;
};

/// Applies `policy` (unset: `latest { num_versions: 1 }`, Triton's default) to the versions
/// `available` (ascending, as version_folders returns them). Throws config_error at the policy's
/// field for a policy that can never serve anything: `latest` with num_versions 0, `specific`
/// without versions or with a version < 1.
[[nodiscard]] SERVEKIT_DECL version_selection
select_versions(const std::optional<version_policy_options>& policy,
                const std::vector<std::int64_t>& available);

} // namespace servekit::detail

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/repository/impl/version_selection.ipp>
#endif
