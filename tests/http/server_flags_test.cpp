// parse_server_flags: Triton's flag names, both spellings of values, and clear errors.

#include <servekit/http/server_flags.hpp>

#include <gtest/gtest.h>

#include <chrono>

#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace {

using servekit::http::server_flags;

struct parsed {
  std::variant<server_flags, int> result;
  std::string out;
  std::string err;
};

parsed parse(std::initializer_list<std::string_view> args) {
  const std::vector<std::string_view> v(args);
  std::ostringstream out;
  std::ostringstream err;
  auto result =
      servekit::http::parse_server_flags("servekit-server", v, "/default/models", out, err);
  return {std::move(result), out.str(), err.str()};
}

const server_flags& flags_of(const parsed& p) {
  EXPECT_TRUE(std::holds_alternative<server_flags>(p.result)) << p.err;
  return std::get<server_flags>(p.result);
}

int code_of(const parsed& p) {
  EXPECT_TRUE(std::holds_alternative<int>(p.result));
  return std::holds_alternative<int>(p.result) ? std::get<int>(p.result) : -1;
}

TEST(ServerFlags, Defaults) {
  const auto p = parse({});
  const auto& f = flags_of(p);
  EXPECT_EQ(f.model_repository, "/default/models");
  EXPECT_EQ(f.http.port, 8000);
  EXPECT_EQ(f.http.host, "127.0.0.1");
  EXPECT_EQ(f.http.thread_count, 0U);
  EXPECT_EQ(f.http.max_body_bytes, std::size_t{64} << 20);
  EXPECT_TRUE(f.http.strict_readiness);
  EXPECT_EQ(f.http.log_verbose, 0);
  EXPECT_EQ(f.http.exit_timeout, std::chrono::seconds{30});
  EXPECT_EQ(f.rate_limit, servekit::http::rate_limit_mode::off);
  EXPECT_TRUE(f.rate_limiter.resources.empty());
  EXPECT_FALSE(f.cache.has_value());
  const auto env = servekit::http::make_model_environment(f);
  EXPECT_EQ(env.limiter, nullptr);
  EXPECT_EQ(env.cache, nullptr);
  EXPECT_TRUE(p.out.empty());
  EXPECT_TRUE(p.err.empty());
}

TEST(ServerFlags, EveryFlagBothSpellings) {
  const auto a =
      parse({"--model-repository", "/m", "--http-port", "0", "--host", "0.0.0.0", "--log-verbose",
             "1", "--strict-readiness", "false", "--http-max-body-bytes", "1024",
             "--http-thread-count", "3", "--exit-timeout-secs", "5"});
  const auto b = parse({"--model-repository=/m", "--http-port=0", "--host=0.0.0.0",
                        "--log-verbose=1", "--strict-readiness=0", "--http-max-body-bytes=1024",
                        "--http-thread-count=3", "--exit-timeout-secs=5"});
  for (const auto* p : {&a, &b}) {
    const auto& f = flags_of(*p);
    EXPECT_EQ(f.model_repository, "/m");
    EXPECT_EQ(f.http.port, 0);
    EXPECT_EQ(f.http.host, "0.0.0.0");
    EXPECT_EQ(f.http.log_verbose, 1);
    EXPECT_FALSE(f.http.strict_readiness);
    EXPECT_EQ(f.http.max_body_bytes, 1024U);
    EXPECT_EQ(f.http.thread_count, 3U);
    EXPECT_EQ(f.http.exit_timeout, std::chrono::seconds{5});
  }
}

TEST(ServerFlags, TritonAliasesAndLastOneWins) {
  const auto p =
      parse({"--model-store", "/a", "--http-address=::1", "--http-port", "1", "--http-port",
             "65535", "--strict-readiness", "true", "--strict-readiness=1"});
  const auto& f = flags_of(p);
  EXPECT_EQ(f.model_repository, "/a");
  EXPECT_EQ(f.http.host, "::1");
  EXPECT_EQ(f.http.port, 65535);
  EXPECT_TRUE(f.http.strict_readiness);
}

TEST(ServerFlags, HelpPrintsUsageAndExitsZero) {
  for (const auto& p : {parse({"--help"}), parse({"-h"}), parse({"--http-port", "1", "--help"})}) {
    EXPECT_EQ(code_of(p), 0);
    EXPECT_NE(p.out.find("Usage: servekit-server"), std::string::npos);
    for (const char* flag : {"--model-repository", "--http-port", "--host", "--log-verbose",
                             "--strict-readiness", "--http-max-body-bytes", "--http-thread-count",
                             "--exit-timeout-secs", "/default/models"}) {
      EXPECT_NE(p.out.find(flag), std::string::npos) << flag;
    }
    EXPECT_TRUE(p.err.empty());
  }
}

