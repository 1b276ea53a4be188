"""The AsyncClient against real daemons: the same surface as the blocking
client, pipelining (10,000 schedules in flight at once), errors raised as
their classes, and blocking and asyncio clients interleaved on one
session.  Each test runs its coroutine under asyncio.run with an overall
timeout."""

from __future__ import annotations

import asyncio
import datetime
import signal
import time

import pytest

import bitwheel
from conftest import WAIT, check_fire_time


def run(coro, limit: float = WAIT * 3):
    async def bounded():
        async with asyncio.timeout(limit):
            return await coro
    return asyncio.run(bounded())


async def fire_now(c: bitwheel.AsyncClient,
                   timeout: float = WAIT) -> bitwheel.AsyncFire:
    f = await c.next_fire(timeout)
    assert f is not None, f"no fire within {timeout} s"
    return f


def test_schedule_cancel_fire(daemon):
    async def main():
        async with bitwheel.AsyncClient(daemon.sock) as c:
            res = c.hello.oneshot_resolution_ns
            r = await c.schedule(1, in_=0.1, payload=b"a")
            await c.schedule(2, in_=0.1)
            assert await c.cancel(2) is True
            assert await c.cancel(2) is False
            f = await fire_now(c)
            check_fire_time(f, time.monotonic_ns(), res)
            assert (f.key, f.payload, f.deadline_ns) == (1, b"a",
                                                         r.deadline_ns)
            assert await c.next_fire(0.2) is None
            st = await c.stats()
            assert st.oneshot.fired == 1 and st.oneshot.cancelled == 1
        assert not c.connected
        with pytest.raises(bitwheel.ConnectionClosed):
            await c.stats()
    run(main())


def test_listings(daemon):
    async def go():
        async with bitwheel.AsyncClient(daemon.sock, session="alisted") as c:
            await asyncio.gather(*(c.schedule(k, in_=600) for k in range(30)))
            t = await c.list_timers("alisted", limit=20)
            assert len(t.entries) == 20 and t.more and t.total == 30
            s = await c.list_sessions()
            assert [x.timers for x in s.entries if x.name == b"alisted"] == [30]
    run(go())


def test_calendar(daemon):
    async def go():
        async with bitwheel.AsyncClient(daemon.sock) as c:
            a, b = await asyncio.gather(c.calendar("hourly UTC", 3),
                                        c.calendar("*:0/15 UTC", 2))
            assert a.normalized == "*-*-* *:00:00 UTC" and a.zone == "UTC"
            assert [t.minute for t in a.elapses] == [0, 0, 0]
            assert b.elapses[1] - b.elapses[0] == datetime.timedelta(minutes=15)
            with pytest.raises(bitwheel.BadCalendarError):
                await c.calendar("25:00")
    run(go())


def test_pipelined_10000_schedules(daemon):
    n = 10_000

    async def main():
        async with bitwheel.AsyncClient(daemon.sock, session="bulk") as c:
            t0 = time.monotonic_ns()
            replies = await asyncio.gather(
                *(c.schedule(k, in_=3600, payload=b"p%d" % k)
                  for k in range(n)))
            assert len(replies) == n
            for r in replies:
                assert r.deadline_ns >= t0 + 3600 * 10**9
                assert not r.replaced
            st = await c.stats()
            assert st.oneshot.pending == n and st.oneshot.inserted == n
            # Replies come back matched to their requests: cancel half,
            # pipelined too, and every answer is that key's.
            pending = await asyncio.gather(
                *(c.cancel(k) for k in range(0, 2 * n, 2)))
            assert pending == [k < n for k in range(0, 2 * n, 2)]
            assert (await c.stats()).oneshot.pending == n // 2
    run(main())


def test_pipelined_errors_keep_their_requests(daemon):
    async def main():
        async with bitwheel.AsyncClient(daemon.sock) as c:
            out = await asyncio.gather(
                *(c.schedule(k % 10, in_=60) for k in range(20)),
                return_exceptions=True)
            ok = [r for r in out if isinstance(r, bitwheel.Scheduled)]
            dup = [r for r in out if isinstance(r, bitwheel.DuplicateKeyError)]
            assert len(ok) == 10 and len(dup) == 10
            assert all(isinstance(r, bitwheel.Scheduled) for r in out[:10])
            with pytest.raises(bitwheel.BadDeadlineError):
                await c.schedule(99, in_=1, every=0)
    run(main())


