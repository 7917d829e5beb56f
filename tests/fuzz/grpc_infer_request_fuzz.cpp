// libFuzzer target for the gRPC front end's infer path: every input is the bytes of one
// inference.ModelInferRequest, the message a client's ModelInfer call carries (the gRPC framing
// around it is grpc++'s, not servekit's). The target does what src/grpc/server.cpp does with it,
// against live models in this process (the bundled add_sub, accumulate, repeat_int32 and a BYTES
// identity model, tests/fuzz/fuzz_models.hpp):
//
//   parse -> find the model (name, version) -> decode_infer_request, raw_input_contents viewed in
//   place -> check the requested outputs -> submit -> wait for the response -> encode it.
//
// A finding is a crash or sanitizer report anywhere on that path (the decoder, the batchers, the
// backends, the encoder) or a broken promise:
// - a refusal without a message;
// - an accepted request that gets no final response within a few seconds, or more than one;
// - a view of the request's bytes still held after the request is done (the server would then
//   free a message a model still reads, or never free it);
// - an encoded response that does not parse back, or is missing an output.
// Inputs whose request id starts with "cancel" are cancelled right after submit, as a client that
// goes away: they too must get exactly one final response.
//
// Seeds (corpus/grpc_infer_request/) are binary messages made by make_grpc_infer_seeds.sh from
// the text-format requests in it.

#include <servekit/core/cancellation.hpp>
#include <servekit/http/endpoints.hpp>
#include <servekit/repository/model_repository.hpp>

#include "fuzz_models.hpp"

#include "grpc/infer_codec.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

namespace codec = servekit::grpc::detail;

/// How long an accepted request may take to be answered. The models answer in microseconds;
/// repeat_int32 (DELAY, WAIT) is decoupled and refused before submit, as ModelInfer refuses it.
constexpr std::chrono::seconds answer_deadline{5};

/// The models, loaded once for the whole run and never destroyed (libFuzzer ends the process
/// with exit(); destroying models from a static destructor would race their threads).
struct live_models {
  std::filesystem::path root = servekit_fuzz::make_repository("grpc");
  servekit::model_repository models{root, servekit_fuzz::backends{}};
  live_models() { (void)models.load_all(); }
};

live_models& the_models() {
  static auto* m = new live_models; // NOLINT(cppcoreguidelines-owning-memory): see live_models
  return *m;
}

/// The views decode_infer_request takes of the message's raw_input_contents: counted, as the
/// server's call object counts them before it frees the message.
struct view_count {
  std::atomic<int> held{0};
  static void acquire(void* self) noexcept {
    static_cast<view_count*>(self)->held.fetch_add(1, std::memory_order_relaxed);
  }
  static void release(void* self, std::byte*, std::size_t) noexcept {
    static_cast<view_count*>(self)->held.fetch_sub(1, std::memory_order_acq_rel);
  }
};

/// What the model answered: every response counted, the final one kept.
struct answers {
  std::mutex mutex;
  std::condition_variable changed;
  int finals = 0;
  int partials = 0;
  std::optional<servekit::response> final_response;
};

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "grpc_infer_request_fuzz: %s\n", what);
  __builtin_trap();
}

void check_refusal(const servekit::status& s) {
  if (s.ok() || s.message().empty()) {
    finding("a refusal without a message");
  }
}

/// The response as ModelInfer sends it: encoded, serialized, and parsed back by a client.
void check_encoding(const servekit::response& r, const servekit::loaded_model& model,
                    const std::vector<std::string>& requested) {
  inference::ModelInferResponse out;
  const auto& config = model.options();
  const servekit::status s =
      codec::encode_infer_response(r, config.name, config.version, requested, out);
  if (!s.ok()) {
    check_refusal(s);
    return;
  }
  inference::ModelInferResponse parsed;
  if (!parsed.ParseFromString(out.SerializeAsString())) {
    finding("the encoded response does not parse back");
  }
  const std::size_t expected = requested.empty() ? r.outputs.size() : requested.size();
  if (static_cast<std::size_t>(parsed.outputs_size()) != expected ||
      parsed.raw_output_contents_size() != parsed.outputs_size()) {
    finding("the encoded response lacks an output or its bytes");
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  live_models& live = the_models();
  inference::ModelInferRequest in;
  if (!in.ParseFromArray(data, static_cast<int>(size))) {
    return 0; // grpc++ would answer INTERNAL before servekit sees it
  }

  std::int64_t version = -1;
  if (const servekit::status s = codec::parse_model_version(in.model_version(), version); !s.ok()) {
    check_refusal(s);
    return 0;
  }
  const auto model = live.models.find(in.model_name(), version);
  if (!model) {
    const auto missing =
        servekit::http::missing_model_status(live.models, in.model_name(), version);
    if (!missing) {
      finding("a model that find() does not return has no error to answer");
    }
    check_refusal(*missing);
    return 0;
  }
  const servekit::model_ref ref = model->model();
  if (ref.decoupled()) {
    return 0; // ModelInfer refuses decoupled models by name; ModelStreamInfer serves them
  }

  view_count views;
  servekit::request r;
  const servekit::status decoded = codec::decode_infer_request(
      in, r, servekit::http::request_limits{},
      codec::raw_view_owner{&view_count::acquire, &view_count::release, &views});
  if (decoded.ok()) {
    if (const servekit::status s = codec::check_requested_outputs(
            r.requested_outputs, ref.outputs(), model->options().name);
        !s.ok()) {
      check_refusal(s);
      r = servekit::request{}; // releases the views, as the server's refusal does
    } else {
      const std::vector<std::string> requested = r.requested_outputs;
      const bool cancel = in.id().starts_with("cancel");
      servekit::cancellation_source source;
      r.cancellation = source.token();
      answers got;
      const servekit::status submitted =
          ref.submit(std::move(r), [&got](servekit::response&& response) {
            const std::lock_guard lock{got.mutex};
            if (!response.final) {
              ++got.partials;
              return;
            }
            ++got.finals;
            got.final_response = std::move(response);
            got.changed.notify_all();
          });
      // A refused request is not consumed (submit takes it by reference); the server's is a
      // local of its handler, gone when the refusal is answered.
      r = servekit::request{};
      if (!submitted.ok()) {
        check_refusal(submitted);
      } else {
        if (cancel) {
          ref.cancel(source);
        }
        std::unique_lock lock{got.mutex};
        if (!got.changed.wait_for(lock, answer_deadline, [&] { return got.finals > 0; })) {
          finding("an accepted request got no final response");
        }
        // A second final response would come from the same batch; give it the time to.
        lock.unlock();
        std::this_thread::yield();
        lock.lock();
        if (got.finals != 1) {
          finding("an accepted request got more than one final response");
        }
        if (got.final_response->ok()) {
          check_encoding(*got.final_response, *model, requested);
        } else {
          check_refusal(got.final_response->status);
        }
      }
    }
  } else {
    check_refusal(decoded);
    r = servekit::request{};
  }

  // The message dies here: no view of its bytes may outlive the request.
  const auto until = std::chrono::steady_clock::now() + answer_deadline;
  while (views.held.load(std::memory_order_acquire) != 0) {
    if (std::chrono::steady_clock::now() > until) {
      finding("a view of the request's raw_input_contents is still held after the request");
    }
    std::this_thread::yield();
  }
  return 0;
}
