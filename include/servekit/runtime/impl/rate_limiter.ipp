#pragma once
/// \file
/// Definitions for servekit/runtime/rate_limiter.hpp. Compiled once into servekit::servekit, or
/// included by its header with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/runtime/rate_limiter.hpp>

namespace servekit {

[[nodiscard]] SERVEKIT_DECL rate_limit_resource_count
parse_rate_limit_resource(std::string_view text) {
  const auto fail = [&](std::string_view why) -> rate_limit_resource_count {
    throw std::invalid_argument("expected <name>:<count>[:<device>], got '" + std::string(text) +
                                "': " + std::string(why));
  };
  const auto first = text.find(':');
  if (first == std::string_view::npos) {
    return fail("no count");
  }
  const auto name = text.substr(0, first);
  auto rest = text.substr(first + 1);
  std::optional<std::string_view> device_text;
  if (const auto second = rest.find(':'); second != std::string_view::npos) {
    device_text = rest.substr(second + 1);
    rest = rest.substr(0, second);
  }
  if (name.empty()) {
    return fail("empty resource name");
  }
  const auto number = [](std::string_view s, auto& out) {
    const auto* end = s.data() + s.size();
    const auto [ptr, ec] = std::from_chars(s.data(), end, out);
    return !s.empty() && ec == std::errc{} && ptr == end;
  };
  rate_limit_resource_count out;
  out.name = std::string(name);
  if (!number(rest, out.count)) {
    return fail("the count must be a number 0..4294967295");
  }
  if (device_text) {
    int device = 0;
    if (!number(*device_text, device) || device < 0) {
      return fail("the device must be a number >= 0");
    }
    out.device = device;
  }
  return out;
}

[[nodiscard]] SERVEKIT_DECL rate_limiter::registration
rate_limiter::register_model(std::string_view model_name,
                             const std::vector<instance_group_options>& groups,
                             const std::vector<instance_placement>& placements) {
  std::vector<rate_limited_instance> limited;
  std::vector<std::size_t> which;
  for (std::size_t i = 0; i < placements.size(); ++i) {
    const auto g = placements[i].group;
    if (g >= groups.size()) {
      throw config_error(config_error_code::bad_value, "/instance_group",
                         "model '" + std::string(model_name) + "': instance " + placements[i].name +
                             " names group " + std::to_string(g) + ", but the model has " +
                             std::to_string(groups.size()));
    }
    const auto& options = groups[g].rate_limiter;
    if (!options) {
      continue;
    }
    rate_limited_instance in;
    in.device = placements[i].device_id;
    in.priority = options->priority;
    in.path = "/instance_group/" + std::to_string(g) + "/rate_limiter";
    for (const auto& r : options->resources) {
      in.resources.push_back({r.name, r.global, r.count});
    }
    limited.push_back(std::move(in));
    which.push_back(i);
  }
  std::vector<std::optional<instance_id>> ids(placements.size());
  if (limited.empty()) {
    return {this, std::move(ids)};
  }
  std::vector<instance_id> added;
  {
    const std::lock_guard lock{mutex_};
    added = core_.add(limited);
    for (const auto id : added) {
      if (waiters_.size() <= id) {
        waiters_.resize(id + 1);
      }
      waiters_[id] = std::make_unique<waiter>();
    }
  }
  for (std::size_t k = 0; k < which.size(); ++k) {
    ids[which[k]] = added[k];
  }
  return {this, std::move(ids)};
}

SERVEKIT_DECL void
rate_limiter::unregister(const std::vector<std::optional<instance_id>>& ids) noexcept {
  std::vector<instance_id> present;
  for (const auto& id : ids) {
    if (id) {
      present.push_back(*id);
    }
  }
  if (present.empty()) {
    return;
  }
  const std::lock_guard lock{mutex_};
  wake(core_.remove(present, clock::now()));
  for (const auto id : present) {
    waiters_[id].reset();
  }
}

} // namespace servekit
