#pragma once
/// \file
/// The KServe v2 metadata documents: model_metadata_json (GET v2/models/<name>) and
/// server_metadata_json (GET v2), with the server's name, version and extensions. They are cold
/// paths, so nlohmann::json builds them.

#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/runtime/model_options.hpp>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace servekit::http {

/// The server name and version reported by server_metadata_json().
inline constexpr std::string_view server_name = "servekit";
inline constexpr std::string_view server_version = "0.1.0";

/// The KServe/Triton extensions the servekit server implements (server metadata "extensions").
inline constexpr std::array<std::string_view, 6> server_extensions = {
    "model_repository", "schedule_policy", "model_configuration",
    "sequence",         "statistics",      "binary_tensor_data",
};

namespace detail {
/// The versions as KServe lists them: decimal strings.
[[nodiscard]] inline nlohmann::json version_names(const model_options& config,
                                                  std::span<const std::int64_t> versions) {
  auto out = nlohmann::json::array();
  if (versions.empty()) {
    out.push_back(std::to_string(config.version));
  }
  for (const auto v : versions) {
    out.push_back(std::to_string(v));
  }
  return out;
}
} // namespace detail

/// KServe model metadata: {"name","versions":["<version>"],"platform","inputs","outputs"}, each
/// tensor {"name","datatype" (KServe spelling, "FP32"),"shape"} with the batch dimension as -1
/// in front when the model batches (max_batch_size > 0), as Triton reports it. "platform" is the
/// config's platform, else its backend. Pass the config as loaded (inputs and outputs listed),
/// and the versions the repository serves (model_repository::versions_of); none: the config's.
[[nodiscard]] inline nlohmann::json
model_metadata_json(const model_options& config, std::span<const std::int64_t> versions = {}) {
  const bool batching = config.max_batch_size.value_or(0) > 0;
  const auto tensors = [batching](const std::vector<tensor_config>& list) {
    auto out = nlohmann::json::array();
    for (const auto& t : list) {
      auto dims = nlohmann::json::array();
      if (batching) {
        dims.push_back(-1);
      }
      for (const auto d : t.dims.dims()) {
        dims.push_back(d);
      }
      out.push_back({{"name", t.name}, {"datatype", to_string(t.type)}, {"shape", dims}});
    }
    return out;
  };
  return {
      {"name", config.name},
      {"versions", detail::version_names(config, versions)},
      {"platform", config.platform.empty() ? config.backend : config.platform},
      {"inputs", tensors(config.input)},
      {"outputs", tensors(config.output)},
  };
}

/// KServe server metadata: {"name":"servekit","version":"0.1.0","extensions":[...]}.
[[nodiscard]] inline nlohmann::json server_metadata_json() {
  auto extensions = nlohmann::json::array();
  for (const auto e : server_extensions) {
    extensions.push_back(e);
  }
  return {{"name", server_name}, {"version", server_version}, {"extensions", extensions}};
}

} // namespace servekit::http
