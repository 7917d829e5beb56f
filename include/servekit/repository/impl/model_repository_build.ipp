#pragma once
/// \file
/// Definitions for repository/model_repository.hpp: building models, their versions and the
/// ensembles over them (build, build_versions, dependents_of, build_ensembles). Compiled once
/// into servekit::server, or included by model_repository.hpp with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/status.hpp>
#include <servekit/ensemble/runtime_ensemble.hpp>
#include <servekit/repository/any_model.hpp>
#include <servekit/repository/detail/model_reaper.hpp>
#include <servekit/repository/detail/repository_table.hpp>
#include <servekit/repository/model_repository.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/runtime/model_registry.hpp>
#include <servekit/schedule/ensemble_scheduling_options.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace servekit {

namespace detail {

/// `message` with every mention of the repository's folder `root` taken out, so that a file a
/// backend names (`<root>/m/1/model.onnx`) reads as within the repository (`m/1/model.onnx`):
/// messages reach clients, who have no business knowing the host's paths.
[[nodiscard]] inline std::string within_repository(std::string message,
                                                   const std::filesystem::path& root) {
  if (root.empty()) {
    return message;
  }
  const std::string prefix = (root / "").string(); // with its trailing separator
  for (std::size_t at = message.find(prefix); at != std::string::npos;
       at = message.find(prefix, at)) {
    message.erase(at, prefix.size());
  }
  return message;
}

} // namespace detail

SERVEKIT_DECL status model_repository::build_versions(const detail::repository_table& table,
                                                      detail::repository_entry& entry,
                                                      bool keep_serving) {
  const auto& source = *entry.source;
  const std::string& name = source.config.name;
  status first_error;
  const auto fail = [&](std::string reason) {
    if (first_error.ok()) {
      first_error = invalid_argument(reason);
    }
    return reason;
  };
  std::map<std::int64_t, detail::version_entry> next;
  // Versions that served (or were unloaded) and left the policy stay in the index, unloaded.
  for (const auto& [v, e] : entry.versions) {
    if (e.model || e.info.reason == unloaded_reason) {
      next[v] = {{name, v, model_ready_state::unavailable, std::string{unloaded_reason}}, nullptr};
    }
  }
  for (const auto& [v, reason] : source.missing) {
    next[v] = {{name, v, model_ready_state::unavailable, fail(reason)}, nullptr};
  }
  for (const auto v : source.versions) {
    const auto old = entry.versions.find(v);
    auto serving = keep_serving && old != entry.versions.end() ? old->second.model : nullptr;
    try {
      // Built before the entry is: with `build` inside the braces, g++ 12 destroys the already
      // constructed index row twice when it throws (a double free for a name beyond the
      // small-string buffer; GCC PR 66139, fixed in 13).
      auto built = build(source, v, table);
      next[v] = {{name, v, model_ready_state::ready, {}}, std::move(built)};
    } catch (const std::exception& e) {
      // config_error's what() is "<JSON pointer>: <message>"; a backend's is its own text.
      auto reason =
          fail(source.shown_config_file() + ": " + detail::within_repository(e.what(), root_));
      if (serving) {
        next[v] = {old->second.info, std::move(serving)};
      } else {
        next[v] = {{name, v, model_ready_state::unavailable, std::move(reason)}, nullptr};
      }
    }
  }
  entry.versions = std::move(next);
  entry.refresh();
  return first_error;
}

