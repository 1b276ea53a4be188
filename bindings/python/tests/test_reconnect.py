"""Riding through daemon restarts, for the blocking and the asyncio client,
against real daemons restarted on the same socket and --state-dir.

The main tests SIGTERM the daemon and start it again while a producer
schedules and a consumer consumes, in a program that does nothing to
reconnect: every Schedule that returned must reach the consumer, no call
may raise, and both clients must have reconnected (so the restart did fall
in the middle).  The others: in-flight requests across a daemon killed
(UnknownOutcome for a plain Schedule, the safe ones sent again) and across
a clean stop (sent again: they did not run), the give-up, a Hello refused
for good, an anonymous session's SessionLost, the listing that starts over,
and reconnect=False.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import bitwheel
from bitwheel import _core
from conftest import SLOW, WAIT, Daemon

#: Quick attempts, a give-up well past any restart here.
FAST = bitwheel.Backoff(initial=0.01, max_delay=0.1, give_up=WAIT)
#: Schedules the producers make; the restart comes after a third of them.
N = 300


def restart(d, args: list[str], kill: bool = False) -> None:
    """Stop d (SIGTERM: it says SHUTTING_DOWN; kill: SIGKILL, it just
    dies) and start it again with the same socket and options."""
    if kill:
        d.kill()
    else:
        d.stop()
    d.start(*args)


def start_durable(daemons):
    """A daemon with a state directory, and its options to start it
    again with."""
    d = Daemon()
    daemons.append(d)
    args = ["--state-dir", os.path.join(d.dir, "state")]
    return d.start(*args), args


def wait_until(cond, what: str, limit: float = WAIT) -> None:
    deadline = time.monotonic() + limit
    while not cond():
        assert time.monotonic() < deadline, f"no {what} within {limit} s"
        time.sleep(0.005)


# ---- a restart in the middle of a producer and a consumer ----------------

def test_client_rides_through_restart(daemons):
    d, args = start_durable(daemons)
    acked: list[int] = []
    got: set[int] = set()
    errors: list[BaseException] = []
    done = threading.Event()
    clients: list[bitwheel.Client] = []

    def produce():
        try:
            with bitwheel.Client(d.sock, session="ride",
                                 reconnect=FAST) as p:
                clients.append(p)
                for k in range(N):
                    p.schedule(k, in_=0.05, payload=b"%d" % k)
                    acked.append(k)
                    time.sleep(0.003)
        except BaseException as e:
            errors.append(e)

    def consume():
        try:
            with bitwheel.Client(d.sock, session="ride", consume=True,
                                 window=16, reconnect=FAST) as c:
                clients.append(c)
                while not done.is_set():
                    f = c.next_fire(0.05)
                    if f is not None:
                        assert f.payload == b"%d" % f.key
                        got.add(f.key)
                        f.ack()
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=consume),
               threading.Thread(target=produce)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: len(acked) >= N // 3 or errors, "schedules")
        restart(d, args)
        threads[1].join(WAIT * 2)
        wait_until(lambda: set(acked) <= got or errors or
                   not threads[0].is_alive(), "fires")
    finally:
        done.set()
        for t in threads:
            t.join(WAIT * 2)
    assert not errors, errors
    assert acked == list(range(N)), "a schedule did not return"
    assert set(acked) <= got, sorted(set(acked) - got)[:20]
    assert all(c.reconnects >= 1 for c in clients), \
        [c.reconnects for c in clients]


def test_async_rides_through_restart(daemons):
    d, args = start_durable(daemons)

    async def main():
        acked: list[int] = []
        got: set[int] = set()
        prod = bitwheel.AsyncClient(d.sock, session="aride", reconnect=FAST)
        cons = bitwheel.AsyncClient(d.sock, session="aride", consume=True,
                                    window=16, reconnect=FAST)
        async with prod, cons:
            async def produce():
                for k in range(0, N, 10):   # pipelined, ten at a time
                    await asyncio.gather(*(
                        prod.schedule(j, in_=0.05, payload=b"%d" % j)
                        for j in range(k, k + 10)))
                    acked.extend(range(k, k + 10))
                    await asyncio.sleep(0.03)

            async def consume():
                async for f in cons.fires():
                    assert f.payload == b"%d" % f.key
                    got.add(f.key)
                    await f.ack()
                    if len(acked) == N and set(acked) <= got:
                        return

            async def stop():
                while len(acked) < N // 3:
                    await asyncio.sleep(0.005)
                await asyncio.to_thread(restart, d, args)

            async with asyncio.timeout(WAIT * 2):
                await asyncio.gather(produce(), consume(), stop())
            assert acked == list(range(N))
            assert set(acked) <= got
            assert prod.reconnects >= 1 and cons.reconnects >= 1
            assert prod.connected and cons.connected and cons.resumed
    asyncio.run(main())


# ---- requests in flight when the connection ends ------------------------

def test_client_in_flight_across_a_kill(daemons):
    """A daemon killed (EOF, no SHUTTING_DOWN) while a plain Schedule
    waits for its reply: UnknownOutcome naming the key, and the client is
    usable; a replace Schedule and a Cancel are sent again and succeed."""
    d, args = start_durable(daemons)
    c = bitwheel.Client(d.sock, session="kill", reconnect=FAST)
    outcome: dict[str, object] = {}

    def call(name, f):
        try:
            outcome[name] = f()
        except BaseException as e:
            outcome[name] = e

    for name, f in (("plain", lambda: c.schedule(41, in_=60)),
                    ("replace", lambda: c.schedule(42, in_=60,
                                                   replace=True)),
                    ("cancel", lambda: c.cancel(43))):
        c.stats()         # attached again (the last call left it down)
        d.send(signal.SIGSTOP)
        t = threading.Thread(target=call, args=(name, f))
        t.start()
        # Written (it waits for the reply), unanswered: the daemon is
        # stopped.
        wait_until(lambda: c._awaited is not None, "request written")
        restart(d, args, kill=True)
        t.join(WAIT)
        assert not t.is_alive()
    e = outcome["plain"]
    assert isinstance(e, bitwheel.UnknownOutcome), e
    assert e.key == 41 and e.request == "schedule" and "41" in str(e)
    assert isinstance(e.__cause__, bitwheel.ConnectionClosed)
    assert isinstance(outcome["replace"], bitwheel.Scheduled), outcome
    assert outcome["cancel"] is False
    assert c.reconnects == 3 and c.connected
    keys = [t.key for t in c.list_timers("kill").entries]
    assert keys == [42]   # 41 never reached the stopped daemon
    c.schedule(41, in_=60, replace=True)
    c.close()


def test_async_in_flight_across_a_kill_and_a_stop(daemons):
    """Pipelined requests written to a stopped daemon, then killed: the
    plain Schedule fails with UnknownOutcome naming its key, the others are
    sent again on the new connection, in order.  Plain Schedules written
    after the daemon said SHUTTING_DOWN (and before the client read it):
    they did not run, so they go again, and each succeeds once."""
    d, args = start_durable(daemons)

    async def main():
        async with bitwheel.AsyncClient(d.sock, session="akill",
                                        reconnect=FAST) as c:
            await c.schedule(43, in_=60)
            d.send(signal.SIGSTOP)
            futs = [c.schedule(41, in_=60), c.schedule(42, in_=60,
                                                       replace=True),
                    c.cancel(43), c.stats()]
            await asyncio.sleep(0.1)
            await asyncio.to_thread(restart, d, args, True)
            out = await asyncio.gather(*futs, return_exceptions=True)
            assert isinstance(out[0], bitwheel.UnknownOutcome), out
            assert out[0].key == 41 and "41" in str(out[0])
            assert isinstance(out[1], bitwheel.Scheduled), out
            assert out[2] is True, out            # 43 was pending
            assert out[3].clients >= 1, out
            assert c.reconnects == 1
            t = await c.list_timers("akill")
            assert [x.key for x in t.entries] == [42]

            # The loop is blocked: the client reads nothing meanwhile.
            d.send(signal.SIGTERM)
            assert d.proc.wait(WAIT) == 0
            futs = [c.schedule(50 + k, in_=60) for k in range(5)]
            await asyncio.to_thread(d.start, *args)
            out = await asyncio.gather(*futs, return_exceptions=True)
            assert all(isinstance(r, bitwheel.Scheduled) for r in out), out
            t = await c.list_timers("akill")
            assert c.reconnects == 2
            assert sorted(x.key for x in t.entries) == [42, 50, 51, 52, 53,
                                                        54]
    asyncio.run(main())


def test_async_reconnect_while_writes_paused(daemons):
    """A burst to a stopped daemon fills the socket and pauses the
    transport's writes; the daemon is killed and restarted: the new
    connection starts unpaused and the burst goes out again (replace
    Schedules).  In a child process, so that a hang is a bounded failure
    (a paused state carried over made the client spin for good)."""
    d, args = start_durable(daemons)
    code = textwrap.dedent("""
        import asyncio, os, signal, bitwheel
        async def main():
            async with bitwheel.AsyncClient(
                    os.environ["SOCK"], session="paused",
                    reconnect=bitwheel.Backoff(0.01, 0.1, 10)) as c:
                os.kill(int(os.environ["PID"]), signal.SIGSTOP)
                futs = [c.schedule(k, in_=60, payload=b"x" * 1000,
                                   replace=True) for k in range(1000)]
                await asyncio.sleep(0.2)
                print("paused", c._drained is not None, flush=True)
                out = await asyncio.gather(*futs)
                print("scheduled", len(out), c.reconnects, flush=True)
                print("timers", (await c.stats()).oneshot.pending)
        asyncio.run(main())
        """)
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
        env=dict(os.environ, SOCK=d.sock, PID=str(d.proc.pid)))
    try:
        assert child.stdout.readline() == "paused True\n"
        restart(d, args, kill=True)
        out, _ = child.communicate(timeout=WAIT)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        pytest.fail(f"the client hung after the reconnect ({WAIT} s)")
    assert child.returncode == 0
    assert out.split("\n")[:2] == ["scheduled 1000 1", "timers 1000"], out


def test_consumer_acks_never_cross_connections(daemons):
    """Fires in flight at a restart come again, redelivered, on the new
    connection; acking the old ones sends nothing (delivery numbers of the
    old connection would be refused with BAD_REQUEST and close it)."""
    d, args = start_durable(daemons)
    with bitwheel.Client(d.sock, session="acks", consume=True,
                         reconnect=FAST) as c:
        for k in range(3):
            c.schedule(k, at_monotonic_ns=1)
        old = [c.next_fire(WAIT) for _ in range(3)]
        assert all(f is not None and not f.redelivered for f in old)
        c.schedule(3, at_monotonic_ns=1)
        with bitwheel.Client(d.sock) as look:   # fire 3 handed out too
            wait_until(lambda: look.stats().in_flight == 4, "fire 3 sent")
        restart(d, args)
        again = {}
        while len(again) < 4:
            f = c.next_fire(WAIT)
            assert f is not None
            if f.connection == 1:
                # Read with the ScheduleReply, before the end was seen:
                # handed out, and it comes again all the same.
                assert f.key == 3 and not f.redelivered
                old.append(f)
            else:
                again[f.key] = f
        assert sorted(again) == [0, 1, 2, 3]
        assert all(f.redelivered for f in again.values())
        assert [f.ack() for f in old] == [None] * len(old)
        assert old[0].ack(wait=True) == 0
        assert c.ack(again[3], cumulative=True, wait=True) == 4
        assert c.stats().in_flight == 0 and c.connected


# ---- the give-up, refusals, anonymous sessions, the opt-out -------------

def test_short_waits_keep_the_attempts_going(daemons):
    """A consumer polling with next_fire timeouts shorter than the backoff's
    waits: the attempts still come on schedule (a wait cut short must not
    push the next attempt further away), so it is back within about one
    max_delay of the daemon's return."""
    d, args = start_durable(daemons)
    c = bitwheel.Client(d.sock, session="poll", consume=True,
                        reconnect=bitwheel.Backoff(initial=0.05,
                                                   max_delay=0.2,
                                                   give_up=WAIT))
    c.schedule(1, in_=0.5)
    d.stop()
    assert c.next_fire(0.02) is None and not c.connected
    time.sleep(0.3)
    d.start(*args)
    t0 = time.monotonic()
    f = None
    while f is None and time.monotonic() - t0 < WAIT:
        f = c.next_fire(0.02)
    assert f is not None and f.key == 1
    assert time.monotonic() - t0 < SLOW, time.monotonic() - t0
    c.close()


