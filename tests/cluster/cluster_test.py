#!/usr/bin/env python3
"""ctest cluster.nginx / cluster.haproxy: servekit-server replicas behind a real proxy.

    cluster_test.py nginx|haproxy SERVER_BINARY MODEL_REPOSITORY DEPLOY_DIR

Starts servekit-server replicas on loopback ports (each with --sequence-id-header x-sequence-id
and --drain-grace-secs 2, serving the bundled `accumulate` sequence model and the stateless
`add_sub`) and the proxy, from the configuration shipped in DEPLOY_DIR (deploy/nginx/servekit.conf
or deploy/haproxy/haproxy.cfg) with only its server lines and listen address replaced. Then:

1. Sticky sequences: 24 sequences of 5 requests from 4 client threads, the id in the header.
   Every running sum is right (a request that reached another replica would be refused: it
   holds no such sequence), and each replica's statistics count a multiple of 5 sequence
   requests (whole sequences), over at least two replicas.
2. Draining: under a load of stateless requests and sequences, one replica gets SIGTERM. Its
   readiness turns false at once, it exits 0 after the grace period, and no request fails: it
   refuses new sequences with 503 (the proxy retries them on the next replica of the ring) and
   finishes the ones it holds.
3. A replica dies: under the same load, one replica gets SIGKILL. No stateless request fails (the
   proxy retries them, see deploy/nginx/servekit.conf for why that is safe); the sequences held
   open on the dead replica (two, found through the statistics) fail with "must specify the
   START flag" from the replica their ids now go to (a clear error, never a wrong sum), those
   on the live replicas go on, and sequences started after the kill all succeed.
4. A replica is added: which replica serves each of 120 sequence ids is read from the replicas'
   statistics (one single-request sequence at a time) before and after a fourth replica joins
   the proxy's configuration; the ids that move all move to the new replica, about a quarter of
   them, and none moves between the old ones.

Every wait is bounded. Skipped (77) when the proxy is not installed (scripts/install-deps.sh
installs nginx and haproxy from Debian 12).
"""

import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

GRACE_S = 2
SKIP = 77


class Failure(Exception):
    pass


