# bench/: the wheel benchmark (bwbench, against libev, libuv, libevent and
# a libbsd red-black tree) and its scripts.  Peers configure did not find
# are left out of the build; bwbench --list names them.

noinst_PROGRAMS += bench/bwbench
bench_bwbench_SOURCES = \
	bench/bench.h \
	bench/bwbench.c \
	bench/scenario.c \
	bench/trace.c \
	bench/runner.c \
	bench/timing.c \
	bench/simclock.c \
	bench/stats.c \
	bench/report.c \
	bench/objpool.c \
	bench/subjects.c \
	bench/subject_bitwheel.c
bench_bwbench_CPPFLAGS = $(AM_CPPFLAGS)
# -no-install: a real executable (no libtool wrapper script), so valgrind
# and the interposed clock_gettime see bwbench itself.
bench_bwbench_LDFLAGS = -no-install
bench_bwbench_LDADD = wheel/libbitwheel.la -lm

# libevent before libev: Debian's libev.so also exports libevent's API
# (event_add, event_base_loop, ... as an emulation layer), and the first
# library on the link line wins those names.  subject_libevent.c checks.
if BENCH_HAVE_LIBEVENT
bench_bwbench_SOURCES += bench/subject_libevent.c
bench_bwbench_CPPFLAGS += -DBENCH_HAVE_LIBEVENT $(LIBEVENT_CFLAGS)
bench_bwbench_LDADD += $(LIBEVENT_LIBS)
endif
if BENCH_HAVE_LIBEV
bench_bwbench_SOURCES += bench/subject_libev.c
bench_bwbench_CPPFLAGS += -DBENCH_HAVE_LIBEV $(BENCH_LIBEV_CFLAGS)
bench_bwbench_LDADD += $(BENCH_LIBEV_LIBS)
endif
if BENCH_HAVE_LIBBSD
bench_bwbench_SOURCES += bench/subject_rbtree.c
bench_bwbench_CPPFLAGS += -DBENCH_HAVE_LIBBSD $(BENCH_LIBBSD_CFLAGS)
endif
if BENCH_HAVE_LIBUV
bench_bwbench_SOURCES += bench/subject_libuv.c
bench_bwbench_CPPFLAGS += -DBENCH_HAVE_LIBUV $(BENCH_LIBUV_CFLAGS)
bench_bwbench_LDADD += $(BENCH_LIBUV_LIBS)
endif

EXTRA_DIST += \
	bench/README.md \
	bench/run-wheel.sh \
	bench/callgrind.sh \
	bench/plot.sh \
	bench/plot-service.sh

# The trace scenario's capture and converter, and the committed traces
# (tests/check_trace.sh replays them).
EXTRA_DIST += \
	bench/trace-capture.sh \
	bench/trace-convert.py \
	bench/traces/build.trace.xz \
	bench/traces/host.trace.xz \
	bench/traces/redis.trace.xz

# bench/bwload: the service benchmark (bench/run-service.sh): bitwheeld
# through libbitwheel-client against a raw Unix-socket echo and, with
# hiredis, redis-server.  Without hiredis it builds without the redis
# subjects and says so.
noinst_PROGRAMS += bench/bwload
bench_bwload_SOURCES = \
	bench/bwload.h \
	bench/bwload.c \
	bench/load_stats.c \
	bench/load_echo.c \
	bench/load_bitwheel.c \
	bench/load_leeway.h \
	bench/load_leeway.c
bench_bwload_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/client
bench_bwload_LDFLAGS = -no-install
bench_bwload_LDADD = client/libbitwheel-client.la
if BENCH_HAVE_HIREDIS
bench_bwload_SOURCES += bench/load_redis.c
bench_bwload_CPPFLAGS += -DBENCH_HAVE_HIREDIS $(BENCH_HIREDIS_CFLAGS)
bench_bwload_LDADD += $(BENCH_HIREDIS_LIBS)
endif
EXTRA_DIST += bench/run-service.sh bench/servers.sh bench/run-leeway.sh

