#pragma once
/// \file
/// model_repository: Triton's model repository over a directory. Each model is a folder
/// `<root>/<model>/` holding `config.json` (Triton's model configuration as JSON) and optional
/// numeric version folders `<root>/<model>/<N>/`; the latest version is served (Triton's default
/// version policy), and a model without version folders serves version 1.
///
///     servekit::model_repository models{"models", bundled_backends{}};
///     for (const auto& entry : models.load_all()) { ... }          // UNAVAILABLE ones say why
///     if (auto m = models.find("add_sub")) {
///       (void)m->model().submit(std::move(request), sink);
///     }
///
/// Models are built by a backend_list (`config.backend` picks the backend, the scheduling fields
/// the composition); ensembles (`"platform": "ensemble"`) are built as runtime_ensembles over the
/// loaded models. Loading a model again builds the new one next to the old, publishes it at
/// once, and retires the old one, which finishes what it accepted on a background thread.

#include <servekit/config/model_config_json.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/status.hpp>
#include <servekit/ensemble/runtime_ensemble.hpp>
#include <servekit/repository/any_model.hpp>
#include <servekit/repository/detail/model_reaper.hpp>
#include <servekit/runtime/model_environment.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/runtime/model_ref.hpp>
#include <servekit/runtime/model_registry.hpp>
#include <servekit/runtime/resolved_config.hpp>
#include <servekit/runtime/shutdown_mode.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
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

/// One row of the repository index.
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

/// What a model folder says: its parsed configuration and where it came from.
struct model_source {
  model_options config;
  std::filesystem::path config_file;
};

/// A model in the repository's table.
struct repository_entry {
  model_index_entry info;
  /// Set while the model serves (READY; also while a reload builds its successor).
  std::shared_ptr<const loaded_model> model;
  /// The configuration last read, when it parsed: lets an ensemble be rebuilt when its
  /// composing models change. Cleared by unload, so an unloaded ensemble stays unloaded.
  std::shared_ptr<const model_source> source;
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

/// The largest numeric subfolder of `folder` (Triton's version folders), if any.
[[nodiscard]] inline std::optional<std::int64_t>
latest_version(const std::filesystem::path& folder) {
  std::optional<std::int64_t> latest;
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
    if (!latest || version > *latest) {
      latest = version;
    }
  }
  return latest;
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
      : model_repository{std::move(root), factory_type{[hooks, environment](const model_options& c) {
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

  /// Scans the root and loads every model folder: non-ensembles first, then ensembles in
  /// dependency order. A model that fails is recorded as UNAVAILABLE with the reason; a model
  /// already serving that fails to reload keeps serving. Returns the index.
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
          entry = {{name, 0, model_state::unavailable, read.error.message()}, nullptr, nullptr};
        }
        continue;
      }
      if (!entry.model) {
        entry.info = {name, read.source->config.version, model_state::loading, {}};
      }
      if (detail::is_ensemble_config(read.source->config)) {
        ensembles.insert(name);
      } else {
        models.push_back(name);
      }
      entry.source = std::move(read.source);
    }
    publish(next);

