#pragma once
// The deliberate include of a folder missing from the layer table.
#include <servekit/gadgets/widget.hpp>
