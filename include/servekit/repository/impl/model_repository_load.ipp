#pragma once
/// \file
/// Definitions for repository/model_repository.hpp: the repository's lifetime (constructor,
/// destructor, the reaper thread) and its writers, load_all, load and unload, with the table
/// they publish. Compiled once into servekit::server, or included by model_repository.hpp with
/// SERVEKIT_HEADER_ONLY.

#include <servekit/core/config_error.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/status.hpp>
#include <servekit/repository/any_model.hpp>
#include <servekit/repository/detail/model_reaper.hpp>
#include <servekit/repository/detail/repository_table.hpp>
#include <servekit/repository/loaded_model.hpp>
#include <servekit/repository/model_repository.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/runtime/model_ref.hpp>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace servekit {

SERVEKIT_DECL model_repository::model_repository(std::filesystem::path root, factory_type factory)
    : root_{std::move(root)}, factory_{std::move(factory)},
      reaper_{std::make_shared<detail::loaded_model_reaper>()},
      table_{std::make_shared<const detail::repository_table>()} {
  reaper_thread_ = detail::loaded_model_reaper::start(reaper_);
}

SERVEKIT_DECL model_repository::model_repository(std::filesystem::path root)
    : model_repository{std::move(root), [](const model_options& c) -> any_model {
                         throw config_error(config_error_code::bad_value, "/backend",
                                            "model '" + c.name +
                                                "' names a backend, and this repository has "
                                                "none: it serves the models the program adds");
                       }} {}

SERVEKIT_DECL model_repository::~model_repository() {
  {
    const std::lock_guard lock{write_mutex_};
    publish(detail::repository_table{});
  }
  if (reaper_->close()) {
    reaper_thread_.join();
  } else {
    // Models still held elsewhere: the thread ends after draining the last of them.
    reaper_thread_.detach();
  }
}

