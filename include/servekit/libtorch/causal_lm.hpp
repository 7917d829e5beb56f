#pragma once
/// \file
/// A generative LibTorch backend: a decoder-only transformer in TorchScript, served per step by
/// the iteration batcher (`model<causal_lm, iteration_batcher<>>`), its KV cache laid out in the
/// blocks the scheduler assigns. Register it in a backend_list (the example server calls it
/// `causal_lm`):
///
///     using backends = servekit::backend_list<
///         servekit::named_backend<"causal_lm", servekit::libtorch::causal_lm>>;
///
/// Tokens are bytes (the vocabulary has 256 entries): text in and text out are real, with no
/// tokenizer file. Decoding is greedy. Inputs and outputs are those of Triton's LLM backends:
/// `text_input` (BYTES), optional `stream` (BOOL) and `max_tokens` (INT32); `text_output`
/// (BYTES). Model parameters: the iteration scheduler's
/// (schedule/iteration_batching_parameters.hpp), `kv_cache_megabytes` (the cache when
/// num_gpu_blocks is not given; default 64), `end_token` (a byte value that ends a sequence),
/// `INTRA_OP_THREAD_COUNT`.
///
/// The model file (`<model>/<version>/model.pt`, or default_model_filename) is a TorchScript
/// module with int attributes `vocab_size` (256), `num_layers`, `num_heads`, `head_dim` and a
/// method
///
///     step(tokens: Tensor[T] int64, positions: Tensor[T] int64, slots: Tensor[T] int64,
///          k_cache: Tensor, v_cache: Tensor,          # [layers, blocks·block_size, heads,
///          head_dim] starts: List[int], lengths: List[int],     # each sequence's rows of `tokens`
///          contexts: List[Tensor],                    # each sequence's cache slots, positions 0..
///          sample_rows: Tensor[S] int64) -> Tensor    # logits [S, vocab_size], FP64
///
/// that writes the keys and values of the T scheduled tokens into the cache at `slots`
/// (slot = block · block_size + position % block_size, from the sequence's block table), attends
/// each sequence's queries to its context causally, and returns the logits of the rows a
/// sequence samples from. tests/libtorch/make_models.cpp writes one (tiny_lm).
///
/// This header includes no torch header; the torch code is libtorch/impl/causal_lm.ipp,
/// compiled once into servekit::libtorch.

#include <servekit/backend/instance_context.hpp>
#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/status.hpp>
#include <servekit/schedule/iteration_scheduler_core.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace servekit::libtorch {

namespace detail {
struct lm_file;
struct lm_instance;
} // namespace detail

/// The model file, read and checked once per model (causal_lm's model_state).
class causal_lm_model {
public:
  /// Reads and checks the file; throws std::runtime_error naming it when it is missing, not
  /// TorchScript, or lacks the attributes or the `step` method.
  SERVEKIT_DECL explicit causal_lm_model(const model_context& context);
  SERVEKIT_DECL ~causal_lm_model();
  causal_lm_model(const causal_lm_model&) = delete;
  causal_lm_model& operator=(const causal_lm_model&) = delete;

  [[nodiscard]] const detail::lm_file& loaded() const noexcept { return *loaded_; }

private:
  std::unique_ptr<const detail::lm_file> loaded_;
};

/// One instance: its own module and KV cache.
class causal_lm {
public:
  static constexpr bool decoupled = true;
  static constexpr tensor_declaration inputs[] = {
      {"text_input", data_type::bytes, {1}},
      {"stream", data_type::boolean, {1}, false, true},
      {"max_tokens", data_type::int32, {1}, false, true},
  };
  static constexpr tensor_declaration outputs[] = {
      {"text_output", data_type::bytes, {1}},
  };
  using model_state = causal_lm_model;

  /// Loads the module and allocates the KV cache (num_gpu_blocks blocks, or as many as
  /// kv_cache_megabytes holds). Throws std::runtime_error for a cache of no block or a bad
  /// parameter.
  SERVEKIT_DECL causal_lm(const instance_context& context, model_state& model);
  SERVEKIT_DECL ~causal_lm();
  causal_lm(const causal_lm&) = delete;
  causal_lm& operator=(const causal_lm&) = delete;

  [[nodiscard]] SERVEKIT_DECL std::uint32_t kv_cache_blocks() const noexcept;
  [[nodiscard]] SERVEKIT_DECL std::optional<token_id> end_token() const noexcept;

  /// The bytes of `text_input`, one token each.
  SERVEKIT_DECL status tokenize(const request& r, std::vector<token_id>& prompt) const;

  /// One forward pass through `step`, then a greedy token for each sequence that samples.
  /// Throws std::runtime_error naming the model when torch fails.
  SERVEKIT_DECL void execute_step(const step_plan& plan, std::vector<step_output>& out);

  /// `tokens` as one `text_output` string.
  SERVEKIT_DECL void respond(const request& r, std::span<const token_id> tokens,
                             response& out) const;

private:
  std::unique_ptr<detail::lm_instance> impl_;
};

} // namespace servekit::libtorch

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/libtorch/impl/causal_lm.ipp>
#endif
