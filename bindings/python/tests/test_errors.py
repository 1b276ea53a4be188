"""Every ErrorCode of proto/bitwheel.proto is an exception class, and each
code a real daemon can be made to send is raised as its class.

The malformed requests go through the client's own send path
(Client._send / Client._call), so the reply travels the same way as any
other.  Codes a daemon cannot be made to send on purpose (UNSPECIFIED,
SESSION_BUSY of version 1, NO_MEMORY, INTERNAL) are checked through the
mapping alone; a code added to the proto without a test here is reported
as skipped by test_every_code_has_a_test.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import struct
import textwrap
import time

import pytest

import bitwheel
from bitwheel import _core
from bitwheel import bitwheel_pb2 as pb
from conftest import NOBODY, WAIT, need_root, run_python

STORAGE_UNAVAILABLE = getattr(pb, "STORAGE_UNAVAILABLE", None)

#: Codes the tests below make a real daemon send.
TRIGGERED: set[int] = set()
#: Codes no daemon sends on demand: checked through the mapping only.
UNTRIGGERABLE = {pb.ERROR_CODE_UNSPECIFIED, pb.SESSION_BUSY, pb.NO_MEMORY,
                 pb.INTERNAL}


def triggers(code: int):
    TRIGGERED.add(code)
    return pytest.mark.parametrize("code", [code])


def test_one_class_per_code():
    codes = {v.number: v.name for v in pb.ErrorCode.DESCRIPTOR.values}
    assert set(bitwheel.SERVER_ERRORS) == set(codes)
    for number, name in codes.items():
        cls = bitwheel.SERVER_ERRORS[number]
        assert issubclass(cls, bitwheel.ServerError)
        assert issubclass(cls, bitwheel.BitwheelError)
        assert cls.code_value == number and cls.code_name == name
        assert getattr(bitwheel, cls.__name__) is cls
        assert cls.__name__ in bitwheel.__all__
        err = _core.server_error(pb.Error(code=number, message="m"), True)
        assert type(err) is cls and err.connection_level
        assert str(err) == f"daemon error {name} ({number}): m"
    assert bitwheel.DuplicateKeyError.code_value == 11
    # A code from a newer daemon: proto2 reads it as the first value,
    # UNSPECIFIED (the proto's rule), still a ServerError.
    err = _core.server_error(pb.Error.FromString(b"\x08\xe7\x07\x12\x03new"),
                             False)
    assert type(err) is bitwheel.UnspecifiedError and err.message == "new"


@pytest.mark.parametrize("code", sorted(UNTRIGGERABLE))
def test_untriggerable_codes_map(code):
    err = _core.server_error(pb.Error(code=code), False)
    assert type(err) is bitwheel.SERVER_ERRORS[code]


def raw_request(c: bitwheel.Client, env: pb.Envelope, want: str):
    return c._call(_core.Req(env, lambda r: _core.reply_body(r, want), want))


@triggers(pb.BAD_FRAME)
def test_bad_frame(daemon, code):
    c = bitwheel.Client(daemon.sock)
    c._send(b"\0\0\0\0")
    with pytest.raises(bitwheel.BadFrameError) as e:
        c.stats()
    assert e.value.code == code and e.value.connection_level
    assert not c.connected
    with pytest.raises(bitwheel.ConnectionClosed):
        c.stats()


@triggers(pb.FRAME_TOO_LARGE)
def test_frame_too_large(daemon, code):
    c = bitwheel.Client(daemon.sock)
    c._send(struct.pack(">I", 1 << 30))
    with pytest.raises(bitwheel.FrameTooLargeError):
        c.stats()


@triggers(pb.UNKNOWN_MESSAGE)
def test_unknown_message(daemon, code):
    c = bitwheel.Client(daemon.sock)
    env = pb.Envelope()
    env.stats_reply.clients = 1   # a reply is no request
    with pytest.raises(bitwheel.UnknownMessageError) as e:
        raw_request(c, env, "stats_reply")
    assert not e.value.connection_level


@triggers(pb.BAD_REQUEST)
def test_bad_request(daemon, code):
    with bitwheel.Client(daemon.sock) as c:
        env = pb.Envelope()
        env.cancel.SetInParent()   # no key
        with pytest.raises(bitwheel.BadRequestError):
            raw_request(c, env, "cancel_reply")


@triggers(pb.BAD_VERSION)
def test_bad_version(daemon, code, monkeypatch):
    monkeypatch.setattr(_core, "PROTOCOL_VERSION", 99)
    with pytest.raises(bitwheel.BadVersionError) as e:
        bitwheel.Client(daemon.sock)
    assert "2" in e.value.message


@triggers(pb.HELLO_REQUIRED)
def test_hello_required(daemon, code, monkeypatch):
    monkeypatch.setattr(_core, "hello_req", lambda o: _core.stats_req())
    with pytest.raises(bitwheel.HelloRequiredError):
        bitwheel.Client(daemon.sock)


@triggers(pb.ALREADY_HELLO)
def test_already_hello(daemon, code):
    with bitwheel.Client(daemon.sock) as c:
        with pytest.raises(bitwheel.AlreadyHelloError):
            c._call(_core.hello_req(c._opts))
        assert c.stats().clients == 1   # the connection stays


@triggers(pb.TOO_MANY_CLIENTS)
def test_too_many_clients(start_daemon, code):
    d = start_daemon("--max-clients", "1")
    with bitwheel.Client(d.sock):
        with pytest.raises(bitwheel.TooManyClientsError) as e:
            bitwheel.Client(d.sock)
        assert e.value.connection_level


@triggers(pb.DUPLICATE_KEY)
def test_duplicate_key(daemon, code):
    with bitwheel.Client(daemon.sock) as c:
        c.schedule(1, in_=60)
        with pytest.raises(bitwheel.DuplicateKeyError):
            c.schedule(1, in_=60)


@triggers(pb.BAD_DEADLINE)
def test_bad_deadline(daemon, code):
    with bitwheel.Client(daemon.sock) as c:
        with pytest.raises(bitwheel.BadDeadlineError):
            c.schedule(1, in_=1, every=0)
        with pytest.raises(bitwheel.BadDeadlineError):
            c.schedule(2, in_=(2**64 - 1) / 1e9 - 1)   # now + delay overflows
        assert c.stats().oneshot.inserted == 0


@triggers(pb.PAYLOAD_TOO_LARGE)
def test_payload_too_large(start_daemon, code):
    d = start_daemon("--max-payload", "16")
    with bitwheel.Client(d.sock) as c:
        assert c.limits.max_payload_bytes == 16
        # The client refuses it before sending, with the same class ...
        with pytest.raises(bitwheel.PayloadTooLargeError):
            c.schedule(1, in_=1, payload=b"x" * 17)
        # ... and the daemon, when it is sent anyway.
        with pytest.raises(bitwheel.PayloadTooLargeError) as e:
            c._call(_core.schedule_req(1, 1, None, None, b"x" * 17, False,
                                       None))
        assert e.value.message   # the daemon's own text
        c.schedule(1, in_=1, payload=b"x" * 16)


@triggers(pb.TOO_MANY_TIMERS)
def test_too_many_timers(start_daemon, code):
    d = start_daemon("--max-timers", "2")
    with bitwheel.Client(d.sock) as c:
        c.schedule(1, in_=60)
        c.schedule(2, in_=60)
        with pytest.raises(bitwheel.TooManyTimersError):
            c.schedule(3, in_=60)
        assert c.cancel(1) is True
        c.schedule(3, in_=60)


@triggers(pb.SHUTTING_DOWN)
def test_shutting_down(daemon, code):
    """Raised as it is with reconnect=False (test_reconnect.py: ridden
    through by default)."""
    c = bitwheel.Client(daemon.sock, session="sd", consume=True,
                        reconnect=False)
    daemon.send(signal.SIGTERM)
    with pytest.raises(bitwheel.ShuttingDownError) as e:
        c.next_fire(WAIT)
    assert e.value.connection_level and not c.connected
    with pytest.raises(bitwheel.ConnectionClosed):
        c.next_fire(0)
    assert daemon.proc.wait(WAIT) == 0


@pytest.mark.skipif(STORAGE_UNAVAILABLE is None, reason="no such code")
@triggers(STORAGE_UNAVAILABLE or -1)
def test_storage_unavailable(start_daemon, code):
    """A state directory that cannot be written (RLIMIT_FSIZE on the
    daemon below its journal's size, as tests/check_storage.c does): the
    Schedule the write failed on is held (here: Timeout), those after it
    are refused with STORAGE_UNAVAILABLE; lifting the limit heals it."""
    d = start_daemon("--max-payload", "8000", "--state-dir",
                     os.path.join("/tmp", f"bwpy-state-{os.getpid()}"))
    try:
        with bitwheel.Client(d.sock, session="disk", timeout=0.5) as held:
            for k in range(10):
                held.schedule(k, in_=3600, payload=b"x" * 8000)
            resource.prlimit(d.proc.pid, resource.RLIMIT_FSIZE,
                             (64 << 10, resource.RLIM_INFINITY))
            with pytest.raises(bitwheel.Timeout):
                held.schedule(10, in_=3600, payload=b"x" * 8000)
            with bitwheel.Client(d.sock, session="disk") as c:
                with pytest.raises(bitwheel.StorageUnavailableError) as e:
                    c.schedule(11, in_=3600)
                assert e.value.code == code and not e.value.connection_level
                with pytest.raises(bitwheel.StorageUnavailableError):
                    c.cancel(0)
                with pytest.raises(bitwheel.StorageUnavailableError):
                    bitwheel.Client(d.sock, session="new-session")
                assert c.stats().clients == 2   # the connections stay
                resource.prlimit(d.proc.pid, resource.RLIMIT_FSIZE,
                                 (resource.RLIM_INFINITY,
                                  resource.RLIM_INFINITY))
                # The daemon retries every 1 s at first.
                deadline = time.monotonic() + 2 * WAIT
                while True:
                    try:
                        c.schedule(11, in_=3600)
                        break
                    except bitwheel.StorageUnavailableError:
                        assert time.monotonic() < deadline, "no recovery"
                        time.sleep(0.1)
                assert c.cancel(10) is True   # the held one took effect
    finally:
        d.kill()
        shutil.rmtree(os.path.join("/tmp", f"bwpy-state-{os.getpid()}"),
                      ignore_errors=True)


AS_NOBODY = textwrap.dedent("""
    import sys, bitwheel
    try:
        %s
    except bitwheel.ServerError as e:
        print(type(e).__name__, e.code)
    else:
        print("no error")
""")


@triggers(pb.PERMISSION_DENIED)
def test_permission_denied(start_daemon, code):
    need_root("runs a client as another uid")
    d = start_daemon("--socket-mode", "0666")
    os.chmod(d.dir, 0o755)
    r = run_python(AS_NOBODY % (
        f"bitwheel.Client({d.sock!r}, session='x', owner_uid=0)"),
        user=NOBODY)
    assert r.stdout.split() == ["PermissionDeniedError", str(code)], r.stderr


@triggers(pb.OVER_BUDGET)
def test_over_budget(start_daemon, code):
    need_root("runs a client as another uid (root is exempt from budgets)")
    d = start_daemon("--socket-mode", "0666", "--max-sessions-per-uid", "1")
    os.chmod(d.dir, 0o755)
    r = run_python(AS_NOBODY % (
        f"a = bitwheel.Client({d.sock!r}, session='one'); "
        f"bitwheel.Client({d.sock!r}, session='two')"), user=NOBODY)
    assert r.stdout.split() == ["OverBudgetError", str(code)], r.stderr


@triggers(pb.UNKNOWN_SESSION)
def test_unknown_session(daemon, code):
    with bitwheel.Client(daemon.sock) as c:
        with pytest.raises(bitwheel.UnknownSessionError) as e:
            c.list_timers("nobody-made-this")
        assert e.value.code == code and not e.value.connection_level
        assert c.connected


@triggers(pb.PERMISSION_DENIED)
def test_permission_denied_listing(start_daemon, code):
    need_root("runs a client as another uid")
    d = start_daemon("--socket-mode", "0666")
    os.chmod(d.dir, 0o755)
    r = run_python(AS_NOBODY % (
        f"bitwheel.Client({d.sock!r}).list_timers('x', owner_uid=0)"),
        user=NOBODY)
    assert r.stdout.split() == ["PermissionDeniedError", str(code)], r.stderr
    r = run_python(AS_NOBODY % (
        f"c = bitwheel.Client({d.sock!r}); "
        f"assert all(s.owner_uid == {NOBODY} for s in c.list_sessions().entries); "
        f"c.list_sessions(owner_uid=0)"), user=NOBODY)
    assert r.stdout.split() == ["PermissionDeniedError", str(code)], r.stderr


@triggers(pb.HOLD_LIMIT)
def test_hold_limit(daemon, code):
    with bitwheel.Client(daemon.sock, session="held", consume=True,
                         ack_timeout=WAIT) as c:
        c.schedule(1, at_monotonic_ns=1)
        f = c.next_fire(WAIT)
        assert f is not None
        hold = c.limits.max_hold_ns
        with pytest.raises(bitwheel.HoldLimitError) as e:
            f.touch(hold / 1e9 + 1)
        assert e.value.code == code and not e.value.connection_level
        assert c.connected and f.ack(wait=True) == 1


def test_every_code_has_a_test():
    for v in pb.ErrorCode.DESCRIPTOR.values:
        if v.number not in TRIGGERED | UNTRIGGERABLE:
            pytest.skip(f"ErrorCode {v.name} ({v.number}) has no test in "
                        "bindings/python/tests/test_errors.py yet")
