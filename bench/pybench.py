#!/usr/bin/env python3
"""pybench.py - schedules per second from the Python client, beside
redis-py's ZADD against redis-server, in one run (bench/run-python.sh
starts both servers; see bench/README.md).

    pybench.py --bitwheel SOCK [--redis SOCK] [--count N] [--serial N]
               [--rounds R] [--out DIR]

Subjects, each timed over R rounds (median reported):
  bitwheel AsyncClient, pipelined   N schedules in flight at once
                                    (asyncio.gather), one connection
  bitwheel Client, one at a time    --serial N blocking schedules, each a
                                    round trip
  redis-py ZADD, pipelined          N ZADDs in one pipeline (no MULTI), the
                                    same work redis does for a timer queue
                                    (a sorted set scored by deadline)
  redis-py ZADD, one at a time      --serial N blocking ZADDs
Every schedule is a new key due in an hour (nothing fires during the run);
a round's timers are dropped between rounds (the anonymous session ends
with its connection; the sorted set is deleted).  Ratios are bitwheel's
rate over redis-py's in the same mode.  Output: DIR/python.md and
DIR/python.csv.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time

import bitwheel


def rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def bw_async(sock: str, n: int) -> float:
    async def main() -> float:
        async with bitwheel.AsyncClient(sock) as c:
            t0 = time.perf_counter()
            await asyncio.gather(*(c.schedule(k, in_=3600)
                                   for k in range(n)))
            return time.perf_counter() - t0
    return rate(n, asyncio.run(main()))


def bw_blocking(sock: str, n: int) -> float:
    with bitwheel.Client(sock) as c:
        t0 = time.perf_counter()
        for k in range(n):
            c.schedule(k, in_=3600)
        return rate(n, time.perf_counter() - t0)


def redis_pipelined(r, n: int) -> float:
    r.delete("bench:timers")
    base = time.monotonic_ns() + 3600 * 10**9
    t0 = time.perf_counter()
    p = r.pipeline(transaction=False)
    for k in range(n):
        p.zadd("bench:timers", {str(k): base + k})
    p.execute()
    took = time.perf_counter() - t0
    assert r.zcard("bench:timers") == n
    r.delete("bench:timers")
    return rate(n, took)


def redis_blocking(r, n: int) -> float:
    r.delete("bench:timers")
    base = time.monotonic_ns() + 3600 * 10**9
    t0 = time.perf_counter()
    for k in range(n):
        r.zadd("bench:timers", {str(k): base + k})
    took = time.perf_counter() - t0
    r.delete("bench:timers")
    return rate(n, took)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bitwheel", required=True, help="bitwheeld's socket")
    ap.add_argument("--redis", help="redis-server's Unix socket")
    ap.add_argument("--count", type=int, default=50000,
                    help="schedules per pipelined round (default 50000)")
    ap.add_argument("--serial", type=int, default=10000,
                    help="schedules per one-at-a-time round (default 10000)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=".")
    a = ap.parse_args()

    redis_client = None
    why_no_redis = "no --redis socket"
    if a.redis:
        try:
            import redis
            redis_client = redis.Redis(unix_socket_path=a.redis)
            redis_client.ping()
        except ImportError:
            why_no_redis = "python3-redis is not installed"
        except Exception as e:   # a server that did not come up
            redis_client, why_no_redis = None, f"redis: {e}"

    subjects = [
        ("pipelined", "bitwheel AsyncClient", a.count,
         lambda: bw_async(a.bitwheel, a.count)),
        ("one at a time", "bitwheel Client", a.serial,
         lambda: bw_blocking(a.bitwheel, a.serial)),
    ]
    if redis_client is not None:
        subjects += [
            ("pipelined", "redis-py ZADD", a.count,
             lambda: redis_pipelined(redis_client, a.count)),
            ("one at a time", "redis-py ZADD", a.serial,
             lambda: redis_blocking(redis_client, a.serial)),
        ]
    rates: dict[tuple[str, str], list[float]] = {}
    # Rounds interleave the subjects, so a slow spell of the shared
    # machine falls on all of them alike.
    for _ in range(a.rounds):
        for mode, name, _n, fn in subjects:
            rates.setdefault((mode, name), []).append(fn())

    from google.protobuf.internal import api_implementation
    os.makedirs(a.out, exist_ok=True)
    lines = [
        "# Python client: schedules per second",
        "",
        f"`bench/run-python.sh`, {time.strftime('%Y-%m-%d')}: "
        f"{platform.python_implementation()} {platform.python_version()}, "
        f"protobuf {api_implementation.Type()} implementation, "
        f"{os.cpu_count()} CPUs; median of {a.rounds} rounds, "
        f"interleaved; {a.count} schedules per pipelined round, "
        f"{a.serial} per one-at-a-time round; each a new key due in an hour.",
        "",
        "| mode | subject | schedules/s (median) | rounds | vs redis-py |",
        "|---|---|---:|---|---:|",
    ]
    csv = ["mode,subject,median_per_s,rounds_per_s"]
    for mode, name, _n, _fn in subjects:
        rs = rates[(mode, name)]
        med = statistics.median(rs)
        peer = rates.get((mode, "redis-py ZADD"))
        ratio = f"{med / statistics.median(peer):.2f}x" if peer else "-"
        lines.append(f"| {mode} | {name} | {med:,.0f} | "
                     f"{', '.join(f'{r:,.0f}' for r in rs)} | {ratio} |")
        csv.append(f"{mode},{name},{med:.0f},"
                   f"{' '.join(f'{r:.0f}' for r in rs)}")
    if redis_client is None:
        lines += ["", f"redis-py left out: {why_no_redis}."]
    with open(os.path.join(a.out, "python.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(a.out, "python.csv"), "w") as f:
        f.write("\n".join(csv) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
