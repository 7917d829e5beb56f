#pragma once
/// \file
/// The generative LibTorch backend (libtorch/causal_lm.hpp): reading and checking the model
/// file, the paged KV cache, and one step through the module's `step` method. Compiled once by
/// src/libtorch/backend.cpp, beside the other LibTorch backend (see core/detail/linkage.hpp).

#include <servekit/core/tensor.hpp>
// backend.hpp first: in header-only mode it brings the model-file helpers
// (torchscript_model.ipp) in the order its own implementation needs.
#include <servekit/libtorch/backend.hpp>
#include <servekit/libtorch/causal_lm.hpp>
#include <servekit/libtorch/impl/torchscript_model.ipp>
#include <servekit/schedule/iteration_batching_parameters.hpp>

#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/jit/api/module.h>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace servekit::libtorch {

namespace detail {

/// The model file and the shape its attributes give.
struct lm_file {
  std::string model_name;
  std::string file; ///< as messages name it
  std::string bytes;
  std::int64_t vocab_size = 0;
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;
  std::int64_t head_dim = 0;
  int intra_op_threads = 0;
};

/// One instance's module and cache.
struct lm_instance {
  lm_instance(const lm_file& f, torch::jit::Module m, torch::jit::Method s)
      : model{f}, module{std::move(m)}, step{std::move(s)} {}

  const lm_file& model;
  torch::jit::Module module;
  torch::jit::Method step;
  std::uint32_t block_size = 16;
  std::uint32_t blocks = 0;
  std::optional<token_id> end_token;
  at::Tensor k_cache; ///< [layers, blocks·block_size, heads, head_dim], FP64
  at::Tensor v_cache;
  // Scratch, reused every step.
  std::vector<std::int64_t> tokens, positions, slots, starts, lengths, sample_rows;
  std::vector<std::uint64_t> samplers;
};

/// An int attribute of the module, at least 1.
[[nodiscard]] inline std::int64_t
positive_attribute(const torch::jit::Module& m, const std::string& name, const std::string& file) {
  if (!m.hasattr(name) || !m.attr(name).isInt() || m.attr(name).toInt() < 1) {
    throw std::runtime_error("'" + file + "' needs an int attribute '" + name +
                             "' of at least 1 (a causal_lm model: vocab_size, num_layers, "
                             "num_heads, head_dim, and a step() method)");
  }
  return m.attr(name).toInt();
}

[[nodiscard]] inline at::Tensor long_tensor(const std::vector<std::int64_t>& values) {
  return at::from_blob(const_cast<std::int64_t*>(values.data()),
                       {static_cast<std::int64_t>(values.size())}, at::kLong)
      .clone();
}

} // namespace detail

SERVEKIT_DECL causal_lm_model::causal_lm_model(const model_context& context) {
  auto model = std::make_unique<detail::lm_file>();
  model->model_name = context.model_name;
  const std::string filename{context.default_model_filename.empty()
                                 ? libtorch::default_model_filename
                                 : context.default_model_filename};
  const std::filesystem::path folder{std::string{context.directory}};
  model->file = detail::shown_file(context, folder, filename);
  model->bytes = detail::read_model_file(folder / filename, model->file, filename);
  model->intra_op_threads = detail::thread_count_parameter(context, "INTRA_OP_THREAD_COUNT");
  detail::model_file as_file;
  as_file.file = model->file;
  as_file.bytes = model->bytes;
  const torch::jit::Module m = detail::load_module(as_file);
  model->vocab_size = detail::positive_attribute(m, "vocab_size", model->file);
  model->num_layers = detail::positive_attribute(m, "num_layers", model->file);
  model->num_heads = detail::positive_attribute(m, "num_heads", model->file);
  model->head_dim = detail::positive_attribute(m, "head_dim", model->file);
  if (model->vocab_size != 256) {
    throw std::runtime_error("'" + model->file + "' has vocab_size " +
                             std::to_string(model->vocab_size) +
                             "; causal_lm's tokens are bytes (256)");
  }
  if (!m.find_method("step")) {
    throw std::runtime_error("'" + model->file +
                             "' has no step() method (libtorch/causal_lm.hpp gives its "
                             "signature)");
  }
  loaded_ = std::move(model);
}

SERVEKIT_DECL causal_lm_model::~causal_lm_model() = default;

SERVEKIT_DECL causal_lm::causal_lm(const instance_context& context, model_state& model) {
  const detail::lm_file& file = model.loaded();
  detail::model_file as_file;
  as_file.file = file.file;
  as_file.bytes = file.bytes;
  torch::jit::Module module = detail::load_module(as_file);
  auto step = module.get_method("step");
  impl_ = std::make_unique<detail::lm_instance>(file, std::move(module), std::move(step));
  auto& m = *impl_;
  const iteration_batching_options o = read_iteration_batching(*context.parameters);
  m.block_size = o.block_size;
  const std::uint64_t block_bytes = std::uint64_t{2} * static_cast<std::uint64_t>(file.num_layers) *
                                    o.block_size * static_cast<std::uint64_t>(file.num_heads) *
                                    static_cast<std::uint64_t>(file.head_dim) * sizeof(double);
  std::uint64_t blocks = o.num_blocks;
  if (blocks == 0) {
    std::uint32_t megabytes = 64;
    servekit::detail::read_iteration_count(*context.parameters, {"kv_cache_megabytes"}, megabytes);
    blocks = std::uint64_t{megabytes} * 1024 * 1024 / block_bytes;
  }
  if (blocks == 0 || blocks > std::numeric_limits<std::uint32_t>::max()) {
    throw std::runtime_error("model '" + file.model_name + "': a KV cache of " +
                             std::to_string(blocks) + " blocks of " + std::to_string(block_bytes) +
                             " bytes");
  }
  m.blocks = static_cast<std::uint32_t>(blocks);
  if (context.parameter("end_token")) {
    std::uint32_t t = 0;
    servekit::detail::read_iteration_count(*context.parameters, {"end_token"}, t);
    if (t > 255) {
      throw std::runtime_error("parameter 'end_token' must be a byte value (0-255), got " +
                               std::to_string(t));
    }
    m.end_token = static_cast<token_id>(t);
  }
  const c10::InferenceMode inference;
  const std::int64_t slots = static_cast<std::int64_t>(m.blocks) * m.block_size;
  m.k_cache = at::zeros({file.num_layers, slots, file.num_heads, file.head_dim}, at::kDouble);
  m.v_cache = at::zeros({file.num_layers, slots, file.num_heads, file.head_dim}, at::kDouble);
}

