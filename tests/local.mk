# Check's fork mode stays on: a crashing test fails alone, and each program's
# summary line lands in its tests/<name>.log.
bw_check_programs = \
	tests/check_wheel \
	tests/check_dual \
	tests/check_model \
	tests/check_config
check_PROGRAMS += $(bw_check_programs)
TESTS += $(bw_check_programs)

bw_check_cflags = $(AM_CFLAGS) $(CHECK_CFLAGS)
bw_check_ldadd = wheel/libbitwheel.la $(CHECK_LIBS)

tests_check_wheel_SOURCES = tests/check_wheel.c tests/testutil.c tests/testutil.h
tests_check_wheel_CFLAGS = $(bw_check_cflags)
tests_check_wheel_LDADD = $(bw_check_ldadd)

tests_check_dual_SOURCES = tests/check_dual.c tests/testutil.c tests/testutil.h
tests_check_dual_CFLAGS = $(bw_check_cflags)
tests_check_dual_LDADD = $(bw_check_ldadd)

tests_check_model_SOURCES = tests/check_model.c tests/testutil.c tests/testutil.h
tests_check_model_CFLAGS = $(bw_check_cflags)
tests_check_model_LDADD = $(bw_check_ldadd)

tests_check_config_SOURCES = tests/check_config.c tests/testutil.c tests/testutil.h
tests_check_config_CFLAGS = $(bw_check_cflags)
tests_check_config_LDADD = $(bw_check_ldadd)

# The daemon's log limiter, in-process with injected time.
check_PROGRAMS += tests/check_log
TESTS += tests/check_log
tests_check_log_SOURCES = tests/check_log.c daemon/log.c tests/testutil.c \
	tests/testutil.h
tests_check_log_CPPFLAGS = $(AM_CPPFLAGS) $(bw_proto_cppflags) \
	-I$(top_srcdir)/daemon
tests_check_log_CFLAGS = $(bw_check_cflags)
tests_check_log_LDADD = $(bw_check_ldadd)

# The daemon's state (how wheel fires become queued fires), in-process
# with injected time, built from the daemon's sources.
check_PROGRAMS += tests/check_state
TESTS += tests/check_state
tests_check_state_SOURCES = tests/check_state.c tests/testutil.c \
	tests/testutil.h $(bwd_core_sources)
tests_check_state_CPPFLAGS = $(daemon_bitwheeld_CPPFLAGS) -I$(top_srcdir)/daemon
tests_check_state_CFLAGS = $(bw_check_cflags)
tests_check_state_LDADD = $(daemon_bitwheeld_LDADD) $(CHECK_LIBS)

# The deterministic simulation of delivery (tests/sim.c): the daemon's
# state on an injected clock, random events, a reference model.  Long
# mode: make sim SIM_STEPS=1000000 [SIM_SEED=1].
check_PROGRAMS += tests/check_sim
TESTS += tests/check_sim
tests_check_sim_SOURCES = tests/check_sim.c tests/sim.c tests/sim.h \
	tests/testutil.c tests/testutil.h $(bwd_core_sources)
tests_check_sim_CPPFLAGS = $(daemon_bitwheeld_CPPFLAGS) -I$(top_srcdir)/daemon
tests_check_sim_CFLAGS = $(bw_check_cflags)
tests_check_sim_LDADD = $(daemon_bitwheeld_LDADD) $(CHECK_LIBS)

SIM_STEPS = 1000000
SIM_SEED = 1
sim: tests/check_sim
	CK_FORK=no BW_SIM_STEPS=$(SIM_STEPS) BW_SIM_SEED=$(SIM_SEED) \
		CK_RUN_CASE=env ./tests/check_sim
.PHONY: sim

# The units, checked with systemd's own tools against the built daemon.
check_PROGRAMS += tests/check_systemd
TESTS += tests/check_systemd
tests_check_systemd_SOURCES = tests/check_systemd.c
tests_check_systemd_CPPFLAGS = \
	-DBW_TOP_SRCDIR='"$(abs_top_srcdir)"' \
	-DBW_TOP_BUILDDIR='"$(abs_top_builddir)"' \
	-DBW_SBINDIR='"$(sbindir)"' \
	-DBW_BINDIR='"$(bindir)"'
tests_check_systemd_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_systemd_LDADD = $(CHECK_LIBS)
EXTRA_tests_check_systemd_DEPENDENCIES = systemd/bitwheeld.service \
	systemd/bitwheel-metrics.service daemon/bitwheeld client/bwctl

