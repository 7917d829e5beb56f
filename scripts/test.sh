#!/usr/bin/env bash
# Configure, build and run every test: scripts/test.sh [preset]   (dev, release, asan, tsan; default dev)
# Build trees: dev -> build/, others -> build/<preset>/. SERVEKIT_JOBS sets build parallelism (2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

preset="${1:-dev}"
jobs="${SERVEKIT_JOBS:-2}"

bash scripts/install-deps.sh

# gcc 12's sanitizer runtimes break (TSan cannot map its shadow memory, ASan can loop on start-up)
# when the kernel randomises mmap with more than 28 bits. Then run sanitizer builds without ASLR:
# gtest discovery runs the test programs at build time, so the build is wrapped too.
wrap=()
if { [ "$preset" = asan ] || [ "$preset" = tsan ]; } && [ -r /proc/sys/vm/mmap_rnd_bits ] \
   && [ "$(cat /proc/sys/vm/mmap_rnd_bits)" -gt 28 ]; then
  echo "test.sh: vm.mmap_rnd_bits > 28: running the $preset build and tests under setarch -R"
  wrap=(setarch "$(uname -m)" -R)
fi

set -x
cmake --preset "$preset"
"${wrap[@]}" cmake --build --preset "$preset" -j "$jobs"
"${wrap[@]}" ctest --preset "$preset"
