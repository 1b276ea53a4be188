lib_LTLIBRARIES += wheel/libbitwheel.la
wheel_libbitwheel_la_SOURCES = \
	wheel/wheel.c \
	wheel/gear.c \
	wheel/pool.c \
	wheel/overflow.c \
	wheel/check.c \
	wheel/dual.c \
	wheel/config.c \
	wheel/error.c \
	wheel/clock.c
# Hidden by default: only what bitwheel.h marks BW_EXPORT is ABI.
wheel_libbitwheel_la_CPPFLAGS = $(AM_CPPFLAGS) -DBW_BUILDING_LIBRARY
wheel_libbitwheel_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
wheel_libbitwheel_la_LDFLAGS = -version-info 0:0:0 -no-undefined
# Every export versioned (BITWHEEL_0), by the script that lists them.
EXTRA_DIST += wheel/libbitwheel.map
if BW_HAVE_VERSION_SCRIPT
wheel_libbitwheel_la_LDFLAGS += \
	-Wl,--version-script=$(srcdir)/wheel/libbitwheel.map
EXTRA_wheel_libbitwheel_la_DEPENDENCIES = wheel/libbitwheel.map
endif
include_HEADERS += wheel/bitwheel.h
nodist_include_HEADERS += wheel/bitwheel-version.h
noinst_HEADERS += wheel/wheel-internal.h
pkgconfig_DATA += wheel/libbitwheel.pc

noinst_PROGRAMS += wheel/bwdemo
wheel_bwdemo_SOURCES = wheel/bwdemo.c
wheel_bwdemo_LDADD = wheel/libbitwheel.la
