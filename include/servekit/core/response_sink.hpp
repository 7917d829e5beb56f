#pragma once
/// \file
/// response_sink: where a request's responses go (a callback the client supplies at submit).

#include <servekit/core/assert.hpp>
#include <servekit/core/response.hpp>

#include <concepts>
#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace servekit {

/// A move-only, type-erased `void(response&&)` callback. The model calls it once with the final
/// response (`final == true`) of every accepted request; a decoupled backend may send partial
/// responses (`final == false`) before that. Sending after the final response is a bug and
/// asserts. Callables of up to `inline_size` bytes are stored inline (no allocation).
///
/// This is the edge where servekit meets user code of unknown type, so calling it is one
/// indirect call per response: the only one on the request path.
class response_sink {
public:
  static constexpr std::size_t inline_size = 4 * sizeof(void*);

  response_sink() noexcept = default;

  template <class F>
    requires(!std::same_as<std::remove_cvref_t<F>, response_sink> &&
             std::invocable<std::remove_cvref_t<F>&, response&&>)
  response_sink(F&& f) { // NOLINT: implicit by design, like std::function
    using stored = std::remove_cvref_t<F>;
    if constexpr (fits_inline<stored>) {
      ::new (static_cast<void*>(storage_)) stored(std::forward<F>(f));
      ops_ = &inline_ops<stored>;
    } else {
      ::new (static_cast<void*>(storage_)) stored*(new stored(std::forward<F>(f)));
      ops_ = &heap_ops<stored>;
    }
  }

  response_sink(response_sink&& other) noexcept { take(other); }
  response_sink& operator=(response_sink&& other) noexcept {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }
  response_sink(const response_sink&) = delete;
  response_sink& operator=(const response_sink&) = delete;
  ~response_sink() { reset(); }

  [[nodiscard]] explicit operator bool() const noexcept { return ops_ != nullptr; }
  [[nodiscard]] bool final_sent() const noexcept { return final_sent_; }

  /// Delivers `r`; `r.final` says whether it is the last one.
  void send(response&& r) {
    SERVEKIT_ASSERT(ops_ != nullptr, "send() on an empty response_sink");
    SERVEKIT_ASSERT(!final_sent_, "a response was sent after the final response");
    final_sent_ = r.final;
    ops_->invoke(storage_, std::move(r));
  }

  /// Same as send(): a sink is itself a callable a sink can wrap.
  void operator()(response&& r) { send(std::move(r)); }

  /// Delivers `r` as the final response.
  void complete(response&& r) {
    r.final = true;
    send(std::move(r));
  }

private:
  struct operations {
    void (*invoke)(void* self, response&& r);
    void (*relocate)(void* to, void* from) noexcept;
    void (*destroy)(void* self) noexcept;
  };

  template <class F>
  static constexpr bool fits_inline =
      sizeof(F) <= inline_size &&
      alignof(F) <= alignof(std::max_align_t) && std::is_nothrow_move_constructible_v<F>;

  template <class F>
  static constexpr operations inline_ops{
      [](void* self, response&& r) { (*static_cast<F*>(self))(std::move(r)); },
      [](void* to, void* from) noexcept {
        ::new (to) F(std::move(*static_cast<F*>(from)));
        static_cast<F*>(from)->~F();
      },
      [](void* self) noexcept { static_cast<F*>(self)->~F(); }};

  template <class F>
  static constexpr operations heap_ops{
      [](void* self, response&& r) { (**static_cast<F**>(self))(std::move(r)); },
      [](void* to, void* from) noexcept { ::new (to) F*(*static_cast<F**>(from)); },
      [](void* self) noexcept { delete *static_cast<F**>(self); }};

  void take(response_sink& other) noexcept {
    if (other.ops_ != nullptr) {
      other.ops_->relocate(storage_, other.storage_);
    }
    ops_ = std::exchange(other.ops_, nullptr);
    final_sent_ = std::exchange(other.final_sent_, false);
  }

  void reset() noexcept {
    if (ops_ != nullptr) {
      ops_->destroy(storage_);
      ops_ = nullptr;
    }
    final_sent_ = false;
  }

  alignas(std::max_align_t) std::byte storage_[inline_size];
  const operations* ops_ = nullptr;
  bool final_sent_ = false;
};

} // namespace servekit
