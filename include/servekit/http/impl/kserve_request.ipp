#pragma once
/// \file
/// decode_infer_request (http/kserve_request.hpp): the body split into its JSON header and binary
/// data, then json_reader driving infer_request_parser over the JSON with the per-thread scratch
/// (detail::decode_with_parser).

#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/status.hpp>
#include <servekit/http/decoded_infer_request.hpp>
#include <servekit/http/detail/infer_request_parser.hpp>
#include <servekit/http/detail/json_reader.hpp>
#include <servekit/http/kserve_request.hpp>
#include <servekit/http/request_limits.hpp>

#include <fmt/format.h>

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

namespace servekit::http {

SERVEKIT_DECL status decode_infer_request(std::string_view body,
                                          std::optional<std::size_t> json_header_length,
                                          decoded_infer_request& out,
                                          const request_limits& limits) {
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

  return detail::decode_with_parser(
      out, binary, limits,
      [json, &limits](detail::infer_request_parser& parser, detail::decode_scratch& scratch) {
        detail::json_reader<detail::infer_request_parser> reader{json, parser, scratch.unescaped,
                                                                 limits.max_json_depth};
        parser.set_text_size(json.size());
        return reader.parse();
      });
}

} // namespace servekit::http