# End-to-end suites: real bitwheeld processes on temporary sockets, driven
# through the raw protocol (proto/frame.h), the client library and bwctl.
# Paths to the built programs come from abs_top_builddir, so distcheck's
# out-of-tree build runs its own; the programs are built before the tests.
bw_e2e_programs = tests/check_daemon tests/check_delivery tests/check_client \
	tests/check_bwctl tests/check_durable tests/check_budget tests/check_storage \
	tests/check_attack tests/check_failure tests/check_clock
check_PROGRAMS += $(bw_e2e_programs)
TESTS += $(bw_e2e_programs)

bw_e2e_sources = tests/daemonutil.c tests/daemonutil.h \
	tests/testutil.c tests/testutil.h
bw_e2e_cppflags = $(AM_CPPFLAGS) $(bw_proto_cppflags) -I$(top_srcdir)/client \
	-DBW_TOP_BUILDDIR='"$(abs_top_builddir)"'
bw_e2e_ldadd = proto/libbwproto.la wheel/libbitwheel.la $(PROTOBUF_C_LIBS) \
	$(CHECK_LIBS)

tests_check_daemon_SOURCES = tests/check_daemon.c $(bw_e2e_sources)
tests_check_daemon_CPPFLAGS = $(bw_e2e_cppflags)
tests_check_daemon_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_daemon_LDADD = $(bw_e2e_ldadd)
EXTRA_tests_check_daemon_DEPENDENCIES = daemon/bitwheeld

tests_check_delivery_SOURCES = tests/check_delivery.c $(bw_e2e_sources)
tests_check_delivery_CPPFLAGS = $(bw_e2e_cppflags)
tests_check_delivery_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_delivery_LDADD = $(bw_e2e_ldadd)
EXTRA_tests_check_delivery_DEPENDENCIES = daemon/bitwheeld

tests_check_failure_SOURCES = tests/check_failure.c $(bw_e2e_sources)
tests_check_failure_CPPFLAGS = $(bw_e2e_cppflags)
tests_check_failure_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_failure_LDADD = $(bw_e2e_ldadd)
EXTRA_tests_check_failure_DEPENDENCIES = daemon/bitwheeld

tests_check_budget_SOURCES = tests/check_budget.c $(bw_e2e_sources)
tests_check_budget_CPPFLAGS = $(bw_e2e_cppflags)
tests_check_budget_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_budget_LDADD = $(bw_e2e_ldadd)
EXTRA_tests_check_budget_DEPENDENCIES = daemon/bitwheeld

# The attacks and the victim are bench/attack.c's, shared with bench/bwattack.
tests_check_attack_SOURCES = tests/check_attack.c bench/attack.c bench/attack.h \
	bench/load_stats.c bench/bwload.h $(bw_e2e_sources)
tests_check_attack_CPPFLAGS = $(bw_e2e_cppflags) -I$(top_srcdir)/bench
tests_check_attack_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_attack_LDADD = client/libbitwheel-client.la $(bw_e2e_ldadd)
EXTRA_tests_check_attack_DEPENDENCIES = daemon/bitwheeld

tests_check_client_SOURCES = tests/check_client.c $(bw_e2e_sources)
tests_check_client_CPPFLAGS = $(bw_e2e_cppflags)
tests_check_client_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_client_LDADD = client/libbitwheel-client.la $(bw_e2e_ldadd)
EXTRA_tests_check_client_DEPENDENCIES = daemon/bitwheeld

tests_check_bwctl_SOURCES = tests/check_bwctl.c tests/sdcal.c tests/sdcal.h \
	$(bw_e2e_sources)
tests_check_bwctl_CPPFLAGS = $(bw_e2e_cppflags)
tests_check_bwctl_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_bwctl_LDADD = $(bw_e2e_ldadd)
EXTRA_tests_check_bwctl_DEPENDENCIES = daemon/bitwheeld client/bwctl

tests_check_clock_SOURCES = tests/check_clock.c $(bw_e2e_sources) \
	daemon/tz.c daemon/calendar.c daemon/calendar-internal.h
tests_check_clock_CPPFLAGS = $(bw_e2e_cppflags) -I$(top_srcdir)/daemon
tests_check_clock_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_clock_LDADD = $(bw_e2e_ldadd)
EXTRA_tests_check_clock_DEPENDENCIES = daemon/bitwheeld tests/fakeclock.la

