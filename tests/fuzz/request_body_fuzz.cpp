// libFuzzer target for the JSON request bodies the front end parses into nlohmann values: the
// generate body (http/generate_codec.hpp, as /generate and /generate_stream decode it) and the
// repository load/unload bodies (parse_json_body, as session_repository.ipp parses them).
//
// The whole input is the body. Checks per input:
// - parse_json_body never throws; a failure is invalid_argument with a message; a success is a
//   text nlohmann::json::accept accepts (the nesting limit only refuses, never admits);
// - decode_generate_request and translate_generate_request never throw, fail only with
//   invalid_argument or resource_exhausted and a message; the server's one-parse decode gives
//   the verdict decode_infer_request gives on the infer request the translation makes.

#include <servekit/http/detail/json_body.hpp>
#include <servekit/http/generate_codec.hpp>
#include <servekit/http/kserve_request.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace {

const std::vector<servekit::tensor_config>& model_inputs() {
  static const std::vector<servekit::tensor_config> inputs{
      {"text_input", servekit::data_type::bytes, servekit::shape{1}},
      {"IDS", servekit::data_type::int32, servekit::shape{-1}},
      {"GRID", servekit::data_type::fp32, servekit::shape{-1, -1}},
      {"x", servekit::data_type::fp64, servekit::shape{1}}};
  return inputs;
}

void check_failure(const servekit::status& s) {
  if (s.message().empty() || (s.code() != servekit::status_code::invalid_argument &&
                              s.code() != servekit::status_code::resource_exhausted)) {
    std::fprintf(stderr, "request_body: status %d: %s\n", static_cast<int>(s.code()),
                 s.message().c_str());
    __builtin_trap(); // a client's body is never an internal error, and a failure says why
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body{reinterpret_cast<const char*>(data), size};

  nlohmann::json j;
  const servekit::status parsed =
      servekit::http::detail::parse_json_body(body, j, "the repository load request");
  if (!parsed.ok()) {
    check_failure(parsed);
  } else if (!nlohmann::json::accept(body.begin(), body.end())) {
    __builtin_trap();
  }

  for (const bool batching : {false, true}) {
    servekit::http::decoded_infer_request decoded;
    const servekit::status d =
        servekit::http::decode_generate_request(body, "m", model_inputs(), batching, decoded);
    std::string infer_json;
    const servekit::status t =
        servekit::http::translate_generate_request(body, "m", model_inputs(), batching, infer_json);
    if (!d.ok()) {
      check_failure(d);
    }
    if (!t.ok()) {
      check_failure(t);
    }
    // The one-parse decode must give the verdict of decoding the infer request the
    // translation makes (translate_generate_request checks the generate form only).
    bool reference = t.ok();
    if (reference) {
      servekit::http::decoded_infer_request via_infer;
      const servekit::status v = servekit::http::decode_infer_request(infer_json, {}, via_infer);
      if (!v.ok()) {
        check_failure(v);
      }
      reference = v.ok();
    }
    if (d.ok() != reference) {
      std::fprintf(stderr, "request_body: decode '%s', translate '%s'\n", d.message().c_str(),
                   t.message().c_str());
      __builtin_trap();
    }
  }
  return 0;
}
