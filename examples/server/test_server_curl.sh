#!/usr/bin/env bash
# ctest example.server.curl: servekit-server end to end with curl, as a user would drive it.
#   test_server_curl.sh SERVER_BINARY MODEL_REPOSITORY
# Starts the server on a free port, reads the port from its `HTTP listening on HOST:PORT` line,
# checks health, metadata, an add_sub inference, a sequence, the pipeline, a 404, a 400, the
# statistics and the metrics, then sends SIGTERM and expects exit status 0.
set -euo pipefail

server_bin=${1:?usage: test_server_curl.sh SERVER_BINARY MODEL_REPOSITORY}
repository=${2:?usage: test_server_curl.sh SERVER_BINARY MODEL_REPOSITORY}

for tool in curl python3; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool not found"
    exit 77
  fi
done

work=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
    kill -KILL "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  echo "--- server stdout" >&2
  cat "$work/stdout" >&2 || true
  echo "--- server stderr" >&2
  tail -n 50 "$work/stderr" >&2 || true
  exit 1
}

# Created here, not by the background job's redirection: the loop below reads it at once, and
# under load the job may not have opened it yet (sed on a missing file stops this script).
: >"$work/stdout"
"$server_bin" --model-repository "$repository" --http-port 0 --grpc-port 0 >"$work/stdout" 2>"$work/stderr" &
server=$!

# A bounded wait for the port line (the server flushes it once it accepts connections).
address=""
for _ in $(seq 1 600); do
  address=$(sed -n 's/^HTTP listening on \(.*\)$/\1/p' "$work/stdout" | head -n 1)
  [ -n "$address" ] && break
  kill -0 "$server" 2>/dev/null || fail "the server exited before listening"
  sleep 0.1
done
[ -n "$address" ] || fail "no 'HTTP listening on' line within 60 s"
base="http://$address"
echo "server at $base"

for model in add_sub identity_delay accumulate accumulate_oldest pipeline; do
  grep -q "^model '$model' version 1: READY" "$work/stdout" || fail "model $model not READY"
done

# call METHOD PATH [BODY]: sets $code and $body.
call() {
  local method=$1 path=$2
  shift 2
  local args=(-s -o "$work/body" -w '%{http_code}' -X "$method" "$base$path")
  if [ $# -gt 0 ]; then
    args+=(-H 'Content-Type: application/json' --data-binary "$1")
  fi
  code=$(curl "${args[@]}") || fail "curl $method $path failed"
  body=$(cat "$work/body")
}

expect() {
  local want=$1 what=$2
  [ "$code" = "$want" ] || fail "$what: HTTP $code, expected $want; body: $body"
}

# check PYTHON_EXPRESSION WHAT: the expression, over the JSON body as `j`, must be true.
check() {
  BODY=$body python3 -c "
import json, os, sys
j = json.loads(os.environ['BODY'])
sys.exit(0 if ($1) else 1)
" || fail "$2: $body"
}

call GET /v2/health/live
expect 200 "live"
call GET /v2/health/ready
expect 200 "ready"

call GET /v2
expect 200 "server metadata"
check "j['name'] == 'servekit' and 'version' in j and isinstance(j['extensions'], list)" \
  "server metadata"

call GET /v2/models/add_sub
expect 200 "model metadata"
check "j['name'] == 'add_sub' and j['versions'] == ['1'] and \
[i['shape'] for i in j['inputs']] == [[-1, 16], [-1, 16]] and \
sorted(o['name'] for o in j['outputs']) == ['OUTPUT0', 'OUTPUT1']" "model metadata"

call GET /v2/models/add_sub/ready
expect 200 "model ready"

ones='[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]'
seq16='[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]'
add_sub_body='{"id": "curl-1", "inputs": [
  {"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": '"$seq16"'},
  {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16], "data": '"$ones"'}]}'
call POST /v2/models/add_sub/infer "$add_sub_body"
expect 200 "add_sub infer"
check "j['model_name'] == 'add_sub' and j.get('id') == 'curl-1' and \
{o['name']: o['data'] for o in j['outputs']} == \
{'OUTPUT0': [float(k + 1) for k in range(1, 17)], 'OUTPUT1': [float(k - 1) for k in range(1, 17)]}" \
  "add_sub outputs"

# A sequence on the accumulate model: 5, +7, +9 (END) -> 5, 12, 21.
seq_call() {
  local value=$1 params=$2
  call POST /v2/models/accumulate/infer '{"parameters": '"$params"', "inputs": [
    {"name": "INPUT", "datatype": "INT32", "shape": [1, 1], "data": ['"$value"']}]}'
  expect 200 "accumulate $params"
}
seq_call 5 '{"sequence_id": 42, "sequence_start": true}'
check "j['outputs'][0]['name'] == 'OUTPUT' and j['outputs'][0]['data'] == [5]" "sequence start"
seq_call 7 '{"sequence_id": 42}'
check "j['outputs'][0]['data'] == [12]" "sequence middle"
seq_call 9 '{"sequence_id": 42, "sequence_end": true}'
check "j['outputs'][0]['data'] == [21]" "sequence end"

call POST /v2/models/pipeline/infer '{"inputs": [
  {"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": '"$seq16"'},
  {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16], "data": '"$ones"'}]}'
expect 200 "pipeline infer"
check "{o['name']: o['data'] for o in j['outputs']} == \
{'OUTPUT': [float(k + 1) for k in range(1, 17)], 'DIFF': [float(k - 1) for k in range(1, 17)]}" \
  "pipeline outputs"

call GET /v2/models/no_such_model
expect 404 "unknown model"
check "'error' in j" "404 body"

call POST /v2/models/add_sub/infer '{"inputs": [
  {"name": "INPUT0", "datatype": "FP32", "shape": [1, 15], "data": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},
  {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16], "data": '"$ones"'}]}'
expect 400 "wrong shape"
check "'error' in j and 'INPUT0' in j['error']" "400 body"

call GET /v2/models/add_sub/stats
expect 200 "stats"
check "j['model_stats'][0]['name'] == 'add_sub' and \
int(j['model_stats'][0]['inference_stats']['success']['count']) >= 1 and \
int(j['model_stats'][0]['execution_count']) >= 1" "stats"

metrics=$(curl -s "$base/metrics") || fail "curl /metrics failed"
grep -q '^nv_inference_request_success{model="add_sub",version="1"} [1-9]' <<<"$metrics" \
  || fail "metrics lack nv_inference_request_success for add_sub: $(head -c 2000 <<<"$metrics")"

# SIGTERM: stop accepting, drain, exit 0.
kill -TERM "$server"
status=0
wait "$server" || status=$?
server=""
[ "$status" -eq 0 ] || fail "the server exited with status $status after SIGTERM"
echo "PASS"
