"""The blocking Client against real daemons: timing, cancel, replace,
periodic timers, named sessions, consumers and acknowledgement, reconnect,
the socket default and the check of who listens."""

from __future__ import annotations

import datetime
import errno
import grp
import os
import select
import signal
import subprocess
import sys
import time

import pytest

import bitwheel
from conftest import (MARGIN_NS, NOBODY, WAIT, check_fire_time, need_root,
                      run_python)


def fire_now(c: bitwheel.Client, timeout: float = WAIT) -> bitwheel.Fire:
    f = c.next_fire(timeout)
    assert f is not None, f"no fire within {timeout} s"
    return f


def test_schedule_fires_never_early(daemon):
    with bitwheel.Client(daemon.sock) as c:
        res = c.hello.oneshot_resolution_ns
        r = c.schedule(1, in_=0.2, payload=b"hi")
        t0 = time.monotonic_ns()
        assert t0 <= r.deadline_ns <= t0 + 200_000_000
        f = fire_now(c)
        check_fire_time(f, time.monotonic_ns(), res)
        assert (f.key, f.payload, f.deadline_ns, f.count) == \
            (1, b"hi", r.deadline_ns, 0)
        assert not f.late and not f.redelivered and f.delivery == 1

        # An absolute deadline, and a timedelta.
        at = time.monotonic_ns() + 150_000_000
        assert c.schedule(2, at_monotonic_ns=at).deadline_ns == at
        c.schedule(3, in_=datetime.timedelta(milliseconds=100))
        got = {}
        for _ in range(2):
            f = fire_now(c)
            check_fire_time(f, time.monotonic_ns(), res)
            got[f.key] = f
        assert got[2].deadline_ns == at and got[2].payload == b""
        assert sorted(got) == [2, 3]

        # A past deadline fires at once; key 0 and the largest key work.
        c.schedule(0, at_monotonic_ns=1)
        c.schedule(2**64 - 1, in_=0)
        assert sorted(fire_now(c).key for _ in range(2)) == [0, 2**64 - 1]


def test_schedule_at_wall_clock(daemon):
    """A wall-clock timer (PROTOCOL.md, "Clocks"): an aware datetime, of
    any zone, fires once the wall clock is there, with its instant in
    due_realtime_ns; naive datetimes and at with every are refused before
    anything is sent.  check_clock (C) steps a daemon's clock."""
    from zoneinfo import ZoneInfo
    utc = datetime.timezone.utc
    with bitwheel.Client(daemon.sock) as c:
        at = datetime.datetime.now(utc) + datetime.timedelta(milliseconds=300)
        want = bitwheel._core.realtime_ns(at)
        assert want == round(at.timestamp() * 1e6) * 1000
        c.schedule(1, at=at.astimezone(ZoneInfo("Asia/Kathmandu")))
        f = fire_now(c)
        assert time.time_ns() >= want, "fired before its wall-clock instant"
        assert (f.key, f.due_realtime_ns, f.late) == (1, want, False)
        assert f.due_at == at
        c.schedule(2, in_=0.01)
        assert fire_now(c).due_realtime_ns is None
        with pytest.raises(ValueError, match="aware"):
            c.schedule(3, at=datetime.datetime.now())
        with pytest.raises(ValueError, match="oneshot"):
            c.schedule(3, at=at, every=1)
        with pytest.raises(ValueError, match="exactly one"):
            c.schedule(3, at=at, in_=1)


