#!/usr/bin/env python3
"""burst.py - what one uid's burst costs another's fires (issue 12).

A burst is every timer of one session due at the same instant: the daemon
fires them in one go, about 0.4 us each, and a fire of another session due
just after that instant waits for the whole burst.  For each N, against a
fresh bitwheeld on a temporary socket: session "burst" schedules N oneshots
due at T (pipelined from an AsyncClient), session "victim" a oneshot every
2 ms from T - 200 ms to T + 200 ms, consumed and acknowledged, and session
"probe" a Schedule of a far timer every 1 ms from T - 100 ms to T + 300 ms,
each awaited; prints the victim's lateness at receipt and the probe's round
trips, p50/p99/max in ms, one Markdown row per N.  The fires due just after
the instant wait for the burst's (the wheel fires in deadline order); the
probe shows whether the daemon's loop still serves requests meanwhile.

    PYTHONPATH=<build>/bindings/python/stage \\
        python3 bench/burst.py --daemon <build>/daemon/bitwheeld 20000 100000

By default all three sessions belong to the caller's uid.  As root,
--burst-uid UID schedules the burst from a process of that uid (the
daemon's socket opened to all), so that the burst and the victim are two
users', each in its own overflow store (daemon/wheels.c); a size of 0
then means the burst uid's whole default budget: it schedules until the
daemon refuses.  --arm-ahead S arms each victim timer S seconds before
its deadline (default: all of them at once, right after the burst) and
--span MS spreads the victim's deadlines over T - MS .. T + MS (default
200).  Issue 22's case, one uid's full budget at T and another's timers
armed 3 s ahead over T - 0.6 s .. T + 0.6 s:

    python3 bench/burst.py --daemon <build>/daemon/bitwheeld \\
        --burst-uid 65534 --arm-ahead 3 --span 600 --lead 30 0

Bounded: each N's run takes about T's lead (--lead, 8 s) plus the burst.
"""
import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time

import bitwheel

STEP_NS = 2_000_000

# The burst's producer when it runs as another uid: argv sock, n, t; n 0
# schedules until refused.  A session's max-timers full, it goes on in a
# new session (the uid's budget is 4 sessions' worth), until one takes none.  Prints how many
# the daemon took.
BURST_CHILD = """
import asyncio, sys, bitwheel
async def main(sock, n, t):
    took, clients = 0, []
    while n == 0 or took < n:
        c = bitwheel.AsyncClient(sock, session=f"burst{len(clients)}")
        await c.__aenter__()
        clients.append(c)
        k, full, here = 0, None, 0
        while full is None and (n == 0 or took < n):
            m = 5000 if n == 0 else min(5000, n - took)
            rs = await asyncio.gather(*(c.schedule(k + i, at_monotonic_ns=t) for i in range(m)),
                                      return_exceptions=True)
            here += sum(1 for r in rs if not isinstance(r, BaseException))
            k += m
            full = next((r for r in rs if isinstance(r, BaseException)), None)
        took += here
        if full is None:
            break
        if not here or not isinstance(full, bitwheel.TooManyTimersError):
            if not isinstance(full, bitwheel.ServerError):
                raise full
            break
    print(took, flush=True)
    await asyncio.sleep(3600)
asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
"""


async def probe(sock: str, start_ns: int, end_ns: int) -> list[float]:
    rtts = []
    async with bitwheel.AsyncClient(sock, session="probe") as c:
        await asyncio.sleep(max(0, start_ns - time.monotonic_ns()) / 1e9)
        k = 0
        while time.monotonic_ns() < end_ns:
            t0 = time.monotonic_ns()
            await c.schedule(k, in_=3600, replace=True)
            rtts.append((time.monotonic_ns() - t0) / 1e6)
            k = (k + 1) % 1000
            await asyncio.sleep(0.001)
    return sorted(rtts)


