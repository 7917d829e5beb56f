#!/usr/bin/env bash
# Drives newcomer_server (newcomer_server.cpp) with curl, as a newcomer would try their server:
# readiness, the stateless model (its metadata auto-completed from the backend), a sequence on
# the stateful model, the compile-time ensemble, then SIGTERM (exit 0). Exit 77 without curl.
#   newcomer_curl.sh <newcomer_server binary>
set -euo pipefail
server_bin=$1
command -v curl >/dev/null || { echo "curl not found: skipped"; exit 77; }

work=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
    kill -KILL "$server" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  cat "$work/stdout" "$work/stderr" >&2 || true
  exit 1
}

# Created here, not by the background job's redirection: the loop below reads it at once, and
# under load the job may not have opened it yet (sed on a missing file stops this script).
: >"$work/stdout"
"$server_bin" "$work/models" >"$work/stdout" 2>"$work/stderr" &
server=$!
address=""
for _ in $(seq 1 300); do # at most 30 s
  address=$(sed -n 's/^HTTP listening on \(.*\)$/\1/p' "$work/stdout" | head -n 1)
  [ -n "$address" ] && break
  kill -0 "$server" 2>/dev/null || fail "the server exited before listening"
  sleep 0.1
done
[ -n "$address" ] || fail "no 'HTTP listening on' line within 30 s"
base="http://$address"

# expect <what> <expected substring> <curl args...>
expect() {
  local what=$1 want=$2
  shift 2
  local got
  got=$(curl -sS --max-time 10 "$@") || fail "$what: curl failed"
  case "$got" in
    *"$want"*) echo "ok: $what" ;;
    *) fail "$what: expected '$want' in: $got" ;;
  esac
}

[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$base/v2/health/ready")" = 200 ] ||
  fail "not ready"
expect "scale metadata lists the backend's tensors" '"inputs":[{"datatype":"FP32","name":"INPUT","shape":[-1,-1]}]' \
  "$base/v2/models/scale"
expect "scale doubles" '"data":[2.0,-4.0,7.0]' -H 'Content-Type: application/json' -d \
  '{"inputs":[{"name":"INPUT","datatype":"FP32","shape":[1,3],"data":[1,-2,3.5]}]}' \
  "$base/v2/models/scale/infer"
sum() { # sum <value> <extra parameters>
  curl -sS --max-time 10 -H 'Content-Type: application/json' -d \
    "{\"parameters\":{\"sequence_id\":7$2},\"inputs\":[{\"name\":\"INPUT\",\"datatype\":\"INT32\",\"shape\":[1,1],\"data\":[$1]}]}" \
    "$base/v2/models/running_sum/infer"
}
for step in '5,,"data":[5]' '10,,"data":[15]' '-3,,"data":[12]'; do
  value=${step%%,*}
  want=${step#*,,}
  extra=""
  [ "$value" = 5 ] && extra=',"sequence_start":true'
  [ "$value" = -3 ] && extra=',"sequence_end":true'
  got=$(sum "$value" "$extra")
  case "$got" in *"$want"*) echo "ok: running_sum after $value" ;; *) fail "running_sum: $got" ;; esac
done
expect "the compile-time ensemble: Y = 2X + 1" '"data":[3.0,1.0,21.0]' -H 'Content-Type: application/json' -d \
  '{"inputs":[{"name":"X","datatype":"FP32","shape":[1,3],"data":[1,0,10]}]}' \
  "$base/v2/models/scale_then_offset/infer"
expect "the ensemble in the repository index" '{"name":"scale_then_offset","reason":"","state":"READY","version":"1"}' \
  -X POST "$base/v2/repository/index"

kill -TERM "$server"
status=0
wait "$server" || status=$?
server=""
[ "$status" -eq 0 ] || fail "exit status $status after SIGTERM"
echo "newcomer: all ok"
