#pragma once
// The deliberate upward include: backend/ may include only core/.
#include <servekit/core/status.hpp>
#include <servekit/runtime/detail/requests.hpp>
