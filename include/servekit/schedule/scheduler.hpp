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
#include <span>
#include <utility>
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

namespace detail {

// One concept per requirement of the decision cores, so that check_scheduler_core and
// check_pinned_scheduler_core can name the member that is missing.

/// `explicit C(const scheduler_settings&)`: built once, when the model loads.
template <class C>
concept core_constructible_from_settings = std::constructible_from<C, const scheduler_settings&>;

// Queries of the immutable configuration: safe from any thread, while another thread holds the
// core. The threaded shell uses them to admit requests without a lock.

/// `std::uint32_t level_of(const request&) const`: priority level index of a request.
template <class C>
concept core_has_level_of = requires(const C& ccore, const request& r) {
  { ccore.level_of(r) } -> std::same_as<std::uint32_t>;
};
/// `std::uint32_t max_queue_size(std::uint32_t level) const`: a level's max_queue_size
/// (0: unbounded).
template <class C>
concept core_has_max_queue_size = requires(const C& ccore) {
  { ccore.max_queue_size(std::uint32_t{}) } -> std::same_as<std::uint32_t>;
};
/// `time_point deadline_of(const request&) const`: when a request submitted now would time out
/// in the queue, or `never`.
template <class C>
concept core_has_deadline_of = requires(const C& ccore, const request& r) {
  { ccore.deadline_of(r) } -> std::same_as<time_point>;
};

// Decisions: one thread at a time.

/// `bool has_room(std::uint32_t level) const`: whether a level can take one more request.
template <class C>
concept core_has_has_room = requires(const C& ccore) {
  { ccore.has_room(std::uint32_t{}) } -> std::same_as<bool>;
};
/// `void enqueue(pending_ptr)`: takes ownership of an admitted request.
template <class C>
concept core_has_enqueue = requires(C& core, pending_ptr p) {
  core.enqueue(std::move(p));
};
/// `bool form_batch(time_point now, batch_plan&, early_exits&)`: called when an instance is
/// free: true and a batch in `plan`, or false (wait).
template <class C>
concept core_has_form_batch = requires(C& core, time_point now, batch_plan& plan,
                                       early_exits& exits) {
  { core.form_batch(now, plan, exits) } -> std::same_as<bool>;
};
/// `void expire(time_point now, early_exits&)`: applies the timeouts due at `now`.
template <class C>
concept core_has_expire = requires(C& core, time_point now, early_exits& exits) {
  core.expire(now, exits);
};
/// `void collect_cancelled(early_exits&)`: removes requests whose cancellation token fired.
template <class C>
concept core_has_collect_cancelled = requires(C& core, early_exits& exits) {
  core.collect_cancelled(exits);
};
/// `void drain(early_exits&)`: removes everything (a cancelling shutdown).
template <class C>
concept core_has_drain = requires(C& core, early_exits& exits) {
  core.drain(exits);
};
/// `void flush()`: from now on, batch without waiting (a draining shutdown): no delay, no hold.
template <class C>
concept core_has_flush = requires(C& core) {
  core.flush();
};
/// `time_point next_deadline() const`: when the shell must call back (batching delay or a
/// timeout), or `never`.
template <class C>
concept core_has_next_deadline = requires(const C& ccore) {
  { ccore.next_deadline() } -> std::same_as<time_point>;
};
/// `time_point next_timeout() const`: the earliest queue timeout alone, or `never`.
template <class C>
concept core_has_next_timeout = requires(const C& ccore) {
  { ccore.next_timeout() } -> std::same_as<time_point>;
};
/// `std::size_t size() const`: requests it holds.
template <class C>
concept core_has_size = requires(const C& ccore) {
  { ccore.size() } -> std::same_as<std::size_t>;
};

} // namespace detail

/// A pure decision core: owns the waiting requests and answers events with decisions, given the
/// time. No threads, no clock reads, no responses: shells do those. The requirements, one per
/// member, are the detail::core_* concepts above; check_scheduler_core names a missing one.
template <class C>
concept scheduler_core =
    detail::core_constructible_from_settings<C> && detail::core_has_level_of<C> &&
    detail::core_has_max_queue_size<C> && detail::core_has_deadline_of<C> &&
    detail::core_has_has_room<C> && detail::core_has_enqueue<C> && detail::core_has_form_batch<C> &&
    detail::core_has_expire<C> && detail::core_has_collect_cancelled<C> &&
    detail::core_has_drain<C> && detail::core_has_flush<C> && detail::core_has_next_deadline<C> &&
    detail::core_has_next_timeout<C> && detail::core_has_size<C>;