def test_give_up_in_bounded_time(start_daemon):
    d = start_daemon()
    backoff = bitwheel.Backoff(initial=0.01, max_delay=0.05, give_up=0.5)
    c = bitwheel.Client(d.sock, session="gone", consume=True,
                        reconnect=backoff)
    d.stop()
    t0 = time.monotonic()
    with pytest.raises(bitwheel.ReconnectFailed) as e:
        c.next_fire(WAIT)
    took = time.monotonic() - t0
    assert 0.5 <= took < 0.5 + SLOW, took
    assert e.value.attempts >= 5 and isinstance(e.value.__cause__,
                                                bitwheel.ConnectionRefused)
    assert isinstance(e.value, bitwheel.ConnectionClosed)
    assert not c.connected
    with pytest.raises(bitwheel.ConnectionClosed):
        c.stats()
    d.start()
    c.reconnect()   # by hand, it tries again
    assert c.connected and c.reconnects == 0

    async def main():
        a = bitwheel.AsyncClient(d.sock, session="agone", consume=True,
                                 reconnect=backoff)
        await a.connect()
        t0 = time.monotonic()   # the task starts once SHUTTING_DOWN is read
        await asyncio.to_thread(d.stop)
        pending = a.schedule(1, in_=60)   # held while it reconnects
        with pytest.raises(bitwheel.ReconnectFailed):
            await a.next_fire(WAIT)
        assert 0.5 <= time.monotonic() - t0 < 0.5 + SLOW
        with pytest.raises(bitwheel.ReconnectFailed):
            await pending
        with pytest.raises(bitwheel.ConnectionClosed):
            await a.stats()
    asyncio.run(main())


