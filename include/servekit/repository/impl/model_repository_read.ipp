#pragma once
/// \file
/// Definitions for repository/model_repository.hpp: reading a model folder (its config.pbtxt or
/// config.json, and the version folders its version_policy selects). Its messages name files
/// relative to the repository: they reach clients, who have no business knowing the host's paths.
/// Compiled once into servekit::server, or included by model_repository.hpp with
/// SERVEKIT_HEADER_ONLY.

#include <servekit/config/model_config_json.hpp>
#include <servekit/config/model_config_pbtxt.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/status.hpp>
#include <servekit/repository/detail/repository_table.hpp>
#include <servekit/repository/detail/version_selection.hpp>
#include <servekit/repository/model_repository.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <ios>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace servekit {

SERVEKIT_DECL model_repository::read_result
model_repository::read_source(std::string_view name) const {
  const std::string model_name{name};
  if (!detail::is_path_component(name)) {
    // Triton's words (model_repository_manager.cc, ValidateModelName).
    return {invalid_argument("invalid model name '" + model_name +
                             "', model name must not contain path traversal characters"),
            nullptr};
  }
  const auto folder = root_ / model_name;
  // Triton's words for a name that is not a model folder (model_repository_manager.cc,
  // LoadUnloadModel), which its clients' tests look for; then why. Not found (404) rather than
  // Triton's 500: the name is the client's mistake.
  const std::string not_polled =
      "failed to load '" + model_name + "', failed to poll from model repository: ";
  std::error_code ec;
  if (!detail::is_model_folder_name(name)) {
    return {not_found(not_polled + "a hidden folder is not a model"), nullptr};
  }
  if (root_.empty() || !std::filesystem::is_directory(folder, ec)) {
    return {not_found(not_polled + "the model repository has no folder '" + model_name + "'"),
            nullptr};
  }
  // Triton reads config.pbtxt only; servekit also reads config.json when there is no
  // config.pbtxt. A config.json next to a config.pbtxt is ignored, and the load says so.
  const auto pbtxt_file = folder / "config.pbtxt";
  const auto json_file = folder / "config.json";
  const bool pbtxt = std::filesystem::exists(pbtxt_file, ec);
  const auto file = pbtxt ? pbtxt_file : json_file;
  // Messages name the file within the repository, never the host path of the repository.
  const std::string shown = model_name + "/" + file.filename().string();
  const auto fail = [&](const std::string& message) {
    return read_result{invalid_argument(shown + ": " + message), nullptr};
  };
  std::ifstream in{file, std::ios::binary};
  if (!in) {
    return fail("cannot read the model configuration (every model folder needs a config.pbtxt "
                "or a config.json)");
  }
  std::ostringstream text;
  text << in.rdbuf();
  // A config.pbtxt's errors are placed in its text ("<model>/config.pbtxt:<line>:<column>: ").
  std::optional<model_config_text> parsed;
  nlohmann::json json;
  try {
    if (pbtxt) {
      parsed.emplace(text.str());
      json = parsed->json();
      if (std::filesystem::exists(json_file, ec)) {
        std::clog << "servekit: model '" << model_name << "': reading " << shown << "; "
                  << model_name << "/config.json is ignored (config.pbtxt wins, as in Triton)\n";
      }
    } else {
      json = nlohmann::json::parse(text.str());
    }
  } catch (const nlohmann::json::parse_error& e) {
    return fail(std::string{"model config is not valid JSON: "} + e.what());
  } catch (const pbtxt_config_error& e) {
    return {invalid_argument(e.located_in(shown)), nullptr};
  }
  // "<file>: <JSON pointer>: <message>", or "<file>:<line>:<column>: <JSON pointer>: <message>".
  const auto error_at = [&](const config_error& e) {
    return parsed ? parsed->locate(e).located_in(shown) : shown + ": " + e.what();
  };
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
          v, error_at(config_error{config_error_code::bad_value,
                                   "/version_policy/specific/versions/" + std::to_string(k),
                                   "version " + std::to_string(v) + " of model '" + model_name +
                                       "' has no version folder '" + model_name + "/" +
                                       std::to_string(v) + "'"}));
    }
    const std::int64_t latest =
        std::max(source->versions.empty() ? 0 : source->versions.back(),
                 source->missing.empty() ? std::int64_t{0} : source->missing.back().first);
    source->config = source->config_for(latest);
  } catch (const config_error& e) {
    return {invalid_argument(error_at(e)), nullptr};
  }
  return {{}, std::move(source)};
}
} // namespace servekit
