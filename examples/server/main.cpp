// servekit-server: serves a model repository over KServe v2 HTTP/REST and gRPC (in builds with
// servekit::grpc), Triton style. Copy it for your own server: put your backends in
// bundled_backends.hpp (or your own backend_list).
//
//   servekit-server [--model-repository DIR] [--http-port N] [--host ADDR]
//                   [--grpc-port N] [--grpc-address ADDR] [--grpc-infer-thread-count N]
//                   [--allow-http BOOL] [--allow-grpc BOOL]
//                   [--rate-limit off|execution_count] [--rate-limit-resource NAME:COUNT[:DEV]]
//                   [--cache-config local,size=BYTES]
//                   [--model-control-mode none|explicit|poll] [--load-model NAME]...
//                   [--repository-poll-secs N] [--http-restricted-api API[,API]:HEADER=VALUE]
//                   [--drain-grace-secs N] [--sequence-id-header NAME] [--priority-header NAME]
//                   [--help]
#include "bundled_backends.hpp"

#include <servekit/http.hpp>
#include <servekit/repository/model_repository.hpp>
#include <servekit/repository/repository_poller.hpp>
#if defined(SERVEKIT_HAS_GRPC)
#include <servekit/grpc.hpp>
#endif

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <variant>

#include <csignal>
#include <pthread.h>

namespace {

/// "backend add_sub, dynamic_batching": what a loaded model runs as.
std::string describe(const servekit::model_options& c) {
  const std::string what = c.platform.empty() ? "backend " + c.backend : "platform " + c.platform;
  if (c.sequence_batching) {
    return what + ", sequence_batching " +
           (c.sequence_batching->strategy == servekit::sequence_strategy::oldest ? "oldest"
                                                                                 : "direct");
  }
  return what + (c.dynamic_batching ? ", dynamic_batching" : "");
}

#if defined(SERVEKIT_HAS_GRPC)
/// The gRPC front end's options from the flags: the HTTP address unless --grpc-address, and
/// HTTP's readiness, exit timeout, drain state, routing headers, model control and request
/// limits.
servekit::grpc::server_options grpc_options(const servekit::http::server_flags& flags) {
  servekit::grpc::server_options o;
  o.host = flags.grpc.host.value_or(flags.http.host);
  o.port = flags.grpc.port;
  o.thread_count = flags.grpc.thread_count;
  o.strict_readiness = flags.http.strict_readiness;
  o.exit_timeout = flags.http.exit_timeout;
  o.drain = flags.http.drain;
  o.routing = flags.http.routing;
  o.model_control = flags.http.model_control;
  o.limits = flags.http.limits;
  return o;
}
#endif

} // namespace

