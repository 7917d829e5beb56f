#pragma once
/// \file
/// model<Backend, Policies...>: the composition root. It picks the policies, resolves the
/// configuration, validates requests and keeps the statistics; runtime/threaded_shell.hpp runs it.

#include <servekit/backend/backend.hpp>
#include <servekit/backend/request_validator.hpp>
#include <servekit/cache/cache_eligibility.hpp>
#include <servekit/cache/detail/cached_submit.hpp>
#include <servekit/cache/response_cache.hpp>
#include <servekit/core/clock.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/response_sink.hpp>
#include <servekit/metrics/statistics.hpp>
#include <servekit/runtime/auto_complete.hpp>
#include <servekit/runtime/config_bounds.hpp>
#include <servekit/runtime/detail/infer.hpp>
#include <servekit/runtime/detail/policy_pack.hpp>
#include <servekit/runtime/instance_group.hpp>
#include <servekit/runtime/model_environment.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/runtime/resolved_config.hpp>
#include <servekit/runtime/sequence_shell.hpp>
#include <servekit/runtime/threaded_shell.hpp>
#include <servekit/schedule/default_scheduler.hpp>
#include <servekit/schedule/dynamic_batcher.hpp>
#include <servekit/schedule/scheduler.hpp>
#include <servekit/schedule/sequence_batcher.hpp>
#include <servekit/state/state_store.hpp>

// After dynamic_batcher.hpp on purpose: a batch rule's static_assert is then reached through this
// file's own include of it, and clang's "In file included from" chain above the message stays
// two lines long (tests/compile_fail checks the rule is named within the first ten lines).
#include <servekit/runtime/adaptive_statistics.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace servekit {

namespace detail {
template <class... Policies>
consteval bool check_policies() {
  static_assert((has_policy_role<Policies> && ...),
                "servekit: every policy of model<Backend, Policies...> must name its role with a "
                "nested `using policy_role = ...;` (e.g. servekit::dynamic_batcher<>, "
                "servekit::instance_group<2>)");
  static_assert(
      ((plays_role<Policies, scheduler_role>() || plays_role<Policies, instance_group_role>()) &&
       ...),
      "servekit: model<Backend, Policies...> got a policy whose role it does not know "
      "(known roles: scheduler_role, instance_group_role)");
  static_assert(role_count<scheduler_role, Policies...> <= 1,
                "servekit: model<Backend, Policies...> got more than one scheduler policy");
  static_assert(role_count<instance_group_role, Policies...> <= 1,
                "servekit: model<Backend, Policies...> got more than one instance_group policy");
  return true;
}

/// Whether scheduler policy `P` is the sequence batcher.
template <class P>
concept sequence_policy = requires {
  requires P::batches_sequences;
  typename P::store_type;
  typename P::strategy_type;
};

/// `using core_type = ...;`: the policy's decision core.
template <class P>
concept scheduler_policy_declares_core_type = requires {
  typename P::core_type;
};
/// `static constexpr bool batches_requests = ...;`: whether it puts several requests in a batch.
template <class P>
concept scheduler_policy_declares_batches_requests = requires {
  requires std::same_as < std::remove_cvref_t<decltype(P::batches_requests)>,
  bool > ;
};

/// A scheduler policy the threaded shell can run: its core is a scheduler_core.
template <class P>
concept usable_shared_policy =
    scheduler_policy_declares_batches_requests<P> && !sequence_policy<P> &&
    scheduler_core<typename P::core_type>;
/// A sequence batcher the sequence shell can run: a pinned core and a state store.
template <class P>
concept usable_sequence_policy =
    scheduler_policy_declares_batches_requests<P> && sequence_policy<P> &&
    pinned_scheduler_core<typename P::core_type> && state_store<typename P::store_type>;

/// Checks the scheduler policy of a model, then its core (and a sequence batcher's state
/// store), with one readable message per missing member.
template <class P>
consteval bool check_scheduler_policy() {
  static_assert(scheduler_policy_declares_core_type<P>,
                "servekit: a scheduler policy needs `using core_type = ...;`, its decision core "
                "(a servekit::scheduler_core)");
  static_assert(scheduler_policy_declares_batches_requests<P>,
                "servekit: a scheduler policy needs `static constexpr bool batches_requests = "
                "...;` (whether it puts several requests in one batch)");
  if constexpr (sequence_policy<P>) {
    // void: a strategy without a core, which sequence_batcher's own check has reported.
    if constexpr (!std::is_void_v<typename P::core_type>) {
      static_assert(check_pinned_scheduler_core<typename P::core_type>());
    }
    static_assert(check_state_store<typename P::store_type>());
  } else if constexpr (scheduler_policy_declares_core_type<P>) {
    static_assert(check_scheduler_core<typename P::core_type>());
  }
  return true;
}

/// The policy's core_type, or void when it declares none (check_scheduler_policy says so).
template <class P>
struct core_type_of {
  using type = void;
};
template <scheduler_policy_declares_core_type P>
struct core_type_of<P> {
  using type = typename P::core_type;
};

template <class P>
consteval bool batches_requests_of() {
  if constexpr (scheduler_policy_declares_batches_requests<P>) {
    return P::batches_requests;
  } else {
    return false;
  }
}

template <class P>
consteval scheduler_kind scheduler_kind_of() {
  if constexpr (sequence_policy<P>) {
    return P::strategy_type::strategy == sequence_strategy::direct
               ? scheduler_kind::sequence_direct
               : scheduler_kind::sequence_oldest;
  } else {
    return batches_requests_of<P>() ? scheduler_kind::dynamic_batcher
                                    : scheduler_kind::default_scheduler;
  }
}

/// What a model holds in place of a shell when its scheduler policy fails its checks: it takes
/// any constructor arguments and declares what model<...> calls, so that check_scheduler_policy's
/// messages are not followed by the shells' constraint failures. Never defined: such a model
/// does not compile.
struct unusable_shell {
  template <class... Args>
  explicit unusable_shell(Args&&...) noexcept {}
  template <class... Args>
  status submit(Args&&...);
  template <class... Args>
  void cancel(Args&&...);
  template <class... Args>
  void shutdown(Args&&...);
  [[nodiscard]] std::size_t instance_count() const noexcept;
  [[nodiscard]] const unusable_shell& states() const noexcept;
};

template <class Backend, class P>
struct shell_for {
  using type = unusable_shell;
};
template <class Backend, usable_shared_policy P>
struct shell_for<Backend, P> {
  using type = threaded_shell<Backend, typename P::core_type>;
};
template <class Backend, usable_sequence_policy P>
struct shell_for<Backend, P> {
  using type = sequence_shell<Backend, typename P::core_type, typename P::store_type>;
};
} // namespace detail

