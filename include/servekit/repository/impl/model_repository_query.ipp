#pragma once
/// \file
/// Definitions for repository/model_repository.hpp: what readers see (find, versions_of,
/// status_of, index, all_ready, ready_models) and the shutdown helpers. Compiled once into
/// servekit::server, or included by model_repository.hpp with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/repository/detail/model_reaper.hpp>
#include <servekit/repository/detail/repository_table.hpp>
#include <servekit/repository/model_repository.hpp>
#include <servekit/runtime/shutdown_mode.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string_view>
#include <vector>

namespace servekit {

SERVEKIT_DECL std::shared_ptr<const loaded_model>
model_repository::find(std::string_view name, std::int64_t version) const {
  const std::shared_lock lock{read_mutex_};
  const auto it = table_->find(name);
  if (it == table_->end()) {
    return nullptr;
  }
  if (version == -1) {
    return it->second.model;
  }
  const auto v = it->second.versions.find(version);
  return v == it->second.versions.end() ? nullptr : v->second.model;
}

SERVEKIT_DECL std::vector<std::int64_t> model_repository::versions_of(std::string_view name) const {
  const auto table = snapshot();
  std::vector<std::int64_t> out;
  if (const auto it = table->find(name); it != table->end()) {
    for (const auto& [v, e] : it->second.versions) {
      if (e.model) {
        out.push_back(v);
      }
    }
  }
  return out;
}

SERVEKIT_DECL std::optional<model_index_entry>
model_repository::status_of(std::string_view name) const {
  const auto table = snapshot();
  const auto it = table->find(name);
  if (it == table->end()) {
    return std::nullopt;
  }
  return it->second.info;
}

SERVEKIT_DECL std::optional<model_index_entry>
model_repository::status_of(std::string_view name, std::int64_t version) const {
  const auto table = snapshot();
  const auto it = table->find(name);
  if (it == table->end()) {
    return std::nullopt;
  }
  if (version == -1) {
    return it->second.info;
  }
  if (const auto v = it->second.versions.find(version); v != it->second.versions.end()) {
    return v->second.info;
  }
  if (it->second.versions.empty() && it->second.info.version == version) {
    return it->second.info;
  }
  return std::nullopt;
}

SERVEKIT_DECL std::vector<model_index_entry> model_repository::index() const {
  return index_of(*snapshot());
}

SERVEKIT_DECL bool model_repository::all_ready() const {
  const auto rows = index();
  return std::all_of(rows.begin(), rows.end(), [](const model_index_entry& e) {
    return e.state == model_ready_state::ready || e.reason == unloaded_reason;
  });
}

SERVEKIT_DECL std::vector<std::shared_ptr<const loaded_model>>
model_repository::ready_models() const {
  const auto table = snapshot();
  std::vector<std::shared_ptr<const loaded_model>> out;
  for (const auto& [name, entry] : *table) {
    for (const auto& [v, e] : entry.versions) {
      if (e.model) {
        out.push_back(e.model);
      }
    }
  }
  return out;
}

SERVEKIT_DECL void model_repository::shutdown_decoupled_models(shutdown_mode mode) const {
  const auto models = ready_models();
  for (const bool ensembles : {false, true}) {
    for (const auto& m : models) {
      if (m->is_ensemble() == ensembles && m->model().decoupled()) {
        const_cast<loaded_model&>(*m).shutdown(mode); // NOLINT: shutdown is thread-safe
      }
    }
  }
}

SERVEKIT_DECL void model_repository::wait_retired() const { reaper_->wait_idle(); }

SERVEKIT_DECL std::shared_ptr<const detail::repository_table> model_repository::snapshot() const {
  const std::shared_lock lock{read_mutex_};
  return table_;
}

SERVEKIT_DECL std::vector<model_index_entry>
model_repository::index_of(const detail::repository_table& table) {
  std::vector<model_index_entry> out;
  out.reserve(table.size());
  for (const auto& [name, entry] : table) {
    entry.append_rows(out);
  }
  return out;
}
} // namespace servekit
