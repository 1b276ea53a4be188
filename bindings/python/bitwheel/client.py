"""The blocking client: one socket, one request at a time.

Each request is sent and its reply awaited (at most the client's timeout);
fires that arrive meanwhile are queued in the client, in arrival order,
and handed out by :meth:`Client.next_fire` and :meth:`Client.fires`.  The
queue is bounded by the window for a manual-ack consumer (the daemon sends
no more), otherwise only by memory.

When the daemon closes a named session's connection (a restart), the call
that needs the connection next attaches again, backing off, and sends
again the request it was making if that is safe (``ClientBase._settle``);
a consumer waiting in :meth:`Client.next_fire` does so at once.  No thread.

Data: the socket, a :class:`~bitwheel._core.FrameReader`, a deque of
fires, and the replies of the one request awaited.  Costs: a request is one
``sendall`` and as many ``recv`` as its reply takes; a fire is decoded
once.
"""

from __future__ import annotations

import datetime
import socket as _socket
import time
from collections import deque
from typing import Any, Iterator, cast

from . import _core
from ._core import (Backoff, Duration, Fire, Kicked, ReleaseBackoff,
                    Released, Scheduled, Touched)
from ._errors import BitwheelError, ConnectionClosed, ProtocolError, Timeout


class Client(_core.ClientBase):
    """A blocking connection to bitwheeld.

    Args:
        socket: the daemon's socket; default ``$BITWHEEL_SOCKET`` or
            ``/run/bitwheel/bitwheeld.sock``.
        session: a named session (its timers outlive the connection; fires
            due while no consumer is attached wait in its queue), or None
            for an anonymous one whose timers end with the connection.
        consume: attach as a consumer, which receives the session's fires;
            otherwise a producer (schedules, cancels, never gets a fire).
            An anonymous session is always its own consumer.
        window: a consumer's most fires in flight unacknowledged (daemon
            default 256).
        timeout: the longest wait for each reply, in seconds or a
            timedelta (default 30 s).
        ack_timeout: a consumer's fires unacknowledged this long are taken
            back and delivered again (default: never).
        auto_ack: True makes each fire done once written to the socket (at
            most once, no acks); default False for a named session, True
            for an anonymous one.
        owner_uid: root only: the uid whose namespace ``session`` is in.
        coalesce: a consumer's fires may be held within their leeways and
            sent together, at the latest moment within every one's window
            (PROTOCOL.md, "Coalesced delivery"): one wake-up for many
            tolerant timers.
        reconnect: ride through daemon restarts (default True, or a
            :class:`~bitwheel.Backoff` saying how): when the daemon closes
            a named session's connection (SHUTTING_DOWN, EOF, a broken
            socket), the next call attaches again with the same Hello and
            goes on; a request without a reply is sent again if it cannot
            have run or is harmless to repeat, else raises
            :class:`~bitwheel.UnknownOutcome`.  An anonymous session's end
            raises :class:`~bitwheel.SessionLost`.  False: every such end
            raises, as the daemon said it (``ShuttingDownError``,
            ``ConnectionClosed``), and :meth:`reconnect` is the caller's.

    Raises:
        ConnectionRefused: nobody listens on the socket.
        NotPermitted: a ConnectionRefused and a PermissionError: the
            caller may not use the socket (its message names the group
            to join).
        UntrustedDaemon: the listener is not the daemon (see
            :func:`bitwheel.check_peer`).
        ServerError: the daemon refused the Hello (e.g.
            ``TooManyClientsError``, ``OverBudgetError``).

    Example::

        with bitwheel.Client(session="orders") as c:
            c.schedule(42, in_=15 * 60, payload=b"order 42")
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
        self._sock: _socket.socket | None = None
        self._fires: deque[Fire] = deque()
        self._awaited: int | None = None
        self._reply: Any = None
        self._connect(self._timeout)

    # ---- connection ------------------------------------------------------

    def _connect(self, limit: float) -> None:
        """Dial and say Hello, each within `limit` seconds."""
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            sock.settimeout(limit)
            try:
                sock.connect(self.path)
            except OSError as e:
                raise _core.connect_failed(self.path, e) from e
            _core.check_peer(sock, self.path)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self._begin()
        self._dialing = True
        try:
            rid, hello = self._rid(), _core.hello_req(self._opts)
            self._send(hello.frame(rid, self._connection))
            self._hello_done(hello.result(self._await(rid, limit)))
        except BaseException as e:
            self._drop(e)
            raise
        finally:
            self._dialing = False

    def _revive(self, deadline: float | None = None) -> bool:
        """Attach again after the daemon closed the connection, backing off
        (ClientBase._dial_wait); False if `deadline` (time.monotonic())
        came first.  Raises the closed client's error when there is
        nothing to ride through, ReconnectFailed at the give-up."""
        while self._sock is None:
            if self._outage is None:
                self._live()
            wait, limit = self._dial_wait()
            if deadline is not None and time.monotonic() + wait > deadline:
                time.sleep(max(0.0, deadline - time.monotonic()))
                return False
            time.sleep(wait)
            try:
                self._connect(limit)
            except BitwheelError as e:
                self._dial_failed(e)
            else:
                self._dial_done()
        return True

    def reconnect(self) -> None:
        """Close the connection if open, dial the same socket and attach to
        the same session, with the same role, window, ack timeout, ack mode
        and owner (what the client does by itself after a daemon restart,
        unless ``reconnect=False``).

        A manual-ack consumer's fires still queued in the client are
        discarded (the daemon delivers them again, marked redelivered),
        and fires handed out before can no longer be acknowledged (an ack
        of one does nothing; :class:`StaleFire` with ``reconnect=False``).
        Requests outstanding on a connection closed this way may or may not
        have taken effect: re-schedule with ``replace=True``.
        """
        self._forget_outage()
        self._drop(ConnectionClosed("closed by reconnect()"))
        self._connect(self._timeout)

    def close(self) -> None:
        """Close the connection.  Unacknowledged fires go back to the
        session's queue.  Closing twice is harmless."""
        self._forget_outage()
        self._drop(ConnectionClosed("closed by close()"))

    def _drop(self, why: BaseException, clean: bool | None = None) -> None:
        """The connection is over (see ClientBase._lose for `clean`)."""
        self._lose(why, clean)
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._opts.manual_ack:
            self._fires.clear()

    @property
    def connected(self) -> bool:
        """Whether the connection is open."""
        return self._sock is not None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        sock = getattr(self, "_sock", None)
        if sock is not None:
            sock.close()

    # ---- I/O ---------------------------------------------------------------

    def _live(self) -> _socket.socket:
        """The open socket, or the closed client's error."""
        if self._sock is None:
            raise ConnectionClosed(f"not connected: {self._gone}") \
                from self._gone
        return self._sock

    def _send(self, data: bytes) -> None:
        sock = self._live()
        try:
            sock.settimeout(self._timeout)
            sock.sendall(data)
        except _socket.timeout as e:
            # Part of a frame may be out: the stream cannot be resumed.
            self._drop(ConnectionClosed("a send timed out"))
            raise Timeout(f"could not send within {self._timeout} s; "
                          "connection closed") from e
        except OSError as e:
            # The daemon may have said why before it closed (BAD_FRAME,
            # SHUTTING_DOWN, ...): that error is the better report.
            self._salvage()
            err = ConnectionClosed(f"the connection broke: {e}")
            self._drop(err, clean=False)
            raise err from e

    def _salvage(self) -> None:
        """Dispatch what is still readable on a broken connection."""
        sock = self._live()
        sock.settimeout(0)
        while self._sock is not None:
            try:
                data = sock.recv(262144)
                frames = self._reader.feed(data) if data else None
            except (OSError, ProtocolError):
                return
            if not frames:
                return
            for env in frames:
                self._dispatch(env)

    def _pump(self, deadline: float | None) -> bool:
        """Read what comes before deadline (None: no limit) and dispatch
        it; False when the wait ran out with nothing read."""
        sock = self._live()
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return False
        try:
            sock.settimeout(left)
            data = sock.recv(262144)
        except _socket.timeout:
            return False
        except OSError as e:
            err = ConnectionClosed(f"the connection broke: {e}")
            self._drop(err, clean=False)
            raise err from e
        if not data:
            err = ConnectionClosed("the daemon closed the connection")
            self._drop(err, clean=False)
            raise err
        try:
            frames = self._reader.feed(data)
        except ProtocolError as e:
            self._drop(e)
            raise
        for env in frames:
            self._dispatch(env)
        return True

    def _dispatch(self, env: Any) -> None:
        which = env.WhichOneof("body")
        if which == "fired":
            if not self._opts.receives_fires:
                err = ProtocolError("the daemon sent a fire to a producer")
                self._drop(err)
                raise err
            self._fires.append(_core.make_fire(env.fired, self._connection,
                                               self, Fire))
        elif which == "error" and self._stopping(env):
            stopping = _core.server_error(env.error,
                                          not env.HasField("request_id"))
            self._drop(stopping, clean=True)
            raise stopping
        elif env.HasField("request_id"):
            if env.request_id == self._awaited:
                self._reply = env
            # else: the late reply of a request that timed out: dropped.
        elif which == "error":
            refused = _core.server_error(env.error, True)
            self._drop(refused)
            raise refused
        else:
            err = ProtocolError(f"the daemon sent {which} without request_id")
            self._drop(err)
            raise err

    def _await(self, rid: int, limit: float) -> Any:
        """The reply envelope of request `rid`, sent, within `limit` s."""
        self._awaited, self._reply = rid, None
        deadline = time.monotonic() + limit
        try:
            while self._reply is None:
                if not self._pump(deadline) and time.monotonic() >= deadline:
                    raise Timeout(f"no reply from the daemon within "
                                  f"{limit} s")
            return self._reply
        finally:
            self._awaited, self._reply = None, None

    def _call(self, req: _core.Req) -> Any:
        """Send `req` and return its result, riding through daemon
        restarts: attach again first if the connection is down, and after
        a loss send it again or raise, as ClientBase._settle says."""
        while True:
            self._revive()
            rid = self._rid()
            written = False
            try:
                self._send(req.frame(rid, self._connection))
                written = True
                return req.result(self._await(rid, self._timeout))
            except BitwheelError as e:
                if not self._settle(req, written, e):
                    return req.instead

    # ---- requests ----------------------------------------------------------

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
                 clock: str | None = None) -> Scheduled:
        """Arm timer `key` (any int from 0 to 2**64 - 1, unique among the
        session's pending timers).

        Args:
            in_: fire this long from now (seconds or a timedelta) ...
            at_monotonic_ns: ... or at this CLOCK_MONOTONIC time
                (:func:`time.monotonic_ns`); a past time fires at once ...
            at: ... or when the wall clock reaches this aware datetime
                (any tzinfo, e.g. ``ZoneInfo("Europe/Berlin")``; a naive
                one is a ValueError), however the clock is stepped
                meanwhile: a oneshot, not with `every` (PROTOCOL.md,
                "Clocks").  Its fires carry ``due_realtime_ns``.
            calendar: ... or at every elapse of this systemd.time(7)
                calendar event (``"Mon..Fri 09:00"``, ``"*:0/15"``,
                ``"daily Europe/Berlin"``; the daemon's local zone unless
                one is named last), until cancelled (PROTOCOL.md,
                "Calendar timers"); a spec the daemon refuses is a
                :class:`BadCalendarError`.  Its fires carry
                ``due_realtime_ns``, the elapse.
            jitter: calendar timers: a random delay up to this added to
                each elapse (systemd's RandomizedDelaySec=) ...
            jitter_fixed: ... the same for every elapse, per host, session
                and key (FixedRandomDelay=).
            misfire_grace: calendar timers: an elapse missed while the
                daemon was down fires at its start only if missed by at
                most this; None: always, once, late.
            every: periodic: re-armed this long after each deadline until
                cancelled.
            clock: what `in_`, `at_monotonic_ns` and `every` count on:
                ``"monotonic"`` (None: the default; stops while the host
                is suspended, as a process's own progress does) or
                ``"boottime"`` (counts the suspend, for a lease or TTL a
                peer measures on its own clock: a timer a suspend passed
                fires at the resume, late; `at_monotonic_ns` is then a
                CLOCK_BOOTTIME time, :func:`time.clock_gettime_ns` of
                ``time.CLOCK_BOOTTIME``).  Not with `at` or `calendar`
                (PROTOCOL.md, "Clocks").
            payload: bytes handed back with every fire (at most the
                daemon's ``limits.max_payload_bytes``).
            replace: replace a pending timer of the key instead of failing
                with :class:`DuplicateKeyError`.
            leeway: how late each fire may come; it picks the timer's lane
                (``hello.lanes``: the coarsest whose ``max_late_ns`` fits).
                None: the daemon's default, 0 for a oneshot timer and the
                period / 64 for a periodic one.  A fire never comes early,
                and late by at most max(leeway, the finest lane's bound)
                plus scheduling delay.

        Returns:
            the first deadline and whether a pending timer was replaced.

        Example::

            c.schedule(7, in_=1.5, payload=b"hi")
            c.schedule(8, in_=timedelta(minutes=1), every=60)
            c.schedule(9, at=datetime(2026, 12, 24, 18, 0,
                                      tzinfo=ZoneInfo("Europe/Berlin")))
            c.schedule(10, calendar="Mon..Fri 09:00 Europe/Berlin",
                       jitter=300, jitter_fixed=True)
            c.schedule(11, in_=1800, clock="boottime")
        """
        limit = self.hello.limits.max_payload_bytes if self.hello else None
        result: Scheduled = self._call(_core.schedule_req(
            key, in_, at_monotonic_ns, every, payload, replace, limit,
            leeway, at, calendar, jitter, jitter_fixed, misfire_grace,
            clock))
        return result

    def cancel(self, key: int) -> bool:
        """Disarm timer `key`: True if it was pending (no fire for it
        follows), False if it was not (never scheduled, already fired, or
        cancelled)."""
        return bool(self._call(_core.cancel_req(key)))

    def stats(self) -> Any:
        """The daemon's counters: a ``StatsReply`` message (``.clients``,
        ``.oneshot.pending``, ``.in_flight``, ... as in
        proto/bitwheel.proto; root also gets ``.metrics``, with the
        ``.dead_lettered``, ``.released``, ``.touched`` and ``.kicked``
        counters and acknowledged fires by their deliveries)."""
        return self._call(_core.stats_req())

    def list_sessions(self, owner_uid: int | None = None,
                      limit: int | None = None) -> _core.Listing:
        """The sessions this client may see (root: every uid's, named and
        anonymous; anyone else: its own uid's), or only `owner_uid`'s
        (another uid's is :class:`PermissionDeniedError` unless root): a
        :class:`Listing` of ``SessionInfo`` messages (``.name``,
        ``.owner_uid``, ``.timers``, ``.queued``, ``.in_flight``,
        ``.consumers``, ``.producers``, ``.idle_ns``, ``.expires_in_ns``,
        ``.pid``; named sessions' ``.policy``, ``.dead_letters`` held for
        another session, ``.delayed`` released fires waiting out their
        delay, ``.dead_lettered`` sent to its dead-letter session), at
        most `limit` of them, fetched page by page."""
        return self._list(_core.Pager(None, owner_uid, limit))

    def list_timers(self, session: str | bytes, owner_uid: int | None = None,
                    limit: int | None = None) -> _core.Listing:
        """The pending timers of the named session (in `owner_uid`'s
        namespace, root only, else the caller's): a :class:`Listing` of
        ``TimerInfo`` messages (``.key``, ``.deadline_ns``, ``.period_ns``,
        ``.payload_bytes``, ``.has_payload``, ``.lane``, ...), at most
        `limit` of them.  :class:`UnknownSessionError` when there is no
        such session."""
        return self._list(_core.Pager(session, owner_uid, limit))

    def _list(self, pager: _core.Pager) -> _core.Listing:
        while pager.take(self._call(_core.page_req(pager))):
            pass
        return pager.listing

    def calendar(self, spec: str, iterations: int = 1,
                 base: datetime.datetime | None = None
                 ) -> _core.CalendarEvents:
        """How the daemon reads the systemd.time(7) calendar event `spec`
        ("Mon..Fri 09:00 Europe/Berlin", "*:0/15", "daily"), as
        ``systemd-analyze calendar`` shows it: a :class:`CalendarEvents`
        with its normalized form and its next `iterations` elapses (1 to
        1000) after `base` (an aware datetime; None: the daemon's now),
        as aware UTC datetimes.  A spec without a zone is in the
        daemon's local zone.  :class:`BadCalendarError` when the daemon
        refuses the spec (its message says why); ValueError or TypeError,
        with nothing sent, for arguments outside those bounds."""
        return cast(_core.CalendarEvents,
                    self._call(_core.calendar_req(spec, iterations, base)))

    # ---- fires -------------------------------------------------------------

    def next_fire(self, timeout: Duration | None = None) -> Fire | None:
        """The next fire, waiting at most `timeout` (None: as long as it
        takes); None when the wait ran out.  A daemon restart meanwhile is
        ridden through within the wait."""
        self._need_consumer()
        limit = None if timeout is None else _core.seconds(timeout,
                                                           "timeout", 0)
        deadline = None if limit is None else time.monotonic() + limit
        while not self._fires:
            if self._sock is None:
                if not self._revive(deadline):
                    return None
                continue   # fires may have come with the HelloReply
            try:
                if not self._pump(deadline) and deadline is not None and \
                        time.monotonic() >= deadline:
                    return None
            except BitwheelError as e:
                self._unless_riding(e)
        return self._fires.popleft()

    def fires(self, timeout: Duration | None = None) -> Iterator[Fire]:
        """Iterate over fires as they come; with `timeout`, the iteration
        ends once no fire came for that long.

        Example::

            for fire in c.fires():
                handle(fire.key, fire.payload)
                fire.ack()
        """
        while True:
            f = self.next_fire(timeout)
            if f is None:
                return
            yield f

    def ack(self, fire: Fire, *, cumulative: bool = False,
            wait: bool = False) -> int | None:
        """Acknowledge `fire` (and with ``cumulative=True`` every fire
        received before it on this connection): the daemon forgets it and
        never delivers it again.

        Without `wait`, the Ack is sent and nothing comes back (None); with
        it, returns once the daemon holds the acknowledgement (as durably
        as its --fsync makes it) the number of fires it completed.  On an
        auto-ack consumer, fires are done already: returns 0 (None without
        `wait`) and sends nothing.

        A fire that came on an earlier connection (the daemon restarted, or
        :meth:`reconnect`) is delivered again, redelivered, on the new one;
        its delivery number means nothing there, so acknowledging it sends
        nothing and returns 0 (None without `wait`).  So does an Ack whose
        connection the daemon closed before it ran; one that may have run
        (EOF without SHUTTING_DOWN) raises :class:`UnknownOutcome`.

        Raises:
            StaleFire: the fire came on an earlier connection, and the
                client does not reconnect by itself (``reconnect=False``)
                or is closed.
            RoleError: this connection is a producer.
        """
        self._need_consumer()
        if self._stale(fire) or not self._opts.manual_ack:
            return 0 if wait else None
        if not wait:
            try:
                self._send(_core.ack_frame(fire.delivery, cumulative))
            except BitwheelError as e:
                self._unless_riding(e)
            return None
        acked: int = self._call(_core.ack_req(fire, cumulative))
        return acked

    def release(self, fire: Fire, delay: Duration | None = None, *,
                backoff: ReleaseBackoff | bool | None = None) -> Released:
        """Give `fire` back because its handler failed: in one step it
        leaves this consumer and waits out `delay` (seconds or a
        timedelta; None: no wait), or a delay that `backoff` draws from
        its ``deliveries`` (a :class:`~bitwheel.ReleaseBackoff`, or True
        for the defaults: about 1 s, 2 s, 4 s, ... up to 5 minutes), then
        joins its session's queue at the tail, to be handed out again,
        ``deliveries`` one more.  If its deliveries reached the session's
        ``max_deliveries`` it goes to the dead-letter session instead.
        A delay is at most the daemon's ``limits.max_release_delay_ns``
        (7 days; a backoff is cut to it, an explicit delay past it is
        :class:`BadRequestError`, not sent).

        Returns a :class:`~bitwheel.Released` (``released``,
        ``dead_lettered``, ``deliveries``, ``ready_ns``) once the daemon
        holds it (journaled, for a named session).  A fire that is not in
        flight to this connection (acknowledged or taken back already, or
        come on an earlier connection) is not released: ``released`` is
        False, and with reconnect on, one from an earlier connection
        sends nothing (the daemon delivers it again).  On an auto-ack
        consumer fires are done already: sends nothing, released False.

        Raises:
            StaleFire: the fire came on an earlier connection, and the
                client does not reconnect by itself or is closed.
            UnknownOutcome: the connection ended, without SHUTTING_DOWN,
                after the Release was written (never sent again).
            RoleError: this connection is a producer.
        """
        self._need_consumer()
        req = _core.release_req(fire, delay, backoff, self._max_release_ns)
        if self._stale(fire) or not self._opts.manual_ack:
            return cast(Released, req.instead)
        released: Released = self._call(req)
        return released

    def touch(self, fire: Fire, timeout: Duration | None = None) -> Touched:
        """Ask for more time for `fire`: its ack deadline becomes now +
        `timeout` (None: the connection's ``ack_timeout``), so a handler
        slower than the ack timeout keeps its fire by touching it now and
        then (a heartbeat).  A fire may be held at most the daemon's
        ``limits.max_hold_ns`` (12 h) after its hand-out.

        Returns a :class:`~bitwheel.Touched` (``touched``,
        ``ack_deadline_ns``: None when the connection has no ack timeout,
        so that nothing takes its fires back for their time).  A fire not
        in flight to this connection, or from an earlier one, or on an
        auto-ack consumer is not touched (False, as for :meth:`release`).

        Raises:
            HoldLimitError: the new deadline would pass the hold limit
                (the fire keeps its deadline; ack or release it).
            StaleFire: as for :meth:`ack`.
            RoleError: this connection is a producer.
        """
        self._need_consumer()
        req = _core.touch_req(fire, timeout)
        if self._stale(fire) or not self._opts.manual_ack:
            return cast(Touched, req.instead)
        touched: Touched = self._call(req)
        return touched

    # ---- the session's delivery policy -------------------------------------

    def set_policy(self, max_deliveries: int | None = None,
                   dead_letter: str | bytes | None = None) -> Any:
        """Set the named session's delivery policy (any member may,
        producer or consumer; journaled with the session): a fire handed
        out `max_deliveries` times without an ack (0: unlimited; the
        daemon's default is ``limits.default_max_deliveries``, 20) goes to
        the session `dead_letter` (``""``: the default, this session's
        name + ``".dead"``, same owner) instead of coming back.  None
        keeps what the session has; with neither, this reads the policy.

        Returns the policy in force: a ``Policy`` message
        (``.max_deliveries``, ``.dead_letter``, ``.explicit``), as
        ``hello.policy`` and ``SessionInfo.policy`` show it.

        Raises:
            BadRequestError: an anonymous session (it has no policy), or
                a bad dead-letter name.
        """
        return self._call(_core.set_policy_req(max_deliveries, dead_letter))

    def kick(self, key: int | None = None,
             limit: int | None = None) -> Kicked:
        """Move fires that this named session dead-lettered back from its
        dead-letter session to its queue's tail, their ``deliveries``
        counted from 0 again: every one (or those of `key`), or at most
        `limit`.  Takes as many requests as it needs, each moving at most
        the daemon's ``limits.max_kick`` (10,000).  Only queued dead
        letters move: one in flight to a consumer of the dead-letter
        session stays with it.

        Returns a :class:`~bitwheel.Kicked` (``kicked``, ``more``: some
        may be left, past `limit` or behind ``max_kick`` dead letters of
        other keys).  :class:`BadRequestError` on an anonymous session.
        """
        kicks = _core.Kicks(key, limit)
        while (req := kicks.request()) is not None:
            kicks.take(self._call(req))
        return kicks.result


__all__ = ["Client"]
