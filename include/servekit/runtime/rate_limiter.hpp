#pragma once
/// \file
/// servekit::rate_limiter: the server-wide rate limiter (Triton's `--rate-limit
/// execution_count`), shared by the models of a server through their model_environment.

#include <servekit/core/clock.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/runtime/instance_group.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/schedule/rate_limiter_core.hpp>

#include <charconv>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace servekit {

/// What a rate_limiter is built from (the server's flags).
struct rate_limiter_settings {
  /// Server-wide resource counts (`--rate-limit-resource name:count[:device]`). A resource
  /// without one gets the most any registered instance needs, per device (or in all, if global).
  std::vector<rate_limit_resource_count> resources;
  /// How long back-filling may pass over a waiting instance (see rate_limiter_aging).
  rate_limiter_aging aging;
};

/// Parses the value of Triton's `--rate-limit-resource` flag, `<name>:<count>[:<device>]`
/// (e.g. "R1:4", "R1:2:0"). Throws std::invalid_argument saying what is wrong (the caller adds
/// the flag's name).
[[nodiscard]] SERVEKIT_DECL rate_limit_resource_count
parse_rate_limit_resource(std::string_view text);

/// The server-wide rate limiter: a model instance whose group has a `rate_limiter` executes
/// only when it holds the resources the group names (per device unless `global`). Waiting
/// instances are ranked by executions × priority, as in Triton; unlike Triton, the first ranked
/// instance whose resources are free is granted, so a large need does not block a small one,
/// and an aging bound keeps the large one from starving (rate_limiter_core).
///
/// Models register their instances at construction (register_model) and unregister when the
/// registration is destroyed, while other models keep serving. Instance threads call acquire
/// (blocks) and release around each execution. Thread-safe.
class rate_limiter {
public:
  using instance_id = rate_limiter_core::instance_id;

  explicit rate_limiter(rate_limiter_settings settings = {})
      : core_{std::move(settings.resources), settings.aging} {}
  rate_limiter(const rate_limiter&) = delete;
  rate_limiter& operator=(const rate_limiter&) = delete;

  /// The instances of one model in the limiter; unregisters them on destruction (their
  /// threads must have stopped). Movable; must not outlive the limiter.
  class registration {
  public:
    registration() = default;
    registration(registration&& o) noexcept
        : owner_{std::exchange(o.owner_, nullptr)}, ids_{std::move(o.ids_)} {}
    registration& operator=(registration&& o) noexcept {
      if (this != &o) {
        reset();
        owner_ = std::exchange(o.owner_, nullptr);
        ids_ = std::move(o.ids_);
      }
      return *this;
    }
    registration(const registration&) = delete;
    registration& operator=(const registration&) = delete;
    ~registration() { reset(); }

    /// The limiter's id of instance `i` (index in the model's placements); nullopt when its
    /// group has no rate_limiter.
    [[nodiscard]] std::optional<instance_id> id(std::size_t i) const {
      return i < ids_.size() ? ids_[i] : std::nullopt;
    }
    [[nodiscard]] std::size_t size() const noexcept { return ids_.size(); }

  private:
    friend class rate_limiter;
    registration(rate_limiter* owner, std::vector<std::optional<instance_id>> ids)
        : owner_{owner}, ids_{std::move(ids)} {}
    void reset() noexcept {
      if (owner_ != nullptr) {
        owner_->unregister(ids_);
        owner_ = nullptr;
      }
    }
    rate_limiter* owner_ = nullptr;
    std::vector<std::optional<instance_id>> ids_;
  };

  /// Registers the instances of model `model_name`: `groups` resolved (resolve_instance_groups)
  /// and `placements` expanded from them (expand_instance_groups); an instance is registered
  /// when its group has a `rate_limiter`. Throws config_error at
  /// "/instance_group/<g>/rate_limiter/resources/<k>..." when a server-wide count is below what
  /// an instance needs (Triton's message) or a resource is both global and per device.
  [[nodiscard]] SERVEKIT_DECL registration
  register_model(std::string_view model_name, const std::vector<instance_group_options>& groups,
                 const std::vector<instance_placement>& placements);

  /// Blocks until instance `id` holds its resources; returns the nanoseconds it waited.
  std::uint64_t acquire(instance_id id) {
    std::unique_lock lock{mutex_};
    const auto start = clock::now();
    if (core_.request(id, start)) {
      return 0;
    }
    auto& w = *waiters_[id];
    w.granted = false;
    w.wake.wait(lock, [&] { return w.granted; });
    return elapsed_ns(start, clock::now());
  }

  /// Instance `id` finished executing: its resources go to the instances waiting for them.
  void release(instance_id id) {
    const std::lock_guard lock{mutex_};
    wake(core_.release(id, clock::now()));
  }

  /// The count of a resource pool now (device nullopt: the global pool), 0 when unused. For
  /// tests and diagnostics.
  [[nodiscard]] std::uint32_t pool_count(std::string_view name, std::optional<int> device) const {
    const std::lock_guard lock{mutex_};
    return core_.pool_count(name, device);
  }

  /// Executions granted to instance `id` so far.
  [[nodiscard]] std::uint64_t executions(instance_id id) const {
    const std::lock_guard lock{mutex_};
    return core_.executions(id);
  }

private:
  struct waiter {
    std::condition_variable wake;
    bool granted = false;
  };

  void wake(std::span<const instance_id> granted) {
    for (const auto g : granted) {
      waiters_[g]->granted = true;
      waiters_[g]->wake.notify_one();
    }
  }

  SERVEKIT_DECL void unregister(const std::vector<std::optional<instance_id>>& ids) noexcept;

  mutable std::mutex mutex_;
  rate_limiter_core core_;
  std::vector<std::unique_ptr<waiter>> waiters_; // by instance id; stable addresses
};

} // namespace servekit

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/runtime/impl/rate_limiter.ipp>
#endif
