#pragma once
/// \file
/// The backend concept and backend_traits: what a user's model class must (and may) provide.
///
/// The minimum:
///
///     struct my_backend {
///       explicit my_backend(const servekit::instance_context&);
///       void execute(servekit::batch&);
///     };
///
/// Optional shared state, constructed and destroyed in Triton's order (docs/lifecycle.md):
///
///     struct backend_state { backend_state(); };            // once per backend type, while
///                                                           // any model of it exists
///     struct model_state {                                  // once per model, before its
///       explicit model_state(const servekit::model_context&);  // instances, after them gone
///       // or (const model_context&, backend_state&)
///     };
///     my_backend(const servekit::instance_context&, model_state&);  // or (ctx, backend_state&)
///
/// Optional members, detected here and defaulted by backend_traits:
///
///     static constexpr std::int32_t max_batch_size = 8;   // largest batch it accepts (0: none)
///     static constexpr bool batching = true;              // may requests be batched together?
///     static constexpr bool decoupled = false;            // several responses per request?
///     static constexpr bool execute_on_any_thread = false; // see below
///     static constexpr servekit::tensor_declaration inputs[] = {...};
///     static constexpr servekit::tensor_declaration outputs[] = {...};
///     static int device_count() noexcept;                 // GPUs it can run on (see below)
///
/// A backend that can run on GPUs declares `device_count()`, the GPUs it sees now (0 on a
/// machine without one, e.g. `servekit::cuda::device_count()`). Instance placement then resolves
/// Triton's KIND_AUTO (every visible GPU, else the CPU) and KIND_GPU without `gpus` (every visible
/// GPU), and refuses GPUs that are not there. A backend without it is placed where the config
/// says, GPU ids unchecked.
///
/// `execute` runs on its instance's thread, one batch at a time. A backend whose `execute` keeps
/// nothing in thread-local state (it sets what it needs, such as a CUDA device or an OpenMP
/// thread count, in each call) may declare `execute_on_any_thread = true`: then a synchronous
/// caller (`infer_sync`) that finds an instance free and nothing queued executes its batch on its
/// own thread, holding that instance as the instance's thread would, and saves the two
/// hand-offs between threads. Still one batch at a time per instance.

#include <servekit/backend/batch.hpp>
#include <servekit/backend/instance_context.hpp>
#include <servekit/backend/tensor_declaration.hpp>

#include <concepts>
#include <cstdint>
#include <span>
#include <type_traits>

