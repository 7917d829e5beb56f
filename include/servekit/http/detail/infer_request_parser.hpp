#pragma once
/// \file
/// infer_request_parser: the SAX handler behind decode_infer_request, which json_reader drives
/// through a KServe v2 infer request, and decode_scratch, the per-thread buffers it fills.

#include <servekit/core/buffer.hpp>
#include <servekit/core/bytes.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/core/status.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/http/decoded_infer_request.hpp>
#include <servekit/http/detail/checked_count.hpp>
#include <servekit/http/detail/half_float.hpp>
#include <servekit/http/detail/json_scalar.hpp>

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace servekit::http::detail {

/// Per-thread buffers the decoder reuses from request to request, so that a steady stream of
/// requests allocates only the tensors it produces.
struct decode_scratch {
  std::vector<json_scalar> values; ///< the current input's "data" elements, in order
  std::string bytes;               ///< the current input's string elements, BYTES-serialised
  std::string unescaped;           ///< the JSON reader's buffer for strings with escapes

  void clear() noexcept {
    values.clear();
    bytes.clear();
    unescaped.clear();
  }
  /// Gives back memory after an unusually large request.
  void trim() {
    static constexpr std::size_t keep_values = std::size_t{1} << 16U;
    static constexpr std::size_t keep_bytes = std::size_t{1} << 20U;
    if (values.capacity() > keep_values) {
      std::vector<json_scalar>{}.swap(values);
    }
    if (bytes.capacity() > keep_bytes) {
      std::string{}.swap(bytes);
    }
    if (unescaped.capacity() > keep_bytes) {
      std::string{}.swap(unescaped);
    }
  }
};

[[nodiscard]] inline decode_scratch& thread_decode_scratch() {
  thread_local decode_scratch scratch;
  return scratch;
}

/// The SAX handler behind decode_infer_request. It follows where it is in the request with a
/// small stack of contexts; a key sets `pending_`, which says what the next value is.
class infer_request_parser {
public:
  infer_request_parser(decode_scratch& scratch, decoded_infer_request& out,
                       std::span<const std::byte> binary) noexcept
      : scratch_{scratch}, out_{out}, binary_{binary} {}

  [[nodiscard]] status take_error() { return std::move(error_); }
  [[nodiscard]] bool failed() const noexcept { return !error_.ok(); }

  /// Checks that run once the whole JSON has been read.
  [[nodiscard]] bool finish() {
    if (binary_used_ != binary_.size()) {
      return fail(fmt::format("the request carries {} bytes of binary data after its JSON "
                              "header, but its inputs' 'binary_data_size' add up to {}",
                              binary_.size(), binary_used_));
    }
    return true;
  }

  // --- SAX interface (json_reader) -------------------------------------------------------------
  bool null() { return value(json_scalar{}, {}); }
  bool boolean(bool v) {
    json_scalar s;
    s.k = json_scalar::kind::boolean;
    s.b = v;
    return value(s, {});
  }
  bool number_integer(std::int64_t v) {
    json_scalar s;
    s.k = json_scalar::kind::integer;
    s.i = v;
    return value(s, {});
  }
  bool number_unsigned(std::uint64_t v) {
    json_scalar s;
    s.k = json_scalar::kind::unsigned_integer;
    s.u = v;
    return value(s, {});
  }
  bool number_float(double v) {
    json_scalar s;
    s.k = json_scalar::kind::floating;
    s.d = v;
    return value(s, {});
  }
  bool string(std::string_view v) {
    json_scalar s;
    s.k = json_scalar::kind::string;
    return value(s, v);
  }
  bool start_object(std::size_t /*unknown size*/) { return start(true); }
  bool start_array(std::size_t /*unknown size*/) { return start(false); }
  bool end_object() { return end(); }
  bool end_array() { return end(); }
  bool key(std::string_view k);
  bool parse_error(std::string message) {
    return fail(fmt::format("failed to parse the request JSON: {}", message));
  }

private:
  enum class ctx : std::uint8_t {
    before_root,
    root,
    params,
    inputs,
    input,
    input_params,
    shape,
    data,
    outputs,
    output,
    output_params,
    skip,
    done,
  };

  enum class field : std::uint8_t {
    none,
    ignore, // a value servekit does not use: skipped whatever its type
    id,
    parameters,
    inputs,
    outputs,
    sequence_id,
    sequence_start,
    sequence_end,
    priority,
    timeout,
    binary_data_output,
    other_parameter,
    name,
    shape,
    datatype,
    data,
    binary_data_size,
    binary_data,
  };

  // Bits of the keys seen in the current object, to refuse duplicates (a DOM would keep the last
  // one silently; two "data" arrays would otherwise be concatenated here).
  static constexpr std::uint32_t bit(field f) noexcept {
    return std::uint32_t{1} << static_cast<unsigned>(f);
  }

  /// The input being read. Its fields may arrive in any order, so "data" is kept as scalars in
  /// the scratch and converted when the object ends.
  struct pending_input {
    std::string name;
    bool has_name = false;
    std::optional<data_type> type;
    servekit::shape dims;
    bool has_shape = false;
    bool has_data = false;
    bool data_is_array = false;
    std::optional<std::uint64_t> binary_size;
    std::uint32_t seen = 0;
    std::uint32_t seen_params = 0;
    // The nesting of "data": depth of the open array (1 = the outermost), the deepest level seen,
    // the length of the first array closed at each level, the count in the open array at each
    // level, and the depth the scalars sit at.
    std::size_t depth = 0;
    std::size_t max_depth = 0;
    std::array<std::int64_t, shape::max_rank> level_len{};
    std::array<std::int64_t, shape::max_rank> level_count{};
    std::size_t leaf_depth = 0;
    bool ragged = false;
  };

  struct pending_output {
    std::string name;
    bool has_name = false;
    bool binary = false;
    std::uint32_t seen = 0;
    std::uint32_t seen_params = 0;
  };

  [[nodiscard]] ctx top() const noexcept { return stack_[depth_ - 1]; }
  bool push(ctx c) {
    if (depth_ == stack_.size()) {
      return fail("the request JSON is nested too deeply"); // unreachable: contexts are bounded
    }
    stack_[depth_++] = c;
    return true;
  }
  void pop() noexcept { --depth_; }

  bool fail(std::string message) {
    if (error_.ok()) {
      error_ = invalid_argument(std::move(message));
    }
    return false;
  }

  [[nodiscard]] std::string input_label() const {
    if (input_.has_name) {
      return fmt::format("input '{}'", input_.name);
    }
    return fmt::format("inputs[{}]", input_index_);
  }
  [[nodiscard]] std::string output_label() const {
    if (output_.has_name) {
      return fmt::format("output '{}'", output_.name);
    }
    return fmt::format("outputs[{}]", output_index_);
  }

  /// The object a key belongs to, for the duplicate-key message. Named lazily: this runs for
  /// every key of every request, the message almost never.
  enum class key_owner : std::uint8_t {
    request,
    request_parameters,
    input,
    input_parameters,
    output,
    output_parameters
  };
  [[nodiscard]] std::string owner_name(key_owner owner) const {
    switch (owner) {
    case key_owner::request:
      return "the request";
    case key_owner::request_parameters:
      return "'parameters'";
    case key_owner::input:
      return input_label();
    case key_owner::input_parameters:
      return input_label() + " 'parameters'";
    case key_owner::output:
      return output_label();
    case key_owner::output_parameters:
      return output_label() + " 'parameters'";
    }
    return {};
  }

  bool mark_seen(std::uint32_t& seen, field f, std::string_view key, key_owner owner) {
    if ((seen & bit(f)) != 0) {
      return fail(fmt::format("duplicate key '{}' in {}", key, owner_name(owner)));
    }
    seen |= bit(f);
    pending_ = f;
    return true;
  }

  bool value(const json_scalar& s, std::string_view text);
  bool start(bool object);
  bool end();

  bool root_value(const json_scalar& s, std::string_view text);
  bool parameter_value(const json_scalar& s, std::string_view text);
  bool input_value(const json_scalar& s, std::string_view text);
  bool data_value(const json_scalar& s, std::string_view text);
  bool shape_value(const json_scalar& s);

  void begin_data_array() noexcept {
    input_.has_data = true;
    input_.data_is_array = true;
    input_.depth = 1;
    input_.max_depth = 1;
    input_.level_count[0] = 0;
    input_.level_len.fill(-1);
  }

  bool finish_input();
  bool finish_output();
  bool convert_data(tensor& t, std::size_t count);
  bool element_error(std::size_t index, const json_scalar& s, std::string_view expected) {
    return fail(fmt::format("{}: 'data' element {} must be {}, got {}", input_label(), index,
                            expected, describe(s)));
  }

  decode_scratch& scratch_;
  decoded_infer_request& out_;
  std::span<const std::byte> binary_;
  std::size_t binary_used_ = 0;
  status error_;

  std::array<ctx, 8> stack_{ctx::before_root};
  std::size_t depth_ = 1;
  std::size_t skip_depth_ = 0;
  field pending_ = field::none;
  std::string parameter_name_; // the top-level parameter being read, for messages
  std::uint32_t root_seen_ = 0;
  std::uint32_t params_seen_ = 0;
  bool inputs_seen_ = false;

  pending_input input_;
  std::size_t input_index_ = 0;
  pending_output output_;
  std::size_t output_index_ = 0;
};

inline bool infer_request_parser::key(std::string_view k) {
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
    // Any other parameter is allowed and, here, ignored: Triton hands such parameters to the
    // backend (TRITONSERVER_InferenceRequestSet*Parameter), and servekit's request has no
    // free-form parameters yet. Triton's type rule still applies (int, bool or string).
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

inline bool infer_request_parser::value(const json_scalar& s, std::string_view text) {
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
      if (s.k != json_scalar::kind::unsigned_integer) {
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
      if (s.k != json_scalar::kind::string) {
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
      if (s.k != json_scalar::kind::boolean) {
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

inline bool infer_request_parser::root_value(const json_scalar& s, std::string_view text) {
  switch (std::exchange(pending_, field::none)) {
  case field::id:
    if (s.k != json_scalar::kind::string) {
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

inline bool infer_request_parser::parameter_value(const json_scalar& s, std::string_view text) {
  auto& r = out_.request;
  const auto expected = [&](std::string_view what) {
    return fail(fmt::format("Unable to parse '{}': expected {}, got {}", parameter_name_, what,
                            describe(s)));
  };
  switch (std::exchange(pending_, field::none)) {
  case field::sequence_id:
    if (s.k == json_scalar::kind::unsigned_integer) {
      r.sequence_id = correlation_id{s.u};
      return true;
    }
    if (s.k == json_scalar::kind::string) {
      r.sequence_id = correlation_id{std::string{text}};
      return true;
    }
    return expected("an unsigned integer or a string");
  case field::sequence_start:
    if (s.k != json_scalar::kind::boolean) {
      return expected("true or false");
    }
    r.sequence_start = s.b;
    return true;
  case field::sequence_end:
    if (s.k != json_scalar::kind::boolean) {
      return expected("true or false");
    }
    r.sequence_end = s.b;
    return true;
  case field::priority:
    if (s.k != json_scalar::kind::unsigned_integer) {
      return expected("an unsigned integer");
    }
    r.priority = s.u;
    return true;
  case field::timeout:
    if (s.k != json_scalar::kind::unsigned_integer) {
      return expected("an unsigned integer (microseconds)");
    }
    r.timeout_us = s.u;
    return true;
  case field::binary_data_output:
    if (s.k != json_scalar::kind::boolean) {
      return expected("true or false");
    }
    out_.binary_data_output = s.b;
    return true;
  default: // field::other_parameter
    if (s.k == json_scalar::kind::string || s.k == json_scalar::kind::boolean ||
        s.k == json_scalar::kind::integer || s.k == json_scalar::kind::unsigned_integer) {
      return true;
    }
    return fail(fmt::format("parameter '{}' has invalid type. It should be either 'int', "
                            "'bool', or 'string'.",
                            parameter_name_));
  }
}

inline bool infer_request_parser::input_value(const json_scalar& s, std::string_view text) {
  switch (std::exchange(pending_, field::none)) {
  case field::name:
    if (s.k != json_scalar::kind::string) {
      return fail(fmt::format("{}: 'name' must be a string, got {}", input_label(), describe(s)));
    }
    input_.name.assign(text);
    input_.has_name = true;
    return true;
  case field::datatype: {
    if (s.k != json_scalar::kind::string) {
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

inline bool infer_request_parser::data_value(const json_scalar& s, std::string_view text) {
  if (input_.data_is_array) {
    const std::size_t d = input_.depth;
    ++input_.level_count[d - 1];
    if (input_.leaf_depth == 0) {
      input_.leaf_depth = d;
    } else if (input_.leaf_depth != d) {
      input_.ragged = true;
    }
  }
  if (s.k == json_scalar::kind::string) {
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
  scratch_.values.push_back(s);
  return true;
}

inline bool infer_request_parser::shape_value(const json_scalar& s) {
  if (s.k != json_scalar::kind::unsigned_integer ||
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

inline bool infer_request_parser::start(bool object) {
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
      return fail(fmt::format("parameter '{}' has invalid type. It should be either 'int', "
                              "'bool', or 'string'.",
                              parameter_name_));
    }
    return fail(fmt::format("Unable to parse '{}': expected a value, got {}", parameter_name_,
                            object ? "an object" : "an array"));
  }

  case ctx::inputs:
    if (!object) {
      return fail("'inputs' must be an array of objects");
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

inline bool infer_request_parser::end() {
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

inline bool infer_request_parser::finish_input() {
  if (!input_.has_name) {
    return fail(fmt::format("inputs[{}] has no 'name'", input_index_));
  }
  if (!input_.type) {
    return fail(fmt::format("{}: missing 'datatype'", input_label()));
  }
  if (!input_.has_shape) {
    return fail(fmt::format("{}: missing 'shape'", input_label()));
  }
  const bool binary = input_.binary_size.has_value();
  if (input_.has_data == binary) {
    return fail(fmt::format("{}: the input must set exactly one of 'data' and "
                            "'binary_data_size' in 'parameters', but {}",
                            input_label(), binary ? "set both" : "set neither"));
  }
  for (const auto& t : out_.request.inputs) {
    if (t.name == input_.name) {
      return fail(fmt::format("input '{}' appears more than once", input_.name));
    }
  }
  const auto count = checked_element_count(input_.dims);
  if (!count) {
    return fail(
        fmt::format("{}: shape {} has too many elements", input_label(), to_string(input_.dims)));
  }
  const data_type type = *input_.type;

  if (binary) {
    const std::uint64_t n = *input_.binary_size;
    const std::size_t left = binary_.size() - binary_used_;
    if (n > left) {
      return fail(fmt::format("{}: 'binary_data_size' is {} but only {} bytes of binary data "
                              "are left after the JSON header",
                              input_label(), n, left));
    }
    const auto bytes = binary_.subspan(binary_used_, static_cast<std::size_t>(n));
    if (type == data_type::bytes) {
      const auto elements = count_bytes_elements(bytes);
      if (!elements) {
        return fail(fmt::format("{}: the binary BYTES data is not a sequence of "
                                "length-prefixed elements",
                                input_label()));
      }
      if (*elements != *count) {
        return fail(fmt::format("{}: expected {} BYTES elements for shape {}, the binary data "
                                "holds {}",
                                input_label(), *count, to_string(input_.dims), *elements));
      }
    } else {
      const auto expected = checked_bytes(*count, byte_size(type));
      if (!expected || *expected != n) {
        return fail(fmt::format("{}: 'binary_data_size' is {}, but shape {} of {} needs {} bytes",
                                input_label(), n, to_string(input_.dims), to_string(type),
                                expected ? fmt::format("{}", *expected) : "too many"));
      }
    }
    binary_used_ += static_cast<std::size_t>(n);
    out_.request.inputs.push_back(
        tensor{std::move(input_.name), type, input_.dims, buffer::copy_of(bytes)});
    return true;
  }

  // JSON data: nested arrays must have the shape's dims; flat ones only its element count.
  if (input_.data_is_array && input_.max_depth >= 2) {
    if (input_.ragged || (input_.leaf_depth != 0 && input_.leaf_depth != input_.max_depth)) {
      return fail(fmt::format("{}: 'data' is a ragged nested array", input_label()));
    }
    shape nested;
    for (std::size_t i = 0; i < input_.max_depth; ++i) {
      nested.push_back(input_.level_len[i]);
    }
    if (!(nested == input_.dims)) {
      return fail(fmt::format("{}: nested 'data' has shape {}, but 'shape' is {}", input_label(),
                              to_string(nested), to_string(input_.dims)));
    }
  }
  const std::size_t got = scratch_.values.size();
  if (got != *count) {
    return fail(fmt::format("{}: expected {} values for shape {}, got {}", input_label(), *count,
                            to_string(input_.dims), got));
  }
  tensor t;
  t.type = type;
  t.shape = input_.dims;
  if (!convert_data(t, got)) { // before moving the name: its messages name the input
    return false;
  }
  t.name = std::move(input_.name);
  out_.request.inputs.push_back(std::move(t));
  return true;
}

inline bool infer_request_parser::convert_data(tensor& t, std::size_t count) {
  const auto& values = scratch_.values;
  const data_type type = t.type;
  if (type == data_type::bytes) {
    for (std::size_t i = 0; i < count; ++i) {
      if (values[i].k != json_scalar::kind::string) {
        return element_error(i, values[i], "a string for BYTES");
      }
    }
    t.data = buffer::copy_of(std::as_bytes(std::span{scratch_.bytes}));
    return true;
  }
  t.data = buffer::allocate(count * byte_size(type));
  std::byte* base = t.data.data();
  const auto store = [base](std::size_t i, auto v) {
    std::memcpy(base + i * sizeof(v), &v, sizeof(v));
  };
  const auto integers = [&]<class Int>(Int, std::string_view name) {
    for (std::size_t i = 0; i < count; ++i) {
      Int v{};
      if (!scalar_to_integer(values[i], v)) {
        return element_error(i, values[i],
                             fmt::format("an integer in [{}, {}] for {}",
                                         std::numeric_limits<Int>::min(),
                                         std::numeric_limits<Int>::max(), name));
      }
      store(i, v);
    }
    return true;
  };
  switch (type) {
  case data_type::boolean:
    for (std::size_t i = 0; i < count; ++i) {
      if (values[i].k != json_scalar::kind::boolean) {
        return element_error(i, values[i], "true or false for BOOL");
      }
      store(i, static_cast<std::uint8_t>(values[i].b ? 1U : 0U));
    }
    return true;
  case data_type::uint8:
    return integers(std::uint8_t{}, "UINT8");
  case data_type::uint16:
    return integers(std::uint16_t{}, "UINT16");
  case data_type::uint32:
    return integers(std::uint32_t{}, "UINT32");
  case data_type::uint64:
    return integers(std::uint64_t{}, "UINT64");
  case data_type::int8:
    return integers(std::int8_t{}, "INT8");
  case data_type::int16:
    return integers(std::int16_t{}, "INT16");
  case data_type::int32:
    return integers(std::int32_t{}, "INT32");
  case data_type::int64:
    return integers(std::int64_t{}, "INT64");
  case data_type::fp32:
    for (std::size_t i = 0; i < count; ++i) {
      double d = 0;
      float f = 0;
      if (!scalar_to_double(values[i], d)) {
        return element_error(i, values[i], "a number for FP32");
      }
      if (!double_to_float(d, f)) {
        return element_error(i, values[i], "a number within FP32's range");
      }
      store(i, f);
    }
    return true;
  case data_type::fp64:
    for (std::size_t i = 0; i < count; ++i) {
      double d = 0;
      if (!scalar_to_double(values[i], d)) {
        return element_error(i, values[i], "a number for FP64");
      }
      store(i, d);
    }
    return true;
  case data_type::fp16:
  case data_type::bf16: {
    // Triton refuses FP16/BF16 in JSON ("use the binary data format"); servekit converts the
    // numbers, rounding to nearest even, and refuses only values past the type's range.
    const bool half = type == data_type::fp16;
    for (std::size_t i = 0; i < count; ++i) {
      double d = 0;
      float f = 0;
      if (!scalar_to_double(values[i], d)) {
        return element_error(i, values[i], half ? "a number for FP16" : "a number for BF16");
      }
      const bool in_range = double_to_float(d, f);
      const std::uint16_t bits = half ? float_to_half(f) : float_to_bf16(f);
      if (!in_range || (bits & 0x7FFFU) == (half ? 0x7C00U : 0x7F80U)) {
        return element_error(i, values[i],
                             half ? "a number within FP16's range (|x| <= 65504)"
                                  : "a number within BF16's range");
      }
      store(i, bits);
    }
    return true;
  }
  case data_type::bytes:
  case data_type::invalid:
    break;
  }
  return fail(fmt::format("{}: unsupported datatype", input_label()));
}

inline bool infer_request_parser::finish_output() {
  if (!output_.has_name) {
    return fail(fmt::format("outputs[{}] has no 'name'", output_index_));
  }
  for (const auto& o : out_.outputs) {
    if (o.name == output_.name) {
      return fail(fmt::format("output '{}' is requested more than once", output_.name));
    }
  }
  out_.request.requested_outputs.push_back(output_.name);
  out_.outputs.push_back(requested_output{std::move(output_.name), output_.binary});
  return true;
}

} // namespace servekit::http::detail
