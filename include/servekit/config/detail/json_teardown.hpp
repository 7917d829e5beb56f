#pragma once
/// \file
/// Destroying a nlohmann value without allocating. nlohmann 3.11 destroys an array or object
/// through a heap-allocated stack of its children (so that deep documents do not recurse); when
/// that allocation fails inside the destructor, the process ends in std::terminate. A value on
/// the request path (a parsed body, a response being built) is torn down here first, children
/// before parents, so that every container its destructor then meets is empty.

#include <nlohmann/json.hpp>

#include <exception>

namespace servekit::detail {

/// Empties `j` bottom-up: afterwards it is a scalar or an empty container, and its destructor
/// allocates nothing. Recursion follows the nesting, which the body parser bounds
/// (max_json_body_depth) and the response builders keep shallow.
inline void dismantle_json(nlohmann::json& j) noexcept {
  if (j.is_array()) {
    auto& elements = j.get_ref<nlohmann::json::array_t&>();
    for (auto& e : elements) {
      dismantle_json(e);
    }
    elements.clear(); // each element is now a scalar or empty: nothing allocates
  } else if (j.is_object()) {
    auto& members = j.get_ref<nlohmann::json::object_t&>();
    for (auto& [key, value] : members) {
      dismantle_json(value);
    }
    members.clear();
  }
}

/// Dismantles a value when the scope ends, whichever way it ends (an allocation failure while
/// the value is built included). Declared after the value it guards.
class json_teardown {
public:
  explicit json_teardown(nlohmann::json& j) noexcept : j_{j} {}
  json_teardown(const json_teardown&) = delete;
  json_teardown& operator=(const json_teardown&) = delete;
  ~json_teardown() { dismantle_json(j_); }

private:
  nlohmann::json& j_;
};

/// Dismantles a value being built when the scope ends by an exception (an allocation failure
/// half-way), and leaves it alone when the scope returns it. Declared after the value.
class json_teardown_on_throw {
public:
  explicit json_teardown_on_throw(nlohmann::json& j) noexcept : j_{j} {}
  json_teardown_on_throw(const json_teardown_on_throw&) = delete;
  json_teardown_on_throw& operator=(const json_teardown_on_throw&) = delete;
  ~json_teardown_on_throw() {
    if (std::uncaught_exceptions() > uncaught_) {
      dismantle_json(j_);
    }
  }

private:
  nlohmann::json& j_;
  int uncaught_ = std::uncaught_exceptions();
};

// Builders of response bodies add members one scalar at a time (`o["count"] = n`), never from
// an initializer list such as `json{{"count", n}}`: its pairs are temporaries with children,
// and destroying them allocates (see above). These make the containers in place.

/// `parent[key]`, made an empty object.
inline nlohmann::json& json_object_member(nlohmann::json& parent, const char* key) {
  return parent[key] = nlohmann::json::object();
}
/// `parent[key]`, made an empty array.
inline nlohmann::json& json_array_member(nlohmann::json& parent, const char* key) {
  return parent[key] = nlohmann::json::array();
}
/// A new empty object at the end of the array `parent`.
inline nlohmann::json& json_object_element(nlohmann::json& parent) {
  return parent.emplace_back(nlohmann::json::object());
}

} // namespace servekit::detail