/// A model: `Backend` instances behind a scheduler, composed at compile time.
///
///     using add_sub = servekit::model<add_sub_backend, servekit::dynamic_batcher<>,
///                                     servekit::instance_group<2>>;
///     add_sub m{options};
///     m.submit(std::move(request), [](servekit::response&& r) { ... });
///
/// Policies (any order, each optional): a scheduler (`default_scheduler`, the default,
/// `dynamic_batcher<>` or `sequence_batcher<direct|oldest, Store>`) and an `instance_group<N>`.
/// Their numbers come from `model_options`.
///
/// The model checks its pieces at compile time, resolves its configuration, validates requests
/// at submit and keeps the statistics; a `threaded_shell` runs the instances.
template <class Backend, class... Policies>
class model {
  static_assert(check_backend<Backend>());
  static_assert(detail::check_policies<Policies...>());
  static_assert(detail::check_scheduler_policy<
                detail::find_role_t<scheduler_role, default_scheduler, Policies...>>());
  static_assert(check_instance_group_policy<
                detail::find_role_t<instance_group_role, instance_group<1>, Policies...>>());

public:
  using backend_type = Backend;
  using traits = backend_traits<Backend>;
  using scheduler_policy = detail::find_role_t<scheduler_role, default_scheduler, Policies...>;
  using instance_group_policy =
      detail::find_role_t<instance_group_role, instance_group<1>, Policies...>;
  using core_type = typename detail::core_type_of<scheduler_policy>::type;
  static constexpr bool sequence_batching = detail::sequence_policy<scheduler_policy>;
  using shell_type = typename detail::shell_for<Backend, scheduler_policy>::type;
  static_assert(!detail::batches_requests_of<scheduler_policy>() || sequence_batching ||
                    traits::batching,
                "servekit: a batching scheduler needs a backend that allows batching "
                "(its `batching` is false)");

