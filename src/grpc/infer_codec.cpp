// The ModelInfer messages to and from servekit's request and response (infer_codec.hpp).

#include "infer_codec.hpp"

#include <servekit/core/bytes.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/http/detail/checked_count.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace servekit::grpc::detail {

namespace {

using inference::InferParameter;
using inference::InferTensorContents;
using inference::ModelInferRequest;

[[nodiscard]] std::string_view kind_name(const InferParameter& p) {
  switch (p.parameter_choice_case()) {
  case InferParameter::kBoolParam:
    return "a bool";
  case InferParameter::kInt64Param:
    return "an int64";
  case InferParameter::kUint64Param:
    return "a uint64";
  case InferParameter::kDoubleParam:
    return "a double";
  case InferParameter::kStringParam:
    return "a string";
  default:
    return "no value";
  }
}

/// An unsigned integer parameter (int64 >= 0 or uint64), or nothing.
[[nodiscard]] std::optional<std::uint64_t> unsigned_value(const InferParameter& p) {
  if (p.parameter_choice_case() == InferParameter::kUint64Param) {
    return p.uint64_param();
  }
  if (p.parameter_choice_case() == InferParameter::kInt64Param && p.int64_param() >= 0) {
    return static_cast<std::uint64_t>(p.int64_param());
  }
  return std::nullopt;
}

/// The request's parameters, as the HTTP decoder reads its "parameters" object.
[[nodiscard]] status decode_parameters(const ModelInferRequest& in, servekit::request& out) {
  const auto expected = [](const std::string& name, std::string_view what,
                           const InferParameter& p) {
    return invalid_argument(
        fmt::format("Unable to parse '{}': expected {}, got {}", name, what, kind_name(p)));
  };
  for (const auto& [name, p] : in.parameters()) {
    if (name == "sequence_id") {
      if (p.parameter_choice_case() == InferParameter::kStringParam) {
        out.sequence_id = correlation_id{p.string_param()};
      } else if (const auto u = unsigned_value(p)) {
        out.sequence_id = correlation_id{*u};
      } else {
        return expected(name, "an unsigned integer or a string", p);
      }
    } else if (name == "sequence_start" || name == "sequence_end" || name == "binary_data_output") {
      if (p.parameter_choice_case() != InferParameter::kBoolParam) {
        return expected(name, "true or false", p);
      }
      // binary_data_output is HTTP's: gRPC outputs are always raw bytes.
      if (name == "sequence_start") {
        out.sequence_start = p.bool_param();
      } else if (name == "sequence_end") {
        out.sequence_end = p.bool_param();
      }
    } else if (name == "priority") {
      const auto u = unsigned_value(p);
      if (!u) {
        return expected(name, "an unsigned integer", p);
      }
      out.priority = *u;
    } else if (name == "timeout") {
      const auto u = unsigned_value(p);
      if (!u) {
        return expected(name, "an unsigned integer (microseconds)", p);
      }
      out.timeout_us = *u;
    } else if (name.starts_with("triton_")) {
      return invalid_argument("parameter keys starting with 'triton_' are reserved for Triton "
                              "usage and should not be specified.");
    } else {
      switch (p.parameter_choice_case()) {
      case InferParameter::kBoolParam:
        out.parameters.set(name, parameter_value{p.bool_param()});
        break;
      case InferParameter::kInt64Param:
        out.parameters.set(name, parameter_value{p.int64_param()});
        break;
      case InferParameter::kUint64Param:
        out.parameters.set(name, parameter_value{p.uint64_param()});
        break;
      case InferParameter::kDoubleParam:
        out.parameters.set(name, parameter_value{p.double_param()});
        break;
      case InferParameter::kStringParam:
        out.parameters.set(name, parameter_value{p.string_param()});
        break;
      default:
        return invalid_argument(fmt::format("parameter '{}' has no value", name));
      }
    }
  }
  return {};
}

/// Typed contents `values` (of proto type Source) as `count` elements of C++ type Target,
/// range-checked where Target is narrower.
template <class Target, class Values>
[[nodiscard]] status copy_elements(const Values& values, std::size_t count, buffer& out,
                                   const std::string& input) {
  out = buffer::allocate(count * sizeof(Target));
  auto* p = out.data();
  for (const auto v : values) {
    if constexpr (std::is_integral_v<Target> && !std::is_same_v<Target, bool>) {
      if (v < std::numeric_limits<Target>::min() || v > std::numeric_limits<Target>::max()) {
        return invalid_argument(
            fmt::format("input '{}': value {} is out of range for its datatype", input, v));
      }
    }
    const auto t = static_cast<Target>(v);
    std::memcpy(p, &t, sizeof(Target));
    p += sizeof(Target);
  }
  return {};
}

/// The typed contents of `input` (`count` elements of `type`) into `out`.
[[nodiscard]] status decode_contents(const ModelInferRequest::InferInputTensor& input,
                                     data_type type, std::size_t count, buffer& out) {
  const InferTensorContents& c = input.contents();
  const auto check_count = [&](std::size_t got, std::string_view field) -> status {
    if (got != count) {
      return invalid_argument(fmt::format("input '{}': {} holds {} elements; shape [{}] needs {}",
                                          input.name(), field, got, fmt::join(input.shape(), ","),
                                          count));
    }
    return {};
  };
#define SERVEKIT_GRPC_CONTENTS(field, target)                                                      \
  if (status s = check_count(static_cast<std::size_t>(c.field().size()), #field); !s.ok()) {       \
    return s;                                                                                      \
  }                                                                                                \
  return copy_elements<target>(c.field(), count, out, input.name())
  switch (type) {
  case data_type::boolean:
    SERVEKIT_GRPC_CONTENTS(bool_contents, bool);
  case data_type::int8:
    SERVEKIT_GRPC_CONTENTS(int_contents, std::int8_t);
  case data_type::int16:
    SERVEKIT_GRPC_CONTENTS(int_contents, std::int16_t);
  case data_type::int32:
    SERVEKIT_GRPC_CONTENTS(int_contents, std::int32_t);
  case data_type::int64:
    SERVEKIT_GRPC_CONTENTS(int64_contents, std::int64_t);
  case data_type::uint8:
    SERVEKIT_GRPC_CONTENTS(uint_contents, std::uint8_t);
  case data_type::uint16:
    SERVEKIT_GRPC_CONTENTS(uint_contents, std::uint16_t);
  case data_type::uint32:
    SERVEKIT_GRPC_CONTENTS(uint_contents, std::uint32_t);
  case data_type::uint64:
    SERVEKIT_GRPC_CONTENTS(uint64_contents, std::uint64_t);
  case data_type::fp32:
    SERVEKIT_GRPC_CONTENTS(fp32_contents, float);
  case data_type::fp64:
    SERVEKIT_GRPC_CONTENTS(fp64_contents, double);
  case data_type::bytes: {
    if (status s =
            check_count(static_cast<std::size_t>(c.bytes_contents().size()), "bytes_contents");
        !s.ok()) {
      return s;
    }
    std::vector<std::string_view> elements;
    elements.reserve(count);
    for (const auto& e : c.bytes_contents()) {
      if (e.size() > std::numeric_limits<std::uint32_t>::max()) {
        return invalid_argument(
            fmt::format("input '{}': a BYTES element is larger than 4 GiB", input.name()));
      }
      elements.emplace_back(e);
    }
    out = encode_bytes(elements);
    return {};
  }
  default:
    // FP16 and BF16 have no typed field (Triton's protocol: raw contents only).
    return invalid_argument(fmt::format("input '{}': {} data must be sent in raw_input_contents",
                                        input.name(), to_string(type)));
  }
#undef SERVEKIT_GRPC_CONTENTS
}

/// raw_input_contents entry `raw` for `input` (`count` elements of `type`) into `out`: viewed
/// when `views` allows and the bytes are aligned as a buffer's are, else copied.
[[nodiscard]] status decode_raw(const ModelInferRequest::InferInputTensor& input, data_type type,
                                std::size_t count, std::string& raw, const raw_view_owner& views,
                                buffer& out) {
  const std::span<const std::byte> bytes{reinterpret_cast<const std::byte*>(raw.data()),
                                         raw.size()};
  if (type == data_type::bytes) {
    const auto elements = count_bytes_elements(bytes);
    if (!elements) {
      return invalid_argument(fmt::format("input '{}': raw_input_contents is not a sequence of "
                                          "4-byte-length-prefixed BYTES elements",
                                          input.name()));
    }
    if (*elements != count) {
      return invalid_argument(
          fmt::format("input '{}': raw_input_contents holds {} BYTES elements; shape [{}] needs {}",
                      input.name(), *elements, fmt::join(input.shape(), ","), count));
    }
  } else {
    const auto needed = http::detail::checked_bytes(count, byte_size(type));
    if (!needed || *needed != raw.size()) {
      return invalid_argument(
          fmt::format("input '{}': raw_input_contents holds {} bytes; shape [{}] of {} needs {}",
                      input.name(), raw.size(), fmt::join(input.shape(), ","), to_string(type),
                      needed ? std::to_string(*needed) : std::string{"more than fit in memory"}));
    }
  }
  const auto address = reinterpret_cast<std::uintptr_t>(raw.data());
  if (views.release != nullptr && !raw.empty() && address % buffer::alignment == 0) {
    views.acquire(views.context);
    out = buffer::adopt(reinterpret_cast<std::byte*>(raw.data()), raw.size(),
                        memory_location::cpu(), views.release, views.context);
  } else {
    out = buffer::copy_of(bytes);
  }
  return {};
}

} // namespace

status parse_model_version(std::string_view text, std::int64_t& version) {
  if (text.empty()) {
    version = -1;
    return {};
  }
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || v < 0) {
    return invalid_argument(fmt::format("invalid model version '{}': expected a non-negative "
                                        "integer, or nothing for the version policy's",
                                        text));
  }
  version = v;
  return {};
}

