#pragma once
/// \file
/// any_model: an owning, move-only, type-erased servable, for code that picks a model's type at
/// run time (backend_list, model_repository). The owning counterpart of model_ref.

#include <servekit/runtime/model_options.hpp>
#include <servekit/runtime/model_ref.hpp>
#include <servekit/runtime/shutdown_mode.hpp>

#include <concepts>
#include <memory>
#include <type_traits>
#include <utility>

namespace servekit {

namespace detail {
/// The class and the member type of a pointer to data member `M C::*`.
template <class T>
struct data_member_traits;
template <class C, class M>
struct data_member_traits<M C::*> {
  using owner_type = C;
  using member_type = M;
};
} // namespace detail

/// Owns one servable of any type, on the heap (so that model_refs to it stay valid when the
/// any_model moves). Destroying it destroys the servable, which drains what it accepted.
///
///     servekit::any_model m = servekit::any_model::make<servekit::model<my_backend>>(options);
///     (void)m.ref().submit(std::move(request), sink);
///
/// A servable that refers to others it does not own (a compile-time `ensemble<...>` holds
/// references to its composing models) is held with what it uses: a struct declaring the
/// composing models first and the servable last, served through make_owning.
class any_model {
public:
  /// Empty: holds nothing (`ref()` must not be called).
  any_model() noexcept = default;

  /// Constructs an `M` in place from `args`. `M` must be servable (check_servable names what
  /// it lacks).
  template <class M, class... Args>
  [[nodiscard]] static any_model make(Args&&... args) {
    static_assert(check_servable<M>());
    if constexpr (servable<M>) {
      auto owned = std::make_unique<M>(std::forward<Args>(args)...);
      any_model out;
      out.self_ = owned.release();
      out.ops_ = &ops_for<M>;
      return out;
    } else {
      return any_model{}; // not reached: check_servable failed
    }
  }

  /// Constructs a `Parts` in place from `args` and serves its member `Servable` (a pointer to a
  /// data member of `Parts`, e.g. `&my_pipeline::ensemble`): the other members live as long as
  /// it does. Destroying it destroys the whole `Parts` in reverse declaration order, so declare
  /// the servable after what it uses (its destructor then drains before they go). `shutdown`
  /// calls `Parts::shutdown(shutdown_mode)` if there is one (to stop the composing models as
  /// well), else the servable's.
  ///
  ///     struct served_pipeline {
  ///       preprocess pre{{.name = "preprocess"}};
  ///       classify cls{{.name = "classify"}};
  ///       pipeline ensemble{{.name = "pipeline"}, pre, cls};
  ///     };
  ///     auto m = servekit::any_model::make_owning<&served_pipeline::ensemble>();
  template <auto Servable, class... Args>
  [[nodiscard]] static any_model make_owning(Args&&... args) {
    static_assert(std::is_member_object_pointer_v<decltype(Servable)>,
                  "servekit: make_owning<&Parts::member>: the argument must point to the data "
                  "member of `Parts` that is the servable");
    using traits = detail::data_member_traits<decltype(Servable)>;
    using parts_type = typename traits::owner_type;
    static_assert(check_servable<typename traits::member_type>());
    if constexpr (servable<typename traits::member_type>) {
      auto owned = std::make_unique<parts_type>(std::forward<Args>(args)...);
      any_model out;
      out.self_ = owned.release();
      out.ops_ = &owning_ops_for<Servable>;
      return out;
    } else {
      return any_model{}; // not reached: check_servable failed
    }
  }

  any_model(any_model&& other) noexcept
      : self_{std::exchange(other.self_, nullptr)}, ops_{std::exchange(other.ops_, nullptr)} {}
  any_model& operator=(any_model&& other) noexcept {
    if (this != &other) {
      reset();
      self_ = std::exchange(other.self_, nullptr);
      ops_ = std::exchange(other.ops_, nullptr);
    }
    return *this;
  }
  any_model(const any_model&) = delete;
  any_model& operator=(const any_model&) = delete;

  ~any_model() { reset(); }

  /// Whether it holds a servable.
  [[nodiscard]] explicit operator bool() const noexcept { return self_ != nullptr; }

  /// A non-owning handle to the servable; valid while this any_model (or what it moved to)
  /// lives.
  [[nodiscard]] model_ref ref() const noexcept { return ops_->ref(self_); }

