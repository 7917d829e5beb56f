// libFuzzer target for the KServe v2 request decoder (servekit/http/kserve_codec.hpp).
//
// Input layout: if the first byte is 0x00, the next two bytes are a little-endian
// Inference-Header-Content-Length and the rest is the body (the binary tensor data extension);
// otherwise the whole input is a plain JSON body. Readable seeds are plain JSON files; binary-mode
// seeds start with "\0<len lo><len hi>" (see corpus/kserve_request/).
//
// Three checks per input:
// - the decoder's JSON reader accepts exactly the texts nlohmann::json::accept accepts (a
//   differential test of the grammar: strings, escapes, UTF-8, numbers), except nesting past
//   its depth limit and texts with NUL bytes;
// - decoding either succeeds or fails with a message;
// - a decoded request is echoed back as a response (inputs become outputs, every third one
//   asked for as binary data) to exercise encode_infer_response on whatever the decoder made.

#include <servekit/http/detail/json_reader.hpp>
#include <servekit/http/kserve_codec.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace {

/// Accepts every event; remembers whether the reader stopped at its depth limit.
struct syntax_only {
  bool too_deep = false;
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(std::int64_t) { return true; }
  bool number_unsigned(std::uint64_t) { return true; }
  bool number_float(double) { return true; }
  bool string(std::string_view) { return true; }
  bool key(std::string_view) { return true; }
  bool start_object(std::size_t) { return true; }
  bool end_object() { return true; }
  bool start_array(std::size_t) { return true; }
  bool end_array() { return true; }
  bool parse_error(const std::string& message) {
    too_deep = message.find("nested too deeply") != std::string::npos;
    return false;
  }
};

void check_json_grammar(std::string_view text) {
  syntax_only handler;
  std::string unescaped;
  servekit::http::detail::json_reader<syntax_only> reader{text, handler, unescaped};
  const bool ours = reader.parse();
  const bool reference = nlohmann::json::accept(text.begin(), text.end());
  // nlohmann reads a NUL byte outside strings as the end of the input ("1\0x" is accepted);
  // servekit's reader refuses it, so texts with NUL bytes are not compared.
  if (ours != reference && !handler.too_deep && text.find('\0') == std::string_view::npos) {
    __builtin_trap();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input{reinterpret_cast<const char*>(data), size};
  std::optional<std::size_t> header_length;
  if (!input.empty() && input[0] == '\0') {
    if (input.size() < 3) {
      return 0;
    }
    header_length = static_cast<std::size_t>(static_cast<unsigned char>(input[1])) |
                    (static_cast<std::size_t>(static_cast<unsigned char>(input[2])) << 8U);
    input.remove_prefix(3);
  }

  check_json_grammar(header_length ? input.substr(0, *header_length) : input);

  servekit::http::decoded_infer_request decoded;
  const servekit::status s = servekit::http::decode_infer_request(input, header_length, decoded);
  if (!s.ok()) {
    if (s.message().empty()) {
      __builtin_trap(); // every failure must say why
    }
    const std::string error = servekit::http::encode_error(s.message());
    if (error.size() < s.message().size()) {
      __builtin_trap();
    }
    return 0;
  }

  // Echo: the decoded inputs become the response's outputs. Only the selection is kept in
  // `asked`, as the server does after moving the request into a model.
  servekit::http::decoded_infer_request asked;
  asked.binary_data_output = decoded.binary_data_output;
  std::size_t index = 0;
  for (const auto& t : decoded.request.inputs) {
    asked.outputs.push_back({t.name, index % 3 == 2});
    ++index;
  }
  if (!decoded.outputs.empty()) {
    asked.outputs = decoded.outputs; // the client's own selection wins when it made one
  }
  servekit::response r;
  r.id = decoded.request.id;
  r.outputs = std::move(decoded.request.inputs);

  std::string body;
  std::optional<std::size_t> json_length;
  (void)servekit::http::encode_infer_response(r, "fuzz", 1, asked, body, json_length);
  if (body.empty() || (json_length && *json_length > body.size())) {
    __builtin_trap();
  }
  return 0;
}
