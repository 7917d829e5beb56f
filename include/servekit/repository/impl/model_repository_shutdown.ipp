#pragma once
/// \file
/// Definition of servekit::shutdown_models (repository/model_repository.hpp). Compiled once into
/// servekit::server, or included by its header with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/repository/model_repository.hpp>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace servekit {

SERVEKIT_DECL bool shutdown_models(const model_repository& models, shutdown_mode mode,
                                   std::chrono::milliseconds wait) {
  // Shared with the helpers, which may outlive this call (a backend that never returns).
  struct progress {
    std::mutex mutex;
    std::condition_variable done;
    std::size_t running = 0;
  };
  const auto state = std::make_shared<progress>();
  const auto ready = models.ready_models();
  std::vector<std::thread> helpers;
  helpers.reserve(ready.size());
  for (const auto& m : ready) {
    {
      const std::lock_guard lock{state->mutex};
      ++state->running;
    }
    helpers.emplace_back([state, m, mode] {
      // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): shutdown is thread-safe
      const_cast<any_model&>(m->servable()).shutdown(mode);
      const std::lock_guard lock{state->mutex};
      --state->running;
      state->done.notify_all();
    });
  }
  bool finished = false;
  {
    std::unique_lock lock{state->mutex};
    finished = state->done.wait_for(lock, wait, [&] { return state->running == 0; });
  }
  for (auto& helper : helpers) {
    if (finished) {
      helper.join();
    } else {
      helper.detach(); // its backend never returned: the process is about to end
    }
  }
  return finished;
}

} // namespace servekit