# bench/bwdurable: the durability benchmark's helpers
# (bench/run-durable.sh): filling a daemon with named sessions' timers,
# timing a restart until it answers, and the loop's stall during a
# snapshot.  Throughput under --fsync is bwload's, with --session.
noinst_PROGRAMS += bench/bwdurable
bench_bwdurable_SOURCES = \
	bench/bwload.h \
	bench/bwdurable.c \
	bench/load_stats.c
bench_bwdurable_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/client
bench_bwdurable_LDFLAGS = -no-install
bench_bwdurable_LDADD = client/libbitwheel-client.la
EXTRA_DIST += bench/run-durable.sh

# bench/bwsoak: the bounded soak (bench/soak.sh; not in CI): client
# processes on libbitwheel-client mixing timers, cancels, kills,
# reconnects and slow readers against one bitwheeld, then accounting for
# every acknowledged timer from their journals.  It borrows bwload's
# histogram, clock and /proc helpers (load_stats.c).
noinst_PROGRAMS += bench/bwsoak
bench_bwsoak_SOURCES = \
	bench/soak.h \
	bench/bwsoak.c \
	bench/bwload.h \
	bench/load_stats.c
bench_bwsoak_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/client
bench_bwsoak_LDFLAGS = -no-install
bench_bwsoak_LDADD = client/libbitwheel-client.la -lm
EXTRA_DIST += bench/soak.sh

# bench/bwattack: the victim's lateness under each attack of a hostile
# local user (bench/run-attack.sh, results/attack.md).  The attacks and the
# victim (bench/attack.c) are tests/check_attack's too.
noinst_PROGRAMS += bench/bwattack
bench_bwattack_SOURCES = \
	bench/bwattack.c \
	bench/attack.c \
	bench/attack.h \
	bench/bwload.h \
	bench/load_stats.c
bench_bwattack_CPPFLAGS = $(AM_CPPFLAGS) $(bw_proto_cppflags) -I$(top_srcdir)/client
bench_bwattack_LDFLAGS = -no-install
bench_bwattack_LDADD = client/libbitwheel-client.la proto/libbwproto.la $(PROTOBUF_C_LIBS)
EXTRA_DIST += bench/run-attack.sh

# bench/.libs/bwturns.so: bwattack --turns preloads it into the daemon to
# time its loop turns (bench/turns.c).  -rpath makes libtool build a
# shared module that is never installed.
noinst_LTLIBRARIES += bench/bwturns.la
bench_bwturns_la_SOURCES = bench/turns.c
bench_bwturns_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
bench_bwturns_la_LIBADD = -ldl

# bench/run-python.sh: the Python client beside redis-py (bench/pybench.py).
EXTRA_DIST += bench/run-python.sh bench/pybench.py bench/burst.py

# bench/bwcal: what a calendar event's next elapse costs (issue 24), the
# daemon's calendar code built in, beside systemd's own (dlopen()ed from
# libsystemd-shared when it is there).
noinst_PROGRAMS += bench/bwcal
bench_bwcal_SOURCES = bench/bwcal.c daemon/tz.c daemon/calendar.c \
	daemon/calendar-internal.h
bench_bwcal_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
bench_bwcal_LDFLAGS = -no-install
bench_bwcal_LDADD = -ldl

# bench/bwcalload: the daemon's CPU and memory with 100,000 calendar timers
# across a DST change (issue 24; bench/run-calendar.sh starts it with
# tests/.libs/fakeclock.so, results/calendar.md).  It checks each fire
# against the daemon's calendar code, built in as in bwcal.
noinst_PROGRAMS += bench/bwcalload
bench_bwcalload_SOURCES = bench/bwcalload.c bench/bwload.h bench/load_stats.c \
	daemon/tz.c daemon/calendar.c daemon/calendar-internal.h
bench_bwcalload_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/client -I$(top_srcdir)/daemon
bench_bwcalload_LDFLAGS = -no-install
bench_bwcalload_LDADD = client/libbitwheel-client.la
EXTRA_DIST += bench/run-calendar.sh
