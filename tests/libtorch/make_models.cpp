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

/// A parameter holding `values` (FP64), shaped `sizes`.
at::Tensor parameter64(const std::vector<double>& values, std::vector<std::int64_t> sizes) {
  return at::from_blob(const_cast<double*>(values.data()), sizes, at::kDouble).clone();
}

/// reference_models::tiny_lm as TorchScript, for servekit::libtorch::causal_lm: the shape
/// attributes it checks, and `step`, one forward pass over the tokens a step plan schedules with
/// the keys and values in a paged cache (libtorch/causal_lm.hpp gives the contract).
torch::jit::Module tiny_lm() {
  using reference_models::tiny_lm;
  const auto w = tiny_lm::seeded();
  constexpr auto L = tiny_lm::layers;
  constexpr auto d = tiny_lm::width;
  constexpr auto f = tiny_lm::hidden;
  torch::jit::Module m{"tiny_lm"};
  m.register_attribute("vocab_size", c10::IntType::get(), tiny_lm::vocab);
  m.register_attribute("num_layers", c10::IntType::get(), L);
  m.register_attribute("num_heads", c10::IntType::get(), tiny_lm::heads);
  m.register_attribute("head_dim", c10::IntType::get(), tiny_lm::head_dim);
  m.register_parameter("embedding", parameter64(w.embedding, {tiny_lm::vocab, d}), false);
  m.register_parameter("ln1_w", parameter64(w.ln1_w, {L, d}), false);
  m.register_parameter("ln1_b", parameter64(w.ln1_b, {L, d}), false);
  m.register_parameter("ln2_w", parameter64(w.ln2_w, {L, d}), false);
  m.register_parameter("ln2_b", parameter64(w.ln2_b, {L, d}), false);
  m.register_parameter("wq", parameter64(w.wq, {L, d, d}), false);
  m.register_parameter("wk", parameter64(w.wk, {L, d, d}), false);
  m.register_parameter("wv", parameter64(w.wv, {L, d, d}), false);
  m.register_parameter("wo", parameter64(w.wo, {L, d, d}), false);
  m.register_parameter("w1", parameter64(w.w1, {L, d, f}), false);
  m.register_parameter("b1", parameter64(w.b1, {L, f}), false);
  m.register_parameter("w2", parameter64(w.w2, {L, f, d}), false);
  m.register_parameter("lnf_w", parameter64(w.lnf_w, {d}), false);
  m.register_parameter("lnf_b", parameter64(w.lnf_b, {d}), false);
  m.register_parameter("mask", parameter64(w.mask, {tiny_lm::vocab}), false);
  m.define(R"(
def positions_code(self, positions: Tensor) -> Tensor:
    d = self.num_heads * self.head_dim
    i = torch.arange(d).double()
    frequency = torch.pow(10000.0, -(2.0 * torch.floor(i / 2.0)) / d)
    angle = positions.double().unsqueeze(1) * frequency.unsqueeze(0)
    even = (torch.remainder(i, 2.0) == 0.0).unsqueeze(0)
    return torch.where(even, torch.sin(angle), torch.cos(angle))

def step(self, tokens: Tensor, positions: Tensor, slots: Tensor, k_cache: Tensor,
         v_cache: Tensor, starts: List[int], lengths: List[int], contexts: List[Tensor],
         sample_rows: Tensor) -> Tensor:
    H = self.num_heads
    D = self.head_dim
    d = H * D
    scale = 1.0 / (D ** 0.5)
    x = torch.embedding(self.embedding, tokens) + self.positions_code(positions)
    for l in range(self.num_layers):
        h = torch.layer_norm(x, [d], self.ln1_w[l], self.ln1_b[l], 1e-5)
        q = torch.matmul(h, self.wq[l]).view(-1, H, D)
        k = torch.matmul(h, self.wk[l]).view(-1, H, D)
        v = torch.matmul(h, self.wv[l]).view(-1, H, D)
        k_cache[l].index_copy_(0, slots, k)
        v_cache[l].index_copy_(0, slots, v)
        outs: List[Tensor] = []
        for i in range(len(starts)):
            n = lengths[i]
            context = contexts[i]
            c = context.size(0)
            qi = q.narrow(0, starts[i], n).transpose(0, 1)
            kc = k_cache[l].index_select(0, context).permute(1, 2, 0)
            vc = v_cache[l].index_select(0, context).transpose(0, 1)
            scores = torch.matmul(qi, kc) * scale
            future = torch.ones([n, c]).triu(c - n + 1) > 0.5
            scores = scores.masked_fill(future.unsqueeze(0), float('-inf'))
            attended = torch.matmul(torch.softmax(scores, -1), vc)
            outs.append(attended.transpose(0, 1).reshape(n, d))
        x = x + torch.matmul(torch.cat(outs, 0), self.wo[l])
        h = torch.layer_norm(x, [d], self.ln2_w[l], self.ln2_b[l], 1e-5)
        x = x + torch.matmul(torch.gelu(torch.matmul(h, self.w1[l]) + self.b1[l]), self.w2[l])
    last = torch.layer_norm(x.index_select(0, sample_rows), [d], self.lnf_w, self.lnf_b, 1e-5)
    return torch.matmul(last, self.embedding.t()) + self.mask
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
  save_version(tiny_lm(), root, "tiny_lm");
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
  save(tiny_lm(), folder, "tiny_lm");
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
