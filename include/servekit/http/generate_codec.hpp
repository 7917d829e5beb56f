#pragma once
/// \file
/// The codec of Triton's generate extension (POST .../generate and .../generate_stream), free of
/// I/O. A generate request is a flat JSON object whose keys are the model's input names, plus an
/// optional "parameters" object (the infer request's parameters: priority, timeout,
/// sequence_id...); a response is a flat object {"model_name","model_version",<output>: value}.
///
/// The request is read as the KServe v2 infer request it stands for (shapes and datatypes taken
/// from the model's config), so that the infer request decoder does the value checks and
/// conversions exactly as /infer does: a generate request is never checked more loosely than the
/// same request sent to /infer. decode_generate_request parses the body once and feeds the
/// decoder the infer request's events; translate_generate_request writes that infer request out
/// as JSON. Generate is a convenience endpoint for text-like models, not the hot path.
///
/// decode_generate_request is defined in http/impl/generate_request.ipp, compiled into
/// servekit::server (core/detail/linkage.hpp); with SERVEKIT_HEADER_ONLY this header
/// includes it.

#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/status.hpp>
#include <servekit/http/decoded_infer_request.hpp>
#include <servekit/http/detail/json_body.hpp>
#include <servekit/http/kserve_response.hpp>
#include <servekit/http/request_limits.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace servekit::http {

namespace detail {

/// The regular nested shape of a JSON value (a scalar has rank 0) and its leaves in row-major
/// order (pointers into `v`); false if the arrays are ragged or hold objects.
[[nodiscard]] inline bool flatten_generate_value(const nlohmann::json& v, std::size_t depth,
                                                 std::vector<std::int64_t>& nested,
                                                 std::vector<const nlohmann::json*>& leaves) {
  if (v.is_object()) {
    return false;
  }
  if (!v.is_array()) {
    leaves.push_back(&v);
    return true;
  }
  const auto n = static_cast<std::int64_t>(v.size());
  if (depth == nested.size()) {
    nested.push_back(n);
  } else if (nested[depth] != n) {
    return false;
  }
  for (const auto& e : v) {
    if (!flatten_generate_value(e, depth + 1, nested, leaves)) {
      return false;
    }
  }
  return true;
}

/// The shape an input of `count` elements gets from its config dims (the batch dimension 1 in
/// front when the model batches): a single -1 takes what the others leave; several -1 take the
/// value's nested shape when it has the config's rank.
[[nodiscard]] inline status generate_input_shape(const tensor_config& c, bool batching,
                                                 std::size_t count,
                                                 const std::vector<std::int64_t>& nested,
                                                 std::string_view model,
                                                 std::vector<std::int64_t>& out) {
  out.clear();
  if (batching) {
    out.push_back(1);
  }
  const auto dims = c.dims.dims();
  std::size_t wildcards = 0;
  std::int64_t fixed = 1;
  for (const auto d : dims) {
    if (d < 0) {
      ++wildcards;
    } else {
      fixed *= d;
    }
  }
  const auto n = static_cast<std::int64_t>(count);
  const auto mismatch = [&] {
    return invalid_argument(fmt::format("generate input '{}' of model '{}' has {} element(s), "
                                        "which does not fit its dims {}",
                                        c.name, model, count, to_string(c.dims)));
  };
  if (wildcards == 0) {
    if (n != fixed) {
      return mismatch();
    }
    out.insert(out.end(), dims.begin(), dims.end());
    return {};
  }
  if (wildcards == 1) {
    if (fixed == 0 || n % fixed != 0) {
      return mismatch();
    }
    for (const auto d : dims) {
      out.push_back(d < 0 ? n / fixed : d);
    }
    return {};
  }
  if (nested.size() != dims.size()) {
    return invalid_argument(fmt::format("generate input '{}' of model '{}' has dims {} with "
                                        "several variable dimensions: send it as nested arrays "
                                        "of rank {} (or use /infer with an explicit shape)",
                                        c.name, model, to_string(c.dims), dims.size()));
  }
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] >= 0 && dims[i] != nested[i]) {
      return mismatch();
    }
  }
  out.insert(out.end(), nested.begin(), nested.end());
  return {};
}