def test_schedule_calendar(daemon):
    """A calendar timer (PROTOCOL.md, "Calendar timers"): fires at each
    elapse, due_realtime_ns on the spec's whole seconds; listed with its
    spec normalized and its jitter; a spec the daemon refuses is
    BadCalendarError; a calendar timer's options without a calendar, and
    calendar with every, are refused before anything is sent.  check_clock
    (C) steps a daemon's clock under them."""
    with bitwheel.Client(daemon.sock) as c:
        c.schedule(1, calendar="*:*:0/1 UTC")
        got = [fire_now(c, 3.0), fire_now(c, 3.0)]
        for f in got:
            assert f.key == 1 and f.due_realtime_ns % 10**9 == 0
        assert got[1].due_realtime_ns == got[0].due_realtime_ns + 10**9
        assert c.cancel(1) is True
        with pytest.raises(bitwheel.BadCalendarError, match="Fry"):
            c.schedule(2, calendar="Mon..Fry 09:00")
        with pytest.raises(ValueError, match="calendar timer's"):
            c.schedule(2, in_=1, jitter=1)
        with pytest.raises(ValueError, match="recurs"):
            c.schedule(2, calendar="daily", every=1)
    with bitwheel.Client(daemon.sock, session="cal") as c:
        c.schedule(3, calendar="Mon..Fri 09:00 Europe/Berlin", jitter=300,
                   jitter_fixed=True, misfire_grace=3600)
        (t,) = c.list_timers("cal").entries
        assert t.calendar == "Mon..Fri *-*-* 09:00:00 Europe/Berlin"
        assert (t.jitter_ns, t.jitter_fixed) == (300 * 10**9, True)
        assert t.misfire_grace_ns == 3600 * 10**9


def test_schedule_clock(daemon):
    """clock="boottime" (PROTOCOL.md, "Clocks"): the reply's deadline is
    on CLOCK_BOOTTIME, the timer fires and is listed with its clock; a
    monotonic one is listed without; an unknown clock, and clock with at
    or calendar, are refused before anything is sent.  check_clock (C)
    suspends a daemon under such timers."""
    with bitwheel.Client(daemon.sock) as c:
        before = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        s = c.schedule(1, in_=0.05, clock="boottime")
        assert before + 50 * 10**6 <= s.deadline_ns
        assert s.deadline_ns <= time.clock_gettime_ns(time.CLOCK_BOOTTIME) + 50 * 10**6
        f = fire_now(c, 3.0)
        assert f.key == 1 and f.due_realtime_ns is None
        assert time.clock_gettime_ns(time.CLOCK_BOOTTIME) >= s.deadline_ns
        with pytest.raises(ValueError, match="monotonic"):
            c.schedule(2, in_=1, clock="realtime")
        with pytest.raises(ValueError, match="wall clock"):
            c.schedule(2, calendar="daily", clock="boottime")
        with pytest.raises(ValueError, match="wall clock"):
            c.schedule(2, at=datetime.datetime.now(datetime.timezone.utc),
                       clock="monotonic")
    with bitwheel.Client(daemon.sock, session="boot") as c:
        c.schedule(3, in_=3600, clock="boottime")
        c.schedule(4, in_=3600, clock="monotonic")
        t = {e.key: e for e in c.list_timers("boot").entries}
        assert t[3].HasField("clock") and t[3].clock == bitwheel.bitwheel_pb2.CLOCK_BOOTTIME
        assert not t[4].HasField("clock")


