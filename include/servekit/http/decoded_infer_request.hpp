#pragma once
/// \file
/// decoded_infer_request: what decode_infer_request makes of a KServe v2 infer request (the
/// servekit::request, plus the outputs asked for), and what encode_infer_response reads back.

#include <servekit/core/request.hpp>

#include <string>
#include <vector>

namespace servekit::http {

/// One entry of the request's "outputs": a name and whether to return it as binary data.
struct requested_output {
  std::string name;
  bool binary_data = false; ///< "parameters": {"binary_data": true}
};

/// What decode_infer_request produces. `request` is ready to submit; `outputs` and
/// `binary_data_output` are what encode_infer_response needs later (it never reads `request`,
/// which the caller has usually moved into the model by then).
struct decoded_infer_request {
  servekit::request request;
  std::vector<requested_output> outputs;
  bool binary_data_output = false; ///< top-level "parameters": {"binary_data_output": true}
};

} // namespace servekit::http