  /// Builds every instance (calling each backend's constructor on this thread) and starts
  /// their threads. Throws config_error for a bad configuration or a backend that throws.
  /// `environment` holds what the model shares with other models (rate limiter, cache).
  explicit model(model_options options = {}, test_hooks hooks = {},
                 model_environment environment = {})
      : options_{with_placed_instance_groups(auto_completed<Backend>(std::move(options)))},
        config_{resolve_config<Backend>(options_, detail::scheduler_kind_of<scheduler_policy>(),
                                        hooks)},
        validator_{options_.name, config_.max_batch_size, config_.inputs, config_.outputs},
        placements_{checked_placements()}, // of the instance groups resolved above
        stats_{static_cast<std::size_t>(std::max(config_.max_batch_size, 1)), instance_names()},
        environment_{std::move(environment)}, cache_{checked_cache(options_, environment_)},
        shell_{options_, config_, placements_, stats_, environment_} {}

  model(const model&) = delete;
  model& operator=(const model&) = delete;

  /// Drains (see `shutdown`) if it was not shut down explicitly.
  ~model() = default;

  /// Accepts `r` for execution, or says why not. Accepted requests get exactly one final
  /// response through `sink`, on an instance thread (or, for a response cache hit, on this
  /// thread before submit returns; see docs/response-cache.md). A rejected request is not answered
  /// through `sink`: the returned status is the answer (`invalid_argument` for bad input, naming
  /// it; `unavailable` for a full queue or a model shutting down).
  [[nodiscard]] status submit(request&& r, response_sink sink) {
    return enter<false>(std::move(r), std::move(sink));
  }

  /// submit(), executing on this thread when the backend allows it (`execute_on_any_thread`),
  /// an instance is free and nothing is queued: then `sink` has the response before this returns.
  /// Otherwise exactly submit(). What infer_sync uses: a caller that waits anyway does the work.
  [[nodiscard]] status submit_here(request&& r, response_sink sink) {
    return enter<true>(std::move(r), std::move(sink));
  }

  /// The same, as a future. A rejected request's future holds the failed response.
  [[nodiscard]] std::future<response> infer(request&& r) {
    return detail::infer_with(*this, std::move(r));
  }

  /// The same, waiting on this thread for the final response: spins for `spin`, then sleeps
  /// (see sync_response_spin). A rejected request returns the failed response.
  [[nodiscard]] response infer_sync(request&& r, duration spin = sync_response_spin) {
    return detail::infer_sync_with(*this, std::move(r), spin);
  }

  /// Cancels the requests whose tokens come from `source`. Queued ones are answered with
  /// `cancelled` before this returns; one already executing finishes normally.
  void cancel(cancellation_source& source) { shell_.cancel(source); }

  /// Stops accepting requests and stops the instance threads, explicitly choosing what happens
  /// to queued requests. Idempotent; returns when every instance thread has finished.
  void shutdown(shutdown_mode mode) { shell_.shutdown(mode); }

  [[nodiscard]] statistics_snapshot statistics() const {
    statistics_snapshot s = stats_.snapshot();
    if constexpr (reports_adaptive_batching<core_type>) {
      s.adaptive_batching = shell_.inspect_core(
          [](const core_type& core, time_point now) { return adaptive_snapshot(core, now); });
    }
    return s;
  }
  /// The options the model runs with: as given, with `instance_group` resolved as Triton's
  /// config endpoint shows it (KIND_AUTO replaced by where the instances run, GPU lists filled).
  [[nodiscard]] const model_options& options() const noexcept { return options_; }
  [[nodiscard]] const std::string& name() const noexcept { return options_.name; }
  [[nodiscard]] std::int64_t version() const noexcept { return options_.version; }

  /// Fills in what `config` (options() or a copy, as a config endpoint shows the model) leaves
  /// to the model's type, as Triton's auto-complete does: inputs, outputs and max_batch_size as
  /// resolved, the scheduler's block as composed (`dynamic_batching` or `sequence_batching`
  /// with the settings it runs with) and `model_transaction_policy` for a decoupled backend.
  void complete_options(model_options& config) const {
    if (config.input.empty()) {
      config.input = config_.inputs;
    }
    if (config.output.empty()) {
      config.output = config_.outputs;
    }
    if (!config.max_batch_size) {
      config.max_batch_size = config_.max_batch_size;
    }
    constexpr auto kind = detail::scheduler_kind_of<scheduler_policy>();
    if constexpr (kind == scheduler_kind::dynamic_batcher) {
      if (!config.dynamic_batching) {
        config.dynamic_batching = config_.scheduler.dynamic_batching;
      }
    } else if constexpr (sequence_batching) {
      if (!config.sequence_batching) {
        config.sequence_batching = config_.scheduler.sequence_batching;
      }
    }
    if (traits::decoupled && !config.model_transaction_policy) {
      config.model_transaction_policy = model_transaction_policy_options{.decoupled = true};
    }
  }