def test_consumer_acks_and_reconnect(daemon):
    async def main():
        async with bitwheel.AsyncClient(daemon.sock, session="aq",
                                        consume=True, window=8) as c:
            for k in range(5):
                await c.schedule(k, at_monotonic_ns=1)
            got = []
            async for f in c.fires(timeout=WAIT):
                got.append(f)
                if len(got) == 5:
                    break
            assert sorted(f.key for f in got) == list(range(5))
            assert [f.delivery for f in got] == [1, 2, 3, 4, 5]
            assert await got[1].ack(wait=True) == 1
            assert await c.ack(got[-1], cumulative=True, wait=True) == 4
            assert (await c.stats()).in_flight == 0

            await c.schedule(9, at_monotonic_ns=1, payload=b"again")
            first = await fire_now(c)
            await c.reconnect()
            assert c.resumed
            # Its delivery number means nothing now: nothing is sent (the
            # daemon would refuse delivery 6 on this connection, and close).
            assert await first.ack() is None
            assert await first.ack(wait=True) == 0
            again = await fire_now(c)
            assert (again.key, again.payload, again.redelivered) == \
                (9, b"again", True)
            await again.ack()          # no reply: flushed by close()
        async with bitwheel.AsyncClient(daemon.sock, session="aq") as p:
            st = await p.stats()
            assert st.in_flight == 0 and st.acked == 6
    run(main())


def test_blocking_and_asyncio_interleaved(daemon):
    """A blocking producer and an asyncio consumer of one session, their
    calls interleaved in one thread: each fire scheduled by the one is
    received by the other, in order, and cancels take effect."""
    async def main():
        s = daemon.sock
        with bitwheel.Client(s, session="mix") as prod:
            async with bitwheel.AsyncClient(s, session="mix", consume=True,
                                            window=1) as cons:
                for k in range(10):
                    prod.schedule(k, at_monotonic_ns=1, payload=b"%d" % k)
                    prod.schedule(100 + k, in_=0.05)
                    assert prod.cancel(100 + k) is True
                    f = await fire_now(cons)
                    assert (f.key, f.payload) == (k, b"%d" % k)
                    await f.ack(wait=True)
                    assert (await cons.stats()).in_flight == 0
                assert await cons.next_fire(0.2) is None
                await cons.schedule(50, in_=0)   # a consumer schedules too
                assert (await fire_now(cons)).key == 50
                assert prod.stats().consumers == 1
    run(main())


def test_async_errors_and_shutdown(start_daemon):
    async def main():
        d = start_daemon("--max-clients", "1")
        c = bitwheel.AsyncClient(d.sock, session="sd", consume=True,
                                 reconnect=False)
        await c.connect()
        with pytest.raises(bitwheel.TooManyClientsError):
            await bitwheel.AsyncClient(d.sock).connect()
        with pytest.raises(bitwheel.RoleError):
            await bitwheel.AsyncClient(d.sock, session="p").next_fire(0)
        waiter = asyncio.ensure_future(c.next_fire(WAIT))
        await asyncio.sleep(0.05)
        d.send(signal.SIGTERM)
        with pytest.raises(bitwheel.ShuttingDownError) as e:
            await waiter
        assert e.value.connection_level and not c.connected
        with pytest.raises(bitwheel.ConnectionClosed):
            await c.stats()
        assert await asyncio.to_thread(d.proc.wait, WAIT) == 0
        with pytest.raises(bitwheel.ConnectionRefused):
            await c.reconnect()
    run(main())


def test_refused(daemon):
    async def main():
        with pytest.raises(bitwheel.ConnectionRefused):
            await bitwheel.AsyncClient(daemon.sock + ".missing").connect()
    run(main())


def test_timeout_and_late_replies(daemon):
    """A stopped daemon: each request fails with Timeout after the client's
    timeout, pipelined ones too; once it resumes, the late replies are
    dropped and the connection serves new requests."""
    async def main():
        async with bitwheel.AsyncClient(daemon.sock, timeout=0.3) as c:
            daemon.send(signal.SIGSTOP)
            try:
                t0 = time.monotonic()
                out = await asyncio.gather(
                    *(c.schedule(k, in_=60) for k in range(3)),
                    return_exceptions=True)
                assert all(isinstance(r, bitwheel.Timeout) for r in out), out
                assert 0.3 <= time.monotonic() - t0 < WAIT
            finally:
                daemon.send(signal.SIGCONT)
            st = await c.stats()
            assert st.oneshot.pending == 3   # they took effect, late
            assert (await c.schedule(9, in_=60)).replaced is False
    run(main())
