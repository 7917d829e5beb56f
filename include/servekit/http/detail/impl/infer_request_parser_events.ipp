#pragma once
/// \file
/// infer_request_parser's SAX events (detail/infer_request_parser.hpp): keys, scalar values and
/// the start and end of arrays and objects, followed through the request with its context stack.

#include <servekit/core/data_type.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/http/detail/infer_request_parser.hpp>
#include <servekit/http/detail/json_scalar.hpp>

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

namespace servekit::http::detail {

SERVEKIT_DECL bool infer_request_parser::key(std::string_view k) {
  switch (top()) {
  case ctx::root:
    if (k == "id") {
      return mark_seen(root_seen_, field::id, k, key_owner::request);
    }
    if (k == "parameters") {
      return mark_seen(root_seen_, field::parameters, k, key_owner::request);
    }
    if (k == "inputs") {
      return mark_seen(root_seen_, field::inputs, k, key_owner::request);
    }
    if (k == "outputs") {
      return mark_seen(root_seen_, field::outputs, k, key_owner::request);
    }
    // Other top-level keys ("model_name", "model_version" some clients send) are ignored, as
    // Triton ignores them.
    pending_ = field::ignore;
    return true;

  case ctx::params: {
    static constexpr std::pair<std::string_view, field> known[] = {
        {"sequence_id", field::sequence_id},   {"sequence_start", field::sequence_start},
        {"sequence_end", field::sequence_end}, {"priority", field::priority},
        {"timeout", field::timeout},           {"binary_data_output", field::binary_data_output},
    };
    for (const auto& [name, f] : known) {
      if (k == name) {
        parameter_name_.assign(k);
        return mark_seen(params_seen_, f, k, key_owner::request_parameters);
      }
    }
    if (k.starts_with("triton_")) {
      return fail("parameter keys starting with 'triton_' are reserved for Triton usage and "
                  "should not be specified.");
    }
    // Any other parameter goes to the backend, as Triton hands it over
    // (TRITONSERVER_InferenceRequestSet*Parameter); custom_parameter checks its type and name.
    parameter_name_.assign(k);
    pending_ = field::other_parameter;
    return true;
  }

  case ctx::input:
    if (k == "name") {
      return mark_seen(input_.seen, field::name, k, key_owner::input);
    }
    if (k == "shape") {
      return mark_seen(input_.seen, field::shape, k, key_owner::input);
    }
    if (k == "datatype") {
      return mark_seen(input_.seen, field::datatype, k, key_owner::input);
    }
    if (k == "data") {
      return mark_seen(input_.seen, field::data, k, key_owner::input);
    }
    if (k == "parameters") {
      return mark_seen(input_.seen, field::parameters, k, key_owner::input);
    }
    pending_ = field::ignore;
    return true;

  case ctx::input_params:
    if (k == "binary_data_size") {
      return mark_seen(input_.seen_params, field::binary_data_size, k, key_owner::input_parameters);
    }
    if (k.starts_with("shared_memory_")) {
      return fail(
          fmt::format("{}: '{}': shared memory is not supported by this server", input_label(), k));
    }
    pending_ = field::ignore;
    return true;

  case ctx::output:
    if (k == "name") {
      return mark_seen(output_.seen, field::name, k, key_owner::output);
    }
    if (k == "parameters") {
      return mark_seen(output_.seen, field::parameters, k, key_owner::output);
    }
    pending_ = field::ignore;
    return true;

  case ctx::output_params:
    if (k == "binary_data") {
      return mark_seen(output_.seen_params, field::binary_data, k, key_owner::output_parameters);
    }
    if (k == "classification") {
      return fail(
          fmt::format("{}: 'classification' is not supported by this server", output_label()));
    }
    if (k.starts_with("shared_memory_")) {
      return fail(fmt::format("{}: '{}': shared memory is not supported by this server",
                              output_label(), k));
    }
    pending_ = field::ignore;
    return true;

  case ctx::skip:
    return true;

  default:
    return fail("unexpected key in the request JSON"); // the parser only sends keys in objects
  }
}

SERVEKIT_DECL bool infer_request_parser::value(const json_scalar& s, std::string_view text) {
  switch (top()) {
  case ctx::data:
    return data_value(s, text);
  case ctx::shape:
    return shape_value(s);
  case ctx::skip:
    return true;
  case ctx::before_root:
    return fail("the request body must be a JSON object");
  case ctx::root:
    return root_value(s, text);
  case ctx::params:
    return parameter_value(s, text);
  case ctx::input:
    return input_value(s, text);
  case ctx::input_params: {
    const field f = std::exchange(pending_, field::none);
    if (f == field::binary_data_size) {
      if (s.tag != json_scalar::kind::unsigned_integer) {
        return fail(fmt::format("{}: 'binary_data_size' must be a non-negative integer, got {}",
                                input_label(), describe(s)));
      }
      input_.binary_size = s.u;
    }
    return true;
  }
  case ctx::output: {
    const field f = std::exchange(pending_, field::none);
    if (f == field::name) {
      if (s.tag != json_scalar::kind::string) {
        return fail(fmt::format("{}: 'name' must be a string", output_label()));
      }
      output_.name.assign(text);
      output_.has_name = true;
    } else if (f == field::parameters) {
      return fail(fmt::format("{}: 'parameters' must be an object", output_label()));
    }
    return true;
  }
  case ctx::output_params: {
    const field f = std::exchange(pending_, field::none);
    if (f == field::binary_data) {
      if (s.tag != json_scalar::kind::boolean) {
        return fail(fmt::format("{}: 'binary_data' must be true or false, got {}", output_label(),
                                describe(s)));
      }
      output_.binary = s.b;
    }
    return true;
  }
  case ctx::inputs:
    return fail("'inputs' must be an array of objects");
  case ctx::outputs:
    return fail("'outputs' must be an array of objects");
  case ctx::done:
    break;
  }
  return fail("unexpected value after the request JSON");
}

SERVEKIT_DECL bool infer_request_parser::root_value(const json_scalar& s, std::string_view text) {
  switch (std::exchange(pending_, field::none)) {
  case field::id:
    if (s.tag != json_scalar::kind::string) {
      return fail(fmt::format("'id' must be a string, got {}", describe(s)));
    }
    out_.request.id.assign(text);
    return true;
  case field::parameters:
    return fail("'parameters' must be an object");
  case field::inputs:
    return fail("'inputs' must be an array");
  case field::outputs:
    return fail("'outputs' must be an array");
  default:
    return true; // an ignored key
  }
}

SERVEKIT_DECL bool infer_request_parser::parameter_value(const json_scalar& s,
                                                         std::string_view text) {
  auto& r = out_.request;
  const auto expected = [&](std::string_view what) {
    return fail(fmt::format("Unable to parse '{}': expected {}, got {}", parameter_name_, what,
                            describe(s)));
  };
  switch (std::exchange(pending_, field::none)) {
  case field::sequence_id:
    if (s.tag == json_scalar::kind::unsigned_integer) {
      r.sequence_id = correlation_id{s.u};
      return true;
    }
    if (s.tag == json_scalar::kind::string) {
      r.sequence_id = correlation_id{std::string{text}};
      return true;
    }
    return expected("an unsigned integer or a string");
  case field::sequence_start:
    if (s.tag != json_scalar::kind::boolean) {
      return expected("true or false");
    }
    r.sequence_start = s.b;
    return true;
  case field::sequence_end:
    if (s.tag != json_scalar::kind::boolean) {
      return expected("true or false");
    }
    r.sequence_end = s.b;
    return true;
  case field::priority:
    if (s.tag != json_scalar::kind::unsigned_integer) {
      return expected("an unsigned integer");
    }
    r.priority = s.u;
    return true;
  case field::timeout:
    if (s.tag != json_scalar::kind::unsigned_integer) {
      return expected("an unsigned integer (microseconds)");
    }
    r.timeout_us = s.u;
    return true;
  case field::binary_data_output:
    if (s.tag != json_scalar::kind::boolean) {
      return expected("true or false");
    }
    out_.binary_data_output = s.b;
    return true;
  default: // field::other_parameter
    return custom_parameter(s, text);
  }
}

SERVEKIT_DECL bool infer_request_parser::custom_parameter(const json_scalar& s,
                                                          std::string_view text) {
  auto& list = out_.request.parameters;
  if (!first_of_name(parameter_names_, list.size(), parameter_name_,
                     [&list](std::size_t i) -> const std::string& { return list[i].name; })) {
    return fail(fmt::format("duplicate key '{}' in 'parameters'", parameter_name_));
  }
  // As Triton's HTTP front end types them, except that an integer past INT64_MAX stays exact
  // as a uint64 (Triton makes it a double).
  switch (s.tag) {
  case json_scalar::kind::string:
    list.append(parameter_name_, std::string{text});
    return true;
  case json_scalar::kind::boolean:
    list.append(parameter_name_, s.b);
    return true;
  case json_scalar::kind::integer:
    list.append(parameter_name_, s.i);
    return true;
  case json_scalar::kind::unsigned_integer:
    if (s.u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      list.append(parameter_name_, static_cast<std::int64_t>(s.u));
    } else {
      list.append(parameter_name_, s.u);
    }
    return true;
  case json_scalar::kind::floating:
    list.append(parameter_name_, s.d);
    return true;
  case json_scalar::kind::null:
    break;
  }
  return fail_parameter_type("null");
}

SERVEKIT_DECL bool infer_request_parser::fail_parameter_type(std::string_view got) {
  return fail(fmt::format("parameter '{}' has invalid type ({}). It should be either 'int', "
                          "'bool', 'double' or 'string'.",
                          parameter_name_, got));
}

SERVEKIT_DECL bool infer_request_parser::input_value(const json_scalar& s, std::string_view text) {
  switch (std::exchange(pending_, field::none)) {
  case field::name:
    if (s.tag != json_scalar::kind::string) {
      return fail(fmt::format("{}: 'name' must be a string, got {}", input_label(), describe(s)));
    }
    input_.name.assign(text);
    input_.has_name = true;
    return true;
  case field::datatype: {
    if (s.tag != json_scalar::kind::string) {
      return fail(
          fmt::format("{}: 'datatype' must be a string, got {}", input_label(), describe(s)));
    }
    // Only the protocol spellings ("FP32"), not the model-config ones ("TYPE_FP32").
    const auto type = parse_data_type(text);
    if (!type || to_string(*type) != text) {
      return fail(fmt::format("{}: unknown datatype '{}'", input_label(), text));
    }
    input_.type = *type;
    return true;
  }
  case field::shape:
    return fail(fmt::format("{}: 'shape' must be an array of non-negative integers, got {}",
                            input_label(), describe(s)));
  case field::data:
    // A bare scalar is one element, as Triton reads it.
    input_.has_data = true;
    input_.data_is_array = false;
    return data_value(s, text);
  case field::parameters:
    return fail(fmt::format("{}: 'parameters' must be an object", input_label()));
  default:
    return true;
  }
}

SERVEKIT_DECL bool infer_request_parser::data_value(const json_scalar& s, std::string_view text) {
  if (input_.data_is_array) {
    const std::size_t d = input_.depth;
    ++input_.level_count[d - 1];
    if (input_.leaf_depth == 0) {
      input_.leaf_depth = d;
    } else if (input_.leaf_depth != d) {
      input_.ragged = true;
    }
  }
  if (s.tag == json_scalar::kind::string) {
    if (text.size() > std::numeric_limits<std::uint32_t>::max()) {
      return fail(fmt::format("{}: a BYTES element is longer than 4 GiB", input_label()));
    }
    const auto n = static_cast<std::uint32_t>(text.size());
    const char prefix[4] = {static_cast<char>(n & 0xFFU), static_cast<char>((n >> 8U) & 0xFFU),
                            static_cast<char>((n >> 16U) & 0xFFU),
                            static_cast<char>((n >> 24U) & 0xFFU)};
    scratch_.bytes.append(prefix, 4);
    scratch_.bytes.append(text);
  }
  if (scratch_.values.size() >= limits_.max_tensor_elements) [[unlikely]] {
    return fail_too_many_elements();
  }
  scratch_.values.push_back(s);
  return true;
}

SERVEKIT_DECL bool infer_request_parser::fail_too_many_elements() {
  return fail(fmt::format("{}: 'data' has more than {} elements (the limit max_tensor_elements)",
                          input_label(), limits_.max_tensor_elements));
}

SERVEKIT_DECL bool infer_request_parser::shape_value(const json_scalar& s) {
  if (s.tag != json_scalar::kind::unsigned_integer ||
      s.u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    return fail(fmt::format("{}: 'shape' dimensions must be non-negative integers, got {}",
                            input_label(), describe(s)));
  }
  if (input_.dims.rank() == shape::max_rank) {
    return fail(
        fmt::format("{}: 'shape' has more than {} dimensions", input_label(), shape::max_rank));
  }
  input_.dims.push_back(static_cast<std::int64_t>(s.u));
  return true;
}

SERVEKIT_DECL bool infer_request_parser::start(bool object) {
  switch (top()) {
  case ctx::skip:
    ++skip_depth_;
    return true;

  case ctx::data:
    if (object) {
      return fail(fmt::format("{}: 'data' must hold values or arrays, not objects", input_label()));
    }
    if (input_.depth == shape::max_rank) {
      return fail(fmt::format("{}: 'data' is nested deeper than {} levels", input_label(),
                              shape::max_rank));
    }
    ++input_.level_count[input_.depth - 1];
    input_.level_count[input_.depth] = 0;
    ++input_.depth;
    if (input_.depth > input_.max_depth) {
      input_.max_depth = input_.depth;
    }
    return true;

  case ctx::before_root:
    if (!object) {
      return fail("the request body must be a JSON object");
    }
    return push(ctx::root);

  case ctx::root:
    switch (std::exchange(pending_, field::none)) {
    case field::parameters:
      return object ? push(ctx::params) : fail("'parameters' must be an object");
    case field::inputs:
      inputs_seen_ = true;
      return object ? fail("'inputs' must be an array") : push(ctx::inputs);
    case field::outputs:
      return object ? fail("'outputs' must be an array") : push(ctx::outputs);
    case field::id:
      return fail("'id' must be a string");
    default:
      skip_depth_ = 1;
      return push(ctx::skip);
    }

  case ctx::params: {
    const field f = std::exchange(pending_, field::none);
    if (f == field::other_parameter) {
      return fail_parameter_type(object ? "an object" : "an array");
    }
    return fail(fmt::format("Unable to parse '{}': expected a value, got {}", parameter_name_,
                            object ? "an object" : "an array"));
  }

  case ctx::inputs:
    if (!object) {
      return fail("'inputs' must be an array of objects");
    }
    if (input_index_ >= limits_.max_inputs) {
      return fail(fmt::format("the request has more than {} inputs (the limit max_inputs)",
                              limits_.max_inputs));
    }
    input_.name.clear();
    input_.has_name = false;
    input_.type.reset();
    input_.dims = shape{};
    input_.has_shape = false;
    input_.has_data = false;
    input_.data_is_array = false;
    input_.binary_size.reset();
    input_.seen = 0;
    input_.seen_params = 0;
    input_.depth = 0;
    input_.max_depth = 0;
    input_.leaf_depth = 0;
    input_.ragged = false;
    scratch_.clear();
    return push(ctx::input);

  case ctx::input:
    switch (std::exchange(pending_, field::none)) {
    case field::shape:
      if (object) {
        return fail(
            fmt::format("{}: 'shape' must be an array of non-negative integers", input_label()));
      }
      input_.has_shape = true;
      return push(ctx::shape);
    case field::data:
      if (object) {
        return fail(fmt::format("{}: 'data' must be an array", input_label()));
      }
      begin_data_array();
      reserve_data();
      return push(ctx::data);
    case field::parameters:
      return object ? push(ctx::input_params)
                    : fail(fmt::format("{}: 'parameters' must be an object", input_label()));
    case field::name:
      return fail(fmt::format("{}: 'name' must be a string", input_label()));
    case field::datatype:
      return fail(fmt::format("{}: 'datatype' must be a string", input_label()));
    default:
      skip_depth_ = 1;
      return push(ctx::skip);
    }

  case ctx::input_params:
    if (std::exchange(pending_, field::none) == field::binary_data_size) {
      return fail(
          fmt::format("{}: 'binary_data_size' must be a non-negative integer", input_label()));
    }
    skip_depth_ = 1;
    return push(ctx::skip);

  case ctx::shape:
    return fail(
        fmt::format("{}: 'shape' must be an array of non-negative integers", input_label()));

  case ctx::outputs:
    if (!object) {
      return fail("'outputs' must be an array of objects");
    }
    if (output_index_ >= limits_.max_outputs) {
      return fail(fmt::format("the request asks for more than {} outputs (the limit max_outputs)",
                              limits_.max_outputs));
    }
    output_.name.clear();
    output_.has_name = false;
    output_.binary = false;
    output_.seen = 0;
    output_.seen_params = 0;
    return push(ctx::output);

  case ctx::output:
    switch (std::exchange(pending_, field::none)) {
    case field::parameters:
      return object ? push(ctx::output_params)
                    : fail(fmt::format("{}: 'parameters' must be an object", output_label()));
    case field::name:
      return fail(fmt::format("{}: 'name' must be a string", output_label()));
    default:
      skip_depth_ = 1;
      return push(ctx::skip);
    }

  case ctx::output_params:
    if (std::exchange(pending_, field::none) == field::binary_data) {
      return fail(fmt::format("{}: 'binary_data' must be true or false", output_label()));
    }
    skip_depth_ = 1;
    return push(ctx::skip);

  case ctx::done:
    break;
  }
  return fail("unexpected value after the request JSON");
}

SERVEKIT_DECL bool infer_request_parser::end() {
  switch (top()) {
  case ctx::skip:
    if (--skip_depth_ == 0) {
      pop();
    }
    return true;
  case ctx::data: {
    const std::size_t d = input_.depth;
    const std::int64_t len = input_.level_count[d - 1];
    if (input_.level_len[d - 1] < 0) {
      input_.level_len[d - 1] = len;
    } else if (input_.level_len[d - 1] != len) {
      input_.ragged = true;
    }
    if (--input_.depth == 0) {
      pop();
    }
    return true;
  }
  case ctx::input:
    if (!finish_input()) {
      return false;
    }
    ++input_index_;
    pop();
    return true;
  case ctx::output:
    if (!finish_output()) {
      return false;
    }
    ++output_index_;
    pop();
    return true;
  case ctx::root:
    if (!inputs_seen_) {
      return fail("the request has no 'inputs'");
    }
    pop();
    return push(ctx::done);
  default:
    pop();
    return true;
  }
}

} // namespace servekit::http::detail
