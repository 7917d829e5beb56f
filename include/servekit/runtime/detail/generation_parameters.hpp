#pragma once
/// \file
/// The per-request settings of a generative request, read as Triton's LLM backends read them:
/// `max_tokens` and `stream` as inputs (TensorRT-LLM's ensemble: INT32 `max_tokens`, BOOL
/// `stream`) or as request parameters (the generate extension's "parameters" object), and
/// `ignore_eos` as a parameter (vLLM's sampling parameter).

#include <servekit/core/data_type.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/status.hpp>
#include <servekit/core/tensor.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace servekit::detail {

struct generation_settings {
  std::uint32_t max_tokens = 16;
  bool stream = false;
  bool ignore_eos = false;
};

/// The one integer element of input `t`, if it is an integer tensor of one element.
[[nodiscard]] inline std::optional<std::int64_t> scalar_integer(const tensor& t) noexcept {
  if (t.element_count() != 1 || !t.data.location().host_accessible()) {
    return std::nullopt;
  }
  switch (t.type) {
  case data_type::int32:
    return t.values<std::int32_t>()[0];
  case data_type::int64:
    return t.values<std::int64_t>()[0];
  case data_type::uint32:
    return t.values<std::uint32_t>()[0];
  case data_type::uint64: {
    const std::uint64_t v = t.values<std::uint64_t>()[0];
    return v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
               ? std::numeric_limits<std::int64_t>::max()
               : static_cast<std::int64_t>(v);
  }
  default:
    return std::nullopt;
  }
}

/// Reads `r`'s settings over `out` (which holds the model's defaults). invalid_argument naming
/// the input or parameter when one has the wrong type or `max_tokens` is below 1.
[[nodiscard]] inline status read_generation_settings(const request& r, generation_settings& out) {
  std::int64_t max_tokens = out.max_tokens;
  if (const tensor* t = r.find_input("max_tokens")) {
    const auto v = scalar_integer(*t);
    if (!v) {
      return invalid_argument("input 'max_tokens' must hold one integer (INT32 or INT64), got " +
                              std::string{to_string(t->type)} + " with " +
                              std::to_string(t->element_count()) + " elements");
    }
    max_tokens = *v;
  } else if (status s = r.parameters.get("max_tokens", max_tokens); !s.ok()) {
    return s;
  }
  if (max_tokens < 1 || max_tokens > std::numeric_limits<std::int32_t>::max()) {
    return invalid_argument("max_tokens must be at least 1, got " + std::to_string(max_tokens));
  }
  out.max_tokens = static_cast<std::uint32_t>(max_tokens);
  if (const tensor* t = r.find_input("stream")) {
    if (t->type != data_type::boolean || t->element_count() != 1 ||
        !t->data.location().host_accessible()) {
      return invalid_argument("input 'stream' must hold one BOOL, got " +
                              std::string{to_string(t->type)} + " with " +
                              std::to_string(t->element_count()) + " elements");
    }
    out.stream = t->values<std::uint8_t>()[0] != 0;
  } else if (status s = r.parameters.get("stream", out.stream); !s.ok()) {
    return s;
  }
  return r.parameters.get("ignore_eos", out.ignore_eos);
}

} // namespace servekit::detail