SERVEKIT_DECL causal_lm::~causal_lm() = default;

SERVEKIT_DECL std::uint32_t causal_lm::kv_cache_blocks() const noexcept { return impl_->blocks; }

SERVEKIT_DECL std::optional<token_id> causal_lm::end_token() const noexcept {
  return impl_->end_token;
}

SERVEKIT_DECL status causal_lm::tokenize(const request& r, std::vector<token_id>& prompt) const {
  std::vector<std::string_view> text;
  try {
    text = r.input("text_input").strings();
  } catch (const std::exception& e) {
    return invalid_argument(e.what());
  }
  if (text.size() != 1) {
    return invalid_argument("input 'text_input' must hold one string, got " +
                            std::to_string(text.size()));
  }
  prompt.clear();
  prompt.reserve(text.front().size());
  for (const char c : text.front()) {
    prompt.push_back(static_cast<token_id>(static_cast<unsigned char>(c)));
  }
  return {};
}

SERVEKIT_DECL void causal_lm::execute_step(const step_plan& plan, std::vector<step_output>& out) {
  // The model's state lives in the cache blocks alone: finished and preempted sequences leave
  // nothing to drop.
  if (plan.empty()) {
    return;
  }
  detail::lm_instance& m = *impl_;
  if (m.model.intra_op_threads > 0 && at::get_num_threads() != m.model.intra_op_threads) {
    at::set_num_threads(m.model.intra_op_threads);
  }
  m.tokens.clear();
  m.positions.clear();
  m.slots.clear();
  m.starts.clear();
  m.lengths.clear();
  m.sample_rows.clear();
  m.samplers.clear();
  const c10::InferenceMode inference;
  c10::List<at::Tensor> contexts;
  const auto slot_of = [&](const scheduled_sequence& s, std::uint32_t p) {
    return static_cast<std::int64_t>(s.block_table[p / m.block_size]) * m.block_size +
           p % m.block_size;
  };
  for (const scheduled_sequence& s : plan.sequences) {
    m.starts.push_back(static_cast<std::int64_t>(m.tokens.size()));
    m.lengths.push_back(s.num_tokens);
    for (std::uint32_t k = 0; k < s.num_tokens; ++k) {
      const std::uint32_t p = s.first_token + k;
      m.tokens.push_back(s.tokens[k]);
      m.positions.push_back(p);
      m.slots.push_back(slot_of(s, p));
    }
    const std::uint32_t context = s.first_token + s.num_tokens;
    at::Tensor slots = at::empty({context}, at::kLong);
    auto* to = slots.data_ptr<std::int64_t>();
    for (std::uint32_t p = 0; p < context; ++p) {
      to[p] = slot_of(s, p);
    }
    contexts.push_back(std::move(slots));
    if (s.samples) {
      m.sample_rows.push_back(static_cast<std::int64_t>(m.tokens.size()) - 1);
      m.samplers.push_back(s.id);
    }
  }
  at::Tensor logits;
  try {
    c10::List<std::int64_t> starts{m.starts};
    c10::List<std::int64_t> lengths{m.lengths};
    logits = m.step({detail::long_tensor(m.tokens), detail::long_tensor(m.positions),
                     detail::long_tensor(m.slots), m.k_cache, m.v_cache, starts, lengths, contexts,
                     detail::long_tensor(m.sample_rows)})
                 .toTensor();
  } catch (const std::exception& e) {
    throw std::runtime_error("model '" + m.model.model_name +
                             "': step() failed: " + detail::torch_message(e));
  }
  if (m.samplers.empty()) {
    return;
  }
  const at::Tensor next = logits.argmax(1).contiguous();
  const auto* chosen = next.data_ptr<std::int64_t>();
  for (std::size_t i = 0; i < m.samplers.size(); ++i) {
    out.push_back({m.samplers[i], static_cast<token_id>(chosen[i]), false});
  }
}

SERVEKIT_DECL void causal_lm::respond(const request& /*r*/, std::span<const token_id> tokens,
                                      response& out) const {
  std::string text;
  text.reserve(tokens.size());
  for (const token_id t : tokens) {
    text.push_back(static_cast<char>(static_cast<unsigned char>(t)));
  }
  out.outputs.push_back(make_tensor("text_output", shape{1}, {std::string_view{text}}));
}

} // namespace servekit::libtorch
