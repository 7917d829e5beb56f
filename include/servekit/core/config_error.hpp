#pragma once
/// \file
/// config_error: the one exception servekit throws, for configurations it cannot run.

#include <cstdint>
#include <stdexcept>
#include <string>

namespace servekit {

/// Why a configuration was refused.
enum class config_error_code : std::uint8_t {
  parse_error,   ///< not valid JSON
  unknown_field, ///< a field servekit does not know (often a typo)
  wrong_type,    ///< e.g. a string where a number belongs
  bad_value,     ///< out of range, or in conflict with another field
  backend_error, ///< a backend could not be constructed
};

/// Thrown when a model configuration cannot be used. `path()` is a JSON pointer to the
/// offending field ("/dynamic_batching/preferred_batch_size/1"); what() says what is wrong
/// and includes the path.
class config_error : public std::runtime_error {
public:
  config_error(config_error_code code, std::string path, const std::string& message)
      : std::runtime_error{(path.empty() ? std::string{} : path + ": ") + message}, code_{code},
        path_{std::move(path)} {}

  [[nodiscard]] config_error_code code() const noexcept { return code_; }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

private:
  config_error_code code_;
  std::string path_;
};

} // namespace servekit
