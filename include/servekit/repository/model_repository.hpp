#pragma once
/// \file
/// model_repository: Triton's model repository over a directory. Each model is a folder
/// `<root>/<model>/` holding `config.json` (Triton's model configuration as JSON) and optional
/// numeric version folders `<root>/<model>/<N>/`. The config's `version_policy` (Triton's: latest
/// N, default 1; all; specific) picks the versions served, each its own model built from the
/// same config with its own `version` and `directory`; a model without version folders serves
/// version 1 from its folder.
///
///     servekit::model_repository models{"models", bundled_backends{}};
///     for (const auto& entry : models.load_all()) { ... }  // one row per version; UNAVAILABLE say
///     why if (auto m = models.find("add_sub")) {               // the latest served version
///       (void)m->model().submit(std::move(request), sink);
///     }
///     models.versions_of("add_sub");                       // the READY versions, ascending
///
/// Models are built by a backend_list (`config.backend` picks the backend, the scheduling fields
/// the composition); ensembles (`"platform": "ensemble"`) are built as runtime_ensembles over the
/// loaded models. Loading a model again builds the versions its policy now names next to the
/// serving ones, publishes them together, and retires the old ones (and the versions that left
/// the policy), which finish what they accepted on a background thread.

#include <servekit/config/model_config_json.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/status.hpp>
#include <servekit/ensemble/runtime_ensemble.hpp>
#include <servekit/repository/any_model.hpp>
#include <servekit/repository/detail/model_reaper.hpp>
#include <servekit/repository/detail/version_selection.hpp>
#include <servekit/runtime/model_environment.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/runtime/model_ref.hpp>
#include <servekit/runtime/model_registry.hpp>
#include <servekit/runtime/resolved_config.hpp>
#include <servekit/runtime/shutdown_mode.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace servekit {

/// The index reason of a model unloaded on request (Triton's): readiness does not wait for it.
inline constexpr std::string_view unloaded_reason = "unloaded";

/// A model's state in the repository index (Triton's names).
enum class model_state : std::uint8_t {
  loading,     ///< being built for the first time
  ready,       ///< serving
  unavailable, ///< not serving: failed to load, or unloaded (`reason` says which)
  unloading,   ///< reserved for Triton's state; retired models drain in the background instead
};

/// "LOADING", "READY", "UNAVAILABLE", "UNLOADING", as Triton's repository index spells them.
[[nodiscard]] constexpr std::string_view to_string(model_state s) noexcept {
  switch (s) {
  case model_state::loading:
    return "LOADING";
  case model_state::ready:
    return "READY";
  case model_state::unavailable:
    return "UNAVAILABLE";
  case model_state::unloading:
    return "UNLOADING";
  }
  return "UNKNOWN";
}

/// One row of the repository index: one version of a model (or, when its config cannot be read,
/// the model with version 0).
struct model_index_entry {
  std::string name;
  std::int64_t version = 0; ///< 0 when unknown (e.g. an unreadable config)
  model_state state = model_state::unavailable;
  std::string reason; ///< why it is not ready: "<config.json>: <JSON pointer>: <message>"
  friend bool operator==(const model_index_entry&, const model_index_entry&) = default;
};

class loaded_model;

namespace detail {
using loaded_model_reaper = model_reaper<loaded_model>;
}

