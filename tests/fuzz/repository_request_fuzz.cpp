// libFuzzer target for the repository endpoints' request bodies (POST /v2/repository/index,
// /v2/repository/models/{m}/load and .../unload): JSON objects such as {"ready": true} and
// {"parameters": {"unload_dependents": false, "config": "{...}"}}, parsed with
// detail::parse_json_body (servekit/http/detail/json_body.hpp), as the session parses them.
//
// Input layout: the first byte picks the depth limit (512, or a small one when bit 0 is set);
// the rest is the body.
//
// Checks per input:
// - parse_json_body answers ok or invalid_argument with a message; never crashes, whatever the
//   nesting (nlohmann's own parse has no depth limit);
// - it accepts exactly what nlohmann::json::accept accepts within the depth limit;
// - what it parsed can be read as the session reads it ("ready", "parameters" and their members)
// and written back (dump, which recurses).

#include <servekit/core/status.hpp>
#include <servekit/http/detail/json_body.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace {

/// The nesting of `text` (brackets outside strings), stopping once past `limit`.
std::size_t nesting(std::string_view text, std::size_t limit) {
  std::size_t depth = 0;
  std::size_t deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) {
        deepest = depth;
        if (deepest > limit) {
          break;
        }
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::size_t limit = (data[0] & 1U) != 0 ? 1U + ((data[0] >> 1U) & 7U)
                                                : servekit::http::detail::max_json_body_depth;
  const std::string_view body{reinterpret_cast<const char*>(data) + 1, size - 1};

  nlohmann::json j;
  const servekit::status s =
      servekit::http::detail::parse_json_body(body, j, "the repository request", limit);
  // nlohmann's "[json.exception...]" tag must not reach the client; its messages quote the
  // last token read, so the tag may appear when the body itself holds it.
  const bool body_holds_tag = body.find("[json.exception") != std::string_view::npos;
  if (!s.ok() && (s.code() != servekit::status_code::invalid_argument || s.message().empty() ||
                  (!body_holds_tag && s.message().find("[json.exception") != std::string::npos))) {
    __builtin_trap();
  }
  // nlohmann's accept has no depth limit (and reads a NUL byte as the end of the text).
  if (body.find('\0') == std::string_view::npos && nesting(body, limit) <= limit &&
      s.ok() != nlohmann::json::accept(body.begin(), body.end())) {
    __builtin_trap();
  }
  if (!s.ok()) {
    return 0;
  }
  if (j.is_object()) {
    if (const auto it = j.find("ready"); it != j.end() && it->is_boolean()) {
      (void)it->get<bool>();
    }
    if (const auto it = j.find("parameters"); it != j.end() && it->is_object()) {
      for (const auto& [key, value] : it->items()) {
        if (key == "unload_dependents" && value.is_boolean()) {
          (void)value.get<bool>();
        } else if (value.is_string()) {
          (void)value.get_ref<const std::string&>().size();
        }
      }
    }
  }
  (void)j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return 0;
}