def test_calendar(daemon):
    """Client.calendar (PROTOCOL.md, "Calendar"): a spec's normalized form,
    zone and elapses as aware UTC datetimes, across Berlin's spring-forward
    day (no 02:30 on 2026-03-29); none for "*-02-30"; from the daemon's now
    without a base; BadCalendarError with the daemon's reason, and
    arguments refused before anything is sent.  check_bwctl compares the
    daemon's answers with systemd-analyze's."""
    from zoneinfo import ZoneInfo
    utc = datetime.timezone.utc
    berlin = ZoneInfo("Europe/Berlin")
    base = datetime.datetime(2026, 3, 28, 13, 0, tzinfo=berlin)
    with bitwheel.Client(daemon.sock) as c:
        ev = c.calendar("*-*-* 02:30 Europe/Berlin", 3, base=base)
        assert isinstance(ev, bitwheel.CalendarEvents)
        assert ev.normalized == "*-*-* 02:30:00 Europe/Berlin"
        assert ev.zone == "Europe/Berlin" and not ev.gave_up
        assert ev.base == base
        assert [t.astimezone(berlin).strftime("%m-%d %H:%M %Z")
                for t in ev.elapses] == ["03-30 02:30 CEST", "03-31 02:30 CEST",
                                         "04-01 02:30 CEST"]
        assert all(t.tzinfo is utc for t in ev.elapses)
        assert ev.elapses_ns == [bitwheel._core.realtime_ns(t)
                                 for t in ev.elapses]
        assert c.calendar("*-02-30", 5).elapses == []
        before = datetime.datetime.now(utc)
        ev = c.calendar("minutely")
        assert ev.zone is None and len(ev.elapses) == 1
        assert before - datetime.timedelta(seconds=1) <= ev.base
        assert ev.base < ev.elapses[0] <= ev.base + datetime.timedelta(minutes=1)
        assert ev.elapses[0].second == 0 and ev.elapses[0].microsecond == 0
        with pytest.raises(bitwheel.BadCalendarError) as e:
            c.calendar("Mon..Fri 09:00 Mars/Olympus")
        assert e.value.code == 22 and "unknown time zone" in e.value.message
        assert len(c.calendar("*:*:0/0.25", 1000).elapses) == 1000
        with pytest.raises(ValueError, match="iterations"):
            c.calendar("daily", 1001)
        with pytest.raises(ValueError, match="iterations"):
            c.calendar("daily", 0)
        with pytest.raises(TypeError, match="spec"):
            c.calendar(b"daily")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="base: an aware"):
            c.calendar("daily", base=datetime.datetime(2026, 1, 1))
        assert c.stats().clients == 1


def test_cancel(daemon):
    with bitwheel.Client(daemon.sock) as c:
        res = c.hello.oneshot_resolution_ns
        c.schedule(5, in_=0.3)
        assert c.cancel(5) is True
        assert c.cancel(5) is False
        assert c.cancel(6) is False
        assert c.next_fire(0.3 + (res + MARGIN_NS) / 1e9) is None
        st = c.stats()
        assert st.oneshot.cancelled == 1 and st.oneshot.fired == 0


def test_replace(daemon):
    with bitwheel.Client(daemon.sock) as c:
        res = c.hello.oneshot_resolution_ns
        c.schedule(7, in_=60, payload=b"old")
        with pytest.raises(bitwheel.DuplicateKeyError) as e:
            c.schedule(7, in_=0.1)
        assert e.value.code == 11 and "7" in e.value.message
        r = c.schedule(7, in_=0.1, payload=b"new", replace=True)
        assert r.replaced is True
        assert c.schedule(8, in_=60, replace=True).replaced is False
        f = fire_now(c)
        check_fire_time(f, time.monotonic_ns(), res)
        assert (f.key, f.payload, f.deadline_ns) == (7, b"new", r.deadline_ns)
        assert c.next_fire(0.2) is None   # the replaced timer is gone


def test_periodic(daemon):
    with bitwheel.Client(daemon.sock) as c:
        res = c.hello.periodic_resolution_ns
        period = 50_000_000
        r = c.schedule(9, in_=0.05, every=datetime.timedelta(milliseconds=50),
                       payload=b"tick")
        for n in range(1, 4):
            f = fire_now(c)
            assert f.key == 9 and f.count == n and f.payload == b"tick"
            assert f.deadline_ns >= r.deadline_ns + (n - 1) * period
            assert (f.deadline_ns - r.deadline_ns) % period == 0
            assert f.fired_ns >= f.deadline_ns
        assert c.cancel(9) is True
        # Fires already sent before the cancel may still be read; none after.
        while c.next_fire(0) is not None:
            pass
        assert c.next_fire(0.05 * 3 + (res + MARGIN_NS) / 1e9) is None


