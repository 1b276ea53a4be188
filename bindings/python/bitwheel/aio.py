"""The asyncio client: the blocking client's surface, as coroutines, with
requests pipelined.

Every request is written at once and gets its own future, keyed by its
request_id; concurrent requests (``asyncio.gather`` of many ``schedule``
calls) share the socket without waiting for each other's replies, and the
replies are matched as they come.  Fires are queued in arrival order and
handed out by :meth:`AsyncClient.next_fire` and :meth:`AsyncClient.fires`.

When the daemon closes a named session's connection (a restart), a task of
the client attaches again at once, backing off; meanwhile the requests that
got no reply and are to be sent again (``ClientBase._settle``) and those
made since wait in order, with their futures, and go out on the new
connection; fire waiters keep waiting.

Data: an :class:`asyncio.Protocol` on the Unix socket, a
:class:`~bitwheel._core.FrameReader`, a dict of pending futures, a deque
of fires and the futures of those waiting for one.  Costs per request: one
frame packed and queued by a plain method returning a future (no task, no
coroutine, so that gathering many is cheap) (the frames queued in one turn of the event loop
are handed to the transport in one write, which goes out as the socket
allows; a full buffer makes the next requests wait for it to drain), one
future, and an entry in the dict of pending requests, which one watchdog
timer for the whole client scans for requests past the timeout.
"""

from __future__ import annotations

import asyncio
import datetime
import os
from collections import deque
from typing import Any, AsyncIterator, cast

from . import _core
from ._core import (Backoff, Duration, Fire, Kicked, ReleaseBackoff,
                    Released, Scheduled, Touched)
from ._errors import (BitwheelError, ConnectionClosed, ConnectionRefused,
                      ProtocolError, ReconnectFailed, ServerError,
                      SessionLost, Timeout)


class AsyncFire(Fire):
    """A :class:`~bitwheel.Fire` from an :class:`AsyncClient`: its
    :meth:`ack` is a coroutine."""

    async def ack(self, *, cumulative: bool = False,
                  wait: bool = False) -> int | None:
        """Acknowledge this fire; see :meth:`AsyncClient.ack`."""
        acked: int | None = await self._client.ack(
            self, cumulative=cumulative, wait=wait)
        return acked

    async def release(self, delay: Duration | None = None, *,
                      backoff: ReleaseBackoff | bool | None = None
                      ) -> Released:
        """Give this fire back; see :meth:`AsyncClient.release`."""
        released: Released = await self._client.release(
            self, delay, backoff=backoff)
        return released

    async def touch(self, timeout: Duration | None = None) -> Touched:
        """Ask for more time; see :meth:`AsyncClient.touch`."""
        touched: Touched = await self._client.touch(self, timeout)
        return touched


