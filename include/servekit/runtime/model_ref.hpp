#pragma once
/// \file
/// servable: what a model, an ensemble or anything else a client can submit to provides; and
/// model_ref, a non-owning handle to any servable, for code that picks models by name at run
/// time (configured ensembles, the example server).

#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/core/cancellation.hpp>
#include <servekit/core/clock.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response_sink.hpp>
#include <servekit/core/status.hpp>
#include <servekit/metrics/statistics.hpp>
#include <servekit/runtime/detail/infer.hpp>

#include <concepts>
#include <cstdint>
#include <future>
#include <span>
#include <string_view>
#include <utility>

namespace servekit {

namespace detail {

// One concept per requirement of servable, so that check_servable can name a missing member.

/// `status submit(request&&, response_sink)`: accepts a request, or says why not.
template <class M>
concept servable_has_submit = requires(M& m, request&& r, response_sink&& sink) {
  { m.submit(std::move(r), std::move(sink)) } -> std::same_as<status>;
};
/// `void cancel(cancellation_source&)`.
template <class M>
concept servable_has_cancel = requires(M& m, cancellation_source& source) {
  m.cancel(source);
};
/// `std::string_view name() const`.
template <class M>
concept servable_has_name = requires(const M& cm) {
  { cm.name() } -> std::convertible_to<std::string_view>;
};
/// `std::int64_t version() const`.
template <class M>
concept servable_has_version = requires(const M& cm) {
  { cm.version() } -> std::convertible_to<std::int64_t>;
};
/// `std::int32_t max_batch_size() const`.
template <class M>
concept servable_has_max_batch_size = requires(const M& cm) {
  { cm.max_batch_size() } -> std::convertible_to<std::int32_t>;
};
/// `std::span<const tensor_config> inputs() const` and `outputs() const`.
template <class M>
concept servable_has_inputs = requires(const M& cm) {
  { cm.inputs() } -> std::convertible_to<std::span<const tensor_config>>;
};
template <class M>
concept servable_has_outputs = requires(const M& cm) {
  { cm.outputs() } -> std::convertible_to<std::span<const tensor_config>>;
};
/// `statistics_snapshot statistics() const`.
template <class M>
concept servable_has_statistics = requires(const M& cm) {
  { cm.statistics() } -> std::convertible_to<statistics_snapshot>;
};
/// A nested `traits` with what is known at compile time: `inputs`, `outputs` (spans of
/// tensor_declaration) and `decoupled`.
template <class M>
concept servable_has_traits = requires {
  { M::traits::inputs } -> std::convertible_to<std::span<const tensor_declaration>>;
  { M::traits::outputs } -> std::convertible_to<std::span<const tensor_declaration>>;
  { M::traits::decoupled } -> std::convertible_to<bool>;
};

} // namespace detail

/// A model as its clients see it. `model<...>`, `ensemble<...>` and `runtime_ensemble` are
/// servable; so is a user's class with the same members (the detail::servable_has_* concepts
/// above; check_servable names a missing one). `M::traits` gives what is known at compile time
/// (declared inputs/outputs, `decoupled`), which is what compile-time ensembles check their
/// connections with.
template <class M>
concept servable = detail::servable_has_submit<M> && detail::servable_has_cancel<M> &&
    detail::servable_has_name<M> && detail::servable_has_version<M> &&
    detail::servable_has_max_batch_size<M> && detail::servable_has_inputs<M> &&
    detail::servable_has_outputs<M> && detail::servable_has_statistics<M> &&
    detail::servable_has_traits<M>;

/// Checks a user's servable with one readable message per missing member. any_model::make and
/// ensemble steps call it first, so users see these messages rather than "constraints not
/// satisfied".
template <class M>
consteval bool check_servable() {
  static_assert(detail::servable_has_submit<M>,
                "servekit: a servable needs "
                "`servekit::status submit(servekit::request&&, servekit::response_sink)`");
  static_assert(detail::servable_has_cancel<M>,
                "servekit: a servable needs `void cancel(servekit::cancellation_source&)`");
  static_assert(detail::servable_has_name<M>,
                "servekit: a servable needs `std::string_view name() const`");
  static_assert(detail::servable_has_version<M>,
                "servekit: a servable needs `std::int64_t version() const`");
  static_assert(detail::servable_has_max_batch_size<M>,
                "servekit: a servable needs `std::int32_t max_batch_size() const`");
  static_assert(detail::servable_has_inputs<M>,
                "servekit: a servable needs "
                "`std::span<const servekit::tensor_config> inputs() const`");
  static_assert(detail::servable_has_outputs<M>,
                "servekit: a servable needs "
                "`std::span<const servekit::tensor_config> outputs() const`");
  static_assert(detail::servable_has_statistics<M>,
                "servekit: a servable needs `servekit::statistics_snapshot statistics() const`");
  static_assert(detail::servable_has_traits<M>,
                "servekit: a servable needs a nested `traits` with `static constexpr` "
                "`inputs` and `outputs` (std::span<const servekit::tensor_declaration>) and `bool "
                "decoupled` (e.g. `using traits = servekit::backend_traits<my_backend>;`)");
  return true;
}

/// A non-owning, copyable handle to a servable: one indirect call per use. The servable must
/// outlive the handle.
class model_ref {
public:
  template <servable M>
  model_ref(M& m) noexcept // NOLINT: implicit by design
      : self_{&m}, ops_{&ops_for<M>} {}

