#pragma once
// An umbrella header: exempt, even where it reaches up.
#include <servekit/backend/good.hpp>
#include <servekit/runtime/detail/requests.hpp>
