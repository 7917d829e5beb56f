#pragma once
/// \file
/// temp_repository: a model repository folder for tests, removed at the end.

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

#include <unistd.h>

namespace archetypes {

/// A model repository folder under the system's temporary directory, removed at the end.
class temp_repository {
public:
  temp_repository() {
    static std::atomic<int> counter{0};
    const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    root_ = std::filesystem::temp_directory_path() /
            ("servekit-repository-" + std::to_string(::getpid()) + "-" +
             std::to_string(counter.fetch_add(1)) + "-" + std::to_string(stamp));
    std::filesystem::create_directories(root_);
  }
  temp_repository(const temp_repository&) = delete;
  temp_repository& operator=(const temp_repository&) = delete;
  ~temp_repository() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }

  [[nodiscard]] const std::filesystem::path& root() const noexcept { return root_; }

  /// Writes `<root>/<model>/config.json`.
  void write(const std::string& model, std::string_view config) const {
    std::filesystem::create_directories(root_ / model);
    std::ofstream out{root_ / model / "config.json", std::ios::binary | std::ios::trunc};
    out << config;
  }
  /// Writes `<root>/<model>/<file>` (config.pbtxt, say).
  void write_file(const std::string& model, const std::string& file, std::string_view text) const {
    std::filesystem::create_directories(root_ / model);
    std::ofstream out{root_ / model / file, std::ios::binary | std::ios::trunc};
    out << text;
  }
  /// Creates `<root>/<model>/<folder>/`.
  void add_folder(const std::string& model, const std::string& folder) const {
    std::filesystem::create_directories(root_ / model / folder);
  }
  void remove(const std::string& model) const { std::filesystem::remove_all(root_ / model); }

private:
  std::filesystem::path root_;
};

} // namespace archetypes
