#pragma once
/// \file
/// The sequence batcher policy: Triton's scheduler for stateful models, with its direct and
/// oldest strategies and an implicit-state store.

#include <servekit/schedule/direct_sequence_core.hpp>
#include <servekit/schedule/oldest_sequence_core.hpp>
#include <servekit/schedule/scheduler.hpp>
#include <servekit/schedule/sequence_batching_options.hpp>
#include <servekit/state/host_state_store.hpp>

#include <concepts>
#include <type_traits>

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

namespace detail {
template <class S>
concept strategy_declares_core_type = requires {
  typename S::core_type;
};
template <class S>
concept strategy_declares_strategy = requires {
  requires std::same_as<std::remove_cvref_t<decltype(S::strategy)>, sequence_strategy>;
};
/// The strategy's core, or void when it declares none (check_sequence_strategy says so).
template <class S>
struct strategy_core {
  using type = void;
};
template <strategy_declares_core_type S>
struct strategy_core<S> {
  using type = typename S::core_type;
};
} // namespace detail

/// Checks the `Strategy` of `sequence_batcher<Strategy, Store>`, one message per missing member
/// (the strategy's type is this function's template argument, printed above the message), then
/// its core.
template <class S>
consteval bool check_sequence_strategy() {
  static_assert(detail::strategy_declares_core_type<S>,
                "servekit: a sequence batcher strategy (the Strategy of sequence_batcher<Strategy, "
                "Store>, e.g. servekit::direct) needs `using core_type = ...;`, its decision core "
                "(a servekit::pinned_scheduler_core)");
  static_assert(detail::strategy_declares_strategy<S>,
                "servekit: a sequence batcher strategy (the Strategy of sequence_batcher<Strategy, "
                "Store>) needs `static constexpr servekit::sequence_strategy strategy = ...;` "
                "(what the config's sequence_batching must ask for)");
  if constexpr (detail::strategy_declares_core_type<S>) {
    static_assert(check_pinned_scheduler_core<typename S::core_type>());
  }
  return true;
}

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
  static_assert(check_sequence_strategy<Strategy>());
  using policy_role = scheduler_role;
  using core_type = typename detail::strategy_core<Strategy>::type;
  using strategy_type = Strategy;
  using store_type = Store;
  static constexpr bool batches_requests = true;
  static constexpr bool batches_sequences = true;
};

} // namespace servekit
