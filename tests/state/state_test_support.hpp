#pragma once
/// \file
/// What the state store tests share: the states they configure and a scratch model directory
/// for initial_state data files. tests/state (host_state_store) and tests/cuda
/// (device_state_store, whose CPU slots must behave as the host store's) both build their
/// cases from these.

#include <servekit/core/shape.hpp>
#include <servekit/state/state_options.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <ios>
#include <span>
#include <string>
#include <system_error>
#include <utility>

namespace state_test {

/// An INT32 state INPUT_STATE / OUTPUT_STATE of `dims`.
inline servekit::state_options int_state(servekit::shape dims, bool same_buffer = false) {
  servekit::state_options s;
  s.input_name = "INPUT_STATE";
  s.output_name = "OUTPUT_STATE";
  s.data_type = servekit::data_type::int32;
  s.dims = dims;
  s.use_same_buffer_for_input_output = same_buffer;
  return s;
}

/// A scratch model directory, removed at the end of the test.
class model_directory {
public:
  model_directory() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            (std::string{"servekit_state_"} + info->name() + "_" +
             std::to_string(reinterpret_cast<std::uintptr_t>(this)));
    std::filesystem::create_directories(path_ / "initial_state");
  }
  model_directory(const model_directory&) = delete;
  model_directory& operator=(const model_directory&) = delete;
  ~model_directory() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  /// Writes `initial_state/<name>`.
  void write(const std::string& name, std::span<const std::byte> bytes) const {
    std::ofstream out{path_ / "initial_state" / name, std::ios::binary};
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  [[nodiscard]] std::string string() const { return path_.string(); }

private:
  std::filesystem::path path_;
};

/// A state of dims [-1] starting from `file`, which holds `initial_dims` INT32s.
inline servekit::state_options file_state(std::string file, servekit::shape initial_dims) {
  auto s = int_state({-1});
  servekit::initial_state_options init;
  init.data_type = servekit::data_type::int32;
  init.dims = initial_dims;
  init.name = "initial state";
  init.data_file = std::move(file);
  s.initial_state.push_back(init);
  return s;
}

} // namespace state_test
