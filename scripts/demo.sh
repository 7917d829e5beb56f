#!/usr/bin/env bash
# The main job: builds the example inference server (examples/server) in build/ and serves the
# bundled model repository (examples/models) over KServe v2 HTTP until Ctrl-C.
#
#   scripts/demo.sh                 serve on 127.0.0.1:8000 and print a curl line to try
#   scripts/demo.sh --load [SECS]   serve on a free port, run the load generator against add_sub
#                                   for SECS seconds (default 5), print its table, then stop
#   scripts/demo.sh -- FLAGS...     pass FLAGS to servekit-server (e.g. -- --http-port 8080)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

load=0
load_seconds=5
server_flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --load)
      load=1
      if [ $# -gt 1 ] && [[ "$2" =~ ^[0-9]+$ ]]; then
        load_seconds=$2
        shift
      fi
      ;;
    --)
      shift
      server_flags=("$@")
      break
      ;;
    *)
      echo "demo.sh: unknown argument '$1' (see the comment at the top of scripts/demo.sh)" >&2
      exit 2
      ;;
  esac
  shift
done

bash scripts/install-deps.sh

set -x
cmake --preset dev
cmake --build --preset dev --target servekit-server servekit-loadgen
set +x

port_flags=(--http-port 8000)
if [ "$load" -eq 1 ]; then
  port_flags=(--http-port 0 --grpc-port 0)
fi

# The bundled models use the rate limiter (gpu_mlp and gpu_accumulate share "gpu_compute") and
# the response cache (identity_delay): turn both on, as Triton's flags do.
serving_flags=(--rate-limit execution_count --cache-config local,size=16777216)

log=$(mktemp)
build/examples/server/servekit-server --model-repository examples/models "${port_flags[@]}" \
  "${serving_flags[@]}" "${server_flags[@]}" > >(tee "$log") &
server=$!
trap 'kill -TERM "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -f "$log"' EXIT
trap 'kill -TERM "$server" 2>/dev/null || true' INT TERM

# The server prints `HTTP listening on HOST:PORT` once it accepts connections, after loading every
# model. The first start after a build can take a while: LibTorch, OpenCV and CUDA's libraries
# (several hundred MB) are read from disk then, not from the page cache (once 30 s on the 2-core VM).
address=""
for i in $(seq 1 1200); do # at most 120 s
  address=$(sed -n 's/^HTTP listening on \(.*\)$/\1/p' "$log" | head -n 1)
  [ -n "$address" ] && break
  kill -0 "$server" 2>/dev/null || { echo "demo.sh: the server exited" >&2; exit 1; }
  [ "$i" -eq 100 ] && echo "demo.sh: waiting for the server to load the models (a first start reads LibTorch from disk)"
  sleep 0.1
done
[ -n "$address" ] || { echo "demo.sh: the server did not start listening within 120 s" >&2; exit 1; }
host=${address%:*}
port=${address##*:}

if [ "$load" -eq 1 ]; then
  build/bench/servekit-loadgen --host "$host" --port "$port" --model add_sub \
    --connections 64 --duration "$load_seconds" --server-pid "$server"
  exit 0
fi

# An 8x8 UINT8 test image for image_ensemble: 0, 4, ..., 252.
pixels=$(seq -s, 0 4 252)
cat <<EOF

Try it (another terminal):
  curl -s -X POST http://${address}/v2/models/add_sub/infer -H 'Content-Type: application/json' -d '{"inputs": [
    {"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]},
    {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16], "data": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}'
  curl -s -X POST http://${address}/v2/models/repeat_int32/generate_stream \
    -d '{"IN": [4, 5, 6], "DELAY": [100, 100, 100], "WAIT": [0]}'
  curl -s http://${address}/v2/models/stats
Real models (TorchScript through LibTorch, ONNX through OpenCV DNN; docs/backends.md):
  # an ensemble: UINT8 image -> image_preprocess (TorchScript) -> image_classifier_onnx (ONNX)
  curl -s -X POST http://${address}/v2/models/image_ensemble/infer -d '{"inputs": [
    {"name": "IMAGE", "datatype": "UINT8", "shape": [1, 8, 8], "data": [${pixels}]}]}'
  # the ONNX classifier's config, its inputs and outputs completed from the graph
  curl -s http://${address}/v2/models/image_classifier_onnx/config
  # a GRU cell keeping its hidden state per sequence: send it twice, the second time without
  # sequence_start, and the state carries over; "sequence_end": true ends the sequence
  curl -s -X POST http://${address}/v2/models/gru_sequence/infer -d '{"parameters": {"sequence_id": 7,
    "sequence_start": true}, "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [1, 3],
    "data": [0.25, -0.5, 0.75]}]}'
A generative model (tiny_lm: a TorchScript transformer scheduled per forward pass with a paged
KV cache; its weights are random, so its text is gibberish; docs/llm-serving.md):
  curl -s http://${address}/v2/models/tiny_lm/generate -d '{"text_input": "Hello", "max_tokens": 16}'
  curl -sN http://${address}/v1/chat/completions -d '{"model": "tiny_lm", "stream": true,
    "max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}]}'
  curl -s http://${address}/metrics | grep '^vllm:num_requests'
More in docs/server.md. Ctrl-C stops the server (in-flight requests are answered first).
EOF
# Ctrl-C reaches the server too; it drains, then exits 0. A signal also interrupts `wait`, so wait
# again for the server's own exit status.
status=0
wait "$server" || status=$?
if kill -0 "$server" 2>/dev/null; then
  status=0
  wait "$server" || status=$?
fi
exit "$status"
