#pragma once
/// \file
/// The generative backend concept: what a model class served by the iteration batcher must (and
/// may) provide. It executes step plans (iteration_scheduler_core's), not batches of requests:
///
///     struct my_llm {
///       static constexpr bool decoupled = true;  // it streams: several responses per request
///       static constexpr servekit::tensor_declaration inputs[] = {...};   // e.g. text_input
///       static constexpr servekit::tensor_declaration outputs[] = {...};  // e.g. text_output
///
///       explicit my_llm(const servekit::instance_context&);  // allocates its KV cache
///
///       // On the submitting thread, concurrently with execute_step: a request's prompt.
///       servekit::status tokenize(const servekit::request&,
///                                 std::vector<servekit::token_id>& prompt) const;
///       // On the instance's thread: one forward pass. Drop the state of plan.finished and
///       // plan.preempted, compute each sequence's tokens into its blocks, and append one
///       // step_output per sequence whose `samples` is set.
///       void execute_step(const servekit::step_plan&, std::vector<servekit::step_output>&);
///       // On the instance's thread: the outputs of a response carrying `tokens` (one step's
///       // token when streaming, else every generated token).
///       void respond(const servekit::request&, std::span<const servekit::token_id> tokens,
///                    servekit::response&) const;
///     };
///
/// Optional:
///
///     std::optional<servekit::token_id> end_token() const;  // stops a sequence (kept in it)
///     std::uint32_t kv_cache_blocks() const;                // its KV cache, when the config
///                                                           // gives no num_gpu_blocks
///
/// The instance constructor may take a model_state or backend_state as batch backends do
/// (backend/backend.hpp).

#include <servekit/backend/backend.hpp>
#include <servekit/backend/instance_context.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/status.hpp>
#include <servekit/schedule/iteration_scheduler_core.hpp>

#include <concepts>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace servekit {

namespace detail {

template <class B>
concept has_tokenize = requires(const B& b, const request& r, std::vector<token_id>& prompt) {
  { b.tokenize(r, prompt) } -> std::same_as<status>;
};
template <class B>
concept has_execute_step = requires(B& b, const step_plan& plan, std::vector<step_output>& out) {
  b.execute_step(plan, out);
};
template <class B>
concept has_respond = requires(const B& b, const request& r, std::span<const token_id> tokens,
                               response& out) {
  b.respond(r, tokens, out);
};
template <class B>
concept declares_end_token = requires(const B& b) {
  { b.end_token() } -> std::convertible_to<std::optional<token_id>>;
};
template <class B>
concept declares_kv_cache_blocks = requires(const B& b) {
  { b.kv_cache_blocks() } -> std::convertible_to<std::uint32_t>;
};

} // namespace detail

/// A class the iteration batcher can run as a model instance.
template <class B>
concept generative_backend =
    detail::constructible_from_instance_context<B> && detail::has_tokenize<B> &&
    detail::has_execute_step<B> && detail::has_respond<B> && backend_traits<B>::decoupled;

/// Checks a generative backend with one readable message per missing member.
template <class B>
consteval bool check_generative_backend() {
  static_assert(detail::constructible_from_instance_context<B>,
                "servekit: a generative backend needs a public constructor "
                "`explicit B(const servekit::instance_context&)` (or with its model_state or "
                "backend_state) and a public destructor");
  static_assert(detail::has_tokenize<B>,
                "servekit: a generative backend needs `servekit::status tokenize(const "
                "servekit::request&, std::vector<servekit::token_id>& prompt) const`");
  static_assert(detail::has_execute_step<B>,
                "servekit: a generative backend needs `void execute_step(const "
                "servekit::step_plan&, std::vector<servekit::step_output>&)`");
  static_assert(detail::has_respond<B>,
                "servekit: a generative backend needs `void respond(const servekit::request&, "
                "std::span<const servekit::token_id> tokens, servekit::response&) const`");
  static_assert(!detail::declares_decoupled<B> || detail::declares_decoupled_as_bool<B>,
                "servekit: a backend's `decoupled` must be "
                "`static constexpr bool decoupled = ...;`");
  static_assert(backend_traits<B>::decoupled,
                "servekit: a generative backend streams tokens, several responses per request: "
                "declare `static constexpr bool decoupled = true;`");
  return true;
}

/// The backend's end token, if it declares one.
template <class B>
[[nodiscard]] std::optional<token_id> end_token_of(const B& b) {
  if constexpr (detail::declares_end_token<B>) {
    return b.end_token();
  } else {
    return std::nullopt;
  }
}

/// The backend's KV cache in blocks, if it says (0 when it does not).
template <class B>
[[nodiscard]] std::uint32_t kv_cache_blocks_of(const B& b) {
  if constexpr (detail::declares_kv_cache_blocks<B>) {
    return static_cast<std::uint32_t>(b.kv_cache_blocks());
  } else {
    return 0;
  }
}

} // namespace servekit
