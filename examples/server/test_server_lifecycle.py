#!/usr/bin/env python3
"""ctest example.server.lifecycle: the real servekit-server process, shut down and left by clients.

    test_server_lifecycle.py SERVER_BINARY MODEL_REPOSITORY

Three servers, each over a temporary copy of some bundled models with configs made slow or short:

1. Shutdown keeps its promise. With --exit-timeout-secs 2 and, in flight: sequence requests on
   the accumulate model's four slots and a backlog of sequences that will never get a slot, an
   open generate_stream whose backend sends its next response only after 60 s, and plain /infer
   requests queued behind a 200 ms execution. After SIGTERM every request gets an HTTP answer
   (200 for what finished in time, else 503 "server is shutting down"; the stream an error event
   and a clean end of its chunked body), none a closed connection, and the process exits 0
   within the exit timeout plus 3 s.
2. A second signal while draining ends the process at once (and the listener is closed).
3. Departed clients hold nothing. Sequence clients that send a start and disconnect, clients
   that disconnect in the middle of an /infer body or of a generate_stream, and clients that go
   silent (idle, mid-body) are all dropped: the server's descriptor count (/proc/PID/fd) returns
   to its baseline within the short --http-*-timeout-secs, every queued request is answered
   (pending count 0), and a fresh set of sequences, as many as the model has slots, all get a
   slot while they keep themselves alive (a slot a departed client left would make one wait
   forever).

Every wait is bounded; the whole test takes 6 to 10 s. Linux only (/proc); skipped (77)
elsewhere.
"""

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

EXIT_TIMEOUT_S = 2
EXIT_SLACK_S = 3.0


class Failure(Exception):
    pass


def check(condition, what):
    if not condition:
        raise Failure(what)


# ---- a small HTTP/1.1 client over a raw socket ------------------------------------------------


class Closed(Exception):
    """The connection ended before a whole response arrived."""


