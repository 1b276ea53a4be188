"""Fires that fail (PROTOCOL.md section 8, "Fires that fail"), for the
blocking and the asyncio client against real daemons: release with a delay
(never back before it, deliveries counted), the delivery limit that sends
a fire to NAME.dead with its history, kick that brings it back with its
count from 0, touch that keeps a slow handler's fire and the hold limit
past which it is refused, the policy (anonymous sessions have none), and a
release or touch of a fire from an earlier connection, which sends
nothing, as an ack.  The backoff's formula and the argument checks need
no daemon.

Timing: each delay is checked from below exactly (a fire never comes back
before its release's ready_ns, nor before the release returned plus the
delay); from above only within WAIT, so that a loaded machine cannot fail
them.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import random
import signal
import subprocess
import sys
import time

import pytest

import bitwheel
from bitwheel import _core
from bitwheel import bitwheel_pb2 as pb
from conftest import SLOW, WAIT, Daemon

#: A release's delay: long enough that a fire back early is told from
#: scheduling noise, short enough for a quick suite.
DELAY = 0.3 * SLOW


def fire_now(c, timeout: float = WAIT):
    f = c.next_fire(timeout)
    assert f is not None, f"no fire within {timeout} s"
    return f


def wait_until(cond, what: str, limit: float = WAIT) -> None:
    deadline = time.monotonic() + limit
    while not cond():
        assert time.monotonic() < deadline, f"no {what} within {limit} s"
        time.sleep(0.01)


def session_info(c, name: bytes):
    got = [s for s in c.list_sessions().entries
           if s.HasField("name") and s.name == name]
    assert len(got) == 1, (name, got)
    return got[0]


# ---- release -------------------------------------------------------------

def test_release_with_delay(daemon):
    """A released fire is the same fire (key, payload, deadline), back no
    sooner than its delay and its ready_ns, deliveries one more each time;
    meanwhile it is counted as delayed, not pending; a release at once
    comes back at once; a fire released already is not released again."""
    with bitwheel.Client(daemon.sock, session="rel", consume=True) as c:
        assert c.limits.max_release_delay_ns == 7 * 86400 * 10**9
        r = c.schedule(1, at_monotonic_ns=1, payload=b"job")
        f = fire_now(c)
        assert (f.key, f.deliveries, f.dead_letter) == (1, 1, None)
        for n in (1, 2):
            t0 = time.monotonic_ns()
            rel = f.release(DELAY)
            t1 = time.monotonic_ns()
            assert rel.released and not rel.dead_lettered
            assert rel.deliveries == n
            assert t0 + DELAY * 1e9 <= rel.ready_ns <= t1 + DELAY * 1e9
            info = session_info(c, b"rel")
            assert (info.delayed, info.timers, info.in_flight) == (1, 0, 0)
            assert c.list_timers("rel").total == 0
            # Not back before the delay: nothing comes until most of it
            # has passed, and what comes then came after ready_ns.
            quiet = DELAY * 0.8 - (time.monotonic_ns() - t1) / 1e9
            assert c.next_fire(max(0.0, quiet)) is None
            again = fire_now(c)
            rx = time.monotonic_ns()
            assert rx >= rel.ready_ns and rx >= t0 + DELAY * 1e9
            assert (again.key, again.payload, again.deadline_ns) == \
                (1, b"job", r.deadline_ns)
            # Counted, but not redelivered: the consumer gave it back.
            assert again.deliveries == n + 1 and not again.redelivered
            assert again.delivery > f.delivery
            # The old delivery number is not in flight any more.
            stale = f.release()
            assert not stale.released and stale.ready_ns is None
            f = again
        # At once: the queue's tail, handed out again at once.
        rel = f.release()
        assert rel.released and rel.deliveries == 3
        assert rel.ready_ns is not None
        f = fire_now(c)
        assert f.deliveries == 4
        assert f.ack(wait=True) == 1
        assert c.next_fire(0.1) is None
        if os.geteuid() == 0:
            assert c.stats().metrics.released == 3


def test_release_backoff(daemon):
    """release(backoff=...) draws its delay from the fire's deliveries:
    base 0.2 s the first time, 0.4 s the second (each cut by up to half),
    capped; an explicit delay over the daemon's limit is refused before
    it is sent."""
    b = bitwheel.ReleaseBackoff(base=0.2 * SLOW, cap=0.3 * SLOW)
    with bitwheel.Client(daemon.sock, session="back", consume=True) as c:
        c.schedule(1, at_monotonic_ns=1)
        f = fire_now(c)
        for n, nominal in ((1, 0.2), (2, 0.3)):   # 0.4 capped at 0.3
            t0 = time.monotonic_ns()
            rel = f.release(backoff=b)
            t1 = time.monotonic_ns()
            assert rel.released and rel.deliveries == n
            low, high = nominal * SLOW * 0.5e9, nominal * SLOW * 1e9
            assert t0 + low <= rel.ready_ns <= t1 + high
            f = fire_now(c)
            assert time.monotonic_ns() >= rel.ready_ns
            assert f.deliveries == n + 1
        with pytest.raises(bitwheel.BadRequestError) as e:
            f.release(datetime.timedelta(days=8))
        assert "not sent" in e.value.message
        assert f.release(backoff=True).released   # defaults: 1 s to 5 min
        assert c.next_fire(0.2) is None


# ---- the delivery limit, dead letters, kick --------------------------------

def test_dead_letter_and_kick(daemon):
    """With max_deliveries 3, a fire released after its third hand-out
    goes to poison.dead, not back, while the fires beside it are
    acknowledged; one whose consumers disconnect holding it three times
    goes there too; a consumer of poison.dead sees each with its history;
    kick(key=...) and kick() bring them back, deliveries from 1."""
    s = daemon.sock
    with bitwheel.Client(s, session="poison") as p:
        assert p.hello.policy.max_deliveries == \
            p.limits.default_max_deliveries == 20
        assert p.hello.policy.dead_letter == b"poison.dead"
        assert not p.hello.policy.explicit
        pol = p.set_policy(max_deliveries=3)
        assert (pol.max_deliveries, pol.dead_letter, pol.explicit) == \
            (3, b"poison.dead", True)
        assert p.set_policy().max_deliveries == 3   # None keeps it
        assert session_info(p, b"poison").policy.max_deliveries == 3
        t_first = time.monotonic_ns()
        p.schedule(7, at_monotonic_ns=1, payload=b"bad")
        for k in range(10, 15):
            p.schedule(k, at_monotonic_ns=1)

        # Key 7 by releases, the others acknowledged meanwhile.
        released, acked = [], set()
        with bitwheel.Client(s, session="poison", consume=True) as c:
            while len(released) < 3 or len(acked) < 5:
                f = fire_now(c)
                if f.key == 7:
                    assert f.deliveries == len(released) + 1
                    released.append(f.release())
                else:
                    assert f.deliveries == 1 and f.ack(wait=True) == 1
                    acked.add(f.key)
            assert c.next_fire(0.2) is None
        assert [r.dead_lettered for r in released] == [False, False, True]
        assert released[-1].deliveries == 3 and \
            released[-1].ready_ns is None

        # Key 8 by disconnects: each consumer closes holding it.
        p.schedule(8, at_monotonic_ns=1, payload=b"crash")
        for n in range(1, 4):
            with bitwheel.Client(s, session="poison", consume=True) as c:
                f = fire_now(c)
                assert (f.key, f.deliveries, f.redelivered) == \
                    (8, n, n > 1)
        wait_until(lambda: session_info(p, b"poison.dead").queued == 2,
                   "key 8 in poison.dead")

        info = session_info(p, b"poison")
        assert (info.queued, info.in_flight, info.dead_lettered) == (0, 0, 2)
        dead = session_info(p, b"poison.dead")
        assert (dead.dead_letters, dead.owner_uid) == (2, os.geteuid())
        with bitwheel.Client(s, session="poison", consume=True) as c:
            assert c.next_fire(0.2) is None

        with bitwheel.Client(s, session="poison.dead", consume=True) as d:
            got = {f.key: f for f in (fire_now(d), fire_now(d))}
            assert set(got) == {7, 8}
            now = time.monotonic_ns()
            for key, reason in ((7, pb.RELEASED), (8, pb.DISCONNECTED)):
                f, h = got[key], got[key].dead_letter
                assert f.payload == {7: b"bad", 8: b"crash"}[key]
                assert h is not None, f
                assert (h.session, h.deliveries, h.reason) == \
                    (b"poison", 3, reason)
                assert h.reason_name == pb.TakeBack.Name(reason)
                assert t_first <= h.first_handed_ns < h.last_handed_ns \
                    <= h.dead_lettered_ns <= now
                assert f.deliveries == 1
            # Closed without an ack: back to poison.dead's queue, never
            # dead-lettered again.
        wait_until(lambda: session_info(p, b"poison.dead").queued == 2,
                   "the dead letters back in their queue")

        assert p.kick(key=8) == bitwheel.Kicked(1, False)
        assert p.kick(key=8).kicked == 0
        assert p.kick() == bitwheel.Kicked(1, False)
        assert session_info(p, b"poison.dead").queued == 0
        with bitwheel.Client(s, session="poison", consume=True) as c:
            got = {f.key: f for f in (fire_now(c), fire_now(c))}
            assert set(got) == {7, 8}
            for f in got.values():
                assert f.deliveries == 1 and f.dead_letter is None
                assert f.ack(wait=True) == 1
        if os.geteuid() == 0:
            m = p.stats().metrics
            assert (m.dead_lettered, m.kicked, m.released) == (2, 2, 3)
            assert len(m.deliveries_bucket) == len(m.deliveries_le) + 1
            assert sum(m.deliveries_bucket) == 7   # 5 + the 2 kicked


CRASHER = r"""
import os, signal, sys, bitwheel
c = bitwheel.Client(sys.argv[1], session="crashy", consume=True, window=4)
for f in c.fires(timeout=%(quiet)s):
    if f.key == %(poison)d:
        print("poison", f.deliveries, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    f.ack(wait=True)
    print("acked", f.key, f.deliveries, flush=True)
print("idle", flush=True)
"""


def test_crashing_consumer(daemon):
    """A consumer that SIGKILLs itself whenever it gets one poison fire,
    started again each time: the poison comes with deliveries 1, 2, ...
    up to max_deliveries, then goes to crashy.dead; every other fire is
    acknowledged meanwhile, once each, its hand-out never counted against
    it (the poison was the oldest in flight at each crash)."""
    poison, others, limit = 13, 30, 5   # keys 0 to 29
    with bitwheel.Client(daemon.sock, session="crashy") as p:
        p.set_policy(max_deliveries=limit)
        for k in range(others):   # the poison among them
            p.schedule(k, at_monotonic_ns=1,
                       payload=b"poison" if k == poison else None)
        code = CRASHER % {"quiet": 0.5 * SLOW, "poison": poison}
        seen, acked, runs = [], [], 0
        while True:
            runs += 1
            assert runs <= 4 * limit, (seen, acked)
            r = subprocess.run([sys.executable, "-c", code, daemon.sock],
                               capture_output=True, text=True,
                               timeout=WAIT * 2)
            for line in r.stdout.split("\n"):
                w = line.split()
                if w and w[0] == "poison":
                    seen.append(int(w[1]))
                elif w and w[0] == "acked":
                    acked.append((int(w[1]), int(w[2])))
            if r.returncode == 0:
                assert r.stdout.endswith("idle\n"), r.stderr
                break
            assert r.returncode == -signal.SIGKILL, r.stderr
        assert seen == list(range(1, limit + 1))
        assert runs == limit + 1
        assert sorted(k for k, _ in acked) == \
            [k for k in range(others) if k != poison]
        assert all(d == 1 for _, d in acked), acked
        with bitwheel.Client(daemon.sock, session="crashy.dead",
                             consume=True) as d:
            f = fire_now(d)
            assert (f.key, f.payload) == (poison, b"poison")
            assert (f.dead_letter.deliveries, f.dead_letter.reason) == \
                (limit, pb.DISCONNECTED)
            assert f.ack(wait=True) == 1


def test_dead_letters_outlive_their_session(start_daemon):
    """A dead-letter session holding dead letters does not expire, though
    the session that sent them did (--linger 200ms): its consumer gets
    them, their origin still named."""
    d = start_daemon("--linger", "200ms")
    with bitwheel.Client(d.sock, session="gone", consume=True) as c:
        c.set_policy(max_deliveries=1)
        c.schedule(1, at_monotonic_ns=1, payload=b"last")
        assert fire_now(c).release().dead_lettered
    with bitwheel.Client(d.sock) as look:
        def names():
            return {s.name for s in look.list_sessions().entries
                    if s.HasField("name")}
        wait_until(lambda: b"gone" not in names(), "gone expired",
                   WAIT + 0.2)
        time.sleep(0.4)   # twice the linger: gone.dead stays
        assert names() == {b"gone.dead"}
    with bitwheel.Client(d.sock, session="gone.dead", consume=True) as c:
        f = fire_now(c)
        assert (f.key, f.payload, f.dead_letter.session) == (1, b"last", b"gone")
        assert f.dead_letter.deliveries == 1
        assert f.ack(wait=True) == 1


def test_kick_limit_and_more(daemon):
    """kick(limit=2) moves two of five and says more; kick() the rest."""
    with bitwheel.Client(daemon.sock, session="many", consume=True) as c:
        c.set_policy(max_deliveries=1)
        for k in range(5):
            c.schedule(k, at_monotonic_ns=1)
        for _ in range(5):
            assert fire_now(c).release().dead_lettered
        assert c.kick(limit=2) == bitwheel.Kicked(2, True)
        assert c.kick() == bitwheel.Kicked(3, False)
        got = sorted(fire_now(c).key for _ in range(5))
        assert got == list(range(5))


def test_policy_errors(daemon):
    """An anonymous session has no policy: set_policy raises and the
    connection stays open; so does a session that would dead-letter to
    itself."""
    with bitwheel.Client(daemon.sock) as c:
        assert not c.hello.HasField("policy")
        with pytest.raises(bitwheel.BadRequestError) as e:
            c.set_policy(max_deliveries=3)
        assert not e.value.connection_level and c.connected
        assert c.stats().clients == 1
    with bitwheel.Client(daemon.sock, session="self") as c:
        with pytest.raises(bitwheel.BadRequestError):
            c.set_policy(dead_letter="self")
        assert c.set_policy(dead_letter="elsewhere").dead_letter == \
            b"elsewhere"
        assert c.set_policy(dead_letter="").dead_letter == b"self.dead"
        assert c.connected


# ---- touch ---------------------------------------------------------------

def test_touch_extends_and_hold_limit(daemon):
    """With an ack timeout of 0.5 s, a fire touched for 2 s is still held
    by its consumer after the untouched one beside it was taken back (and
    handed out again), and its ack completes it; touch() alone
    pushes the deadline by the ack timeout; a touch past 12 h after the
    hand-out is HoldLimitError, and the fire stays."""
    ack_timeout = 0.5 * SLOW
    with bitwheel.Client(daemon.sock, session="slow", consume=True,
                         ack_timeout=ack_timeout) as c:
        assert c.limits.max_hold_ns == 12 * 3600 * 10**9
        c.schedule(1, at_monotonic_ns=1)
        c.schedule(2, at_monotonic_ns=1)
        fires = {f.key: f for f in (fire_now(c), fire_now(c))}
        t0 = time.monotonic_ns()
        t = fires[1].touch(4 * ack_timeout)
        t1 = time.monotonic_ns()
        assert t.touched
        assert t0 + 4 * ack_timeout * 1e9 <= t.ack_deadline_ns <= \
            t1 + 4 * ack_timeout * 1e9
        # Key 2 is taken back at its ack deadline and handed out again.
        again = fire_now(c, 2 * ack_timeout + WAIT)
        assert (again.key, again.redelivered, again.deliveries) == \
            (2, True, 2)
        assert time.monotonic_ns() < t.ack_deadline_ns, \
            "too slow to tell touched from untouched"
        assert session_info(c, b"slow").in_flight == 2
        assert again.ack(wait=True) == 1
        assert fires[1].touch().ack_deadline_ns >= \
            time.monotonic_ns() + ack_timeout * 1e9 - 50e6
        with pytest.raises(bitwheel.HoldLimitError) as e:
            fires[1].touch(datetime.timedelta(hours=13))
        assert not e.value.connection_level and c.connected
        assert fires[1].touch(datetime.timedelta(hours=11)).touched
        assert fires[1].ack(wait=True) == 1   # never taken back
        assert not fires[2].touch().touched   # taken back before
        if os.geteuid() == 0:
            assert c.stats().metrics.touched == 3
    # No ack timeout: nothing takes the fire back for its time.
    with bitwheel.Client(daemon.sock, session="slow2", consume=True) as c:
        c.schedule(1, at_monotonic_ns=1)
        t = fire_now(c).touch(1)
        assert t.touched and t.ack_deadline_ns is None


# ---- across a daemon restart ----------------------------------------------

def test_restart_keeps_counts_delays_and_policy(daemons):
    """With --state-dir, across a SIGTERM restart that the consumer rides
    through by itself: the policy is kept, a released fire keeps its
    delay (not back before ready_ns: CLOCK_MONOTONIC is the host's), and
    deliveries count on, for it and for a fire in flight at the stop."""
    d = Daemon()
    daemons.append(d)
    args = ["--state-dir", os.path.join(d.dir, "state")]
    d.start(*args)
    fast = bitwheel.Backoff(initial=0.01, max_delay=0.1, give_up=WAIT)
    with bitwheel.Client(d.sock, session="durable", consume=True,
                         reconnect=fast) as c:
        c.set_policy(max_deliveries=4, dead_letter="durable.dl")
        c.schedule(1, at_monotonic_ns=1)
        c.schedule(2, at_monotonic_ns=1)
        fires = {f.key: f for f in (fire_now(c), fire_now(c))}
        rel = fires[1].release(1.0 * SLOW)
        assert rel.released and rel.deliveries == 1
        d.stop()
        d.start(*args)
        got = {}
        while len(got) < 2:
            f = fire_now(c)
            if f.connection == 1:
                continue   # read before the end was seen
            got[f.key] = (f, time.monotonic_ns())
        assert c.reconnects == 1 and c.resumed
        pol = c.hello.policy
        assert (pol.max_deliveries, pol.dead_letter, pol.explicit) == \
            (4, b"durable.dl", True)
        (f1, rx1), (f2, _) = got[1], got[2]
        assert rx1 >= rel.ready_ns and f1.deliveries == 2
        assert f2.deliveries == 2 and f2.redelivered
        assert c.ack(f1, wait=True) == 1 and c.ack(f2, wait=True) == 1


# ---- fires of an earlier connection, roles ------------------------------

def test_stale_and_auto_ack_fires(daemon):
    """After reconnect(), a release or touch of a fire from the earlier
    connection sends nothing (its number would name another fire or be
    refused); with reconnect=False it is StaleFire, like an ack.  On an
    auto-ack consumer and a producer there is nothing to release."""
    with bitwheel.Client(daemon.sock, session="st", consume=True) as c:
        c.schedule(1, at_monotonic_ns=1)
        old = fire_now(c)
        c.reconnect()
        assert old.release() == bitwheel.Released(False, False, 1, None)
        assert old.touch() == bitwheel.Touched(False, None)
        f = fire_now(c)
        assert f.deliveries == 2 and f.redelivered
        assert f.ack(wait=True) == 1
    with bitwheel.Client(daemon.sock, session="st", consume=True,
                         reconnect=False) as c:
        c.schedule(1, at_monotonic_ns=1)
        old = fire_now(c)
        c.reconnect()
        with pytest.raises(bitwheel.StaleFire):
            old.release()
        with pytest.raises(bitwheel.StaleFire):
            old.touch()
    with bitwheel.Client(daemon.sock) as anon:   # auto-ack
        anon.schedule(1, at_monotonic_ns=1)
        f = fire_now(anon)
        assert not f.release(1).released and not f.touch().touched
    with bitwheel.Client(daemon.sock, session="st") as p:
        with pytest.raises(bitwheel.RoleError):
            p.release(f)
        with pytest.raises(bitwheel.RoleError):
            p.touch(f)


# ---- asyncio ---------------------------------------------------------------

def test_async_release_touch_policy_kick(daemon):
    async def main():
        async with bitwheel.AsyncClient(daemon.sock, session="aio",
                                        consume=True,
                                        ack_timeout=WAIT) as c:
            pol = await c.set_policy(max_deliveries=2, dead_letter="aio.dl")
            assert (pol.max_deliveries, pol.dead_letter) == (2, b"aio.dl")
            await c.schedule(5, at_monotonic_ns=1, payload=b"p")
            f = await c.next_fire(WAIT)
            assert f.deliveries == 1
            t = await f.touch(2 * WAIT)
            assert t.touched and t.ack_deadline_ns > time.monotonic_ns()
            with pytest.raises(bitwheel.HoldLimitError):
                await f.touch(datetime.timedelta(hours=13))
            rel = await f.release(DELAY)
            assert rel.released and not rel.dead_lettered
            f = await c.next_fire(WAIT)
            assert time.monotonic_ns() >= rel.ready_ns
            assert f.deliveries == 2
            rel = await f.release(backoff=bitwheel.ReleaseBackoff(base=0.01))
            assert rel.dead_lettered and rel.deliveries == 2
            assert await c.next_fire(0.2) is None
            async with bitwheel.AsyncClient(daemon.sock, session="aio.dl",
                                            consume=True) as d:
                dl = await d.next_fire(WAIT)
                assert dl.dead_letter.session == b"aio"
                assert dl.dead_letter.reason == pb.RELEASED
                assert dl.dead_letter.deliveries == 2
            # Kick moves queued dead letters: wait for d's to be back.
            deadline = time.monotonic() + WAIT
            while not [s for s in (await c.list_sessions()).entries
                       if s.name == b"aio.dl" and s.queued == 1]:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.01)
            assert await c.kick() == bitwheel.Kicked(1, False)
            f = await c.next_fire(WAIT)
            assert (f.key, f.payload, f.deliveries) == (5, b"p", 1)
            assert await f.ack(wait=True) == 1
            await c.reconnect()
            assert (await f.release()).released is False
            async with bitwheel.AsyncClient(daemon.sock) as anon:
                with pytest.raises(bitwheel.BadRequestError):
                    await anon.set_policy(max_deliveries=1)
    asyncio.run(main())


# ---- no daemon needed ----------------------------------------------------

def test_release_backoff_formula():
    """min(cap, base * 2**(deliveries - 1)) times a factor in [0.5, 1],
    drawn from the rng given; deliveries 0 reads as 1; no overflow."""
    b = bitwheel.ReleaseBackoff()
    assert (b.base, b.cap) == (1.0, 300.0)
    seeds = [1, 2, 3]   # fixed, and one from the environment if given
    if os.environ.get("BW_TEST_SEED"):
        seeds.append(int(os.environ["BW_TEST_SEED"], 0))
    for seed in seeds:
        rng = random.Random(seed)
        lowest, highest = 1.0, 0.0
        for d in (0, 1, 2, 5, 9, 10, 20, 64, 10**6, 2**64 - 1):
            nominal = min(300.0, 2.0 ** min(max(d, 1) - 1, 100))
            for _ in range(50):
                v = b.delay(d, rng)
                assert nominal * 0.5 <= v <= nominal, (f"seed {seed}", d, v)
                lowest = min(lowest, v / nominal)
                highest = max(highest, v / nominal)
        # The jitter spans its range, not one end of it.
        assert lowest < 0.6 and highest > 0.9, f"seed {seed}"
    a, c = random.Random(7), random.Random(7)
    assert b.delay(3, a) == b.delay(3, c)
    t = bitwheel.ReleaseBackoff(base=datetime.timedelta(milliseconds=100),
                                cap=datetime.timedelta(seconds=1))
    assert (t.base, t.cap) == (0.1, 1.0)
    for bad in ({"base": 0}, {"cap": -1}, {"base": 2, "cap": 1}):
        with pytest.raises(ValueError):
            bitwheel.ReleaseBackoff(**bad)
    with pytest.raises(TypeError):
        bitwheel.ReleaseBackoff(base="1")


def test_request_arguments():
    """What the requests carry, and what is refused before sending."""
    fire = _core.Fire(5, b"", 1, 1, 0, False, False, 9, 1, deliveries=4)
    env = _core.release_req(fire, None, None, 0).env
    assert env.release.delivery == 9 and not env.release.HasField("delay_ns")
    env = _core.release_req(fire, 1.5, None, 0).env
    assert env.release.delay_ns == 1_500_000_000
    # deliveries 4: base * 8 = 8 s nominal, cut by the daemon's limit.
    env = _core.release_req(fire, None, True, 0).env
    assert 4e9 <= env.release.delay_ns <= 8e9
    env = _core.release_req(fire, None, True, 3 * 10**9).env
    assert env.release.delay_ns == 3 * 10**9
    with pytest.raises(bitwheel.BadRequestError):
        _core.release_req(fire, 4, None, 3 * 10**9)
    with pytest.raises(ValueError):
        _core.release_req(fire, 1, True, 0)
    with pytest.raises(ValueError):
        _core.release_req(fire, -1, None, 0)
    with pytest.raises(TypeError):
        _core.release_req(fire, None, 2.0, 0)
    env = _core.touch_req(fire, None).env
    assert env.touch.delivery == 9 and not env.touch.HasField("timeout_ns")
    assert _core.touch_req(fire, 2).env.touch.timeout_ns == 2 * 10**9
    with pytest.raises(ValueError):
        _core.touch_req(fire, 0)
    q = _core.set_policy_req(None, None).env
    assert q.HasField("set_policy") and not q.set_policy.ListFields()
    q = _core.set_policy_req(0, "x.dl").env.set_policy
    assert (q.max_deliveries, q.dead_letter) == (0, b"x.dl")
    with pytest.raises(ValueError):
        _core.set_policy_req(1 << 32, None)
    with pytest.raises(TypeError):
        _core.set_policy_req(None, 5)
    with pytest.raises(ValueError):
        _core.Kicks(None, 0)
    with pytest.raises(ValueError):
        _core.Kicks(-1, None)


def test_kick_loop():
    """Kicks goes on while the daemon says more and moves some, stops at
    the limit, and stops when a Kick moved none (it would look at the
    same dead letters again)."""
    k = _core.Kicks(None, None)
    req = k.request()
    assert not req.env.kick.ListFields() and req.safe
    k.take(pb.KickReply(kicked=10000, more=True))
    k.take(pb.KickReply(kicked=5, more=False))
    assert k.request() is None and k.result == bitwheel.Kicked(10005, False)
    k = _core.Kicks(3, 12000)
    req = k.request()
    assert (req.env.kick.key, req.env.kick.limit) == (3, 12000)
    assert not req.safe
    k.take(pb.KickReply(kicked=10000, more=True))
    assert k.request().env.kick.limit == 2000
    k.take(pb.KickReply(kicked=2000, more=True))
    assert k.request() is None and k.result == bitwheel.Kicked(12000, True)
    k = _core.Kicks(3, None)
    k.take(pb.KickReply(kicked=0, more=True))
    assert k.request() is None and k.result == bitwheel.Kicked(0, True)


class _Down(_core.ClientBase):
    connected = False


def test_outcome_without_a_reply():
    """A Release written, then EOF: UnknownOutcome (it may have released
    or dead-lettered the fire); not written, or SHUTTING_DOWN: released
    nothing.  A Touch never raises: the connection's end took the fire
    back, whatever it did.  SetPolicy is sent again."""
    fire = _core.Fire(5, b"", 1, 1, 0, False, False, 9, 1, deliveries=2)

    def client(clean):
        c = _Down("/x", "s", True, None, None, None, None, None)
        c._lose(bitwheel.ConnectionClosed("eof"), clean)
        return c

    dirty, clean = client(False), client(True)
    rel = _core.release_req(fire, None, None, 0)
    assert clean._settle(rel, True, None) is False
    assert rel.instead == bitwheel.Released(False, False, 2, None)
    assert dirty._settle(rel, False, None) is False
    with pytest.raises(bitwheel.UnknownOutcome) as e:
        dirty._settle(_core.release_req(fire, 1, None, 0), True, None)
    assert (e.value.request, e.value.key) == ("release", 5)
    touch = _core.touch_req(fire, None)
    assert dirty._settle(touch, True, None) is False
    assert touch.instead == bitwheel.Touched(False, None)
    assert dirty._settle(_core.set_policy_req(3, None), True, None) is True
