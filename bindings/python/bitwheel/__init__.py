"""bitwheel: the Python client of bitwheeld, the host-wide timer service.

A process hands the daemon its timeouts over a Unix socket and the daemon
sends each one back when it comes due (a *fire*).  :class:`Client` is the
blocking client, :class:`AsyncClient` the asyncio one, with the same
arguments and methods.  The protocol is proto/PROTOCOL.md of the bitwheel
sources; this package speaks it with the messages protoc generates from
proto/bitwheel.proto (:mod:`bitwheel.bitwheel_pb2`).

Example, a producer and a consumer of the named session "orders"::

    import bitwheel

    with bitwheel.Client(session="orders") as c:
        c.schedule(42, in_=15 * 60, payload=b"order 42")

    with bitwheel.Client(session="orders", consume=True) as c:
        for fire in c.fires():
            expire_order(fire.key)
            fire.ack()

A fire its handler cannot process now goes back with ``fire.release()``
(at once, after a delay, or with exponential backoff:
``fire.release(backoff=True)``, see :class:`ReleaseBackoff`); a slow
handler keeps its fire with ``fire.touch()``; a fire handed out a named
session's ``max_deliveries`` times without an ack (``set_policy``) goes
to its dead-letter session, ``NAME.dead``, where ``fire.dead_letter``
tells its history, and ``kick()`` brings it back.

``calendar("Mon..Fri 09:00 Europe/Berlin", iterations=3)`` asks the daemon
how it reads a systemd.time(7) calendar event: its normalized form and its
next elapses, as ``systemd-analyze calendar`` shows them.

Both clients ride through a daemon restart by themselves (``reconnect=True``
by default, or a :class:`Backoff`): a named session is attached again and
the calls go on; what cannot be hidden raises :class:`UnknownOutcome` (a
request that may or may not have run), :class:`SessionLost` (an anonymous
session ended) or :class:`ReconnectFailed` (the give-up).

Every daemon ``ErrorCode`` is an exception class (``DuplicateKeyError``,
``TooManyTimersError``, ... all :class:`ServerError`), generated from the
proto's enum; :class:`ConnectionRefused` (:class:`NotPermitted`, a
:class:`PermissionError` too, when the socket is closed to the caller: its
message names the group to join), :class:`ConnectionClosed`,
:class:`UntrustedDaemon`, :class:`Timeout` and those above are the client's
own.  All are :class:`BitwheelError`.
"""

from . import _codes
from ._codes import *  # noqa: F401,F403  (one class per ErrorCode)
from ._codes import SERVER_ERRORS
from ._core import (CALENDAR_ITERATIONS_MAX, DAEMON_USER_ENV,
                    DEFAULT_DAEMON_USER, DEFAULT_SOCKET, DEFAULT_TIMEOUT,
                    PROTOCOL_VERSION, SOCKET_ENV, Backoff, CalendarEvents,
                    DeadLetter, Duration, Fire, Kicked, Listing,
                    ReleaseBackoff, Released, Scheduled, Touched,
                    check_peer, default_socket, now_ns)
from ._errors import (BitwheelError, ConnectionClosed, ConnectionRefused,
                      NotPermitted, ProtocolError, ReconnectFailed, RoleError,
                      ServerError, SessionLost, StaleFire, Timeout,
                      UnknownOutcome, UntrustedDaemon)
from ._version import __version__
from .aio import AsyncClient, AsyncFire
from .client import Client

__all__ = [
    "AsyncClient", "AsyncFire", "Backoff", "BitwheelError",
    "CALENDAR_ITERATIONS_MAX", "CalendarEvents", "Client",
    "ConnectionClosed", "ConnectionRefused", "DAEMON_USER_ENV",
    "DEFAULT_DAEMON_USER", "DEFAULT_SOCKET", "DEFAULT_TIMEOUT",
    "DeadLetter", "Duration", "Fire", "Kicked", "Listing", "NotPermitted",
    "PROTOCOL_VERSION", "ProtocolError", "ReconnectFailed",
    "ReleaseBackoff", "Released", "RoleError", "SERVER_ERRORS",
    "SOCKET_ENV", "Scheduled", "ServerError", "SessionLost", "StaleFire",
    "Timeout", "Touched", "UnknownOutcome", "UntrustedDaemon",
    "__version__", "check_peer", "default_socket", "now_ns",
]
# A form type checkers follow (mypy --strict takes a name as exported only
# if __all__ lists it, and reads no other expression).
__all__ += _codes.__all__