SERVEKIT_DECL std::vector<model_index_entry> model_repository::load_all() {
  const std::lock_guard lock{write_mutex_};
  detail::repository_table next = *snapshot();
  std::vector<std::string> names;
  std::error_code ec;
  // No root: only what the program adds (an empty path would scan the working directory).
  for (std::filesystem::directory_iterator it{root_, ec}, end; !root_.empty() && !ec && it != end;
       it.increment(ec)) {
    std::error_code type_ec;
    const std::string name = it->path().filename().string();
    if (it->is_directory(type_ec) && detail::is_model_folder_name(name)) {
      names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());

  // Read every config first, so that ensembles can be ordered and every model shows LOADING.
  std::vector<std::string> models;
  std::set<std::string, std::less<>> ensembles;
  for (const auto& name : names) {
    if (const auto r = next.find(name); r != next.end() && !r->second.registered.empty()) {
      continue; // the program registered the name first (add() refused it while it was a folder)
    }
    auto read = read_source(name);
    auto& entry = next[name];
    if (!read.source) {
      if (!entry.model) {
        entry = unreadable(name, read.error);
      }
      continue;
    }
    if (detail::is_ensemble_config(read.source->config)) {
      ensembles.insert(name);
    } else {
      models.push_back(name);
    }
    entry.source = std::move(read.source);
    mark_loading(entry);
  }
  publish(next);

  std::set<std::string, std::less<>> changed;
  for (const auto& name : models) {
    auto& entry = next[name];
    (void)build_versions(next, entry, /*keep_serving=*/true);
    changed.insert(name);
    publish(next);
  }
  // The program's registered versions that do not serve (unloaded, or failed to build).
  for (auto& [name, entry] : next) {
    for (const auto& [v, make] : entry.registered) {
      if (const auto e = entry.versions.find(v); e == entry.versions.end() || !e->second.model) {
        (void)build_registered(entry, name, v);
        changed.insert(name);
      }
    }
  }
  auto todo = dependents_of(next, changed);
  todo.insert(ensembles.begin(), ensembles.end());
  build_ensembles(next, todo);
  publish(next);
  return index_of(next);
}

SERVEKIT_DECL status model_repository::add(std::string_view name, std::int64_t version,
                                           servable_factory factory) {
  const std::string model_name{name};
  const std::string what =
      "cannot add version " + std::to_string(version) + " of model '" + model_name + "': ";
  if (!detail::is_model_folder_name(name)) {
    return invalid_argument(what + "a model name is one path component, not hidden (no '/', "
                                   "'\\', or leading '.')");
  }
  if (version < 1) {
    return invalid_argument(what + "versions are numbered from 1");
  }
  if (!factory) {
    return invalid_argument(what + "the factory is empty");
  }
  const std::lock_guard lock{write_mutex_};
  std::error_code ec;
  if (!root_.empty() && std::filesystem::is_directory(root_ / model_name, ec)) {
    return invalid_argument(what + "the model repository has a folder '" + model_name +
                            "' (a name belongs to a folder or to the program, not both)");
  }
  detail::repository_table next = *snapshot();
  auto& entry = next[model_name];
  if (entry.registered.empty()) {
    if (entry.model || entry.source) {
      return invalid_argument(what + "the model repository serves a model '" + model_name +
                              "' from its folder");
    }
    // What the index still shows of a folder since removed and unloaded (or unreadable) goes:
    // the name is the program's now.
    entry = {};
  } else if (entry.registered.contains(version)) {
    return invalid_argument(what + "that version is registered already");
  }
  entry.registered.emplace(version, std::move(factory));
  auto s = build_registered(entry, model_name, version);
  // Ensembles of the folders that use it, waiting for it or over its previous latest version.
  build_ensembles(next, dependents_of(next, {model_name}));
  publish(next);
  return s;
}

SERVEKIT_DECL status model_repository::build_registered(detail::repository_entry& entry,
                                                        std::string_view name,
                                                        std::optional<std::int64_t> only) {
  const std::string model_name{name};
  status first_error;
  for (const auto& [v, make] : entry.registered) {
    if (only && v != *only) {
      continue;
    }
    std::string reason;
    std::shared_ptr<const loaded_model> built;
    try {
      any_model servable = make();
      if (!servable) {
        reason = "the factory returned an empty any_model";
      } else if (const model_ref m = servable.ref(); m.name() != name) {
        reason = "the servable is named '" + std::string{m.name()} + "', not '" + model_name +
                 "' (name it so, e.g. with its options' `name`)";
      } else if (m.version() != v) {
        reason = "the servable is version " + std::to_string(m.version()) + ", not " +
                 std::to_string(v) + " (set its options' `version`)";
      } else {
        // The servable's own options when it has them (a model<...>: /config shows its
        // scheduling and instance groups), else the name and version; the tensors and
        // max_batch_size come from the servable (loaded_model completes them).
        model_options config =
            servable.options() != nullptr ? *servable.options() : model_options{};
        config.name = model_name;
        config.version = v;
        auto owned = std::make_unique<loaded_model>(
            std::move(config), std::filesystem::path{}, std::move(servable),
            std::vector<std::shared_ptr<const loaded_model>>{}, false);
        reaper_->track();
        built =
            std::shared_ptr<const loaded_model>{owned.release(), detail::retire_to_reaper{reaper_}};
      }
    } catch (const std::exception& e) {
      reason = e.what();
    }
    auto& e = entry.versions[v];
    if (built) {
      e = {{model_name, v, model_ready_state::ready, {}}, std::move(built)};
      continue;
    }
    reason = "version " + std::to_string(v) + " of model '" + model_name +
             "' (registered by the program) failed to build: " + reason;
    if (first_error.ok()) {
      first_error = invalid_argument(reason);
    }
    if (!e.model) {
      e.info = {model_name, v, model_ready_state::unavailable, std::move(reason)};
    }
  }
  entry.refresh();
  return first_error;
}

SERVEKIT_DECL status model_repository::load(std::string_view name) {
  const std::lock_guard lock{write_mutex_};
  if (const auto table = snapshot();
      table->contains(name) && !table->find(name)->second.registered.empty()) {
    // A servable the program registered: built again with its factories, next to the serving
    // versions, as a folder's model is.
    std::error_code ec;
    if (!root_.empty() && std::filesystem::is_directory(root_ / std::string{name}, ec)) {
      return invalid_argument("failed to load '" + std::string{name} +
                              "': the program registered the model and the model repository now "
                              "has a folder of that name; rename or remove one");
    }
    detail::repository_table next = *table;
    auto& entry = next.find(name)->second;
    const auto before = serving_versions(entry);
    auto s = build_registered(entry, name);
    if (serving_versions(entry) != before) {
      build_ensembles(next, dependents_of(next, {std::string{name}}));
    }
    publish(next);
    return s;
  }
  auto read = read_source(name);
  if (read.error.code() == status_code::not_found || !detail::is_model_folder_name(name)) {
    // Not a model (no such folder, a hidden one, a bad name): the table, and so the index and
    // readiness, stay as they are.
    return read.error;
  }
  detail::repository_table next = *snapshot();
  auto& entry = next[std::string{name}];
  if (!read.source) {
    if (entry.model) {
      return read.error; // the serving versions keep serving
    }
    entry = unreadable(std::string{name}, read.error);
    publish(next);
    return read.error;
  }
  entry.source = std::move(read.source);
  if (mark_loading(entry)) {
    publish(next);
  }
  const auto before = serving_versions(entry);
  auto s = build_versions(next, entry, /*keep_serving=*/true);
  if (serving_versions(entry) != before) {
    build_ensembles(next, dependents_of(next, {std::string{name}}));
  }
  publish(next);
  return s;
}

SERVEKIT_DECL status model_repository::unload(std::string_view name, bool unload_dependents) {
  const std::lock_guard lock{write_mutex_};
  detail::repository_table next = *snapshot();
  const auto it = next.find(name);
  if (it == next.end() || (!it->second.model && !failed_to_load(it->second))) {
    return not_found("failed to unload '" + std::string{name} + "': the model is not loaded");
  }
  // A model that failed to load is unloaded too: it is no longer meant to be served, so it no
  // longer holds readiness (a poll unloads a broken folder that was removed).
  unpublish(it->second);
  auto dependents = dependents_of(next, {std::string{name}});
  if (unload_dependents) {
    // Triton's unload_dependents: the ensembles using the model are unloaded with it, so that
    // loading the model again does not bring them back.
    for (const auto& d : dependents) {
      unpublish(next.find(d)->second);
    }
  } else {
    build_ensembles(next, dependents);
  }
  publish(next);
  return {};
}

SERVEKIT_DECL void model_repository::unpublish(detail::repository_entry& entry) {
  for (auto& [v, e] : entry.versions) {
    e.model.reset();
    e.info.state = model_ready_state::unavailable;
    e.info.reason = unloaded_reason;
  }
  if (entry.versions.empty()) {
    entry.info.state = model_ready_state::unavailable;
    entry.info.reason = unloaded_reason;
  }
  entry.source.reset();
  entry.refresh();
}

SERVEKIT_DECL bool model_repository::failed_to_load(const detail::repository_entry& entry) {
  if (entry.versions.empty()) {
    return entry.info.reason != unloaded_reason;
  }
  return std::any_of(entry.versions.begin(), entry.versions.end(),
                     [](const auto& v) { return v.second.info.reason != unloaded_reason; });
}

SERVEKIT_DECL void model_repository::publish(const detail::repository_table& next) {
  auto fresh = std::make_shared<const detail::repository_table>(next);
  std::shared_ptr<const detail::repository_table> old;
  {
    const std::unique_lock lock{read_mutex_};
    old = std::exchange(table_, std::move(fresh));
  }
}

SERVEKIT_DECL detail::repository_entry model_repository::unreadable(std::string name,
                                                                    const status& error) {
  detail::repository_entry out;
  out.info = {std::move(name), 0, model_ready_state::unavailable, error.message()};
  return out;
}

SERVEKIT_DECL bool model_repository::mark_loading(detail::repository_entry& entry) {
  bool changed = false;
  for (const auto v : entry.source->versions) {
    auto& e = entry.versions[v];
    if (!e.model) {
      e.info = {entry.source->config.name, v, model_ready_state::loading, {}};
      changed = true;
    }
  }
  entry.refresh();
  return changed;
}

SERVEKIT_DECL std::vector<std::pair<std::int64_t, const loaded_model*>>
model_repository::serving_versions(const detail::repository_entry& entry) {
  std::vector<std::pair<std::int64_t, const loaded_model*>> out;
  for (const auto& [v, e] : entry.versions) {
    out.emplace_back(v, e.model.get());
  }
  return out;
}
} // namespace servekit
