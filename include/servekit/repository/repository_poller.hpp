#pragma once
/// \file
/// Triton's poll model control mode: scan_repository() stamps every model folder (its name, the
/// modification times of its config.pbtxt or config.json, of its other files and of everything
/// under its version folders, as Triton's poll compares them), changes_between() says what changed
/// between two scans (a pure function), and repository_poller applies the changes to a
/// model_repository every interval on its own thread: new folders are loaded, changed ones reloaded
/// (without downtime: model_repository::load builds next to the serving versions), and removed ones
/// unloaded.
///
///     servekit::repository_poller poller{models, std::chrono::seconds{15}};
///     poller.start(); // the scan taken now is the baseline: load_all() first
///     ...
///     poller.stop();  // also by the destructor

#include <servekit/repository/detail/repository_table.hpp>
#include <servekit/repository/model_repository.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace servekit {

/// What a scan records of one model folder: enough to tell that it changed.
struct model_folder_stamp {
  /// The modification time of the config the repository reads (config.pbtxt, else config.json);
  /// nullopt without one.
  std::optional<std::filesystem::file_time_type> config_time;
  /// The latest modification time of the other files of the model folder (labels files, as
  /// Triton's poll), if any.
  std::optional<std::filesystem::file_time_type> other_files_time;
  /// Each numeric version folder with the latest modification time of the folder and everything
  /// in it (as Triton's poll: a model file rewritten in place is a change), sorted by name.
  std::vector<std::pair<std::string, std::filesystem::file_time_type>> versions;

  friend bool operator==(const model_folder_stamp&, const model_folder_stamp&) = default;
};

/// A scan of a repository: every model folder (not hidden, see model_repository) by name.
using repository_scan = std::map<std::string, model_folder_stamp, std::less<>>;

/// What changed between two scans, each list sorted by name.
struct repository_changes {
  std::vector<std::string> added;   ///< folders new in the later scan: load
  std::vector<std::string> changed; ///< folders whose stamp differs: reload
  std::vector<std::string> removed; ///< folders gone from the later scan: unload

  [[nodiscard]] bool empty() const noexcept {
    return added.empty() && changed.empty() && removed.empty();
  }
  friend bool operator==(const repository_changes&, const repository_changes&) = default;
};

namespace detail {

/// The latest modification time of `folder` and everything under it (symbolic links are not
/// followed into); what cannot be read counts as unchanged.
[[nodiscard]] inline std::filesystem::file_time_type
latest_write_time(const std::filesystem::path& folder, std::error_code& ec) {
  namespace fs = std::filesystem;
  auto latest = fs::last_write_time(folder, ec);
  if (ec) {
    return latest;
  }
  std::error_code walk_ec;
  for (fs::recursive_directory_iterator it{folder, walk_ec}, end; !walk_ec && it != end;
       it.increment(walk_ec)) {
    std::error_code item_ec;
    const auto t = fs::last_write_time(it->path(), item_ec);
    if (!item_ec) {
      latest = std::max(latest, t);
    }
  }
  return latest;
}

} // namespace detail