  [[nodiscard]] status submit(request&& r, response_sink sink) const {
    return ops_->submit(self_, std::move(r), std::move(sink));
  }
  /// submit() as a future; a rejected request's future holds the failed response.
  [[nodiscard]] std::future<response> infer(request&& r) const {
    return detail::infer_with(*this, std::move(r));
  }
  /// submit(), waiting on this thread for the final response: spins for `spin`, then sleeps (see
  /// sync_response_spin). A rejected request returns the failed response.
  [[nodiscard]] response infer_sync(request&& r, duration spin = sync_response_spin) const {
    return detail::infer_sync_with(*this, std::move(r), spin);
  }
  /// The servable's submit_here (model<>: execute on this thread when it can), else submit.
  [[nodiscard]] status submit_here(request&& r, response_sink sink) const {
    return ops_->submit_here(self_, std::move(r), std::move(sink));
  }
  void cancel(cancellation_source& source) const { ops_->cancel(self_, source); }
  [[nodiscard]] std::string_view name() const { return ops_->name(self_); }
  [[nodiscard]] std::int64_t version() const { return ops_->version(self_); }
  [[nodiscard]] std::int32_t max_batch_size() const { return ops_->max_batch_size(self_); }
  [[nodiscard]] std::span<const tensor_config> inputs() const { return ops_->inputs(self_); }
  [[nodiscard]] std::span<const tensor_config> outputs() const { return ops_->outputs(self_); }
  [[nodiscard]] statistics_snapshot statistics() const { return ops_->statistics(self_); }
  /// Whether a request may get several responses: the servable's `decoupled()` if it has one
  /// (a runtime_ensemble knows only once built), else its `traits::decoupled`.
  [[nodiscard]] bool decoupled() const noexcept { return ops_->decoupled(self_); }
  /// The object behind the handle (for identity checks).
  [[nodiscard]] const void* address() const noexcept { return self_; }

private:
  struct operations {
    status (*submit)(void*, request&&, response_sink&&);
    status (*submit_here)(void*, request&&, response_sink&&);
    void (*cancel)(void*, cancellation_source&);
    std::string_view (*name)(const void*);
    std::int64_t (*version)(const void*);
    std::int32_t (*max_batch_size)(const void*);
    std::span<const tensor_config> (*inputs)(const void*);
    std::span<const tensor_config> (*outputs)(const void*);
    statistics_snapshot (*statistics)(const void*);
    bool (*decoupled)(const void*) noexcept;
  };

  template <class M>
  static constexpr operations ops_for{
      [](void* m, request&& r, response_sink&& s) {
        return static_cast<M*>(m)->submit(std::move(r), std::move(s));
      },
      [](void* m, request&& r, response_sink&& s) {
        return detail::submit_here_or_submit(*static_cast<M*>(m), std::move(r), std::move(s));
      },
      [](void* m, cancellation_source& c) { static_cast<M*>(m)->cancel(c); },
      [](const void* m) -> std::string_view { return static_cast<const M*>(m)->name(); },
      [](const void* m) -> std::int64_t { return static_cast<const M*>(m)->version(); },
      [](const void* m) -> std::int32_t { return static_cast<const M*>(m)->max_batch_size(); },
      [](const void* m) -> std::span<const tensor_config> {
        return static_cast<const M*>(m)->inputs();
      },
      [](const void* m) -> std::span<const tensor_config> {
        return static_cast<const M*>(m)->outputs();
      },
      [](const void* m) -> statistics_snapshot { return static_cast<const M*>(m)->statistics(); },
      [](const void* m) noexcept -> bool {
        if constexpr (requires(const M& x) {
                        { x.decoupled() } -> std::convertible_to<bool>;
                      }) {
          return static_cast<const M*>(m)->decoupled();
        } else {
          return static_cast<bool>(M::traits::decoupled);
        }
      }};

  void* self_;
  const operations* ops_;
};

} // namespace servekit
