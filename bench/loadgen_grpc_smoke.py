#!/usr/bin/env python3
"""servekit-loadgen --protocol grpc against the real example server (ctest bench.loadgen.smoke_grpc).

    loadgen_grpc_smoke.py SERVEKIT_LOADGEN SERVEKIT_SERVER MODEL_REPOSITORY

Starts servekit-server with both endpoints on free ports (demo.sh's flags), then runs, for about a
second each: unary ModelInfer on add_sub, ModelStreamInfer on the decoupled repeat_int32, and
--compare-http on add_sub. Each run must exit 0, answer every request without an error and print
its JSON keys on the last line. Figures are not checked (CI machines are noisy).
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def loadgen(binary, args):
    """Runs servekit-loadgen --json and returns its last line as a dict."""
    command = [binary, "--json", "--warmup", "0.2"] + args
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    check(done.returncode == 0,
          f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    lines = done.stdout.strip().splitlines()
    check(lines, f"{' '.join(command)} printed nothing; stderr:\n{done.stderr}")
    summary = json.loads(lines[-1])
    print(" ".join(command[1:]), "->", lines[-1])
    return summary


def run(binary, grpc_port, http_port):
    host = ["--host", "127.0.0.1", "--port", str(grpc_port), "--protocol", "grpc"]

    unary = loadgen(binary, host + ["--model", "add_sub", "--connections", "8", "--duration", "1"])
    for key in ("throughput_rps", "p50_us", "p99_us", "requests", "errors"):
        check(key in unary, f"unary: no '{key}' in {unary}")
    check(unary["requests"] > 0 and unary["errors"] == 0, f"unary: {unary}")

    stream = loadgen(binary, host + ["--model", "repeat_int32", "--streaming", "--connections",
                                     "4", "--input-size", "4", "--duration", "1"])
    check(stream["requests"] > 0 and stream["errors"] == 0, f"streaming: {stream}")
    # Every request of 4 values gets 4 responses (and the empty final, not counted).
    check(stream["responses_rps"] >= 3 * stream["throughput_rps"], f"streaming: {stream}")

    compare = loadgen(binary, host + ["--http-port", str(http_port), "--compare-http", "--model",
                                      "add_sub", "--connections", "8", "--duration", "1"])
    for key in ("grpc_rps", "grpc_p99_us", "http_rps", "http_p99_us", "grpc_cpu_us_per_request",
                "http_cpu_us_per_request"):
        check(key in compare, f"compare-http: no '{key}' in {compare}")
    check(compare["grpc_requests"] > 0 and compare["grpc_errors"] == 0, f"compare: {compare}")
    check(compare["http_requests"] > 0 and compare["http_errors"] == 0, f"compare: {compare}")
    # The server was found by its gRPC port, so its CPU time is measured.
    check(compare["grpc_cpu_us_per_request"] is not None, f"compare: {compare}")
    return 0


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    binary, server_bin, repository = sys.argv[1:]
    with tempfile.TemporaryDirectory() as work:
        stdout_path = os.path.join(work, "stdout")
        with open(stdout_path, "wb") as stdout, open(os.path.join(work, "stderr"), "wb") as stderr:
            server = subprocess.Popen(
                [server_bin, "--model-repository", repository, "--http-port", "0",
                 "--grpc-port", "0", "--rate-limit", "execution_count",
                 "--cache-config", "local,size=16777216"],
                stdout=stdout,
                stderr=stderr,
            )
        try:
            ports = None
            deadline = time.monotonic() + 60
            while ports is None and time.monotonic() < deadline and server.poll() is None:
                with open(stdout_path) as f:
                    log = f.read()
                grpc = re.search(r"^GRPC listening on \S+:(\d+)$", log, re.M)
                http = re.search(r"^HTTP listening on \S+:(\d+)$", log, re.M)
                if grpc and http:
                    ports = int(grpc.group(1)), int(http.group(1))
                else:
                    time.sleep(0.1)
            check(ports is not None, "the server never printed both 'listening on' lines")
            return run(binary, *ports)
        except Failure as e:
            with open(os.path.join(work, "stderr")) as f:
                print(f"FAILED: {e}\nserver stderr:\n{f.read()}", file=sys.stderr)
            return 1
        finally:
            if server.poll() is None:
                server.terminate()
                server.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