async def victim(sock: str, t: int, span_ns: int, ahead_ns: int | None) -> list[float]:
    late = []
    deadlines = list(range(t - span_ns, t + span_ns, STEP_NS))
    async with bitwheel.AsyncClient(sock, session="victim", consume=True) as v:
        async def arm() -> None:
            for i, d in enumerate(deadlines):
                if ahead_ns is not None:
                    await asyncio.sleep(max(0, d - ahead_ns - time.monotonic_ns()) / 1e9)
                await v.schedule(i, at_monotonic_ns=d)

        armer = asyncio.create_task(arm())
        for _ in deadlines:
            f = await v.next_fire(30)
            late.append((time.monotonic_ns() - f.deadline_ns) / 1e6)
            await f.ack()
        await armer
    return sorted(late)


async def burst_here(sock: str, n: int, t: int) -> int:
    async with bitwheel.AsyncClient(sock, session="burst") as a:
        pending = []
        for k in range(n):
            pending.append(a.schedule(k, at_monotonic_ns=t))
            if len(pending) >= 5000:
                await asyncio.gather(*pending)
                pending = []
        await asyncio.gather(*pending)
    return n


async def run(sock: str, n: int, args: argparse.Namespace) -> tuple[int, list[float], list[float]]:
    lead = int(args.lead * 1e9)
    t = time.monotonic_ns() + lead
    span = args.span * 1_000_000
    child = None
    if args.burst_uid is None:
        took = await burst_here(sock, n, t)
    else:
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", BURST_CHILD, sock, str(n), str(t),
            stdout=asyncio.subprocess.PIPE, user=args.burst_uid, group=args.burst_uid,
            extra_groups=[], env=dict(os.environ))
        line = await asyncio.wait_for(child.stdout.readline(), lead / 1e9)
        took = int(line)
    try:
        if time.monotonic_ns() > t - span - (args.arm_ahead or 0) * 1e9:
            raise SystemExit(f"burst.py: {took} schedules outlasted the {args.lead:.0f} s lead (--lead)")
        ahead = None if args.arm_ahead is None else int(args.arm_ahead * 1e9)
        late, rtts = await asyncio.gather(
            victim(sock, t, span, ahead), probe(sock, t - 100_000_000, t + 300_000_000))
    finally:
        if child:
            child.kill()
            await child.wait()
    return took, late, rtts


def pcts(xs: list[float]) -> str:
    p99 = xs[min(len(xs) - 1, int(len(xs) * 0.99))]
    return f"{xs[len(xs) // 2]:.2f} | {p99:.2f} | {xs[-1]:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--daemon", required=True, help="the bitwheeld to run")
    ap.add_argument("--burst-uid", type=int,
                    help="schedule the burst as this uid (root only)")
    ap.add_argument("--arm-ahead", type=float,
                    help="arm each victim timer this many seconds before its deadline")
    ap.add_argument("--lead", type=float, default=8,
                    help="T is this many seconds after the start (8)")
    ap.add_argument("--span", type=int, default=200,
                    help="victim deadlines from T - SPAN to T + SPAN ms")
    ap.add_argument("sizes", nargs="+", type=int,
                    help="timers per burst (0 with --burst-uid: its whole budget)")
    args = ap.parse_args()
    print("| burst (timers due at one instant) | victim p50 ms | p99 ms | max ms"
          " | probe round trip p50 ms | p99 ms | max ms |")
    print("|---|---|---|---|---|---|---|")
    for n in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            sock = os.path.join(tmp, "sock")
            cmd = [args.daemon, "--socket", sock]
            if args.burst_uid is None:
                victims = 2 * args.span * 1_000_000 // STEP_NS
                cmd += ["--max-timers", str(max(n + victims, 65536)),
                        "--max-timers-per-uid", str(2 * n + 2 * victims)]
            else:
                os.chmod(tmp, 0o755)
                cmd += ["--socket-mode", "0666"]
            d = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
            try:
                for _ in range(100):
                    if os.path.exists(sock):
                        break
                    time.sleep(0.05)
                took, late, rtts = asyncio.run(run(sock, n, args))
            finally:
                d.terminate()
                d.wait(10)
        print(f"| {took:,} | {pcts(late)} | {pcts(rtts)} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
