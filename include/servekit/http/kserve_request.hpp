#pragma once
/// \file
/// decode_infer_request: a KServe v2 infer request body (JSON, with Triton's binary tensor data
/// extension) into a servekit::request ready to submit.
///
/// The decoder is the server's hot path, so it reads the JSON in one pass with a small strict
/// reader (detail::json_reader) driving a SAX handler (detail::infer_request_parser; no DOM); the
/// handler writes values into a per-thread scratch and converts them once per input.
///
/// The decoder is defined in http/impl/kserve_request.ipp, compiled into servekit::server
/// (core/detail/linkage.hpp); with SERVEKIT_HEADER_ONLY this header includes it.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/status.hpp>
#include <servekit/http/decoded_infer_request.hpp>
#include <servekit/http/request_limits.hpp>

#include <cstddef>
#include <optional>
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
/// string), sequence_start, sequence_end, priority, timeout (µs), binary_data_output set the
/// request's fields and do not reach the backend (Triton's reserved parameters); keys starting
/// with "triton_" are refused as Triton refuses them; every other parameter goes to
/// `request.parameters` in the order sent, a bool, int64 (uint64 above INT64_MAX), double or
/// string, as Triton hands custom parameters to a backend; an object, array or null is refused
/// naming the parameter. Every error is invalid_argument with a message naming the input, key or
/// element at fault (resource_exhausted if memory runs out).
///
/// Differences from Triton: FP16 and BF16 are accepted as JSON numbers (Triton requires binary
/// data for them); integer types refuse JSON floats such as 3.0 (Triton too), and out-of-range
/// values are refused rather than truncated (Triton casts); nested "data" must be regular and
/// match "shape" (Triton counts elements only); NaN/Infinity tokens are not accepted (strict JSON
/// grammar; Triton's rapidjson takes them); JSON nested deeper than 512 levels, duplicate keys
/// (parameters included), shared memory and classification are refused; a parameter above
/// INT64_MAX is a uint64 (Triton's HTTP front end makes it a double; its gRPC InferParameter has
/// uint64).
///
/// `limits` bounds the nesting, the inputs, the requested outputs and each input's elements; a
/// body past one is refused (invalid_argument naming the limit) as soon as it is seen.
[[nodiscard]] SERVEKIT_DECL status
decode_infer_request(std::string_view body, std::optional<std::size_t> json_header_length,
                     decoded_infer_request& out, const request_limits& limits = {});

} // namespace servekit::http

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/http/impl/kserve_request.ipp>
#endif
