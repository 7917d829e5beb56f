#!/usr/bin/env python3
"""ctest cluster.kubernetes_manifests: deploy/kubernetes/servekit.yaml is well formed and its
numbers agree with servekit-server's flags.

    check_manifests.py SERVER_BINARY MANIFEST

Debian 12 packages no Kubernetes schema validator (kubectl 1.20 validates only against a live
cluster), so this checks what a cluster would not: every document parses as YAML with the kind's
required fields; the container's arguments are flags servekit-server accepts (it is run with
them, over an empty repository on loopback ports, until it listens); the probes name the
server's health endpoints on a declared port; terminationGracePeriodSeconds covers preStop plus
--drain-grace-secs plus --exit-timeout-secs; the Ingress hashes on the header the server reads
(--sequence-id-header); the Service targets the container's ports; Prometheus scrapes /metrics.
Skipped (77) without python3-yaml.
"""

import os
import re
import subprocess
import sys
import tempfile
import time

try:
    import yaml
except ImportError:
    print("SKIP: python3-yaml is not installed (scripts/install-deps.sh installs it)")
    sys.exit(77)


class Failure(Exception):
    pass


def check(condition, what):
    if not condition:
        raise Failure(what)


def flag_value(args, name):
    for a in args:
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    raise Failure(f"the container has no {name}=... argument")


def server_accepts(binary, args):
    """Runs servekit-server with the container's arguments (repository and ports replaced by
    loopback ones) until it listens; fails with its message if it refuses a flag."""
    with tempfile.TemporaryDirectory() as repo:
        patched = []
        for a in args:
            if a.startswith("--model-repository="):
                a = f"--model-repository={repo}"
            elif a.startswith("--host="):
                a = "--host=127.0.0.1"
            elif a.startswith("--http-port=") or a.startswith("--grpc-port="):
                a = a.split("=")[0] + "=0"
            patched.append(a)
        proc = subprocess.Popen([binary, *patched], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        out = ""
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                line = proc.stdout.readline()
                out += line
                if line.startswith("HTTP listening on"):
                    return
                if not line and proc.poll() is not None:
                    break
            raise Failure(f"servekit-server did not start with the manifest's arguments:\n{out}")
        finally:
            proc.kill()
            proc.wait(10)


def main():
    binary, manifest = sys.argv[1:3]
    with open(manifest) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    by_kind = {}
    for d in docs:
        for key in ("apiVersion", "kind", "metadata"):
            check(key in d, f"a document has no {key}")
        check("name" in d["metadata"], f"{d['kind']} has no metadata.name")
        by_kind[d["kind"]] = d
    for kind in ("Deployment", "Service", "Ingress"):
        check(kind in by_kind, f"no {kind}")

    deployment = by_kind["Deployment"]
    spec = deployment["spec"]
    labels = spec["template"]["metadata"]["labels"]
    check(spec["selector"]["matchLabels"].items() <= labels.items(),
          "the Deployment's selector does not match its pod labels")
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    server_accepts(binary, args)

    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    check(int(flag_value(args, "--http-port")) == ports.get("http"), "--http-port is not the http port")
    check(int(flag_value(args, "--grpc-port")) == ports.get("grpc"), "--grpc-port is not the grpc port")
    for probe, path in (("livenessProbe", "/v2/health/live"), ("readinessProbe", "/v2/health/ready"),
                        ("startupProbe", "/v2/health/ready")):
        get = container[probe]["httpGet"]
        check(get["path"] == path, f"{probe} asks {get['path']}, not {path}")
        check(get["port"] in ports or get["port"] in ports.values(), f"{probe}'s port is not declared")

    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    m = re.search(r"sleep (\d+)", " ".join(pre_stop))
    check(m, "preStop is not a sleep")
    needed = int(m.group(1)) + int(flag_value(args, "--drain-grace-secs")) + \
        int(flag_value(args, "--exit-timeout-secs"))
    check(pod["terminationGracePeriodSeconds"] > needed,
          f"terminationGracePeriodSeconds {pod['terminationGracePeriodSeconds']} does not cover "
          f"preStop + drain grace + exit timeout = {needed} s")

    annotations = spec["template"]["metadata"]["annotations"]
    check(annotations["prometheus.io/path"] == "/metrics", "Prometheus does not scrape /metrics")
    check(int(annotations["prometheus.io/port"]) == ports["http"], "Prometheus scrapes another port")

    service = by_kind["Service"]
    check(service["spec"]["selector"].items() <= labels.items(), "the Service selects no pod")
    for p in service["spec"]["ports"]:
        check(p["targetPort"] in ports, f"the Service targets an undeclared port {p['targetPort']}")

    ingress = by_kind["Ingress"]
    header = flag_value(args, "--sequence-id-header").lower().replace("-", "_")
    hash_by = ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/upstream-hash-by"]
    check(hash_by == f"$http_{header}", f"the Ingress hashes on {hash_by}, the server reads "
                                        f"{flag_value(args, '--sequence-id-header')}")
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    check(backend["name"] == service["metadata"]["name"], "the Ingress points at another Service")
    print(f"PASS: {os.path.basename(manifest)}: {len(docs)} documents agree with servekit-server")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (Failure, KeyError, TypeError, ValueError) as e:
        print(f"FAIL: {type(e).__name__}: {e}")
        sys.exit(1)