TEST(ServerFlags, DrainGraceAndRoutingHeaders) {
  const auto p = parse({"--drain-grace-secs", "15", "--sequence-id-header", "X-Sequence-Id",
                        "--priority-header=x-priority"});
  const auto& f = flags_of(p);
  EXPECT_EQ(f.http.drain_grace, std::chrono::seconds{15});
  EXPECT_EQ(f.http.routing.sequence_id, "X-Sequence-Id");
  EXPECT_EQ(f.http.routing.priority, "x-priority");
  const auto d = parse({});
  EXPECT_EQ(flags_of(d).http.drain_grace, std::chrono::seconds{0}); // Triton's: stop at once
  EXPECT_FALSE(flags_of(d).http.routing.any());
}

TEST(ServerFlags, ErrorsNameTheFlagAndExitTwo) {
  struct bad_case {
    std::vector<std::string_view> args;
    std::string expect;
  };
  const std::vector<bad_case> cases = {
      {{"--http-port", "70000"}, "--http-port: expected a port number 0..65535, got '70000'"},
      {{"--http-port=-1"}, "--http-port: expected a port number"},
      {{"--http-port", "80x"}, "--http-port: expected a port number"},
      {{"--http-port="}, "--http-port: expected a port number 0..65535, got ''"},
      {{"--http-port"}, "--http-port: needs a value"},
      {{"--strict-readiness", "yes"},
       "--strict-readiness: expected true, false, 1 or 0, got 'yes'"},
      {{"--log-verbose", "-2"}, "--log-verbose: expected a level"},
      {{"--http-max-body-bytes", "0"}, "--http-max-body-bytes: expected a positive number"},
      {{"--http-thread-count", "many"}, "--http-thread-count: expected a thread count"},
      {{"--model-repository="}, "--model-repository: expected a directory"},
      {{"--no-such-flag", "1"}, "--no-such-flag: unknown flag"},
      {{"--no-such-flag=1"}, "--no-such-flag: unknown flag"},
      {{"models"}, "unexpected argument 'models'"},
      {{"--rate-limit", "on"}, "--rate-limit: expected off or execution_count, got 'on'"},
      {{"--rate-limit=execution_count", "--rate-limit-resource", "R1"},
       "--rate-limit-resource: expected <name>:<count>[:<device>], got 'R1'"},
      {{"--rate-limit=execution_count", "--rate-limit-resource", "R1:x"},
       "--rate-limit-resource: expected <name>:<count>[:<device>], got 'R1:x'"},
      {{"--rate-limit-resource", "R1:2"},
       "--rate-limit-resource: has no effect without --rate-limit execution_count"},
      {{"--cache-config", "redis,host=a"}, "--cache-config: "},
      {{"--cache-config", "local"}, "--cache-config: "},
      {{"--drain-grace-secs", "-1"}, "--drain-grace-secs: expected a number of seconds 0..3600"},
      {{"--drain-grace-secs", "7200"}, "--drain-grace-secs: expected a number of seconds"},
      {{"--sequence-id-header", "x seq"}, "--sequence-id-header: expected a header name"},
      {{"--sequence-id-header", "grpc-timeout"}, "--sequence-id-header: expected a header name"},
      {{"--priority-header="}, "--priority-header: expected a header name"},
      {{"--cache-config", "local,size=x"}, "--cache-config: "},
      {{"--cache-config=local,size=1", "--cache-config=local,size=2"},
       "--cache-config: given twice"},
      {{"-p", "8000"}, "unexpected argument '-p'"},
  };
  for (const auto& c : cases) {
    std::ostringstream out;
    std::ostringstream err;
    const auto r = servekit::http::parse_server_flags("servekit-server", c.args, "/d", out, err);
    ASSERT_TRUE(std::holds_alternative<int>(r)) << c.expect;
    EXPECT_EQ(std::get<int>(r), 2) << c.expect;
    EXPECT_NE(err.str().find(c.expect), std::string::npos) << err.str();
    EXPECT_NE(err.str().find("servekit-server --help"), std::string::npos) << err.str();
    EXPECT_TRUE(out.str().empty());
  }
}

