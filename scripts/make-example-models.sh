#!/usr/bin/env bash
# Rewrites the model files of the bundled repository (examples/models/*/1/model.pt and
# model.onnx) with tests/libtorch/make_models.cpp, built in build/ (the dev preset). Run it after
# changing a model there; ctest example.models.up_to_date fails until the committed files match.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cmake --preset dev > /dev/null
cmake --build --preset dev --target servekit.libtorch.make_models
build/tests/libtorch/servekit.libtorch.make_models --repository examples/models
git status --short examples/models
