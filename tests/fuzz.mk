# tests/fuzz.mk: the libFuzzer targets (tests/fuzz_wheel.c, tests/fuzz_frame.c,
# tests/fuzz_dispatch.c, tests/fuzz_state.c, tests/fuzz_sim.c) and their seed corpora
# (tests/fuzz-corpus/).  Neither all nor check builds
# them: `make fuzz` compiles each with clang (FUZZ_CC, found by configure)
# straight from the library sources, not from gcc's libtool objects, and
# `make fuzz-run FUZZ_SECONDS=60` runs each on a copy of its corpus, failing
# on any crash, leak or sanitizer report.  Included from tests/local.mk.

EXTRA_DIST += tests/fuzz.h tests/fuzz_wheel.c tests/fuzz_frame.c \
	tests/fuzz_dispatch.c tests/fuzz_state.c tests/fuzz_sim.c tests/fuzz-corpus

FUZZ_SECONDS = 60
bw_fuzz_cflags = -std=gnu11 -Wall -Wextra -g -O1 -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
bw_fuzz_names = wheel frame dispatch state sim
bw_fuzz_targets = tests/fuzz_wheel tests/fuzz_frame tests/fuzz_dispatch \
	tests/fuzz_state tests/fuzz_sim
CLEANFILES += $(bw_fuzz_targets)

# Prerequisites are found through VPATH; $^ names them where they are
# (the generated protobuf-c code is in the build tree, and so is
# configure's bitwheel-version.h, which bitwheel.h includes).
tests/fuzz_wheel: tests/fuzz_wheel.c tests/fuzz.h $(wheel_libbitwheel_la_SOURCES) \
		wheel/bitwheel.h wheel/wheel-internal.h
	$(AM_V_CCLD)$(MKDIR_P) tests && \
	$(FUZZ_CC) $(bw_fuzz_cflags) -I$(srcdir)/wheel -I$(top_builddir)/wheel \
		-o $@ $(filter %.c,$^)

tests/fuzz_frame: tests/fuzz_frame.c tests/fuzz.h proto/frame.c proto/bitwheel.pb-c.c \
		proto/frame.h proto/bitwheel.pb-c.h
	$(AM_V_CCLD)$(MKDIR_P) tests && \
	$(FUZZ_CC) $(bw_fuzz_cflags) $(bw_proto_cppflags) \
		-o $@ $(filter %.c,$^) $(PROTOBUF_C_LIBS)

# The daemon's code (connections and requests; the state files' reader),
# with everything it links but main().  libevent, libsystemd and
# protobuf-c themselves run uninstrumented.
tests/fuzz_dispatch: tests/fuzz_dispatch.c tests/fuzz.h
tests/fuzz_state: tests/fuzz_state.c tests/fuzz.h
# The simulation of delivery (tests/sim.c), its choices the input's bytes.
tests/fuzz_sim: tests/fuzz_sim.c tests/fuzz.h tests/sim.c tests/sim.h
tests/fuzz_dispatch tests/fuzz_state tests/fuzz_sim: \
		$(bwd_core_sources) \
		$(wheel_libbitwheel_la_SOURCES) proto/frame.c proto/duration.c \
		proto/bitwheel.pb-c.c \
		wheel/bitwheel.h wheel/wheel-internal.h proto/frame.h \
		proto/bitwheel.pb-c.h
	$(AM_V_CCLD)$(MKDIR_P) tests && \
	$(FUZZ_CC) $(bw_fuzz_cflags) $(DEFS) -I$(srcdir)/wheel \
		-I$(top_builddir)/wheel -I$(srcdir)/daemon \
		$(bw_proto_cppflags) $(LIBEVENT_CFLAGS) $(LIBSYSTEMD_CFLAGS) \
		-o $@ $(filter %.c,$^) $(LIBEVENT_LIBS) $(LIBSYSTEMD_LIBS) \
		$(PROTOBUF_C_LIBS)

# fuzz-available prints yes or no, for build-aux/test.sh.
if BW_HAVE_FUZZER
fuzz: $(bw_fuzz_targets)
fuzz-available:
	@echo yes
else
fuzz:
	@echo "make fuzz: configure found no clang with libFuzzer; install the Debian packages clang and libclang-rt-14-dev and rerun configure" >&2; \
	exit 1
fuzz-available:
	@echo no
endif

# Each target fuzzes a scratch copy of its seeds for FUZZ_SECONDS; anything
# libFuzzer reports (crash, leak, sanitizer, timeout) fails the run, with
# the end of its log and the reproducer left in tests/fuzz-work/<name>/.
fuzz-run: fuzz
	@for t in $(bw_fuzz_names); do \
		work=tests/fuzz-work/$$t; \
		rm -rf $$work && $(MKDIR_P) $$work/corpus $$work/artifacts && \
		cp $(srcdir)/tests/fuzz-corpus/$$t/* $$work/corpus/ && \
		chmod -R u+w $$work/corpus || exit 1; \
		echo "fuzz-run: tests/fuzz_$$t for $(FUZZ_SECONDS)s (log: $$work/log)"; \
		if ./tests/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=25 \
			-print_final_stats=1 -artifact_prefix=$$work/artifacts/ \
			$$work/corpus >$$work/log 2>&1; then \
			grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' $$work/log | sed 's/^/  /'; \
		else \
			tail -n 60 $$work/log; \
			echo "fuzz-run: tests/fuzz_$$t FAILED; reproducer in $$work/artifacts/:" \
				$$(ls $$work/artifacts) >&2; \
			exit 1; \
		fi; \
	done; \
	echo "fuzz-run: no findings"

clean-local: bw-fuzz-clean
bw-fuzz-clean:
	-rm -rf tests/fuzz-work

.PHONY: fuzz fuzz-run fuzz-available bw-fuzz-clean
