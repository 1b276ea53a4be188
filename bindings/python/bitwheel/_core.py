"""What the blocking and the asyncio client share, with no I/O of its own.

The protocol is proto/PROTOCOL.md: frames of a 4-byte big-endian length and
one serialized ``bitwheel.v1.Envelope``, messages from the module protoc
generated from proto/bitwheel.proto (``bitwheel_pb2``).  This module builds
the requests (arguments checked and converted to nanoseconds here, once for
both clients), splits the byte stream into envelopes (:class:`FrameReader`),
turns replies into results or exceptions, and checks who listens on the
socket (:func:`check_peer`).

Riding through a daemon restart is decided here too, for both clients
(:class:`ClientBase`): which ends of a connection are restarts (the daemon's
SHUTTING_DOWN, EOF, a broken socket), the backoff of the attempts to attach
again (:class:`Backoff`), and what becomes of each request that got no
reply (:meth:`ClientBase._settle`): a request that cannot have run is sent
again; one that may have run is sent again only if repeating it is
harmless, else it fails with :class:`UnknownOutcome`.  A request cannot
have run when it was never written whole, or when the connection ended
with the daemon's SHUTTING_DOWN: the daemon answers every request it read,
in order, and that error is its last frame (PROTOCOL.md section 5, rules 2
and 8), so a request it left unanswered was never read.  The clients only
do the I/O: the blocking one reconnects within the call that needs the
connection, the asyncio one in a task of its own.

Costs: a request is one protobuf message packed into one bytes object
(:class:`Req`, kept until its reply so that it can be sent again); the
reader keeps at most one partial frame (up to the daemon's
``max_frame_bytes``) and decodes each frame once.
"""

from __future__ import annotations

import datetime
import errno
import grp
import os
import pwd
import random
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, NoReturn, TypeVar, Union

from . import bitwheel_pb2 as pb
from ._codes import SERVER_ERRORS
from ._errors import (ConnectionClosed, ConnectionRefused, NotPermitted,
                      ProtocolError, ReconnectFailed, RoleError, ServerError,
                      SessionLost, StaleFire, Timeout, UnknownOutcome,
                      UntrustedDaemon)

#: Where bitwheeld listens unless ``$BITWHEEL_SOCKET`` says otherwise.
DEFAULT_SOCKET = "/run/bitwheel/bitwheeld.sock"
#: The environment variable :func:`default_socket` reads.
SOCKET_ENV = "BITWHEEL_SOCKET"
#: The environment variable naming the user bitwheeld runs as.
DAEMON_USER_ENV = "BITWHEEL_DAEMON_USER"
#: The daemon user when ``$BITWHEEL_DAEMON_USER`` is unset or empty.
DEFAULT_DAEMON_USER = "bitwheeld"
#: The clients' reply timeout, in seconds, when none is given.
DEFAULT_TIMEOUT = 30.0
#: The protocol version both clients speak.
PROTOCOL_VERSION: int = pb.PROTOCOL_VERSION
#: The frame size the reader accepts before HelloReply states the daemon's.
DEFAULT_MAX_FRAME = 65536

MAX_U64 = (1 << 64) - 1
_HEADER = struct.Struct(">I")
_PEERCRED = struct.Struct("3i")

#: A duration: seconds (int or float) or a :class:`datetime.timedelta`.
Duration = Union[int, float, datetime.timedelta]

if TYPE_CHECKING:
    Envelope = pb.Envelope


def default_socket() -> str:
    """``$BITWHEEL_SOCKET`` when set and not empty, else
    :data:`DEFAULT_SOCKET`, as the C library does."""
    return os.environ.get(SOCKET_ENV) or DEFAULT_SOCKET


def now_ns() -> int:
    """CLOCK_MONOTONIC now, in nanoseconds: the clock of absolute deadlines
    (the same as :func:`time.monotonic_ns` on Linux)."""
    return time.monotonic_ns()


