#pragma once
/// \file
/// What the LibTorch tests share: Triton-layout repositories of the TorchScript models
/// make_models.cpp writes at build time, the `pytorch` backend list, and ways to wait for a
/// response or read why a model did not load. No torch here.

#include "archetypes/temp_repository.hpp"

#include <servekit/libtorch/backend.hpp>
#include <servekit/repository.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace libtorch_tests {

using servekit::model_ready_state;
using servekit::shape;

using backends =
    servekit::backend_list<servekit::named_backend<"pytorch", servekit::libtorch::backend>>;

/// The models make_models.cpp wrote at build time.
inline const std::filesystem::path test_models{SERVEKIT_LIBTORCH_TEST_MODELS};

/// torch on one intra-op and one inter-op thread: ThreadSanitizer cannot see into LibTorch's
/// OpenMP pool, and a test needs no more.
inline constexpr std::string_view one_thread = R"(
parameters { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "1" } }
parameters { key: "INTER_OP_THREAD_COUNT" value: { string_value: "1" } }
)";

/// A Triton-layout repository of TorchScript models, removed at the end.
class torch_repository {
public:
  /// `<model>/config.pbtxt` (`pbtxt`, plus one_thread unless `threads` is false) and
  /// `<model>/1/<file>`, a copy of the test model `<pt>.pt`.
  void add(const std::string& model, std::string_view pbtxt, const std::string& pt,
           const std::string& file = "model.pt", bool threads = true) const {
    dir_.write_file(model, "config.pbtxt",
                    std::string{pbtxt} + (threads ? std::string{one_thread} : std::string{}));
    dir_.add_folder(model, "1");
    std::filesystem::copy_file(test_models / (pt + ".pt"), dir_.root() / model / "1" / file);
  }
  /// `<model>/1/<file>` holding `bytes`.
  void write_model_file(const std::string& model, const std::string& file,
                        std::string_view bytes) const {
    dir_.add_folder(model, "1");
    std::ofstream out{dir_.root() / model / "1" / file, std::ios::binary | std::ios::trunc};
    out << bytes;
  }
  [[nodiscard]] const std::filesystem::path& root() const noexcept { return dir_.root(); }

private:
  archetypes::temp_repository dir_;
};

/// submit() as a future; a refused request's future holds the refusal.
inline std::future<servekit::response> infer(servekit::model_ref m, servekit::request&& r) {
  auto promise = std::make_shared<std::promise<servekit::response>>();
  auto future = promise->get_future();
  auto s = m.submit(std::move(r), [promise](servekit::response&& out) {
    if (out.final) {
      promise->set_value(std::move(out));
    }
  });
  if (!s.ok()) {
    promise->set_value(servekit::response::failure(std::move(s)));
  }
  return future;
}

/// The response, or a failure after 20 s (a broken test fails instead of hanging).
inline servekit::response get(std::future<servekit::response>& f) {
  if (f.wait_for(std::chrono::seconds{20}) != std::future_status::ready) {
    return servekit::response::failure(servekit::internal_error("no response within 20 s"));
  }
  return f.get();
}

inline servekit::response infer_now(servekit::model_ref m, servekit::request&& r) {
  auto f = infer(m, std::move(r));
  return get(f);
}

/// The reason the repository gives for model `name` (empty when it is ready).
inline std::string load_error(const std::vector<servekit::model_index_entry>& index,
                              std::string_view name) {
  for (const auto& entry : index) {
    if (entry.name == name) {
      return entry.state == model_ready_state::ready ? std::string{} : entry.reason;
    }
  }
  return "no such model";
}

/// pair.pt: forward(self, a, b) returns (a - b, a + 2 * b).
inline std::string pair_pbtxt(std::string_view first_input, std::string_view second_input,
                              std::string_view first_output, std::string_view second_output) {
  auto tensor = [](std::string_view name) {
    return "{ name: \"" + std::string{name} + "\" data_type: TYPE_FP32 dims: [ 1 ] }";
  };
  return "platform: \"pytorch_libtorch\"\ninput [ " + tensor(first_input) + ", " +
         tensor(second_input) + " ]\noutput [ " + tensor(first_output) + ", " +
         tensor(second_output) + " ]\n";
}

inline servekit::request pair_request(std::string_view name_of_a, float a,
                                      std::string_view name_of_b, float b) {
  servekit::request r;
  r.inputs.push_back(servekit::make_tensor(std::string{name_of_a}, shape{1}, {a}));
  r.inputs.push_back(servekit::make_tensor(std::string{name_of_b}, shape{1}, {b}));
  return r;
}

inline float value_of(const servekit::response& r, std::string_view output) {
  const servekit::tensor* t = r.find_output(output);
  return t == nullptr ? std::nanf("") : t->values<float>()[0];
}

/// gru.pt under the sequence batcher: the hidden state is implicit state (INPUT_STATE__1 in,
/// OUTPUT_STATE__1 out), START__2 the START control.
inline constexpr std::string_view gru_pbtxt = R"(
platform: "pytorch_libtorch"
max_batch_size: 2
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
sequence_batching {
  max_sequence_idle_microseconds: 10000000
  control_input [ { name: "START__2"
                    control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]
  state [ { input_name: "INPUT_STATE__1" output_name: "OUTPUT_STATE__1"
            data_type: TYPE_FP32 dims: [ 4 ] } ]
}
)";

} // namespace libtorch_tests