def test_close_during_a_reconnect(start_daemon):
    """close() while an AsyncClient attaches again: the task stops, what
    waited for it fails with ConnectionClosed at once, nothing dials
    afterwards."""
    d = start_daemon()

    async def main():
        a = bitwheel.AsyncClient(d.sock, session="closing", consume=True,
                                 reconnect=FAST)
        await a.connect()
        await asyncio.to_thread(d.stop)
        pending = a.schedule(1, in_=60)
        waiter = asyncio.ensure_future(a.next_fire(WAIT))
        await asyncio.sleep(0.1)   # a few attempts: refused
        assert a._rider is not None and not pending.done()
        t0 = time.monotonic()
        await a.close()
        with pytest.raises(bitwheel.ConnectionClosed) as e:
            await pending
        assert "close()" in str(e.value)
        with pytest.raises(bitwheel.ConnectionClosed):
            await waiter
        assert time.monotonic() - t0 < 1.0 * SLOW
        await asyncio.sleep(0.1)
        assert a._rider is None and not a.connected and a.reconnects == 0
    asyncio.run(main())


def test_lasting_refusal_ends_the_ride(start_daemon):
    """A daemon back with a smaller --max-window than the consumer's: its
    Hello is refused (BAD_REQUEST), no point in more attempts, the error is
    raised at once."""
    d = start_daemon()
    c = bitwheel.Client(d.sock, session="narrow", consume=True, window=16,
                        reconnect=FAST)
    d.stop()
    d.start("--max-window", "8")
    t0 = time.monotonic()
    with pytest.raises(bitwheel.BadRequestError):
        c.next_fire(WAIT)
    assert time.monotonic() - t0 < WAIT / 2
    assert not c.connected


