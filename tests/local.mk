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

# The units, checked with systemd's own tools against the built daemon.
check_PROGRAMS += tests/check_systemd
TESTS += tests/check_systemd
tests_check_systemd_SOURCES = tests/check_systemd.c
tests_check_systemd_CPPFLAGS = \
	-DBW_TOP_SRCDIR='"$(abs_top_srcdir)"' \
	-DBW_TOP_BUILDDIR='"$(abs_top_builddir)"' \
	-DBW_SBINDIR='"$(sbindir)"'
tests_check_systemd_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_systemd_LDADD = $(CHECK_LIBS)
EXTRA_tests_check_systemd_DEPENDENCIES = systemd/bitwheeld.service daemon/bitwheeld

# End-to-end suites: real bitwheeld processes on temporary sockets, driven
# through the raw protocol (proto/frame.h), the client library and bwctl.
# Paths to the built programs come from abs_top_builddir, so distcheck's
# out-of-tree build runs its own; the programs are built before the tests.
bw_e2e_programs = tests/check_daemon tests/check_client tests/check_bwctl \
	tests/check_durable
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

tests_check_client_SOURCES = tests/check_client.c $(bw_e2e_sources)
tests_check_client_CPPFLAGS = $(bw_e2e_cppflags)
tests_check_client_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_client_LDADD = client/libbitwheel-client.la $(bw_e2e_ldadd)
EXTRA_tests_check_client_DEPENDENCIES = daemon/bitwheeld

tests_check_bwctl_SOURCES = tests/check_bwctl.c $(bw_e2e_sources)
tests_check_bwctl_CPPFLAGS = $(bw_e2e_cppflags)
tests_check_bwctl_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_bwctl_LDADD = $(bw_e2e_ldadd)
EXTRA_tests_check_bwctl_DEPENDENCIES = daemon/bitwheeld client/bwctl

tests_check_durable_SOURCES = tests/check_durable.c $(bw_e2e_sources)
tests_check_durable_CPPFLAGS = $(bw_e2e_cppflags)
tests_check_durable_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_durable_LDADD = $(bw_e2e_ldadd)
EXTRA_tests_check_durable_DEPENDENCIES = daemon/bitwheeld

# libFuzzer targets: make fuzz, make fuzz-run (tests/fuzz.mk).
include tests/fuzz.mk
