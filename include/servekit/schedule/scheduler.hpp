#pragma once
/// \file
/// The scheduler role: what a decision core offers its shells, and the settings it is built from.

#include <servekit/backend/batch_compatibility.hpp>
#include <servekit/core/clock.hpp>
#include <servekit/core/status.hpp>
#include <servekit/queue/pending_request.hpp>
#include <servekit/schedule/batch_plan.hpp>
#include <servekit/schedule/dynamic_batching_options.hpp>
#include <servekit/schedule/sequence_batching_options.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace servekit {

/// Tag naming the scheduler role: a policy type opts in with `using policy_role =
/// scheduler_role;` so that nothing plays the role by accident.
struct scheduler_role {};

/// Everything a decision core needs to decide, resolved from the model's options.
struct scheduler_settings {
  std::string model_name;
  std::int32_t max_batch_size = 0;
  dynamic_batching_options dynamic_batching;
  batch_compatibility compatibility;
  /// Test hook (Triton's TRITONSERVER_DELAY_SCHEDULER): form no batch until this many requests
  /// are queued, once. 0: off.
  std::size_t hold_until_queued = 0;
  /// Sequence batching settings (used by the sequence batcher's cores).
  sequence_batching_options sequence_batching;
  /// Instances the model runs (cores that pin requests to instances need it).
  std::size_t instances = 1;
  /// Test hook (Triton's TRITONSERVER_BACKLOG_DELAY_SCHEDULER): the sequence batcher also
  /// forms no batch until this many requests wait in its backlog, once. 0: off.
  std::size_t hold_until_backlogged = 0;
};

/// A pure decision core: owns the waiting requests and answers events with decisions, given the
/// time. No threads, no clock reads, no responses: shells do those.
template <class C>
concept scheduler_core = std::constructible_from<C, const scheduler_settings&> &&
    requires(C& core, const C& ccore, pending_ptr p, time_point now, batch_plan& plan,
             early_exits& exits, const request& r) {
  // Queries of the immutable configuration: safe from any thread, while another thread
  // holds the core. The threaded shell uses them to admit requests without a lock.
  /// Priority level index of a request.
  { ccore.level_of(r) } -> std::same_as<std::uint32_t>;
  /// A level's max_queue_size (0: unbounded).
  { ccore.max_queue_size(std::uint32_t{}) } -> std::same_as<std::uint32_t>;
  /// When a request submitted now would time out in the queue, or `never`.
  { ccore.deadline_of(r) } -> std::same_as<time_point>;

  // Decisions: one thread at a time.
  /// Whether a level can take one more request (max_queue_size).
  { ccore.has_room(std::uint32_t{}) } -> std::same_as<bool>;
  /// Takes ownership of an admitted request.
  core.enqueue(std::move(p));
  /// Called when an instance is free: true and a batch in `plan`, or false (wait).
  { core.form_batch(now, plan, exits) } -> std::same_as<bool>;
  /// Applies the timeouts due at `now`.
  core.expire(now, exits);
  /// Removes requests whose cancellation token fired.
  core.collect_cancelled(exits);
  /// Removes everything (a cancelling shutdown).
  core.drain(exits);
  /// From now on, batch without waiting (a draining shutdown): no delay, no hold.
  core.flush();
  /// When the shell must call back (batching delay or a timeout), or `never`.
  { ccore.next_deadline() } -> std::same_as<time_point>;
  /// The earliest queue timeout alone, or `never`.
  { ccore.next_timeout() } -> std::same_as<time_point>;
  { ccore.size() } -> std::same_as<std::size_t>;
};

/// What a pinned core answers to a new request: accepted (and which instance now has work to
/// do, if any), or refused with the reason.
struct routing {
  static constexpr std::size_t no_instance = static_cast<std::size_t>(-1);
  status result;                      ///< not ok: refused; the request was not taken
  std::size_t instance = no_instance; ///< the instance to wake, if any
};

/// A decision core whose requests belong to one instance (the sequence batcher: a sequence
/// stays on its instance and slot). Shells ask it for a batch *for an instance*, tell it when
/// that batch has executed, and route wake-ups to the instance it names. The queries and
/// decisions are as for scheduler_core, all on one thread at a time.
template <class C>
concept pinned_scheduler_core = std::constructible_from<C, const scheduler_settings&> &&
    requires(C& core, const C& ccore, pending_ptr& p, time_point now, std::size_t instance,
             batch_plan& plan, early_exits& exits, std::vector<sequence_end>& ended) {
  /// Takes `p` (leaving it null) or refuses it, leaving it in place.
  { core.enqueue(p, now) } -> std::same_as<routing>;
  /// Called when `instance` is free: true and a batch in `plan`, or false (wait). Either way
  /// `plan.ended` lists sequences of the instance that ended without an END.
  { core.form_batch(instance, now, plan, exits) } -> std::same_as<bool>;
  /// The batch `plan` formed for `instance` has executed (called before plan is cleared).
  core.batch_done(instance, now, plan);
  core.expire(now, exits);
  core.collect_cancelled(exits);
  core.drain(exits);
  core.flush();
  /// Ends every sequence of `instance` still holding a slot (the model shuts down).
  core.close_instance(instance, ended);
  { ccore.next_deadline(instance) } -> std::same_as<time_point>;
  { ccore.next_timeout() } -> std::same_as<time_point>;
  { ccore.size() } -> std::same_as<std::size_t>;
  /// Whether work reached `instance` other than through enqueue (a backlogged sequence got one
  /// of its slots while another instance formed a batch); clears the flag.
  { core.take_woken(instance) } -> std::same_as<bool>;
  /// Slots (direct) or candidate sequences (oldest) per instance.
  { ccore.slots_per_instance() } -> std::same_as<std::size_t>;
};

} // namespace servekit
