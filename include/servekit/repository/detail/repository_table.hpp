#pragma once
/// \file
/// The tables behind model_repository (repository/model_repository.hpp): what a model folder
/// says (model_source), each model's versions (repository_entry), and the helpers its
/// implementation files share. Included by repository/impl/*.ipp only; it does not include
/// model_repository.hpp, whose implementation files (SERVEKIT_HEADER_ONLY) need it complete.

#include <servekit/repository/any_model.hpp>
#include <servekit/repository/detail/model_reaper.hpp>
#include <servekit/repository/loaded_model.hpp>
#include <servekit/runtime/model_options.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace servekit::detail {

/// What a model folder says: its parsed configuration, where it came from, and the versions its
/// version_policy selects among its version folders.
struct model_source {
  /// As read; `version` and `directory` are those of the latest selected version.
  model_options config;
  std::filesystem::path config_file;
  /// The selected versions that have a folder (or version 1 of a model without version
  /// folders), ascending.
  std::vector<std::int64_t> versions;
  /// Versions a `specific` policy names that have no folder, with the index row's reason.
  std::vector<std::pair<std::int64_t, std::string>> missing;
  /// Whether the model has version folders (else version 1 lives in the model folder itself).
  bool version_folders = false;

  /// How messages name the config file: within the repository (`<model>/config.pbtxt` or
  /// `<model>/config.json`), never by the host path, since index reasons and load errors reach
  /// clients.
  [[nodiscard]] std::string shown_config_file() const {
    return config.name + "/" + config_file.filename().string();
  }

  /// The configuration of version `v`: the same fields, its version and its folder.
  [[nodiscard]] model_options config_for(std::int64_t v) const {
    model_options out = config;
    out.version = v;
    const auto folder = config_file.parent_path();
    out.directory = (version_folders ? folder / std::to_string(v) : folder).string();
    return out;
  }
};

/// One version of a model in the repository's table.
struct version_entry {
  model_index_entry info;
  /// Set while the version serves (READY; also while a reload builds its successor).
  std::shared_ptr<const loaded_model> model;
};

/// A model in the repository's table.
struct repository_entry {
  /// The model's summary row (status_of(name)): the latest serving version's row; if none
  /// serves, the latest version's row (preferring one not unloaded); with no versions (an
  /// unreadable config), why.
  model_index_entry info;
  /// The latest serving version (find(name) and find(name, -1)), or null.
  std::shared_ptr<const loaded_model> model;
  /// Every version the repository built or was asked for, by version.
  std::map<std::int64_t, version_entry> versions;
  /// The configuration last read, when it parsed: lets an ensemble be rebuilt when its
  /// composing models change. Cleared by unload, so an unloaded ensemble stays unloaded.
  std::shared_ptr<const model_source> source;
  /// For a model the program registered (model_repository::add) rather than a folder: how to
  /// build each version. Kept by unload, so that load builds it again.
  std::map<std::int64_t, std::function<any_model()>> registered;

  /// Recomputes `model` and `info` from `versions` (after any change to them).
  void refresh() {
    model.reset();
    for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
      if (it->second.model) {
        model = it->second.model;
        info = it->second.info;
        return;
      }
    }
    const version_entry* latest = nullptr;
    for (auto it = versions.rbegin(); it != versions.rend() && latest == nullptr; ++it) {
      if (it->second.info.reason != unloaded_reason) {
        latest = &it->second;
      }
    }
    if (latest == nullptr && !versions.empty()) {
      latest = &versions.rbegin()->second;
    }
    if (latest != nullptr) {
      info = latest->info;
    }
  }

  /// The index rows: one per version, ascending; the summary row when there is none.
  void append_rows(std::vector<model_index_entry>& out) const {
    if (versions.empty()) {
      out.push_back(info);
      return;
    }
    for (const auto& [v, e] : versions) {
      out.push_back(e.info);
    }
  }
};

/// Sorted by name, so the index and ready_models() come out sorted (also declared by
/// model_repository.hpp, which does not include this header).
using repository_table = std::map<std::string, repository_entry, std::less<>>;

[[nodiscard]] inline bool is_ensemble_config(const model_options& c) noexcept {
  return c.platform == "ensemble" || c.ensemble_scheduling.has_value();
}

/// The deleter of published models: hands the object to the reaper thread (see
/// detail/model_reaper.hpp for why it must not be destroyed where it is dropped).
struct retire_to_reaper {
  std::shared_ptr<loaded_model_reaper> reaper;
  void operator()(const loaded_model* m) const noexcept {
    // The repository created it non-const; only published handles are const.
    reaper->retire(const_cast<loaded_model*>(m)); // NOLINT(cppcoreguidelines-pro-type-const-cast)
  }
};

/// Whether `name` can name a folder of the repository: one path component, not "." or "..", so
/// that a name from a request cannot reach outside the repository.
[[nodiscard]] inline bool is_path_component(std::string_view name) noexcept {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string_view{"/\\\0", 3}) == std::string_view::npos;
}

/// Whether `name` can be a model folder's name: a path component that is not hidden (a
/// dot-folder such as `.cache` or `.git` is never a model, as the index never lists one).
[[nodiscard]] inline bool is_model_folder_name(std::string_view name) noexcept {
  return is_path_component(name) && name.front() != '.';
}

} // namespace servekit::detail
