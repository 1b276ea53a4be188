# client/: libbitwheel-client, the C client of bitwheeld, and bwctl, the
# command line built on it.

lib_LTLIBRARIES += client/libbitwheel-client.la
client_libbitwheel_client_la_SOURCES = \
	client/client.c \
	client/duration.c
# Hidden by default: only what bitwheel-client.h marks BWC_EXPORT is ABI.
# libbwproto is a convenience library folded into this one; the regex
# keeps its bwp_* and protobuf-c symbols out of the shared library's
# dynamic symbol table as well.
client_libbitwheel_client_la_CPPFLAGS = $(AM_CPPFLAGS) \
	-I$(top_srcdir)/client $(bw_proto_cppflags) -DBWC_BUILDING_LIBRARY
client_libbitwheel_client_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
client_libbitwheel_client_la_LIBADD = proto/libbwproto.la $(PROTOBUF_C_LIBS)
# 1:0:0 since protocol 2: struct bwc_fire and the info structs grew, so
# programs built against 0:0:0 must be rebuilt.
client_libbitwheel_client_la_LDFLAGS = -version-info 1:0:0 -no-undefined \
	-export-symbols-regex '^bwc_'
include_HEADERS += client/bitwheel-client.h
pkgconfig_DATA += client/libbitwheel-client.pc

# bwctl sees only the installed header, as any other caller would.
bin_PROGRAMS += client/bwctl
client_bwctl_SOURCES = client/bwctl.c
client_bwctl_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/client
client_bwctl_LDADD = client/libbitwheel-client.la
dist_man_MANS += client/bwctl.1
