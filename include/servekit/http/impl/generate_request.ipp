#pragma once
/// \file
/// decode_generate_request (http/generate_codec.hpp): the generate body parsed and checked once
/// (detail::plan_generate_request), then its infer request fed to infer_request_parser as events,
/// in the order json_reader would read them from translate_generate_request's JSON.

#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/config/detail/json_teardown.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/status.hpp>
#include <servekit/http/decoded_infer_request.hpp>
#include <servekit/http/detail/infer_request_parser.hpp>
#include <servekit/http/generate_codec.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace servekit::http {

namespace detail {

/// An integer as json_reader reads it from JSON text: a non-negative one (nlohmann's parse keeps
/// "-0" as a signed zero) arrives as number_unsigned.
inline bool feed_integer(infer_request_parser& p, std::int64_t v) {
  return v >= 0 ? p.number_unsigned(static_cast<std::uint64_t>(v)) : p.number_integer(v);
}

/// One value of the parsed body, as json_reader would send it from the value's nlohmann dump
/// (objects in nlohmann's key order; a float stays a float, as the dump writes "1.0"). Recursion
/// stays shallow: the generate values fed are scalars, the "id" a string, and the parser refuses
/// the first container inside "parameters".
inline bool feed_value(infer_request_parser& p, const nlohmann::json& v) {
  using value_t = nlohmann::json::value_t;
  switch (v.type()) {
  case value_t::null:
    return p.null();
  case value_t::boolean:
    return p.boolean(v.get<bool>());
  case value_t::number_integer:
    return feed_integer(p, v.get<std::int64_t>());
  case value_t::number_unsigned:
    return p.number_unsigned(v.get<std::uint64_t>());
  case value_t::number_float:
    return p.number_float(v.get<double>());
  case value_t::string:
    return p.string(v.get_ref<const std::string&>());
  case value_t::array:
    if (!p.start_array(std::size_t(-1))) {
      return false;
    }
    for (const auto& e : v) {
      if (!feed_value(p, e)) {
        return false;
      }
    }
    return p.end_array();
  case value_t::object:
    if (!p.start_object(std::size_t(-1))) {
      return false;
    }
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!p.key(it.key()) || !feed_value(p, *it)) {
        return false;
      }
    }
    return p.end_object();
  case value_t::binary:
  case value_t::discarded:
    break;
  }
  return p.parse_error("a value JSON text cannot hold"); // nlohmann's parse makes neither
}

/// The infer request of `plan`, as translate_generate_request writes it: {"id", "inputs":
/// [{"data", "datatype", "name", "shape"}...], "parameters"}, keys in nlohmann's (sorted) order.
inline bool feed_generate_plan(infer_request_parser& p, const generate_plan& plan) {
  if (!p.start_object(std::size_t(-1))) {
    return false;
  }
  if (plan.id != nullptr && (!p.key("id") || !feed_value(p, *plan.id))) {
    return false;
  }
  if (!p.key("inputs") || !p.start_array(std::size_t(-1))) {
    return false;
  }
  for (const auto& in : plan.inputs) {
    if (!p.start_object(std::size_t(-1)) || !p.key("data") || !p.start_array(std::size_t(-1))) {
      return false;
    }
    for (std::size_t i = 0; i < in.leaf_count; ++i) {
      if (!feed_value(p, *plan.leaves[in.first_leaf + i])) {
        return false;
      }
    }
    if (!p.end_array() || !p.key("datatype") || !p.string(to_string(in.type)) || !p.key("name") ||
        !p.string(*in.name) || !p.key("shape") || !p.start_array(std::size_t(-1))) {
      return false;
    }
    for (const auto d : in.shape) {
      if (!feed_integer(p, d)) {
        return false;
      }
    }
    if (!p.end_array() || !p.end_object()) {
      return false;
    }
  }
  if (!p.end_array()) {
    return false;
  }
  if (plan.parameters != nullptr && (!p.key("parameters") || !feed_value(p, *plan.parameters))) {
    return false;
  }
  return p.end_object();
}

} // namespace detail

SERVEKIT_DECL status decode_generate_request(std::string_view body, std::string_view model,
                                             std::span<const tensor_config> inputs, bool batching,
                                             decoded_infer_request& out,
                                             const request_limits& limits) {
  out.request = servekit::request{};
  out.outputs.clear();
  out.binary_data_output = false;
  nlohmann::json j;
  const servekit::detail::json_teardown teardown{j}; // its destructor would allocate
  if (status s = detail::parse_generate_body(body, j, limits.max_json_depth); !s.ok()) {
    return s;
  }
  detail::generate_plan plan;
  if (status s = detail::plan_generate_request(j, model, inputs, batching, plan); !s.ok()) {
    return s;
  }
  return detail::decode_with_parser(
      out, {}, limits, [&plan](detail::infer_request_parser& parser, detail::decode_scratch&) {
        return detail::feed_generate_plan(parser, plan);
      });
}

} // namespace servekit::http
