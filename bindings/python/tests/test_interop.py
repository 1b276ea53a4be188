"""Interop with bwctl, the C library's command line: a fire scheduled from
Python is consumed by `bwctl watch`, and one scheduled by `bwctl schedule`
is consumed from Python, payloads and keys intact."""

from __future__ import annotations

import json
import subprocess
import time

import bitwheel
from conftest import WAIT, program


def bwctl(sock: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([program("BWCTL"), "--socket", sock, *args],
                          capture_output=True, text=True, timeout=WAIT * 2)


def test_python_schedules_bwctl_watches(daemon):
    with bitwheel.Client(daemon.sock, session="interop") as p:
        r1 = p.schedule(7, in_=0.05, payload=b"from python")
        r2 = p.schedule(2**63 + 5, in_=0.1, every=3600, payload=b"periodic")
    r = bwctl(daemon.sock, "watch", "--session", "interop", "--count", "2",
              "--json", "--timeout", f"{int(WAIT)}s")
    assert r.returncode == 0, r.stderr
    fires = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(f["key"], f["payload"], f["deadline_ns"]) for f in fires] == [
        (7, "from python", r1.deadline_ns),
        (2**63 + 5, "periodic", r2.deadline_ns)]
    # bwctl acknowledged them: nothing is left for the next consumer.
    with bitwheel.Client(daemon.sock, session="interop", consume=True) as c:
        assert c.hello.queued == 0 and c.next_fire(0.2) is None
        assert c.cancel(2**63 + 5) is True


def test_bwctl_schedules_python_consumes(daemon):
    with bitwheel.Client(daemon.sock, session="interop2",
                         consume=True) as c:
        r = bwctl(daemon.sock, "schedule", "--session", "interop2",
                  "--key", "0x2a", "--in", "100ms", "--payload", "from bwctl")
        assert r.returncode == 0, r.stderr
        words = dict(w.split("=", 1) for w in r.stdout.split()[1:])
        assert words["key"] == "42"
        f = c.next_fire(WAIT)
        assert f is not None
        assert (f.key, f.payload, f.deadline_ns) == (
            42, b"from bwctl", int(words["deadline"]))
        assert f.fired_ns >= f.deadline_ns and time.monotonic_ns() >= \
            f.deadline_ns
        assert f.ack(wait=True) == 1
        r = bwctl(daemon.sock, "cancel", "--session", "interop2", "--key",
                  "42")
        assert r.returncode == 1   # fired and acknowledged: not pending
