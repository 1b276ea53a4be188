"""The exceptions of the bitwheel client that do not come from the daemon.

Every failure the package raises is a :class:`BitwheelError`.  The daemon's
refusals are :class:`ServerError` subclasses, one per ``ErrorCode`` of
``proto/bitwheel.proto``; those classes are generated from the enum
(``bitwheel/_codes.py``, by ``make python-generated``) and re-exported by
``bitwheel``.  The rest are the client's own: no connection
(:class:`ConnectionRefused`, of which :class:`NotPermitted`;
:class:`ConnectionClosed`), a listener that is not the daemon
(:class:`UntrustedDaemon`), no answer in time (:class:`Timeout`), a daemon
that broke the protocol (:class:`ProtocolError`), misuse that the client
catches before sending anything (:class:`StaleFire`, :class:`RoleError`),
and what riding through a daemon restart cannot hide: a request whose
outcome is unknown (:class:`UnknownOutcome`), an anonymous session that
ended (:class:`SessionLost`) and a reconnect that gave up
(:class:`ReconnectFailed`).
"""

from __future__ import annotations


class BitwheelError(Exception):
    """Base class of every exception the bitwheel package raises."""


class ConnectionRefused(BitwheelError, ConnectionError):
    """The socket could not be connected to: it is missing, nobody listens
    on it, or it is not accessible.  Nothing was sent."""


class NotPermitted(ConnectionRefused, PermissionError):
    """connect(2) was refused for permission (``errno`` EACCES or EPERM):
    connecting needs write permission on the socket and search permission
    on its directories, which the system service grants to the socket's
    group.  The message names that group and the command that adds the
    user to it, as bwctl's hint does.  A :class:`PermissionError` too.

    Attributes:
        group: the socket's group, by name (its gid when it has none);
            None when the socket itself could not be looked at (a
            directory on the way is closed to the caller).
    """

    def __init__(self, message: str, errno: int,
                 group: str | None) -> None:
        super().__init__(message)
        # Set after the message so that str() stays the message (OSError
        # formats "[Errno N] strerror" only when both are set).
        self.errno = errno
        self.group = group


class ConnectionClosed(BitwheelError, ConnectionError):
    """The connection is gone: closed by :meth:`close`, by the daemon, or
    broken.  Requests that were outstanding may or may not have taken
    effect (PROTOCOL.md, section 8); :meth:`reconnect` attaches to the same
    session again."""


class SessionLost(ConnectionClosed):
    """The daemon closed the connection of an anonymous session (it is
    stopping, or the connection broke): the session and its timers ended
    with it, and no reconnect can bring them back, so the client does not
    try.  :meth:`reconnect` starts a new, empty anonymous session; a named
    session (``session="..."``) rides through daemon restarts instead.
    Its ``__cause__`` is what ended the connection."""


class ReconnectFailed(ConnectionClosed):
    """The daemon closed the connection of a named session and the client
    could not attach to it again within its :class:`~bitwheel.Backoff`'s
    ``give_up`` (or the daemon refused the Hello for good, e.g. with
    ``OverBudgetError``: then that error is raised instead).  The client
    stays disconnected; :meth:`reconnect` tries again.  ``__cause__`` is
    the last attempt's error.

    Attributes:
        attempts: the connection attempts made.
        elapsed: seconds from the first attempt's wait to the give-up.
    """

    def __init__(self, message: str, attempts: int, elapsed: float) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.elapsed = elapsed


