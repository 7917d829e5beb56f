#!/usr/bin/env bash
# Configure, build and run every test: scripts/test.sh [preset]   (dev, release, asan, tsan, fuzz;
# default dev). Build trees: dev -> build/, others -> build/<preset>/. SERVEKIT_JOBS sets build
# parallelism (2). `fuzz` builds only the libFuzzer targets of tests/fuzz with clang and runs each
# for a bounded number of inputs (ctest label fuzz).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

preset="${1:-dev}"
jobs="${SERVEKIT_JOBS:-2}"
case "$preset" in
  dev | release | asan | tsan | fuzz) ;;
  *)
    echo "usage: scripts/test.sh [dev|release|asan|tsan|fuzz]" >&2
    exit 2
    ;;
esac

bash scripts/install-deps.sh

# gcc 12's (and clang 14's) sanitizer runtimes break (TSan cannot map its shadow memory, ASan can
# loop on start-up) when the kernel randomises mmap with more than 28 bits. Then run sanitizer
# builds without ASLR: gtest discovery runs the test programs at build time, so the build is
# wrapped too.
wrap=()
if { [ "$preset" = asan ] || [ "$preset" = tsan ] || [ "$preset" = fuzz ]; } \
   && [ -r /proc/sys/vm/mmap_rnd_bits ] \
   && [ "$(cat /proc/sys/vm/mmap_rnd_bits)" -gt 28 ]; then
  echo "test.sh: vm.mmap_rnd_bits > 28: running the $preset build and tests under setarch -R"
  wrap=(setarch "$(uname -m)" -R)
fi

set -x
cmake --preset "$preset"
"${wrap[@]}" cmake --build --preset "$preset" -j "$jobs"
"${wrap[@]}" ctest --preset "$preset"