def read_response(sock, deadline):
    """Reads one response: (status, headers dict, body bytes). A chunked body is de-chunked;
    Closed if the connection ends before the response is whole."""
    buf = b""

    def fill():
        nonlocal buf
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            data = sock.recv(65536)
        except socket.timeout:
            raise Closed("no answer before the deadline")
        except ConnectionError as e:
            raise Closed(f"connection error: {e}")
        if not data:
            raise Closed(f"connection closed after {len(buf)} bytes: {buf[:200]!r}")
        buf += data

    while b"\r\n\r\n" not in buf:
        fill()
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    buf = rest
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            while b"\r\n" not in buf:
                fill()
            size_line, _, buf = buf.partition(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            while len(buf) < size + 2:
                fill()
            body += buf[:size]
            buf = buf[size + 2 :]
            if size == 0:
                return status, headers, body
    length = int(headers.get("content-length", "0"))
    while len(buf) < length:
        fill()
    return status, headers, buf[:length]


def request_bytes(method, path, body=b"", extra=""):
    if isinstance(body, str):
        body = body.encode()
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def connect(port, timeout=5.0):
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def call(port, method, path, body=b"", timeout=15.0):
    """One request on its own connection: (status, headers, body); Closed on a closed
    connection."""
    deadline = time.monotonic() + timeout
    with connect(port) as s:
        s.sendall(request_bytes(method, path, body))
        return read_response(s, deadline)


def call_json(port, method, path, body=None, timeout=15.0):
    status, _, data = call(port, method, path, json.dumps(body) if body is not None else b"",
                           timeout)
    return status, (json.loads(data) if data else None)


# ---- the server process ------------------------------------------------------------------------


class Server:
    def __init__(self, binary, repository, workdir, name, *flags):
        self.stdout_path = os.path.join(workdir, name + ".stdout")
        self.stderr_path = os.path.join(workdir, name + ".stderr")
        self.proc = subprocess.Popen(
            [binary, "--model-repository", repository, "--http-port", "0", "--grpc-port", "0",
             *flags],
            stdout=open(self.stdout_path, "wb"),
            stderr=open(self.stderr_path, "wb"),
        )
        self.port = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open(self.stdout_path) as f:
                m = re.search(r"^HTTP listening on .*:(\d+)$", f.read(), re.M)
            if m:
                self.port = int(m.group(1))
                break
            if self.proc.poll() is not None:
                raise Failure(f"{name}: the server exited ({self.proc.returncode}) before "
                              f"listening\n{self.logs()}")
            time.sleep(0.05)
        if self.port is None:
            raise Failure(f"{name}: no 'HTTP listening on' line within 30 s\n{self.logs()}")

    def logs(self):
        out = []
        for path in (self.stdout_path, self.stderr_path):
            with open(path, errors="replace") as f:
                out.append(f"--- {os.path.basename(path)}\n" + f.read()[-4000:])
        return "\n".join(out)

    def descriptors(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def pending(self, model):
        _, _, body = call(self.port, "GET", "/metrics")
        m = re.search(
            r'^nv_inference_pending_request_count\{model="' + model + r'",version="1"\} (\d+)',
            body.decode(), re.M)
        check(m, f"/metrics has no pending count for {model}")
        return int(m.group(1))

    def success(self, model):
        status, j = call_json(self.port, "GET", f"/v2/models/{model}/stats")
        check(status == 200, f"stats of {model}: HTTP {status}")
        return int(j["model_stats"][0]["inference_stats"]["success"]["count"])

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def wait_until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise Failure(f"{what}: not within {timeout} s")
        time.sleep(0.05)


def run_threads(targets):
    threads = [threading.Thread(target=t, daemon=True) for t in targets]
    for t in threads:
        t.start()
    return threads


def join_all(threads, timeout):
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    check(not any(t.is_alive() for t in threads), f"client threads still running after {timeout} s")


# ---- the model repositories --------------------------------------------------------------------


def copy_model(source_repo, target_repo, name, change):
    shutil.copytree(os.path.join(source_repo, name), os.path.join(target_repo, name))
    path = os.path.join(target_repo, name, "config.json")
    with open(path) as f:
        config = json.load(f)
    change(config)
    with open(path, "w") as f:
        json.dump(config, f, indent=2)


def shutdown_repository(source, target):
    """accumulate: 4 slots, 200 ms per execution, sequences never idle out within the test;
    identity_delay: one request per execution, 200 ms each; repeat_int32 as bundled."""

    def accumulate(c):
        c["sequence_batching"]["max_sequence_idle_microseconds"] = 60_000_000
        c["parameters"] = {"execute_delay_ms": {"string_value": "200"}}

    def identity(c):
        c["max_batch_size"] = 1
        c["dynamic_batching"] = {}
        c.pop("response_cache", None)
        c["parameters"] = {"execute_delay_ms": {"string_value": "200"}}

    os.makedirs(target)
    copy_model(source, target, "accumulate", accumulate)
    copy_model(source, target, "identity_delay", identity)
    copy_model(source, target, "repeat_int32", lambda c: None)


DEPARTED_IDLE_US = 1_000_000
DEPARTED_SLOTS = 64


def departed_repository(source, target):
    """accumulate: one instance of 64 slots, sequences idle out after 1 s; add_sub and
    repeat_int32 as bundled."""

    def accumulate(c):
        c["max_batch_size"] = DEPARTED_SLOTS
        c["sequence_batching"]["max_sequence_idle_microseconds"] = DEPARTED_IDLE_US

    os.makedirs(target)
    copy_model(source, target, "accumulate", accumulate)
    copy_model(source, target, "add_sub", lambda c: None)
    copy_model(source, target, "repeat_int32", lambda c: None)


def accumulate_body(value, sequence_id, start=False, end=False):
    parameters = {"sequence_id": sequence_id}
    if start:
        parameters["sequence_start"] = True
    if end:
        parameters["sequence_end"] = True
    return json.dumps({"parameters": parameters, "inputs": [
        {"name": "INPUT", "datatype": "INT32", "shape": [1, 1], "data": [value]}]})


def identity_body(value):
    return json.dumps({"inputs": [
        {"name": "INPUT0", "datatype": "FP32", "shape": [1, 2], "data": [value, value]}]})


def stream_request(values, delays_ms):
    body = json.dumps({"IN": values, "DELAY": delays_ms, "WAIT": 0})
    return request_bytes("POST", "/v2/models/repeat_int32/generate_stream", body)


def open_stream(port, values, delays_ms, deadline):
    """Starts a generate_stream and reads until its first event: (socket, bytes so far)."""
    s = connect(port)
    s.sendall(stream_request(values, delays_ms))
    got = b""
    while b"data: " not in got or not got.endswith(b"\r\n"):
        s.settimeout(max(0.01, deadline - time.monotonic()))
        data = s.recv(65536)
        if not data:
            raise Failure(f"the stream closed before its first event: {got!r}")
        got += data
    check(got.startswith(b"HTTP/1.1 200"), f"stream head: {got[:200]!r}")
    return s, got


# ---- 1. shutdown with every kind of work in flight --------------------------------------------


def test_shutdown(binary, repository, workdir):
    server = Server(binary, repository, workdir, "shutdown", "--exit-timeout-secs",
                    str(EXIT_TIMEOUT_S))
    port = server.port
    try:
        results = {}  # name -> (status, body) or Closed message
        lock = threading.Lock()

        def send(name, path, body):
            def run():
                try:
                    status, _, data = call(port, "POST", path, body, timeout=20)
                    outcome = (status, data.decode(errors="replace"))
                except (Closed, OSError) as e:
                    outcome = f"closed: {e}"
                with lock:
                    results[name] = outcome
            return run

        # The four slot sequences start and are answered.
        slot_ids = [1001, 1002, 1003, 1004]
        starts = run_threads([send(f"start {i}", "/v2/models/accumulate/infer",
                                   accumulate_body(1, i, start=True)) for i in slot_ids])
        join_all(starts, 20)
        for i in slot_ids:
            check(results[f"start {i}"][0] == 200, f"slot sequence {i}: {results[f'start {i}']}")

        # (b) a stream whose second response is due in 60 s, open at its first event.
        deadline = time.monotonic() + 20
        stream, stream_bytes = open_stream(port, [7, 8], [0, 60_000], deadline)

        acc_before = server.success("accumulate")
        id_before = server.success("identity_delay")
        # (a) 6 more requests on each slot sequence (6 executions of 200 ms: done in time) and
        # 8 sequences backlogged behind them (the slots never free: answered 503 at the exit
        # timeout); (c) 20 plain requests at 200 ms each, some answered, the rest 503.
        work = []
        for i in slot_ids:
            work += [send(f"continue {i}.{k}", "/v2/models/accumulate/infer",
                          accumulate_body(1, i)) for k in range(6)]
        backlogged = list(range(2001, 2009))
        work += [send(f"backlogged {i}", "/v2/models/accumulate/infer",
                      accumulate_body(1, i, start=True)) for i in backlogged]
        work += [send(f"infer {k}", "/v2/models/identity_delay/infer", identity_body(k))
                 for k in range(20)]
        threads = run_threads(work)

        # Every request reached its model: counted pending or answered, but for those executing
        # (at most 4 in accumulate's batch, 1 in identity_delay's); then a margin for them.
        def arrived():
            acc = server.pending("accumulate") + server.success("accumulate") - acc_before
            ident = server.pending("identity_delay") + server.success("identity_delay") - id_before
            return acc >= 24 + 8 - 4 and ident >= 20 - 1
        wait_until(arrived, 15, "the requests reaching their models")
        time.sleep(0.3)

        sent = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)

        # The stream: its error event and the end of its chunked body.
        stream_error = None
        try:
            while not stream_bytes.endswith(b"\r\n0\r\n\r\n"):
                stream.settimeout(max(0.01, sent + 10 - time.monotonic()))
                data = stream.recv(65536)
                if not data:
                    stream_error = "closed before the end of the chunked body"
                    break
                stream_bytes += data
        except (socket.timeout, OSError) as e:
            stream_error = f"no end of the chunked body: {e}"
        stream.close()

        try:
            rc = server.proc.wait(EXIT_TIMEOUT_S + EXIT_SLACK_S)
        except subprocess.TimeoutExpired:
            raise Failure(f"still running {EXIT_TIMEOUT_S + EXIT_SLACK_S} s after SIGTERM "
                          f"(--exit-timeout-secs {EXIT_TIMEOUT_S})\n{server.logs()}")
        exited = time.monotonic() - sent
        join_all(threads, 10)

        closed = {k: v for k, v in results.items() if isinstance(v, str)}
        check(not closed, f"{len(closed)} of {len(results)} requests got no HTTP answer: "
              f"{sorted(closed.items())[:5]}")
        check(stream_error is None, f"stream: {stream_error}: {stream_bytes!r}")
        events = re.findall(rb"data: (.*)\n\n", stream_bytes)
        check(len(events) == 2 and b'"OUT":7' in events[0].replace(b" ", b"") and
              b"shutting down" in events[1],
              f"stream: expected the first response then an error event, got {events!r}")

        for k, (status, body) in results.items():
            check(status == 200 or (status == 503 and "shutting down" in body),
                  f"{k}: HTTP {status} {body}")
        continued = [results[f"continue {i}.{k}"][0] for i in slot_ids for k in range(6)]
        check(continued.count(200) == len(continued),
              f"slot sequences' requests (due well within the exit timeout): {continued}")
        held = [results[f"backlogged {i}"][0] for i in backlogged]
        check(held.count(503) == len(held), f"backlogged sequences: {held}")
        infer = [results[f"infer {k}"][0] for k in range(20)]
        check(infer.count(200) >= 1 and infer.count(503) >= 1,
              f"queued /infer: expected some 200 and the rest 503, got {infer}")
        check(rc == 0, f"exit status {rc} after SIGTERM\n{server.logs()}")
        print(f"shutdown: exit 0 {exited:.2f} s after SIGTERM (exit timeout {EXIT_TIMEOUT_S} s); "
              f"/infer {infer.count(200)} x 200, {infer.count(503)} x 503; sequences "
              f"{len(continued)} x 200, {len(held)} backlogged x 503; stream ended with an "
              "error event")
    finally:
        server.kill()


# ---- 2. a second signal while draining ---------------------------------------------------------


def test_second_signal(binary, repository, workdir):
    server = Server(binary, repository, workdir, "second_signal", "--exit-timeout-secs", "30")
    try:
        deadline = time.monotonic() + 20
        stream, _ = open_stream(server.port, [1, 2], [0, 60_000], deadline)
        server.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        check(server.proc.poll() is None,
              f"exited ({server.proc.returncode}) with a stream open, 0.5 s after SIGTERM "
              "(--exit-timeout-secs 30)")
        try:
            connect(server.port, timeout=2).close()
            raise Failure("a new connection was accepted while draining")
        except ConnectionRefusedError:
            pass
        sent = time.monotonic()
        server.proc.send_signal(signal.SIGINT)
        try:
            rc = server.proc.wait(5)
        except subprocess.TimeoutExpired:
            raise Failure("still running 5 s after a second signal")
        took = time.monotonic() - sent
        stream.close()
        check(took < 2.0, f"the second signal took {took:.2f} s")
        check(rc == -signal.SIGINT, f"exit status {rc} after the second signal (SIGINT)")
        print(f"second signal: gone {took * 1000:.0f} ms after SIGINT (killed by it)")
    finally:
        server.kill()


# ---- 3. departed clients hold nothing ----------------------------------------------------------


def test_departed_clients(binary, repository, workdir):
    timeouts = ["--http-header-timeout-secs", "1", "--http-body-timeout-secs", "1",
                "--http-body-total-timeout-secs", "2", "--http-keepalive-timeout-secs", "1",
                "--http-write-timeout-secs", "1"]
    server = Server(binary, repository, workdir, "departed", "--exit-timeout-secs", "2",
                    *timeouts)
    port = server.port
    try:
        # Every path used once, so whatever is set up lazily counts in the baseline.
        status, _ = call_json(port, "POST", "/v2/models/accumulate/infer",
                              json.loads(accumulate_body(1, 1, start=True, end=True)))
        check(status == 200, f"warm-up sequence: HTTP {status}")
        s, _ = open_stream(port, [1], [0], time.monotonic() + 10)
        s.close()
        wait_until(lambda: server.pending("repeat_int32") == 0, 10, "the warm-up stream")
        time.sleep(0.2)  # the server closes its side of the warm-up connections
        baseline = server.descriptors()

        n = 50
        held = []  # clients that stay connected and silent: the server must drop them
        # Sequence clients that start a sequence and leave without ending it: more than the
        # model's slots, so some leave a backlogged sequence.
        departed_sequences = DEPARTED_SLOTS + 16
        for i in range(departed_sequences):
            s = connect(port)
            s.sendall(request_bytes("POST", "/v2/models/accumulate/infer",
                                    accumulate_body(1, 5000 + i, start=True)))
            s.close()
        # Clients that leave in the middle of an /infer body.
        body = json.dumps({"inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": [1.0] * 16},
            {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16], "data": [1.0] * 16}]})
        whole = request_bytes("POST", "/v2/models/add_sub/infer", body)
        for _ in range(n):
            s = connect(port)
            s.sendall(whole[: len(whole) - len(body) // 2])
            s.close()
        # Clients that leave in the middle of a generate_stream (after its first event).
        deadline = time.monotonic() + 20
        for _ in range(n):
            s, _ = open_stream(port, [1, 2, 3, 4], [0, 200, 200, 200], deadline)
            s.close()
        # Clients that stay but go silent: mid-body, mid-header, idle after a request.
        for _ in range(10):
            s = connect(port)
            s.sendall(whole[: len(whole) - len(body) // 2])
            held.append(s)
            s = connect(port)
            s.sendall(b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\n")
            held.append(s)
            s = connect(port)
            s.sendall(request_bytes("GET", "/v2/health/live"))
            held.append(s)
        left = time.monotonic()
        during = server.descriptors()

        # Descriptors: back to the baseline within the timeouts (1 s) and a margin.
        wait_until(lambda: server.descriptors() <= baseline, 6,
                   f"descriptors back to the baseline of {baseline} "
                   f"(now {server.descriptors()}, {during} right after the clients left)")
        fds_back = time.monotonic() - left
        for s in held:
            s.close()

        # Every queued request answered (into nothing): the departed sequences take the slots
        # in turn, each for the idle timeout.
        wait_until(lambda: server.pending("accumulate") == 0 and server.pending("add_sub") == 0,
                   10, "the departed clients' requests answered")

        # A fresh set of sequences, as many as the model has slots: each keeps itself alive
        # (a request every 0.25 s, the idle timeout is 1 s) once answered, so a slot held by a
        # departed client would keep one of them backlogged until the deadline.
        fresh = list(range(9001, 9001 + DEPARTED_SLOTS))
        answered = {}
        failures = []
        lock = threading.Lock()
        all_answered = threading.Event()
        fresh_deadline = time.monotonic() + DEPARTED_IDLE_US / 1e6 * 2 + 6

        def client(i):
            def run():
                try:
                    status, _, data = call(port, "POST", "/v2/models/accumulate/infer",
                                           accumulate_body(1, i, start=True),
                                           timeout=fresh_deadline - time.monotonic())
                    if status != 200:
                        raise Failure(f"sequence {i} start: HTTP {status} {data!r}")
                    with lock:
                        answered[i] = time.monotonic()
                        if len(answered) == len(fresh):
                            all_answered.set()
                    while not all_answered.wait(0.25):
                        if time.monotonic() > fresh_deadline:
                            return
                        status, _, data = call(port, "POST", "/v2/models/accumulate/infer",
                                               accumulate_body(1, i), timeout=5)
                        if status != 200:
                            raise Failure(f"sequence {i} keep-alive: HTTP {status} {data!r}")
                    status, _, data = call(port, "POST", "/v2/models/accumulate/infer",
                                           accumulate_body(1, i, end=True), timeout=5)
                    if status != 200:
                        raise Failure(f"sequence {i} end: HTTP {status} {data!r}")
                except (Failure, Closed, OSError) as e:
                    with lock:
                        failures.append(f"sequence {i}: {e}")
                    all_answered.set()  # let the others end
            return run

        fresh_sent = time.monotonic()
        join_all(run_threads([client(i) for i in fresh]), fresh_deadline - time.monotonic() + 10)
        check(not failures, f"fresh sequences: {failures[:5]}")
        check(len(answered) == len(fresh),
              f"only {len(answered)} of {len(fresh)} fresh sequences got a slot")
        slowest = max(answered.values()) - fresh_sent
        wait_until(lambda: server.descriptors() <= baseline, 6,
                   f"descriptors back to the baseline of {baseline} after the fresh sequences")
        print(f"departed clients: {departed_sequences} sequences, {n} mid-body, {n} mid-stream, "
              f"30 silent; descriptors {baseline} -> {during} -> {baseline} in {fds_back:.2f} s; "
              f"{len(fresh)} fresh sequences all got a slot, the last after {slowest:.2f} s")

        server.proc.send_signal(signal.SIGTERM)
        try:
            rc = server.proc.wait(EXIT_TIMEOUT_S + EXIT_SLACK_S)
        except subprocess.TimeoutExpired:
            raise Failure("still running after SIGTERM")
        check(rc == 0, f"exit status {rc} after SIGTERM")
    finally:
        server.kill()


def main():
    if len(sys.argv) != 3:
        print("usage: test_server_lifecycle.py SERVER_BINARY MODEL_REPOSITORY", file=sys.stderr)
        return 2
    if not os.path.isdir("/proc/self/fd"):
        print("SKIP: no /proc/PID/fd to count descriptors")
        return 77
    binary, models = sys.argv[1], sys.argv[2]
    workdir = tempfile.mkdtemp(prefix="servekit-lifecycle-")
    started = time.monotonic()
    current = None
    try:
        shutdown_repo = os.path.join(workdir, "shutdown_models")
        shutdown_repository(models, shutdown_repo)
        departed_repo = os.path.join(workdir, "departed_models")
        departed_repository(models, departed_repo)
        for test, repo in ((test_shutdown, shutdown_repo), (test_second_signal, shutdown_repo),
                           (test_departed_clients, departed_repo)):
            current = test.__name__
            test(binary, repo, workdir)
        print(f"PASS ({time.monotonic() - started:.1f} s)")
        return 0
    except Failure as e:
        print(f"FAIL in {current}: {e}", file=sys.stderr)
        for name in os.listdir(workdir):
            if name.endswith(".stderr"):
                with open(os.path.join(workdir, name), errors="replace") as f:
                    print(f"--- {name} (tail)\n{f.read()[-2000:]}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
