#pragma once
/// \file
/// state_spec: one implicit state of a model, with what its initialisation needs (the initial
/// dims, the initial_state data file's bytes, read once when the model loads). Every state store
/// starts a sequence from these, whatever memory it keeps the state in.

#include <servekit/core/buffer.hpp>
#include <servekit/core/bytes.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/state/state_options.hpp>
#include <servekit/state/state_store.hpp>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <ios>
#include <string>
#include <system_error>
#include <vector>

namespace servekit::detail {

/// One state of the config, with what its initialisation needs.
struct state_spec {
  state_options options;
  shape initial_dims;
  bool from_file = false;
  buffer initial_bytes;         ///< the data file's contents (from_file only)
  bool declared_output = false; ///< output_name is a model output: clients may see it
};

/// The contents of `<model_directory>/initial_state/<data_file>` for state `index`, checked
/// against the initial dims. Throws config_error.
[[nodiscard]] inline buffer initial_state_file(const state_store_config& config, std::size_t index,
                                               const shape& dims) {
  const auto& initial = config.states[index].initial_state.front();
  const auto at =
      "/sequence_batching/state/" + std::to_string(index) + "/initial_state/0/data_file";
  std::filesystem::path file =
      std::filesystem::path{config.model_directory} / "initial_state" / initial.data_file;
  std::error_code ec;
  const auto absolute = std::filesystem::absolute(file, ec);
  const std::string shown = ec ? file.string() : absolute.lexically_normal().string();
  const auto type = initial.data_type;
  const auto elements = static_cast<std::size_t>(dims.element_count());
  const auto expected = elements * byte_size(type);
  const auto needs = [&] {
    return type == data_type::bytes
               ? std::to_string(elements) + " length-prefixed TYPE_STRING elements for dims " +
                     to_string(dims)
               : std::to_string(expected) + " bytes (" + std::to_string(elements) + " x " +
                     std::string{to_config_string(type)} + " for dims " + to_string(dims) + ")";
  };
  if (!std::filesystem::is_regular_file(file, ec)) {
    throw config_error(config_error_code::bad_value, at,
                       "initial state file '" + shown + "' of model '" + config.model_name +
                           "' does not exist or is not a file; it must hold " + needs());
  }
  const auto size = std::filesystem::file_size(file, ec);
  if (ec) {
    throw config_error(config_error_code::bad_value, at,
                       "initial state file '" + shown + "' of model '" + config.model_name +
                           "' cannot be read (" + ec.message() + "); it must hold " + needs());
  }
  auto bytes = buffer::allocate(static_cast<std::size_t>(size));
  std::ifstream in{file, std::ios::binary};
  if (size != 0 &&
      !in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size))) {
    throw config_error(config_error_code::bad_value, at,
                       "initial state file '" + shown + "' of model '" + config.model_name +
                           "' cannot be read; it must hold " + needs());
  }
  const bool fits = type == data_type::bytes ? count_bytes_elements(bytes.bytes()) == elements
                                             : bytes.size() == expected;
  if (!fits) {
    throw config_error(config_error_code::bad_value, at,
                       "initial state file '" + shown + "' of model '" + config.model_name +
                           "' holds " + std::to_string(bytes.size()) + " bytes but must hold " +
                           needs());
  }
  return bytes;
}

/// The spec of state `index`, its data file read now, so that a missing or short file fails the
/// load rather than the first request. Throws config_error.
[[nodiscard]] inline state_spec make_state_spec(const state_store_config& config,
                                                std::size_t index) {
  const auto& options = config.states[index];
  state_spec spec;
  spec.options = options;
  spec.initial_dims = initial_state_shape(options);
  spec.declared_output = std::find(config.model_outputs.begin(), config.model_outputs.end(),
                                   options.output_name) != config.model_outputs.end();
  if (!options.initial_state.empty() && !options.initial_state.front().zero_data &&
      !options.initial_state.front().data_file.empty()) {
    spec.from_file = true;
    spec.initial_bytes = initial_state_file(config, index, spec.initial_dims);
  }
  return spec;
}

} // namespace servekit::detail
