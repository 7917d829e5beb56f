#pragma once
/// \file
/// The sequence batcher policy: Triton's scheduler for stateful models, with its direct and
/// oldest strategies and an implicit-state store.

#include <servekit/schedule/direct_sequence_core.hpp>
#include <servekit/schedule/oldest_sequence_core.hpp>
#include <servekit/schedule/scheduler.hpp>
#include <servekit/schedule/sequence_batching_options.hpp>
#include <servekit/state/host_state_store.hpp>

namespace servekit {

/// Strategy tag: each sequence owns a batch slot of an instance (Triton's `direct`).
struct direct {
  using core_type = direct_sequence_core;
  static constexpr sequence_strategy strategy = sequence_strategy::direct;
};

/// Strategy tag: a per-instance dynamic batcher over candidate sequences (Triton's `oldest`).
struct oldest {
  using core_type = oldest_sequence_core;
  static constexpr sequence_strategy strategy = sequence_strategy::oldest;
};

/// Policy: route every request of a sequence to one instance (and, under `direct`, one batch
/// slot), fill the control inputs, and keep the sequence's implicit state in a `Store` between
/// its requests. Configured by the model's `sequence_batching` options.
///
///     using model_t = servekit::model<my_rnn_backend,
///                                     servekit::sequence_batcher<servekit::direct,
///                                                                servekit::host_state_store>,
///                                     servekit::instance_group<2>>;
///
/// `Store` is any `state_store` (servekit/state); the model checks it when it is composed.
/// `sequence_batcher<>` is Triton's default: the direct strategy, implicit state in host memory
/// (the composition `named_backend` makes when a config asks for sequence batching).
template <class Strategy = direct, class Store = host_state_store>
struct sequence_batcher {
  using policy_role = scheduler_role;
  using core_type = typename Strategy::core_type;
  using strategy_type = Strategy;
  using store_type = Store;
  static constexpr bool batches_requests = true;
  static constexpr bool batches_sequences = true;
  static_assert(check_pinned_scheduler_core<core_type>());
};

} // namespace servekit
