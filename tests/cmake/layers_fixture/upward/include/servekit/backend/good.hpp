#pragma once
#include <servekit/backend/detail/sender.hpp>
#include <servekit/core/status.hpp>