def test_leeway(daemon):
    """leeway picks the lane (hello.lanes, finest first): 1 s puts a
    oneshot and a periodic timer in the coarse lane, 0 a periodic one in
    the fine lane, and none a 50 ms periodic one (its default, 50/64 ms)
    in the fine lane too; each fire never early, within its lane's bound
    plus the margin."""
    with bitwheel.Client(daemon.sock) as c:
        lanes = c.hello.lanes
        assert len(lanes) == 2
        assert lanes[0].max_late_ns <= lanes[1].max_late_ns
        assert lanes[0].resolution_ns == c.hello.oneshot_resolution_ns
        c.schedule(1, in_=0.05, leeway=1)
        c.schedule(2, in_=0.05, every=0.05, leeway=datetime.timedelta(0))
        c.schedule(3, in_=0.05, every=0.05)
        c.schedule(4, in_=0.05, every=10, leeway=1)
        st = c.stats()
        assert (st.oneshot.inserted, st.periodic.inserted) == (2, 2)
        bound = {1: lanes[1].max_late_ns, 2: lanes[0].max_late_ns,
                 3: lanes[0].max_late_ns, 4: lanes[1].max_late_ns}
        seen = set()
        while seen != {1, 2, 3, 4}:
            f = fire_now(c)
            check_fire_time(f, time.monotonic_ns(), bound[f.key])
            seen.add(f.key)
        with pytest.raises(ValueError):
            c.schedule(5, in_=1, leeway=-1)


def test_coalesce(daemon):
    """coalesce=True: 20 timers due over 100 ms with a leeway of 1 s come
    together once all are due, each within its window; a producer may
    not ask."""
    with pytest.raises(ValueError):
        bitwheel.Client(daemon.sock, session="py-co", coalesce=True)
    with bitwheel.Client(daemon.sock, coalesce=True) as c:
        assert c.hello.coalesce is True
        due = {k: c.schedule(k, in_=0.02 + 0.005 * k, leeway=1).deadline_ns
               for k in range(20)}
        got = [fire_now(c) for _ in range(20)]
        rx = time.monotonic_ns()
        assert sorted(f.key for f in got) == list(range(20))
        for f in got:
            assert f.deadline_ns == due[f.key]
            check_fire_time(f, rx, 1_000_000_000)
            assert f.fired_ns >= f.deadline_ns
        # Held: none was handed out before the last deadline.
        assert rx >= max(due.values())


def test_named_session_survives_client(daemon):
    with bitwheel.Client(daemon.sock, session="orders") as p:
        assert p.resumed is False
        r = p.schedule(42, in_=0.05, payload=b"order 42")
    time.sleep(0.1)   # due with no consumer: it waits in the queue
    with bitwheel.Client(daemon.sock, session="orders", consume=True) as c:
        assert c.resumed is True and c.hello.queued == 1
        f = fire_now(c)
        assert (f.key, f.payload, f.deadline_ns) == (42, b"order 42",
                                                     r.deadline_ns)
        assert f.ack(wait=True) == 1
        assert c.stats().in_flight == 0
    with bitwheel.Client(daemon.sock, session="orders", consume=True) as c:
        assert c.hello.queued == 0 and c.next_fire(0.2) is None


