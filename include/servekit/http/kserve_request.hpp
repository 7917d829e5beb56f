#pragma once
/// \file
/// decode_infer_request: a KServe v2 infer request body (JSON, with Triton's binary tensor data
/// extension) into a servekit::request ready to submit.
///
/// The decoder is the server's hot path, so it reads the JSON in one pass with a small strict
/// reader (detail::json_reader) driving a SAX handler (detail::infer_request_parser; no DOM); the
/// handler writes values into a per-thread scratch and converts them once per input.

#include <servekit/core/request.hpp>
#include <servekit/core/status.hpp>
#include <servekit/http/decoded_infer_request.hpp>
#include <servekit/http/detail/infer_request_parser.hpp>
#include <servekit/http/detail/json_reader.hpp>

#include <fmt/format.h>

#include <cstddef>
#include <exception>
#include <new>
#include <optional>
#include <span>
#include <string_view>

namespace servekit::http {

/// Decodes a KServe v2 infer request body into `out` (which is reset first).
///
/// `json_header_length` is the Inference-Header-Content-Length header of Triton's binary tensor
/// data extension: when set, body[0, length) is the JSON and the rest is the binary data that the
/// inputs with "parameters": {"binary_data_size": N} take, N bytes each, in input order (for
/// BYTES: the 4-byte-length-prefixed serialisation); all of it must be used. A length of 0 (a
/// Triton "raw binary" request, one unnamed input) is refused.
///
/// Inputs get the shape the client sent: the model checks names, types and shapes against its
/// config at submit. "data" may be flat or nested (nested arrays must have the shape's dims), or
/// a bare scalar for one element. Top-level "parameters": sequence_id (unsigned integer or
/// string), sequence_start, sequence_end, priority, timeout (µs), binary_data_output; keys
/// starting with "triton_" are refused as Triton refuses them; any other parameter of type int,
/// bool or string is accepted and ignored. Every error is invalid_argument with a message naming
/// the input, key or element at fault (resource_exhausted if memory runs out).
///
/// Differences from Triton: FP16 and BF16 are accepted as JSON numbers (Triton requires binary
/// data for them); integer types refuse JSON floats such as 3.0 (Triton too), and out-of-range
/// values are refused rather than truncated (Triton casts); nested "data" must be regular and
/// match "shape" (Triton counts elements only); NaN/Infinity tokens are not accepted (strict JSON
/// grammar; Triton's rapidjson takes them); JSON nested deeper than 512 levels, duplicate keys,
/// shared memory and classification are refused.
[[nodiscard]] inline status decode_infer_request(std::string_view body,
                                                 std::optional<std::size_t> json_header_length,
                                                 decoded_infer_request& out) {
  out.request = servekit::request{};
  out.outputs.clear();
  out.binary_data_output = false;

  std::string_view json = body;
  std::span<const std::byte> binary;
  if (json_header_length) {
    if (*json_header_length == 0) {
      return invalid_argument("Inference-Header-Content-Length 0 (a raw binary request) is not "
                              "supported; send a JSON header");
    }
    if (*json_header_length > body.size()) {
      return invalid_argument(fmt::format("Inference-Header-Content-Length is {} but the body "
                                          "has only {} bytes",
                                          *json_header_length, body.size()));
    }
    json = body.substr(0, *json_header_length);
    binary = std::as_bytes(std::span{body.data(), body.size()}).subspan(*json_header_length);
  }

  auto& scratch = detail::thread_decode_scratch();
  scratch.clear();
  status result;
  try {
    out.request.inputs.reserve(4);
    detail::infer_request_parser parser{scratch, out, binary};
    detail::json_reader<detail::infer_request_parser> reader{json, parser, scratch.unescaped};
    const bool parsed = reader.parse();
    if (!parsed || parser.failed() || !parser.finish()) {
      result = parser.take_error();
      if (result.ok()) {
        result = invalid_argument("failed to parse the request JSON");
      }
    }
  } catch (const std::bad_alloc&) {
    result = resource_exhausted("out of memory while decoding the request");
  } catch (const std::exception& e) {
    result = invalid_argument(fmt::format("failed to decode the request: {}", e.what()));
  }
  scratch.clear();
  scratch.trim();
  return result;
}

} // namespace servekit::http
