#pragma once
// The server tier may.
#include <fmt/format.h>
#include <nlohmann/json.hpp>
