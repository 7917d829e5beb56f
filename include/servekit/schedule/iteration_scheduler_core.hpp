#pragma once
/// \file
/// Iteration-level (continuous) batching of a generative model as a pure decision core: which
/// sequences compute which tokens in the next forward pass, and which KV blocks they use. No
/// locks, no clock, no model: the shell calls schedule(), has the backend execute the plan, and
/// passes the sampled tokens to update().
///
/// The rules are vLLM v1's (vllm/v1/core/sched/scheduler.py), with TensorRT-LLM's capacity
/// policies beside them (see ../shared/reference/iteration-scheduling.md,
/// docs/iteration-batching.md):
///
/// - **One rule.** A sequence has tokens (prompt, then generated ones) and a count of those whose
///   KV is computed. Each step gives it the tokens that let the count catch up, clipped by the
///   step's token budget, long_prefill_token_threshold and the model's length. That is prefill,
///   chunked prefill and decode alike. A step that computes a sequence's last known token samples
///   the next one.
/// - **Running sequences first**, in admission order, each taking KV blocks for its new tokens.
///   Under max_utilization, when blocks run out the last admitted sequence (or, ordered by
///   priority, the least urgent) is preempted: its blocks are freed, its computed count goes to 0
///   (it will be recomputed, generated tokens included) and it goes back to the head of the queue;
///   if it was scheduled in this step, its tokens return to the budget. Under
///   guaranteed_no_evict and static_batch, blocks were reserved at admission: nothing is
///   preempted.
/// - **Waiting sequences next**, only in a step that preempted nothing, while fewer than
///   max_num_seqs run and budget is left. A sequence starts from its prefix-cache hits (whole
///   cached blocks, at most all but its last token). Admission stops at the first sequence that
///   does not fit: its blocks (max_utilization: this step's; guaranteed_no_evict: its whole life
///   beside every running sequence's remaining need), or, without chunked prefill, its prompt.
///
/// Invariants, checked by tests/schedule: scheduled tokens ≤ max_num_batched_tokens; running ≤
/// max_num_seqs; a sequence never holds more than max_model_len tokens; every block a plan names
/// is referenced by its sequence.

#include <servekit/core/clock.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/status.hpp>
#include <servekit/schedule/iteration_batching_options.hpp>
#include <servekit/schedule/kv_block_pool.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace servekit {

/// A sequence to generate.
struct generation_request {
  std::uint64_t id = 0;              ///< the caller's, unique among sequences not yet finished
  std::vector<token_id> prompt;      ///< at least one token, fewer than max_model_len
  std::uint32_t max_new_tokens = 16; ///< stop after this many generated tokens (at least 1)
  std::optional<token_id> end_token; ///< stop when it is generated (it is kept)
  std::uint32_t priority = 0;        ///< queue order `priority`: smaller first
  time_point arrival{};              ///< priority order's ties, slo_aware's deadline
  duration ttft_target{};            ///< slo_aware: zero takes the options' ttft_target
};

/// How a sequence appears in a step.
enum class scheduled_kind : std::uint8_t {
  started,    ///< first time: the backend sets up its state
  resumed,    ///< after a preemption: state dropped, recompute from first_token (prefix hits)
  continuing, ///< ran in an earlier step
};

/// One sequence's part of a step.
struct scheduled_sequence {
  std::uint64_t id = 0;
  scheduled_kind kind = scheduled_kind::continuing;
  std::uint32_t first_token = 0; ///< position of the first token to compute (KV below it exists)
  std::uint32_t num_tokens = 0;  ///< tokens to compute: [first_token, first_token + num_tokens)
  /// started/resumed: tokens at the start whose KV prefix-cache hits already hold (=
  /// first_token); 0 otherwise.
  std::uint32_t cached_tokens = 0;
  /// The step computes the sequence's last known token: the backend samples the next one and
  /// returns it in a step_output.
  bool samples = false;
  std::span<const token_id> tokens;         ///< the tokens to compute
  std::span<const kv_block_id> block_table; ///< block i holds positions [i·block_size, ...)
};

/// One step (forward pass). Its spans stay valid until update() (add() and cancel() may be
/// called while the backend reads them). `preempted` and `finished` must be acted on even when
/// the plan has no sequences.
struct step_plan {
  std::vector<scheduled_sequence> sequences;
  std::vector<std::uint64_t> preempted; ///< their blocks were freed: drop their state
  /// Finished or cancelled since the last plan: drop their state (their blocks are freed).
  std::vector<std::uint64_t> finished;
  std::uint32_t scheduled_tokens = 0;
  [[nodiscard]] bool empty() const noexcept { return sequences.empty(); }
};

/// The backend's answer for one sequence whose scheduled_sequence::samples was set.
struct step_output {
  std::uint64_t id = 0;
  token_id token = 0;
  bool stop = false; ///< the backend's own stop criterion (the token is kept)
};

enum class finish_reason : std::uint8_t {
  max_tokens,    ///< max_new_tokens generated
  end_token,     ///< the end token generated
  max_model_len, ///< the sequence reached max_model_len tokens
  stopped,       ///< the backend said stop
};

/// A token generated, as update() reports it (in plan order).
struct generation_event {
  std::uint64_t id = 0;
  token_id token = 0;
  std::uint32_t generated = 0; ///< tokens generated so far, this one included
  bool finished = false;
  finish_reason reason = finish_reason::max_tokens; ///< when finished
};

/// Counters since construction.
struct iteration_scheduler_stats {
  std::uint64_t steps = 0;            ///< plans with at least one sequence
  std::uint64_t scheduled_tokens = 0; ///< summed over steps
  std::uint64_t preemptions = 0;
  std::uint64_t finished = 0;
  std::uint64_t cancelled = 0;
};

