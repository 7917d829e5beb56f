#pragma once
/// \file
/// encode_infer_response, encode_error and http_status_for: a servekit::response as a KServe v2
/// infer response body (JSON, with Triton's binary tensor data extension), an error as KServe's
/// error body, and a status code as Triton's HTTP status.
///
/// The encoder writes JSON by hand with fmt (detail/json_writer.hpp) into the caller's string,
/// reusing its capacity.

#include <servekit/core/bytes.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/parameters.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/status.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/http/decoded_infer_request.hpp>
#include <servekit/http/detail/checked_count.hpp>
#include <servekit/http/detail/half_float.hpp>
#include <servekit/http/detail/json_writer.hpp>

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

namespace servekit::http {

namespace detail {

/// Checks that an output tensor can be written: host memory, and bytes matching its shape.
[[nodiscard]] inline status check_output(const tensor& t, std::size_t& count) {
  if (!t.data.location().host_accessible()) {
    return internal_error(fmt::format("output '{}' is in device memory", t.name));
  }
  const auto n = checked_element_count(t.shape);
  if (!n) {
    return internal_error(
        fmt::format("output '{}' has an invalid shape {}", t.name, to_string(t.shape)));
  }
  count = *n;
  if (t.type == data_type::invalid) {
    return internal_error(fmt::format("output '{}' has no datatype", t.name));
  }
  if (t.type == data_type::bytes) {
    const auto elements = count_bytes_elements(t.data.bytes());
    if (!elements || *elements != count) {
      return internal_error(
          fmt::format("output tensor shape does not match size of output for '{}'", t.name));
    }
    return {};
  }
  const auto expected = checked_bytes(count, byte_size(t.type));
  if (!expected || *expected != t.data.size()) {
    return internal_error(
        fmt::format("output tensor shape does not match size of output for '{}'", t.name));
  }
  return {};
}

template <class T>
[[nodiscard]] inline T load(const std::byte* base, std::size_t i) noexcept {
  T v;
  std::memcpy(&v, base + i * sizeof(T), sizeof(T));
  return v;
}

/// Writes the "data" array of an output. Fails only for BYTES that are not UTF-8.
[[nodiscard]] inline status append_output_data(std::string& out, const tensor& t,
                                               std::size_t count) {
  const std::byte* base = t.data.data();
  out += '[';
  const auto each = [&](auto write) {
    for (std::size_t i = 0; i < count; ++i) {
      if (i != 0) {
        out += ',';
      }
      write(i);
    }
  };
  switch (t.type) {
  case data_type::boolean:
    each([&](std::size_t i) { out += load<std::uint8_t>(base, i) != 0 ? "true" : "false"; });
    break;
  case data_type::uint8:
    each([&](std::size_t i) { append_integer(out, unsigned{load<std::uint8_t>(base, i)}); });
    break;
  case data_type::uint16:
    each([&](std::size_t i) { append_integer(out, unsigned{load<std::uint16_t>(base, i)}); });
    break;
  case data_type::uint32:
    each([&](std::size_t i) { append_integer(out, load<std::uint32_t>(base, i)); });
    break;
  case data_type::uint64:
    each([&](std::size_t i) { append_integer(out, load<std::uint64_t>(base, i)); });
    break;
  case data_type::int8:
    each([&](std::size_t i) { append_integer(out, int{load<std::int8_t>(base, i)}); });
    break;
  case data_type::int16:
    each([&](std::size_t i) { append_integer(out, int{load<std::int16_t>(base, i)}); });
    break;
  case data_type::int32:
    each([&](std::size_t i) { append_integer(out, load<std::int32_t>(base, i)); });
    break;
  case data_type::int64:
    each([&](std::size_t i) { append_integer(out, load<std::int64_t>(base, i)); });
    break;
  case data_type::fp16:
    // Triton refuses FP16/BF16 outputs in JSON; servekit writes their values as numbers.
    each([&](std::size_t i) { append_float(out, half_to_float(load<std::uint16_t>(base, i))); });
    break;
  case data_type::bf16:
    each([&](std::size_t i) { append_float(out, bf16_to_float(load<std::uint16_t>(base, i))); });
    break;
  case data_type::fp32:
    each([&](std::size_t i) { append_float(out, load<float>(base, i)); });
    break;
  case data_type::fp64:
    each([&](std::size_t i) { append_float(out, load<double>(base, i)); });
    break;
  case data_type::bytes: {
    std::size_t index = 0;
    bool utf8 = true;
    (void)for_each_bytes_element(t.data.bytes(), [&](std::string_view e) {
      if (!utf8) {
        return;
      }
      if (index != 0) {
        out += ',';
      }
      utf8 = append_json_string(out, e, true);
      ++index;
    });
    if (!utf8) {
      return invalid_argument(fmt::format(
          "output '{}': BYTES element {} is not valid UTF-8 and cannot be written as a JSON "
          "string; request the output with \"binary_data\": true",
          t.name, index - 1));
    }
    break;
  }
  case data_type::invalid:
    break;
  }
  out += ']';
  return {};
}

/// A parameter's value as JSON: true/false, an integer, a number (as append_float writes it) or
/// a string (invalid UTF-8 becomes U+FFFD).
inline void append_parameter_value(std::string& out, const parameter_value& v) {
  std::visit(
      [&out](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) {
          out += x ? "true" : "false";
        } else if constexpr (std::is_same_v<T, double>) {
          append_float(out, x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          append_json_string(out, x);
        } else {
          append_integer(out, x);
        }
      },
      v);
}

/// `,"parameters":{"<name>":<value>,...}` (Triton's form for a response's parameters), or
/// nothing for an empty list.
inline void append_response_parameters(std::string& out, const parameter_list& parameters) {
  if (parameters.empty()) {
    return;
  }
  out += R"(,"parameters":{)";
  bool first = true;
  for (const auto& p : parameters) {
    if (!first) {
      out += ',';
    }
    first = false;
    append_json_string(out, p.name);
    out += ':';
    append_parameter_value(out, p.value);
  }
  out += '}';
}

/// `{"model_name":...,"model_version":"<version>"` and `,"id":...` when `id` is set: how both
/// response forms (infer and generate) begin. The object is left open.
inline void append_response_head(std::string& out, std::string_view model, std::int64_t version,
                                 std::string_view id) {
  out += R"({"model_name":)";
  append_json_string(out, model);
  out += R"(,"model_version":")";
  append_integer(out, version);
  out += '"';
  if (!id.empty()) {
    out += R"(,"id":)";
    append_json_string(out, id);
  }
}

} // namespace detail