def test_anonymous_session_is_lost(daemon):
    c = bitwheel.Client(daemon.sock)
    c.schedule(1, in_=60)

    async def main():
        a = bitwheel.AsyncClient(daemon.sock)
        await a.connect()
        waiter = asyncio.ensure_future(a.next_fire(WAIT))
        await asyncio.sleep(0.05)
        await asyncio.to_thread(daemon.stop)
        with pytest.raises(bitwheel.SessionLost) as e:
            await waiter
        assert isinstance(e.value.__cause__, bitwheel.ShuttingDownError)
        assert not a.connected
        with pytest.raises(bitwheel.ConnectionClosed):
            await a.schedule(2, in_=60)
    asyncio.run(main())
    with pytest.raises(bitwheel.SessionLost) as e:
        c.schedule(2, in_=60)
    assert isinstance(e.value, bitwheel.ConnectionClosed)
    assert "anonymous" in str(e.value)
    assert not c.connected and c.reconnects == 0
    daemon.start()
    c.reconnect()   # a new, empty anonymous session
    assert c.stats().oneshot.pending == 0


def test_reconnect_false_keeps_the_old_behaviour(daemons):
    d, args = start_durable(daemons)
    c = bitwheel.Client(d.sock, session="old", consume=True,
                        reconnect=False)
    c.schedule(1, at_monotonic_ns=1)
    first = c.next_fire(WAIT)
    restart(d, args)
    with pytest.raises(bitwheel.ShuttingDownError):
        c.stats()
    with pytest.raises(bitwheel.ConnectionClosed):
        c.next_fire(0)
    assert not c.connected and c.reconnects == 0
    with pytest.raises(bitwheel.StaleFire):
        first.ack()
    c.reconnect()
    assert c.resumed and c.next_fire(WAIT).redelivered

    async def main():
        a = bitwheel.AsyncClient(d.sock, session="aold", reconnect=False)
        await a.connect()
        await asyncio.to_thread(restart, d, args)
        with pytest.raises(bitwheel.ShuttingDownError):
            await a.stats()
        assert not a.connected and a.reconnects == 0
        with pytest.raises(bitwheel.ConnectionClosed):
            await a.stats()
    asyncio.run(main())
    c.close()


