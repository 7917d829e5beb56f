#pragma once
/// \file
/// model_repository: Triton's model repository over a directory. Each model is a folder
/// `<root>/<model>/` holding `config.json` (Triton's model configuration as JSON) and optional
/// numeric version folders `<root>/<model>/<N>/`. The config's `version_policy` (Triton's: latest
/// N, default 1; all; specific) picks the versions served, each its own model built from the
/// same config with its own `version` and `directory`; a model without version folders serves
/// version 1 from its folder.
///
// clang-format off
///     servekit::model_repository models{"models", bundled_backends{}};
///     for (const auto& entry : models.load_all()) { ... } // one row per version;
///                                                         // UNAVAILABLE rows say why
///     if (auto m = models.find("add_sub")) {              // the latest served version
///       (void)m->model().submit(std::move(request), sink);
///     }
///     models.versions_of("add_sub");                      // the READY versions, ascending
// clang-format on
///
/// Models are built by a backend_list (`config.backend` picks the backend, the scheduling fields
/// the composition); ensembles (`"platform": "ensemble"`) are built as runtime_ensembles over the
/// loaded models. Loading a model again builds the versions its policy now names next to the
/// serving ones, publishes them together, and retires the old ones (and the versions that left
/// the policy), which finish what they accepted on a background thread.
///
/// The program may also serve servables it constructs, next to the folders' models: a
/// compile-time `ensemble<...>`, a hand-made `model<...>`, any servable. `add` registers a
/// factory by name and version; the model is then served, listed, loaded, unloaded and counted
/// like a folder's (see add()).
///
///     models.add("pipeline", 1, [] {
///       return servekit::any_model::make_owning<&served_pipeline::ensemble>();
///     });
///
/// The repository's non-template parts (loading folders, version selection, reload, unload, the
/// index, readiness, the reaper) are compiled once into servekit::server (repository/impl/*.ipp,
/// core/detail/linkage.hpp); the constructors taking a backend_list stay templates here.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/status.hpp>
#include <servekit/repository/any_model.hpp>
#include <servekit/repository/loaded_model.hpp>
#include <servekit/runtime/model_environment.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/runtime/model_ref.hpp>
#include <servekit/runtime/resolved_config.hpp>
#include <servekit/runtime/shutdown_mode.hpp>

#include <chrono>
#include <concepts>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace servekit {

namespace detail {
struct model_source;     // detail/repository_table.hpp
struct repository_entry; // detail/repository_table.hpp
/// Sorted by name, so the index and ready_models() come out sorted.
using repository_table = std::map<std::string, repository_entry, std::less<>>;
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

  /// Builds a servable the program constructs (add()); called again by every load of it.
  using servable_factory = std::function<any_model()>;

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
  model_repository(std::filesystem::path root, factory_type factory);

  /// A repository without backends, for a program that serves what it constructs (add()): the
  /// ensembles of the folders of `root` may use those models as steps; a folder naming a
  /// backend fails to load, saying so. With no root, it has no folders at all.
  explicit model_repository(std::filesystem::path root = {});

  model_repository(const model_repository&) = delete;
  model_repository& operator=(const model_repository&) = delete;

  /// Unpublishes every model and waits until the reaper has drained and destroyed those that
  /// nothing else holds. Destroy the HTTP front end (anything calling find()) first.
  ~model_repository();

  [[nodiscard]] const std::filesystem::path& root() const noexcept { return root_; }

  /// Scans the root and loads every model folder (the versions its version_policy selects):
  /// non-ensembles first, then ensembles in dependency order. A version that fails is recorded as
  /// UNAVAILABLE with the reason; a version already serving that fails to reload keeps serving.
  /// Returns the index.
  std::vector<model_index_entry> load_all();

  /// Triton's repository load: re-reads `<root>/<name>/config.json` and its version folders,
  /// builds every version the version_policy now selects next to the serving ones and publishes
  /// them together; versions that left the policy are unpublished (UNAVAILABLE, "unloaded").
  /// Requests an old model accepted finish there, and it is drained and destroyed on the reaper
  /// thread once nothing refers to it. Ensembles using the model are rebuilt over the new
  /// versions. Errors: not_found (no such model folder, or a hidden one) and invalid_argument
  /// for a name that is not one path component, both leaving the table (index, readiness) as it
  /// is; invalid_argument (a bad config, a
  /// version that failed to build or a `specific` version without a folder: the first such
  /// reason, naming the file and JSON path); a version that serves and fails to rebuild keeps
  /// serving, and the versions that built are published all the same.
  status load(std::string_view name);

