#pragma once
/// \file
/// The backend layer: the backend concept, its traits, batches, validation, gather/scatter.

#include <servekit/backend/backend.hpp>
#include <servekit/backend/batch.hpp>
#include <servekit/backend/batch_compatibility.hpp>
#include <servekit/backend/batch_io.hpp>
#include <servekit/backend/instance_context.hpp>
#include <servekit/backend/request_validator.hpp>
#include <servekit/backend/sequence_controls.hpp>
#include <servekit/backend/tensor_declaration.hpp>
