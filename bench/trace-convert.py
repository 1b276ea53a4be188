#!/usr/bin/python3
"""trace-convert.py - a kernel timer trace as an operation stream for bwbench.

    bench/trace-convert.py TRACE [-o STREAM] [--tick-us N] [--hz N]
                                 [--horizon-s N] [--stats] [--trim OUT]

TRACE is the text of ftrace's "trace" file as bench/trace-capture.sh
writes it (plain, .xz or .gz): timer:timer_start, timer_cancel,
timer_expire_entry, hrtimer_start, hrtimer_cancel and hrtimer_expire_entry
events, with the trace clock "mono".  The output (-o, default standard
output) is a stream of inserts, cancels and polls in the format below,
which `bwbench --trace STREAM` replays against every subject.

Which timers: those a user process sleeps, polls or waits on, by the
function the kernel runs when they expire -- hrtimer_wakeup (nanosleep,
poll, select, epoll_wait, futex and other sleeps with a timeout),
timerfd_tmrproc (timerfds), posix_timer_fn (timer_create), it_real_fn
(setitimer, alarm), alarmtimer_fired (the _ALARM clocks) and
process_timeout (schedule_timeout) -- armed by a process that is not a
kernel thread (the pids in the trace's "# bwtrace kthreads" line) and not
in interrupt context without a process (pid 0).  Everything else is the
kernel's own and is left out: its tick (tick_nohz_handler,
tick_sched_timer), workqueues, networking, RCU.

How events become operations:
  - a start of a timer that is not armed: an insert of a fresh id, due at
    softexpires for an hrtimer (the earliest the kernel may run it), or at
    the event's time + (expires - jiffies) / HZ for a timer_list timer
    (jiffies from the event's own timeout, HZ from the trace's pairs of
    time and jiffies, or --hz); an hrtimer on CLOCK_REALTIME carries
    realtime, and the header's offset brings it to CLOCK_MONOTONIC
    (CLOCK_BOOTTIME's offset is taken as 0: it is the time the host spent
    suspended);
  - a start of an armed timer (a re-arm, with or without a cancel event of
    its own): a cancel of the old id and an insert of a new one;
  - a cancel of an armed timer: a cancel -- unless the next event on the
    same CPU is that timer's expiry, which is how the kernel takes an
    expiring timer_list timer off its wheel (then it is the expiry);
  - an expiry: nothing: the replay's polls fire the timer;
  - a poll every --tick-us (default 1000) of trace time, from the first
    event's tick to the last event.
Three rules keep the stream one that every subject can replay exactly: a
deadline at or before the last poll (a timer armed already due) is moved
to the last poll + 1 ns, so it fires at the next poll; a deadline exactly
on a poll is moved 1 ns earlier, so that it fires at that poll in every
subject (libev fires a timer only at a poll strictly after it, and its
double-precision seconds may round either way there); a cancel, or the
cancel of a re-arm, of a timer whose deadline the replay's polls have
already passed (the kernel ran it late) is dropped: the replay fired it.
A timer due more than --horizon-s (default 3600) after it was armed is
left out (with its cancel), as beyond what the wheels under test hold.

The stream (text, one record a line, numbers decimal, times in ns):
    bwstream 1                 first line
    # ...                      comments (what the trace was, the counts)
    tick NS                    poll period
    events N                   trace events the stream stands for (the
                               kept timers' starts, cancels and expiries)
    start NS                   the clock when the replay begins
    i ID DEADLINE              insert timer ID (0, 1, 2, ... in order)
    c ID                       cancel timer ID (pending in the replay)
    p NOW                      poll at NOW (non-decreasing)
    end                        last line
Times are the trace's CLOCK_MONOTONIC less the first poll's, plus
1,000 s (bwbench's other scenarios start there).

A comment "# model fired N idsum S late_sum_ns L" gives what a subject
that fires every timer at the first poll at or after its deadline must
have fired (tests/check_trace.sh checks bwbench's subjects against it).

--stats prints the description bench/README.md gives of each trace (to
standard error); --trim OUT writes the trace with only the header, the
kept timers' events and of those the fields read here, which converts to
the same stream (how the traces in bench/traces/ are committed small).
"""
import argparse
import bisect
import gzip
import lzma
import re
import sys

KEEP = {"hrtimer_wakeup", "timerfd_tmrproc", "posix_timer_fn", "it_real_fn",
        "alarmtimer_fired", "process_timeout"}
TICK = {"tick_nohz_handler", "tick_sched_timer"}
EVENTS = {"timer_start", "timer_cancel", "timer_expire_entry",
          "hrtimer_start", "hrtimer_cancel", "hrtimer_expire_entry"}