  /// Triton's repository unload: unpublishes every version of the model (state UNAVAILABLE,
  /// reason "unloaded"); they drain in the background. Ensembles using it become UNAVAILABLE,
  /// naming it (and serve again when it is loaded again); with `unload_dependents` (Triton's
  /// parameter) they are unloaded too, directly or through other ensembles. not_found if no
  /// version of it is loaded.
  status unload(std::string_view name, bool unload_dependents = false);

  /// Registers a servable the program constructs as version `version` of model `name`, next to
  /// the models of the folders, builds it with `factory` and publishes it (READY). It then
  /// works as a folder's model does: find(), the index, readiness, statistics and metrics list
  /// it; unload() unpublishes it (UNAVAILABLE, "unloaded") and load() builds it again with
  /// `factory` (a reload: the new servable publishes next to the old one, which drains), as
  /// does load_all() when it does not serve; several versions of one name may be registered.
  /// Ensembles of the folders may use it as a step (those waiting for it are built). A poll
  /// never unloads it: it has no folder. The servable's `name()` and `version()` must be `name`
  /// and `version` (the responses, statistics and messages of one model use one name).
  ///
  /// Errors (invalid_argument; nothing registered): a name that cannot be a model folder's, a
  /// version below 1, an empty factory, a name the repository has a folder for (or a model of
  /// a folder already loaded), the version already registered. Building may fail (the factory
  /// throws, or the servable's name or version differ): the error is returned and the version
  /// stays registered, UNAVAILABLE with the reason, until a load() builds it.
  status add(std::string_view name, std::int64_t version, servable_factory factory);

  /// The READY model `name` at `version` (-1: the latest version served), else null.
  /// Per request: takes a shared lock for one or two map lookups and a reference-count
  /// increment.
  [[nodiscard]] std::shared_ptr<const loaded_model> find(std::string_view name,
                                                         std::int64_t version = -1) const;

  /// The versions of `name` that are READY, ascending (Triton's model metadata "versions");
  /// empty if none is (or the repository never saw it).
  [[nodiscard]] std::vector<std::int64_t> versions_of(std::string_view name) const;

  /// The summary row of `name`, in any state: its latest serving version's row, else its latest
  /// version's row saying why it does not serve; nullopt if the repository never saw it.
  [[nodiscard]] std::optional<model_index_entry> status_of(std::string_view name) const;

  /// The index row of version `version` of `name` (-1: the summary row, as status_of(name));
  /// nullopt if the repository never saw that version.
  [[nodiscard]] std::optional<model_index_entry> status_of(std::string_view name,
                                                           std::int64_t version) const;

  /// Every version of every model the repository knows (Triton's index), sorted by name, then
  /// version.
  [[nodiscard]] std::vector<model_index_entry> index() const;

  /// Whether every index row is READY, leaving out versions unloaded on request or by a version
  /// policy (Triton's strict readiness: an explicit unload must not take the server out of
  /// service); true when there is none.
  [[nodiscard]] bool all_ready() const;

  /// The READY models, every version, sorted by name, then version.
  [[nodiscard]] std::vector<std::shared_ptr<const loaded_model>> ready_models() const;

  /// Stops every published decoupled model (composing models before ensembles), answering
  /// what each still owes as `mode` says; they stay published but accept nothing more. The
  /// server calls it with `cancel` when its exit timeout expires: a stream that a backend never
  /// ends would otherwise keep its connection, and so the process, alive. Other models keep
  /// serving in-process requests until the repository is destroyed.
  void shutdown_decoupled_models(shutdown_mode mode) const;

  /// Blocks until every model retired so far (no longer published and no longer held) is
  /// drained and destroyed. For tests and orderly shutdowns.
  void wait_retired() const;

private:
  struct read_result {
    status error;
    std::shared_ptr<const detail::model_source> source; // set when it parsed
  };

  [[nodiscard]] std::shared_ptr<const detail::repository_table> snapshot() const;

  /// Swaps in `next` (copied: the caller goes on editing its own). The old table is released
  /// here, on the writer's thread; the models only it held go to the reaper.
  void publish(const detail::repository_table& next);

  [[nodiscard]] static std::vector<model_index_entry>
  index_of(const detail::repository_table& table);

  /// The entry of a model whose config could not be read (no version known).
  [[nodiscard]] static detail::repository_entry unreadable(std::string name, const status& error);

