#pragma once
/// \file
/// Definitions for config/model_config_pbtxt.hpp: parsing a config.pbtxt with libprotobuf's
/// text-format parser into the generated inference::ModelConfig, its JSON mapping for
/// load_model_config, placing that reader's errors (JSON pointers) back in the text through the
/// parser's ParseInfoTree, and printing options as text. Compiled once into servekit::server, or
/// included by model_config_pbtxt.hpp with SERVEKIT_HEADER_ONLY.

#include <servekit/config/model_config_json.hpp>
#include <servekit/config/model_config_pbtxt.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/runtime/model_options.hpp>

#include <servekit/config/model_config.pb.h> // generated from proto/servekit/config/model_config.proto

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace servekit {

namespace detail {

namespace pb = google::protobuf;

/// Keeps the parser's first error: the one the user must fix first (later ones often follow
/// from it).
class pbtxt_first_error final : public pb::io::ErrorCollector {
public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (!message_) {
      where_ = text_position{line + 1, column + 1};
      message_ = message;
    }
  }

  [[nodiscard]] const std::optional<std::string>& message() const noexcept { return message_; }
  [[nodiscard]] const std::optional<text_position>& where() const noexcept { return where_; }

private:
  std::optional<text_position> where_;
  std::optional<std::string> message_;
};

/// The reference tokens of a JSON pointer, unescaped (RFC 6901).
[[nodiscard]] SERVEKIT_DECL std::vector<std::string> pointer_tokens(std::string_view pointer) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < pointer.size() && pointer[at] == '/') {
    const auto end = pointer.find('/', at + 1);
    const auto raw = pointer.substr(at + 1, end == std::string_view::npos ? end : end - at - 1);
    std::string token;
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '~' && i + 1 < raw.size() && (raw[i + 1] == '0' || raw[i + 1] == '1')) {
        token += raw[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        token += raw[i];
      }
    }
    out.push_back(std::move(token));
    if (end == std::string_view::npos) {
      break;
    }
    at = end;
  }
  return out;
}

/// A decimal array index, or nullopt.
[[nodiscard]] SERVEKIT_DECL std::optional<int> pointer_index(const std::string& token) {
  if (token.empty() || token.size() > 9) {
    return std::nullopt;
  }
  int out = 0;
  for (const char c : token) {
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    out = out * 10 + (c - '0');
  }
  return out;
}

/// A map entry's key as its JSON member name (the JSON mapping writes integer keys in decimal).
[[nodiscard]] SERVEKIT_DECL std::string map_key_text(const pb::Message& entry) {
  const auto* key = entry.GetDescriptor()->map_key();
  const auto* reflection = entry.GetReflection();
  switch (key->cpp_type()) {
  case pb::FieldDescriptor::CPPTYPE_STRING:
    return reflection->GetString(entry, key);
  case pb::FieldDescriptor::CPPTYPE_UINT64:
    return std::to_string(reflection->GetUInt64(entry, key));
  case pb::FieldDescriptor::CPPTYPE_INT64:
    return std::to_string(reflection->GetInt64(entry, key));
  case pb::FieldDescriptor::CPPTYPE_UINT32:
    return std::to_string(reflection->GetUInt32(entry, key));
  case pb::FieldDescriptor::CPPTYPE_INT32:
    return std::to_string(reflection->GetInt32(entry, key));
  case pb::FieldDescriptor::CPPTYPE_BOOL:
    return reflection->GetBool(entry, key) ? "true" : "false";
  default:
    return {};
  }
}

/// Where the parser recorded occurrence `i` of `field` (-1: a singular field).
[[nodiscard]] SERVEKIT_DECL std::optional<text_position>
recorded_position(const pb::TextFormat::ParseInfoTree& tree, const pb::FieldDescriptor* field,
                  int i) {
  const auto location = tree.GetLocation(field, i);
  if (location.line < 0) {
    return std::nullopt;
  }
  return text_position{location.line + 1, location.column + 1};
}

/// Where element `index` of `field` (-1: a singular field) is written. The parser records a
/// position per time the field is written: once for a field written `dims: 4` or `input { }`
/// per element, once for a whole list `dims: [ 4, 5 ]`. When the two counts differ, a message
/// element is placed at its first field written and any other at the list holding it.
[[nodiscard]] SERVEKIT_DECL std::optional<text_position>
field_position(const pb::TextFormat::ParseInfoTree& tree, const pb::FieldDescriptor* field,
               int index, int size) {
  if (index < 0) {
    return recorded_position(tree, field, -1);
  }
  int written = 0;
  while (written <= size && recorded_position(tree, field, written)) {
    ++written;
  }
  if (written == size) {
    return recorded_position(tree, field, index);
  }
  if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
    if (const auto* element = tree.GetTreeForNested(field, index); element != nullptr) {
      std::optional<text_position> first;
      const auto* type = field->message_type();
      for (int f = 0; f < type->field_count(); ++f) {
        const auto* member = type->field(f);
        const auto where = recorded_position(*element, member, member->is_repeated() ? 0 : -1);
        if (where && (!first || std::pair{where->line, where->column} <
                                    std::pair{first->line, first->column})) {
          first = where;
        }
      }
      if (first) {
        return first;
      }
    }
  }
  if (written == 0) {
    return std::nullopt;
  }
  return recorded_position(tree, field, index < written ? index : written - 1);
}

} // namespace detail

SERVEKIT_DECL pbtxt_config_error::pbtxt_config_error(const config_error& error,
                                                     std::optional<text_position> where)
    : config_error{error}, where_{where} {
  what_ = where_ ? std::to_string(where_->line) + ":" + std::to_string(where_->column) + ": " : "";
  what_ += config_error::what();
}