/// Optional member of a scheduler core that learns from executions (the adaptive batcher):
/// `void batch_done(time_point started, time_point finished, std::int64_t elements,
/// std::span<const time_point> arrivals)`. Shells call it once for each batch the core formed,
/// after it executed: when, its elements, and the arrival of each of its requests.
template <class C>
concept core_observes_batches = requires(C& core, time_point t, std::int64_t elements,
                                         std::span<const time_point> arrivals) {
  core.batch_done(t, t, elements, arrivals);
};

/// What a pinned core answers to a new request: accepted (and which instance now has work to
/// do, if any), or refused with the reason.
struct routing {
  static constexpr std::size_t no_instance = static_cast<std::size_t>(-1);
  status result;                      ///< not ok: refused; the request was not taken
  std::size_t instance = no_instance; ///< the instance to wake, if any
};

namespace detail {

/// `routing enqueue(pending_ptr&, time_point now)`: takes `p` (leaving it null) or refuses it,
/// leaving it in place.
template <class C>
concept pinned_core_has_enqueue = requires(C& core, pending_ptr& p, time_point now) {
  { core.enqueue(p, now) } -> std::same_as<routing>;
};
/// `bool form_batch(std::size_t instance, time_point now, batch_plan&, early_exits&)`: called
/// when `instance` is free: true and a batch in `plan`, or false (wait). Either way
/// `plan.ended` lists sequences of the instance that ended without an END.
template <class C>
concept pinned_core_has_form_batch = requires(C& core, std::size_t instance, time_point now,
                                              batch_plan& plan, early_exits& exits) {
  { core.form_batch(instance, now, plan, exits) } -> std::same_as<bool>;
};
/// `void batch_done(std::size_t instance, time_point now, batch_plan&)`: the batch `plan`
/// formed for `instance` has executed (called before plan is cleared).
template <class C>
concept pinned_core_has_batch_done = requires(C& core, std::size_t instance, time_point now,
                                              batch_plan& plan) {
  core.batch_done(instance, now, plan);
};
/// `void close_instance(std::size_t instance, std::vector<sequence_end>&)`: ends every sequence
/// of `instance` still holding a slot (the model shuts down).
template <class C>
concept pinned_core_has_close_instance = requires(C& core, std::size_t instance,
                                                  std::vector<sequence_end>& ended) {
  core.close_instance(instance, ended);
};
/// `time_point next_deadline(std::size_t instance) const`.
template <class C>
concept pinned_core_has_next_deadline = requires(const C& ccore, std::size_t instance) {
  { ccore.next_deadline(instance) } -> std::same_as<time_point>;
};
/// `bool take_woken(std::size_t instance)`: whether work reached `instance` other than through
/// enqueue (a backlogged sequence got one of its slots while another instance formed a batch);
/// clears the flag.
template <class C>
concept pinned_core_has_take_woken = requires(C& core, std::size_t instance) {
  { core.take_woken(instance) } -> std::same_as<bool>;
};
/// `std::size_t slots_per_instance() const`: slots (direct) or candidate sequences (oldest)
/// per instance.
template <class C>
concept pinned_core_has_slots_per_instance = requires(const C& ccore) {
  { ccore.slots_per_instance() } -> std::same_as<std::size_t>;
};

} // namespace detail

/// A decision core whose requests belong to one instance (the sequence batcher: a sequence
/// stays on its instance and slot). Shells ask it for a batch *for an instance*, tell it when
/// that batch has executed, and route wake-ups to the instance it names. The queries and
/// decisions are as for scheduler_core, all on one thread at a time; check_pinned_scheduler_core
/// names a missing member.
template <class C>
concept pinned_scheduler_core =
    detail::core_constructible_from_settings<C> && detail::pinned_core_has_enqueue<C> &&
    detail::pinned_core_has_form_batch<C> && detail::pinned_core_has_batch_done<C> &&
    detail::core_has_expire<C> && detail::core_has_collect_cancelled<C> &&
    detail::core_has_drain<C> && detail::core_has_flush<C> &&
    detail::pinned_core_has_close_instance<C> && detail::pinned_core_has_next_deadline<C> &&
    detail::core_has_next_timeout<C> && detail::core_has_size<C> &&
    detail::pinned_core_has_take_woken<C> && detail::pinned_core_has_slots_per_instance<C>;

