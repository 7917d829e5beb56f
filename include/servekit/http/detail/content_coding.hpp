#pragma once
/// \file
/// HTTP content codings over zlib: a request body sent with `Content-Encoding: gzip` or
/// `deflate` (Triton's clients send them with `-i gzip`) is inflated within a size limit that
/// counts the inflated bytes (a small body cannot expand into a zip bomb), and a response body
/// is compressed when the client's Accept-Encoding allows it.

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace servekit::http::detail {

/// A content coding the server reads and writes.
enum class content_coding { identity, gzip, deflate, unsupported };

/// The coding a Content-Encoding value names (one coding; a list of several is unsupported).
[[nodiscard]] inline content_coding parse_content_encoding(std::string_view value) noexcept {
  const auto not_space = [](char c) { return c != ' ' && c != '\t'; };
  const auto first = std::find_if(value.begin(), value.end(), not_space);
  const auto last = std::find_if(value.rbegin(), value.rend(), not_space).base();
  value = first < last ? std::string_view(&*first, static_cast<std::size_t>(last - first))
                       : std::string_view{};
  const auto is = [&](std::string_view name) {
    return value.size() == name.size() &&
           std::equal(value.begin(), value.end(), name.begin(), [](char a, char b) {
             return (a >= 'A' && a <= 'Z' ? static_cast<char>(a - 'A' + 'a') : a) == b;
           });
  };
  if (value.empty() || is("identity")) {
    return content_coding::identity;
  }
  if (is("gzip") || is("x-gzip")) {
    return content_coding::gzip;
  }
  if (is("deflate")) {
    return content_coding::deflate;
  }
  return content_coding::unsupported;
}

/// The coding to answer in for an Accept-Encoding value: gzip if listed (without q=0), else
/// deflate, else identity. A coarse reading of RFC 9110's weights: q=0 excludes, other
/// weights are not ranked.
[[nodiscard]] inline content_coding choose_response_coding(std::string_view accept) noexcept {
  bool gzip = false;
  bool deflate = false;
  while (!accept.empty()) {
    const auto comma = accept.find(',');
    std::string_view item = accept.substr(0, comma);
    accept = comma == std::string_view::npos ? std::string_view{} : accept.substr(comma + 1);
    const auto semicolon = item.find(';');
    std::string_view params =
        semicolon == std::string_view::npos ? std::string_view{} : item.substr(semicolon + 1);
    const auto coding = parse_content_encoding(item.substr(0, semicolon));
    const bool refused = params.find("q=0") != std::string_view::npos &&
                         params.find("q=0.") == std::string_view::npos;
    if (refused) {
      continue;
    }
    gzip = gzip || coding == content_coding::gzip;
    deflate = deflate || coding == content_coding::deflate;
  }
  return gzip ? content_coding::gzip : deflate ? content_coding::deflate : content_coding::identity;
}

/// The result of inflating a request body.
enum class inflate_result { ok, too_large, corrupt };

/// Inflates `in` (gzip, or zlib-wrapped deflate; raw deflate too, as browsers send it) into
/// `out`, stopping with too_large as soon as more than `limit` bytes come out. `out` grows with
/// what was inflated, never reserved from a size the body claims.
[[nodiscard]] inline inflate_result inflate_body(std::string_view in, content_coding coding,
                                                 std::size_t limit, std::string& out) {
  out.clear();
  const auto run = [&](int window_bits) {
    out.clear();
    z_stream z{};
    if (inflateInit2(&z, window_bits) != Z_OK) {
      return inflate_result::corrupt;
    }
    // Ends the stream however the scope ends: appending to `out` may throw std::bad_alloc, and
    // zlib's state (malloc'd by inflateInit2) must not leak with it.
    struct stream_end {
      z_stream& z;
      ~stream_end() { inflateEnd(&z); }
    } const end{z};
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z.avail_in = static_cast<uInt>(in.size());
    std::array<char, 16 * 1024> chunk{};
    int rc = Z_OK;
    while (rc == Z_OK) {
      z.next_out = reinterpret_cast<Bytef*>(chunk.data());
      z.avail_out = static_cast<uInt>(chunk.size());
      rc = inflate(&z, Z_NO_FLUSH);
      const std::size_t produced = chunk.size() - z.avail_out;
      if (out.size() + produced > limit) { // out.size() <= limit: no overflow
        return inflate_result::too_large;
      }
      out.append(chunk.data(), produced);
      if (rc == Z_BUF_ERROR && z.avail_in == 0) {
        break; // the input ended before the stream did
      }
    }
    return rc == Z_STREAM_END ? inflate_result::ok : inflate_result::corrupt;
  };
  if (in.size() > static_cast<std::size_t>(static_cast<uInt>(-1))) {
    return inflate_result::too_large;
  }
  if (coding == content_coding::gzip) {
    return run(16 + MAX_WBITS);
  }
  const auto wrapped = run(MAX_WBITS);
  return wrapped == inflate_result::corrupt ? run(-MAX_WBITS) : wrapped;
}

/// Compresses `in` into `out` as gzip or (zlib-wrapped) deflate; false if zlib fails.
[[nodiscard]] inline bool deflate_body(std::string_view in, content_coding coding,
                                       std::string& out) {
  z_stream z{};
  const int window_bits = coding == content_coding::gzip ? 16 + MAX_WBITS : MAX_WBITS;
  // Level 1: most of the saving for JSON at a fraction of the time of the default level.
  if (deflateInit2(&z, 1, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return false;
  }
  struct stream_end { // as in inflate_body: resizing `out` may throw
    z_stream& z;
    ~stream_end() { deflateEnd(&z); }
  } const end{z};
  out.resize(deflateBound(&z, static_cast<uLong>(in.size())));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(out.size() - z.avail_out);
  return rc == Z_STREAM_END;
}

} // namespace servekit::http::detail
