// routing_headers.hpp: the sequence id and priority a proxy routes on, read from a header as
// well as from the request's parameters; the two must agree. And drain_state's admission rule.

#include <servekit/http/drain.hpp>
#include <servekit/http/routing_headers.hpp>

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace routing_headers_test {

using servekit::request;
using servekit::status_code;
using servekit::http::apply_priority_header;
using servekit::http::apply_routing_headers;
using servekit::http::apply_sequence_id_header;

TEST(RoutingHeaders, ADigitHeaderIsANumericIdAndAnyOtherAStringId) {
  request r;
  ASSERT_TRUE(apply_sequence_id_header(r, "x-sequence-id", "42").ok());
  EXPECT_FALSE(r.sequence_id.is_string());
  EXPECT_EQ(r.sequence_id.as_uint(), 42U);

  request s;
  ASSERT_TRUE(apply_sequence_id_header(s, "x-sequence-id", "user-7:chat").ok());
  EXPECT_TRUE(s.sequence_id.is_string());
  EXPECT_EQ(s.sequence_id.as_string(), "user-7:chat");

  request big; // past 64 bits: a string, as Triton would have to take it
  ASSERT_TRUE(apply_sequence_id_header(big, "x-sequence-id", "123456789012345678901234").ok());
  EXPECT_TRUE(big.sequence_id.is_string());
}

TEST(RoutingHeaders, HeaderAndParametersMustNameTheSameSequence) {
  request same;
  same.sequence_id = 42U;
  EXPECT_TRUE(apply_sequence_id_header(same, "x-sequence-id", "42").ok());
  EXPECT_EQ(same.sequence_id.as_uint(), 42U);

  request text; // the parameter as the string "42": the same text, so the same sequence
  text.sequence_id = std::string{"42"};
  EXPECT_TRUE(apply_sequence_id_header(text, "x-sequence-id", "42").ok());

  request other;
  other.sequence_id = 43U;
  const auto s = apply_sequence_id_header(other, "x-sequence-id", "42");
  EXPECT_EQ(s.code(), status_code::invalid_argument);
  EXPECT_EQ(s.message(), "the sequence id of header 'x-sequence-id' (42) and of the request's "
                         "parameters (43) disagree");
  EXPECT_EQ(other.sequence_id.as_uint(), 43U) << "a refused header changes nothing";

  request empty;
  EXPECT_EQ(apply_sequence_id_header(empty, "x-sequence-id", "").message(),
            "header 'x-sequence-id' is empty: expected a sequence id");
}

TEST(RoutingHeaders, PriorityIsAnUnsignedIntegerThatAgreesWithTheParameter) {
  request r;
  ASSERT_TRUE(apply_priority_header(r, "x-priority", "2").ok());
  EXPECT_EQ(r.priority, 2U);
  EXPECT_TRUE(apply_priority_header(r, "x-priority", "2").ok());
  EXPECT_EQ(apply_priority_header(r, "x-priority", "1").message(),
            "the priority of header 'x-priority' (1) and of the request's parameters (2) "
            "disagree");
  request bad;
  EXPECT_EQ(apply_priority_header(bad, "x-priority", "high").message(),
            "header 'x-priority' is 'high': expected an unsigned integer priority");
  EXPECT_EQ(apply_priority_header(bad, "x-priority", "-1").code(), status_code::invalid_argument);
}

TEST(RoutingHeaders, OnlyConfiguredAndPresentHeadersApply) {
  const std::map<std::string, std::string> sent{{"x-sequence-id", "9"}, {"x-priority", "1"}};
  const auto find = [&sent](const std::string& name) -> std::optional<std::string_view> {
    const auto it = sent.find(name);
    return it == sent.end() ? std::nullopt : std::optional<std::string_view>{it->second};
  };
  request none;
  EXPECT_TRUE(apply_routing_headers(none, {}, find).ok());
  EXPECT_TRUE(none.sequence_id.empty()) << "no header configured: nothing read";

  request both;
  ASSERT_TRUE(apply_routing_headers(both, {"x-sequence-id", "x-priority"}, find).ok());
  EXPECT_EQ(both.sequence_id.as_uint(), 9U);
  EXPECT_EQ(both.priority, 1U);

  request absent;
  ASSERT_TRUE(apply_routing_headers(absent, {"x-other", ""}, find).ok());
  EXPECT_TRUE(absent.sequence_id.empty()) << "configured but not sent: the parameters decide";
}

TEST(RoutingHeaders, HeaderNamesAreTokensAndNotTransportOnes) {
  using servekit::http::valid_routing_header;
  EXPECT_TRUE(valid_routing_header("x-sequence-id"));
  EXPECT_TRUE(valid_routing_header("X_Session"));
  EXPECT_FALSE(valid_routing_header(""));
  EXPECT_FALSE(valid_routing_header("x sequence"));
  EXPECT_FALSE(valid_routing_header("x-seq:id"));
  EXPECT_FALSE(valid_routing_header("grpc-timeout"));
  EXPECT_FALSE(valid_routing_header("Content-Length"));
  EXPECT_EQ(servekit::http::metadata_key("X-Sequence-Id"), "x-sequence-id");
}

TEST(DrainState, OnlyTheFirstBeginCountsAndNewSequencesAreRefusedWhileDraining) {
  servekit::http::drain_state d;
  request start;
  start.sequence_id = 5U;
  start.sequence_start = true;
  request next;
  next.sequence_id = 5U;
  EXPECT_FALSE(d.draining());
  EXPECT_TRUE(d.admit(start, "sum").ok());

  EXPECT_TRUE(d.begin("SIGTERM"));
  EXPECT_FALSE(d.begin("POST /v2/admin/drain"));
  EXPECT_TRUE(d.draining());
  EXPECT_EQ(d.reason(), "SIGTERM");

  const auto refused = d.admit(start, "sum");
  EXPECT_EQ(refused.code(), status_code::unavailable);
  EXPECT_EQ(refused.message(), "the server is draining (SIGTERM): model 'sum' starts no new "
                               "sequence here (sequence 5); start it on another replica");
  EXPECT_TRUE(d.admit(next, "sum").ok()) << "an open sequence goes on during the grace period";
  EXPECT_TRUE(d.admit(request{}, "sum").ok()) << "stateless requests are answered";
}

TEST(DrainState, WhileDrainingAnUnknownSequenceIsUnavailableForAProxyToRetryElsewhere) {
  servekit::http::drain_state d;
  const auto unknown = servekit::missing_start(servekit::correlation_id{9U}, "sum");
  EXPECT_TRUE(servekit::is_missing_start(unknown));
  EXPECT_EQ(d.redirect(unknown).code(), status_code::invalid_argument) << "not draining yet";
  ASSERT_TRUE(d.begin("SIGTERM"));
  const auto redirected = d.redirect(unknown);
  EXPECT_EQ(redirected.code(), status_code::unavailable);
  EXPECT_EQ(redirected.message(),
            "the server is draining (SIGTERM): inference request for sequence 9 to model 'sum' "
            "must specify the START flag on the first request of the sequence; send it to the "
            "replica that holds the sequence");
  const auto other = servekit::invalid_argument("unexpected input 'X'");
  EXPECT_EQ(d.redirect(other).message(), "unexpected input 'X'") << "other errors unchanged";
}

} // namespace routing_headers_test
