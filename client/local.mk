# client/: libbitwheel-client, the C client of bitwheeld, and bwctl, the
# command line built on it.

lib_LTLIBRARIES += client/libbitwheel-client.la
client_libbitwheel_client_la_SOURCES = client/client.c
# Hidden by default: only what bitwheel-client.h marks BWC_EXPORT is ABI.
# libbwproto is a convenience library folded into this one; the regex
# keeps its bwp_* and protobuf-c symbols out of the shared library's
# dynamic symbol table as well.
client_libbitwheel_client_la_CPPFLAGS = $(AM_CPPFLAGS) \
	-I$(top_srcdir)/client $(bw_proto_cppflags) -DBWC_BUILDING_LIBRARY
client_libbitwheel_client_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
client_libbitwheel_client_la_LIBADD = proto/libbwproto.la $(PROTOBUF_C_LIBS)
# libtool's current:revision:age, moved once per release cycle for what
# changed since the last release.  1:0:0 was released with 0.2.0
# (protocol 2: struct bwc_fire and the info structs grew).  2:0:0 for the
# next: struct bwc_session_info grew (owner_uid, the per-uid budgets in
# its struct bwc_limits) and struct bwc_stats grew (the per-uid
# counters), all caller-allocated, and each took a reserved tail that
# fixes its size from now on; programs built against 1:0:0 must be
# rebuilt (current + 1, age 0).  The added functions (bwc_set_owner_uid,
# bwc_set_daemon_user, later the reconnecting's and fires that fail's)
# ride on the same bump, and so do fires that fail's struct changes
# (struct bwc_fire's deliveries and dead_letter, struct
# bwc_session_entry's policy and counts, 224 to 344 bytes), made before
# 2:0:0 is released.  Later fields that take reserved slots are
# compatible additions: current + 1, age + 1.
client_libbitwheel_client_la_LDFLAGS = -version-info 2:0:0 -no-undefined
# Every export versioned (BITWHEEL_CLIENT_2), by the script that lists
# them, which also keeps libbwproto's symbols local; a linker without
# version scripts gets libtool's regex instead (libtool implements it
# with a version script of its own, so the two cannot be combined).
EXTRA_DIST += client/libbitwheel-client.map
if BW_HAVE_VERSION_SCRIPT
client_libbitwheel_client_la_LDFLAGS += \
	-Wl,--version-script=$(srcdir)/client/libbitwheel-client.map
EXTRA_client_libbitwheel_client_la_DEPENDENCIES = client/libbitwheel-client.map
else
client_libbitwheel_client_la_LDFLAGS += -export-symbols-regex '^bwc_'
endif
include_HEADERS += client/bitwheel-client.h
nodist_include_HEADERS += client/bitwheel-client-version.h
pkgconfig_DATA += client/libbitwheel-client.pc

# bwctl sees only the installed header, as any other caller would, and
# the duration parser the daemon reads its options with (its refusals
# worded alike, and the bounds of a Schedule's times).
bin_PROGRAMS += client/bwctl
client_bwctl_SOURCES = client/bwctl.c proto/duration.c proto/duration.h
client_bwctl_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/client \
	-I$(top_srcdir)/proto
client_bwctl_LDADD = client/libbitwheel-client.la
dist_man_MANS += client/bwctl.1

# bwctl's bash completion, named as bash-completion looks it up: bwctl.
if HAVE_BASHCOMPLETIONDIR
dist_bashcompletion_DATA = client/bash-completion/bwctl
bw_installcheck_files += $(bashcompletiondir)/bwctl
else
EXTRA_DIST += client/bash-completion/bwctl
endif

# The event-loop adapters: headers only, in the manner of hiredis', each
# attaching a client to one loop (client/adapters/bitwheel-client-loop.h
# says how); a program includes the one for its loop and links that loop
# itself, so the library depends on none.  tests/check_adapters drives
# each with a real loop (configure: BW_HAVE_LIBEV, BW_HAVE_LIBUV,
# BW_HAVE_GLIB).
include_HEADERS += client/adapters/bitwheel-client-loop.h \
	client/adapters/bitwheel-client-libevent.h \
	client/adapters/bitwheel-client-libev.h \
	client/adapters/bitwheel-client-libuv.h \
	client/adapters/bitwheel-client-glib.h
bw_installcheck_files += $(includedir)/bitwheel-client-libevent.h \
	$(includedir)/bitwheel-client-libev.h \
	$(includedir)/bitwheel-client-libuv.h \
	$(includedir)/bitwheel-client-loop.h

check_PROGRAMS += tests/check_adapters
TESTS += tests/check_adapters
tests_check_adapters_SOURCES = tests/check_adapters.c tests/adapters.h \
	tests/adapters_libevent.c $(bw_e2e_sources)
tests_check_adapters_CPPFLAGS = $(bw_e2e_cppflags) \
	-I$(top_srcdir)/client/adapters $(LIBEVENT_CFLAGS)