def duration_ns(value: Duration, what: str) -> int:
    """A duration in whole nanoseconds (fractions rounded), or ValueError
    when it is negative, not a number, or beyond 2**64 - 1 ns."""
    if isinstance(value, datetime.timedelta):
        ns = (value // datetime.timedelta(microseconds=1)) * 1000
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{what}: {value!r} is not a duration")
        ns = round(value * 1_000_000_000) if isinstance(value, float) \
            else value * 1_000_000_000
    else:
        raise TypeError(f"{what}: seconds (int, float) or a timedelta, "
                        f"not {type(value).__name__}")
    if ns < 0:
        raise ValueError(f"{what}: {value!r} is negative")
    if ns > MAX_U64:
        raise ValueError(f"{what}: {value!r} is beyond 2**64 - 1 ns")
    return ns


def seconds(value: Duration | None, what: str, default: float) -> float:
    """A timeout in float seconds; None means `default`."""
    if value is None:
        return default
    return duration_ns(value, what) / 1e9


def _u64(value: int, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what}: an int, not {type(value).__name__}")
    if not 0 <= value <= MAX_U64:
        raise ValueError(f"{what}: {value} is outside 0 to 2**64 - 1")
    return value


@dataclass(frozen=True)
class Options:
    """What a client says in Hello, kept for reconnect()."""

    session: bytes | None
    consume: bool
    window: int | None
    ack_timeout_ns: int | None
    auto_ack: bool | None
    owner_uid: int | None
    coalesce: bool = False

    @classmethod
    def make(cls, session: str | bytes | None, consume: bool,
             window: int | None, ack_timeout: Duration | None,
             auto_ack: bool | None, owner_uid: int | None,
             coalesce: bool = False) -> "Options":
        if isinstance(session, str):
            session = session.encode()
        if session is None and owner_uid is not None:
            raise ValueError("owner_uid needs a session name")
        if session is None and not consume and (
                window is not None or ack_timeout is not None
                or auto_ack is not None or coalesce):
            consume = True   # the anonymous connection is its own consumer
        if not consume and (window is not None or ack_timeout is not None
                            or auto_ack is not None or coalesce):
            raise ValueError("window, ack_timeout, auto_ack and coalesce "
                             "are for consumers: pass consume=True")
        if window is not None and not 1 <= _u64(window, "window") < 1 << 32:
            raise ValueError(f"window: {window} is outside 1 to 2**32 - 1")
        if owner_uid is not None and _u64(owner_uid, "owner_uid") >= 1 << 32:
            raise ValueError(f"owner_uid: {owner_uid} is not a uid")
        ack_ns = None if ack_timeout is None else duration_ns(
            ack_timeout, "ack_timeout")
        return cls(session, consume, window, ack_ns, auto_ack, owner_uid,
                   bool(coalesce))

    @property
    def anonymous(self) -> bool:
        return self.session is None

    @property
    def receives_fires(self) -> bool:
        """Anonymous connections consume their own timers' fires."""
        return self.consume or self.session is None

    @property
    def manual_ack(self) -> bool:
        """Whether fires wait for an Ack (the default of named consumers)."""
        if not self.receives_fires:
            return False
        if self.auto_ack is not None:
            return not self.auto_ack
        return self.session is not None


def _positive_seconds(obj: object, cls: str, **values: Duration) -> None:
    """Set each of `values` on the frozen `obj` as float seconds, or
    ValueError (TypeError) for one that is not a duration above 0."""
    for name, value in values.items():
        sec = seconds(value, name, 0)
        if sec <= 0:
            raise ValueError(f"{cls}.{name}: must be greater than 0")
        object.__setattr__(obj, name, sec)


@dataclass(frozen=True, init=False)
class Backoff:
    """How a client attaches again to its named session after the daemon
    closed the connection (pass it as ``reconnect=``; ``reconnect=True``
    is ``Backoff()``).

    The first attempt comes `initial` after the client needs the
    connection again, each later one after twice the wait before, at most
    `max_delay`; each wait is drawn between half and all of that (jitter,
    so that a host's clients do not all dial at once).  An attempt is
    bounded by the client's ``timeout`` and by the time left.  Attempts end
    with :class:`ReconnectFailed` `give_up` after the first wait began; a
    Hello refused for good (anything but SHUTTING_DOWN or TOO_MANY_CLIENTS:
    ``OverBudgetError``, ``PermissionDeniedError``, ...) ends them at once
    with that error.  Each is seconds (int or float) or a timedelta,
    greater than 0; `max_delay` at least `initial`.

    The defaults ride through a restart by systemd or a package upgrade
    (the daemon takes up to 5 s to stop, then starts in well under a
    second): attempts after about 50, 100, 200, ... ms, then every 2 s or
    so, for a minute.
    """

    #: Seconds, as floats (the arguments' durations converted).
    initial: float
    max_delay: float
    give_up: float

    def __init__(self, initial: Duration = 0.05, max_delay: Duration = 2.0,
                 give_up: Duration = 60.0) -> None:
        _positive_seconds(self, "Backoff", initial=initial,
                          max_delay=max_delay, give_up=give_up)
        if self.max_delay < self.initial:
            raise ValueError("Backoff.max_delay: less than initial")


@dataclass(frozen=True, init=False)
class ReleaseBackoff:
    """How long :meth:`Fire.release` with ``backoff=`` has a failed fire
    wait before it is handed out again, from how many times it has been
    handed out (PROTOCOL.md, Release): ``min(cap, base * 2**(deliveries - 1))``
    seconds, scaled by a random factor between 0.5 and 1 (jitter, so that
    fires that failed together do not come back together), and at most
    the daemon's ``limits.max_release_delay_ns``.  `base` and `cap` are
    seconds (int or float) or a timedelta, greater than 0; `cap` at least
    `base`.

    The defaults wait about 1 s after the first hand-out, then 2, 4, 8 s,
    ..., 5 minutes from the 10th on: a downstream down for a few seconds
    is retried within them, one down for longer every few minutes, and
    with the daemon's default ``max_deliveries`` (20) a fire that keeps
    failing is dead-lettered half an hour to an hour after its first
    failure (19 waits of 3,511 s together, jitter halving them at most).
    """

    #: Seconds, as floats (the arguments' durations converted).
    base: float
    cap: float

    def __init__(self, base: Duration = 1.0, cap: Duration = 300.0) -> None:
        _positive_seconds(self, "ReleaseBackoff", base=base, cap=cap)
        if self.cap < self.base:
            raise ValueError("ReleaseBackoff.cap: less than base")

    def delay(self, deliveries: int,
              rng: random.Random | None = None) -> float:
        """The delay in seconds for a fire handed out `deliveries` times
        (0, from a daemon that does not count, reads as 1); `rng` draws
        the jitter (default: the :mod:`random` module's)."""
        # 2.0 ** 1024 overflows; the cap is reached long before.
        grown = self.base * 2.0 ** min(max(deliveries, 1) - 1, 1000)
        return min(self.cap, grown) * (rng or random).uniform(0.5, 1.0)


@dataclass
class Outage:
    """A named session's connection that the daemon ended (`clean`: with
    SHUTTING_DOWN, so no request without a reply ran), while the client
    attaches again: since when (`start`, set by the first wait), the last
    wait before jitter, when the next attempt is due (time.monotonic()),
    the attempts and the last one's error.  The schedule moves on only
    when an attempt fails, so that waits cut short (a next_fire timeout)
    lose nothing."""

    clean: bool
    why: BaseException
    start: float | None = None
    delay: float = 0.0
    next_at: float = 0.0
    attempts: int = 0
    last: BaseException | None = None


#: A request written on this many connections that each ended without
#: SHUTTING_DOWN (a crash, a kill) before its reply is not sent again, even
#: if repeating it is harmless: it may be what brings the daemon down.
MAX_CRASHES = 3

#: Hello refusals that a restarting daemon gives for a while: another
#: attempt may succeed.
_PASSING = (pb.SHUTTING_DOWN, pb.TOO_MANY_CLIENTS)


class ClientBase:
    """What the blocking and the asyncio client keep and answer alike: the
    socket path, the Hello options (for reconnect), the reply timeout, the
    request ids, the frame reader, the last HelloReply, and how a daemon
    restart is ridden through (the policy, the outage under way, and the
    fate of each request left without a reply)."""

    def __init__(self, socket: str | None, session: str | bytes | None,
                 consume: bool, window: int | None,
                 timeout: Duration | None, ack_timeout: Duration | None,
                 auto_ack: bool | None, owner_uid: int | None,
                 coalesce: bool = False,
                 reconnect: bool | Backoff = True) -> None:
        self.path = socket or default_socket()
        self._opts = Options.make(session, consume, window, ack_timeout,
                                  auto_ack, owner_uid, coalesce)
        self._timeout = seconds(timeout, "timeout", DEFAULT_TIMEOUT)
        if isinstance(reconnect, Backoff):
            self._backoff: Backoff | None = reconnect
        elif isinstance(reconnect, bool):
            self._backoff = Backoff() if reconnect else None
        else:
            raise TypeError("reconnect: a bool or a bitwheel.Backoff, not "
                            f"{type(reconnect).__name__}")
        self._reader = FrameReader()
        self._next_id = 1
        self._connection = 0
        self.hello: Any = None
        self._gone: BaseException | None = ConnectionClosed(
            "never connected")
        self._outage: Outage | None = None
        self._dialing = False
        #: How many times the client attached again by itself after the
        #: daemon closed the connection.
        self.reconnects = 0

    @property
    def resumed(self) -> bool:
        """Whether the named session existed before this connection."""
        return bool(self.hello.resumed)

    @property
    def limits(self) -> Any:
        """The daemon's limits (HelloReply.limits: max_payload_bytes, ...,
        max_release_delay_ns, max_hold_ns, default_max_deliveries,
        max_kick)."""
        return self.hello.limits

    @property
    def _max_release_ns(self) -> int:
        """The daemon's longest Release delay (0: it did not say)."""
        return int(self.hello.limits.max_release_delay_ns) if self.hello \
            else 0

    def _rid(self) -> int:
        rid = self._next_id
        self._next_id += 1
        return rid

    def _need_consumer(self) -> None:
        if not self._opts.receives_fires:
            raise RoleError("a producer receives no fires: connect with "
                            "consume=True")

    @property
    def connected(self) -> bool:
        """Whether the connection is open (during a reconnect: False)."""
        raise NotImplementedError

    # ---- a connection's start and end ----------------------------------

    def _begin(self) -> None:
        """A socket is open: a new connection, before its Hello."""
        self._gone = None
        self._reader = FrameReader()
        self._connection += 1

    def _hello_done(self, hello: Any) -> None:
        self.hello = hello
        self._reader.max_frame = self.hello.limits.max_frame_bytes or \
            DEFAULT_MAX_FRAME

    def _stopping(self, env: Any) -> bool:
        """Whether the error frame `env` means the daemon is stopping and
        ends the connection cleanly: a connection-level SHUTTING_DOWN or,
        with reconnect on, one answering a request (the connection-level
        one follows; waiting for it would gain nothing)."""
        return env.error.code == pb.SHUTTING_DOWN and (
            not env.HasField("request_id") or self._backoff is not None)

    def _lose(self, why: BaseException, clean: bool | None) -> None:
        """The connection ended because of `why`.  `clean`: True when the
        daemon said SHUTTING_DOWN, False for EOF or a broken socket, None
        for anything that is no restart (close(), a protocol error, another
        refusal).  A restart of a named session starts an outage that the
        client rides through; an anonymous session's ends it for good
        (:class:`SessionLost`)."""
        if self._gone is None:
            self._gone = why
        if clean is None or self._backoff is None or self._dialing or \
                self._outage is not None:
            return
        if self._opts.anonymous:
            lost = SessionLost(
                f"the anonymous session ended with its connection ({why}): "
                "its timers are gone and it cannot be resumed (a named "
                "session rides through daemon restarts; reconnect() starts "
                "a new anonymous one)")
            lost.__cause__ = why
            self._gone = lost
            return
        self._outage = Outage(clean, why)

    def _forget_outage(self) -> None:
        """close() or reconnect() by the caller: no more riding."""
        if self._outage is not None:
            self._outage = None
            self._gone = None

    # ---- riding through -------------------------------------------------

    def _unless_riding(self, err: BaseException) -> None:
        """Raise `err` (an anonymous session's SessionLost instead) unless
        the connection ended in a restart that the client rides through."""
        if self.connected:
            raise err
        if self._outage is not None:
            return
        if isinstance(self._gone, SessionLost):
            raise self._gone
        raise err

    def _settle(self, req: "Req", written: bool, err: BaseException) -> bool:
        """A request got `err` instead of its reply.  True: send it again
        once attached again; False: it did not run and is not sent again,
        its result is ``req.instead``; otherwise raises (`err` itself when
        the client does not ride through, :class:`UnknownOutcome` when the
        request may have run and repeating it is not harmless)."""
        self._unless_riding(err)
        assert self._outage is not None
        if not written or self._outage.clean:
            return req.resend
        req.crashes += 1
        if req.safe and req.crashes < MAX_CRASHES:
            return req.resend
        raise UnknownOutcome(req.what, req.key, self._outage.why,
                             req.crashes) from self._outage.why

    def _stale(self, fire: "Fire") -> bool:
        """Whether `fire`'s delivery number means nothing now (it came on an
        earlier connection, or on one that ended): the daemon delivers it
        again, and an ack of it must never be sent.  With reconnect on,
        acknowledging it does nothing; otherwise, or once the client is
        closed, StaleFire."""
        if fire.connection == self._connection and self.connected and \
                self._outage is None:
            return False
        if self._backoff is None or (not self.connected and
                                     self._outage is None):
            raise StaleFire(f"fire {fire.key} (delivery {fire.delivery}) "
                            "came on an earlier connection; it will be "
                            "delivered again")
        return True

    def _dial_wait(self) -> tuple[float, float]:
        """Before the next attempt to attach again: how long to wait and
        the attempt's time limit; ReconnectFailed once the give-up is
        past."""
        o, b = self._outage, self._backoff
        assert o is not None and b is not None
        now = time.monotonic()
        if o.start is None:
            o.start, o.delay = now, b.initial
            o.next_at = now + o.delay * random.uniform(0.5, 1.0)
        end = o.start + b.give_up
        if now >= end:
            self._give_up(ReconnectFailed(
                f"gave up reconnecting to {self.path} after "
                f"{now - o.start:.1f} s and {o.attempts} attempts (the "
                f"daemon had closed the connection: {o.why}); last: "
                f"{o.last}", o.attempts, now - o.start), o.last)
        at = min(o.next_at, end)
        return max(0.0, at - now), min(self._timeout,
                                       max(end - at, b.initial))

    def _dial_failed(self, err: BaseException) -> None:
        """An attempt failed with `err`: another comes, after twice the
        wait before, unless it is a lasting refusal, raised as it is."""
        o, b = self._outage, self._backoff
        assert o is not None and b is not None
        passing = isinstance(err, (ConnectionRefused, ConnectionClosed,
                                   Timeout)) or (
            isinstance(err, ServerError) and err.code in _PASSING)
        if not passing:
            self._give_up(err, None)
        o.attempts += 1
        o.last = err
        o.delay = min(o.delay * 2, b.max_delay)
        o.next_at = time.monotonic() + o.delay * random.uniform(0.5, 1.0)

    def _give_up(self, err: BaseException,
                 cause: BaseException | None) -> NoReturn:
        self._outage = None
        self._gone = err
        if cause is not None:
            raise err from cause
        raise err

    def _dial_done(self) -> None:
        self._outage = None
        self.reconnects += 1


def frame(env: Any) -> bytes:
    """One envelope as a frame: length header and body."""
    body: bytes = env.SerializeToString()
    return _HEADER.pack(len(body)) + body


class Req:
    """A request, kept until its reply so that it can be sent again on the
    next connection after a daemon restart.

    Attributes:
        env: its Envelope; ``request_id`` is set at each sending.
        result: the caller's value from the reply envelope (raises what an
            error reply says).
        what, key: the request's name and timer key, for UnknownOutcome.
        safe: sending it again is harmless whatever became of the first
            (Cancel, Schedule with replace, Stats, the listings).
        resend: False for a request naming a fire by its delivery number
            (Ack with reply, Release, Touch): never sent on another
            connection (the number means nothing there); when it did not
            run, or it is `safe` (a Touch: the connection's end took the
            fire back whatever it did), the call returns `instead`.
        pager: a listing's, which makes each page's envelope.
        crashes: the connections it was written on that ended without
            SHUTTING_DOWN before its reply (at most MAX_CRASHES).
    """

    __slots__ = ("env", "result", "what", "key", "safe", "resend",
                 "instead", "pager", "crashes")

    def __init__(self, env: Any, result: Callable[[Any], Any], what: str,
                 key: int | None = None, safe: bool = True,
                 resend: bool = True, instead: Any = None,
                 pager: "Pager | None" = None) -> None:
        self.env, self.result, self.what, self.key = env, result, what, key
        self.safe, self.resend, self.instead = safe, resend, instead
        self.pager = pager
        self.crashes = 0

    def frame(self, rid: int, connection: int) -> bytes:
        """The frame to send as request `rid` on `connection`."""
        if self.pager is not None:
            self.env = self.pager.request(connection)
        self.env.request_id = rid
        return frame(self.env)


def _body(want: str) -> Callable[[Any], Any]:
    return lambda env: reply_body(env, want)


def _scheduled(env: Any) -> "Scheduled":
    r = reply_body(env, "schedule_reply")
    return Scheduled(r.deadline_ns, r.replaced)


def _cancelled(env: Any) -> bool:
    return bool(reply_body(env, "cancel_reply").pending)


def _acked(env: Any) -> int:
    return int(reply_body(env, "ack_reply").acked)


def hello_req(o: Options) -> Req:
    env = pb.Envelope()
    h = env.hello
    h.protocol_version = PROTOCOL_VERSION
    if o.session is not None:
        h.session = o.session
    if o.consume:
        h.role = pb.CONSUMER
    if o.window is not None:
        h.window = o.window
    if o.ack_timeout_ns is not None:
        h.ack_timeout_ns = o.ack_timeout_ns
    if o.auto_ack is not None:
        h.auto_ack = o.auto_ack
    if o.owner_uid is not None:
        h.owner_uid = o.owner_uid
    if o.coalesce:
        h.coalesce = True
    return Req(env, _body("hello_reply"), "hello")


# Schedule.clock's names (PROTOCOL.md, "Clocks").
_CLOCKS = ("monotonic", "boottime")


def schedule_req(key: int, in_: Duration | None,
                 at_monotonic_ns: int | None, every: Duration | None,
                 payload: bytes | None, replace: bool,
                 max_payload: int | None,
                 leeway: Duration | None = None,
                 at: datetime.datetime | None = None,
                 calendar: str | None = None,
                 jitter: Duration | None = None,
                 jitter_fixed: bool = False,
                 misfire_grace: Duration | None = None,
                 clock: str | None = None) -> Req:
    """A Schedule; ValueError/TypeError for arguments the protocol cannot
    carry, PayloadTooLargeError for a payload over the daemon's limit
    (nothing is sent in either case).  Safe to repeat with `replace`
    only: a plain one that ran arms a second timer or fails with
    DUPLICATE_KEY."""
    env = pb.Envelope()
    s = env.schedule
    s.key = _u64(key, "key")
    if [in_, at_monotonic_ns, at, calendar].count(None) != 3:
        raise ValueError("schedule: give exactly one of in_, at, "
                         "at_monotonic_ns and calendar")
    if calendar is None and (jitter is not None or jitter_fixed or
                             misfire_grace is not None):
        raise ValueError("schedule: jitter, jitter_fixed and misfire_grace "
                         "are a calendar timer's")
    if clock is not None:
        if clock not in _CLOCKS:
            raise ValueError(f"clock: 'monotonic' or 'boottime', not {clock!r}")
        if calendar is not None or at is not None:
            raise ValueError("schedule: clock with at or calendar: those "
                             "count on the wall clock")
        # Absent for the default, so that an older daemon reads it too.
        if clock == "boottime":
            s.clock = pb.CLOCK_BOOTTIME
    if calendar is not None:
        if not isinstance(calendar, str):
            raise TypeError("calendar: a str, not "
                            f"{type(calendar).__name__}")
        if every is not None:
            raise ValueError("schedule: calendar with every: a calendar "
                             "timer recurs by its spec")
        s.calendar = calendar
        if jitter is not None:
            s.jitter_ns = duration_ns(jitter, "jitter")
        if jitter_fixed:
            s.jitter_fixed = True
        if misfire_grace is not None:
            s.misfire_grace_ns = duration_ns(misfire_grace, "misfire_grace")
    elif at is not None:
        if every is not None:
            raise ValueError("schedule: at with every: a wall-clock timer "
                             "is a oneshot (PROTOCOL.md, \"Clocks\")")
        s.realtime_ns = realtime_ns(at)
    elif in_ is not None:
        s.delay_ns = duration_ns(in_, "in_")
    elif at_monotonic_ns is not None:
        s.deadline_ns = _u64(at_monotonic_ns, "at_monotonic_ns")
    if every is not None:
        s.period_ns = duration_ns(every, "every")
    if payload is not None:
        if not isinstance(payload, (bytes, bytearray, memoryview)):
            raise TypeError("payload: bytes, not "
                            f"{type(payload).__name__} (encode text first)")
        payload = bytes(payload)
        if max_payload is not None and len(payload) > max_payload:
            code = pb.PAYLOAD_TOO_LARGE
            raise SERVER_ERRORS[code](
                code, f"payload of {len(payload)} bytes is over the "
                f"daemon's limit of {max_payload} (not sent)")
        s.payload = payload
    if replace:
        s.replace = True
    if leeway is not None:
        s.leeway_ns = duration_ns(leeway, "leeway")
    return Req(env, _scheduled, "schedule", key, safe=replace)


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def realtime_ns(at: datetime.datetime, what: str = "at") -> int:
    """An aware datetime as ns since the Unix epoch (CLOCK_REALTIME, UTC),
    exactly (integer arithmetic); ValueError for a naive one, which names
    no instant, or one not after the epoch.  `what` names the argument in
    the errors."""
    if not isinstance(at, datetime.datetime):
        raise TypeError(f"{what}: a datetime, not {type(at).__name__}")
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError(f"{what}: an aware datetime (with tzinfo, e.g. "
                         "ZoneInfo('Europe/Berlin') or timezone.utc); a "
                         "naive one names no instant")
    d = at - _EPOCH
    ns = (d.days * 86400 + d.seconds) * 1_000_000_000 + \
        d.microseconds * 1000
    if ns <= 0:
        raise ValueError(f"{what}: must be after the Unix epoch")
    return _u64(ns, what)


def utc_datetime(ns: int) -> datetime.datetime:
    """UTC ns since the epoch as an aware datetime (UTC), to the
    microsecond (a datetime's resolution; calendar elapses have no
    finer)."""
    return _EPOCH + datetime.timedelta(microseconds=ns // 1000)


def cancel_req(key: int) -> Req:
    env = pb.Envelope()
    env.cancel.key = _u64(key, "key")
    return Req(env, _cancelled, "cancel", key)


def stats_req() -> Req:
    env = pb.Envelope()
    env.stats.SetInParent()
    return Req(env, _body("stats_reply"), "stats")


#: The most elapses one :meth:`Client.calendar` asks for (the daemon's
#: limit, PROTOCOL.md "Calendar").
CALENDAR_ITERATIONS_MAX = 1000


@dataclass(frozen=True)
class CalendarEvents:
    """How the daemon reads a calendar event (:meth:`Client.calendar`),
    as ``systemd-analyze calendar`` shows it."""

    #: The spec in systemd's normalized form, e.g.
    #: ``"Mon..Fri *-*-* 09:00:00 Europe/Berlin"``.
    normalized: str
    #: The next elapses, aware datetimes in UTC, ascending (turn them into
    #: the spec's zone with ``.astimezone(ZoneInfo(zone))``).  Fewer than
    #: asked when the spec has no more before 2200, or the search gave up.
    elapses: list[datetime.datetime]
    #: The same as UTC ns since the epoch, exactly as the daemon sent them.
    elapses_ns: list[int]
    #: The zone the spec names (``"UTC"``, ``"Europe/Berlin"``); None: it
    #: names none, and its times are in the daemon's local zone.
    zone: str | None
    #: The instant the elapses follow: the one asked, or the daemon's now.
    base: datetime.datetime
    #: The daemon's search for the next elapse gave up (systemd's bound of
    #: 1000 rounds), as systemd's does.
    gave_up: bool


def _calendar_events(env: Any) -> CalendarEvents:
    r = reply_body(env, "calendar_reply")
    ns = list(r.elapses_realtime_ns)
    return CalendarEvents(r.normalized, [utc_datetime(t) for t in ns], ns,
                          r.zone if r.HasField("zone") else None,
                          utc_datetime(r.base_realtime_ns), bool(r.gave_up))


def calendar_req(spec: str, iterations: int,
                 base: datetime.datetime | None) -> Req:
    """A Calendar; TypeError/ValueError (nothing sent) for a spec that is
    not a string, iterations outside 1 to CALENDAR_ITERATIONS_MAX, or a
    base that is not an aware datetime after the epoch.  Read-only, so
    safe to repeat."""
    if not isinstance(spec, str):
        raise TypeError(f"spec: a str, not {type(spec).__name__}")
    if isinstance(iterations, bool) or not isinstance(iterations, int) or \
            not 1 <= iterations <= CALENDAR_ITERATIONS_MAX:
        raise ValueError(f"iterations: {iterations!r} is outside 1 to "
                         f"{CALENDAR_ITERATIONS_MAX}")
    env = pb.Envelope()
    q = env.calendar
    q.spec = spec
    q.iterations = iterations
    if base is not None:
        q.base_realtime_ns = realtime_ns(base, "base")
    return Req(env, _calendar_events, "calendar")


def page_req(pager: "Pager") -> Req:
    """The next page of a listing (made when sent: see Pager.request)."""
    return Req(None, _body(pager.want), "listing", pager=pager)


@dataclass
class Listing:
    """What :meth:`Client.list_sessions` or :meth:`Client.list_timers`
    found (PROTOCOL.md, ListSessions and ListTimers).

    Attributes:
        entries: ``SessionInfo`` or ``TimerInfo`` messages (fields as in
            proto/bitwheel.proto), in the daemon's order.
        more: the limit was reached with entries left.
        total: timers: the session's pending timers, all pages together.
        owner_uid: timers: the session's namespace.
        now_ns, realtime_ns: timers: the daemon's CLOCK_MONOTONIC and
            CLOCK_REALTIME read together as it answered the last page: a
            deadline is ``realtime_ns + deadline_ns - now_ns`` in ns since
            the epoch.
    """

    entries: list[Any] = field(default_factory=list)
    more: bool = False
    total: int | None = None
    owner_uid: int | None = None
    now_ns: int | None = None
    realtime_ns: int | None = None


class Pager:
    """A listing, page by page, for either client: request() the next
    page, take() its reply, until take() says it is done."""

    def __init__(self, session: str | bytes | None, owner_uid: int | None,
                 limit: int | None) -> None:
        if isinstance(session, str):
            session = session.encode()
        if owner_uid is not None and _u64(owner_uid, "owner_uid") >= 1 << 32:
            raise ValueError(f"owner_uid: {owner_uid} is not a uid")
        if limit is not None and _u64(limit, "limit") == 0:
            raise ValueError("limit: at least 1")
        self._session = session
        self._owner = owner_uid
        self._limit = limit
        self._cursor = 0
        self._connection = 0
        self.listing = Listing()
        self.want = ("list_timers_reply" if session is not None
                     else "list_sessions_reply")

    def request(self, connection: int) -> Any:
        """The next page's envelope, to be sent on `connection`.  A cursor
        continues only its own connection's listing: on another (the
        client attached again after a restart) the listing starts over."""
        if connection != self._connection:
            self._connection = connection
            self._cursor = 0
            self.listing = Listing()
        env = pb.Envelope()
        q: Any = env.list_timers if self._session is not None else \
            env.list_sessions
        q.SetInParent()
        if self._session is not None:
            q.session = self._session
        if self._owner is not None:
            q.owner_uid = self._owner
        if self._limit is not None:
            q.limit = min(self._limit - len(self.listing.entries),
                          (1 << 32) - 1)
        if self._cursor:
            q.cursor = self._cursor
        return env

    def take(self, r: Any) -> bool:
        """The reply to the last request(); True while pages remain."""
        got = list(r.timers if self._session is not None else r.sessions)
        room = (None if self._limit is None
                else self._limit - len(self.listing.entries))
        self.listing.entries += got[:room]
        self.listing.more = bool(r.more) or (room is not None
                                             and len(got) > room)
        if self._session is not None:
            self.listing.total = r.total
            self.listing.owner_uid = r.owner_uid
            self.listing.now_ns = r.now_ns
            self.listing.realtime_ns = r.realtime_ns
        self._cursor = r.cursor if r.more else 0
        if r.more and not r.HasField("cursor"):
            raise ProtocolError("a listing reply says more without a cursor")
        return bool(r.more) and (room is None or len(got) < room)


def _ack_env(delivery: int, cumulative: bool) -> Any:
    env = pb.Envelope()
    env.ack.delivery = delivery
    if cumulative:
        env.ack.cumulative = True
    return env


def ack_frame(delivery: int, cumulative: bool) -> bytes:
    """An Ack without request_id: no reply."""
    return frame(_ack_env(delivery, cumulative))


def ack_req(fire: "Fire", cumulative: bool) -> Req:
    """An Ack with reply: never sent again (its delivery number holds on
    its connection only); one that did not run completed nothing (0)."""
    return Req(_ack_env(fire.delivery, cumulative), _acked, "ack", fire.key,
               safe=False, resend=False, instead=0)


@dataclass(frozen=True)
class Released:
    """What the daemon made of a Release (:meth:`Client.release`)."""

    #: False: the fire was not in flight to this connection (acknowledged,
    #: released or taken back already, or it came on an earlier
    #: connection); nothing was done.
    released: bool
    #: True: its deliveries reached the session's ``max_deliveries`` and it
    #: went to the dead-letter session instead of back to the queue.
    dead_lettered: bool
    #: Its hand-outs so far.
    deliveries: int
    #: When it may be handed out again (CLOCK_MONOTONIC ns); None when it
    #: was dead-lettered or not released.
    ready_ns: int | None


@dataclass(frozen=True)
class Touched:
    """What the daemon made of a Touch (:meth:`Client.touch`)."""

    #: False: the fire was not in flight to this connection; nothing was
    #: done.
    touched: bool
    #: Its ack deadline now (CLOCK_MONOTONIC ns); None when the connection
    #: has no ack timeout (its fires are never taken back for their time)
    #: or nothing was touched.
    ack_deadline_ns: int | None


@dataclass(frozen=True)
class Kicked:
    """What :meth:`Client.kick` moved back from the dead-letter session."""

    #: Fires moved back to the session's queue, their deliveries from 0.
    kicked: int
    #: More may be left: the limit was reached, or the daemon looked at
    #: ``limits.max_kick`` dead letters of other keys without moving one.
    more: bool


def _released(env: Any) -> Released:
    r = reply_body(env, "release_reply")
    return Released(bool(r.released), bool(r.dead_lettered), r.deliveries,
                    r.ready_ns if r.HasField("ready_ns") else None)


def _touched(env: Any) -> Touched:
    r = reply_body(env, "touch_reply")
    return Touched(bool(r.touched), r.ack_deadline_ns
                   if r.HasField("ack_deadline_ns") else None)


def release_req(fire: "Fire", delay: Duration | None,
                backoff: "ReleaseBackoff | bool | None",
                max_delay_ns: int) -> Req:
    """A Release of `fire`, at once or after `delay` or a delay drawn from
    `backoff` (True: ``ReleaseBackoff()``) and its deliveries, at most
    `max_delay_ns` (the daemon's limit, 0: unknown).  An explicit delay
    past the limit is BadRequestError, not sent.  Like an Ack with reply,
    never sent again; one that did not run released nothing."""
    if delay is not None and backoff not in (None, False):
        raise ValueError("release: give delay or backoff, not both")
    if backoff is True:
        backoff = ReleaseBackoff()
    env = pb.Envelope()
    env.release.delivery = fire.delivery
    if isinstance(backoff, ReleaseBackoff):
        ns = round(backoff.delay(fire.deliveries) * 1e9)
        ns = min(ns, max_delay_ns) if max_delay_ns else ns
    elif backoff not in (None, False):
        raise TypeError("backoff: a bitwheel.ReleaseBackoff or True, not "
                        f"{type(backoff).__name__}")
    else:
        ns = 0 if delay is None else duration_ns(delay, "delay")
        if max_delay_ns and ns > max_delay_ns:
            code = pb.BAD_REQUEST
            raise SERVER_ERRORS[code](
                code, f"a release delay of {ns / 1e9} s is over the "
                f"daemon's limit of {max_delay_ns / 1e9} s (not sent)")
    if ns:
        env.release.delay_ns = ns
    return Req(env, _released, "release", fire.key, safe=False,
               resend=False,
               instead=Released(False, False, fire.deliveries, None))


def touch_req(fire: "Fire", timeout: Duration | None) -> Req:
    """A Touch of `fire`: its ack deadline `timeout` from now (None: the
    connection's ack timeout).  Never sent again; it needs no outcome
    when its connection ends (that takes the fire back anyway)."""
    env = pb.Envelope()
    env.touch.delivery = fire.delivery
    if timeout is not None:
        ns = duration_ns(timeout, "timeout")
        if ns == 0:
            raise ValueError("touch: a timeout of 0 (None: the "
                             "connection's ack timeout)")
        env.touch.timeout_ns = ns
    return Req(env, _touched, "touch", fire.key, safe=True, resend=False,
               instead=Touched(False, None))


def set_policy_req(max_deliveries: int | None,
                   dead_letter: str | bytes | None) -> Req:
    """A SetPolicy; absent fields keep what the session has.  Setting the
    same again is harmless."""
    env = pb.Envelope()
    q = env.set_policy
    q.SetInParent()
    if max_deliveries is not None:
        if _u64(max_deliveries, "max_deliveries") >= 1 << 32:
            raise ValueError(f"max_deliveries: {max_deliveries} is outside "
                             "0 to 2**32 - 1")
        q.max_deliveries = max_deliveries
    if dead_letter is not None:
        if isinstance(dead_letter, str):
            dead_letter = dead_letter.encode()
        if not isinstance(dead_letter, bytes):
            raise TypeError("dead_letter: a session name (str or bytes), "
                            f"not {type(dead_letter).__name__}")
        q.dead_letter = dead_letter
    return Req(env, lambda r: reply_body(r, "set_policy_reply").policy,
               "set_policy")


class Kicks:
    """A :meth:`Client.kick` for either client, request by request:
    request() the next Kick (None when done), take() its reply.  Each
    moves at most the daemon's ``max_kick``; the loop ends when one says
    no more is left, moved nothing (the daemon looked at ``max_kick``
    dead letters of other keys: each Kick starts over from the queue's
    head, so the next would too), or the limit is reached."""

    def __init__(self, key: int | None, limit: int | None) -> None:
        if key is not None:
            _u64(key, "key")
        if limit is not None and _u64(limit, "limit") == 0:
            raise ValueError("limit: at least 1 (None: every fire)")
        self._key, self._limit = key, limit
        self.result = Kicked(0, False)
        self._done = False

    def request(self) -> Req | None:
        if self._done:
            return None
        env = pb.Envelope()
        env.kick.SetInParent()
        if self._key is not None:
            env.kick.key = self._key
        if self._limit is not None:
            env.kick.limit = min(self._limit - self.result.kicked,
                                 (1 << 32) - 1)
        # Without a limit, a Kick that ran and is sent again moves what
        # was left anyway; with one, it could move up to twice as many.
        return Req(env, _body("kick_reply"), "kick", self._key,
                   safe=self._limit is None)

    def take(self, r: Any) -> None:
        kicked = self.result.kicked + r.kicked
        self.result = Kicked(kicked, bool(r.more))
        self._done = not r.more or r.kicked == 0 or (
            self._limit is not None and kicked >= self._limit)


def server_error(err: Any, connection_level: bool) -> ServerError:
    """The exception for an Error message (its class by code)."""
    cls = SERVER_ERRORS.get(err.code, ServerError)
    return cls(err.code, err.message, connection_level=connection_level)


def reply_body(env: Any, want: str) -> Any:
    """The `want` member of a reply, or raise what the reply says."""
    which = env.WhichOneof("body")
    if which == want:
        return getattr(env, want)
    if which == "error":
        raise server_error(env.error, False)
    raise ProtocolError(f"the daemon answered request {env.request_id} "
                        f"with {which}, not {want}")


class FrameReader:
    """Splits the bytes received into envelopes."""

    __slots__ = ("_buf", "max_frame")

    def __init__(self) -> None:
        self._buf = bytearray()
        #: The largest body accepted; HelloReply's max_frame_bytes later.
        self.max_frame = DEFAULT_MAX_FRAME

    def feed(self, data: bytes) -> list[Any]:
        """The whole frames now received; ProtocolError for bytes that are
        no frame (the connection must then be closed)."""
        buf = self._buf
        buf += data
        out = []
        off, end = 0, len(buf)
        while end - off >= 4:
            (n,) = _HEADER.unpack_from(buf, off)
            if n == 0 or n > self.max_frame:
                raise ProtocolError(f"the daemon sent a frame of {n} bytes "
                                    f"(allowed: 1 to {self.max_frame})")
            if end - off - 4 < n:
                break
            env = pb.Envelope()
            try:
                env.ParseFromString(bytes(buf[off + 4:off + 4 + n]))
            except Exception as e:   # protobuf's DecodeError and kin
                raise ProtocolError(f"the daemon sent a frame that is not "
                                    f"an Envelope: {e}") from e
            out.append(env)
            off += 4 + n
        if off:
            del buf[:off]
        return out


@dataclass
class Fire:
    """A timer that came due, as the daemon delivered it.

    Attributes:
        key: the timer's key.
        payload: the Schedule's payload (``b""`` when it had none).
        deadline_ns: the deadline this fire was for (CLOCK_MONOTONIC ns).
        fired_ns: when the daemon fired it, never before ``deadline_ns``.
        count: periodic timers: this fire's number, 1 for the first;
            oneshot timers: 0.
        late: due while the daemon was not running (restored from its
            journal).
        redelivered: sent to a consumer before and not acknowledged; the
            handler may have seen it (drop repeats by key, deadline_ns and
            count if it must act exactly once).
        delivery: the daemon's number for it on its connection, what an
            acknowledgement names.
        connection: which connection of its client it came on (the client
            counts connects), so that an ack of a fire from an earlier one
            is refused with :class:`StaleFire`.
        deliveries: how many times the daemon has handed it out in its
            session, this time included: 1 the first time (0 from a
            daemon that does not count).  What ``release(backoff=...)``
            grows its delay from.
        dead_letter: a fire that another session dead-lettered (this
            client consumes its dead-letter session): its history there,
            else None.
        due_realtime_ns: a wall-clock timer's fire (``schedule(at=...)``):
            the instant it was due at, ns since the Unix epoch (UTC); None
            for a monotonic timer.  ``late`` is then also set when a step
            of the wall clock passed it (PROTOCOL.md, "Clocks").
    """

    key: int
    payload: bytes
    deadline_ns: int
    fired_ns: int
    count: int
    late: bool
    redelivered: bool
    delivery: int
    connection: int
    deliveries: int = 0
    dead_letter: "DeadLetter | None" = None
    due_realtime_ns: int | None = None
    _client: Any = field(default=None, repr=False, compare=False)

    def ack(self, *, cumulative: bool = False, wait: bool = False) -> Any:
        """Acknowledge this fire: the daemon forgets it and never delivers
        it again.  See :meth:`Client.ack`."""
        return self._client.ack(self, cumulative=cumulative, wait=wait)

    def release(self, delay: Duration | None = None, *,
                backoff: "ReleaseBackoff | bool | None" = None) -> Any:
        """Give this fire back, to be handed out again at once or after a
        delay (or dead-lettered at the session's limit).  See
        :meth:`Client.release`."""
        return self._client.release(self, delay, backoff=backoff)

    def touch(self, timeout: Duration | None = None) -> Any:
        """Ask for more time before this fire is taken back.  See
        :meth:`Client.touch`."""
        return self._client.touch(self, timeout)

    @property
    def due_at(self) -> datetime.datetime | None:
        """``due_realtime_ns`` as an aware datetime in UTC (to the
        microsecond), or None."""
        if self.due_realtime_ns is None:
            return None
        return _EPOCH + datetime.timedelta(
            microseconds=self.due_realtime_ns // 1000)

    @property
    def lateness_ns(self) -> int:
        """How long after its deadline the daemon fired it."""
        return self.fired_ns - self.deadline_ns


F = TypeVar("F", bound=Fire)


@dataclass(frozen=True)
class DeadLetter:
    """Where a dead letter came from (``Fire.dead_letter``; PROTOCOL.md,
    "Fires that fail")."""

    #: The session that dead-lettered it (named even after it ended).
    session: bytes | None
    #: Its hand-outs there.
    deliveries: int
    #: Its first and last hand-out there, and when it was dead-lettered
    #: (CLOCK_MONOTONIC ns).
    first_handed_ns: int
    last_handed_ns: int
    dead_lettered_ns: int
    #: Why it was taken back the last time: a ``bitwheel_pb2.TakeBack``
    #: value (DISCONNECTED, ACK_TIMEOUT, RELEASED, RESTARTED).
    reason: int

    @property
    def reason_name(self) -> str:
        """`reason`'s name, e.g. ``"RELEASED"``."""
        return str(pb.TakeBack.Name(self.reason))


def make_fire(f: Any, connection: int, client: Any, cls: type[F]) -> F:
    """A Fire (or subclass) from a Fired message."""
    dead = None
    if f.HasField("dead_letter"):
        d = f.dead_letter
        dead = DeadLetter(d.session if d.HasField("session") else None,
                          d.deliveries, d.first_handed_ns,
                          d.last_handed_ns, d.dead_lettered_ns, d.reason)
    return cls(f.key, f.payload, f.deadline_ns, f.fired_at_ns, f.fire_count,
               f.late, f.redelivered, f.delivery, connection,
               f.deliveries, dead,
               f.due_realtime_ns if f.HasField("due_realtime_ns") else None,
               client)


@dataclass(frozen=True)
class Scheduled:
    """What the daemon made of a Schedule."""

    #: The first deadline, CLOCK_MONOTONIC ns (now + in_ for a delay).
    deadline_ns: int
    #: True when ``replace=True`` replaced a pending timer of the key.
    replaced: bool


def _daemon_uids() -> tuple[str, int | None]:
    name = os.environ.get(DAEMON_USER_ENV) or DEFAULT_DAEMON_USER
    if name.isdigit():
        return name, int(name)
    try:
        return name, pwd.getpwnam(name).pw_uid
    except KeyError:
        return name, None


def connect_failed(path: str, err: OSError) -> ConnectionRefused:
    """What a failed connect(2) to `path` raises: :class:`NotPermitted`
    with the hint bwctl gives when it was for permission (the socket's
    group, by name, when the socket can be looked at), else
    :class:`ConnectionRefused` with errno's text."""
    text = f"cannot connect to {path}: {err.strerror or err}"
    if not isinstance(err, PermissionError):
        return ConnectionRefused(text)
    try:
        gid = os.stat(path).st_gid
    except OSError:
        group, where = None, "for the system service: "
    else:
        try:
            group = grp.getgrgid(gid).gr_name
        except KeyError:
            group = str(gid)
        where = "here: "
    try:
        user = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        user = "YOUR_USER"
    name = group or "bitwheel"
    return NotPermitted(
        f"{text}; you (uid {os.geteuid()}) lack permission on {path}: "
        f"connecting needs write permission on the socket, usually "
        f"membership of its group ({where}{name}).  An administrator adds "
        f"you with 'usermod -aG {name} {user}'; then log in again.",
        err.errno or errno.EACCES, group)


def check_peer(sock: Any, path: str) -> None:
    """Refuse a listener that is not the daemon: its SO_PEERCRED uid must
    be root, the caller's own (real or effective), or the daemon user's
    (``$BITWHEEL_DAEMON_USER``, default ``bitwheeld``), as the C client
    checks.  Raises :class:`UntrustedDaemon`."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                          _PEERCRED.size)
    _pid, uid, _gid = _PEERCRED.unpack(raw)
    if uid in (0, os.getuid(), os.geteuid()):
        return
    name, daemon_uid = _daemon_uids()
    if uid == daemon_uid:
        return
    who = f"uid {daemon_uid}" if daemon_uid is not None else "no such user"
    raise UntrustedDaemon(
        f"{path}: the listener runs as uid {uid}, which is neither root, "
        f"you (uid {os.geteuid()}) nor the daemon user {name!r} ({who}); "
        f"refusing to talk to it (set {DAEMON_USER_ENV} if bitwheeld runs "
        f"as another user)", uid)
