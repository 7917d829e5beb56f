#pragma once
/// \file
/// The repository layer: type-erased models (any_model), backends by name (backend_list) and
/// Triton's model repository over a directory (model_repository).

#include <servekit/repository/any_model.hpp>
#include <servekit/repository/backend_list.hpp>
#include <servekit/repository/model_repository.hpp>
#include <servekit/repository/repository_poller.hpp>
