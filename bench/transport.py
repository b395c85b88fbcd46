"""Transport throughput and latency: JSON-RPC, the FIFO fast path, and a raw pipe baseline.

Runs the loopback template project (``tests/loopback_template``) as a real server process and
measures, through our client:

- write-then-read round trips of 1 KiB, 64 KiB and 1 MiB payloads, as payload MB/s
  (1 MB = 10**6 bytes; payload bytes per round trip divided by the median round-trip time);
- the median round trip of 1 byte.

Each is measured via JSON-RPC (``write_transport`` + ``read_transport``), via JSON-RPC with
pipelined writes (``ProjectTransport(pipeline_writes=True)``: the write's reply is collected
with the read's, one pipe round trip instead of two) and via the FIFO endpoint fast path. Baselines in the same run: our client against a bare JSON-RPC loop (stdlib
``json`` and ``base64``, no validation, no jsonrpcserver: roughly the reference's data path), and
a raw ``os.pipe`` pair to an echo process. A second table compares our base85 codec with
Python's ``base64`` at 1 MiB.

Usage: ``python bench/transport.py [--quick] [--pin CPU]``. Prints tables; asserts nothing.
All paths are measured in interleaved rounds so they share the machine's noise. On a virtual
machine a wake-up across CPUs can cost tens of microseconds, so ``--pin 0`` (every process on
one CPU) gives steadier, lower round trips; the default measures the unpinned case.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from project_api import server  # noqa: E402
from project_api.api import client, transport  # noqa: E402

TEMPLATE = REPO / "tests" / "loopback_template"
SIZES = [1024, 64 * 1024, 1024 * 1024]

# A buffering echo process for the raw-pipe baseline (same behaviour as the template's echo
# device: it accepts a whole payload before anything is read back).
ECHO_CHILD = r"""
import os, select, sys
rfd, wfd = int(sys.argv[1]), int(sys.argv[2])
os.set_blocking(rfd, False); os.set_blocking(wfd, False)
pending = bytearray()
while True:
    r, w, _ = select.select([rfd], [wfd] if pending else [], [])
    if r:
        try:
            data = os.read(rfd, 65536)
        except BlockingIOError:
            data = None
        if data == b"":
            break
        if data:
            pending += data
    if w:
        try:
            del pending[: os.write(wfd, bytes(pending[:65536]))]
        except BlockingIOError:
            pass
"""


def _proc_cpu_sec(pid: int | None) -> float:
    """CPU seconds (user + system) used so far by process ``pid``; 0 where /proc is missing."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# A bare JSON-RPC loop for the same-run baseline: stdlib json and base64, no validation, no
# jsonrpcserver; it answers only the calls the benchmark makes.
BARE_SERVER = r"""
import base64, json, os, sys
rfd = int(sys.argv[sys.argv.index("--read-fd") + 1])
wfd = int(sys.argv[sys.argv.index("--write-fd") + 1])
pending, store = bytearray(), b""
timeouts = dict.fromkeys(
    ["session_start_retry_timeout_sec", "session_start_timeout_sec", "session_established_timeout_sec"], 0
)
while True:
    chunk = os.read(rfd, 65536)
    if not chunk:
        break
    pending += chunk
    while (nl := pending.find(b"\n")) >= 0:
        req = json.loads(bytes(pending[:nl]))
        del pending[: nl + 1]
        method, params = req["method"], req["params"]
        if method == "write_transport":
            store += base64.b85decode(params["data"])
            result = None
        elif method == "read_transport":
            data, store = store[: params["n"]], store[params["n"] :]
            result = {"data": base64.b85encode(data).decode("ascii")}
        elif method == "open_transport":
            result = {"timeouts": timeouts}
        else:
            result = None
        reply = json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": result}) + "\n"
        view = memoryview(reply.encode())
        while view:
            view = view[os.write(wfd, view) :]
"""


def _median_time(fn: Callable[[], None], min_reps: int, budget_sec: float) -> tuple[float, int]:
    """(median seconds per call, number of timed calls)."""
    fn()  # warm up
    times = []
    deadline = time.perf_counter() + budget_sec
    while len(times) < min_reps or time.perf_counter() < deadline:
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        if len(times) >= 100_000:
            break
    return statistics.median(times), len(times)


def _round_trip(t: transport.Transport, payload: bytes) -> None:
    t.write(payload, 10.0)
    got = 0
    while got < len(payload):
        got += len(t.read(len(payload) - got, 10.0))