    std::set<std::string, std::less<>> changed;
    for (const auto& name : models) {
      auto& entry = next[name];
      (void)build_into(next, entry);
      changed.insert(name);
      publish(next);
    }
    auto todo = dependents_of(next, changed);
    todo.insert(ensembles.begin(), ensembles.end());
    build_ensembles(next, todo);
    publish(next);
    return index_of(next);
  }

  /// Triton's repository load: re-reads `<root>/<name>/config.json`, builds the model next to
  /// the serving one (if any) and publishes it at once; requests the old one accepted finish
  /// there, and it is drained and destroyed on the reaper thread once nothing refers to it.
  /// Ensembles using the model are rebuilt over the new one. Errors: not_found (no such model
  /// folder), invalid_argument (a bad config or a model that failed to build, the message
  /// naming the file and JSON path); then the serving model, if any, keeps serving.
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
        return read.error; // the serving version keeps serving
      }
      entry = {
          {std::string{name}, 0, model_state::unavailable, read.error.message()}, nullptr, nullptr};
      publish(next);
      return read.error;
    }
    entry.source = std::move(read.source);
    if (!entry.model) {
      entry.info = {std::string{name}, entry.source->config.version, model_state::loading, {}};
      publish(next);
    }
    if (auto s = build_into(next, entry); !s.ok()) {
      if (entry.model) {
        return s; // build_into left the serving one in place
      }
      publish(next);
      return s;
    }
    build_ensembles(next, dependents_of(next, {std::string{name}}));
    publish(next);
    return {};
  }

  /// Triton's repository unload: unpublishes the model (state UNAVAILABLE, reason "unloaded");
  /// it drains in the background. Ensembles using it become UNAVAILABLE, naming it. not_found
  /// if it is not loaded.
  status unload(std::string_view name) {
    const std::lock_guard lock{write_mutex_};
    detail::repository_table next = *snapshot();
    const auto it = next.find(name);
    if (it == next.end() || !it->second.model) {
      return not_found("failed to unload '" + std::string{name} + "': the model is not loaded");
    }
    auto& entry = it->second;
    entry.model.reset();
    entry.source.reset();
    entry.info.state = model_state::unavailable;
    entry.info.reason = unloaded_reason;
    build_ensembles(next, dependents_of(next, {std::string{name}}));
    publish(next);
    return {};
  }

  /// The READY model `name` at `version` (-1: whichever is served, the latest), else null.
  /// Per request: takes a shared lock for one map lookup and a reference-count increment.
  [[nodiscard]] std::shared_ptr<const loaded_model> find(std::string_view name,
                                                         std::int64_t version = -1) const {
    const std::shared_lock lock{read_mutex_};
    const auto it = table_->find(name);
    if (it == table_->end() || !it->second.model ||
        (version != -1 && version != it->second.model->config().version)) {
      return nullptr;
    }
    return it->second.model;
  }

  /// The index row of `name`, in any state; nullopt if the repository never saw it.
  [[nodiscard]] std::optional<model_index_entry> status_of(std::string_view name) const {
    const auto table = snapshot();
    const auto it = table->find(name);
    if (it == table->end()) {
      return std::nullopt;
    }
    return it->second.info;
  }

  /// Every model the repository knows, sorted by name.
  [[nodiscard]] std::vector<model_index_entry> index() const { return index_of(*snapshot()); }

  /// Whether every known model is READY, leaving out models unloaded on request (Triton's strict
  /// readiness: an explicit unload must not take the server out of service); true when there is
  /// none.
  [[nodiscard]] bool all_ready() const {
    const auto table = snapshot();
    return std::all_of(table->begin(), table->end(), [](const auto& e) {
      return e.second.info.state == model_state::ready || e.second.info.reason == unloaded_reason;
    });
  }

  /// The READY models, sorted by name.
  [[nodiscard]] std::vector<std::shared_ptr<const loaded_model>> ready_models() const {
    const auto table = snapshot();
    std::vector<std::shared_ptr<const loaded_model>> out;
    for (const auto& [name, entry] : *table) {
      if (entry.model) {
        out.push_back(entry.model);
      }
    }
    return out;
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
      out.push_back(entry.info);
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
    } catch (const config_error& e) {
      return fail(e.what()); // what() is "<JSON pointer>: <message>"
    }
    source->config.name = model_name;
    source->config_file = file;
    if (const auto version = detail::latest_version(folder)) {
      source->config.version = *version;
      source->config.directory = (folder / std::to_string(*version)).string();
    } else {
      source->config.version = 1;
      source->config.directory = folder.string();
    }
    return {{}, std::move(source)};
  }

  /// Builds the model `entry.source` describes over the models of `table` and makes it the
  /// entry's READY model. On failure an entry with a serving model keeps it; one without
  /// becomes UNAVAILABLE with the reason. Returns invalid_argument with the reason on failure.
  status build_into(const detail::repository_table& table, detail::repository_entry& entry) {
    const auto& source = *entry.source;
    try {
      entry.model = build(source, table);
      entry.info = {source.config.name, source.config.version, model_state::ready, {}};
      return {};
    } catch (const std::exception& e) {
      // config_error's what() is "<JSON pointer>: <message>"; a backend's is its own text.
      std::string reason = source.config_file.string() + ": " + e.what();
      if (!entry.model) {
        entry.info = {source.config.name, source.config.version, model_state::unavailable, reason};
      }
      return invalid_argument(std::move(reason));
    }
  }

  /// Builds a model, or an ensemble over the READY models of `table`. Throws config_error (or a
  /// backend's exception).
  [[nodiscard]] std::shared_ptr<const loaded_model> build(const detail::model_source& source,
                                                          const detail::repository_table& table) {
    std::unique_ptr<loaded_model> built;
    if (detail::is_ensemble_config(source.config)) {
      // The ensemble keeps model_refs, so it holds the composing models' shared_ptrs: they live
      // until it is destroyed, whatever the repository publishes meanwhile.
      model_registry registry;
      std::vector<std::shared_ptr<const loaded_model>> composing;
      if (source.config.ensemble_scheduling) {
        for (const auto& step : source.config.ensemble_scheduling->step) {
          const auto it = table.find(step.model_name);
          if (it == table.end() || !it->second.model ||
              (step.model_version != -1 &&
               step.model_version != it->second.model->config().version)) {
            continue; // runtime_ensemble names the step and the model it misses
          }
          if (std::find(composing.begin(), composing.end(), it->second.model) == composing.end()) {
            registry.add(it->second.model->model());
            composing.push_back(it->second.model);
          }
        }
      }
      auto ensemble = any_model::make<runtime_ensemble>(source.config, registry);
      built = std::make_unique<loaded_model>(source.config, source.config_file, std::move(ensemble),
                                             std::move(composing), true);
    } else {
      built =
          std::make_unique<loaded_model>(source.config, source.config_file, factory_(source.config),
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
        entry.model.reset();
        entry.info = {name, source.config.version, model_state::unavailable, std::move(cycle)};
      } else {
        entry.model.reset(); // never keep an ensemble over composing models being replaced
        (void)build_into(table, entry);
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
