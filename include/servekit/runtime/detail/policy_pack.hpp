#pragma once
/// \file
/// Finding policies by role in a `model<Backend, Policies...>` pack.

#include <cstddef>
#include <type_traits>

namespace servekit::detail {

/// A policy type names its role with a nested `policy_role` alias.
template <class P>
concept has_policy_role = requires {
  typename P::policy_role;
};

template <class P, class Role>
constexpr bool plays_role() {
  if constexpr (has_policy_role<P>) {
    return std::is_same_v<typename P::policy_role, Role>;
  } else {
    return false;
  }
}

/// How many policies in the pack play `Role`.
template <class Role, class... Ps>
inline constexpr std::size_t role_count = (std::size_t{0} + ... + (plays_role<Ps, Role>() ? 1 : 0));

/// The policy playing `Role`, or `Default` when none does.
template <class Role, class Default, class... Ps>
struct find_role {
  using type = Default;
};
template <class Role, class Default, class P, class... Ps>
struct find_role<Role, Default, P, Ps...> {
  using type =
      std::conditional_t<plays_role<P, Role>(), P, typename find_role<Role, Default, Ps...>::type>;
};
template <class Role, class Default, class... Ps>
using find_role_t = typename find_role<Role, Default, Ps...>::type;

} // namespace servekit::detail
