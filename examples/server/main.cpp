// servekit-server: serves a model repository over KServe v2 HTTP/REST, Triton style. Copy it for
// your own server: put your backends in bundled_backends.hpp (or your own backend_list).
//
//   servekit-server [--model-repository DIR] [--http-port N] [--host ADDR]
//                   [--rate-limit off|execution_count] [--rate-limit-resource NAME:COUNT[:DEV]]
//                   [--cache-config local,size=BYTES]
//                   [--model-control-mode none|explicit|poll] [--load-model NAME]...
//                   [--repository-poll-secs N] [--http-restricted-api API[,API]:HEADER=VALUE]
//                   [--help]
#include "bundled_backends.hpp"

#include <servekit/http.hpp>
#include <servekit/repository/model_repository.hpp>
#include <servekit/repository/repository_poller.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <variant>

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

} // namespace

int main(int argc, char** argv) try {
  auto parsed = servekit::http::parse_server_flags(argc, argv, SERVEKIT_SERVER_MODEL_REPOSITORY);
  if (const int* exit_code = std::get_if<int>(&parsed)) {
    return *exit_code; // --help, or a bad flag (already printed)
  }
  const auto& flags = std::get<servekit::http::server_flags>(parsed);

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

  servekit::http::server server{models, flags.http};
  server.stop_on_signals(); // SIGINT/SIGTERM: stop accepting, answer what is in flight, return
  fmt::print("HTTP listening on {}:{}\n", server.host(), server.port());
  std::fflush(stdout); // scripts wait for this line to know the port
  server.run();        // until SIGINT/SIGTERM; in-flight requests are answered first
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
