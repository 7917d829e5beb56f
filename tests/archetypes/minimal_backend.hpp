#pragma once
// The smallest class that satisfies servekit::backend: a constructor and execute(), nothing
// else. Used to prove that the concept asks for no more than it documents.

#include <servekit/backend/backend.hpp>

namespace archetypes {

struct minimal_backend {
  explicit minimal_backend(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};

} // namespace archetypes