/// A generate request checked against the model's config: the infer request it stands for, as
/// pointers into the parsed body. Inputs are in the body's key order (nlohmann's objects keep
/// their keys sorted, and the last of duplicate keys).
struct generate_plan {
  struct input {
    const std::string* name = nullptr;
    data_type type = data_type::invalid;
    std::vector<std::int64_t> shape;
    std::size_t first_leaf = 0; ///< its elements: leaves[first_leaf, first_leaf + leaf_count)
    std::size_t leaf_count = 0;
  };
  const nlohmann::json* id = nullptr;         ///< the request's "id", a string
  const nlohmann::json* parameters = nullptr; ///< the request's "parameters", an object
  std::vector<input> inputs;
  std::vector<const nlohmann::json*> leaves; ///< every input's elements, in row-major order
};

/// Parses a generate request body into `j`: nesting deeper than json_reader's limit, a syntax
/// error and a number out of range are invalid_argument.
[[nodiscard]] inline status parse_generate_body(std::string_view body, nlohmann::json& j,
                                                std::size_t max_depth = max_json_body_depth) {
  return parse_json_body(body, j, "the generate request", max_depth);
}

/// Checks the parsed generate request `j` for the model `model` (its config's inputs and whether
/// it batches) and fills `plan`, which points into `j`. Keys other than "parameters" must name
/// inputs of the model; "id" (a string) is the request id unless the model has an input named
/// "id". Every error is invalid_argument naming the key at fault; missing inputs are left to the
/// model's own check at submit, as for /infer.
[[nodiscard]] inline status plan_generate_request(const nlohmann::json& j, std::string_view model,
                                                  std::span<const tensor_config> inputs,
                                                  bool batching, generate_plan& plan) {
  plan = generate_plan{};
  if (!j.is_object()) {
    return invalid_argument("the generate request body must be a JSON object whose keys are "
                            "the model's input names");
  }
  const auto find_input = [&](std::string_view name) -> const tensor_config* {
    for (const auto& c : inputs) {
      if (c.name == name) {
        return &c;
      }
    }
    return nullptr;
  };
  std::vector<std::int64_t> nested;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const tensor_config* c = find_input(key);
    if (c == nullptr && key == "parameters") {
      if (!it->is_object()) {
        return invalid_argument("the generate request's \"parameters\" must be a JSON object");
      }
      plan.parameters = &*it;
      continue;
    }
    if (c == nullptr && key == "id") {
      if (!it->is_string()) {
        return invalid_argument("the generate request's \"id\" must be a string");
      }
      plan.id = &*it;
      continue;
    }
    if (c == nullptr) {
      return invalid_argument(fmt::format(
          "unexpected generate input '{}' for model '{}': it has no such input", key, model));
    }
    nested.clear();
    generate_plan::input in;
    in.name = &key;
    in.type = c->type;
    in.first_leaf = plan.leaves.size();
    if (!flatten_generate_value(*it, 0, nested, plan.leaves)) {
      return invalid_argument(fmt::format("generate input '{}' for model '{}' must be a scalar "
                                          "or a regular (nested) array of scalars",
                                          key, model));
    }
    in.leaf_count = plan.leaves.size() - in.first_leaf;
    if (status s = generate_input_shape(*c, batching, in.leaf_count, nested, model, in.shape);
        !s.ok()) {
      return s;
    }
    plan.inputs.push_back(std::move(in));
  }
  return {};
}

} // namespace detail

