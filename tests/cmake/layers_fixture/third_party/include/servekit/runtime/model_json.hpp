#pragma once
// The deliberate third-party include: the engine must not need nlohmann-json.
#include <nlohmann/json.hpp>
#include <string>
