#pragma once
#include <servekit/backend/good.hpp>
#include <servekit/core/status.hpp>
