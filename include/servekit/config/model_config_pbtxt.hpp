#pragma once
/// \file
/// Loads and saves `model_options` as Triton's config.pbtxt: the protobuf text format of
/// `inference.ModelConfig` (proto/servekit/config/model_config.proto, with Triton's names and
/// field numbers). libprotobuf parses the text, the message is converted to its JSON mapping and
/// read by load_model_config (config/model_config_json.hpp): config.pbtxt and config.json accept
/// the same configurations and refuse the others with the same messages, and a pbtxt error also
/// says where in the text it is.
///
///     auto options = servekit::load_model_config_pbtxt(R"(max_batch_size: 8)");
///     std::string text = servekit::save_model_config_pbtxt(options);
///
/// The definitions live in config/impl/model_config_pbtxt.ipp, compiled once into
/// servekit::server; with SERVEKIT_HEADER_ONLY defined this header includes it instead
/// (core/detail/linkage.hpp), and the including program needs libprotobuf's headers and the
/// generated message classes (target servekit::model_config_proto, which servekit::server links).

#include <servekit/core/config_error.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/runtime/model_options.hpp>

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace servekit {

/// A place in a text file, both counted from 1. A tab advances the column to the next multiple
/// of 8 plus 1, as protobuf's tokenizer (and GCC's diagnostics) count it.
struct text_position {
  int line = 0;
  int column = 0;
  friend bool operator==(const text_position&, const text_position&) = default;
};

/// A config_error from a config.pbtxt, with where it is. Syntax errors (code parse_error, empty
/// path) are placed where the parser stopped; errors in a field at the field's name (a field
/// the text leaves out: at its closest enclosing field that the text writes; nowhere for the
/// document itself). what() is "<line>:<column>: " followed by config_error's
/// "<JSON pointer>: <message>", or just the latter without a position.
class pbtxt_config_error : public config_error {
public:
  SERVEKIT_DECL pbtxt_config_error(const config_error& error, std::optional<text_position> where);

  [[nodiscard]] const std::optional<text_position>& where() const noexcept { return where_; }
  [[nodiscard]] const char* what() const noexcept override { return what_.c_str(); }

  /// What a message about the file `file` says: "<file>:<line>:<column>: <pointer>: <message>",
  /// or "<file>: <pointer>: <message>" without a position.
  [[nodiscard]] SERVEKIT_DECL std::string located_in(std::string_view file) const;

private:
  std::optional<text_position> where_;
  std::string what_;
};

/// One config.pbtxt, parsed: its JSON mapping (what load_model_config reads) and where each of
/// its fields is written, to place the errors found in that JSON.
class model_config_text {
public:
  /// Parses `text` as an `inference.ModelConfig`. Throws pbtxt_config_error with code
  /// parse_error at the first syntax error, unknown field or enum name, field given twice, or
  /// two members of one oneof (protobuf's words).
  SERVEKIT_DECL explicit model_config_text(std::string_view text);
  SERVEKIT_DECL ~model_config_text();
  SERVEKIT_DECL model_config_text(model_config_text&&) noexcept;
  SERVEKIT_DECL model_config_text& operator=(model_config_text&&) noexcept;
  model_config_text(const model_config_text&) = delete;
  model_config_text& operator=(const model_config_text&) = delete;

  /// The protobuf JSON mapping with Triton's field names (as in config.json): enums by name,
  /// 64-bit integers as decimal strings, fields at their default value left out (max_batch_size
  /// is written whenever the text sets it, 0 included).
  [[nodiscard]] const nlohmann::json& json() const noexcept { return json_; }

  /// Where the field at `json_pointer` (a path of `json()`, as config_error::path() gives it) is
  /// written, or its closest enclosing field that is; nullopt for the document root.
  [[nodiscard]] SERVEKIT_DECL std::optional<text_position>
  locate(std::string_view json_pointer) const;

  /// `error` (found in json()) placed at its path.
  [[nodiscard]] SERVEKIT_DECL pbtxt_config_error locate(const config_error& error) const;

  /// load_model_config(json()); its config_error rethrown as a pbtxt_config_error.
  [[nodiscard]] SERVEKIT_DECL model_options load() const;

private:
  struct parsed; // the message and libprotobuf's record of where each field is
  std::unique_ptr<parsed> parsed_;
  nlohmann::json json_;
};

/// Parses and reads a config.pbtxt: model_config_text(text).load().
[[nodiscard]] SERVEKIT_DECL model_options load_model_config_pbtxt(std::string_view text);

/// Writes `options` as a config.pbtxt: save_model_config(options) in protobuf text format,
/// Triton's layout (two-space indents, `dims: [ 16 ]` lists on one line).
/// load_model_config_pbtxt(save_model_config_pbtxt(x)) == x for every valid x.
[[nodiscard]] SERVEKIT_DECL std::string save_model_config_pbtxt(const model_options& options);

} // namespace servekit

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/config/impl/model_config_pbtxt.ipp>
#endif
