#!/usr/bin/env bash
# Installs the Debian 12 packages servekit needs to build and test. Idempotent: does nothing
# (and needs no network or root) when they are all installed. clang and libclang-rt-14-dev
# (libFuzzer and clang's sanitizer runtimes) are for the fuzz preset; wrk cross-checks the load
# generator and libsimdjson-dev is bench_json_decode's comparison (docs/benchmarks.md).
# libprotobuf-dev and protobuf-compiler read config.pbtxt (proto/servekit/config/model_config.proto).
# libopencv-dnn-dev runs ONNX models (servekit::onnx); libonnx-testdata holds ONNX's reference
# graphs and tensors, which tests/onnx runs.
# libtorch-dev (LibTorch 1.13, CPU; about 160 packages, 500 MB installed) is the LibTorch backend's
# (servekit::libtorch, docs/backends.md); without it that backend is left out of the build.
# libgrpc++-dev and protobuf-compiler-grpc build the gRPC front end (servekit::grpc, docs/grpc.md);
# python3-grpcio and python3-protobuf are the Python gRPC client its tests use.
# nginx and haproxy are the proxies of the cluster tests (tests/cluster, deploy/); the tests start
# their own instances on loopback ports, never the system services; python3-yaml reads the
# Kubernetes manifests (deploy/kubernetes) for their check.
set -euo pipefail

packages=(
  g++
  cmake
  ninja-build
  libboost1.74-dev
  libfmt-dev
  nlohmann-json3-dev
  zlib1g-dev
  libprotobuf-dev
  protobuf-compiler
  libgtest-dev
  libbenchmark-dev
  clang-format
  curl
  clang
  libclang-rt-14-dev
  wrk
  libsimdjson-dev
  libopencv-dnn-dev
  libonnx-testdata
  libtorch-dev
  libgrpc++-dev
  protobuf-compiler-grpc
  python3-grpcio
  python3-protobuf
  nginx
  haproxy
  python3-yaml
)

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  sudo=(sudo)
fi

echo "install-deps: missing: ${missing[*]}"
echo "install-deps: ${sudo[*]:+${sudo[*]} }apt-get update"
"${sudo[@]}" apt-get update
echo "install-deps: ${sudo[*]:+${sudo[*]} }apt-get install -y --no-install-recommends ${missing[*]}"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