tests_check_durable_SOURCES = tests/check_durable.c $(bw_e2e_sources)
tests_check_durable_CPPFLAGS = $(bw_e2e_cppflags)
tests_check_durable_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_durable_LDADD = $(bw_e2e_ldadd)
EXTRA_tests_check_durable_DEPENDENCIES = daemon/bitwheeld tests/faultsync.la

tests_check_storage_SOURCES = tests/check_storage.c $(bw_e2e_sources)
tests_check_storage_CPPFLAGS = $(bw_e2e_cppflags)
tests_check_storage_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_storage_LDADD = $(bw_e2e_ldadd)
EXTRA_tests_check_storage_DEPENDENCIES = daemon/bitwheeld tests/faultsync.la

# tests/.libs/faultsync.so: fdatasync made slow or failing under a daemon
# a test starts (tests/faultsync.c, du_fault_sync).  Built for make check
# only; -rpath makes libtool build a shared module that is never installed.
check_LTLIBRARIES = tests/faultsync.la tests/fakeclock.la
tests_faultsync_la_SOURCES = tests/faultsync.c
tests_faultsync_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
# tests/.libs/fakeclock.so: a CLOCK_REALTIME the test steps, under a
# daemon a test starts (tests/fakeclock.c, du_fake_clock).
tests_fakeclock_la_SOURCES = tests/fakeclock.c
tests_fakeclock_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere

# libFuzzer targets: make fuzz, make fuzz-run (tests/fuzz.mk).
include tests/fuzz.mk

# make check-valgrind: the end-to-end suites again, every bitwheeld they
# start under valgrind memcheck (BW_TEST_DAEMON_WRAPPER, tests/daemonutil.h;
# the suites run the daemon's .libs binary, not its libtool wrapper script,
# which would exec the daemon out of valgrind's reach); every wait and
# margin scaled by BW_VALGRIND_SLOW.  Tests stop
# their daemons with SIGTERM under the wrapper, so valgrind writes a leak
# summary.  It fails when a suite fails (a daemon exiting 99, valgrind's
# --error-exitcode, fails its test), or when any daemon's log shows an
# error, a definite leak or a death by signal; the logs of daemons a test
# SIGKILLs on purpose have no summary and are only scanned for errors.
# Every TCase runs; the few tests whose point is speed, memory or
# descriptor limits skip themselves under the wrapper and say why.
# Each suite is a target of its own (valgrind-run-check_X, its status in
# tests/valgrind/check_X.rc), so make -jN runs N at once: the suites
# spend much of their time in scaled waits and the storage suite's real
# retry back-off (two at a time took 15 minutes of wall time on CI's 2
# cores; build-aux/test.sh runs three: 9 minutes).  The longest come first
# in the list, which is the order make starts them in (minutes each on
# CI's 2 cores: storage 5.4, failure 4.0, bwctl 3.2, delivery 3.3, daemon
# 2.2, durable 2.0, client 1.8, attack 2.1, budget 1.0).  Logs:
# tests/valgrind/.  Paths must not contain blanks.
VALGRIND = valgrind
BW_VALGRIND_SLOW = 20
bw_valgrind_programs = tests/check_storage tests/check_failure tests/check_bwctl \
	tests/check_delivery tests/check_daemon tests/check_durable tests/check_client \
	tests/check_attack tests/check_budget
bw_valgrind_runs = $(bw_valgrind_programs:tests/%=valgrind-run-%)
bw_valgrind_dir = tests/valgrind
bw_valgrind_opts = --leak-check=full --errors-for-leak-kinds=definite \
	--error-exitcode=99