def test_list_sessions_and_timers(daemon):
    """The listings: every session this uid has (the anonymous one with its
    pid), a session's timers with their fields, paged (2,100 timers take
    three pages), a limit that stops early, and UnknownSessionError."""
    with bitwheel.Client(daemon.sock, session="listed") as p, \
            bitwheel.Client(daemon.sock) as anon:
        for k in range(2100):
            p.schedule(k, in_=3600 + k, every=60 if k % 3 == 0 else None,
                       payload=b"x" * (k % 7) if k % 5 else None)
        got = anon.list_sessions()
        assert not got.more
        names = {(s.owner_uid, s.name if s.HasField("name") else None)
                 for s in got.entries}
        assert names == {(os.geteuid(), b"listed"), (os.geteuid(), None)}
        mine = [s for s in got.entries if not s.HasField("name")]
        assert [s.pid for s in mine] == [os.getpid()]
        named = [s for s in got.entries if s.HasField("name")][0]
        assert (named.timers, named.producers, named.consumers) == (2100, 1, 0)
        t = anon.list_timers("listed")
        assert not t.more and t.total == 2100 and t.owner_uid == os.geteuid()
        assert sorted(x.key for x in t.entries) == list(range(2100))
        for x in t.entries:
            k = x.key
            assert x.period_ns == (60 * 10**9 if k % 3 == 0 else 0)
            assert x.has_payload == bool(k % 5)
            assert x.payload_bytes == (k % 7 if k % 5 else 0)
            assert x.lane == (bitwheel.bitwheel_pb2.LANE_PERIODIC if k % 3 == 0
                              else bitwheel.bitwheel_pb2.LANE_ONESHOT)
            assert 0 < x.deadline_ns - t.now_ns <= (3600 + k) * 10**9
        assert abs(t.realtime_ns - time.time_ns()) < 60 * 10**9
        few = anon.list_timers(b"listed", limit=5)
        assert len(few.entries) == 5 and few.more
        with pytest.raises(bitwheel.UnknownSessionError):
            anon.list_timers("not-there")
        with pytest.raises(ValueError):
            anon.list_timers("listed", limit=0)


def test_competing_consumers_with_acks(daemon):
    n = 40
    s = daemon.sock
    with bitwheel.Client(s, session="jobs", consume=True, window=4) as a, \
            bitwheel.Client(s, session="jobs", consume=True, window=4) as b, \
            bitwheel.Client(s, session="jobs") as p:
        for k in range(n):
            p.schedule(k, at_monotonic_ns=1)
        seen: dict[str, list[int]] = {"a": [], "b": []}
        deadline = time.monotonic() + WAIT
        while len(seen["a"]) + len(seen["b"]) < n:
            assert time.monotonic() < deadline, seen
            for name, c in (("a", a), ("b", b)):
                f = c.next_fire(0.01)
                if f is not None:
                    seen[name].append(f.key)
                    f.ack()
        assert sorted(seen["a"] + seen["b"]) == list(range(n))
        assert seen["a"] and seen["b"]   # shared, not one taking all
        assert a.next_fire(0.1) is None and b.next_fire(0.1) is None
        st = p.stats()
        assert st.in_flight == 0 and st.acked == n and st.redelivered == 0


def test_cumulative_ack(daemon):
    with bitwheel.Client(daemon.sock, session="batch", consume=True) as c:
        for k in range(5):
            c.schedule(k, at_monotonic_ns=1)
        fires = [fire_now(c) for _ in range(5)]
        assert [f.delivery for f in fires] == [1, 2, 3, 4, 5]
        assert c.stats().in_flight == 5
        assert c.ack(fires[-1], cumulative=True, wait=True) == 5
        assert fires[0].ack(wait=True) == 0   # done already
        assert c.stats().in_flight == 0


def test_reconnect_same_session(daemon):
    with bitwheel.Client(daemon.sock, session="rc", consume=True,
                         reconnect=False) as c:
        c.schedule(1, at_monotonic_ns=1, payload=b"x")
        first = fire_now(c)
        assert not first.redelivered
        c.reconnect()
        assert c.resumed is True
        with pytest.raises(bitwheel.StaleFire):
            first.ack()
        again = fire_now(c)
        assert (again.key, again.payload, again.redelivered) == (1, b"x", True)
        assert again.deadline_ns == first.deadline_ns
        assert again.ack(wait=True) == 1


def test_reconnect_after_daemon_restart(start_daemon):
    d = start_daemon()
    c = bitwheel.Client(d.sock, session="restart", consume=True,
                        reconnect=False)
    d.stop()
    with pytest.raises((bitwheel.ShuttingDownError, bitwheel.ConnectionClosed)):
        c.stats()
    with pytest.raises(bitwheel.ConnectionClosed):
        c.stats()
    with pytest.raises(bitwheel.ConnectionRefused):
        c.reconnect()
    d.start()
    c.reconnect()
    assert c.connected and c.resumed is False   # no --state-dir: all gone
    c.schedule(3, in_=0)
    assert fire_now(c).key == 3
    c.close()