int main(int argc, char** argv) try {
  auto parsed = servekit::http::parse_server_flags(argc, argv, SERVEKIT_SERVER_MODEL_REPOSITORY);
  if (const int* exit_code = std::get_if<int>(&parsed)) {
    return *exit_code; // --help, or a bad flag (already printed)
  }
  auto& flags = std::get<servekit::http::server_flags>(parsed);
  // One drain state for both front ends: SIGTERM (or POST /v2/admin/drain) turns HTTP's and
  // gRPC's readiness false together.
  flags.http.drain = std::make_shared<servekit::http::drain_state>();
  // Without HTTP (whose server handles SIGINT/SIGTERM), the signals are blocked before any
  // thread starts (model instances, gRPC's own), so that they reach only the thread that waits
  // for them below instead of ending the process.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  if (!flags.grpc.allow_http) {
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  }

  if (!std::filesystem::is_directory(flags.model_repository)) {
    fmt::print(stderr, "servekit-server: no model repository at '{}'\n",
               flags.model_repository.string());
    return 1;
  }
  // The rate limiter and response cache the flags ask for, shared by every model.
  servekit::model_repository models{flags.model_repository, servekit_server::bundled_backends{},
                                    servekit::test_hooks{},
                                    servekit::http::make_model_environment(flags)};
  // What is loaded at start follows the model control mode, as in Triton: every model (none,
  // poll, explicit with --load-model=*), or only the --load-model names (explicit).
  const auto& control = flags.http.model_control;
  const bool load_all = control.mode != servekit::http::model_control_mode::explicit_ ||
                        (control.load_models.size() == 1 && control.load_models[0] == "*");
  if (load_all) {
    (void)models.load_all();
  } else {
    for (const auto& name : control.load_models) {
      if (const auto s = models.load(name); !s.ok()) {
        fmt::print(stderr, "servekit-server: --load-model {}: {}\n", name, s.message());
      }
    }
  }
  for (const auto& m : models.index()) {
    const auto loaded = models.find(m.name, m.version);
    const std::string detail = loaded ? " (" + describe(loaded->options()) + ")" : ": " + m.reason;
    // Version 0: the config could not be read, so the version is unknown.
    const std::string version = m.version > 0 ? fmt::format(" version {}", m.version) : "";
    fmt::print("model '{}'{}: {}{}\n", m.name, version, to_string(m.state), detail);
  }
  fmt::print("model control mode: {}\n", to_string(control.mode));

  // Poll mode: new folders load, changed ones reload without downtime, removed ones unload.
  std::optional<servekit::repository_poller> poller;
  if (control.mode == servekit::http::model_control_mode::poll &&
      control.poll_interval.count() > 0) {
    poller.emplace(models, control.poll_interval,
                   [](const std::string& name, const char* action, const servekit::status& s) {
                     fmt::print("poll: {} '{}': {}\n", action, name,
                                s.ok() ? std::string{"done"} : s.message());
                     std::fflush(stdout);
                   });
    poller->start();
  }

#if defined(SERVEKIT_HAS_GRPC)
  std::unique_ptr<servekit::grpc::server> grpc_server;
  std::thread grpc_thread;
  if (flags.grpc.allow_grpc) {
    grpc_server = std::make_unique<servekit::grpc::server>(models, grpc_options(flags));
    fmt::print("GRPC listening on {}:{}\n", grpc_server->host(), grpc_server->port());
    std::fflush(stdout);
  }
#else
  if (!flags.grpc.allow_http) {
    fmt::print(stderr, "servekit-server: --allow-http false, and this build has no gRPC "
                       "(SERVEKIT_GRPC): nothing to serve\n");
    return 1;
  }
#endif
  if (flags.grpc.allow_http) {
    servekit::http::server server{models, flags.http};
    server.stop_on_signals(); // SIGINT/SIGTERM: stop accepting, answer what is in flight, return
#if defined(SERVEKIT_HAS_GRPC)
    if (grpc_server) {
      grpc_thread = std::thread{[&] { grpc_server->run(); }};
    }
#endif
    fmt::print("HTTP listening on {}:{}\n", server.host(), server.port());
    std::fflush(stdout); // scripts wait for this line to know the port
    server.run();        // until SIGINT/SIGTERM; in-flight requests are answered first
  }
#if defined(SERVEKIT_HAS_GRPC)
  else {
    // gRPC alone: SIGINT/SIGTERM (blocked in every thread, see above) are taken by one thread,
    // which drains (readiness false for --drain-grace-secs) and stops the server.
    std::thread waiter{[&] {
      int signal = 0;
      sigwait(&stop_signals, &signal);
      flags.http.drain->begin(signal == SIGINT ? "SIGINT" : "SIGTERM");
      std::this_thread::sleep_for(flags.http.drain_grace);
      grpc_server->stop();
    }};
    waiter.detach(); // blocked in sigwait until a signal; the process ends without it
    grpc_server->run();
  }
  if (grpc_server) {
    grpc_server->stop();
    if (grpc_thread.joinable()) {
      grpc_thread.join();
    }
  }
#endif
  if (poller) {
    poller->stop(); // before the repository it changes is destroyed
  }
  // Whatever is still owed is answered "server is shutting down"; a backend stuck in execute
  // must not keep the process alive (destroying `models` would wait for it).
  if (!servekit::shutdown_models(models, servekit::shutdown_mode::abort, std::chrono::seconds{1})) {
    fmt::print(stderr, "servekit-server: a backend is still executing; exiting without it\n");
    std::fflush(nullptr);
    std::quick_exit(0);
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "servekit-server: {}\n", e.what());
  return 1;
}