CLEANFILES += $(bw_valgrind_dir)/*.log $(bw_valgrind_dir)/*.out $(bw_valgrind_dir)/*.rc

valgrind-prepare:
	@command -v $(VALGRIND) >/dev/null || { \
		echo "check-valgrind: $(VALGRIND) not found (Debian: apt-get install valgrind)" >&2; \
		exit 1; }; \
	rm -f $(bw_valgrind_dir)/*.log $(bw_valgrind_dir)/*.out $(bw_valgrind_dir)/*.rc; \
	$(MKDIR_P) $(bw_valgrind_dir)

# One suite; it always succeeds, so that make runs every suite, and
# check-valgrind reports what failed.
$(bw_valgrind_runs): valgrind-run-%: tests/% daemon/bitwheeld client/bwctl valgrind-prepare
	@dir=$(bw_valgrind_dir); name=$*; \
	echo "check-valgrind: tests/$$name started (output: $$dir/$$name.out)"; \
	BW_TEST_SLOW=$(BW_VALGRIND_SLOW) \
	BW_TEST_DAEMON_WRAPPER="$(VALGRIND) $(bw_valgrind_opts) --log-file=$(abs_builddir)/$$dir/$$name.%p.log" \
	./tests/$$name >$$dir/$$name.out 2>&1; echo $$? >$$dir/$$name.rc; \
	echo "check-valgrind: tests/$$name done (exit `cat $$dir/$$name.rc`)"

check-valgrind: $(bw_valgrind_runs)
	@dir=$(bw_valgrind_dir); status=0; \
	for prog in $(bw_valgrind_programs); do \
		name=`basename $$prog`; \
		echo "check-valgrind: $$prog"; \
		if [ "`cat $$dir/$$name.rc 2>/dev/null`" = 0 ]; then \
			grep -E '^[0-9]+%: Checks|SKIP' $$dir/$$name.out | sed 's/^/  /'; \
		else \
			cat $$dir/$$name.out; status=1; \
		fi; \
	done; \
	logs=0; summed=0; killed=0; \
	for log in $$dir/*.log; do \
		[ -e "$$log" ] || continue; \
		logs=$$((logs + 1)); \
		if ! grep -q '^==[0-9]*== Command: .*/\.libs/' "$$log"; then \
			echo "check-valgrind: $$log: not the daemon's binary under valgrind"; status=1; \
		fi; \
		if grep -Eq '^==[0-9]*== (Invalid |Conditional jump|Use of uninitialised|Syscall param|Mismatched free|Source and destination overlap|Argument .* of function|Process terminating)' "$$log"; then \
			echo "check-valgrind: $$log: errors:"; cat "$$log"; status=1; \
		fi; \
		if grep -q 'ERROR SUMMARY:' "$$log"; then \
			summed=$$((summed + 1)); \
			if ! grep -q 'ERROR SUMMARY: 0 errors' "$$log" || \
			   { grep -q 'definitely lost:' "$$log" && \
			     ! grep -q 'definitely lost: 0 bytes' "$$log"; } || \
			   ! grep -Eq 'definitely lost: 0 bytes|All heap blocks were freed' "$$log"; then \
				echo "check-valgrind: $$log: errors or leaks:"; cat "$$log"; status=1; \
			fi; \
		else \
			killed=$$((killed + 1)); \
		fi; \
	done; \
	if [ $$summed -eq 0 ]; then \
		echo "check-valgrind: no daemon wrote a valgrind summary ($$logs logs)"; status=1; \
	fi; \
	echo "check-valgrind: $$logs daemons under valgrind: $$summed exited with 'definitely lost: 0' (or nothing allocated left) and 0 errors, $$killed killed on purpose before a summary (no errors in their logs)"; \
	if [ $$status -ne 0 ]; then echo "check-valgrind: FAILED" >&2; fi; \
	exit $$status

.PHONY: check-valgrind valgrind-prepare $(bw_valgrind_runs)

# The libraries' exports against their headers and version scripts, and
# the public headers in C99 and C++ (a script: nm and the compilers).
TESTS += tests/check_abi.sh
EXTRA_DIST += tests/check_abi.sh

# The manual pages against mandoc -Tlint.
TESTS += tests/check_man.sh
EXTRA_DIST += tests/check_man.sh

# Every relative link and #anchor of the Markdown documentation resolves.
TESTS += tests/check_docs.sh
EXTRA_DIST += tests/check_docs.sh tests/check_docs.py

# bwctl's bash completion, driven in bash against bwctl's help texts.
TESTS += tests/check_completion.sh
EXTRA_DIST += tests/check_completion.sh

# The trace replay's cross-peer agreement on the kernel timer traces in
# bench/traces/ (bench/trace-convert.py, then bench/bwbench --trace).
TESTS += tests/check_trace.sh
EXTRA_DIST += tests/check_trace.sh

# The daemon's time zones and calendar events (issue 24), in process,
# differential against systemd-analyze calendar when it is installed.
# Longer run: BW_CALENDAR_SPECS=5000 make check TESTS=tests/check_calendar
check_PROGRAMS += tests/check_calendar
TESTS += tests/check_calendar
tests_check_calendar_SOURCES = tests/check_calendar.c tests/testutil.c \
	tests/sdcal.c tests/sdcal.h \
	tests/testutil.h daemon/tz.c daemon/calendar.c \
	daemon/calendar-internal.h
tests_check_calendar_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_check_calendar_CFLAGS = $(bw_check_cflags)
tests_check_calendar_LDADD = $(bw_check_ldadd)
