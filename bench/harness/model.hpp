#pragma once
/// \file
/// What the benchmarks of servekit's models share: the model options they measure under,
/// requests that carry a seed, checking that a response carries it back, and a client's
/// synchronous call to the asynchronous submit().

#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/response_sink.hpp>
#include <servekit/core/status.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/runtime/model_options.hpp>

#include <array>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace servekit_bench {

/// A model batching up to `max_batch` with the dynamic batcher, running whatever is queued as
/// soon as an instance is free (max_queue_delay 0).
inline servekit::model_options batching_options(std::string name, std::int32_t max_batch) {
  servekit::model_options options;
  options.name = std::move(name);
  options.max_batch_size = max_batch;
  servekit::dynamic_batching_options batching;
  batching.max_queue_delay_microseconds = 0;
  options.dynamic_batching = batching;
  return options;
}

/// The seed of a client's n-th request (exact as a float).
inline float seed_of(std::uint64_t n) { return static_cast<float>(n & 0xffffU); }

/// A request as a server builds one per call: one FP32 [1, Elements] tensor named `name`, filled
/// with seed, seed + 1, ...
template <std::size_t Elements>
servekit::request seeded_request(const char* name, float seed) {
  std::array<float, Elements> values{};
  for (std::size_t k = 0; k < values.size(); ++k) {
    values[k] = seed + static_cast<float>(k);
  }
  servekit::request r;
  r.inputs.push_back(servekit::make_tensor(name, servekit::data_type::fp32,
                                           {1, static_cast<std::int64_t>(Elements)},
                                           std::span<const float>{values}));
  return r;
}

/// Whether `r` succeeded and carries `output` starting with `seed`.
inline bool answers(const servekit::response& r, std::string_view output, float seed) {
  const servekit::tensor* o = r.find_output(output);
  return r.ok() && o != nullptr && o->values<float>()[0] == seed;
}

/// The client's side of a synchronous call to an asynchronous API: it sleeps on a
/// std::condition_variable until the sink hands it the response (so the figures compare with
/// the ping-pong).
struct one_response {
  std::mutex m;
  std::condition_variable cv;
  bool done = false; // guarded by m
  servekit::response value;

  /// Before each submit.
  void arm() {
    const std::lock_guard lock{m};
    done = false;
  }

  servekit::response_sink sink() {
    return [self = this](servekit::response&& r) {
      {
        const std::lock_guard lock{self->m};
        self->value = std::move(r);
        self->done = true;
      }
      self->cv.notify_one();
    };
  }

  /// Waits for the response; a refused submit (`accepted` failed) is the answer itself.
  servekit::response wait(const servekit::status& accepted) {
    if (!accepted.ok()) {
      return servekit::response::failure(servekit::status{accepted});
    }
    std::unique_lock lock{m};
    cv.wait(lock, [&] { return done; });
    return std::move(value);
  }
};

/// Submits `r` through `submit(request&&, response_sink) -> status` and waits for the response.
template <class Submit>
servekit::response call_with(Submit&& submit, one_response& flag, servekit::request&& r) {
  flag.arm();
  const servekit::status accepted = submit(std::move(r), flag.sink());
  return flag.wait(accepted);
}

/// `target`'s submit (a model's, an ensemble's or a baseline's) as a callable.
template <class Target>
auto submitter(Target& target) {
  return [&target](servekit::request&& r, servekit::response_sink&& sink) {
    return target.submit(std::move(r), std::move(sink));
  };
}

/// Submits `r` to `target` and waits for its response.
template <class Target>
servekit::response call(Target& target, one_response& flag, servekit::request&& r) {
  return call_with(submitter(target), flag, std::move(r));
}

} // namespace servekit_bench