TEST(ServerFlags, RateLimitAndCacheBuildTheEnvironment) {
  const auto p = parse({"--rate-limit", "execution_count", "--rate-limit-resource", "R1:4",
                        "--rate-limit-resource=R2:2:1", "--cache-config=local,size=1048576"});
  const auto& f = flags_of(p);
  EXPECT_EQ(f.rate_limit, servekit::http::rate_limit_mode::execution_count);
  ASSERT_EQ(f.rate_limiter.resources.size(), 2U);
  EXPECT_EQ(f.rate_limiter.resources[0], (servekit::rate_limit_resource_count{"R1", 4, {}}));
  EXPECT_EQ(f.rate_limiter.resources[1], (servekit::rate_limit_resource_count{"R2", 2, 1}));
  ASSERT_TRUE(f.cache.has_value());
  EXPECT_EQ(f.cache->size_bytes, 1048576U);
  const auto env = servekit::http::make_model_environment(f);
  EXPECT_NE(env.limiter, nullptr);
  EXPECT_NE(env.cache, nullptr);

  const auto off = parse({"--rate-limit=off", "--cache-config", "local,size=64"});
  const auto env_off = servekit::http::make_model_environment(flags_of(off));
  EXPECT_EQ(env_off.limiter, nullptr);
  EXPECT_NE(env_off.cache, nullptr);
}

TEST(ServerFlags, UsageListsTheEnvironmentFlags) {
  const auto p = parse({"--help"});
  for (const char* flag : {"--rate-limit ", "--rate-limit-resource", "execution_count",
                           "--cache-config", "local,size="}) {
    EXPECT_NE(p.out.find(flag), std::string::npos) << flag;
  }
}

TEST(ServerFlags, ArgvOverloadSkipsTheProgramName) {
  std::string prog = "/usr/bin/servekit-server";
  std::string a1 = "--http-port=9";
  std::string a2 = "--log-verbose";
  std::string a3 = "2";
  char* argv[] = {prog.data(), a1.data(), a2.data(), a3.data(), nullptr};
  const auto r = servekit::http::parse_server_flags(4, argv, "/repo");
  ASSERT_TRUE(std::holds_alternative<server_flags>(r));
  EXPECT_EQ(std::get<server_flags>(r).http.port, 9);
  EXPECT_EQ(std::get<server_flags>(r).http.log_verbose, 2);
  EXPECT_EQ(std::get<server_flags>(r).model_repository, "/repo");
}

// Issue 16: request_limits, one flag each, with their defaults in the usage text.
TEST(ServerFlags, RequestLimits) {
  const auto defaults = flags_of(parse({})).http.limits;
  EXPECT_EQ(defaults.max_json_depth, 512U);
  EXPECT_EQ(defaults.max_inputs, 1024U);
  EXPECT_EQ(defaults.max_outputs, 1024U);
  EXPECT_EQ(defaults.max_tensor_elements, std::uint64_t{1} << 28U);

  const auto p = parse({"--http-max-json-depth", "64", "--http-max-inputs=8", "--http-max-outputs",
                        "9", "--http-max-tensor-elements=1000"});
  const auto& l = flags_of(p).http.limits;
  EXPECT_EQ(l.max_json_depth, 64U);
  EXPECT_EQ(l.max_inputs, 8U);
  EXPECT_EQ(l.max_outputs, 9U);
  EXPECT_EQ(l.max_tensor_elements, 1000U);

  const struct {
    std::vector<std::string_view> args;
    std::string expect;
  } bad[] = {
      {{"--http-max-json-depth", "513"},
       "--http-max-json-depth: expected a depth 1..512, got '513'"},
      {{"--http-max-json-depth=0"}, "--http-max-json-depth: expected a depth 1..512"},
      {{"--http-max-inputs", "0"}, "--http-max-inputs: expected a positive count, got '0'"},
      {{"--http-max-outputs=x"}, "--http-max-outputs: expected a positive count"},
      {{"--http-max-tensor-elements", "-1"}, "--http-max-tensor-elements: expected a positive"},
  };
  for (const auto& c : bad) {
    std::ostringstream out;
    std::ostringstream err;
    const auto r =
        servekit::http::parse_server_flags("servekit-server", c.args, "/default/models", out, err);
    ASSERT_TRUE(std::holds_alternative<int>(r)) << c.expect;
    EXPECT_EQ(std::get<int>(r), 2);
    EXPECT_NE(err.str().find(c.expect), std::string::npos) << err.str();
  }

  const auto help = parse({"--help"});
  for (const auto* part :
       {"--http-max-json-depth N", "(default: 512)", "--http-max-inputs N", "(default: 1024)",
        "--http-max-outputs N", "--http-max-tensor-elements N", "(default: 268435456)"}) {
    EXPECT_NE(help.out.find(part), std::string::npos) << part;
  }
}

} // namespace