# ---- no daemon needed ----------------------------------------------------

def test_backoff_arguments():
    b = bitwheel.Backoff()
    assert (b.initial, b.max_delay, b.give_up) == (0.05, 2.0, 60.0)
    assert bitwheel.Backoff(give_up=datetime.timedelta(minutes=2)).give_up \
        == 120.0
    for bad in ({"initial": 0}, {"give_up": -1}, {"max_delay": 0.01}):
        with pytest.raises(ValueError):
            bitwheel.Backoff(**bad)
    with pytest.raises(TypeError):
        bitwheel.Backoff(initial="1")
    with pytest.raises(TypeError):
        bitwheel.Client("/nonexistent", reconnect="yes")


def test_listing_starts_over_on_a_new_connection():
    p = _core.Pager(b"s", None, None)
    p.request(1)
    reply = _core.pb.ListTimersReply(more=True, cursor=7, total=2)
    reply.timers.add(key=1)
    assert p.take(reply) and p.request(1).list_timers.cursor == 7
    env = p.request(2)   # the cursor holds on connection 1 only
    assert not env.list_timers.HasField("cursor") and p.listing.entries == []


class _Down(_core.ClientBase):
    """The shared decisions alone, on a client whose connection ended."""
    connected = False


def test_what_becomes_of_requests_without_a_reply():
    """ClientBase._settle's table (README, "Daemon restarts"), one row at a
    time: True is sent again, False returns req.instead."""
    def client(session="s", reconnect=True, clean=False):
        c = _Down("/x", session, False, None, None, None, None, None,
                  reconnect=reconnect)
        c._lose(bitwheel.ConnectionClosed("eof"), clean)
        return c

    def plain():
        return _core.schedule_req(1, 1, None, None, None, False, None)

    def replace():
        return _core.schedule_req(2, 1, None, None, None, True, None)

    fire = _core.Fire(5, b"", 1, 1, 0, False, False, 9, 1)
    dirty, clean = client(), client(clean=True)
    for c in (dirty, clean):   # never written whole: did not run
        assert c._settle(plain(), False, None) is True
        assert c._settle(_core.ack_req(fire, False), False, None) is False
    # Written, then SHUTTING_DOWN: did not run either.
    assert clean._settle(plain(), True, None) is True
    ack = _core.ack_req(fire, False)
    assert clean._settle(ack, True, None) is False and ack.instead == 0
    # Written, then EOF: may have run.
    with pytest.raises(bitwheel.UnknownOutcome) as e:
        dirty._settle(plain(), True, None)
    assert (e.value.request, e.value.key, e.value.crashes) == \
        ("schedule", 1, 1)
    assert isinstance(e.value.__cause__, bitwheel.ConnectionClosed)
    with pytest.raises(bitwheel.UnknownOutcome) as e:
        dirty._settle(_core.ack_req(fire, True), True, None)
    assert (e.value.request, e.value.key) == ("ack", 5)
    for req in (replace(), _core.cancel_req(3), _core.stats_req(),
                _core.page_req(_core.Pager(None, None, None))):
        for _ in range(_core.MAX_CRASHES - 1):   # harmless to repeat ...
            assert dirty._settle(req, True, None) is True
        with pytest.raises(bitwheel.UnknownOutcome) as e:   # ... so far
            dirty._settle(req, True, None)
        assert e.value.crashes == _core.MAX_CRASHES == 3
        assert e.value.key == {"schedule": 2, "cancel": 3}.get(req.what)
    # Not riding: the error as it came; an anonymous session: SessionLost.
    err = bitwheel.ConnectionClosed("eof")
    with pytest.raises(bitwheel.ConnectionClosed) as e:
        client(reconnect=False)._settle(replace(), False, err)
    assert e.value is err
    with pytest.raises(bitwheel.SessionLost):
        client(session=None)._settle(replace(), False, err)
