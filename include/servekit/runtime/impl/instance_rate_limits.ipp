#pragma once
/// \file
/// Definitions for servekit/runtime/detail/instance_rate_limits.hpp. Compiled once into
/// servekit::servekit, or included by its header with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/runtime/detail/instance_rate_limits.hpp>

namespace servekit::detail {

SERVEKIT_DECL
instance_rate_limits::instance_rate_limits(std::shared_ptr<rate_limiter> limiter,
                                           std::string_view model_name,
                                           const std::vector<instance_group_options>& groups,
                                           const std::vector<instance_placement>& placements)
    : ids_(placements.size(), none) {
  if (!limiter) {
    return;
  }
  registration_ = limiter->register_model(model_name, groups, placements);
  bool any = false;
  for (std::size_t i = 0; i < placements.size(); ++i) {
    if (const auto id = registration_.id(i)) {
      ids_[i] = *id;
      any = true;
    }
  }
  if (any) {
    limiter_ = std::move(limiter);
  } else {
    registration_ = {}; // nothing registered: hold no pointer to a limiter we do not keep
  }
}

} // namespace servekit::detail