  /// Stops accepting requests and stops the servable's threads (see model::shutdown).
  /// Idempotent; a servable without `shutdown(shutdown_mode)` is left to its destructor.
  void shutdown(shutdown_mode mode) {
    if (self_ != nullptr) {
      ops_->shutdown(self_, mode);
    }
  }

  /// The options the servable runs with, if it has `options()` (model<...> and runtime_ensemble
  /// do), else nullptr.
  [[nodiscard]] const model_options* options() const noexcept {
    return self_ != nullptr ? ops_->options(self_) : nullptr;
  }

  /// Fills in what `config` leaves to the servable's type, if it has `complete_options`
  /// (model<...> does: its scheduler as composed, its tensors as resolved); else leaves it.
  void complete_options(model_options& config) const {
    if (self_ != nullptr) {
      ops_->complete_options(self_, config);
    }
  }

  /// The servable if it is an `M`, else nullptr (for tests and diagnostics).
  template <servable M>
  [[nodiscard]] M* get() const noexcept {
    return ops_ == &ops_for<M> ? static_cast<M*>(self_) : nullptr;
  }

  /// Destroys the servable (draining it); leaves this empty.
  void reset() noexcept {
    if (self_ != nullptr) {
      ops_->destroy(std::exchange(self_, nullptr));
      ops_ = nullptr;
    }
  }

private:
  struct operations {
    model_ref (*ref)(void*) noexcept;
    void (*shutdown)(void*, shutdown_mode);
    void (*destroy)(void*) noexcept;
    const model_options* (*options)(const void*) noexcept;
    void (*complete_options)(const void*, model_options&);
  };

  // One table per type, inline so that its address identifies the type in every TU (get<M>).
  template <class M>
  static constexpr operations ops_for{
      [](void* m) noexcept -> model_ref { return *static_cast<M*>(m); },
      [](void* m, shutdown_mode mode) {
        if constexpr (requires(M & x, shutdown_mode md) { x.shutdown(md); }) {
          static_cast<M*>(m)->shutdown(mode);
        }
      },
      [](void* m) noexcept { delete static_cast<M*>(m); },
      [](const void* m) noexcept -> const model_options* {
        if constexpr (requires(const M& x) {
                        { x.options() } -> std::same_as<const model_options&>;
                      }) {
          return &static_cast<const M*>(m)->options();
        } else {
          return nullptr;
        }
      },
      [](const void* m, model_options& config) {
        if constexpr (requires(const M& x, model_options& c) { x.complete_options(c); }) {
          static_cast<const M*>(m)->complete_options(config);
        }
      }};

  // For make_owning: `self_` is the whole `Parts`; the servable is its member `Servable`.
  template <auto Servable>
  static constexpr operations owning_ops_for{
      [](void* p) noexcept -> model_ref {
        using parts_type = typename detail::data_member_traits<decltype(Servable)>::owner_type;
        return static_cast<parts_type*>(p)->*Servable;
      },
      [](void* p, shutdown_mode mode) {
        using parts_type = typename detail::data_member_traits<decltype(Servable)>::owner_type;
        auto& parts = *static_cast<parts_type*>(p);
        if constexpr (requires(parts_type & x, shutdown_mode md) { x.shutdown(md); }) {
          parts.shutdown(mode);
        } else {
          ops_for<typename detail::data_member_traits<decltype(Servable)>::member_type>.shutdown(
              &(parts.*Servable), mode);
        }
      },
      [](void* p) noexcept {
        delete static_cast<typename detail::data_member_traits<decltype(Servable)>::owner_type*>(p);
      },
      [](const void* p) noexcept -> const model_options* {
        using traits = detail::data_member_traits<decltype(Servable)>;
        return ops_for<typename traits::member_type>.options(
            &(static_cast<const typename traits::owner_type*>(p)->*Servable));
      },
      [](const void* p, model_options& config) {
        using traits = detail::data_member_traits<decltype(Servable)>;
        ops_for<typename traits::member_type>.complete_options(
            &(static_cast<const typename traits::owner_type*>(p)->*Servable), config);
      }};

  void* self_ = nullptr;
  const operations* ops_ = nullptr;
};

} // namespace servekit
