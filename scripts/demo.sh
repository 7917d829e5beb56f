#!/usr/bin/env bash
# Builds and runs the add_sub example (a model served by servekit) in the dev build tree, build/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh

set -x
cmake --preset dev
cmake --build --preset dev --target example.add_sub
build/examples/add_sub/add_sub "$@"