/// A model as the repository published it: immutable, shared by `std::shared_ptr<const
/// loaded_model>` with everything using it. Holding one keeps the model serving (a reload or an
/// unload only unpublishes it); when the last holder lets go, the repository's reaper thread
/// drains and destroys it.
class loaded_model {
public:
  /// The configuration as loaded (name, version, backend or platform, inputs, outputs,
  /// scheduling, `directory`), with `instance_group` as placed: KIND_AUTO resolved to KIND_GPU
  /// or KIND_CPU, as Triton's config endpoint shows it.
  [[nodiscard]] const model_options& config() const noexcept { return config_; }
  /// The model: submit, cancel, statistics, name, version, inputs, outputs.
  [[nodiscard]] model_ref model() const noexcept { return servable_.ref(); }
  /// The config.json it was loaded from.
  [[nodiscard]] const std::filesystem::path& config_file() const noexcept { return config_file_; }
  /// Whether it is an ensemble (a runtime_ensemble over composing models).
  [[nodiscard]] bool is_ensemble() const noexcept { return ensemble_; }
  /// For an ensemble, the composing models it runs on (kept alive as long as it is).
  [[nodiscard]] const std::vector<std::shared_ptr<const loaded_model>>&
  composing_models() const noexcept {
    return composing_;
  }
  /// The servable itself (e.g. `servable().get<servekit::model<B, P>>()` in tests).
  [[nodiscard]] const any_model& servable() const noexcept { return servable_; }

  /// Built by model_repository (public for std::make_unique).
  loaded_model(model_options config, std::filesystem::path config_file, any_model servable,
               std::vector<std::shared_ptr<const loaded_model>> composing, bool ensemble)
      : config_{std::move(config)}, config_file_{std::move(config_file)},
        composing_{std::move(composing)}, servable_{std::move(servable)}, ensemble_{ensemble} {
    // Serve the instance groups as placed (KIND_AUTO resolved, GPU lists filled), as Triton's
    // config endpoint does.
    if (const model_options* running = servable_.options(); running != nullptr && !ensemble_) {
      config_.instance_group = running->instance_group;
    }
  }

  loaded_model(const loaded_model&) = delete;
  loaded_model& operator=(const loaded_model&) = delete;
  ~loaded_model() = default;

private:
  friend class detail::model_reaper<loaded_model>;
  friend class model_repository; // shutdown_decoupled_models

  void shutdown(shutdown_mode mode) { servable_.shutdown(mode); }

  model_options config_;
  std::filesystem::path config_file_;
  // Declared before servable_, so destroyed after it: an ensemble drains before the models it
  // submits to may go.
  std::vector<std::shared_ptr<const loaded_model>> composing_;
  any_model servable_;
  bool ensemble_ = false;
  loaded_model* next_retired_ = nullptr; // the reaper's queue link
};

namespace detail {

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

/// Sorted by name, so the index and ready_models() come out sorted.
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

/// Whether `name` can be a model folder's name: one path component, no "." or "..", so that a
/// name from a request cannot reach outside the repository.
[[nodiscard]] inline bool is_model_folder_name(std::string_view name) noexcept {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string_view{"/\\\0", 3}) == std::string_view::npos;
}

} // namespace detail

/// Triton's model repository over `root` (see the file comment). Thread-safe: find(),
/// status_of(), index() and friends may run on many threads while load() and unload() run
/// (these serialise among themselves).
///
/// Destroy whatever submits to its models (the HTTP front end) before the repository: its
/// destructor unpublishes every model and waits until those nothing else holds are drained and
/// destroyed. A model still held elsewhere then is drained by the reaper thread when its last
/// holder lets go, as before.
class model_repository {
public:
  /// Builds a non-ensemble model from its configuration (a backend_list's `make`).
  using factory_type = std::function<any_model(const model_options&)>;

  /// A repository serving the backends of `Backends` (a backend_list). Test hooks
  /// (SERVEKIT_DELAY_SCHEDULER...) come from the environment.
  template <class Backends>
    requires requires(const model_options& c) {
      { Backends::make(c) } -> std::same_as<any_model>;
    }
  model_repository(std::filesystem::path root, Backends /*backends*/)
      : model_repository{std::move(root),
                         factory_type{[](const model_options& c) { return Backends::make(c); }}} {}

  /// The same, with explicit test hooks for every model it builds.
  template <class Backends>
    requires requires(const model_options& c, const test_hooks& h) {
      { Backends::make(c, h) } -> std::same_as<any_model>;
    }
  model_repository(std::filesystem::path root, Backends /*backends*/, test_hooks hooks)
      : model_repository{std::move(root), factory_type{[hooks](const model_options& c) {
                           return Backends::make(c, hooks);
                         }}} {}