  /// Unpublishes every version of `entry` (UNAVAILABLE, "unloaded") and forgets its config, so
  /// that a change to what it uses does not rebuild it.
  static void unpublish(detail::repository_entry& entry);

  /// Whether an entry that serves nothing has a row not unloaded on request (a failed load).
  [[nodiscard]] static bool failed_to_load(const detail::repository_entry& entry);

  /// Shows every selected version that does not serve yet as LOADING. Returns whether any row
  /// changed.
  static bool mark_loading(detail::repository_entry& entry);

  /// The serving model of each version (to tell whether a load changed what ensembles see).
  [[nodiscard]] static std::vector<std::pair<std::int64_t, const loaded_model*>>
  serving_versions(const detail::repository_entry& entry);

  /// Builds every registered version of `entry` anew (the versions in `only`, when given) and
  /// publishes them in `entry`: READY, or UNAVAILABLE with the reason when building fails (a
  /// serving version then keeps serving). Returns invalid_argument with the first reason.
  status build_registered(detail::repository_entry& entry, std::string_view name,
                          std::optional<std::int64_t> only = std::nullopt);

  /// Reads and checks `<root>/<name>/config.json`: not_found without a model folder, else
  /// invalid_argument naming the file and the JSON pointer, or the source.
  [[nodiscard]] read_result read_source(std::string_view name) const;

  /// Builds every version `entry.source` selects over the models of `table` and makes them the
  /// entry's READY versions; versions no longer selected are unpublished (UNAVAILABLE,
  /// "unloaded"), `specific` versions without a folder UNAVAILABLE with the reason. A version
  /// that fails to build keeps its serving model if `keep_serving` (else, and without one, it
  /// becomes UNAVAILABLE with the reason). Returns invalid_argument with the first reason on
  /// any failure.
  status build_versions(const detail::repository_table& table, detail::repository_entry& entry,
                        bool keep_serving);

  /// Builds version `version` of a model, or of an ensemble over the READY models of `table`.
  /// Throws config_error (or a backend's exception).
  [[nodiscard]] std::shared_ptr<const loaded_model> build(const detail::model_source& source,
                                                          std::int64_t version,
                                                          const detail::repository_table& table);

  /// The ensembles (with a parsed config) that use any of `changed`, directly or through other
  /// ensembles.
  [[nodiscard]] static std::set<std::string, std::less<>>
  dependents_of(const detail::repository_table& table,
                const std::set<std::string, std::less<>>& changed);

  /// (Re)builds the ensembles `todo` names, each after the ensembles of `todo` it uses. An
  /// ensemble that fails is UNAVAILABLE with the reason (here a serving one does not keep
  /// serving: it would run on composing models no longer published).
  void build_ensembles(detail::repository_table& table,
                       const std::set<std::string, std::less<>>& todo);

  std::filesystem::path root_;
  factory_type factory_;
  model_environment environment_; // what ensembles share with the models (the cache)
  std::shared_ptr<detail::loaded_model_reaper> reaper_;
  std::thread reaper_thread_;
  std::mutex write_mutex_;               // serialises load_all/load/unload
  mutable std::shared_mutex read_mutex_; // guards table_ (the pointer; tables are immutable)
  std::shared_ptr<const detail::repository_table> table_;
};

/// Shuts every published model down with `mode`, each on a helper thread of its own (so an
/// ensemble waiting for its composing models, or a backend stuck in execute, holds up no other
/// model), and waits at most `wait` for all of them. Returns whether every model finished.
///
/// A server past its exit timeout calls it with `shutdown_mode::abort`: queued and backlogged
/// requests, open sequences and the responses decoupled models still owe are answered
/// `unavailable` "server is shutting down" at once; only a backend that never returns from
/// execute keeps its model's helper running. On `false` those helpers are left running with the
/// models they hold: the caller must not destroy `models` and should end the process
/// (std::quick_exit), since destroying the repository would wait for that backend forever.
[[nodiscard]] SERVEKIT_DECL bool shutdown_models(const model_repository& models, shutdown_mode mode,
                                                 std::chrono::milliseconds wait);

} // namespace servekit

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/repository/impl/model_repository_build.ipp>
#include <servekit/repository/impl/model_repository_load.ipp>
#include <servekit/repository/impl/model_repository_query.ipp>
#include <servekit/repository/impl/model_repository_read.ipp>
#include <servekit/repository/impl/model_repository_shutdown.ipp>
#endif