def test_socket_default_and_env(daemon, monkeypatch):
    monkeypatch.delenv("BITWHEEL_SOCKET", raising=False)
    assert bitwheel.default_socket() == "/run/bitwheel/bitwheeld.sock"
    monkeypatch.setenv("BITWHEEL_SOCKET", "")
    assert bitwheel.default_socket() == "/run/bitwheel/bitwheeld.sock"
    monkeypatch.setenv("BITWHEEL_SOCKET", daemon.sock)
    with bitwheel.Client() as c:
        assert c.path == daemon.sock and c.stats().clients == 1


def test_refused_and_closed(daemon):
    with pytest.raises(bitwheel.ConnectionRefused) as e:
        bitwheel.Client(daemon.sock + ".missing")
    assert "No such file" in str(e.value)
    assert isinstance(e.value, ConnectionError)
    with bitwheel.Client(daemon.sock) as c:
        pass
    assert not c.connected
    with pytest.raises(bitwheel.ConnectionClosed):
        c.schedule(1, in_=1)
    c.close()   # twice is harmless


NOT_PERMITTED = """
import asyncio, errno, os, bitwheel
path = os.environ["BW_SOCK"]
for dial in (lambda: bitwheel.Client(path),
             lambda: asyncio.run(bitwheel.AsyncClient(path).connect())):
    try:
        dial()
    except bitwheel.NotPermitted as e:
        assert isinstance(e, PermissionError), type(e).__mro__
        assert isinstance(e, bitwheel.ConnectionRefused), type(e).__mro__
        assert e.errno == errno.EACCES, e.errno
        print(e.group, e, sep="|")
    else:
        print("connected")
"""


def test_not_permitted(daemon):
    """A socket the caller may not use is a PermissionError whose message
    names the socket's group, as bwctl's hint does; a directory closed to
    the caller hides the socket's group, and the hint names the system
    service's."""
    need_root("runs a client as another uid")
    # A group nobody is not in, other than root's: the hint must name the
    # socket's group, not a fixed one.
    group = next((g for g in grp.getgrall()
                  if g.gr_gid not in (0, NOBODY)), None)
    if group is None:
        pytest.skip("no group but root's and nogroup to give the socket")
    os.chown(daemon.sock, 0, group.gr_gid)   # mode 0660, the default
    for dir_mode, want in ((0o755, group.gr_name), (0o700, None)):
        os.chmod(daemon.dir, dir_mode)
        r = run_python(NOT_PERMITTED, env={"BW_SOCK": daemon.sock},
                       user=NOBODY)
        lines = r.stdout.splitlines()
        assert r.returncode == 0 and len(lines) == 2, r.stderr
        name = want or "bitwheel"
        for line in lines:
            got, msg = line.split("|", 1)
            assert got == str(want), line
            assert f"usermod -aG {name} nobody" in msg, msg
            assert daemon.sock in msg and os.strerror(errno.EACCES) in msg
            assert ("here: " if want else "for the system service: ") \
                + name in msg, msg
    # Root may: the socket was what refused.
    with bitwheel.Client(daemon.sock) as c:
        assert c.stats().clients == 1


def test_roles_and_arguments(daemon):
    with bitwheel.Client(daemon.sock, session="p") as p:
        with pytest.raises(bitwheel.RoleError):
            p.next_fire(0)
        with pytest.raises(ValueError):
            p.schedule(1)                          # no time
        with pytest.raises(ValueError):
            p.schedule(1, in_=1, at_monotonic_ns=5)
        with pytest.raises(ValueError):
            p.schedule(-1, in_=1)
        with pytest.raises(ValueError):
            p.schedule(1, in_=-0.5)
        with pytest.raises(TypeError):
            p.schedule(1, in_=1, payload="text")   # type: ignore[arg-type]
        assert p.stats().oneshot.inserted == 0     # nothing was sent
    with pytest.raises(ValueError):
        bitwheel.Client(daemon.sock, session="p", window=4)  # producer
    with pytest.raises(ValueError):
        bitwheel.Client(daemon.sock, owner_uid=0)  # no session