def check(condition, what):
    if not condition:
        raise Failure(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(port, method, path, body=None, headers=None, timeout=15.0):
    """(status, parsed JSON body or None, raw text); status 0 when the connection failed."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = json.dumps(body) if body is not None else None
        h = {"Content-Type": "application/json"} if data is not None else {}
        h.update(headers or {})
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        text = r.read().decode(errors="replace")
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = None
        return r.status, parsed, text
    except (OSError, http.client.HTTPException) as e:
        return 0, None, f"connection failed: {e}"
    finally:
        conn.close()


def accumulate_body(value, start=False, end=False):
    params = {}
    if start:
        params["sequence_start"] = True
    if end:
        params["sequence_end"] = True
    body = {"inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1, 1], "data": [value]}]}
    if params:
        body["parameters"] = params
    return body


ADD_SUB_BODY = {"inputs": [
    {"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": [float(i) for i in range(16)]},
    {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16], "data": [1.0] * 16},
]}


# ---- replicas and proxies ------------------------------------------------------------------------


class Replica:
    def __init__(self, binary, repository, workdir, name):
        self.name = name
        self.stdout_path = os.path.join(workdir, name + ".stdout")
        self.stderr_path = os.path.join(workdir, name + ".stderr")
        self.proc = subprocess.Popen(
            [binary, "--model-repository", repository, "--http-port", "0", "--allow-grpc",
             "false", "--http-thread-count", "2", "--sequence-id-header", "x-sequence-id",
             "--drain-grace-secs", str(GRACE_S), "--exit-timeout-secs", "5"],
            stdout=open(self.stdout_path, "wb"), stderr=open(self.stderr_path, "wb"))
        self.port = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with open(self.stdout_path) as f:
                m = re.search(r"^HTTP listening on .*:(\d+)$", f.read(), re.M)
            if m:
                self.port = int(m.group(1))
                return
            if self.proc.poll() is not None:
                raise Failure(f"{name} exited ({self.proc.returncode}) before listening\n"
                              f"{self.logs()}")
            time.sleep(0.05)
        raise Failure(f"{name}: no 'HTTP listening on' line within 60 s\n{self.logs()}")

    def logs(self):
        out = []
        for path in (self.stdout_path, self.stderr_path):
            with open(path, errors="replace") as f:
                out.append(f"--- {os.path.basename(path)}\n" + f.read()[-3000:])
        return "\n".join(out)

    def successes(self, model):
        status, j, text = call(self.port, "GET", f"/v2/models/{model}/stats")
        check(status == 200, f"{self.name}: stats of {model}: HTTP {status} {text}")
        return int(j["model_stats"][0]["inference_stats"]["success"]["count"])

    def ready(self):
        return call(self.port, "GET", "/v2/health/ready")[0] == 200

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def render_config(kind, deploy_dir, replicas, listen_port):
    """The shipped configuration with the loopback replicas and listen port put in."""
    if kind == "nginx":
        text = open(os.path.join(deploy_dir, "nginx", "servekit.conf")).read()
        servers = "".join(f"    server 127.0.0.1:{r.port} max_fails=0;\n" for r in replicas)
        text, n = re.subn(r"(?m)^    server servekit-\d\.servekit:8000 max_fails=0;\n", "", text)
        check(n == 3, "deploy/nginx/servekit.conf: expected three server lines")
        text = text.replace("    keepalive 32;", servers + "    keepalive 32;")
        text, n = re.subn(r"(?m)^    listen 8000;", f"    listen 127.0.0.1:{listen_port};", text)
        check(n == 1, "deploy/nginx/servekit.conf: expected `listen 8000;`")
        return text
    text = open(os.path.join(deploy_dir, "haproxy", "haproxy.cfg")).read()
    servers = "".join(f"    server r{i} 127.0.0.1:{r.port}\n" for i, r in enumerate(replicas))
    text, n = re.subn(r"(?m)^    server servekit-\d servekit-\d\.servekit:8000\n", "", text)
    check(n == 3, "deploy/haproxy/haproxy.cfg: expected three server lines")
    text = text.rstrip("\n") + "\n" + servers
    text, n = re.subn(r"(?m)^    bind :8000$", f"    bind 127.0.0.1:{listen_port}", text)
    check(n == 1, "deploy/haproxy/haproxy.cfg: expected `bind :8000`")
    return text


class Proxy:
    def __init__(self, kind, deploy_dir, workdir, replicas):
        self.kind = kind
        self.deploy_dir = deploy_dir
        self.workdir = workdir
        self.port = free_port()
        self.proc = None
        self.start(replicas)

    def start(self, replicas):
        conf = render_config(self.kind, self.deploy_dir, replicas, self.port)
        if self.kind == "nginx":
            prefix = os.path.join(self.workdir, "nginx")
            os.makedirs(os.path.join(prefix, "temp"), exist_ok=True)
            user = "user root root;\n" if os.geteuid() == 0 else ""
            temp = os.path.join(prefix, "temp")
            main = (f"{user}daemon off;\nworker_processes 1;\npid {prefix}/nginx.pid;\n"
                    f"error_log {prefix}/error.log warn;\n"
                    "events { worker_connections 1024; }\n"
                    "http {\n"
                    f"    access_log {prefix}/access.log;\n"
                    f"    client_body_temp_path {temp}/body;\n"
                    f"    proxy_temp_path {temp}/proxy;\n"
                    f"    fastcgi_temp_path {temp}/fastcgi;\n"
                    f"    uwsgi_temp_path {temp}/uwsgi;\n"
                    f"    scgi_temp_path {temp}/scgi;\n"
                    + conf + "\n}\n")
            path = os.path.join(prefix, "nginx.conf")
            with open(path, "w") as f:
                f.write(main)
            cmd = ["nginx", "-p", prefix, "-e", os.path.join(prefix, "error.log"), "-c", path]
        else:
            path = os.path.join(self.workdir, "haproxy.cfg")
            with open(path, "w") as f:
                f.write(conf)
            cmd = ["haproxy", "-db", "-f", path]
        self.log_path = os.path.join(self.workdir, self.kind + ".log")
        self.proc = subprocess.Popen(cmd, stdout=open(self.log_path, "ab"),
                                     stderr=subprocess.STDOUT)
        # Up when a stateless request goes through (and, for HAProxy, its checks have run).
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Failure(f"{self.kind} exited ({self.proc.returncode})\n{self.logs()}")
            if call(self.port, "POST", "/v2/models/add_sub/infer", ADD_SUB_BODY, timeout=2)[0] == 200:
                return
            time.sleep(0.1)
        raise Failure(f"{self.kind}: no request went through within 20 s\n{self.logs()}")

    def restart(self, replicas):
        self.stop()
        self.start(replicas)

    def logs(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()[-3000:]

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


# ---- clients ---------------------------------------------------------------------------------------


def run_sequence(port, seq_id, length=5):
    """One sequence of `length` requests through the proxy. None when every running sum is right,
    else what went wrong (the first failure)."""
    total = 0
    for i in range(1, length + 1):
        status, j, text = call(port, "POST", "/v2/models/accumulate/infer",
                               accumulate_body(i, start=(i == 1), end=(i == length)),
                               headers={"x-sequence-id": seq_id})
        if status != 200:
            return f"request {i}: HTTP {status} {text}"
        total += i
        got = j["outputs"][0]["data"][0]
        if got != total:
            return f"request {i}: running sum {got}, expected {total}"
    return None


class Load:
    """Stateless requests and sequences through the proxy from background threads until stop();
    records every outcome with its time."""

    def __init__(self, port, tag, stateless_threads=2, sequence_threads=2):
        self.port = port
        self.tag = tag
        self.stop_flag = threading.Event()
        self.lock = threading.Lock()
        self.stateless = []   # (time, status, text)
        self.sequences = []   # (start time, end time, id, error or None)
        self.threads = [threading.Thread(target=self.stateless_loop) for _ in range(stateless_threads)]
        self.threads += [threading.Thread(target=self.sequence_loop, args=(k,))
                         for k in range(sequence_threads)]
        for t in self.threads:
            t.start()

    def stateless_loop(self):
        while not self.stop_flag.is_set():
            status, _, text = call(self.port, "POST", "/v2/models/add_sub/infer", ADD_SUB_BODY)
            with self.lock:
                self.stateless.append((time.monotonic(), status, text))

    def sequence_loop(self, k):
        n = 0
        while not self.stop_flag.is_set():
            n += 1
            seq_id = f"{self.tag}-{k}-{n}"
            began = time.monotonic()
            error = run_sequence(self.port, seq_id)
            with self.lock:
                self.sequences.append((began, time.monotonic(), seq_id, error))

    def stop(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join(30)
            check(not t.is_alive(), "a load thread did not finish within 30 s")


# ---- the scenarios -----------------------------------------------------------------------------


def sticky(proxy, replicas):
    before = [r.successes("accumulate") for r in replicas]
    errors = []
    ids = [f"sticky-{i}" for i in range(24)]

    def worker(k):
        for seq_id in ids[k::4]:
            e = run_sequence(proxy.port, seq_id)
            if e:
                errors.append(f"{seq_id}: {e}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    check(not errors, "sequences through the proxy went wrong:\n" + "\n".join(errors[:5]))
    counts = [r.successes("accumulate") - b for r, b in zip(replicas, before)]
    check(sum(counts) == 24 * 5, f"the replicas count {counts} sequence requests, not 120")
    check(all(c % 5 == 0 for c in counts),
          f"a sequence was split between replicas: per-replica requests {counts}")
    check(sum(1 for c in counts if c > 0) >= 2, f"the hash sent every sequence to one replica: {counts}")
    print(f"  sticky: 24 sequences x 5 requests, per replica {counts}, every sum right")


def drain(proxy, replicas):
    victim = replicas[1]
    load = Load(proxy.port, "drain")
    time.sleep(0.5)
    victim.proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    not_ready = False
    deadline = signalled + 1.0
    while time.monotonic() < deadline:
        if not victim.ready():
            not_ready = True
            break
        time.sleep(0.02)
    time.sleep(GRACE_S + 1.5)  # past the grace period: the replica has stopped under load
    load.stop()
    try:
        code = victim.proc.wait(15)
    except subprocess.TimeoutExpired:
        raise Failure("the drained replica did not exit within 15 s")
    check(not_ready, "readiness did not turn false within 1 s of SIGTERM")
    check(code == 0, f"the drained replica exited {code}\n{victim.logs()}")
    failed = [s for s in load.stateless if s[1] != 200]
    bad_sequences = [s for s in load.sequences if s[3]]
    check(not failed, f"{len(failed)} of {len(load.stateless)} stateless requests failed while "
                      f"draining, e.g. {failed[0][1]} {failed[0][2][:300]}" if failed else "")
    check(not bad_sequences, f"{len(bad_sequences)} of {len(load.sequences)} sequences failed while "
                             f"draining, e.g. {bad_sequences[0][2]}: {bad_sequences[0][3][:300]}"
          if bad_sequences else "")
    check(len(load.sequences) >= 10 and len(load.stateless) >= 50, "too little load went through")
    print(f"  drain: {len(load.stateless)} stateless requests and {len(load.sequences)} sequences, "
          f"0 failed; readiness false at once, exit 0 after the grace period")


def kill(proxy, replicas):
    victim_index = 2
    victim = replicas[victim_index]
    # Sequences held open across the kill, at most two per replica (a replica has four slots),
    # until the victim holds two: their owners are read from the replicas' statistics.
    held = {}  # id -> owner index
    per_owner = [0] * len(replicas)
    for n in range(60):
        if per_owner[victim_index] >= 2:
            break
        seq_id = f"held-{n}"
        before = [r.successes("accumulate") for r in replicas]
        status, j, text = call(proxy.port, "POST", "/v2/models/accumulate/infer",
                               accumulate_body(1, start=True), headers={"x-sequence-id": seq_id})
        check(status == 200, f"{seq_id}: HTTP {status} {text}")
        owner = next(i for i, r in enumerate(replicas) if r.successes("accumulate") > before[i])
        if per_owner[owner] >= 2:
            status, _, text = call(proxy.port, "POST", "/v2/models/accumulate/infer",
                                   accumulate_body(1, end=True), headers={"x-sequence-id": seq_id})
            check(status == 200, f"{seq_id}: closing: HTTP {status} {text}")
            continue
        held[seq_id] = owner
        per_owner[owner] += 1
    check(per_owner[victim_index] == 2, "no two sequence ids hashed to the victim in 60 tries")

    load = Load(proxy.port, "kill")
    time.sleep(0.5)
    victim.proc.kill()
    killed = time.monotonic()
    victim.proc.wait(10)
    time.sleep(2.0)
    load.stop()
    failed = [s for s in load.stateless if s[1] != 200]
    check(not failed, f"{len(failed)} of {len(load.stateless)} stateless requests failed after the "
                      f"kill, e.g. {failed[0][1]} {failed[0][2][:300]}" if failed else "")
    # A sequence of the load running when its replica died fails clearly; one started after it
    # does not.
    lost = [s for s in load.sequences if s[3]]
    for began, _, seq_id, error in lost:
        check(began <= killed + 0.05, f"{seq_id}, started after the kill, failed: {error}")
        check("must specify the START flag" in error, f"{seq_id} failed without a clear reason: {error}")
    after = [s for s in load.sequences if s[0] > killed + 0.05]
    check(len(after) >= 5, f"only {len(after)} sequences ran after the kill")
    # The held sequences: the victim's end with a clear error, the others go on with their sums.
    for seq_id, owner in held.items():
        status, j, text = call(proxy.port, "POST", "/v2/models/accumulate/infer",
                               accumulate_body(2, end=True), headers={"x-sequence-id": seq_id})
        if owner == victim_index:
            check(status == 400 and "must specify the START flag" in text,
                  f"{seq_id} (on the killed replica): HTTP {status} {text}")
        else:
            check(status == 200 and j["outputs"][0]["data"][0] == 3,
                  f"{seq_id} (on a live replica): HTTP {status} {text}")
    print(f"  kill: {len(load.stateless)} stateless requests, 0 failed; {len(held)} held sequences: "
          f"the killed replica's 2 failed clearly, the others went on; {len(lost)} running "
          f"sequences failed clearly, {len(after)} started after the kill all succeeded")


def owner_of(proxy, replicas, seq_id):
    """Which replica serves `seq_id`: a one-request sequence, then whose count went up."""
    before = [r.successes("accumulate") for r in replicas]
    status, _, text = call(proxy.port, "POST", "/v2/models/accumulate/infer",
                           accumulate_body(1, start=True, end=True), headers={"x-sequence-id": seq_id})
    check(status == 200, f"{seq_id}: HTTP {status} {text}")
    grown = [i for i, r in enumerate(replicas) if r.successes("accumulate") > before[i]]
    check(len(grown) == 1, f"{seq_id}: counted by replicas {grown}")
    return grown[0]


def add(proxy, replicas, binary, repository, workdir):
    ids = [f"user-{i}" for i in range(120)]
    old = {i: owner_of(proxy, replicas, i) for i in ids}
    newcomer = Replica(binary, repository, workdir, f"replica-{len(replicas)}")
    replicas.append(newcomer)
    proxy.restart(replicas)
    new = {i: owner_of(proxy, replicas, i) for i in ids}
    moved = [i for i in ids if new[i] != old[i]]
    wrong = [i for i in moved if new[i] != len(replicas) - 1]
    check(not wrong, f"{len(wrong)} ids moved between old replicas, e.g. {wrong[:3]}")
    share = len(moved) / len(ids)
    check(0.08 <= share <= 0.45, f"{len(moved)} of {len(ids)} ids moved to the new replica "
                                 f"(expected about a quarter)")
    print(f"  add: {len(moved)} of {len(ids)} sequence ids moved, all to the new replica "
          f"({share:.0%}; a fair share is 25%)")


def tear_down(replicas, proxy, workdir, ok):
    """Stops every process; keeps the logs (and says where) unless all went well."""
    for r in replicas:
        r.stop()
    if proxy:
        proxy.stop()
    if ok:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"logs kept in {workdir}")


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("nginx", "haproxy"):
        print(__doc__)
        return 2
    kind, binary, models, deploy_dir = sys.argv[1:]
    if shutil.which(kind) is None:
        print(f"SKIP: {kind} is not installed (scripts/install-deps.sh installs it)")
        return SKIP
    workdir = tempfile.mkdtemp(prefix=f"servekit-cluster-{kind}-")
    repository = os.path.join(workdir, "models")
    for model in ("accumulate", "add_sub"):
        shutil.copytree(os.path.join(models, model), os.path.join(repository, model))
    replicas = []
    proxy = None
    ok = False
    try:
        for step, scenario in (("sticky", sticky), ("drain", drain), ("kill", kill), ("add", add)):
            # A fresh cluster for each: three replicas and the proxy in front of them.
            for r in replicas:
                r.stop()
            if proxy:
                proxy.stop()
            replicas = [Replica(binary, repository, workdir, f"{step}-replica-{i}") for i in range(3)]
            proxy = Proxy(kind, deploy_dir, workdir, replicas)
            if scenario is add:
                add(proxy, replicas, binary, repository, workdir)
            else:
                scenario(proxy, replicas)
        ok = True
    except Failure as e:
        print(f"FAIL ({kind}): {e}")
        if proxy:
            print(f"--- {kind}\n{proxy.logs()}")
    finally:
        tear_down(replicas, proxy, workdir, ok)
    if ok:
        print(f"PASS: three servekit-server replicas behind {kind}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