SERVEKIT_DECL std::string pbtxt_config_error::located_in(std::string_view file) const {
  std::string out{file};
  out += where_ ? ":" : ": ";
  out += what_;
  return out;
}

struct model_config_text::parsed {
  inference::ModelConfig message;
  google::protobuf::TextFormat::ParseInfoTree tree;
};

SERVEKIT_DECL model_config_text::model_config_text(std::string_view text)
    : parsed_{std::make_unique<parsed>()} {
  namespace pb = google::protobuf;
  detail::pbtxt_first_error errors;
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&parsed_->tree);
  if (!parser.ParseFromString(std::string{text}, &parsed_->message)) {
    throw pbtxt_config_error{
        config_error{config_error_code::parse_error, "",
                     "model config is not valid protobuf text format (inference.ModelConfig): " +
                         errors.message().value_or("unreadable")},
        errors.where()};
  }
  pb::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true; // Triton's field names, as config.json has them
  std::string json_text;
  if (const auto status = pb::util::MessageToJsonString(parsed_->message, &json_text, options);
      !status.ok()) {
    // Only a message libprotobuf cannot map to JSON gets here (none that parses, today).
    throw pbtxt_config_error{config_error{config_error_code::parse_error, "", status.ToString()},
                             std::nullopt};
  }
  json_ = nlohmann::json::parse(json_text);
}

SERVEKIT_DECL model_config_text::~model_config_text() = default;
SERVEKIT_DECL model_config_text::model_config_text(model_config_text&&) noexcept = default;
SERVEKIT_DECL model_config_text&
model_config_text::operator=(model_config_text&&) noexcept = default;

SERVEKIT_DECL std::optional<text_position>
model_config_text::locate(std::string_view json_pointer) const {
  namespace pb = google::protobuf;
  const auto tokens = detail::pointer_tokens(json_pointer);
  const pb::Message* message = &parsed_->message;
  const pb::TextFormat::ParseInfoTree* tree = &parsed_->tree;
  std::optional<text_position> found;
  std::size_t i = 0;
  // Walk the message and the parser's tree together, one field (and index or key) at a time,
  // keeping the deepest position written.
  while (i < tokens.size() && message != nullptr && tree != nullptr) {
    const auto* descriptor = message->GetDescriptor();
    const auto* reflection = message->GetReflection();
    const auto* field = descriptor->FindFieldByName(tokens[i++]);
    if (field == nullptr) {
      break;
    }
    const int size = field->is_repeated() ? reflection->FieldSize(*message, field) : 0;
    if (!field->is_repeated()) {
      if (auto where = detail::field_position(*tree, field, -1, 0)) {
        found = where;
      }
      if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE || i == tokens.size()) {
        break;
      }
      tree = tree->GetTreeForNested(field, -1);
      message = &reflection->GetMessage(*message, field);
      continue;
    }
    // A repeated field: the next token is an index, or a key when the field is a map.
    std::optional<int> index;
    if (i < tokens.size()) {
      if (field->is_map()) {
        // Entries are read in the order written, and a key written twice keeps its last value.
        for (int k = size - 1; k >= 0; --k) {
          if (detail::map_key_text(reflection->GetRepeatedMessage(*message, field, k)) ==
              tokens[i]) {
            index = k;
            break;
          }
        }
      } else {
        index = detail::pointer_index(tokens[i]);
      }
    }
    if (!index || *index >= size) {
      if (auto where = detail::field_position(*tree, field, 0, size)) {
        found = where;
      }
      break;
    }
    ++i;
    if (auto where = detail::field_position(*tree, field, *index, size)) {
      found = where;
    }
    if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE || i == tokens.size()) {
      break;
    }
    const auto* element_tree = tree->GetTreeForNested(field, *index);
    const auto& element = reflection->GetRepeatedMessage(*message, field, *index);
    if (!field->is_map()) {
      tree = element_tree;
      message = &element;
      continue;
    }
    // A map's value: only a message value has fields to go on into.
    const auto* value_field = field->message_type()->map_value();
    if (element_tree == nullptr ||
        value_field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      break;
    }
    tree = element_tree->GetTreeForNested(value_field, -1);
    message = &element.GetReflection()->GetMessage(element, value_field);
  }
  return found;
}

SERVEKIT_DECL pbtxt_config_error model_config_text::locate(const config_error& error) const {
  return pbtxt_config_error{error, error.path().empty() ? std::nullopt : locate(error.path())};
}

SERVEKIT_DECL model_options model_config_text::load() const {
  try {
    return load_model_config(json_);
  } catch (const config_error& e) {
    throw locate(e);
  }
}

SERVEKIT_DECL model_options load_model_config_pbtxt(std::string_view text) {
  return model_config_text{text}.load();
}

SERVEKIT_DECL std::string save_model_config_pbtxt(const model_options& options) {
  namespace pb = google::protobuf;
  inference::ModelConfig message;
  const auto json_text = save_model_config(options).dump();
  if (const auto status = pb::util::JsonStringToMessage(json_text, &message); !status.ok()) {
    // save_model_config writes only fields of inference.ModelConfig; a failure is servekit's bug.
    throw config_error{config_error_code::bad_value, "",
                       "cannot write the model config as protobuf text format: " +
                           status.ToString()};
  }
  if (message.version() == 1) {
    message.clear_version(); // the default; a Triton config has no version field
  }
  pb::TextFormat::Printer printer;
  printer.SetUseShortRepeatedPrimitives(true);
  std::string out;
  printer.PrintToString(message, &out);
  return out;
}

} // namespace servekit