def test_timeout(daemon):
    daemon.send(signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        with pytest.raises(bitwheel.Timeout):
            bitwheel.Client(daemon.sock, timeout=0.2)
        assert time.monotonic() - t0 < WAIT
    finally:
        daemon.send(signal.SIGCONT)


CONSUMER = r"""
import sys, time, bitwheel
c = bitwheel.Client(sys.argv[1], session="stream", consume=True, window=4)
acked = 0
for f in c.fires(timeout=%(wait)s):
    if acked < 5:
        f.ack(wait=True)
        acked += 1
        print("acked", f.key, flush=True)
    else:
        print("held", f.key, flush=True)
print("ready", flush=True)
time.sleep(%(wait)s)
"""


def test_consumer_killed_mid_stream_loses_nothing(daemon):
    n = 20
    with bitwheel.Client(daemon.sock, session="stream") as p:
        for k in range(n):
            p.schedule(k, at_monotonic_ns=1, payload=b"%d" % k)
    # The child acks 5 fires, then holds what its window lets in (4), and
    # ends its iteration when no more come: it is killed holding them.
    child = subprocess.Popen(
        [sys.executable, "-c", CONSUMER % {"wait": 1.0}, daemon.sock],
        stdout=subprocess.PIPE, text=True)
    acked, held = set(), set()
    deadline = time.monotonic() + WAIT
    try:
        while True:
            assert time.monotonic() < deadline, (acked, held)
            ready, _, _ = select.select([child.stdout], [], [], 0.1)
            if not ready:
                continue
            line = child.stdout.readline().split()
            assert line, "the consumer exited early"
            if line[0] == "ready":
                break
            (acked if line[0] == "acked" else held).add(int(line[1]))
    finally:
        child.kill()
        child.wait(WAIT)
        child.stdout.close()
    assert len(acked) == 5 and len(held) == 4
    with bitwheel.Client(daemon.sock, session="stream", consume=True) as c:
        got = {}
        while len(got) < n - 5:
            f = fire_now(c)
            assert f.key not in acked and f.key not in got, f
            assert f.payload == b"%d" % f.key
            assert f.redelivered == (f.key in held), f
            got[f.key] = f
            f.ack()
        assert set(got) | acked == set(range(n))
        assert c.next_fire(0.2) is None
        assert c.stats().redelivered == len(held)


def test_peer_check(start_daemon, monkeypatch):
    need_root("runs a daemon as another uid")
    d = start_daemon("--socket-mode", "0666", user=NOBODY)
    monkeypatch.setenv("BITWHEEL_DAEMON_USER", "no-such-user-bitwheel")
    with pytest.raises(bitwheel.UntrustedDaemon) as e:
        bitwheel.Client(d.sock)
    assert e.value.uid == NOBODY and str(NOBODY) in str(e.value)
    assert not isinstance(e.value, bitwheel.ConnectionRefused)
    monkeypatch.setenv("BITWHEEL_DAEMON_USER", str(NOBODY))
    with bitwheel.Client(d.sock) as c:
        assert c.stats().clients == 1
    # A uid's own daemon is trusted by that uid, whatever the daemon user.
    r = subprocess.run(
        [sys.executable, "-c", "import sys, bitwheel; "
         "print(bitwheel.Client(sys.argv[1]).stats().clients)", d.sock],
        env=dict(os.environ, BITWHEEL_DAEMON_USER="root"),
        capture_output=True, text=True, timeout=WAIT, user=NOBODY,
        group=NOBODY, extra_groups=[])
    assert r.returncode == 0 and r.stdout.strip() == "1", r.stderr