tests_check_adapters_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_adapters_LDADD = client/libbitwheel-client.la $(bw_e2e_ldadd) \
	$(LIBEVENT_LIBS)
EXTRA_tests_check_adapters_DEPENDENCIES = daemon/bitwheeld
if BW_HAVE_LIBEV
tests_check_adapters_SOURCES += tests/adapters_libev.c
tests_check_adapters_CPPFLAGS += -DBW_HAVE_LIBEV
tests_check_adapters_LDADD += $(LIBEV_LIBS)
endif
if BW_HAVE_LIBUV
tests_check_adapters_SOURCES += tests/adapters_libuv.c
tests_check_adapters_CPPFLAGS += -DBW_HAVE_LIBUV $(LIBUV_CFLAGS)
tests_check_adapters_LDADD += $(LIBUV_LIBS)
endif
if BW_HAVE_GLIB
tests_check_adapters_SOURCES += tests/adapters_glib.c
tests_check_adapters_CPPFLAGS += -DBW_HAVE_GLIB $(GLIB_CFLAGS)
tests_check_adapters_LDADD += $(GLIB_LIBS)
endif

# The examples: sources installed for a C developer to start from
# ($(docdir)/examples; the Debian -dev package's examples directory), and
# built by make check the way their comments say to build them (the
# installed headers' directories only) for tests/check_examples, which
# runs each against a real daemon.
bwc_examples = client/examples/producer client/examples/consumer \
	client/examples/libevent-consumer client/examples/worker
check_PROGRAMS += $(bwc_examples)
bwc_examples_cppflags = -I$(top_builddir)/client -I$(top_srcdir)/client \
	-I$(top_srcdir)/client/adapters
client_examples_producer_CPPFLAGS = $(bwc_examples_cppflags)
client_examples_producer_LDADD = client/libbitwheel-client.la
client_examples_consumer_CPPFLAGS = $(bwc_examples_cppflags)
client_examples_consumer_LDADD = client/libbitwheel-client.la
client_examples_libevent_consumer_CPPFLAGS = $(bwc_examples_cppflags) \
	$(LIBEVENT_CFLAGS)
client_examples_libevent_consumer_LDADD = client/libbitwheel-client.la \
	$(LIBEVENT_LIBS)
client_examples_worker_CPPFLAGS = $(bwc_examples_cppflags)
client_examples_worker_LDADD = client/libbitwheel-client.la
examplesdir = $(docdir)/examples
dist_examples_DATA = client/examples/README $(bwc_examples:=.c)
bw_installcheck_files += $(examplesdir)/README $(examplesdir)/worker.c

check_PROGRAMS += tests/check_examples
TESTS += tests/check_examples
tests_check_examples_SOURCES = tests/check_examples.c $(bw_e2e_sources)
tests_check_examples_CPPFLAGS = $(bw_e2e_cppflags)
tests_check_examples_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_examples_LDADD = client/libbitwheel-client.la $(bw_e2e_ldadd)
EXTRA_tests_check_examples_DEPENDENCIES = daemon/bitwheeld $(bwc_examples)

# The client's manual pages in section 3: bitwheel-client(3), an overview,
# and one page per group of functions, written from bitwheel-client.h and
# the adapters' headers (no tool turns those comments into good pages).
# Every other function a page's NAME section lists gets a symbolic link to
# it (client/man/links.sh, which tests/check_man.sh also reads).
bwc_man3 = client/man/bitwheel-client.3 client/man/bwc_new.3 \
	client/man/bwc_connect.3 client/man/bwc_schedule.3 \
	client/man/bwc_wait_fire.3 client/man/bwc_dispatch.3 \
	client/man/bwc_release.3 client/man/bwc_stats.3 \
	client/man/bwc_libevent_attach.3
dist_man_MANS += $(bwc_man3)
EXTRA_DIST += client/man/links.sh
bw_installcheck_files += $(man3dir)/bitwheel-client.3 $(man3dir)/bwc_free.3 \
	$(man3dir)/bwc_libuv_detach.3
install-data-local: bwc-man-links-install
uninstall-local: bwc-man-links-uninstall
bwc-man-links-install:
	@$(MKDIR_P) '$(DESTDIR)$(man3dir)'; \
	pages=; for p in $(bwc_man3); do pages="$$pages $(srcdir)/$$p"; done; \
	$(SHELL) $(srcdir)/client/man/links.sh $$pages | \
	while read -r name page; do \
	  rm -f "$(DESTDIR)$(man3dir)/$$name.3" && \
	  ln -s "$$page.3" "$(DESTDIR)$(man3dir)/$$name.3" || exit 1; \
	done
bwc-man-links-uninstall:
	@pages=; for p in $(bwc_man3); do pages="$$pages $(srcdir)/$$p"; done; \
	$(SHELL) $(srcdir)/client/man/links.sh $$pages | \
	while read -r name page; do \
	  rm -f "$(DESTDIR)$(man3dir)/$$name.3"; \
	done
.PHONY: bwc-man-links-install bwc-man-links-uninstall