BASE_NS = 1000 * 10**9
REALTIME_FLOOR_NS = 10**17      # ~3 years: no uptime gets there
HZ_CHOICES = (100, 250, 300, 1000)
LOOKAHEAD = 64                  # events searched for a cancel's expiry

# "comm-pid [cpu] flags sec.usec: event: fields", with "(tgid)" after the
# pid when the record-tgid option is on
LINE = re.compile(r"^\s*(.*)-(\d+)\s+(?:\(\s*[\d-]+\)\s+)?\[(\d+)\]\s+\S+\s+"
                  r"(\d+)\.(\d+):\s+(\w+):\s+(.*)$")
FIELD = re.compile(r"(\w+)=(\S*)")
TIMEOUT = re.compile(r"\[timeout=(-?\d+)\]")


class Event:
    __slots__ = ("line", "pid", "cpu", "ns", "name", "f", "timeout")

    def trimmed(self):
        """The line with only what this converter reads."""
        m = LINE.match(self.line)
        kind = "hrtimer" if self.name.startswith("hrtimer") else "timer"
        keep = [kind + "=" + self.f[kind]]
        if self.name.endswith("_start") or self.name.endswith("_entry"):
            keep.append("function=" + self.f.get("function", ""))
        if self.name == "hrtimer_start":
            keep.append("softexpires=" + self.f["softexpires"])
        elif self.name == "timer_start":
            keep.append("expires=%s [timeout=%d]" % (self.f["expires"],
                                                     self.timeout))
        flags = re.search(r"\]\s+(\S+)\s+\d+\.\d+:", self.line).group(1)
        return "%s-%s [%s] %s %s.%s: %s: %s\n" % (
            m.group(1).strip(), m.group(2), m.group(3), flags, m.group(4),
            m.group(5), self.name, " ".join(keep))


def die(msg):
    sys.exit("trace-convert.py: " + msg)


def open_trace(path):
    if path.endswith(".xz"):
        return lzma.open(path, "rt")
    if path.endswith(".gz"):
        return gzip.open(path, "rt")
    return open(path)


def parse(path):
    header, events = [], []
    kthreads, rt_off, origin, hz, end = set(), None, None, None, None
    with open_trace(path) as fh:
        for n, line in enumerate(fh, 1):
            if line.startswith("#"):
                if line.startswith("# bwtrace"):
                    header.append(line)
                    w = line.split()
                    if w[2] == "kthreads":
                        kthreads = {int(x) for x in w[3:]}
                    elif w[2] == "clock_offsets_ns":
                        rt_off = int(w[5])
                    elif w[2] == "origin_ns":     # a trimmed trace's
                        origin = int(w[3])
                    elif w[2] == "hz":
                        hz = int(w[3])
                    elif w[2] == "end_ns":
                        end = int(w[3])
                continue
            m = LINE.match(line)
            if not m:
                if line.strip():
                    die("%s:%d: not an ftrace event line" % (path, n))
                continue
            if m.group(6) not in EVENTS:
                continue
            e = Event()
            e.line = line
            e.pid = int(m.group(2))
            e.cpu = int(m.group(3))
            frac = m.group(5)
            e.ns = int(m.group(4)) * 10**9 + int(frac) * 10**(9 - len(frac))
            e.name = m.group(6)
            e.f = dict(FIELD.findall(m.group(7)))
            t = TIMEOUT.search(m.group(7))
            e.timeout = int(t.group(1)) if t else None
            if "hrtimer" not in e.f and "timer" not in e.f:
                die("%s:%d: no timer in %s" % (path, n, e.name))
            events.append(e)
    if rt_off is None:
        die("%s: no '# bwtrace clock_offsets_ns' line (not from "
            "bench/trace-capture.sh?)" % path)
    for a, b in zip(events, events[1:]):
        if b.ns < a.ns:
            die("%s: events out of time order" % path)
    if end is None and events:
        end = events[-1].ns
    return header, events, kthreads, rt_off, origin, hz, end


def estimate_hz(events):
    """HZ from the timer_list starts: jiffies = expires - timeout."""
    pts = [(e.ns, int(e.f["expires"]) - e.timeout) for e in events
           if e.name == "timer_start" and e.timeout is not None]
    if len(pts) < 2 or pts[-1][0] - pts[0][0] < 10**9 // 2:
        return None
    hz = (pts[-1][1] - pts[0][1]) * 1e9 / (pts[-1][0] - pts[0][0])
    best = min(HZ_CHOICES, key=lambda h: abs(h - hz))
    return best if abs(best - hz) < 0.1 * best else None


