#!/usr/bin/env python3
"""burst.py - what one uid's burst costs another's fires (issue 12).

A burst is every timer of one session due at the same instant: the daemon
fires them in one go, about 0.4 us each, and a fire of another session due
just after that instant waits for the whole burst.  For each N, against a
fresh bitwheeld on a temporary socket: session "burst" schedules N oneshots
due at T (pipelined from an AsyncClient), session "victim" a oneshot every
2 ms from T - 200 ms to T + 200 ms, consumed and acknowledged; prints the
victim's lateness at receipt, p50/p99/max in ms, one Markdown row per N.

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


async def run(sock: str, n: int) -> list[float]:
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
    late = []
    async with bitwheel.AsyncClient(sock, session="victim", consume=True) as v:
        for i in range(VICTIM):
            await v.schedule(i, at_monotonic_ns=t - VICTIM // 2 * STEP_NS + i * STEP_NS)
        for _ in range(VICTIM):
            f = await v.next_fire(30)
            late.append((time.monotonic_ns() - f.deadline_ns) / 1e6)
            await f.ack()
    return sorted(late)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--daemon", required=True, help="the bitwheeld to run")
    ap.add_argument("sizes", nargs="+", type=int, help="timers per burst")
    args = ap.parse_args()
    print("| burst (timers due at one instant) | victim p50 ms | p99 ms | max ms |")
    print("|---|---|---|---|")
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
                late = asyncio.run(run(sock, n))
            finally:
                d.terminate()
                d.wait(10)
        p99 = late[min(len(late) - 1, int(len(late) * 0.99))]
        print(f"| {n:,} | {late[len(late) // 2]:.2f} | {p99:.2f} | {late[-1]:.2f} |",
              flush=True)


if __name__ == "__main__":
    sys.exit(main())
