#pragma once
/// \file
/// The KServe v2 metadata documents: model_metadata_json (GET v2/models/<name>) and
/// server_metadata_json (GET v2), with the server's name, version and extensions. They are cold
/// paths, so nlohmann::json builds them.

#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/config/detail/json_teardown.hpp>
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
/// The versions as KServe lists them, decimal strings, appended to the array `out`.
inline void put_version_names(nlohmann::json& out, const model_options& config,
                              std::span<const std::int64_t> versions) {
  if (versions.empty()) {
    out.push_back(std::to_string(config.version));
  }
  for (const auto v : versions) {
    out.push_back(std::to_string(v));
  }
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
  // Built member by member, dismantled if a failure stops it (see json_teardown.hpp).
  nlohmann::json out = nlohmann::json::object();
  const servekit::detail::json_teardown_on_throw teardown{out};
  const auto put_tensors = [&](const char* key, const std::vector<tensor_config>& list) {
    auto& tensors = servekit::detail::json_array_member(out, key);
    for (const auto& t : list) {
      auto& entry = servekit::detail::json_object_element(tensors);
      entry["name"] = t.name;
      entry["datatype"] = to_string(t.type);
      auto& shape = servekit::detail::json_array_member(entry, "shape");
      if (batching) {
        shape.push_back(-1);
      }
      for (const auto d : t.dims.dims()) {
        shape.push_back(d);
      }
    }
  };
  out["name"] = config.name;
  detail::put_version_names(servekit::detail::json_array_member(out, "versions"), config, versions);
  out["platform"] = config.platform.empty() ? config.backend : config.platform;
  put_tensors("inputs", config.input);
  put_tensors("outputs", config.output);
  return out;
}

/// KServe server metadata: {"name":"servekit","version":"0.1.0","extensions":[...]}.
[[nodiscard]] inline nlohmann::json server_metadata_json() {
  nlohmann::json out = nlohmann::json::object();
  const servekit::detail::json_teardown_on_throw teardown{out}; // see json_teardown.hpp
  out["name"] = server_name;
  out["version"] = server_version;
  auto& extensions = servekit::detail::json_array_member(out, "extensions");
  for (const auto e : server_extensions) {
    extensions.push_back(e);
  }
  return out;
}

} // namespace servekit::http