status decode_infer_request(ModelInferRequest& in, servekit::request& out,
                            const http::request_limits& limits, const raw_view_owner& views) {
  out = servekit::request{};
  try {
    if (static_cast<std::size_t>(in.inputs().size()) > limits.max_inputs) {
      return invalid_argument(fmt::format("the request has {} inputs, more than the limit of {}",
                                          in.inputs().size(), limits.max_inputs));
    }
    if (static_cast<std::size_t>(in.outputs().size()) > limits.max_outputs) {
      return invalid_argument(fmt::format("the request asks for {} outputs, more than the limit "
                                          "of {}",
                                          in.outputs().size(), limits.max_outputs));
    }
    const bool raw = !in.raw_input_contents().empty();
    if (raw && in.raw_input_contents().size() != in.inputs().size()) {
      return invalid_argument(fmt::format(
          "the request has {} inputs but {} raw_input_contents: raw contents are given for "
          "every input, in the order of 'inputs', or for none",
          in.inputs().size(), in.raw_input_contents().size()));
    }
    out.id = in.id();
    if (status s = decode_parameters(in, out); !s.ok()) {
      return s;
    }
    out.inputs.reserve(static_cast<std::size_t>(in.inputs().size()));
    for (int i = 0; i < in.inputs().size(); ++i) {
      const auto& input = in.inputs(i);
      for (const auto& [key, value] : input.parameters()) {
        if (key.starts_with("shared_memory_")) {
          return invalid_argument(
              fmt::format("input '{}': '{}': shared memory is not supported by this server",
                          input.name(), key));
        }
      }
      for (const auto& t : out.inputs) {
        if (t.name == input.name()) {
          return invalid_argument(fmt::format("input '{}' is given twice", input.name()));
        }
      }
      const auto type = parse_data_type(input.datatype());
      if (!type || *type == data_type::invalid || input.datatype().starts_with("TYPE_")) {
        return invalid_argument(
            fmt::format("input '{}': unknown datatype '{}'", input.name(), input.datatype()));
      }
      const auto dims = std::span<const std::int64_t>{
          input.shape().data(), static_cast<std::size_t>(input.shape().size())};
      const auto s = shape::from(dims);
      bool negative = false;
      for (const auto d : dims) {
        negative = negative || d < 0;
      }
      if (!s || negative) {
        return invalid_argument(fmt::format("input '{}': 'shape' must be an array of "
                                            "non-negative integers, got [{}]",
                                            input.name(), fmt::join(dims, ",")));
      }
      const auto count = http::detail::checked_element_count(*s);
      if (!count || *count > limits.max_tensor_elements) {
        return invalid_argument(fmt::format("input '{}': shape [{}] has more elements than the "
                                            "limit of {}",
                                            input.name(), fmt::join(dims, ","),
                                            limits.max_tensor_elements));
      }
      buffer data;
      if (raw) {
        if (input.has_contents()) {
          return invalid_argument(fmt::format("input '{}': contents must not be given when the "
                                              "request uses raw_input_contents",
                                              input.name()));
        }
        if (status st =
                decode_raw(input, *type, *count, *in.mutable_raw_input_contents(i), views, data);
            !st.ok()) {
          return st;
        }
      } else if (status st = decode_contents(input, *type, *count, data); !st.ok()) {
        return st;
      }
      out.inputs.push_back(tensor{input.name(), *type, *s, std::move(data)});
    }
    out.requested_outputs.reserve(static_cast<std::size_t>(in.outputs().size()));
    for (const auto& o : in.outputs()) {
      for (const auto& [key, value] : o.parameters()) {
        if (key == "classification") {
          return invalid_argument(fmt::format(
              "output '{}': 'classification' is not supported by this server", o.name()));
        }
        if (key.starts_with("shared_memory_")) {
          return invalid_argument(fmt::format(
              "output '{}': '{}': shared memory is not supported by this server", o.name(), key));
        }
      }
      out.requested_outputs.push_back(o.name());
    }
  } catch (const std::bad_alloc&) {
    return resource_exhausted("out of memory while decoding the request");
  }
  return {};
}

