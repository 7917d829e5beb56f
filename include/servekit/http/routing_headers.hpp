#pragma once
/// \file
/// The sequence id and priority read from a request header (HTTP) or metadata key (gRPC), as
/// well as from the request's parameters. Triton carries the sequence id in the body, where no
/// proxy can hash on it; a header is what nginx (`hash $http_x_sequence_id consistent`), HAProxy
/// (`balance hdr(x-sequence-id)`) and Envoy (a ring-hash header policy) route on, so every
/// request of a sequence reaches the replica that holds its state (docs/scale-out.md).

#include <servekit/core/request.hpp>
#include <servekit/core/status.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace servekit::http {

/// Which header (gRPC: metadata key) carries what. Empty: not read. Header names are matched
/// without regard to case, as HTTP does; gRPC metadata keys are lower case, so the name is
/// looked up there in lower case.
struct routing_headers {
  std::string sequence_id; ///< e.g. "x-sequence-id" (`--sequence-id-header`)
  std::string priority;    ///< e.g. "x-priority" (`--priority-header`)

  [[nodiscard]] bool any() const noexcept { return !sequence_id.empty() || !priority.empty(); }
};

/// `name` in lower case: the form gRPC metadata keys take.
[[nodiscard]] inline std::string metadata_key(std::string_view name) {
  std::string key{name};
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return key;
}

/// Whether `name` may be a header name: a non-empty token of letters, digits and `-`, and not
/// one of HTTP's or gRPC's own (`:`-prefixed pseudo-headers, `grpc-*`).
[[nodiscard]] inline bool valid_routing_header(std::string_view name) noexcept {
  if (name.empty() || name.size() > 128) {
    return false;
  }
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) == 0 && c != '-' && c != '_') {
      return false;
    }
  }
  const std::string lower = metadata_key(name);
  return lower.rfind("grpc-", 0) != 0 && lower != "content-type" && lower != "content-length";
}

namespace detail {

/// An unsigned decimal that fits 64 bits, and nothing else.
[[nodiscard]] inline std::optional<std::uint64_t> parse_decimal(std::string_view text) noexcept {
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return n;
}

} // namespace detail

/// The sequence id a header value names: an unsigned integer when it is all digits (and fits
/// 64 bits), else the string itself, as Triton takes `sequence_id` either way.
[[nodiscard]] inline correlation_id sequence_id_from_header(std::string_view value) {
  if (const auto n = detail::parse_decimal(value)) {
    return correlation_id{*n};
  }
  return correlation_id{std::string{value}};
}

/// Puts the sequence id of header `header` (value `value`) on `r`. When the request's
/// parameters named one too, the two must name the same sequence (the same number, or the same
/// text); otherwise, or for an empty value, `invalid_argument` naming both.
[[nodiscard]] inline status apply_sequence_id_header(request& r, std::string_view header,
                                                     std::string_view value) {
  if (value.empty()) {
    return invalid_argument(fmt::format("header '{}' is empty: expected a sequence id", header));
  }
  correlation_id id = sequence_id_from_header(value);
  if (!r.sequence_id.empty()) {
    if (r.sequence_id == id || r.sequence_id.to_string() == value) {
      return {};
    }
    return invalid_argument(fmt::format("the sequence id of header '{}' ({}) and of the "
                                        "request's parameters ({}) disagree",
                                        header, value, r.sequence_id.to_string()));
  }
  r.sequence_id = std::move(id);
  return {};
}

/// Puts the priority of header `header` on `r`: an unsigned integer (1 is highest, 0 the
/// model's default level). When the request's parameters set one too, they must agree.
[[nodiscard]] inline status apply_priority_header(request& r, std::string_view header,
                                                  std::string_view value) {
  const auto n = detail::parse_decimal(value);
  if (!n) {
    return invalid_argument(
        fmt::format("header '{}' is '{}': expected an unsigned integer priority", header, value));
  }
  if (r.priority != 0 && r.priority != *n) {
    return invalid_argument(fmt::format("the priority of header '{}' ({}) and of the request's "
                                        "parameters ({}) disagree",
                                        header, *n, r.priority));
  }
  r.priority = *n;
  return {};
}

/// Both headers, each looked up with `find(name)` (an optional string_view: the header's
/// value, or nothing when absent). Ok when neither is configured or present.
template <class Find>
[[nodiscard]] status apply_routing_headers(request& r, const routing_headers& headers,
                                           Find&& find) {
  if (!headers.sequence_id.empty()) {
    if (const std::optional<std::string_view> v = find(headers.sequence_id)) {
      if (status s = apply_sequence_id_header(r, headers.sequence_id, *v); !s.ok()) {
        return s;
      }
    }
  }
  if (!headers.priority.empty()) {
    if (const std::optional<std::string_view> v = find(headers.priority)) {
      if (status s = apply_priority_header(r, headers.priority, *v); !s.ok()) {
        return s;
      }
    }
  }
  return {};
}

} // namespace servekit::http
