# proto/: the wire protocol.  bitwheel.proto is the only source; protoc-c
# turns it into C at build time, into the build tree (distcheck's source
# tree is read-only), and the generated files are never distributed, so a
# tarball needs protoc-c just as a checkout does.

bw_proto_generated = proto/bitwheel.pb-c.c proto/bitwheel.pb-c.h

# For everything that includes frame.h: frame.h is in the source tree, the
# generated header it includes is in the build tree.
bw_proto_cppflags = -I$(top_builddir)/proto -I$(top_srcdir)/proto \
	$(PROTOBUF_C_CFLAGS)

noinst_LTLIBRARIES += proto/libbwproto.la
proto_libbwproto_la_SOURCES = proto/frame.c proto/frame.h \
	proto/duration.c proto/duration.h
nodist_proto_libbwproto_la_SOURCES = $(bw_proto_generated)
proto_libbwproto_la_CPPFLAGS = $(AM_CPPFLAGS) $(bw_proto_cppflags)
proto_libbwproto_la_LIBADD = $(PROTOBUF_C_LIBS)

BUILT_SOURCES += $(bw_proto_generated)
CLEANFILES += $(bw_proto_generated)
EXTRA_DIST += proto/bitwheel.proto proto/PROTOCOL.md
# Installed for clients in other languages (PROTOCOL.md goes to $(docdir),
# Makefile.am).
pkgdata_DATA = proto/bitwheel.proto

proto/bitwheel.pb-c.c: $(srcdir)/proto/bitwheel.proto
	$(AM_V_GEN)$(MKDIR_P) proto && \
	$(PROTOC_C) --proto_path=$(srcdir)/proto --c_out=proto \
		$(srcdir)/proto/bitwheel.proto
# One protoc-c run writes both files.  This rule only brings back a header
# deleted on its own, without racing the rule above in a parallel make
# (the automake manual's recipe for a tool with two outputs).
proto/bitwheel.pb-c.h: proto/bitwheel.pb-c.c
	@test -f $@ || { \
		rm -f proto/bitwheel.pb-c.c; \
		$(MAKE) $(AM_MAKEFLAGS) proto/bitwheel.pb-c.c; \
	}

check_PROGRAMS += tests/check_frame
TESTS += tests/check_frame
tests_check_frame_SOURCES = tests/check_frame.c
tests_check_frame_CPPFLAGS = $(AM_CPPFLAGS) $(bw_proto_cppflags)
tests_check_frame_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_frame_LDADD = proto/libbwproto.la $(PROTOBUF_C_LIBS) \
	$(CHECK_LIBS)