/// Checks a scheduler core (the `core_type` of a scheduler policy other than the sequence
/// batcher) with one readable message per missing member. model<...> calls it first, so users
/// see these messages rather than "constraints not satisfied".
template <class C>
consteval bool check_scheduler_core() {
  static_assert(detail::core_constructible_from_settings<C>,
                "servekit: a scheduler core needs a public constructor "
                "`explicit C(const servekit::scheduler_settings&)` and a public destructor");
  static_assert(detail::core_has_level_of<C>,
                "servekit: a scheduler core needs "
                "`std::uint32_t level_of(const servekit::request&) const`");
  static_assert(detail::core_has_max_queue_size<C>,
                "servekit: a scheduler core needs "
                "`std::uint32_t max_queue_size(std::uint32_t level) const`");
  static_assert(detail::core_has_deadline_of<C>,
                "servekit: a scheduler core needs "
                "`servekit::time_point deadline_of(const servekit::request&) const`");
  static_assert(detail::core_has_has_room<C>, "servekit: a scheduler core needs "
                                              "`bool has_room(std::uint32_t level) const`");
  static_assert(detail::core_has_enqueue<C>,
                "servekit: a scheduler core needs `void enqueue(servekit::pending_ptr)`");
  static_assert(detail::core_has_form_batch<C>,
                "servekit: a scheduler core needs `bool form_batch(servekit::time_point now, "
                "servekit::batch_plan&, servekit::early_exits&)`");
  static_assert(detail::core_has_expire<C>,
                "servekit: a scheduler core needs "
                "`void expire(servekit::time_point now, servekit::early_exits&)`");
  static_assert(detail::core_has_collect_cancelled<C>,
                "servekit: a scheduler core needs "
                "`void collect_cancelled(servekit::early_exits&)`");
  static_assert(detail::core_has_drain<C>,
                "servekit: a scheduler core needs `void drain(servekit::early_exits&)`");
  static_assert(detail::core_has_flush<C>, "servekit: a scheduler core needs `void flush()`");
  static_assert(detail::core_has_next_deadline<C>,
                "servekit: a scheduler core needs `servekit::time_point next_deadline() const`");
  static_assert(detail::core_has_next_timeout<C>,
                "servekit: a scheduler core needs `servekit::time_point next_timeout() const`");
  static_assert(detail::core_has_size<C>,
                "servekit: a scheduler core needs `std::size_t size() const`");
  return true;
}

/// The same for a pinned scheduler core (the `core_type` of a sequence batcher's strategy).
template <class C>
consteval bool check_pinned_scheduler_core() {
  static_assert(detail::core_constructible_from_settings<C>,
                "servekit: a pinned scheduler core needs a public constructor "
                "`explicit C(const servekit::scheduler_settings&)` and a public destructor");
  static_assert(detail::pinned_core_has_enqueue<C>,
                "servekit: a pinned scheduler core needs "
                "`servekit::routing enqueue(servekit::pending_ptr&, servekit::time_point now)`");
  static_assert(detail::pinned_core_has_form_batch<C>,
                "servekit: a pinned scheduler core needs `bool form_batch(std::size_t instance, "
                "servekit::time_point now, servekit::batch_plan&, servekit::early_exits&)`");
  static_assert(detail::pinned_core_has_batch_done<C>,
                "servekit: a pinned scheduler core needs `void batch_done(std::size_t instance, "
                "servekit::time_point now, servekit::batch_plan&)`");
  static_assert(detail::core_has_expire<C>,
                "servekit: a pinned scheduler core needs "
                "`void expire(servekit::time_point now, servekit::early_exits&)`");
  static_assert(detail::core_has_collect_cancelled<C>,
                "servekit: a pinned scheduler core needs "
                "`void collect_cancelled(servekit::early_exits&)`");
  static_assert(detail::core_has_drain<C>,
                "servekit: a pinned scheduler core needs `void drain(servekit::early_exits&)`");
  static_assert(detail::core_has_flush<C>,
                "servekit: a pinned scheduler core needs `void flush()`");
  static_assert(detail::pinned_core_has_close_instance<C>,
                "servekit: a pinned scheduler core needs `void close_instance(std::size_t "
                "instance, std::vector<servekit::sequence_end>&)`");
  static_assert(detail::pinned_core_has_next_deadline<C>,
                "servekit: a pinned scheduler core needs "
                "`servekit::time_point next_deadline(std::size_t instance) const`");
  static_assert(detail::core_has_next_timeout<C>, "servekit: a pinned scheduler core needs "
                                                  "`servekit::time_point next_timeout() const`");
  static_assert(detail::core_has_size<C>,
                "servekit: a pinned scheduler core needs `std::size_t size() const`");
  static_assert(detail::pinned_core_has_take_woken<C>,
                "servekit: a pinned scheduler core needs `bool take_woken(std::size_t instance)`");
  static_assert(detail::pinned_core_has_slots_per_instance<C>,
                "servekit: a pinned scheduler core needs "
                "`std::size_t slots_per_instance() const`");
  return true;
}

} // namespace servekit