/// Stamps every model folder of `root` (an unreadable or missing root scans as empty).
[[nodiscard]] inline repository_scan scan_repository(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  repository_scan out;
  std::error_code ec;
  for (fs::directory_iterator it{root, ec}, end; !ec && it != end; it.increment(ec)) {
    std::error_code item_ec;
    const std::string name = it->path().filename().string();
    if (!it->is_directory(item_ec) || !detail::is_model_folder_name(name)) {
      continue;
    }
    model_folder_stamp stamp;
    // The file the repository reads: config.pbtxt, else config.json (model_repository_read.ipp).
    const char* config_name =
        fs::exists(it->path() / "config.pbtxt", item_ec) ? "config.pbtxt" : "config.json";
    if (const auto t = fs::last_write_time(it->path() / config_name, item_ec); !item_ec) {
      stamp.config_time = t;
    }
    std::error_code sub_ec;
    for (fs::directory_iterator v{it->path(), sub_ec}, vend; !sub_ec && v != vend;
         v.increment(sub_ec)) {
      const std::string child = v->path().filename().string();
      std::error_code v_ec;
      const bool numeric = !child.empty() && std::all_of(child.begin(), child.end(), [](char c) {
        return c >= '0' && c <= '9';
      });
      if (!v->is_directory(v_ec)) {
        if (child != config_name) {
          if (const auto t = fs::last_write_time(v->path(), v_ec); !v_ec) {
            stamp.other_files_time = std::max(stamp.other_files_time.value_or(t), t);
          }
        }
        continue;
      }
      if (numeric) {
        if (const auto t = detail::latest_write_time(v->path(), v_ec); !v_ec) {
          stamp.versions.emplace_back(child, t);
        }
      }
    }
    std::sort(stamp.versions.begin(), stamp.versions.end());
    out.emplace(name, std::move(stamp));
  }
  return out;
}

/// What changed from `before` to `after`.
[[nodiscard]] inline repository_changes changes_between(const repository_scan& before,
                                                        const repository_scan& after) {
  repository_changes out;
  for (const auto& [name, stamp] : after) {
    const auto it = before.find(name);
    if (it == before.end()) {
      out.added.push_back(name);
    } else if (!(it->second == stamp)) {
      out.changed.push_back(name);
    }
  }
  for (const auto& [name, stamp] : before) {
    if (!after.contains(name)) {
      out.removed.push_back(name);
    }
  }
  return out;
}

/// Polls a repository's folder and applies what changed to it (see the file comment). The
/// repository must outlive the poller.
class repository_poller {
public:
  /// Called after each change applied: the model, "load" or "unload", and the result.
  using observer = std::function<void(const std::string&, const char*, const status&)>;

  repository_poller(model_repository& models, std::chrono::milliseconds interval,
                    observer on_change = {})
      : models_{models}, interval_{interval}, on_change_{std::move(on_change)} {}

  repository_poller(const repository_poller&) = delete;
  repository_poller& operator=(const repository_poller&) = delete;
  ~repository_poller() { stop(); }

  /// Takes the baseline scan (what the repository loaded already) and starts polling every
  /// interval on a thread of its own; an interval of 0 polls never (Triton's
  /// `--repository-poll-secs=0`).
  void start() {
    baseline();
    if (interval_.count() <= 0) {
      return;
    }
    std::lock_guard lock{mutex_};
    stopping_ = false;
    thread_ = std::thread{[this] { run(); }};
  }

  /// Stops polling; returns once a poll under way is done. Idempotent.
  void stop() {
    {
      std::lock_guard lock{mutex_};
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) {
      thread_.join();
    }
  }

  /// Takes the scan later polls compare with, without changing the repository.
  void baseline() { last_ = scan_repository(models_.root()); }

  /// Scans once and applies the changes since the last scan: loads added and changed folders,
  /// unloads removed ones. Returns the changes. Called by the polling thread; tests call it
  /// directly.
  repository_changes poll_once() {
    auto next = scan_repository(models_.root());
    auto changes = changes_between(last_, next);
    last_ = std::move(next);
    for (const auto* list : {&changes.added, &changes.changed}) {
      for (const auto& name : *list) {
        report(name, "load", models_.load(name));
      }
    }
    for (const auto& name : changes.removed) {
      report(name, "unload", models_.unload(name));
    }
    return changes;
  }

private:
  void run() {
    std::unique_lock lock{mutex_};
    while (!wake_.wait_for(lock, interval_, [this] { return stopping_; })) {
      lock.unlock();
      (void)poll_once();
      lock.lock();
    }
  }

  void report(const std::string& name, const char* action, const status& s) const {
    if (on_change_) {
      on_change_(name, action, s);
    }
  }

  model_repository& models_;
  std::chrono::milliseconds interval_;
  observer on_change_;
  repository_scan last_; // only the polling thread (or a test, before start) touches it
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace servekit