class iteration_scheduler_core {
public:
  /// Throws config_error (bad_value) when validate(options) does.
  SERVEKIT_DECL explicit iteration_scheduler_core(const iteration_batching_options& options);

  /// Queues a sequence. Refused (invalid_argument) when its prompt is empty or not shorter than
  /// max_model_len, max_new_tokens is 0, its id is in use, or its whole life could never fit the
  /// KV cache; no state changes then.
  SERVEKIT_DECL status add(generation_request r);

  /// Ends a sequence now: it gets no more tokens, its blocks are freed before the next plan
  /// names any block (at once, or by update() when a step that uses them is in flight; its id
  /// stays in use until then) and the next plan lists it as finished. False when the id is
  /// unknown (finished already, or never added) or already cancelled.
  SERVEKIT_DECL bool cancel(std::uint64_t id);

  /// The next step. `now` orders the slo_aware queue. An empty plan (nothing to run) needs no
  /// update(); otherwise update() must come before the next schedule().
  SERVEKIT_DECL const step_plan& schedule(time_point now);

  /// Applies the backend's outputs for the last plan: one per sequence that sampled, in any
  /// order (optional for one cancelled during the step, and then dropped). Appends a
  /// generation_event per token to `events` (plan order); finished sequences free their blocks.
  /// Refused (invalid_argument, nothing applied) when an output is missing, repeated or names a
  /// sequence that did not sample.
  SERVEKIT_DECL status update(std::span<const step_output> outputs,
                              std::vector<generation_event>& events);

  [[nodiscard]] bool in_step() const noexcept { return in_step_; }
  [[nodiscard]] std::size_t num_running() const noexcept { return running_.size(); }
  [[nodiscard]] std::size_t num_waiting() const noexcept { return waiting_.size(); }
  [[nodiscard]] bool idle() const noexcept { return running_.empty() && waiting_.empty(); }
  [[nodiscard]] const kv_block_pool& blocks() const noexcept { return pool_; }
  [[nodiscard]] const iteration_batching_options& options() const noexcept { return options_; }
  [[nodiscard]] const iteration_scheduler_stats& stats() const noexcept { return stats_; }
  /// A queued or running sequence's tokens (prompt and generated), or nullopt.
  [[nodiscard]] SERVEKIT_DECL std::optional<std::span<const token_id>>
  tokens_of(std::uint64_t id) const;
  /// A queued or running sequence's preemptions so far, or nullopt.
  [[nodiscard]] SERVEKIT_DECL std::optional<std::uint32_t> preemptions_of(std::uint64_t id) const;

private:
  using slot_index = std::uint32_t;
  static constexpr std::uint32_t no_entry = ~std::uint32_t{0};
  enum class place : std::uint8_t { free, waiting, running };

  struct sequence {
    std::uint64_t id = 0;
    std::vector<token_id> tokens;
    std::uint32_t prompt_len = 0;
    std::uint32_t max_new_tokens = 0;
    std::optional<token_id> end_token;
    std::uint32_t priority = 0;
    time_point arrival{};
    time_point ttft_deadline{};
    std::uint64_t order = 0;    // arrival order among adds (ties)
    std::uint32_t computed = 0; // tokens whose KV is computed (or scheduled in the step)
    std::vector<kv_block_id> blocks;
    std::size_t keyed_blocks = 0; // blocks given prefix-cache keys
    std::uint32_t preemptions = 0;
    std::uint32_t entry = no_entry; // its index in plan_.sequences during a step
    place where = place::free;
    bool cancelled = false; // in a step in flight: freed by update()
    bool announced = false; // in a plan since its admission
  };

  /// The KV blocks of its whole life: every token but the last, which ends it uncomputed.
  [[nodiscard]] SERVEKIT_DECL std::size_t lifetime_blocks(const sequence& s) const noexcept;
  [[nodiscard]] SERVEKIT_DECL std::uint32_t wanted_tokens(const sequence& s, std::uint32_t from,
                                                          std::uint32_t budget) const noexcept;
  SERVEKIT_DECL std::size_t pick_victim() const noexcept;
  SERVEKIT_DECL void preempt(std::size_t running_index, std::uint32_t& budget);
  SERVEKIT_DECL void order_waiting(time_point now);
  SERVEKIT_DECL void schedule_running(std::uint32_t& budget, bool& preempted);
  SERVEKIT_DECL void schedule_waiting(std::uint32_t& budget);
  SERVEKIT_DECL void record(slot_index s, std::uint32_t n);
  SERVEKIT_DECL void retire(slot_index s); // frees blocks and the slot; lists it as finished
  SERVEKIT_DECL void remove_running(slot_index s);

  iteration_batching_options options_;
  kv_block_pool pool_;
  std::vector<sequence> slots_;
  std::vector<slot_index> free_slots_;
  std::unordered_map<std::uint64_t, slot_index> index_;
  std::vector<slot_index> running_; // admission order
  std::deque<slot_index> waiting_;
  std::vector<slot_index> entry_slots_; // plan_.sequences[i] is slots_[entry_slots_[i]]
  std::vector<std::uint64_t> finished_pending_;
  std::vector<kv_block_id> hits_;      // scratch of schedule_waiting
  std::vector<std::uint32_t> answers_; // scratch of update
  step_plan plan_;
  bool in_step_ = false;
  std::uint64_t next_order_ = 0;
  iteration_scheduler_stats stats_;
};

} // namespace servekit

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/schedule/impl/iteration_scheduler_core.ipp>
#endif
