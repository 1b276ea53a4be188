"""Fixtures of the Python suites: real bitwheeld processes on temporary
sockets, as tests/daemonutil.c starts them for the C suites.

Each daemon runs in a fresh directory under /tmp (a short path: Unix socket
paths are limited to 108 bytes), in its own process group, output to a log
file, with NOTIFY_SOCKET pointing at a datagram socket of ours; start()
returns once READY=1 arrives there, so no test sleeps to wait for a daemon.
Whatever a test leaves running is killed, process group and all, and its
directory removed, by the fixture's teardown.

Environment (make check sets the first two, bindings/python/local.mk):
  BITWHEELD          the daemon to run (required)
  BWCTL              bwctl, for the interop tests (required by them)
  BW_TEST_SLOW       a factor for every wait and margin (default 1)
  BW_TEST_MARGIN_MS  how late past its lane's resolution a fire may be
                     (default 50, as in tests/daemonutil.h)
  BW_TEST_PACKAGING  0: test_packaging skips (build-aux/test.sh's
                     sanitizer run: pip, venv and mypy are the plain
                     build's to check, and take 75 s)
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Iterator

import pytest

SLOW = max(1, int(os.environ.get("BW_TEST_SLOW", "1") or 1))
#: The bound on anything that should come promptly, in seconds.
WAIT = 10.0 * SLOW
#: Lateness allowed past the lane's resolution, in ns.
MARGIN_NS = int(os.environ.get("BW_TEST_MARGIN_MS", "50") or 50) * SLOW \
    * 1_000_000
NOBODY = 65534


def program(var: str) -> str:
    path = os.environ.get(var)
    if not path:
        pytest.fail(f"${var} is not set: run the suites with make check, or "
                    f"set it to the built program")
    return path


class Daemon:
    """One bitwheeld: start(), then .sock; stop(), kill(), log()."""

    def __init__(self, user: int | None = None) -> None:
        self.user = user
        self.dir = tempfile.mkdtemp(prefix="bwpy.")
        self.sock = os.path.join(self.dir, "bw.sock")
        self.logpath = os.path.join(self.dir, "daemon.log")
        self.proc: subprocess.Popen[bytes] | None = None
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify_path = os.path.join(self.dir, "notify")
        self.notify.bind(notify_path)
        self.notify_path = notify_path
        if user is not None:
            os.chmod(self.dir, 0o755)
            os.chown(self.dir, user, user)
            os.chmod(notify_path, 0o777)

    def start(self, *args: str) -> "Daemon":
        env = dict(os.environ, NOTIFY_SOCKET=self.notify_path)
        env.pop("LISTEN_FDS", None)
        with open(self.logpath, "ab") as log:
            self.proc = subprocess.Popen(
                [program("BITWHEELD"), "--socket", self.sock, *args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                start_new_session=True, user=self.user, group=self.user,
                extra_groups=[] if self.user is not None else None)
        deadline = time.monotonic() + WAIT
        notes = b""
        while b"READY=1" not in notes.split(b"\n"):
            left = deadline - time.monotonic()
            if self.proc.poll() is not None or left <= 0:
                self.kill()
                pytest.fail(f"bitwheeld {' '.join(args)} did not get ready "
                            f"within {WAIT} s; log:\n{self.log()}")
            if select.select([self.notify], [], [], min(left, 0.1))[0]:
                notes += b"\n" + self.notify.recv(4096)
        return self

    def log(self) -> str:
        try:
            with open(self.logpath, encoding="utf-8", errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return "(no log)"

    def send(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal it and wait for its exit (killed after WAIT)."""
        assert self.proc is not None
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"bitwheeld did not stop within {WAIT} s; "
                        f"log:\n{self.log()}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(WAIT)

    def cleanup(self) -> None:
        self.kill()
        self.notify.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    made: list[Daemon] = []
    yield made
    for d in made:
        d.cleanup()


@pytest.fixture
def start_daemon(daemons: list[Daemon]):
    """start_daemon(*args, user=None): a ready daemon with these options."""
    def start(*args: str, user: int | None = None) -> Daemon:
        if user is not None:
            need_reachable(user)
        d = Daemon(user)
        daemons.append(d)
        return d.start(*args)
    return start


@pytest.fixture
def daemon(start_daemon) -> Daemon:
    """A daemon with the default options."""
    return start_daemon()


def check_fire_time(fire, rx_ns: int, res_ns: int) -> None:
    """Never early, exactly; late by at most the resolution plus margin."""
    assert fire.fired_ns >= fire.deadline_ns, fire
    assert rx_ns >= fire.deadline_ns, (rx_ns, fire)
    assert rx_ns - fire.deadline_ns <= res_ns + MARGIN_NS, (
        f"fire {fire.key} received {(rx_ns - fire.deadline_ns) / 1e6:.1f} ms "
        f"after its deadline (allowed {res_ns / 1e6} ms + margin "
        f"{MARGIN_NS / 1e6} ms)")


def run_python(code: str, *, user: int | None = None,
               env: dict[str, str] | None = None,
               timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run Python code in a child (as `user`), output captured."""
    full = dict(os.environ, **(env or {}))
    if user is not None:
        need_reachable(user)
    return subprocess.run([sys.executable, "-c", code], env=full,
                          capture_output=True, text=True,
                          timeout=timeout or WAIT * 2, user=user, group=user,
                          extra_groups=[] if user is not None else None)


def need_root(why: str) -> None:
    if os.geteuid() != 0:
        pytest.skip(f"needs root: {why}")


def need_reachable(uid: int) -> None:
    """Skip unless uid can run the built daemon, and this Python with the
    package under test: a build directory only root may enter (as
    dpkg-buildpackage's, run as root in a 0700 directory) keeps every
    other uid out, and a test that runs something as another uid then has
    nothing to run."""
    r = subprocess.run(
        [sys.executable, "-c", "import os, sys, bitwheel; "
         "sys.exit(0 if os.access(sys.argv[1], os.X_OK) else 3)",
         program("BITWHEELD")],
        capture_output=True, text=True, timeout=WAIT, user=uid, group=uid,
        extra_groups=[])
    if r.returncode != 0:
        pytest.skip(f"uid {uid} cannot reach {program('BITWHEELD')} or the "
                    f"bitwheel package (a build directory only root may "
                    f"enter): {r.stderr.strip()[-200:] or 'not executable'}")