def pctl(xs, p):
    if not xs:
        return 0
    xs = sorted(xs)
    return xs[max(0, min(len(xs) - 1, -(-len(xs) * p // 100) - 1))]


def fmt_ns(ns):
    for unit, div in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if ns >= div:
            return "%.3g %s" % (ns / div, unit)
    return "%d ns" % ns


def model(records, tick):
    """What a subject that fires each timer at the first poll at or after
    its deadline must fire: (timers, sum of their ids, sum of their
    lateness in ns).  The polls are every tick from the first, so that
    poll is the deadline rounded up to the grid; bwbench's check (trace.c)
    works it out its own way, and tests/check_trace.sh compares."""
    first = last = None
    deadline, cancelled = {}, set()
    for r in records:
        w = r.split()
        if w[0] == "p":
            first = int(w[1]) if first is None else first
            last = int(w[1])
        elif w[0] == "i":
            deadline[int(w[1])] = int(w[2])
        else:
            cancelled.add(int(w[1]))
    fired = idsum = late = 0
    for i, d in deadline.items():
        if i in cancelled or d > last:
            continue
        fired += 1
        idsum += i
        late += first + -(-(d - first) // tick) * tick - d
    return fired, idsum, late


def convert(args):
    header, events, kthreads, rt_off, origin, hz, end = parse(args.trace)
    if not events:
        die("%s: no timer events" % args.trace)
    hz = args.hz or hz or estimate_hz(events)
    if hz is None:
        if any(e.name == "timer_start" for e in events):
            die("cannot tell HZ from the trace (under half a second of "
                "timer_list starts); give --hz")
        hz = 250        # unused: no timer_list timer
    tick = args.tick_us * 1000
    horizon = args.horizon_s * 10**9
    if origin is None:
        origin = events[0].ns // tick * tick
    elif origin % tick or origin > events[0].ns:
        die("the trace's origin_ns does not suit --tick-us %d" % args.tick_us)
    def st(ns):
        return ns - origin + BASE_NS

    # a cancel followed on its CPU by the same timer's expiry is the expiry
    expiry_cancel = set()
    for i, e in enumerate(events):
        if not e.name.endswith("_cancel"):
            continue
        key = e.f.get("hrtimer") or e.f.get("timer")
        for j in range(i + 1, min(len(events), i + 1 + LOOKAHEAD)):
            o = events[j]
            if o.cpu != e.cpu:
                continue
            if o.name.endswith("_expire_entry") and \
                    (o.f.get("hrtimer") or o.f.get("timer")) == key:
                expiry_cancel.add(i)
            break

    out = []                # the stream's records
    kept_lines = []
    armed = {}              # key -> [id or None, stream deadline, start ns]
    nid = 0
    last_poll = None
    next_poll = origin
    c = dict(events=len(events), kept=0, tick=0, kernel=0, inserts=0,
             cancels=0, rearms=0, expiries=0, clamped=0, beyond=0,
             fired_first=0, hr=0, tl=0, realtime=0, on_grid=0)
    timeouts, lifetimes = [], []
    for i, e in enumerate(events):
        while next_poll <= e.ns:
            out.append("p %d" % st(next_poll))
            last_poll = next_poll
            next_poll += tick
        hr = e.name.startswith("hrtimer")
        key = ("h" if hr else "t") + (e.f["hrtimer"] if hr else e.f["timer"])
        a = armed.get(key)
        if e.name.endswith("_start"):
            fn = e.f.get("function", "")
            keep = fn in KEEP and e.pid != 0 and e.pid not in kthreads
            if a is not None:
                # a re-arm: the old timer goes, whatever the new one is
                del armed[key]
                if a[0] is not None:
                    c["kept"] += 1
                    if a[1] > st(last_poll):
                        out.append("c %d" % a[0])
                        c["rearms"] += 1
                        lifetimes.append(e.ns - a[2])
                    else:
                        c["fired_first"] += 1
                    kept_lines.append(e)        # it ends a kept timer
            if not keep:
                if fn in TICK:
                    c["tick"] += 1
                elif a is None or a[0] is None:
                    c["kernel"] += 1
                continue
            if a is None or a[0] is None:
                c["kept"] += 1
                kept_lines.append(e)
            if hr:
                d = int(e.f["softexpires"])
                if d - e.ns > REALTIME_FLOOR_NS:
                    d -= rt_off
                    c["realtime"] += 1
                c["hr"] += 1
            else:
                d = e.ns + e.timeout * 10**9 // hz
                c["tl"] += 1
            timeouts.append(max(0, d - e.ns))
            if d - e.ns > horizon:
                armed[key] = [None, 0, e.ns]
                c["beyond"] += 1
                continue
            d = st(d)
            floor = st(last_poll) + 1 if last_poll is not None else 0
            if d < floor:
                d = floor
                c["clamped"] += 1
            elif (d - BASE_NS) % tick == 0:
                d -= 1
                c["on_grid"] += 1
            out.append("i %d %d" % (nid, d))
            armed[key] = [nid, d, e.ns]
            nid += 1
            c["inserts"] += 1
            continue
        if a is None:
            # not a kept timer (or armed before the trace began)
            if e.f.get("function") in TICK:
                c["tick"] += 1
            else:
                c["kernel"] += 1
            continue
        c["kept"] += 1
        kept_lines.append(e)
        if e.name.endswith("_expire_entry"):
            del armed[key]
            if a[0] is not None:
                c["expiries"] += 1
            continue
        if i in expiry_cancel:
            continue        # its expiry follows
        del armed[key]
        if a[0] is None:
            continue
        if a[1] > st(last_poll):
            out.append("c %d" % a[0])
            c["cancels"] += 1
            lifetimes.append(e.ns - a[2])
        else:
            c["fired_first"] += 1
    while True:
        out.append("p %d" % st(next_poll))
        if next_poll > end:
            break
        next_poll += tick

    secs = (end - origin) / 1e9
    ended = c["cancels"] + c["rearms"]
    ratio = ended / max(1, ended + c["expiries"] + c["fired_first"])
    desc = [
        "trace %s: %.2f s, HZ %d, %d timer events (%d the tick's, %d other "
        "kernel timers', %d kept)" % (args.trace, secs, hz, c["events"],
                                      c["tick"], c["kernel"], c["kept"]),
        "kept: %d starts (%d hrtimer, %d of them realtime; %d timer_list), "
        "%d cancels, %d re-arms, %d expiries, %d ended by the replay's poll "
        "first; %d beyond the horizon, %d already due, %d due on a poll" % (
            c["hr"] + c["tl"], c["hr"], c["realtime"], c["tl"], c["cancels"],
            c["rearms"], c["expiries"], c["fired_first"], c["beyond"],
            c["clamped"], c["on_grid"]),
        "cancelled (cancel or re-arm) %.1f %% of those that ended, after a "
        "median %s" % (100 * ratio, fmt_ns(pctl(lifetimes, 50))),
        "timeouts p50 %s, p90 %s, p99 %s" % (
            fmt_ns(pctl(timeouts, 50)), fmt_ns(pctl(timeouts, 90)),
            fmt_ns(pctl(timeouts, 99))),
        "stream: %d inserts, %d cancels, %d polls (tick %d us)" % (
            c["inserts"], c["cancels"] + c["rearms"],
            sum(1 for r in out if r[0] == "p"), args.tick_us),
    ]
    if args.trim:
        with (lzma.open(args.trim, "wt", preset=9 | lzma.PRESET_EXTREME)
              if args.trim.endswith(".xz") else open(args.trim, "w")) as fh:
            # what the stream needs and the dropped events would have told
            fh.writelines(h for h in header if h.split()[2] not in
                          ("origin_ns", "hz", "end_ns", "trimmed"))
            fh.write("# bwtrace trimmed: the kept timers' events only "
                     "(bench/trace-convert.py --trim); of: %s\n" % desc[0])
            fh.write("# bwtrace origin_ns %d\n# bwtrace end_ns %d\n"
                     "# bwtrace hz %d\n" % (origin, end, hz))
            fh.writelines(e.trimmed() for e in kept_lines)

    if args.stats:
        sys.stderr.write("\n".join(desc) + "\n")
    if args.output == "-":
        fh = sys.stdout
    else:
        fh = open(args.output, "w")
    with fh:
        fh.write("bwstream 1\n")
        for h in header:
            fh.write("# " + h[2:].strip() + "\n")
        for d in desc:
            fh.write("# " + d + "\n")
        fh.write("# model fired %d idsum %d late_sum_ns %d\n" % model(out, tick))
        fh.write("tick %d\nevents %d\nstart %d\n" % (tick, c["kept"],
                                                     st(origin)))
        fh.write("\n".join(out))
        fh.write("\nend\n")


def main():
    ap = argparse.ArgumentParser(
        description="a kernel timer trace (bench/trace-capture.sh) as "
        "bwbench's operation stream")
    ap.add_argument("trace")
    ap.add_argument("-o", "--output", default="-")
    ap.add_argument("--tick-us", type=int, default=1000)
    ap.add_argument("--hz", type=int)
    ap.add_argument("--horizon-s", type=int, default=3600)
    ap.add_argument("--stats", action="store_true")
    ap.add_argument("--trim")
    args = ap.parse_args()
    if not 1 <= args.tick_us <= 10**6:
        die("--tick-us must be 1..1000000")
    if args.hz is not None and args.hz not in HZ_CHOICES:
        die("--hz must be one of %s" % ", ".join(map(str, HZ_CHOICES)))
    if not 1 <= args.horizon_s <= 10**6:
        die("--horizon-s must be 1..1000000")
    try:
        convert(args)
    except (OSError, EOFError, lzma.LZMAError) as e:
        die(str(e))


if __name__ == "__main__":
    main()
