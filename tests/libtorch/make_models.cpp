// Writes the LibTorch tests' TorchScript models, and the model files of the bundled repository
// (examples/models), from C++: nothing is downloaded. Each TorchScript model is a
// torch::jit::Module whose forward() is TorchScript source (Module::define), with the seeded
// weights of reference_models.hpp as parameters; the ONNX classifier is the same network written
// with servekit::onnx::graph_builder.
//
//   make_models <folder>                  writes <folder>/<name>.pt for every test model below
//   make_models --repository <root>       writes the model files of the bundled repository under
//                                         <root> (<model>/1/model.pt, <model>/1/model.onnx); the
//                                         configs beside them are written by hand
//
// The bundled repository's files are committed: scripts/make-example-models.sh rewrites them, and
// the ctest example.models.up_to_date fails when they differ from what this program writes.
// The only test source that includes torch (5-10 s more to compile); the tests themselves do not.
#include "reference_models.hpp"

#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/api/module.h>

#if defined(SERVEKIT_MAKE_ONNX_MODELS)
#include <servekit/onnx/graph_builder.hpp>
#endif

#include <cstdint>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

namespace {

/// A parameter holding a copy of `values`, shaped `sizes`.
at::Tensor parameter(const std::vector<float>& values, std::vector<std::int64_t> sizes) {
  // from_blob does not copy; clone() gives the module storage of its own.
  return at::from_blob(const_cast<float*>(values.data()), sizes, at::kFloat).clone();
}

void save(const torch::jit::Module& module, const std::filesystem::path& folder,
          const std::string& name) {
  module.save((folder / (name + ".pt")).string());
}

/// Saves `module` as `<root>/<model>/1/model.pt`, Triton's layout.
void save_version(const torch::jit::Module& module, const std::filesystem::path& root,
                  const std::string& model) {
  const auto version = root / model / "1";
  std::filesystem::create_directories(version);
  module.save((version / "model.pt").string());
}

/// reference_models::classifier as TorchScript.
torch::jit::Module classifier() {
  using reference_models::classifier;
  const auto weights = classifier::seeded();
  torch::jit::Module m{"classifier"};
  m.register_parameter("conv_weight",
                       parameter(weights.conv_weight,
                                 {classifier::channels, 1, classifier::kernel, classifier::kernel}),
                       false);
  m.register_parameter("conv_bias", parameter(weights.conv_bias, {classifier::channels}), false);
  m.register_parameter("fc_weight",
                       parameter(weights.fc_weight, {classifier::classes, classifier::features}),
                       false);
  m.register_parameter("fc_bias", parameter(weights.fc_bias, {classifier::classes}), false);
  m.define(R"(
def forward(self, image):
    y = torch.conv2d(image, self.conv_weight, self.conv_bias, [1, 1], [1, 1])
    y = torch.relu(y)
    y = torch.max_pool2d(y, [2, 2])
    y = torch.flatten(y, 1)
    return torch.matmul(y, self.fc_weight.t()) + self.fc_bias
)");
  return m;
}

/// Ten inputs, returned as they came (copies): one per data type the backend takes.
torch::jit::Module identity10() {
  torch::jit::Module m{"identity10"};
  m.define(R"(
def forward(self, a, b, c, d, e, f, g, h, i, j):
    return (a.clone(), b.clone(), c.clone(), d.clone(), e.clone(),
            f.clone(), g.clone(), h.clone(), i.clone(), j.clone())
)");
  return m;
}

/// Two inputs, two results that tell them apart: (a - b, a + 2 * b).
torch::jit::Module pair() {
  torch::jit::Module m{"pair"};
  m.define(R"(
def forward(self, a, b):
    return (a - b, a + 2 * b)
)");
  return m;
}

/// forward() takes an int besides the tensor: no config can feed it.
torch::jit::Module int_argument() {
  torch::jit::Module m{"int_argument"};
  m.define(R"(
def forward(self, x, n: int):
    return x * n
)");
  return m;
}

/// forward() returns a list, which the backend does not read.
torch::jit::Module returns_list() {
  torch::jit::Module m{"returns_list"};
  m.define(R"(
def forward(self, x):
    return [x, x]
)");
  return m;
}

/// Reshapes its input to 2x2: torch fails for any other element count.
torch::jit::Module reshape() {
  torch::jit::Module m{"reshape"};
  m.define(R"(
def forward(self, x):
    return x.reshape([2, 2])
)");
  return m;
}

/// reference_models::gru_cell as TorchScript: (x, h, start) -> (h', h'), h' the next hidden
/// state; the second result is the implicit state the sequence batcher keeps, and `start` (the
/// sequence batcher's START control, 1 on a sequence's first request; [batch, 1] as Triton
/// passes controls) resets it.
torch::jit::Module gru() {
  using reference_models::gru_cell;
  const auto weights = gru_cell::seeded();
  torch::jit::Module m{"gru"};
  m.register_parameter(
      "weight_ih", parameter(weights.weight_ih, {3 * gru_cell::hidden, gru_cell::inputs}), false);
  m.register_parameter(
      "weight_hh", parameter(weights.weight_hh, {3 * gru_cell::hidden, gru_cell::hidden}), false);
  m.register_parameter("bias_ih", parameter(weights.bias_ih, {3 * gru_cell::hidden}), false);
  m.register_parameter("bias_hh", parameter(weights.bias_hh, {3 * gru_cell::hidden}), false);
  m.define(R"(
def forward(self, x, h, start):
    h = h * (1 - start).to(h.dtype)
    h1 = torch.gru_cell(x, h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
    return (h1, h1)
)");
  return m;
}

/// Returns its START control as it receives it (FP32): [batch, 1] in a batching model, as Triton
/// passes controls.
torch::jit::Module control_echo() {
  torch::jit::Module m{"control_echo"};
  m.define(R"(
def forward(self, x, start):
    return start.float()
)");
  return m;
}

/// The bundled repository's preprocessing step: 8x8 UINT8 images (0..255) to the classifier's
/// FP32 input [N, 1, 8, 8] in [-0.5, 0.5] (reference_models::preprocess).
torch::jit::Module preprocess() {
  torch::jit::Module m{"preprocess"};
  m.define(R"(
def forward(self, image):
    return (image.float() / 255.0 - 0.5).unsqueeze(1)
)");
  return m;
}

#if defined(SERVEKIT_MAKE_ONNX_MODELS)
/// reference_models::classifier as an ONNX graph (opset 13): Conv, Relu, MaxPool, Flatten, Gemm;
/// the batch size is symbolic ("N"), so the backend batches along it.
servekit::onnx::graph_builder classifier_onnx() {
  using reference_models::classifier;
  using servekit::data_type;
  namespace onnx = servekit::onnx;
  const auto w = classifier::seeded();
  onnx::graph_builder g{"image_classifier"};
  g.input("image", data_type::fp32, {-1, 1, classifier::side, classifier::side})
      .output("scores", data_type::fp32, {-1, classifier::classes})
      .initializer("conv_weight", {classifier::channels, 1, classifier::kernel, classifier::kernel},
                   w.conv_weight)
      .initializer("conv_bias", {classifier::channels}, w.conv_bias)
      .initializer("fc_weight", {classifier::classes, classifier::features}, w.fc_weight)
      .initializer("fc_bias", {classifier::classes}, w.fc_bias)
      .node("Conv", {"image", "conv_weight", "conv_bias"}, {"conv"},
            {onnx::ints_attribute("kernel_shape", {classifier::kernel, classifier::kernel}),
             onnx::ints_attribute("pads", {1, 1, 1, 1})})
      .node("Relu", {"conv"}, {"relu"})
      .node("MaxPool", {"relu"}, {"pooled"},
            {onnx::ints_attribute("kernel_shape", {2, 2}), onnx::ints_attribute("strides", {2, 2})})
      .node("Flatten", {"pooled"}, {"features"}, {onnx::int_attribute("axis", 1)})
      .node("Gemm", {"features", "fc_weight", "fc_bias"}, {"scores"},
            {onnx::int_attribute("transB", 1)});
  return g;
}
#endif

/// The model files of the bundled repository (examples/models), under `root`.
void write_repository(const std::filesystem::path& root) {
  save_version(classifier(), root, "image_classifier");
  save_version(preprocess(), root, "image_preprocess");
  save_version(gru(), root, "gru_sequence");
#if defined(SERVEKIT_MAKE_ONNX_MODELS)
  classifier_onnx().save(root / "image_classifier_onnx" / "1" / "model.onnx");
#endif
}

/// The LibTorch tests' models, as <folder>/<name>.pt.
void write_test_models(const std::filesystem::path& folder) {
  std::filesystem::create_directories(folder);
  save(classifier(), folder, "classifier");
  save(identity10(), folder, "identity10");
  save(pair(), folder, "pair");
  save(int_argument(), folder, "int_argument");
  save(returns_list(), folder, "returns_list");
  save(reshape(), folder, "reshape");
  save(gru(), folder, "gru");
  save(control_echo(), folder, "control_echo");
}

} // namespace

int main(int argc, char** argv) {
  const bool repository = argc == 3 && std::string{argv[1]} == "--repository";
  if (argc != 2 && !repository) {
    std::cerr << "usage: make_models <folder> | make_models --repository <root>\n";
    return 2;
  }
  try {
    if (repository) {
      write_repository(argv[2]);
    } else {
      write_test_models(argv[1]);
    }
  } catch (const c10::Error& e) {
    std::cerr << "make_models: " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "make_models: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