/// Translates a generate request `body` for the model `model` (its config's inputs and whether
/// it batches) into the equivalent KServe v2 infer request JSON, written to `infer_json`, for
/// decode_infer_request. Keys other than "parameters" must name inputs of the model; "id" (a
/// string) is the request id unless the model has an input named "id". Every error is
/// invalid_argument naming the key at fault; missing inputs are left to the model's own check
/// at submit, as for /infer. The server uses decode_generate_request, which gives the same
/// result without writing and re-reading this JSON.
[[nodiscard]] inline status translate_generate_request(std::string_view body,
                                                       std::string_view model,
                                                       std::span<const tensor_config> inputs,
                                                       bool batching, std::string& infer_json) {
  infer_json.clear();
  nlohmann::json j;
  if (status s = detail::parse_generate_body(body, j); !s.ok()) {
    return s;
  }
  detail::generate_plan plan;
  if (status s = detail::plan_generate_request(j, model, inputs, batching, plan); !s.ok()) {
    return s;
  }
  nlohmann::json infer = nlohmann::json::object();
  if (plan.id != nullptr) {
    infer["id"] = *plan.id;
  }
  if (plan.parameters != nullptr) {
    infer["parameters"] = *plan.parameters;
  }
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& in : plan.inputs) {
    nlohmann::json leaves = nlohmann::json::array();
    for (std::size_t i = 0; i < in.leaf_count; ++i) {
      leaves.push_back(*plan.leaves[in.first_leaf + i]);
    }
    tensors.push_back({{"name", *in.name},
                       {"datatype", std::string(to_string(in.type))},
                       {"shape", in.shape},
                       {"data", std::move(leaves)}});
  }
  infer["inputs"] = std::move(tensors);
  infer_json = infer.dump();
  return {};
}

/// Decodes a generate request `body` for the model `model` (its config's inputs and whether it
/// batches) into `out`, as decode_infer_request decodes the infer request that
/// translate_generate_request makes of it: the same result and the same errors, from one parse
/// of the body. Every error is invalid_argument (resource_exhausted if memory runs out).
/// `limits` as for decode_infer_request (the nesting of the generate body itself included).
[[nodiscard]] SERVEKIT_DECL status decode_generate_request(
    std::string_view body, std::string_view model, std::span<const tensor_config> inputs,
    bool batching, decoded_infer_request& out, const request_limits& limits = {});

/// Writes the generate response for a successful `r` into `out` (cleared first):
/// {"model_name","model_version" (a string),"id" (when set),<parameter name>: value...,
/// <output name>: value...}; an output of one element is written as a scalar, any other as a
/// flat array. Response parameters are top-level keys beside the outputs, not a "parameters"
/// object: Triton's generate form, in which "model_name", "model_version" and a set "id" win
/// over a parameter of that name, and a parameter over an output of that name (the one left out
/// is not written, so no key appears twice). Fails as encode_infer_response does (device memory,
/// bad sizes, BYTES that are not UTF-8); `out` then holds encode_error(message).
inline status encode_generate_response(const servekit::response& r, std::string_view model,
                                       std::int64_t version, std::string& out) {
  out.clear();
  detail::append_response_head(out, model, version, r.id);
  const auto head_key = [&r](std::string_view name) {
    return name == "model_name" || name == "model_version" || (name == "id" && !r.id.empty());
  };
  for (const auto& p : r.parameters) {
    if (head_key(p.name)) {
      continue;
    }
    out += ',';
    detail::append_json_string(out, p.name);
    out += ':';
    detail::append_parameter_value(out, p.value);
  }
  std::string data;
  for (const auto& t : r.outputs) {
    if (r.parameters.contains(t.name) && !head_key(t.name)) {
      continue; // the parameter of that name was written
    }
    std::size_t count = 0;
    status s = detail::check_output(t, count);
    if (s.ok()) {
      data.clear();
      s = detail::append_output_data(data, t, count);
    }
    if (!s.ok()) {
      out = encode_error(s.message());
      return s;
    }
    out += ',';
    detail::append_json_string(out, t.name);
    out += ':';
    if (count == 1) {
      out.append(data, 1, data.size() - 2); // strip the array's brackets
    } else {
      out += data;
    }
  }
  out += '}';
  return {};
}

/// One server-sent event carrying `json`: "data: <json>\n\n" (the JSON has no newline).
[[nodiscard]] inline std::string sse_event(std::string_view json) {
  std::string e;
  e.reserve(json.size() + 8);
  e += "data: ";
  e += json;
  e += "\n\n";
  return e;
}

} // namespace servekit::http

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/http/impl/generate_request.ipp>
#endif