status check_requested_outputs(std::span<const std::string> requested,
                               std::span<const tensor_config> declared, std::string_view model) {
  for (const auto& name : requested) {
    if (std::none_of(declared.begin(), declared.end(),
                     [&](const tensor_config& d) { return d.name == name; })) {
      return invalid_argument(
          fmt::format("unexpected inference output '{}' for model '{}'", name, model));
    }
  }
  return status{};
}

void to_infer_parameter(const parameter_value& v, inference::InferParameter& out) {
  switch (v.index()) {
  case 0:
    out.set_bool_param(std::get<bool>(v));
    break;
  case 1:
    out.set_int64_param(std::get<std::int64_t>(v));
    break;
  case 2:
    out.set_uint64_param(std::get<std::uint64_t>(v));
    break;
  case 3:
    out.set_double_param(std::get<double>(v));
    break;
  default:
    out.set_string_param(std::get<std::string>(v));
    break;
  }
}

status encode_infer_response(const response& r, std::string_view model, std::int64_t version,
                             std::span<const std::string> requested,
                             inference::ModelInferResponse& out) {
  out.set_model_name(std::string{model});
  out.set_model_version(std::to_string(version));
  out.set_id(r.id);
  for (const auto& p : r.parameters) {
    to_infer_parameter(p.value, (*out.mutable_parameters())[p.name]);
  }
  for (const auto& t : r.outputs) {
    if (!requested.empty()) {
      bool wanted = false;
      for (const auto& name : requested) {
        wanted = wanted || name == t.name;
      }
      if (!wanted) {
        continue;
      }
    }
    if (!t.data.location().host_accessible()) {
      return internal_error(
          fmt::format("output '{}' of model '{}' is in device memory", t.name, model));
    }
    auto& o = *out.add_outputs();
    o.set_name(t.name);
    o.set_datatype(std::string{to_string(t.type)});
    for (const auto d : t.shape.dims()) {
      o.add_shape(d);
    }
    const auto bytes = t.data.bytes();
    out.add_raw_output_contents()->assign(reinterpret_cast<const char*>(bytes.data()),
                                          bytes.size());
  }
  return {};
}

} // namespace servekit::grpc::detail
