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

Both sessions belong to the caller's uid: the wheel does not tell uids
apart, so the figures are those of two users'.  Bounded: each N's run
takes about T's lead (8 s) plus the burst.
"""
import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time

import bitwheel

LEAD_NS = 8_000_000_000
VICTIM = 200
STEP_NS = 2_000_000


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


async def victim(sock: str, t: int) -> list[float]:
    late = []
    async with bitwheel.AsyncClient(sock, session="victim", consume=True) as v:
        for i in range(VICTIM):
            await v.schedule(i, at_monotonic_ns=t - VICTIM // 2 * STEP_NS + i * STEP_NS)
        for _ in range(VICTIM):
            f = await v.next_fire(30)
            late.append((time.monotonic_ns() - f.deadline_ns) / 1e6)
            await f.ack()
    return sorted(late)


async def run(sock: str, n: int) -> tuple[list[float], list[float]]:
    t = time.monotonic_ns() + LEAD_NS
    async with bitwheel.AsyncClient(sock, session="burst") as a:
        pending = []
        for k in range(n):
            pending.append(a.schedule(k, at_monotonic_ns=t))
            if len(pending) >= 5000:
                await asyncio.gather(*pending)
                pending = []
        await asyncio.gather(*pending)
    if time.monotonic_ns() > t - VICTIM // 2 * STEP_NS:
        raise SystemExit(f"burst.py: {n} schedules outlasted the {LEAD_NS / 1e9:.0f} s lead")
    late, rtts = await asyncio.gather(
        victim(sock, t), probe(sock, t - 100_000_000, t + 300_000_000))
    return late, rtts


def pcts(xs: list[float]) -> str:
    p99 = xs[min(len(xs) - 1, int(len(xs) * 0.99))]
    return f"{xs[len(xs) // 2]:.2f} | {p99:.2f} | {xs[-1]:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--daemon", required=True, help="the bitwheeld to run")
    ap.add_argument("sizes", nargs="+", type=int, help="timers per burst")
    args = ap.parse_args()
    print("| burst (timers due at one instant) | victim p50 ms | p99 ms | max ms"
          " | probe round trip p50 ms | p99 ms | max ms |")
    print("|---|---|---|---|---|---|---|")
    for n in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            sock = os.path.join(tmp, "sock")
            d = subprocess.Popen([args.daemon, "--socket", sock,
                                  "--max-timers", str(max(n + VICTIM, 65536)),
                                  "--max-timers-per-uid", str(2 * n + 2 * VICTIM)],
                                 stderr=subprocess.DEVNULL)
            try:
                for _ in range(100):
                    if os.path.exists(sock):
                        break
                    time.sleep(0.05)
                late, rtts = asyncio.run(run(sock, n))
            finally:
                d.terminate()
                d.wait(10)
        print(f"| {n:,} | {pcts(late)} | {pcts(rtts)} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
