// Routing of request targets to KServe v2 / Triton endpoints (pure: no sockets).

#include <servekit/http/routes.hpp>

#include <gtest/gtest.h>

#include <string>

namespace routes_test {

using servekit::http::endpoint;
using servekit::http::method;
using servekit::http::parse_route;
using servekit::http::route;

TEST(Routes, HealthAndServerMetadata) {
  EXPECT_EQ(parse_route("/v2/health/live").kind, endpoint::health_live);
  EXPECT_EQ(parse_route("/v2/health/ready").kind, endpoint::health_ready);
  EXPECT_EQ(parse_route("/v2").kind, endpoint::server_metadata);
  EXPECT_EQ(parse_route("/metrics").kind, endpoint::metrics);
  EXPECT_EQ(parse_route("/v2/health").kind, endpoint::unknown);
  EXPECT_EQ(parse_route("/v2/health/dead").kind, endpoint::unknown);
}

TEST(Routes, ModelEndpointsWithoutVersion) {
  const auto meta = parse_route("/v2/models/add_sub");
  EXPECT_EQ(meta.kind, endpoint::model_metadata);
  EXPECT_EQ(meta.model, "add_sub");
  EXPECT_EQ(meta.version, -1);
  EXPECT_TRUE(meta.error.empty());

  EXPECT_EQ(parse_route("/v2/models/add_sub/ready").kind, endpoint::model_ready);
  EXPECT_EQ(parse_route("/v2/models/add_sub/config").kind, endpoint::model_config);
  EXPECT_EQ(parse_route("/v2/models/add_sub/infer").kind, endpoint::model_infer);
  EXPECT_EQ(parse_route("/v2/models/add_sub/stats").kind, endpoint::model_stats);
  EXPECT_EQ(parse_route("/v2/models/add_sub/infer").model, "add_sub");
}

TEST(Routes, ModelEndpointsWithVersion) {
  const auto meta = parse_route("/v2/models/identity/versions/3");
  EXPECT_EQ(meta.kind, endpoint::model_metadata);
  EXPECT_EQ(meta.model, "identity");
  EXPECT_EQ(meta.version, 3);

  const auto infer = parse_route("/v2/models/identity/versions/12/infer");
  EXPECT_EQ(infer.kind, endpoint::model_infer);
  EXPECT_EQ(infer.model, "identity");
  EXPECT_EQ(infer.version, 12);

  EXPECT_EQ(parse_route("/v2/models/m/versions/1/ready").kind, endpoint::model_ready);
  EXPECT_EQ(parse_route("/v2/models/m/versions/1/config").kind, endpoint::model_config);
  EXPECT_EQ(parse_route("/v2/models/m/versions/1/stats").kind, endpoint::model_stats);
  EXPECT_EQ(parse_route("/v2/models/m/versions/0").version, 0);
}

TEST(Routes, GenerateExtension) {
  const auto g = parse_route("/v2/models/repeat_int32/generate");
  EXPECT_EQ(g.kind, endpoint::model_generate);
  EXPECT_EQ(g.model, "repeat_int32");
  EXPECT_EQ(g.version, -1);
  const auto s = parse_route("/v2/models/repeat_int32/versions/2/generate_stream");
  EXPECT_EQ(s.kind, endpoint::model_generate_stream);
  EXPECT_EQ(s.model, "repeat_int32");
  EXPECT_EQ(s.version, 2);
  EXPECT_EQ(servekit::http::method_for(endpoint::model_generate), method::post);
  EXPECT_EQ(servekit::http::method_for(endpoint::model_generate_stream), method::post);
  EXPECT_TRUE(servekit::http::names_model(endpoint::model_generate_stream));
  EXPECT_EQ(servekit::http::to_string(endpoint::model_generate_stream), "model_generate_stream");
  EXPECT_EQ(parse_route("/v2/models/m/generate_streams").kind, endpoint::unknown);
  EXPECT_EQ(parse_route("/v2/models/m/generate/stream").kind, endpoint::unknown);
}

TEST(Routes, BadVersionIsAnErrorNotAnEndpoint) {
  for (const char* target :
       {"/v2/models/m/versions/abc", "/v2/models/m/versions/-1/infer", "/v2/models/m/versions/1x",
        "/v2/models/m/versions/+1", "/v2/models/m/versions/99999999999999999999"}) {
    const auto r = parse_route(target);
    EXPECT_EQ(r.kind, endpoint::unknown) << target;
    EXPECT_NE(r.error.find("invalid model version"), std::string::npos) << target;
  }
  // Missing or extra pieces are simply no endpoint (404), not malformed.
  EXPECT_EQ(parse_route("/v2/models/m/versions").kind, endpoint::unknown);
  EXPECT_TRUE(parse_route("/v2/models/m/versions").error.empty());
  EXPECT_EQ(parse_route("/v2/models/m/versions/1/infer/more").kind, endpoint::unknown);
  EXPECT_EQ(parse_route("/v2/models/m/infer/more").kind, endpoint::unknown);
  EXPECT_EQ(parse_route("/v2/models/m/explain").kind, endpoint::unknown);
}

TEST(Routes, AllModelStatsShadowsAModelNamedStats) {
  EXPECT_EQ(parse_route("/v2/models/stats").kind, endpoint::all_model_stats);
  EXPECT_EQ(parse_route("/v2/models/stats/stats").kind, endpoint::model_stats);
  EXPECT_EQ(parse_route("/v2/models/stats/stats").model, "stats");
  EXPECT_EQ(parse_route("/v2/models").kind, endpoint::unknown);
}

TEST(Routes, RepositoryExtension) {
  EXPECT_EQ(parse_route("/v2/repository/index").kind, endpoint::repository_index);
  const auto load = parse_route("/v2/repository/models/add_sub/load");
  EXPECT_EQ(load.kind, endpoint::repository_load);
  EXPECT_EQ(load.model, "add_sub");
  const auto unload = parse_route("/v2/repository/models/add_sub/unload");
  EXPECT_EQ(unload.kind, endpoint::repository_unload);
  EXPECT_EQ(unload.model, "add_sub");
  EXPECT_EQ(parse_route("/v2/repository/models/add_sub").kind, endpoint::unknown);
  EXPECT_EQ(parse_route("/v2/repository/models/add_sub/reload").kind, endpoint::unknown);
  EXPECT_EQ(parse_route("/v2/repository").kind, endpoint::unknown);
}

TEST(Routes, PercentDecodedModelNames) {
  const auto r = parse_route("/v2/models/my%20model/infer");
  EXPECT_EQ(r.kind, endpoint::model_infer);
  EXPECT_EQ(r.model, "my model");

  // %2F is a slash inside the name, not a separator.
  const auto slash = parse_route("/v2/models/a%2Fb/versions/2/ready");
  EXPECT_EQ(slash.kind, endpoint::model_ready);
  EXPECT_EQ(slash.model, "a/b");
  EXPECT_EQ(slash.version, 2);

  EXPECT_EQ(parse_route("/v2/models/%61dd_sub").model, "add_sub");
  EXPECT_EQ(parse_route("/v2/models/a+b").model, "a+b"); // + is not a space in paths
  EXPECT_EQ(parse_route("/v2/repository/models/x%2dy/load").model, "x-y");
}

TEST(Routes, MalformedPercentEncodingIsAnError) {
  for (const char* target : {"/v2/models/a%zz/infer", "/v2/models/a%2", "/v2/models/%",
                             "/v2/repository/models/%g0/load"}) {
    const auto r = parse_route(target);
    EXPECT_EQ(r.kind, endpoint::unknown) << target;
    EXPECT_NE(r.error.find("percent-encoding"), std::string::npos) << target;
    EXPECT_TRUE(r.model.empty()) << target;
  }
}

TEST(Routes, QueryStringIsIgnored) {
  EXPECT_EQ(parse_route("/v2/health/ready?verbose=1").kind, endpoint::health_ready);
  const auto r = parse_route("/v2/models/add_sub/infer?x=/y");
  EXPECT_EQ(r.kind, endpoint::model_infer);
  EXPECT_EQ(r.model, "add_sub");
  EXPECT_EQ(parse_route("/metrics?").kind, endpoint::metrics);
}

TEST(Routes, BadTargetsAreUnknown) {
  for (const char* target :
       {"", "v2/health/live", "/", "//", "/v2/", "/v2/health/live/", "/v2//health/live",
        "/v2/models//infer", "/V2/health/live", "http://host/v2/health/live", "/v3/health/live",
        "/metrics/", "/v2/models/a/versions/1/infer/x/y/z"}) {
    const auto r = parse_route(target);
    EXPECT_EQ(r.kind, endpoint::unknown) << target;
    EXPECT_TRUE(r.error.empty()) << target;
  }
}

TEST(Routes, ReusingARouteResetsIt) {
  route r;
  parse_route("/v2/models/abc/versions/7/infer", r);
  EXPECT_EQ(r.version, 7);
  parse_route("/v2/models/x%zz", r);
  EXPECT_FALSE(r.error.empty());
  parse_route("/v2/health/live", r);
  EXPECT_EQ(r.kind, endpoint::health_live);
  EXPECT_TRUE(r.model.empty());
  EXPECT_TRUE(r.error.empty());
  EXPECT_EQ(r.version, -1);
}

TEST(Routes, AdminDrain) {
  EXPECT_EQ(parse_route("/v2/admin/drain").kind, endpoint::admin_drain);
  EXPECT_EQ(parse_route("/v2/admin/drain?now").kind, endpoint::admin_drain);
  EXPECT_EQ(parse_route("/v2/admin").kind, endpoint::unknown);
  EXPECT_EQ(parse_route("/v2/admin/drain/x").kind, endpoint::unknown);
  EXPECT_EQ(servekit::http::method_for(endpoint::admin_drain), method::post);
  EXPECT_FALSE(servekit::http::names_model(endpoint::admin_drain));
}

TEST(Routes, MethodsAreTritons) {
  EXPECT_EQ(servekit::http::method_for(endpoint::model_infer), method::post);
  EXPECT_EQ(servekit::http::method_for(endpoint::repository_index), method::post);
  EXPECT_EQ(servekit::http::method_for(endpoint::repository_load), method::post);
  EXPECT_EQ(servekit::http::method_for(endpoint::repository_unload), method::post);
  for (const auto e : {endpoint::health_live, endpoint::health_ready, endpoint::server_metadata,
                       endpoint::model_metadata, endpoint::model_ready, endpoint::model_config,
                       endpoint::model_stats, endpoint::all_model_stats, endpoint::metrics}) {
    EXPECT_EQ(servekit::http::method_for(e), method::get) << servekit::http::to_string(e);
  }
  EXPECT_TRUE(servekit::http::names_model(endpoint::repository_load));
  EXPECT_FALSE(servekit::http::names_model(endpoint::all_model_stats));
}

TEST(Routes, OpenAICompatibleEndpoints) {
  EXPECT_EQ(parse_route("/v1/completions").kind, endpoint::openai_completions);
  EXPECT_EQ(parse_route("/v1/chat/completions").kind, endpoint::openai_chat_completions);
  EXPECT_EQ(parse_route("/v1/models").kind, endpoint::openai_models);
  EXPECT_EQ(parse_route("/v1/completions?x=1").kind, endpoint::openai_completions);
  EXPECT_EQ(parse_route("/v1/chat").kind, endpoint::unknown);
  EXPECT_EQ(parse_route("/v1/completions/").kind, endpoint::unknown);
  EXPECT_EQ(parse_route("/v1/models/tiny_lm").kind, endpoint::unknown);
  EXPECT_EQ(parse_route("/v1").kind, endpoint::unknown);
  EXPECT_EQ(servekit::http::method_for(endpoint::openai_completions), method::post);
  EXPECT_EQ(servekit::http::method_for(endpoint::openai_chat_completions), method::post);
  EXPECT_EQ(servekit::http::method_for(endpoint::openai_models), method::get);
  EXPECT_FALSE(servekit::http::names_model(endpoint::openai_completions));
  EXPECT_EQ(servekit::http::to_string(endpoint::openai_chat_completions),
            "openai_chat_completions");
}

TEST(Routes, PercentDecode) {
  std::string out = "junk";
  EXPECT_TRUE(servekit::http::percent_decode("a%41%62c", out));
  EXPECT_EQ(out, "aAbc");
  EXPECT_TRUE(servekit::http::percent_decode("", out));
  EXPECT_EQ(out, "");
  EXPECT_TRUE(servekit::http::percent_decode("%00", out));
  EXPECT_EQ(out, std::string(1, '\0'));
  EXPECT_FALSE(servekit::http::percent_decode("%4", out));
  EXPECT_FALSE(servekit::http::percent_decode("%%41", out));
}

} // namespace routes_test
