#pragma once
// The ModelInfer messages of proto/servekit/grpc/grpc_service.proto to and from servekit's
// request and response; the gRPC server's (src/grpc/server.cpp) and, later, the fuzz target's.
// Needs the generated classes only, not grpc++.

#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/core/buffer.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/status.hpp>
#include <servekit/http/request_limits.hpp>

#include <servekit/grpc/grpc_service.pb.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace servekit::grpc::detail {

/// How decode_infer_request views raw_input_contents instead of copying them: each view is a
/// buffer adopted with `release` and `context`, after `acquire(context)`; the owner of the request
/// message keeps it alive until every view is released. Without `release`, the bytes are copied.
struct raw_view_owner {
  void (*acquire)(void* context) noexcept = nullptr;
  buffer::release_fn release = nullptr;
  void* context = nullptr;
};

/// The model version a request names: -1 for an empty string (the version policy's), nullopt
/// with `error` set for anything but a non-negative decimal number.
[[nodiscard]] status parse_model_version(std::string_view text, std::int64_t& version);

/// A ModelInferRequest into `out` (reset first), ready to submit: inputs from typed contents or
/// raw_input_contents (viewed through `views` where aligned, else copied), requested outputs,
/// id, and parameters as the HTTP decoder reads them (sequence_id, sequence_start, sequence_end,
/// priority and timeout into the request's fields; `triton_` keys refused; the others to the
/// backend). Every error is invalid_argument with HTTP's message where HTTP has one.
[[nodiscard]] status decode_infer_request(inference::ModelInferRequest& in, servekit::request& out,
                                          const http::request_limits& limits,
                                          const raw_view_owner& views = {});

/// Refuses (invalid_argument, HTTP's message) the first of `requested` that `declared`, the
/// model's outputs, does not name.
[[nodiscard]] status check_requested_outputs(std::span<const std::string> requested,
                                             std::span<const tensor_config> declared,
                                             std::string_view model);

/// A servekit::response into `out`: model name and version, id, parameters, and every output
/// (of `requested`, when not empty) with its bytes in raw_output_contents, as Triton answers.
/// Fails (internal) for an output whose bytes are not in host memory.
[[nodiscard]] status encode_infer_response(const response& r, std::string_view model,
                                           std::int64_t version,
                                           std::span<const std::string> requested,
                                           inference::ModelInferResponse& out);

/// A servekit::parameter_value as an InferParameter, and back.
void to_infer_parameter(const parameter_value& v, inference::InferParameter& out);

} // namespace servekit::grpc::detail
