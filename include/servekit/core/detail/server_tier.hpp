#pragma once
/// \file
/// The server tier's name for SERVEKIT_DECL (include/servekit/core/detail/linkage.hpp).

#include <servekit/core/detail/linkage.hpp>

#define SERVEKIT_SERVER_DECL SERVEKIT_DECL
