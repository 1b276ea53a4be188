# daemon/: bitwheeld, the timer service.
sbin_PROGRAMS += daemon/bitwheeld
# Everything but main(): tests/check_state builds on it too.
bwd_core_sources = \
	daemon/options.c \
	daemon/budgets.c \
	daemon/log.c \
	daemon/map.c \
	daemon/state.c \
	daemon/wheels.c \
	daemon/clock.c \
	daemon/delivery.c \
	daemon/account.c \
	daemon/restore.c \
	daemon/record.c \
	daemon/journal.c \
	daemon/snapshot.c \
	daemon/store.c \
	daemon/listen.c \
	daemon/process.c \
	daemon/conn.c \
	daemon/request.c \
	daemon/server.c \
	daemon/tz.c \
	daemon/calendar.c \
	daemon/daemon-internal.h \
	daemon/state-internal.h
daemon_bitwheeld_SOURCES = daemon/bitwheeld.c $(bwd_core_sources)
daemon_bitwheeld_CPPFLAGS = $(AM_CPPFLAGS) $(bw_proto_cppflags) \
	$(LIBEVENT_CFLAGS) $(LIBSYSTEMD_CFLAGS)
daemon_bitwheeld_LDADD = wheel/libbitwheel.la proto/libbwproto.la \
	$(PROTOBUF_C_LIBS) $(LIBEVENT_LIBS) $(LIBSYSTEMD_LIBS)
noinst_HEADERS += daemon/calendar-internal.h
dist_man8_MANS = daemon/bitwheeld.8
