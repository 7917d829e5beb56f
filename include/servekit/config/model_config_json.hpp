#pragma once
/// \file
/// Loads and saves `model_options` as Triton's model-configuration JSON: the protobuf JSON
/// mapping of `inference.ModelConfig`, with Triton's field and enum names. Every error is a
/// `config_error` whose `path()` is a JSON pointer to the offending field.
///
///     auto options = servekit::load_model_config(R"({"max_batch_size": 8})");
///     nlohmann::json j = servekit::save_model_config(options);
///
/// Fields Triton has and servekit does not implement yet are refused by name, never ignored.
///
/// This header declares load_model_config, save_model_config and to_json_pointer_escaped. Their
/// definitions live in config/impl/model_config_json_*.ipp (reading and writing values, error
/// messages, each message's field list with its reader and writer, the checks across fields)
/// and are compiled once into
/// servekit::server; with SERVEKIT_HEADER_ONLY defined this header includes them instead
/// (core/detail/linkage.hpp).

#include <servekit/core/config_error.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/runtime/model_options.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace servekit {

/// Escapes one reference token of a JSON pointer (RFC 6901): '~' becomes "~0" and '/' becomes
/// "~1", so `"/parameters/" + to_json_pointer_escaped("a/b")` is "/parameters/a~1b".
[[nodiscard]] SERVEKIT_DECL std::string to_json_pointer_escaped(std::string_view token);

/// Reads Triton model-configuration JSON (already parsed) into model_options. Integer fields
/// take JSON numbers or decimal strings. Throws config_error whose path() is a JSON pointer to
/// the offending field: unknown_field (typos, and Triton fields servekit does not support yet),
/// wrong_type, or bad_value (including the dynamic- and sequence-batching rules of validate()
/// and Triton's rules for ensembles). An ensemble (`ensemble_scheduling` set) that leaves out
/// `platform` gets platform "ensemble", as Triton requires.
[[nodiscard]] SERVEKIT_DECL model_options load_model_config(const nlohmann::json& config);

/// Parses `json_text` and reads it as load_model_config(const nlohmann::json&) does. Text that
/// is not JSON (or holds a number no double can represent, such as 1e400) throws config_error
/// with code parse_error and the parser's message.
[[nodiscard]] SERVEKIT_DECL model_options load_model_config(std::string_view json_text);

/// Text overloads: a string literal or std::string would otherwise be ambiguous between
/// std::string_view and nlohmann::json.
[[nodiscard]] SERVEKIT_DECL model_options load_model_config(const char* json_text);

/// \copydoc load_model_config(const char*)
[[nodiscard]] SERVEKIT_DECL model_options load_model_config(const std::string& json_text);

/// Writes `options` as Triton model-configuration JSON: TYPE_/KIND_ names, REJECT/DELAY,
/// integers as JSON numbers, parameters as {"key": {"string_value": "..."}}. Always writes
/// name and version, and each ensemble step's model_version; leaves out max_batch_size,
/// dynamic_batching, sequence_batching and ensemble_scheduling when unset, and other fields at
/// their default value; writes platform "ensemble" for an ensemble whose platform is empty.
/// load_model_config(save_model_config(x)) == x for every valid x (an ensemble's platform being
/// "ensemble", as load_model_config sets it).
[[nodiscard]] SERVEKIT_DECL nlohmann::json save_model_config(const model_options& options);

} // namespace servekit

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/config/impl/model_config_json_model.ipp>
#include <servekit/config/impl/model_config_json_scheduling.ipp>
#include <servekit/config/impl/model_config_json_validate.ipp>
#include <servekit/config/impl/model_config_json_values.ipp>
#endif