// -- model control and restricted APIs (http/model_control.hpp) -----------------------------

namespace {

TEST(ServerFlags, ModelControlFlags) {
  using servekit::http::model_control_mode;
  using servekit::http::restricted_api;
  const auto d = parse({});
  EXPECT_EQ(flags_of(d).http.model_control.mode, model_control_mode::none); // Triton's default
  EXPECT_EQ(flags_of(d).http.model_control.poll_interval, std::chrono::seconds{15});
  EXPECT_TRUE(flags_of(d).http.model_control.restricted.empty());

  const auto p =
      parse({"--model-control-mode=explicit", "--load-model", "add_sub", "--load-model=pipeline",
             "--http-restricted-api", "model-repository,statistics:admin-key=s3cret"});
  const auto& f = flags_of(p).http.model_control;
  EXPECT_EQ(f.mode, model_control_mode::explicit_);
  EXPECT_EQ(f.load_models, (std::vector<std::string>{"add_sub", "pipeline"}));
  ASSERT_NE(f.restricted.find(restricted_api::statistics), nullptr);
  EXPECT_EQ(f.restricted.find(restricted_api::statistics)->header, "admin-key");

  const auto poll = parse({"--model-control-mode", "poll", "--repository-poll-secs", "2"});
  EXPECT_EQ(flags_of(poll).http.model_control.poll_interval, std::chrono::seconds{2});

  const auto needs_explicit = parse({"--load-model", "add_sub"});
  EXPECT_EQ(code_of(needs_explicit), 2);
  EXPECT_NE(needs_explicit.err.find("requires setting '--model-control-mode=explicit'"),
            std::string::npos)
      << needs_explicit.err;
  const auto bad_api = parse({"--http-restricted-api", "repository:k=v"});
  EXPECT_EQ(code_of(bad_api), 2);
  EXPECT_NE(bad_api.err.find("unknown restricted api 'repository'"), std::string::npos);
  EXPECT_EQ(code_of(parse({"--model-control-mode", "auto"})), 2);
  EXPECT_EQ(code_of(parse({"--repository-poll-secs", "-1"})), 2);
  // Triton's explicit-mode command lines: the poll interval is accepted and has no effect.
  const auto triton_line =
      parse({"--model-control-mode=EXPLICIT", "--repository-poll-secs=0", "--load-model=*"});
  EXPECT_EQ(flags_of(triton_line).http.model_control.poll_interval, std::chrono::seconds{0});
  const auto help = parse({"--help"});
  for (const auto* flag : {"--model-control-mode", "--load-model", "--repository-poll-secs",
                           "--http-restricted-api"}) {
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
  }
}

// ---- connection timeouts and limits ----------------------------------------------------------

TEST(ServerFlags, TransportDefaultsAreNginxs) {
  const auto p = parse({}); // flags_of returns a reference into it: keep it alive
  const auto& f = flags_of(p);
  EXPECT_EQ(f.http.header_timeout, std::chrono::seconds{60});
  EXPECT_EQ(f.http.body_timeout, std::chrono::seconds{60});
  EXPECT_EQ(f.http.body_total_timeout, std::chrono::seconds{600});
  EXPECT_EQ(f.http.keepalive_timeout, std::chrono::seconds{75});
  EXPECT_EQ(f.http.write_timeout, std::chrono::seconds{60});
  EXPECT_EQ(f.http.max_connections, 0U);
  EXPECT_EQ(f.http.stream_buffer_bytes, std::size_t{1} << 20);
}

TEST(ServerFlags, TransportFlagsTakeFractionalSeconds) {
  const auto p = parse({"--http-header-timeout-secs", "0.25", "--http-body-timeout-secs=2",
                        "--http-body-total-timeout-secs", "0", "--http-keepalive-timeout-secs",
                        "1.5", "--http-write-timeout-secs=3", "--http-max-connections", "100",
                        "--http-stream-buffer-bytes=4096"});
  const auto& f = flags_of(p);
  EXPECT_EQ(f.http.header_timeout, std::chrono::milliseconds{250});
  EXPECT_EQ(f.http.body_timeout, std::chrono::seconds{2});
  EXPECT_EQ(f.http.body_total_timeout, std::chrono::milliseconds{0});
  EXPECT_EQ(f.http.keepalive_timeout, std::chrono::milliseconds{1500});
  EXPECT_EQ(f.http.write_timeout, std::chrono::seconds{3});
  EXPECT_EQ(f.http.max_connections, 100U);
  EXPECT_EQ(f.http.stream_buffer_bytes, 4096U);
  const auto help = parse({"--help"});
  for (const char* flag :
       {"--http-header-timeout-secs", "--http-body-timeout-secs", "--http-body-total-timeout-secs",
        "--http-keepalive-timeout-secs", "--http-write-timeout-secs", "--http-max-connections"}) {
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
  }
}

TEST(ServerFlags, TransportFlagErrors) {
  const auto check = [](const parsed& p, std::string_view expect) {
    EXPECT_EQ(code_of(p), 2);
    EXPECT_NE(p.err.find(expect), std::string::npos) << p.err;
  };
  check(parse({"--http-header-timeout-secs", "-1"}),
        "--http-header-timeout-secs: expected a number of seconds (0 turns it off), got '-1'");
  check(parse({"--http-write-timeout-secs=x"}), "--http-write-timeout-secs: expected a number");
  check(parse({"--http-keepalive-timeout-secs", "1e12"}),
        "--http-keepalive-timeout-secs: expected a number");
  check(parse({"--http-max-connections", "-3"}), "--http-max-connections: expected a number");
  check(parse({"--http-stream-buffer-bytes", "0"}),
        "--http-stream-buffer-bytes: expected a positive number of bytes, got '0'");
}

// ---- the gRPC endpoint flags (http/grpc_flags.hpp) ----------------------------------------

TEST(ServerFlags, GrpcDefaultsAreTritons) {
  const auto p = parse({});
  const auto& g = flags_of(p).grpc;
  EXPECT_TRUE(g.allow_grpc);
  EXPECT_TRUE(g.allow_http);
  EXPECT_EQ(g.port, 8001);
  EXPECT_FALSE(g.host.has_value());
  EXPECT_EQ(g.thread_count, 0U);
}

TEST(ServerFlags, GrpcFlagsBothSpellings) {
  const auto p = parse({"--grpc-port", "0", "--grpc-address=::1", "--grpc-infer-thread-count", "3",
                        "--allow-http=false", "--allow-grpc", "1"});
  const auto& g = flags_of(p).grpc;
  EXPECT_EQ(g.port, 0);
  EXPECT_EQ(g.host, "::1");
  EXPECT_EQ(g.thread_count, 3U);
  EXPECT_FALSE(g.allow_http);
  EXPECT_TRUE(g.allow_grpc);
}

TEST(ServerFlags, GrpcFlagErrors) {
  const auto error = [](std::initializer_list<std::string_view> args) {
    const auto p = parse(args);
    EXPECT_EQ(code_of(p), 2);
    return p.err;
  };
  EXPECT_NE(error({"--grpc-port", "65536"})
                .find("--grpc-port: expected a port number 0..65535, "
                      "got '65536'"),
            std::string::npos);
  EXPECT_NE(error({"--grpc-infer-thread-count=x"})
                .find("--grpc-infer-thread-count: expected a "
                      "thread count"),
            std::string::npos);
  EXPECT_NE(error({"--allow-grpc", "yes"}).find("--allow-grpc: expected true, false, 1 or 0"),
            std::string::npos);
  EXPECT_NE(error({"--grpc-address="}).find("--grpc-address: expected an address"),
            std::string::npos);
  EXPECT_NE(error({"--allow-http", "0", "--allow-grpc", "false"}).find("leaves nothing to serve"),
            std::string::npos);
}

TEST(ServerFlags, UsageListsTheGrpcFlags) {
  const auto p = parse({"--help"});
  for (const char* flag : {"--allow-grpc", "--allow-http", "--grpc-port", "--grpc-address",
                           "--grpc-infer-thread-count"}) {
    EXPECT_NE(p.out.find(flag), std::string::npos) << flag;
  }
}

// Triton's auto-complete switch: `false` (Triton's default, common in Triton's command lines)
// runs unchanged; turning auto-complete off is refused by name, not ignored.
TEST(ServerFlags, StrictModelConfigFalseIsAcceptedAndTurningAutoCompleteOffIsRefused) {
  EXPECT_EQ(flags_of(parse({"--strict-model-config=false", "--http-port", "0"})).http.port, 0);
  EXPECT_TRUE(std::holds_alternative<server_flags>(parse({"--strict-model-config", "0"}).result));
  for (const auto& p :
       {parse({"--strict-model-config=true"}), parse({"--disable-auto-complete-config"})}) {
    EXPECT_EQ(code_of(p), 2);
    EXPECT_NE(p.err.find("always completes a config from its model file"), std::string::npos)
        << p.err;
  }
  EXPECT_EQ(code_of(parse({"--strict-model-config", "maybe"})), 2);
}

} // namespace