class UnknownOutcome(BitwheelError):
    """A request was sent, and the connection ended before its reply
    without the daemon saying it stopped first (it crashed, was killed, or
    cut the connection): it may or may not have taken effect, and it is
    not safe to send again (a plain ``schedule`` could fail with
    ``DuplicateKeyError`` or arm a second time a timer that already
    fired).  The client has reconnected, or reconnects on the next call;
    make the intent true again (``schedule(key, ..., replace=True)``) or
    look (``list_timers``).  Requests that are safe to repeat (``cancel``,
    ``schedule`` with ``replace=True``, ``stats``, the listings) are sent
    again instead, and never raise this.  ``__cause__`` is what ended the
    connection.

    A request that is harmless to repeat raises it too once it was written
    on 3 connections in a row (``bitwheel._core.MAX_CRASHES``) that each
    ended that way: it may be what brings the daemon down.

    Attributes:
        request: the request's name: ``"schedule"``, ``"ack"``,
            ``"release"``, ``"kick"`` (with a limit), or, after 3 crashes,
            ``"cancel"``, ``"stats"``, ``"listing"``, ``"set_policy"``,
            ``"kick"``.
        key: the timer key it was for (an ack or a release: its fire's
            key; a kick: its key, if any); None for stats, listings and
            set_policy.
        crashes: how many connections ended that way with it unanswered.
    """

    def __init__(self, request: str, key: int | None, why: BaseException,
                 crashes: int = 1) -> None:
        what = request if key is None else f"{request} of key {key}"
        times = "" if crashes == 1 else f", on each of {crashes} connections"
        super().__init__(
            f"{what}: the connection ended before its reply{times} ({why}), "
            f"so whether it took effect is unknown; it was not sent again "
            f"(schedule with replace=True to make it true, or look with "
            f"list_timers)")
        self.request = request
        self.key = key
        self.crashes = crashes


class UntrustedDaemon(BitwheelError):
    """The process listening on the socket runs as a uid that is neither
    root, the caller's own, nor the daemon user (``$BITWHEEL_DAEMON_USER``,
    default ``bitwheeld``): the client refuses to hand it anything.  The
    connection was closed before a byte was sent."""

    def __init__(self, message: str, uid: int) -> None:
        super().__init__(message)
        #: The listener's uid, as SO_PEERCRED reported it.
        self.uid = uid


class Timeout(BitwheelError, TimeoutError):
    """No reply came within the client's timeout.  The connection stays
    open; the request may still take effect, and its late reply is
    dropped."""


class ProtocolError(BitwheelError):
    """The daemon sent something the protocol does not allow; the client
    closed the connection."""


class StaleFire(BitwheelError):
    """An acknowledgement, release or touch of a fire that came on an
    earlier connection of this client, with ``reconnect=False`` (or after
    :meth:`close`): the daemon took it back when that connection ended and
    will deliver it again, marked ``redelivered``.  With reconnect on,
    such a call sends nothing instead (the fire comes again all the
    same)."""


class RoleError(BitwheelError):
    """Not for this connection's role: waiting for fires or acknowledging
    on a producer (pass ``consume=True``)."""


class ServerError(BitwheelError):
    """The daemon refused a request with an ``Error`` frame.

    Each ``ErrorCode`` has its own subclass (``DuplicateKeyError``,
    ``TooManyTimersError``, ...).  A code this package does not know, from
    a newer daemon, reads as ERROR_CODE_UNSPECIFIED (proto2's rule for an
    unknown enum value) and is raised as ``UnspecifiedError``: treat it as
    a generic failure of the request.

    Attributes:
        code: the ErrorCode number, e.g. 11.
        name: its name in the protocol, e.g. ``"DUPLICATE_KEY"``.
        message: the daemon's text, for people and logs.
        connection_level: True when the error answered no request (the
            daemon closes the connection after it, e.g. SHUTTING_DOWN or
            TOO_MANY_CLIENTS); the client is then disconnected.
    """

    #: The ErrorCode of the class; None on ServerError itself.
    code_value: int | None = None
    #: The ErrorCode's name; "UNKNOWN" on ServerError itself.
    code_name: str = "UNKNOWN"

    def __init__(self, code: int, message: str = "", *,
                 connection_level: bool = False) -> None:
        self.code = code
        self.name = self.code_name if self.code_value is not None else (
            f"UNKNOWN({code})")
        self.message = message
        self.connection_level = connection_level
        text = f"daemon error {self.name} ({code})"
        super().__init__(f"{text}: {message}" if message else text)
