// The decoder's memory as a factor of the body, measured with the counting operator new of
// failing_new.cpp (moved here from tests/http/kserve_codec_test.cpp, so that servekit.test.http
// keeps the standard operator new).
#include "failing_new.hpp"

#include <servekit/http/kserve_codec.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>

namespace alloc_count = failing_new;

namespace decode_memory_test {

using servekit::http::decode_infer_request;
using servekit::http::decoded_infer_request;

// A 57 MiB body raised peak memory by 629 MiB (11x): an input's "data" went into a vector of
// 16-byte scalars grown by doubling (up to 3x its elements while the last copy was made), then
// into the tensor. Reserved from the shape now: the scalars (16 bytes each) and the tensor
// (4 bytes of FP32), against at least 4 bytes of body per element ("1.5,"): at most 5x the
// body, plus the vector of inputs. Measured: the peak of live bytes allocated while decoding.
TEST(KserveDecode, MemoryIsASmallFactorOfTheBody) {
  constexpr std::size_t n = 1'000'000;
  std::string body = fmt::format(R"({{"inputs":[{{"name":"x","shape":[{}],"datatype":"FP32",)"
                                 R"("data":[)",
                                 n);
  for (std::size_t i = 0; i < n; ++i) {
    body += i == 0 ? "1.5" : ",1.5";
  }
  body += "]}]}";
  const auto peak_factor = [&body] {
    decoded_infer_request out;
    const auto before = alloc_count::live.load();
    alloc_count::peak.store(before);
    const auto s = decode_infer_request(body, std::nullopt, out);
    EXPECT_TRUE(s.ok()) << s.message();
    return static_cast<double>(alloc_count::peak.load() - before) /
           static_cast<double>(body.size());
  };
  const double factor = peak_factor();
  std::printf("decode: peak %.2fx a %zu-byte body\n", factor, body.size());
  EXPECT_LT(factor, 5.5) << "decoding a " << body.size() << "-byte body took " << factor
                         << "x its size at its peak";
  EXPECT_GT(factor, 1.0); // the tensor itself: the counter sees the decoder's allocations

  // A shape that promises more than the text holds reserves no more than the text can hold.
  const std::string liar =
      R"({"inputs":[{"name":"x","shape":[100000000],"datatype":"FP32","data":[1.5]}]})";
  decoded_infer_request out;
  const auto before = alloc_count::live.load();
  alloc_count::peak.store(before);
  EXPECT_FALSE(decode_infer_request(liar, std::nullopt, out).ok());
  EXPECT_LT(alloc_count::peak.load() - before, 64 * 1024);
}

} // namespace decode_memory_test