  /// The same, giving every model it builds `environment` (the server's rate limiter and
  /// response cache; ensembles use its cache too).
  template <class Backends>
    requires requires(const model_options& c, const test_hooks& h, const model_environment& e) {
      { Backends::make(c, h, e) } -> std::same_as<any_model>;
    }
  model_repository(std::filesystem::path root, Backends /*backends*/, test_hooks hooks,
                   model_environment environment)
      : model_repository{std::move(root),
                         factory_type{[hooks, environment](const model_options& c) {
                           return Backends::make(c, hooks, environment);
                         }}} {
    environment_ = std::move(environment);
  }

  /// A repository building its non-ensemble models with `factory`.
  model_repository(std::filesystem::path root, factory_type factory)
      : root_{std::move(root)}, factory_{std::move(factory)},
        reaper_{std::make_shared<detail::loaded_model_reaper>()},
        table_{std::make_shared<const detail::repository_table>()} {
    reaper_thread_ = detail::loaded_model_reaper::start(reaper_);
  }

  model_repository(const model_repository&) = delete;
  model_repository& operator=(const model_repository&) = delete;

  /// Unpublishes every model and waits until the reaper has drained and destroyed those that
  /// nothing else holds. Destroy the HTTP front end (anything calling find()) first.
  ~model_repository() {
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

  [[nodiscard]] const std::filesystem::path& root() const noexcept { return root_; }

  /// Scans the root and loads every model folder (the versions its version_policy selects):
  /// non-ensembles first, then ensembles in dependency order. A version that fails is recorded as
  /// UNAVAILABLE with the reason; a version already serving that fails to reload keeps serving.
  /// Returns the index.
  std::vector<model_index_entry> load_all() {
    const std::lock_guard lock{write_mutex_};
    detail::repository_table next = *snapshot();
    std::vector<std::string> names;
    std::error_code ec;
    for (std::filesystem::directory_iterator it{root_, ec}, end; !ec && it != end;
         it.increment(ec)) {
      std::error_code type_ec;
      const std::string name = it->path().filename().string();
      if (it->is_directory(type_ec) && detail::is_model_folder_name(name) && name.front() != '.') {
        names.push_back(name);
      }
    }
    std::sort(names.begin(), names.end());

    // Read every config first, so that ensembles can be ordered and every model shows LOADING.
    std::vector<std::string> models;
    std::set<std::string, std::less<>> ensembles;
    for (const auto& name : names) {
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
    auto todo = dependents_of(next, changed);
    todo.insert(ensembles.begin(), ensembles.end());
    build_ensembles(next, todo);
    publish(next);
    return index_of(next);
  }

  /// Triton's repository load: re-reads `<root>/<name>/config.json` and its version folders,
  /// builds every version the version_policy now selects next to the serving ones and publishes
  /// them together; versions that left the policy are unpublished (UNAVAILABLE, "unloaded").
  /// Requests an old model accepted finish there, and it is drained and destroyed on the reaper
  /// thread once nothing refers to it. Ensembles using the model are rebuilt over the new
  /// versions. Errors: not_found (no such model folder), invalid_argument (a bad config, a
  /// version that failed to build or a `specific` version without a folder: the first such
  /// reason, naming the file and JSON path); a version that serves and fails to rebuild keeps
  /// serving, and the versions that built are published all the same.
  status load(std::string_view name) {
    const std::lock_guard lock{write_mutex_};
    auto read = read_source(name);
    if (read.error.code() == status_code::not_found) {
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

  /// Triton's repository unload: unpublishes every version of the model (state UNAVAILABLE,
  /// reason "unloaded"); they drain in the background. Ensembles using it become UNAVAILABLE,
  /// naming it. not_found if no version of it is loaded.
  status unload(std::string_view name) {
    const std::lock_guard lock{write_mutex_};
    detail::repository_table next = *snapshot();
    const auto it = next.find(name);
    if (it == next.end() || !it->second.model) {
      return not_found("failed to unload '" + std::string{name} + "': the model is not loaded");
    }
    auto& entry = it->second;
    for (auto& [v, e] : entry.versions) {
      e.model.reset();
      e.info.state = model_state::unavailable;
      e.info.reason = unloaded_reason;
    }
    entry.source.reset();
    entry.refresh();
    build_ensembles(next, dependents_of(next, {std::string{name}}));
    publish(next);
    return {};
  }

  /// The READY model `name` at `version` (-1: the latest version served), else null.
  /// Per request: takes a shared lock for one or two map lookups and a reference-count
  /// increment.
  [[nodiscard]] std::shared_ptr<const loaded_model> find(std::string_view name,
                                                         std::int64_t version = -1) const {
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

  /// The versions of `name` that are READY, ascending (Triton's model metadata "versions");
  /// empty if none is (or the repository never saw it).
  [[nodiscard]] std::vector<std::int64_t> versions_of(std::string_view name) const {
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

  /// The summary row of `name`, in any state: its latest serving version's row, else its latest
  /// version's row saying why it does not serve; nullopt if the repository never saw it.
  [[nodiscard]] std::optional<model_index_entry> status_of(std::string_view name) const {
    const auto table = snapshot();
    const auto it = table->find(name);
    if (it == table->end()) {
      return std::nullopt;
    }
    return it->second.info;
  }

  /// The index row of version `version` of `name` (-1: the summary row, as status_of(name));
  /// nullopt if the repository never saw that version.
  [[nodiscard]] std::optional<model_index_entry> status_of(std::string_view name,
                                                           std::int64_t version) const {
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

  /// Every version of every model the repository knows (Triton's index), sorted by name, then
  /// version.
  [[nodiscard]] std::vector<model_index_entry> index() const { return index_of(*snapshot()); }

  /// Whether every index row is READY, leaving out versions unloaded on request or by a version
  /// policy (Triton's strict readiness: an explicit unload must not take the server out of
  /// service); true when there is none.
  [[nodiscard]] bool all_ready() const {
    const auto rows = index();
    return std::all_of(rows.begin(), rows.end(), [](const model_index_entry& e) {
      return e.state == model_state::ready || e.reason == unloaded_reason;
    });
  }

  /// The READY models, every version, sorted by name, then version.
  [[nodiscard]] std::vector<std::shared_ptr<const loaded_model>> ready_models() const {
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

  /// Stops every published decoupled model (composing models before ensembles), answering
  /// what each still owes as `mode` says; they stay published but accept nothing more. The
  /// server calls it with `cancel` when its exit timeout expires: a stream that a backend never
  /// ends would otherwise keep its connection, and so the process, alive. Other models keep
  /// serving in-process requests until the repository is destroyed.
  void shutdown_decoupled_models(shutdown_mode mode) const {
    const auto models = ready_models();
    for (const bool ensembles : {false, true}) {
      for (const auto& m : models) {
        if (m->is_ensemble() == ensembles && m->model().decoupled()) {
          const_cast<loaded_model&>(*m).shutdown(mode); // NOLINT: shutdown is thread-safe
        }
      }
    }
  }

  /// Blocks until every model retired so far (no longer published and no longer held) is
  /// drained and destroyed. For tests and orderly shutdowns.
  void wait_retired() const { reaper_->wait_idle(); }

private:
  struct read_result {
    status error;
    std::shared_ptr<const detail::model_source> source; // set when it parsed
  };

  [[nodiscard]] std::shared_ptr<const detail::repository_table> snapshot() const {
    const std::shared_lock lock{read_mutex_};
    return table_;
  }

  /// Swaps in `next` (copied: the caller goes on editing its own). The old table is released
  /// here, on the writer's thread; the models only it held go to the reaper.
  void publish(const detail::repository_table& next) {
    auto fresh = std::make_shared<const detail::repository_table>(next);
    std::shared_ptr<const detail::repository_table> old;
    {
      const std::unique_lock lock{read_mutex_};
      old = std::exchange(table_, std::move(fresh));
    }
  }

  [[nodiscard]] static std::vector<model_index_entry>
  index_of(const detail::repository_table& table) {
    std::vector<model_index_entry> out;
    out.reserve(table.size());
    for (const auto& [name, entry] : table) {
      entry.append_rows(out);
    }
    return out;
  }

  /// The entry of a model whose config could not be read (no version known).
  [[nodiscard]] static detail::repository_entry unreadable(std::string name, const status& error) {
    detail::repository_entry out;
    out.info = {std::move(name), 0, model_state::unavailable, error.message()};
    return out;
  }

  /// Shows every selected version that does not serve yet as LOADING. Returns whether any row
  /// changed.
  static bool mark_loading(detail::repository_entry& entry) {
    bool changed = false;
    for (const auto v : entry.source->versions) {
      auto& e = entry.versions[v];
      if (!e.model) {
        e.info = {entry.source->config.name, v, model_state::loading, {}};
        changed = true;
      }
    }
    entry.refresh();
    return changed;
  }

  /// The serving model of each version (to tell whether a load changed what ensembles see).
  [[nodiscard]] static std::vector<std::pair<std::int64_t, const loaded_model*>>
  serving_versions(const detail::repository_entry& entry) {
    std::vector<std::pair<std::int64_t, const loaded_model*>> out;
    for (const auto& [v, e] : entry.versions) {
      out.emplace_back(v, e.model.get());
    }
    return out;
  }

  /// Reads and checks `<root>/<name>/config.json`: not_found without a model folder, else
  /// invalid_argument naming the file and the JSON pointer, or the source.
  [[nodiscard]] read_result read_source(std::string_view name) const {
    const std::string model_name{name};
    const auto folder = root_ / model_name;
    std::error_code ec;
    if (!detail::is_model_folder_name(name) || !std::filesystem::is_directory(folder, ec)) {
      return {not_found("failed to load '" + model_name + "': no model folder '" + folder.string() +
                        "'"),
              nullptr};
    }
    const auto file = folder / "config.json";
    const auto fail = [&](const std::string& message) {
      return read_result{invalid_argument(file.string() + ": " + message), nullptr};
    };
    std::ifstream in{file, std::ios::binary};
    if (!in) {
      return fail("cannot read the model configuration (every model folder needs a config.json)");
    }
    std::ostringstream text;
    text << in.rdbuf();
    nlohmann::json json;
    try {
      json = nlohmann::json::parse(text.str());
    } catch (const nlohmann::json::parse_error& e) {
      return fail(std::string{"model config is not valid JSON: "} + e.what());
    }
    auto source = std::make_shared<detail::model_source>();
    try {
      source->config = load_model_config(json);
      // "name" may be left out (the folder names the model); if given it must agree.
      if (json.contains("name") && source->config.name != model_name) {
        throw config_error(config_error_code::bad_value, "/name",
                           "the config names the model '" + source->config.name +
                               "' but its folder is '" + model_name + "'");
      }
      source->config.name = model_name;
      source->config_file = file;
      // A model without version folders serves version 1 from its own folder.
      auto available = detail::version_folders(folder);
      source->version_folders = !available.empty();
      if (available.empty()) {
        available.push_back(1);
      }
      auto selection = detail::select_versions(source->config.version_policy, available);
      source->versions = std::move(selection.served);
      for (const auto v : selection.missing) {
        const auto& wanted = source->config.version_policy->versions;
        const auto k = std::find(wanted.begin(), wanted.end(), v) - wanted.begin();
        source->missing.emplace_back(
            v, file.string() + ": /version_policy/specific/versions/" + std::to_string(k) +
                   ": version " + std::to_string(v) + " of model '" + model_name +
                   "' has no version folder '" + (folder / std::to_string(v)).string() + "'");
      }
      const std::int64_t latest =
          std::max(source->versions.empty() ? 0 : source->versions.back(),
                   source->missing.empty() ? std::int64_t{0} : source->missing.back().first);
      source->config = source->config_for(latest);
    } catch (const config_error& e) {
      return fail(e.what()); // what() is "<JSON pointer>: <message>"
    }
    return {{}, std::move(source)};
  }

  /// Builds every version `entry.source` selects over the models of `table` and makes them the
  /// entry's READY versions; versions no longer selected are unpublished (UNAVAILABLE,
  /// "unloaded"), `specific` versions without a folder UNAVAILABLE with the reason. A version
  /// that fails to build keeps its serving model if `keep_serving` (else, and without one, it
  /// becomes UNAVAILABLE with the reason). Returns invalid_argument with the first reason on
  /// any failure.
  status build_versions(const detail::repository_table& table, detail::repository_entry& entry,
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
        next[v] = {{name, v, model_state::unavailable, std::string{unloaded_reason}}, nullptr};
      }
    }
    for (const auto& [v, reason] : source.missing) {
      next[v] = {{name, v, model_state::unavailable, fail(reason)}, nullptr};
    }
    for (const auto v : source.versions) {
      const auto old = entry.versions.find(v);
      auto serving = keep_serving && old != entry.versions.end() ? old->second.model : nullptr;
      try {
        next[v] = {{name, v, model_state::ready, {}}, build(source, v, table)};
      } catch (const std::exception& e) {
        // config_error's what() is "<JSON pointer>: <message>"; a backend's is its own text.
        auto reason = fail(source.config_file.string() + ": " + e.what());
        if (serving) {
          next[v] = {old->second.info, std::move(serving)};
        } else {
          next[v] = {{name, v, model_state::unavailable, std::move(reason)}, nullptr};
        }
      }
    }
    entry.versions = std::move(next);
    entry.refresh();
    return first_error;
  }

  /// Builds version `version` of a model, or of an ensemble over the READY models of `table`.
  /// Throws config_error (or a backend's exception).
  [[nodiscard]] std::shared_ptr<const loaded_model> build(const detail::model_source& source,
                                                          std::int64_t version,
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

  /// The ensembles (with a parsed config) that use any of `changed`, directly or through other
  /// ensembles.
  [[nodiscard]] static std::set<std::string, std::less<>>
  dependents_of(const detail::repository_table& table,
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

  /// (Re)builds the ensembles `todo` names, each after the ensembles of `todo` it uses. An
  /// ensemble that fails is UNAVAILABLE with the reason (here a serving one does not keep
  /// serving: it would run on composing models no longer published).
  void build_ensembles(detail::repository_table& table,
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
          cycle = source.config_file.string() + ": /ensemble_scheduling/step/" + std::to_string(s) +
                  "/model_name: ensemble '" + name + "' uses ensemble '" + step +
                  "', which uses '" + name + "' (a cycle)";
        }
      }
      if (!cycle.empty()) {
        for (const auto v : source.versions) {
          entry.versions[v];
        }
        for (auto& [v, e] : entry.versions) {
          e.model.reset();
          e.info = {name, v, model_state::unavailable, cycle};
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

  std::filesystem::path root_;
  factory_type factory_;
  model_environment environment_; // what ensembles share with the models (the cache)
  std::shared_ptr<detail::loaded_model_reaper> reaper_;
  std::thread reaper_thread_;
  std::mutex write_mutex_;               // serialises load_all/load/unload
  mutable std::shared_mutex read_mutex_; // guards table_ (the pointer; tables are immutable)
  std::shared_ptr<const detail::repository_table> table_;
};

} // namespace servekit