/// KServe's error body: {"error":"<message>"} (invalid UTF-8 in the message becomes U+FFFD).
[[nodiscard]] inline std::string encode_error(std::string_view message) {
  std::string out;
  out.reserve(message.size() + 16);
  out += R"({"error":)";
  detail::append_json_string(out, message);
  out += '}';
  return out;
}

/// Writes the KServe v2 response for a successful `r` into `body` (cleared first; its capacity
/// is reused): {"model_name","model_version" (a string),"id" (only when r.id is set),"outputs"}.
///
/// Output selection: when `asked.outputs` lists outputs, only those are written (a model may
/// already have filtered); otherwise all of them. Outputs keep the response's order. An output is
/// sent as binary data when its requested_output says "binary_data" or `asked.binary_data_output`
/// is set: it then has "parameters": {"binary_data_size": N} instead of "data", its bytes follow
/// the JSON in output order, and `json_header_length` is set to the JSON's length (else it is
/// reset). Only `asked.outputs` and `asked.binary_data_output` are read, never `asked.request`.
///
/// Floats are written in their shortest round-trip form; NaN and infinities as `NaN`,
/// `Infinity`, `-Infinity` (Triton's choice; not strict JSON). FP16/BF16 are written as numbers
/// (Triton refuses them in JSON). The response's "parameters" object, after "id" and before
/// "outputs" as Triton writes it, holds `r.parameters` (what the backend set), and is left out
/// when there are none: like Triton, the request's parameters (sequence_id...) are not echoed.
///
/// Failed responses are not encoded here (write encode_error(r.status.message())). The returned
/// status is not ok when an output cannot be written: internal for a tensor whose bytes do not
/// match its shape or that lives in device memory, invalid_argument for BYTES that are not UTF-8
/// in a JSON output; `body` then holds encode_error(message) and `json_header_length` is reset.
inline status encode_infer_response(const servekit::response& r, std::string_view model,
                                    std::int64_t version, const decoded_infer_request& asked,
                                    std::string& body,
                                    std::optional<std::size_t>& json_header_length) {
  body.clear();
  json_header_length.reset();

  const auto binary_for = [&](const tensor& t, bool& binary) {
    if (asked.outputs.empty()) {
      binary = asked.binary_data_output;
      return true;
    }
    for (const auto& o : asked.outputs) {
      if (o.name == t.name) {
        binary = o.binary_data || asked.binary_data_output;
        return true;
      }
    }
    return false;
  };

  // One reservation up front (a no-op when the caller reuses its string): binary data is copied
  // as is; JSON text takes about four characters per byte of FP32 or UINT8 data.
  std::size_t estimate = 64 + model.size() + r.id.size();
  for (const auto& p : r.parameters) {
    const auto* text = std::get_if<std::string>(&p.value);
    estimate += 32 + p.name.size() + (text != nullptr ? text->size() : 0);
  }
  for (const auto& t : r.outputs) {
    bool binary = false;
    if (binary_for(t, binary)) {
      estimate += 96 + t.name.size() + (binary ? 1 : 4) * t.data.size();
    }
  }
  body.reserve(estimate);

  detail::append_response_head(body, model, version, r.id);
  detail::append_response_parameters(body, r.parameters);
  body += R"(,"outputs":[)";

  bool first = true;
  bool any_binary = false;
  for (const auto& t : r.outputs) {
    bool binary = false;
    if (!binary_for(t, binary)) {
      continue;
    }
    std::size_t count = 0;
    status s = detail::check_output(t, count);
    if (s.ok()) {
      if (!first) {
        body += ',';
      }
      first = false;
      body += R"({"name":)";
      detail::append_json_string(body, t.name);
      body += R"(,"datatype":")";
      body += to_string(t.type);
      body += R"(","shape":)";
      detail::append_shape(body, t.shape);
      if (binary) {
        body += R"(,"parameters":{"binary_data_size":)";
        detail::append_integer(body, t.data.size());
        body += "}}";
        any_binary = true;
        continue;
      }
      body += R"(,"data":)";
      s = detail::append_output_data(body, t, count);
      body += '}';
    }
    if (!s.ok()) {
      body = encode_error(s.message());
      return s;
    }
  }
  body += "]}";

  if (any_binary) {
    json_header_length = body.size();
    for (const auto& t : r.outputs) {
      bool binary = false;
      if (binary_for(t, binary) && binary && !t.data.empty()) {
        body.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
      }
    }
  }
  return {};
}

/// The HTTP status for a status code, as Triton maps them: internal 500, not_found 404,
/// unavailable 503, every other error 400 (and 200 for ok).
[[nodiscard]] constexpr unsigned http_status_for(status_code code) noexcept {
  switch (code) {
  case status_code::ok:
    return 200;
  case status_code::internal:
    return 500;
  case status_code::not_found:
    return 404;
  case status_code::unavailable:
    return 503;
  default:
    return 400;
  }
}

} // namespace servekit::http