SERVEKIT_DECL std::shared_ptr<const loaded_model>
model_repository::build(const detail::model_source& source, std::int64_t version,
                        const detail::repository_table& table) {
  const model_options config = source.config_for(version);
  std::unique_ptr<loaded_model> built;
  if (detail::is_ensemble_config(config)) {
    // The ensemble keeps model_refs, so it holds the composing models' shared_ptrs: they live
    // until it is destroyed, whatever the repository publishes meanwhile.
    model_registry registry;
    std::vector<std::shared_ptr<const loaded_model>> composing;
    if (config.ensemble_scheduling) {
      for (const auto& step : config.ensemble_scheduling->step) {
        // -1: the latest version served; else that version, if it serves.
        std::shared_ptr<const loaded_model> target;
        if (const auto it = table.find(step.model_name); it != table.end()) {
          if (step.model_version == -1) {
            target = it->second.model;
          } else if (const auto v = it->second.versions.find(step.model_version);
                     v != it->second.versions.end()) {
            target = v->second.model;
          }
        }
        if (!target) {
          continue; // runtime_ensemble names the step and the model it misses
        }
        if (std::find(composing.begin(), composing.end(), target) == composing.end()) {
          registry.add(target->model());
          composing.push_back(std::move(target));
        }
      }
    }
    auto ensemble = any_model::make<runtime_ensemble>(config, registry, environment_.cache.get());
    built = std::make_unique<loaded_model>(config, source.config_file, std::move(ensemble),
                                           std::move(composing), true);
  } else {
    built =
        std::make_unique<loaded_model>(config, source.config_file, factory_(config),
                                       std::vector<std::shared_ptr<const loaded_model>>{}, false);
  }
  reaper_->track();
  // If the control block cannot be allocated, shared_ptr calls the deleter: the reaper gets
  // the model all the same.
  return std::shared_ptr<const loaded_model>{built.release(), detail::retire_to_reaper{reaper_}};
}

SERVEKIT_DECL std::set<std::string, std::less<>>
model_repository::dependents_of(const detail::repository_table& table,
                                const std::set<std::string, std::less<>>& changed) {
  std::set<std::string, std::less<>> reached = changed;
  std::set<std::string, std::less<>> out;
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [name, entry] : table) {
      if (!entry.source || !detail::is_ensemble_config(entry.source->config) ||
          !entry.source->config.ensemble_scheduling || reached.contains(name)) {
        continue;
      }
      for (const auto& step : entry.source->config.ensemble_scheduling->step) {
        if (reached.contains(step.model_name)) {
          reached.insert(name);
          out.insert(name);
          grew = true;
          break;
        }
      }
    }
  }
  return out;
}

SERVEKIT_DECL void
model_repository::build_ensembles(detail::repository_table& table,
                                  const std::set<std::string, std::less<>>& todo) {
  enum class mark : std::uint8_t { visiting, done };
  std::map<std::string, mark, std::less<>> marks;
  const std::function<void(const std::string&)> visit = [&](const std::string& name) {
    marks[name] = mark::visiting;
    auto& entry = table[name];
    const auto& source = *entry.source;
    std::string cycle;
    static const std::vector<ensemble_step_options> no_steps;
    const auto& steps =
        source.config.ensemble_scheduling ? source.config.ensemble_scheduling->step : no_steps;
    for (std::size_t s = 0; s < steps.size() && cycle.empty(); ++s) {
      const auto& step = steps[s].model_name;
      if (!todo.contains(step)) {
        continue;
      }
      const auto m = marks.find(step);
      if (m == marks.end()) {
        visit(step);
      } else if (m->second == mark::visiting) {
        cycle = source.shown_config_file() + ": /ensemble_scheduling/step/" + std::to_string(s) +
                "/model_name: ensemble '" + name + "' uses ensemble '" + step + "', which uses '" +
                name + "' (a cycle)";
      }
    }
    if (!cycle.empty()) {
      for (const auto v : source.versions) {
        entry.versions[v];
      }
      for (auto& [v, e] : entry.versions) {
        e.model.reset();
        e.info = {name, v, model_ready_state::unavailable, cycle};
      }
      entry.refresh();
    } else {
      // Never keep an ensemble over composing models being replaced.
      (void)build_versions(table, entry, /*keep_serving=*/false);
    }
    marks[name] = mark::done;
  };
  for (const auto& name : todo) {
    if (!marks.contains(name)) {
      visit(name);
    }
  }
}
} // namespace servekit