class _Protocol(asyncio.Protocol):
    def __init__(self, client: "AsyncClient") -> None:
        self.client = client
        #: Done once this connection's transport is closed.
        self.lost = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.client._on_data(self, data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.client._on_lost(self, exc)

    def pause_writing(self) -> None:
        self.client._pause(self, True)

    def resume_writing(self) -> None:
        self.client._pause(self, False)


class AsyncClient(_core.ClientBase):
    """An asyncio connection to bitwheeld, with the arguments and methods
    of :class:`~bitwheel.Client` (as coroutines).  The connection is made
    by ``await client.connect()`` or ``async with``.

    With reconnect on (the default), a task of the client attaches again
    as soon as the daemon closes a named session's connection; requests
    made meanwhile wait for it (bounded by the :class:`~bitwheel.Backoff`'s
    give-up, not by the timeout, which starts when they are sent).

    Example::

        async with bitwheel.AsyncClient(session="orders") as c:
            await asyncio.gather(*(c.schedule(k, in_=60) for k in keys))

        async with bitwheel.AsyncClient(session="orders", consume=True) as c:
            async for fire in c.fires():
                await handle(fire)
                await fire.ack()
    """

    def __init__(self, socket: str | None = None,
                 session: str | bytes | None = None, consume: bool = False,
                 window: int | None = None, timeout: Duration | None = None,
                 *, ack_timeout: Duration | None = None,
                 auto_ack: bool | None = None,
                 owner_uid: int | None = None,
                 coalesce: bool = False,
                 reconnect: bool | Backoff = True) -> None:
        super().__init__(socket, session, consume, window, timeout,
                         ack_timeout, auto_ack, owner_uid, coalesce,
                         reconnect)
        self._transport: asyncio.Transport | None = None
        self._proto: _Protocol | None = None
        # request_id -> (future, deadline, request); in order of deadline,
        # since every request gets the same timeout (a Hello's, alone on
        # its connection, may be shorter).
        self._pending: dict[int, tuple[asyncio.Future[Any], float,
                                       _core.Req]] = {}
        # During an outage: the requests to send once attached again.
        self._held: list[tuple[asyncio.Future[Any], _core.Req]] = []
        self._rider: asyncio.Task[None] | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        self._out = bytearray()
        # Requests whose frames are in _out, not yet handed to the
        # transport: the newest of _pending (both grow together, in order,
        # and _out goes out whole).
        self._unsent = 0
        self._flush_soon = False
        self._fires: deque[AsyncFire] = deque()
        self._waiters: list[asyncio.Future[None]] = []
        self._drained: asyncio.Future[None] | None = None
        self._fd = -1
        self._gone_raised = True

    # ---- connection ------------------------------------------------------

    async def connect(self) -> "AsyncClient":
        """Connect and say Hello; see :class:`~bitwheel.Client` for what
        it raises.  Returns the client."""
        if self._transport is not None or self._outage is not None:
            raise RuntimeError("already connected (or reconnecting)")
        await self._open(self._timeout)
        return self

    async def _open(self, limit: float) -> None:
        """Dial and say Hello, each within `limit` seconds."""
        loop = asyncio.get_running_loop()
        proto = _Protocol(self)
        try:
            async with asyncio.timeout(limit):
                transport, _ = await loop.create_unix_connection(
                    lambda: proto, self.path)
        except TimeoutError as e:
            raise ConnectionRefused(f"cannot connect to {self.path}: timed "
                                    f"out after {limit} s") from e
        except OSError as e:
            raise _core.connect_failed(self.path, e) from e
        try:
            _core.check_peer(transport.get_extra_info("socket"), self.path)
        except BaseException:
            transport.abort()
            raise
        self._transport, self._proto = transport, proto
        self._fd = transport.get_extra_info("socket").fileno()
        self._gone_raised = False
        self._begin()
        self._dialing = True
        try:
            fut = self._submit(_core.hello_req(self._opts), hello=limit)
            await self._drain()
            self._hello_done(await fut)
        except BaseException as e:
            self._fail(e)
            raise
        finally:
            self._dialing = False
        if self._transport is None:   # lost before this task resumed
            self._raise_gone()

    async def _ride(self) -> None:
        """The task that attaches again after a restart, backing off
        (ClientBase._dial_wait), then sends the held requests in order;
        at the give-up or a lasting refusal, fails them and the fire
        waiters with that error."""
        try:
            while True:
                wait, limit = self._dial_wait()
                await asyncio.sleep(wait)
                try:
                    await self._open(limit)
                    break
                except BitwheelError as e:
                    self._dial_failed(e)
        except Exception as e:   # ReconnectFailed, a lasting refusal
            # Raised to each held request and, once, to the next call or
            # fire waiter.
            self._outage, self._gone = None, e
            self._gone_raised = False
            held, self._held = self._held, []
            for fut, _ in held:
                if not fut.done():
                    fut.set_exception(e)
            self._wake()
            return
        finally:
            self._rider = None
        self._dial_done()
        held, self._held = self._held, []
        loop = asyncio.get_running_loop()
        for fut, req in held:
            if not fut.done():
                self._put(loop, fut, req, self._timeout)
        self._wake()

    async def reconnect(self) -> None:
        """Close the connection if open and attach to the same session
        again; see :meth:`bitwheel.Client.reconnect`."""
        await self.close()
        await self.connect()

    async def close(self) -> None:
        """Close the connection once what was written (acks included) is
        out, waiting at most the client's timeout.  Closing twice is
        harmless.  Stops a reconnect under way: what waited for it fails
        with ConnectionClosed."""
        if self._rider is not None:
            self._rider.cancel()
        self._forget_outage()
        t = self._transport
        lost = self._proto.lost if self._proto is not None else None
        self._fail(ConnectionClosed("closed by close()"), graceful=True)
        if t is not None and lost is not None:
            try:
                async with asyncio.timeout(self._timeout):
                    await asyncio.shield(lost)
            except TimeoutError:
                t.abort()

    def _fail(self, why: BaseException, graceful: bool = False,
              clean: bool | None = None) -> None:
        """The connection is over (see ClientBase._lose for `clean`):
        close it; settle the requests that wait on it, or fail them; on an
        outage start the task that attaches again."""
        self._lose(why, clean)
        riding = self._outage is not None and not self._dialing
        t, self._transport, self._proto = self._transport, None, None
        if t is not None:
            if graceful:
                self._flush(t)
            t.close() if graceful else t.abort()
        written = len(self._pending) - self._unsent
        self._out.clear()
        self._unsent = 0
        pending, self._pending = self._pending, {}
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        gone = self._gone
        assert gone is not None      # _lose() set it
        for i, (fut, _, req) in enumerate(pending.values()):
            if fut.done():
                continue
            if not riding:
                fut.set_exception(gone)
                self._gone_raised = True
                continue
            try:
                if self._settle(req, i < written, why):
                    self._held.append((fut, req))
                else:
                    fut.set_result(req.instead)
            except BitwheelError as e:
                fut.set_exception(e)
        if self._outage is None:
            held, self._held = self._held, []
            gone = self._gone
            assert gone is not None
            for fut, _ in held:
                if not fut.done():
                    fut.set_exception(gone)
                    self._gone_raised = True
        self._wake()
        # Writes paused on this connection say nothing of the next one;
        # a done future left here would make _drain spin there for good.
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None
        if self._opts.manual_ack:
            self._fires.clear()
        if riding and self._rider is None:
            self._rider = asyncio.get_running_loop().create_task(
                self._ride())

    def _raise_gone(self) -> None:
        """Raise why the client is closed: the error itself the first time
        (ShuttingDownError, SessionLost, ReconnectFailed, ...), then
        ConnectionClosed."""
        gone = self._gone
        if not self._gone_raised and isinstance(gone, (
                ServerError, ProtocolError, SessionLost, ReconnectFailed)):
            self._gone_raised = True
            raise gone
        raise ConnectionClosed(f"not connected: {gone}") from gone

    @property
    def connected(self) -> bool:
        """Whether the connection is open."""
        return self._transport is not None

    async def __aenter__(self) -> "AsyncClient":
        if self._transport is None:
            await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- protocol callbacks ------------------------------------------------

    def _on_data(self, proto: _Protocol, data: bytes) -> None:
        if proto is not self._proto:
            return
        try:
            frames = self._reader.feed(data)
        except ProtocolError as e:
            self._fail(e)
            return
        for env in frames:
            which = env.WhichOneof("body")
            if which == "fired":
                if not self._opts.receives_fires:
                    self._fail(ProtocolError("the daemon sent a fire to a "
                                             "producer"))
                    return
                self._fires.append(_core.make_fire(
                    env.fired, self._connection, self, AsyncFire))
                self._wake()
            elif which == "error" and self._stopping(env):
                self._fail(_core.server_error(
                    env.error, not env.HasField("request_id")), clean=True)
                return
            elif env.HasField("request_id"):
                entry = self._pending.pop(env.request_id, None)
                if entry is not None and not entry[0].done():
                    try:
                        entry[0].set_result(entry[2].result(env))
                    except BitwheelError as e:
                        entry[0].set_exception(e)
            elif which == "error":
                self._fail(_core.server_error(env.error, True))
                return
            else:
                self._fail(ProtocolError(f"the daemon sent {which} without "
                                         "request_id"))
                return

    def _on_lost(self, proto: _Protocol, exc: Exception | None) -> None:
        if not proto.lost.done():
            proto.lost.set_result(None)
        if proto is self._proto and exc is not None and self._fd >= 0:
            # A write failed (EPIPE): the daemon may have said why before it
            # closed (TOO_MANY_CLIENTS, BAD_FRAME, ...), and that error is
            # the better report.  The socket is still open here.
            while proto is self._proto:
                try:
                    data = os.read(self._fd, 262144)
                except OSError:
                    break
                if not data:
                    break
                self._on_data(proto, data)
        if proto is self._proto:
            self._fail(ConnectionClosed(
                f"the connection broke: {exc}" if exc else
                "the daemon closed the connection"), clean=False)

    def _pause(self, proto: _Protocol, paused: bool) -> None:
        if proto is not self._proto:
            return
        if paused:
            self._drained = asyncio.get_running_loop().create_future()
        elif self._drained is not None:
            if not self._drained.done():
                self._drained.set_result(None)
            self._drained = None

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    # ---- requests ----------------------------------------------------------

    def _queue(self, data: bytes, request: bool = False) -> None:
        """Queue a frame (a request's: one with a reply); frames queued in
        one turn of the event loop go out in one write (pipelined requests
        cost one send() together)."""
        if self._transport is None:
            self._raise_gone()
        self._out += data
        self._unsent += request
        if not self._flush_soon:
            self._flush_soon = True
            asyncio.get_running_loop().call_soon(self._flush, None)

    async def _drain(self) -> None:
        """Wait while the transport's buffer is over its high-water mark."""
        while self._drained is not None and self._transport is not None:
            await asyncio.shield(self._drained)

    def _flush(self, transport: asyncio.Transport | None) -> None:
        self._flush_soon = False
        t = transport or self._transport
        if t is not None and self._out:
            t.write(bytes(self._out))
        self._out.clear()
        self._unsent = 0

    def _expire(self) -> None:
        """The watchdog: fail the requests whose time is up, then sleep
        until the oldest of the others is due."""
        self._watchdog = None
        now = asyncio.get_running_loop().time()
        while self._pending:
            rid, (fut, deadline, _) = next(iter(self._pending.items()))
            if deadline > now:
                self._arm_watchdog(deadline)
                return
            del self._pending[rid]
            if not fut.done():
                fut.set_exception(Timeout(f"no reply from the daemon within "
                                          f"{self._timeout} s"))

    def _arm_watchdog(self, when: float) -> None:
        if self._watchdog is None:
            self._watchdog = asyncio.get_running_loop().call_at(
                when, self._expire)

    def _submit(self, req: _core.Req,
                hello: float | None = None) -> asyncio.Future[Any]:
        """Send a request; the future gets req.result(reply) or the error.
        During an outage it waits, in order, to go out once attached again
        (the Hello of an attempt, with its time limit `hello`, goes at
        once).  No task, no coroutine: many of these pipeline cheaply."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        if self._outage is not None and hello is None:
            self._held.append((fut, req))
            return fut
        if self._transport is None:
            self._raise_gone()
        self._put(loop, fut, req, hello or self._timeout)
        return fut

    def _put(self, loop: asyncio.AbstractEventLoop, fut: asyncio.Future[Any],
             req: _core.Req, limit: float) -> None:
        rid = self._rid()
        deadline = loop.time() + limit
        self._pending[rid] = (fut, deadline, req)
        self._arm_watchdog(deadline)
        self._queue(req.frame(rid, self._connection), True)

    async def _request(self, req: _core.Req) -> Any:
        fut = self._submit(req)
        await self._drain()
        return await fut

    def schedule(self, key: int, in_: Duration | None = None, *,
                 at_monotonic_ns: int | None = None,
                 every: Duration | None = None,
                 payload: bytes | None = None,
                 replace: bool = False,
                 leeway: Duration | None = None,
                 at: datetime.datetime | None = None,
                 calendar: str | None = None,
                 jitter: Duration | None = None,
                 jitter_fixed: bool = False,
                 misfire_grace: Duration | None = None,
                 clock: str | None = None) -> asyncio.Future[Scheduled]:
        """Arm timer `key`; see :meth:`bitwheel.Client.schedule`.

        Returns a future to await (``await c.schedule(...)``): the request
        is queued at once, so that many of them, gathered, are pipelined
        without a task each.  Invalid arguments raise at the call.
        Requests are queued without limit: a program scheduling millions
        awaits them in batches."""
        limit = self.hello.limits.max_payload_bytes if self.hello else None
        return self._submit(_core.schedule_req(
            key, in_, at_monotonic_ns, every, payload, replace, limit,
            leeway, at, calendar, jitter, jitter_fixed, misfire_grace,
            clock))

    def cancel(self, key: int) -> asyncio.Future[bool]:
        """Disarm timer `key`; see :meth:`bitwheel.Client.cancel`.  A future,
        as :meth:`schedule` returns."""
        return self._submit(_core.cancel_req(key))

    def stats(self) -> asyncio.Future[Any]:
        """The daemon's counters; see :meth:`bitwheel.Client.stats`.  A
        future, as :meth:`schedule` returns."""
        return self._submit(_core.stats_req())

    async def list_sessions(self, owner_uid: int | None = None,
                            limit: int | None = None) -> _core.Listing:
        """The sessions this client may see; see
        :meth:`bitwheel.Client.list_sessions`."""
        return await self._list(_core.Pager(None, owner_uid, limit))

    async def list_timers(self, session: str | bytes,
                          owner_uid: int | None = None,
                          limit: int | None = None) -> _core.Listing:
        """A named session's pending timers; see
        :meth:`bitwheel.Client.list_timers`."""
        return await self._list(_core.Pager(session, owner_uid, limit))

    async def _list(self, pager: _core.Pager) -> _core.Listing:
        while pager.take(await self._request(_core.page_req(pager))):
            pass
        return pager.listing

    async def calendar(self, spec: str, iterations: int = 1,
                       base: datetime.datetime | None = None
                       ) -> _core.CalendarEvents:
        """How the daemon reads a calendar event; see
        :meth:`bitwheel.Client.calendar`."""
        return cast(_core.CalendarEvents, await self._request(
            _core.calendar_req(spec, iterations, base)))

    # ---- fires -------------------------------------------------------------

    async def next_fire(self, timeout: Duration | None = None
                        ) -> AsyncFire | None:
        """The next fire, waiting at most `timeout` (None: as long as it
        takes); None when the wait ran out."""
        self._need_consumer()
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else \
            loop.time() + _core.seconds(timeout, "timeout", 0)
        while not self._fires:
            if self._transport is None and self._outage is None:
                self._raise_gone()
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout_at(deadline):
                    await waiter
            except TimeoutError:
                return None
        return self._fires.popleft()

    async def fires(self, timeout: Duration | None = None
                    ) -> AsyncIterator[AsyncFire]:
        """Iterate over fires as they come (``async for``); with `timeout`,
        the iteration ends once no fire came for that long."""
        while True:
            f = await self.next_fire(timeout)
            if f is None:
                return
            yield f

    async def ack(self, fire: Fire, *, cumulative: bool = False,
                  wait: bool = False) -> int | None:
        """Acknowledge `fire`; see :meth:`bitwheel.Client.ack`."""
        self._need_consumer()
        if self._stale(fire) or not self._opts.manual_ack:
            return 0 if wait else None
        if not wait:
            self._queue(_core.ack_frame(fire.delivery, cumulative))
            await self._drain()
            return None
        acked: int = await self._request(_core.ack_req(fire, cumulative))
        return acked

    async def release(self, fire: Fire, delay: Duration | None = None, *,
                      backoff: ReleaseBackoff | bool | None = None
                      ) -> Released:
        """Give `fire` back; see :meth:`bitwheel.Client.release`."""
        self._need_consumer()
        req = _core.release_req(fire, delay, backoff, self._max_release_ns)
        if self._stale(fire) or not self._opts.manual_ack:
            return cast(Released, req.instead)
        released: Released = await self._request(req)
        return released

    async def touch(self, fire: Fire,
                    timeout: Duration | None = None) -> Touched:
        """Ask for more time for `fire`; see
        :meth:`bitwheel.Client.touch`."""
        self._need_consumer()
        req = _core.touch_req(fire, timeout)
        if self._stale(fire) or not self._opts.manual_ack:
            return cast(Touched, req.instead)
        touched: Touched = await self._request(req)
        return touched

    async def set_policy(self, max_deliveries: int | None = None,
                         dead_letter: str | bytes | None = None) -> Any:
        """Set the named session's delivery policy; see
        :meth:`bitwheel.Client.set_policy`."""
        return await self._request(_core.set_policy_req(max_deliveries,
                                                        dead_letter))

    async def kick(self, key: int | None = None,
                   limit: int | None = None) -> Kicked:
        """Move dead letters back; see :meth:`bitwheel.Client.kick`."""
        kicks = _core.Kicks(key, limit)
        while (req := kicks.request()) is not None:
            kicks.take(await self._request(req))
        return kicks.result


__all__ = ["AsyncClient", "AsyncFire"]
