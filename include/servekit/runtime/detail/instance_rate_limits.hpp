#pragma once
/// \file
/// instance_rate_limits: what a shell's instance threads call around each execution so that a
/// model honours the server's rate limiter.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/runtime/instance_group.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/runtime/rate_limiter.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

namespace servekit::detail {

/// A model's instances in the server's rate limiter, by instance index (the index in the
/// model's placements). Built once per shell; registers the instances whose group has a
/// `rate_limiter` and unregisters them when destroyed (after the instance threads stopped).
/// With no limiter, or for an instance of a group without `rate_limiter`, acquire and release
/// do nothing and cost one load and one branch: no lock, no atomic read-modify-write.
class instance_rate_limits {
public:
  instance_rate_limits() = default;

  /// `groups` resolved, `placements` expanded from them (as model<> does). Throws config_error
  /// for counts the limiter cannot honour (rate_limiter::register_model).
  SERVEKIT_DECL instance_rate_limits(std::shared_ptr<rate_limiter> limiter,
                                     std::string_view model_name,
                                     const std::vector<instance_group_options>& groups,
                                     const std::vector<instance_placement>& placements);

  instance_rate_limits(instance_rate_limits&&) noexcept = default;
  instance_rate_limits& operator=(instance_rate_limits&&) noexcept = default;
  instance_rate_limits(const instance_rate_limits&) = delete;
  instance_rate_limits& operator=(const instance_rate_limits&) = delete;
  ~instance_rate_limits() = default; // registration_ unregisters, then limiter_ lets go

  /// Whether `instance` goes through the limiter (its waits are worth recording).
  [[nodiscard]] bool limited(std::size_t instance) const noexcept {
    return instance < ids_.size() && ids_[instance] != none;
  }

  /// Blocks until `instance` may execute; returns the nanoseconds it waited (0 at once when it
  /// is not limited). Call after its batch is formed, before execute.
  std::uint64_t acquire(std::size_t instance) {
    return limited(instance) ? limiter_->acquire(ids_[instance]) : 0;
  }

  /// `instance` finished executing: its resources go to whoever waits for them.
  void release(std::size_t instance) {
    if (limited(instance)) {
      limiter_->release(ids_[instance]);
    }
  }

  /// An acquired instance, released when this goes out of scope unless released before: an
  /// exception between acquire and release must not keep the resources taken for good.
  class held {
  public:
    held(instance_rate_limits& limits, std::size_t instance) noexcept
        : limits_{&limits}, instance_{instance} {}
    held(const held&) = delete;
    held& operator=(const held&) = delete;
    ~held() { release(); }
    void release() {
      if (limits_ != nullptr) {
        std::exchange(limits_, nullptr)->release(instance_);
      }
    }

  private:
    instance_rate_limits* limits_;
    std::size_t instance_;
  };

private:
  static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

  // Declared first, destroyed last: the registration needs the limiter alive.
  std::shared_ptr<rate_limiter> limiter_;
  rate_limiter::registration registration_;
  std::vector<std::size_t> ids_;
};

} // namespace servekit::detail

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/runtime/impl/instance_rate_limits.ipp>
#endif
