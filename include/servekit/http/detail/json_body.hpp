#pragma once
/// \file
/// parse_json_body: nlohmann's parse of a request body with a nesting limit, every failure an
/// invalid_argument naming what is wrong. The bodies the front end parses into nlohmann values
/// (generate, generate_stream, the repository endpoints) go through it: a client's body must
/// never reach code whose recursion only the stack bounds, and no parse failure (a syntax error,
/// a number out of range such as 1e400) may surface as an internal error.

#include <servekit/config/detail/json_teardown.hpp>
#include <servekit/core/status.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace servekit::http::detail {

/// The nesting limit of every JSON body nlohmann parses: the /infer reader's (json_reader's
/// max_depth), so a body is as deep as either path allows.
inline constexpr std::size_t max_json_body_depth = 512;

/// nlohmann's message without its "[json.exception.parse_error.101] " tag, which means nothing
/// to a client.
[[nodiscard]] inline std::string_view without_nlohmann_prefix(std::string_view message) noexcept {
  if (message.starts_with("[json.exception.")) {
    if (const auto end = message.find("] "); end != std::string_view::npos) {
      message.remove_prefix(end + 2);
    }
  }
  return message;
}

/// nlohmann's DOM built from its SAX events with a nesting limit, straight into the caller's
/// value: whatever is built when the parse stops (an error, an allocation failure) belongs to
/// the caller, who tears it down without allocating (json_teardown.hpp). nlohmann's own parse()
/// builds into a local that its unwinding destroys, which allocates.
class bounded_json_builder {
public:
  using json = nlohmann::json;

  bounded_json_builder(json& root, std::size_t max_depth) noexcept
      : root_{root}, max_depth_{max_depth} {}

  bool null() { return put(nullptr); }
  bool boolean(bool v) { return put(v); }
  bool number_integer(json::number_integer_t v) { return put(v); }
  bool number_unsigned(json::number_unsigned_t v) { return put(v); }
  bool number_float(json::number_float_t v, const json::string_t& /*text*/) { return put(v); }
  bool string(json::string_t& v) { return put(std::move(v)); }
  bool binary(json::binary_t& v) { return put(json::binary(std::move(v))); }
  bool start_object(std::size_t /*size*/) { return open(json::value_t::object); }
  bool start_array(std::size_t /*size*/) { return open(json::value_t::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(json::string_t& k) {
    member_ = &open_.back()->get_ref<json::object_t&>()[std::move(k)];
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& e) {
    error_ = e.what();
    out_of_range_ = e.id == 406; // a number no double holds, such as 1e400
    return false;
  }

  [[nodiscard]] bool too_deep() const noexcept { return too_deep_; }
  [[nodiscard]] bool out_of_range() const noexcept { return out_of_range_; }
  [[nodiscard]] const std::string& error() const noexcept { return error_; }

private:
  /// Where the next value goes: the root, the end of the open array, or the member just keyed.
  json* place(json&& v) {
    if (open_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    json& parent = *open_.back();
    if (parent.is_array()) {
      auto& elements = parent.get_ref<json::array_t&>();
      elements.push_back(std::move(v));
      return &elements.back();
    }
    *member_ = std::move(v);
    return member_;
  }
  template <class Value>
  bool put(Value&& v) {
    place(json(std::forward<Value>(v)));
    return true;
  }
  bool open(json::value_t type) {
    // nlohmann's callback depth: the outermost container is at depth 0.
    if (open_.size() >= max_depth_) {
      too_deep_ = true;
      return false;
    }
    open_.reserve(open_.size() + 1); // before the container is placed: nothing half-done
    open_.push_back(place(json(type)));
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }

  json& root_;
  std::size_t max_depth_;
  std::vector<json*> open_; ///< the containers open, outermost first
  json* member_ = nullptr;  ///< the member of the innermost open object whose value comes next
  std::string error_;
  bool too_deep_ = false;
  bool out_of_range_ = false;
};

/// Parses `body` into `out`. Errors (invalid_argument): a syntax error (nlohmann's message,
/// with its byte position), a number nlohmann cannot hold, nesting deeper than `max_depth`.
/// `what` names the body in messages ("the generate request"). Tear `out` down with
/// json_teardown (declared after it) when it lives on the request path: on every return, and
/// when this throws std::bad_alloc, `out` holds what was built.
[[nodiscard]] inline status parse_json_body(std::string_view body, nlohmann::json& out,
                                            std::string_view what,
                                            std::size_t max_depth = max_json_body_depth) {
  // nlohmann's SAX parser keeps its own stack (no recursion); the builder refuses the first
  // container too deep, before the document is built any further.
  bounded_json_builder builder{out, max_depth};
  if (nlohmann::json::sax_parse(body.begin(), body.end(), &builder)) {
    return {};
  }
  servekit::detail::dismantle_json(out);
  out = nullptr;
  if (builder.too_deep()) {
    return invalid_argument(fmt::format("{} JSON nests deeper than {} levels", what, max_depth));
  }
  if (builder.out_of_range()) {
    // The client's text is at fault, not the server.
    return invalid_argument(fmt::format("{} JSON holds a number out of range: {}", what,
                                        without_nlohmann_prefix(builder.error())));
  }
  return invalid_argument(
      fmt::format("failed to parse {} JSON: {}", what, without_nlohmann_prefix(builder.error())));
}

} // namespace servekit::http::detail