  [[nodiscard]] std::int32_t max_batch_size() const noexcept { return config_.max_batch_size; }
  [[nodiscard]] std::span<const tensor_config> inputs() const noexcept { return config_.inputs; }
  [[nodiscard]] std::span<const tensor_config> outputs() const noexcept { return config_.outputs; }
  [[nodiscard]] std::size_t instance_count() const noexcept { return shell_.instance_count(); }
  /// The server-wide objects it was given (rate limiter, response cache).
  [[nodiscard]] const model_environment& environment() const noexcept { return environment_; }

  /// The implicit-state store (sequence batcher only): live_sequences(), bytes_in_use().
  [[nodiscard]] const auto& states() const noexcept requires sequence_batching {
    return shell_.states();
  }

private:
  template <bool Here>
  [[nodiscard]] status enter(request&& r, response_sink sink) {
    if (!sink) {
      return invalid_argument("submit to model '" + options_.name + "' needs a response sink");
    }
    std::int64_t elements = 1;
    if (auto s = validator_.validate(r, elements); !s.ok()) {
      return s;
    }
    const auto to_shell = [this, elements](request&& q, response_sink s) {
      if constexpr (Here &&
                    requires { shell_.submit_here(std::move(q), std::move(s), elements); }) {
        return shell_.submit_here(std::move(q), std::move(s), elements);
      } else {
        return shell_.submit(std::move(q), std::move(s), elements);
      }
    };
    if (cache_ != nullptr) [[unlikely]] {
      return detail::cached_submit(*cache_, options_.name, options_.version, std::move(r),
                                   std::move(sink), stats_, to_shell);
    }
    return to_shell(std::move(r), std::move(sink));
  }

  /// What placement may assume of GPUs: the backend's count, if it runs on GPUs at all.
  [[nodiscard]] static std::optional<int> visible_gpus() noexcept {
    if constexpr (traits::runs_on_gpus) {
      return traits::device_count();
    } else {
      return std::nullopt;
    }
  }

  /// The instances' placements, once a sequence model's slots (an entry each of the sequence
  /// table made at load) are within max_sequence_slots_per_model.
  [[nodiscard]] std::vector<instance_placement> checked_placements() const {
    auto placements = expand_instance_groups(options_.instance_group);
    if constexpr (sequence_batching) {
      const auto& s = config_.scheduler.sequence_batching;
      const auto candidates = s.oldest.max_candidate_sequences;
      const auto slots = s.strategy == sequence_strategy::oldest && candidates > 0
                             ? candidates
                             : std::max(config_.max_batch_size, std::int32_t{1});
      detail::check_sequence_slots(placements.size(), static_cast<std::size_t>(slots));
    }
    return placements;
  }

  [[nodiscard]] static model_options with_placed_instance_groups(model_options options) {
    options.instance_group = resolve_instance_groups(
        options.name, options.instance_group, instance_group_policy::default_count, visible_gpus());
    return options;
  }

  /// The cache this model's responses go through: the environment's, when the model enables
  /// `response_cache`. Refuses, as Triton does, a cache on models that may answer a request
  /// with several responses (decoupled) or whose responses depend on earlier requests
  /// (sequence batching), whether or not the server has a cache.
  [[nodiscard]] static response_cache* checked_cache(const model_options& options,
                                                     const model_environment& environment) {
    if (!options.response_cache || !options.response_cache->enable) {
      return nullptr;
    }
    const bool decoupled = traits::decoupled || (options.model_transaction_policy &&
                                                 options.model_transaction_policy->decoupled);
    check_response_cache_allowed(options.name, decoupled, sequence_batching);
    return environment.cache.get();
  }

  [[nodiscard]] std::vector<std::string> instance_names() const {
    std::vector<std::string> names;
    for (const auto& p : placements_) {
      names.push_back(p.name);
    }
    return names;
  }

  model_options options_;
  resolved_config config_;
  request_validator validator_;
  std::vector<instance_placement> placements_;
  model_statistics stats_;
  model_environment environment_;
  response_cache* cache_; ///< null unless response_cache is enabled and the server has a cache
  shell_type shell_;      // last: destroyed, and so drained, first
};

} // namespace servekit

// The specialisation for generative backends (model<Backend, iteration_batcher<>, ...>), visible
// wherever model<> is.
#include <servekit/runtime/generative_model.hpp>
