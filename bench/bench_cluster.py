#!/usr/bin/env python3
"""bench_cluster: what a proxy in front of servekit-server costs, and whether the capacity
planner's prediction matches a measurement (docs/scale-out.md, docs/benchmarks.md).

    bench_cluster.py SERVER LOADGEN PLAN MODELS DEPLOY [--json] [--quick] [--seconds S]

SERVER is servekit-server, LOADGEN servekit-loadgen, PLAN servekit-plan, MODELS the bundled
repository (examples/models), DEPLOY the deploy/ folder (its nginx configuration is the one
used). In one run, on loopback:

1. Proxy overhead: servekit-loadgen, closed loop (16 connections), on add_sub: straight to one
   replica (the baseline), then through nginx in front of that replica, then through nginx in
   front of three replicas. On a 2-core machine the replicas, nginx and the load generator
   share the cores, so the point is the proxy's cost per request, not scaling.
2. Planner validation: a model whose execution sleeps 4 ms (max_batch_size 8, max queue delay
   2 ms, one instance) under an open-loop load at 600 requests/s for 10 s (2 s with --quick;
   the load generator's warm-up half second included, as the server's statistics include it);
   the measured
   p99 against servekit-plan's prediction for that setting and load, from a latency model fitted
   on the same server's batch statistics.

The last line with --json is one JSON object with direct_rps, proxied_rps_1, proxied_rps_3,
proxy_overhead_us (per request, one replica), planner_p99_ratio (predicted / measured), and the
p99s. Skipped (77) without nginx.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "cluster"))
from cluster_test import Failure, Proxy, Replica, call, check, tear_down  # noqa: E402

PLANNED_CONFIG = {
    "name": "planned",
    "backend": "identity",
    "max_batch_size": 8,
    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
    "dynamic_batching": {"max_queue_delay_microseconds": 2000},
    "instance_group": [{"count": 1, "kind": "KIND_CPU"}],
    "parameters": {"execute_delay_ms": {"string_value": "4"}},
}
PLANNED_SETTING = "8,2000,1,1"
PLANNED_RATE = 600


def loadgen(binary, port, model, seconds, rate=None, connections=16, input_size=16):
    cmd = [binary, "--port", str(port), "--model", model, "--duration", str(seconds),
           "--warmup", "0.5", "--input-size", str(input_size), "--json"]
    if rate:
        cmd += ["--rate", str(rate), "--connections", "64"]
    else:
        cmd += ["--connections", str(connections)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60)
    lines = [l for l in out.stdout.splitlines() if l.startswith("{")]
    check(out.returncode == 0 and lines, f"servekit-loadgen failed ({out.returncode}):\n"
                                         f"{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    result = json.loads(lines[-1])
    check(result["errors"] == 0 and result["non_200"] == 0,
          f"servekit-loadgen saw errors against port {port}: {result}")
    return result


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    as_json = "--json" in sys.argv
    quick = "--quick" in sys.argv
    seconds = 1.0 if quick else 5.0
    if "--seconds" in sys.argv:
        seconds = float(sys.argv[sys.argv.index("--seconds") + 1])
        args.remove(sys.argv[sys.argv.index("--seconds") + 1])
    if len(args) != 5:
        print(__doc__)
        return 2
    server, loadgen_bin, plan_bin, models, deploy = args
    if shutil.which("nginx") is None:
        print("SKIP: nginx is not installed (scripts/install-deps.sh installs it)")
        return 77
    workdir = tempfile.mkdtemp(prefix="servekit-bench-cluster-")
    repository = os.path.join(workdir, "models")
    shutil.copytree(os.path.join(models, "add_sub"), os.path.join(repository, "add_sub"))
    os.makedirs(os.path.join(repository, "planned"))
    with open(os.path.join(repository, "planned", "config.json"), "w") as f:
        json.dump(PLANNED_CONFIG, f)
    replicas = []
    proxy = None
    figures = {}
    ok = False
    try:
        replicas = [Replica(server, repository, workdir, f"replica-{i}") for i in range(3)]
        print(f"bench_cluster  nproc: {os.cpu_count()}  {seconds:g} s windows"
              f"{'  (quick)' if quick else ''}")

        direct = loadgen(loadgen_bin, replicas[0].port, "add_sub", seconds)
        proxy = Proxy("nginx", deploy, workdir, replicas[:1])
        one = loadgen(loadgen_bin, proxy.port, "add_sub", seconds)
        proxy.restart(replicas)
        three = loadgen(loadgen_bin, proxy.port, "add_sub", seconds)
        figures["direct_rps"] = direct["throughput_rps"]
        figures["proxied_rps_1"] = one["throughput_rps"]
        figures["proxied_rps_3"] = three["throughput_rps"]
        figures["direct_p99_ms"] = direct["p99_us"] / 1000
        figures["proxied_p99_ms_1"] = one["p99_us"] / 1000
        figures["proxied_p99_ms_3"] = three["p99_us"] / 1000
        figures["proxy_overhead_us"] = 1e6 / one["throughput_rps"] - 1e6 / direct["throughput_rps"]
        figures["proxied_vs_direct_1"] = one["throughput_rps"] / direct["throughput_rps"]
        print(f"  add_sub, closed loop, 16 connections:")
        print(f"    direct             {direct['throughput_rps']:9.0f} req/s  p99 "
              f"{direct['p99_us'] / 1000:6.2f} ms")
        print(f"    nginx, 1 replica   {one['throughput_rps']:9.0f} req/s  p99 "
              f"{one['p99_us'] / 1000:6.2f} ms  ({figures['proxied_vs_direct_1']:.2f}x direct, "
              f"{figures['proxy_overhead_us']:.1f} us per request)")
        print(f"    nginx, 3 replicas  {three['throughput_rps']:9.0f} req/s  p99 "
              f"{three['p99_us'] / 1000:6.2f} ms")

        # The planner against a measurement of the same server under the same load.
        # 6,000 requests (10 s) make the measured p99 stable to a few percent; 1,200 in --quick.
        plan_seconds = 2.0 if quick else max(seconds, 10.0)
        measured = loadgen(loadgen_bin, replicas[1].port, "planned", plan_seconds,
                           rate=PLANNED_RATE)
        status, stats, text = call(replicas[1].port, "GET", "/v2/models/planned/stats")
        check(status == 200, f"stats of planned: HTTP {status} {text}")
        stats_path = os.path.join(workdir, "planned_stats.json")
        with open(stats_path, "w") as f:
            json.dump(stats, f)
        out = subprocess.run([plan_bin, "--stats", stats_path, "--rate", str(PLANNED_RATE),
                              "--seconds", str(plan_seconds + 0.5), "--evaluate",
                              PLANNED_SETTING, "--json"],
                             capture_output=True, text=True, timeout=120)
        check(out.returncode == 0, f"servekit-plan failed:\n{out.stdout}\n{out.stderr}")
        plan = json.loads(out.stdout.strip().splitlines()[-1])
        predicted = plan["evaluated"]["p99_ms"]
        figures["planner_measured_p99_ms"] = measured["p99_us"] / 1000
        figures["planner_predicted_p99_ms"] = predicted
        figures["planner_p99_ratio"] = predicted / (measured["p99_us"] / 1000)
        figures["planner_fixed_ms"] = plan["fixed_ms"]
        figures["planner_per_element_ms"] = plan["per_element_ms"]
        print(f"  planner: 'planned' (4 ms sleep, max_batch_size 8, 2 ms delay) at "
              f"{PLANNED_RATE} req/s: measured p99 {measured['p99_us'] / 1000:.2f} ms, predicted "
              f"{predicted:.2f} ms (ratio {figures['planner_p99_ratio']:.3f}; latency model "
              f"{plan['fixed_ms']:.3f} ms + {plan['per_element_ms']:.3f} ms/request)")
        ok = True
    except Failure as e:
        print(f"FAIL: {e}")
    finally:
        tear_down(replicas, proxy, workdir, ok)
    if ok and as_json:
        figures["quick"] = quick
        figures["nproc"] = os.cpu_count()
        print(json.dumps(figures))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
