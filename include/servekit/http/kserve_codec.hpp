#pragma once
/// \file
/// The KServe v2 (Open Inference Protocol) JSON codec, model-independent and free of I/O:
/// decodes an infer request body into a servekit::request (kserve_request.hpp), encodes a
/// servekit::response (kserve_response.hpp), and builds the metadata documents
/// (kserve_metadata.hpp). Triton's HTTP front end is the reference for every choice; where
/// servekit differs, the comment at the function says so.
///
///     servekit::http::decoded_infer_request in;
///     if (auto s = servekit::http::decode_infer_request(body, header_length, in); !s.ok()) {
///       reply(servekit::http::http_status_for(s.code()),
///       servekit::http::encode_error(s.message()));
///     }
///     ... model.submit(std::move(in.request), sink) ... then, in the sink:
///     servekit::http::encode_infer_response(response, "add_sub", 1, in, body, header_length);

#include <servekit/http/kserve_metadata.hpp>
#include <servekit/http/kserve_request.hpp>
#include <servekit/http/kserve_response.hpp>