class _Samples:
    """Per-path timings, collected in rounds that visit every path in turn."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}
        self.cpu_sec = 0.0
        self.rtt_count = 0

    def add(self, key: str, seconds: float) -> None:
        self.times.setdefault(key, []).append(seconds)

    def median(self, key: str) -> float:
        return statistics.median(self.times[key])


def measure_round(
    t: transport.Transport, peer_pid: int | None, samples: _Samples, slice_sec: float
) -> None:
    """One round on one path: each payload size, then 1-byte round trips, for ``slice_sec`` each."""
    for size in SIZES:
        payload = os.urandom(size)
        sec, _ = _median_time(lambda p=payload: _round_trip(t, p), 2, slice_sec)
        samples.add(str(size), sec)
    cpu_start = time.process_time() + _proc_cpu_sec(peer_pid)
    deadline = time.perf_counter() + slice_sec
    _round_trip(t, b"x")
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        _round_trip(t, b"x")
        samples.add("rtt", time.perf_counter() - start)
        samples.rtt_count += 1
    samples.cpu_sec += time.process_time() + _proc_cpu_sec(peer_pid) - cpu_start


class _RawPipeEcho(transport.FdTransport):
    """An FdTransport over two os.pipe()s to an echo child process."""

    def __init__(self) -> None:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        self._proc = subprocess.Popen(
            [sys.executable, "-c", ECHO_CHILD, str(to_child_r), str(from_child_w)],
            pass_fds=(to_child_r, from_child_w),
        )
        os.close(to_child_r)
        os.close(from_child_w)
        super().__init__(from_child_r, to_child_w)
        self.pid = self._proc.pid

    def close(self) -> None:
        super().close()
        self._proc.wait(timeout=5)


def _fake_mlf(tmp: Path) -> Path:
    (tmp / "mlf").mkdir()
    (tmp / "mlf" / "metadata.json").write_text("{}\n")
    path = tmp / "model.tar"
    with tarfile.open(path, "w") as tar:
        tar.add(tmp / "mlf", arcname=".")
    return path


def codec_table(quick: bool) -> list[tuple[str, float, float]]:
    data = os.urandom(1 << 20)
    text = base64.b85encode(data)
    budget = 0.2 if quick else 0.5
    rows = []
    for name, ours, ref, arg in (
        ("b85encode", server.b85encode, base64.b85encode, data),
        ("b85decode", server.b85decode, base64.b85decode, text),
    ):
        assert ours(arg) == ref(arg)
        t_ours, _ = _median_time(lambda f=ours, a=arg: f(a), 3, budget)
        t_ref, _ = _median_time(lambda f=ref, a=arg: f(a), 2, budget)
        rows.append((name, len(data) / t_ours / 1e6, len(data) / t_ref / 1e6))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter measurement windows")
    parser.add_argument(
        "--pin",
        type=int,
        metavar="CPU",
        help="run this process and every server on one CPU (steadier numbers on a shared VM)",
    )
    args = parser.parse_args()
    if args.pin is not None:
        os.sched_setaffinity(0, {args.pin})  # inherited by the servers we launch

    rounds = 3 if args.quick else 8
    slice_sec = 0.1 if args.quick else 0.2
    paths: list[tuple[str, transport.Transport, int | None]] = []
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-transport-")))
        project = tmp / "project"
        with client.instantiate_from_dir(TEMPLATE) as api:
            api.generate_project(_fake_mlf(tmp), str(tmp), project, {"board": "bench"})
        bare = tmp / "bare"
        bare.mkdir()
        (bare / "microtvm_api_server.py").write_text(BARE_SERVER)
        for label, directory, options, pipelined in (
            ("JSON-RPC (write_transport/read_transport)", project, {"transport": "rpc"}, False),
            ("JSON-RPC, pipelined writes", project, {"transport": "rpc"}, True),
            ("fast path (FIFO endpoint)", project, {"transport": "fifo"}, False),
            ("baseline: bare stdlib JSON-RPC loop server", bare, {}, False),
        ):
            api = client.instantiate_from_dir(directory)
            t = stack.enter_context(
                transport.ProjectTransport(api, options, pipeline_writes=pipelined)
            )
            paths.append((label, t, api.process.pid))
        raw = stack.enter_context(_RawPipeEcho())
        paths.append(("baseline: raw os.pipe to an echo process", raw, raw.pid))

        # Every round visits every path, so all of them see the same (shared-machine) noise.
        samples = {label: _Samples() for label, _, _ in paths}
        for _ in range(rounds):
            for label, t, pid in paths:
                measure_round(t, pid, samples[label], slice_sec)

    rows = []
    for label, _, _ in paths:
        smp = samples[label]
        r = {str(size): size / smp.median(str(size)) / 1e6 for size in SIZES}
        r["rtt"] = smp.median("rtt") * 1e6
        r["cpu"] = smp.cpu_sec / max(smp.rtt_count, 1) * 1e6
        rows.append((label, r))

    header = (
        f"{'path':<44} {'1 KiB MB/s':>11} {'64 KiB MB/s':>12} {'1 MiB MB/s':>11} "
        f"{'1 B RTT us':>11} {'1 B CPU us':>11}"
    )
    print(
        "Loopback round trips (write, then read the same bytes back): medians over"
        f" {rounds} interleaved rounds"
    )
    print("CPU us: client + server (or echo) process CPU per 1-byte round trip, from /proc.")
    print(header)
    print("-" * len(header))
    for label, r in rows:
        print(
            f"{label:<44} {r[str(SIZES[0])]:>11.1f} {r[str(SIZES[1])]:>12.1f} "
            f"{r[str(SIZES[2])]:>11.1f} {r['rtt']:>11.1f} {r['cpu']:>11.1f}"
        )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    pinned = f"; all processes pinned to CPU {args.pin}" if args.pin is not None else ""
    print(f"(1-minute load average during the run: {load:.2f} on {os.cpu_count()} CPUs{pinned})")
    print()
    print("base85 codec at 1 MiB (MB of raw bytes per second)")
    print(f"{'codec':<12} {'ours MB/s':>10} {'base64 MB/s':>12} {'speed-up':>9}")
    for name, ours, ref in codec_table(args.quick):
        print(f"{name:<12} {ours:>10.1f} {ref:>12.1f} {ours / ref:>8.1f}x")


if __name__ == "__main__":
    main()
