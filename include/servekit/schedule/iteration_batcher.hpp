#pragma once
/// \file
/// The iteration batcher policy: a generative model scheduled per forward pass (continuous
/// batching) by iteration_scheduler_core, with KV-block accounting.
///
///     using my_llm_model = servekit::model<my_llm, servekit::iteration_batcher<>,
///                                          servekit::instance_group<1>>;
///
/// The backend is a generative_backend (runtime/generative_backend.hpp), not a batch backend:
/// it executes step plans. Its knobs come from the config's `parameters`
/// (schedule/iteration_batching_parameters.hpp); Triton's `sequence_batching { iterative_sequence:
/// true }` names this policy in a config.

#include <servekit/schedule/iteration_scheduler_core.hpp>
#include <servekit/schedule/scheduler.hpp>

namespace servekit {

/// Policy: per-step scheduling of a generative backend by `Core` (iteration_scheduler_core:
/// vLLM v1's rules, TensorRT-LLM's capacity policies). Each instance runs its own core over its
/// own KV cache, as each engine of a data-parallel deployment does.
template <class Core = iteration_scheduler_core>
struct iteration_batcher {
  using policy_role = scheduler_role;
  using core_type = Core;
  static constexpr bool batches_requests = true;
  static constexpr bool iterates = true;
};

} // namespace servekit
