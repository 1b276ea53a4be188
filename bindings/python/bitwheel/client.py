"""The blocking client: one socket, one request at a time.

Each request is sent and its reply awaited (at most the client's timeout);
fires that arrive meanwhile are queued in the client, in arrival order,
and handed out by :meth:`Client.next_fire` and :meth:`Client.fires`.  The
queue is bounded by the window for a manual-ack consumer (the daemon sends
no more), otherwise only by memory.

Data: the socket, a :class:`~bitwheel._core.FrameReader`, a deque of
fires, and the replies of the one request awaited.  Costs: a request is one
``sendall`` and as many ``recv`` as its reply takes; a fire is decoded
once.
"""

from __future__ import annotations

import socket as _socket
import time
from collections import deque
from typing import Any, Iterator

from . import _core
from ._core import Duration, Fire, Scheduled
from ._errors import (ConnectionClosed, ConnectionRefused, ProtocolError,
                      StaleFire, Timeout)


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

    Raises:
        ConnectionRefused: nobody listens on the socket.
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
                 coalesce: bool = False) -> None:
        super().__init__(socket, session, consume, window, timeout,
                         ack_timeout, auto_ack, owner_uid, coalesce)
        self._sock: _socket.socket | None = None
        self._fires: deque[Fire] = deque()
        self._awaited: int | None = None
        self._reply: Any = None
        self._gone: BaseException | None = None
        self._connect()

    # ---- connection ------------------------------------------------------

    def _connect(self) -> None:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            sock.settimeout(self._timeout)
            try:
                sock.connect(self.path)
            except OSError as e:
                raise ConnectionRefused(
                    f"cannot connect to {self.path}: "
                    f"{e.strerror or e}") from e
            _core.check_peer(sock, self.path)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self._gone = None
        self._reader = _core.FrameReader()
        self._connection += 1
        rid = self._rid()
        try:
            self.hello = self._request(
                rid, _core.hello_request(rid, self._opts), "hello_reply")
        except BaseException as e:
            self._drop(e)
            raise
        self._reader.max_frame = self.hello.limits.max_frame_bytes or \
            _core.DEFAULT_MAX_FRAME

    def reconnect(self) -> None:
        """Close the connection if open, dial the same socket and attach to
        the same session, with the same role, window, ack timeout, ack mode
        and owner.

        A manual-ack consumer's fires still queued in the client are
        discarded (the daemon delivers them again, marked redelivered),
        and fires handed out before can no longer be acknowledged
        (:class:`StaleFire`).  Outstanding requests may or may not have
        taken effect: re-schedule with ``replace=True``.
        """
        self._drop(ConnectionClosed("closed by reconnect()"))
        self._connect()

    def close(self) -> None:
        """Close the connection.  Unacknowledged fires go back to the
        session's queue.  Closing twice is harmless."""
        self._drop(ConnectionClosed("closed by close()"))

    def _drop(self, why: BaseException) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._gone is None:
            self._gone = why
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
            self._drop(err)
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
            self._drop(err)
            raise err from e
        if not data:
            err = ConnectionClosed("the daemon closed the connection")
            self._drop(err)
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

    def _request(self, rid: int, data: bytes, want: str) -> Any:
        self._send(data)
        self._awaited, self._reply = rid, None
        deadline = time.monotonic() + self._timeout
        try:
            while self._reply is None:
                if not self._pump(deadline) and time.monotonic() >= deadline:
                    raise Timeout(f"no reply from the daemon within "
                                  f"{self._timeout} s")
            return _core.reply_body(self._reply, want)
        finally:
            self._awaited, self._reply = None, None

    # ---- requests ----------------------------------------------------------

    def schedule(self, key: int, in_: Duration | None = None, *,
                 at_monotonic_ns: int | None = None,
                 every: Duration | None = None,
                 payload: bytes | None = None,
                 replace: bool = False,
                 leeway: Duration | None = None) -> Scheduled:
        """Arm timer `key` (any int from 0 to 2**64 - 1, unique among the
        session's pending timers).

        Args:
            in_: fire this long from now (seconds or a timedelta) ...
            at_monotonic_ns: ... or at this CLOCK_MONOTONIC time
                (:func:`time.monotonic_ns`); a past time fires at once.
            every: periodic: re-armed this long after each deadline until
                cancelled.
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
        """
        rid = self._rid()
        limit = self.hello.limits.max_payload_bytes if self.hello else None
        data = _core.schedule_request(rid, key, in_, at_monotonic_ns, every,
                                      payload, replace, limit, leeway)
        r = self._request(rid, data, "schedule_reply")
        return Scheduled(r.deadline_ns, r.replaced)

    def cancel(self, key: int) -> bool:
        """Disarm timer `key`: True if it was pending (no fire for it
        follows), False if it was not (never scheduled, already fired, or
        cancelled)."""
        rid = self._rid()
        return bool(self._request(rid, _core.cancel_request(rid, key),
                                  "cancel_reply").pending)

    def stats(self) -> Any:
        """The daemon's counters: a ``StatsReply`` message (``.clients``,
        ``.oneshot.pending``, ``.in_flight``, ... as in
        proto/bitwheel.proto)."""
        rid = self._rid()
        return self._request(rid, _core.stats_request(rid), "stats_reply")

    def list_sessions(self, owner_uid: int | None = None,
                      limit: int | None = None) -> _core.Listing:
        """The sessions this client may see (root: every uid's, named and
        anonymous; anyone else: its own uid's), or only `owner_uid`'s
        (another uid's is :class:`PermissionDeniedError` unless root): a
        :class:`Listing` of ``SessionInfo`` messages (``.name``,
        ``.owner_uid``, ``.timers``, ``.queued``, ``.in_flight``,
        ``.consumers``, ``.producers``, ``.idle_ns``, ``.expires_in_ns``,
        ``.pid``), at most `limit` of them, fetched page by page."""
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
        while True:
            rid = self._rid()
            if not pager.take(self._request(rid, pager.request(rid),
                                            pager.want)):
                return pager.listing

    # ---- fires -------------------------------------------------------------

    def next_fire(self, timeout: Duration | None = None) -> Fire | None:
        """The next fire, waiting at most `timeout` (None: as long as it
        takes); None when the wait ran out."""
        self._need_consumer()
        limit = None if timeout is None else _core.seconds(timeout,
                                                           "timeout", 0)
        deadline = None if limit is None else time.monotonic() + limit
        while not self._fires:
            if not self._pump(deadline) and deadline is not None and \
                    time.monotonic() >= deadline:
                return None
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

        Raises:
            StaleFire: the fire came on an earlier connection.
            RoleError: this connection is a producer.
        """
        self._need_consumer()
        if fire.connection != self._connection or self._sock is None:
            raise StaleFire(f"fire {fire.key} (delivery {fire.delivery}) "
                            "came on an earlier connection; it will be "
                            "delivered again")
        if not self._opts.manual_ack:
            return 0 if wait else None
        if not wait:
            self._send(_core.ack_request(None, fire.delivery, cumulative))
            return None
        rid = self._rid()
        return int(self._request(rid, _core.ack_request(rid, fire.delivery,
                                                        cumulative),
                                 "ack_reply").acked)


__all__ = ["Client"]