namespace servekit {

namespace detail {

// -- required ----------------------------------------------------------------------------------

/// Optional shared state: `typename B::backend_state` (one per backend type, shared by all its
/// models) and `typename B::model_state` (one per model, shared by its instances).
template <class B>
concept declares_backend_state = requires {
  typename B::backend_state;
};
template <class B>
concept declares_model_state = requires {
  typename B::model_state;
};

/// An instance constructor that also takes the model's state (or, without one, the backend's).
template <class B>
concept constructible_with_model_state = declares_model_state<B> &&
    std::constructible_from<B, const instance_context&, typename B::model_state&>;
template <class B>
concept constructible_with_backend_state = declares_backend_state<B> &&
    std::constructible_from<B, const instance_context&, typename B::backend_state&>;

/// Construction is Triton's instance initialise; destruction is its finalise.
template <class B>
concept constructible_from_instance_context = std::destructible<B> &&
    (std::constructible_from<B, const instance_context&> || constructible_with_model_state<B> ||
     constructible_with_backend_state<B>);

/// One execution of a batch: read the requests, fill one response per request.
template <class B>
concept has_execute_batch = requires(B& backend, batch& b) {
  backend.execute(b);
};

// -- optional ----------------------------------------------------------------------------------

template <class B>
concept declares_max_batch_size = requires {
  B::max_batch_size;
};
template <class B>
concept declares_max_batch_size_as_int = requires {
  { B::max_batch_size } -> std::convertible_to<std::int32_t>;
  requires std::integral<std::remove_cvref_t<decltype(B::max_batch_size)>>;
};
template <class B>
concept declares_batching = requires {
  B::batching;
};
template <class B>
concept declares_batching_as_bool = requires {
  requires std::same_as < std::remove_cvref_t<decltype(B::batching)>,
  bool > ;
};
template <class B>
concept declares_decoupled = requires {
  B::decoupled;
};
template <class B>
concept declares_decoupled_as_bool = requires {
  requires std::same_as < std::remove_cvref_t<decltype(B::decoupled)>,
  bool > ;
};
template <class B>
concept declares_execute_on_any_thread = requires {
  B::execute_on_any_thread;
};
template <class B>
concept declares_execute_on_any_thread_as_bool = requires {
  requires std::same_as < std::remove_cvref_t<decltype(B::execute_on_any_thread)>,
  bool > ;
};
template <class B>
concept declares_inputs = requires {
  B::inputs;
};
template <class B>
concept declares_inputs_as_specs = requires {
  {std::span<const tensor_declaration>{B::inputs}};
};
template <class B>
concept declares_outputs = requires {
  B::outputs;
};
template <class B>
concept declares_outputs_as_specs = requires {
  {std::span<const tensor_declaration>{B::outputs}};
};
template <class B>
concept declares_device_count = requires {
  &B::device_count;
};
template <class B>
concept declares_device_count_as_function = requires {
  { B::device_count() }
  noexcept->std::same_as<int>;
};

} // namespace detail

/// A class servekit can run as a model instance.
template <class B>
concept backend = detail::constructible_from_instance_context<B> && detail::has_execute_batch<B>;

/// A backend's optional properties with their defaults. Specialise it to describe a backend
/// you cannot change.
template <class B>
struct backend_traits {
  /// Upper bound for the model's max_batch_size; 0 means "the config decides".
  static constexpr std::int32_t max_batch_size = [] {
    if constexpr (detail::declares_max_batch_size_as_int<B>) {
      return static_cast<std::int32_t>(B::max_batch_size);
    } else {
      return std::int32_t{0};
    }
  }();
  /// Whether requests may share an execution.
  static constexpr bool batching = [] {
    if constexpr (detail::declares_batching_as_bool<B>) {
      return B::batching;
    } else {
      return true;
    }
  }();
  /// Whether a request may get several responses (Triton's decoupled transaction policy).
  static constexpr bool decoupled = [] {
    if constexpr (detail::declares_decoupled_as_bool<B>) {
      return B::decoupled;
    } else {
      return false;
    }
  }();
  /// Whether `execute` may run on a synchronous caller's thread (see the file comment).
  static constexpr bool execute_on_any_thread = [] {
    if constexpr (detail::declares_execute_on_any_thread_as_bool<B>) {
      return B::execute_on_any_thread;
    } else {
      return false;
    }
  }();
  /// Declared inputs; empty when the backend declares none (the config may declare them).
  static constexpr std::span<const tensor_declaration> inputs = [] {
    if constexpr (detail::declares_inputs_as_specs<B>) {
      return std::span<const tensor_declaration>{B::inputs};
    } else {
      return std::span<const tensor_declaration>{};
    }
  }();
  /// Declared outputs; empty when the backend declares none.
  static constexpr std::span<const tensor_declaration> outputs = [] {
    if constexpr (detail::declares_outputs_as_specs<B>) {
      return std::span<const tensor_declaration>{B::outputs};
    } else {
      return std::span<const tensor_declaration>{};
    }
  }();
  /// Whether the backend can run on GPUs (it declares `device_count()`).
  static constexpr bool runs_on_gpus = detail::declares_device_count_as_function<B>;
  /// The GPUs the backend can run on now; 0 when it runs on the CPU only.
  [[nodiscard]] static int device_count() noexcept {
    if constexpr (runs_on_gpus) {
      return B::device_count();
    } else {
      return 0;
    }
  }
};

/// Checks a backend with one readable message per missing or malformed member. Composition
/// roots call it first, so users see these messages rather than "constraints not satisfied".
template <class B>
consteval bool check_backend() {
  static_assert(detail::constructible_from_instance_context<B>,
                "servekit: a backend needs a public constructor "
                "`explicit B(const servekit::instance_context&)` (or `B(const "
                "servekit::instance_context&, model_state&)` when it declares a model_state) and "
                "a public destructor");
  static_assert(detail::has_execute_batch<B>, "servekit: a backend needs a public member function "
                                              "`void execute(servekit::batch&)`");
  static_assert(!detail::declares_max_batch_size<B> || detail::declares_max_batch_size_as_int<B>,
                "servekit: a backend's `max_batch_size` must be "
                "`static constexpr std::int32_t max_batch_size = N;`");
  static_assert(backend_traits<B>::max_batch_size >= 0,
                "servekit: a backend's `max_batch_size` must not be negative");
  static_assert(!detail::declares_batching<B> || detail::declares_batching_as_bool<B>,
                "servekit: a backend's `batching` must be `static constexpr bool batching = ...;`");
  static_assert(!detail::declares_decoupled<B> || detail::declares_decoupled_as_bool<B>,
                "servekit: a backend's `decoupled` must be "
                "`static constexpr bool decoupled = ...;`");
  static_assert(!detail::declares_execute_on_any_thread<B> ||
                    detail::declares_execute_on_any_thread_as_bool<B>,
                "servekit: a backend's `execute_on_any_thread` must be "
                "`static constexpr bool execute_on_any_thread = ...;`");
  static_assert(!detail::declares_inputs<B> || detail::declares_inputs_as_specs<B>,
                "servekit: a backend's `inputs` must be "
                "`static constexpr servekit::tensor_declaration inputs[] = {...};`");
  static_assert(!detail::declares_outputs<B> || detail::declares_outputs_as_specs<B>,
                "servekit: a backend's `outputs` must be "
                "`static constexpr servekit::tensor_declaration outputs[] = {...};`");
  static_assert(!detail::declares_device_count<B> || detail::declares_device_count_as_function<B>,
                "servekit: a backend's `device_count` must be "
                "`static int device_count() noexcept;` (the GPUs it can run on now)");
  return true;
}

} // namespace servekit
