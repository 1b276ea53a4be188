/*
 * bitwheeld.c - main(): parse the command line, run the server.
 *
 * Exit status: 0 after a clean stop, 1 when the daemon cannot start or
 * fails, 2 on a usage error (systemd's RestartPreventExitStatus material).
 */
#include <malloc.h>
#include <stdlib.h>

#include "daemon-internal.h"

/*
 * glibc's heap with fixed thresholds: blocks below 4 MiB from the heap,
 * and free space at its top given back only past 8 MiB.  Its defaults
 * (128 KiB each, moving up as large blocks are freed) gave the heap's
 * top back and took it again many times a second under --fsync=batch:
 * a connection's input is read into a chunk of up to a frame's size
 * (conn.c), freed once its frames are handled, and with replies held
 * for a sync that free often left the top past the threshold.  A brk(2)
 * that shrinks the heap of a process with threads costs a TLB shootdown
 * on every CPU they ran on, one that grows it page faults: 8 % of the
 * loop's samples under a pipelined load, 250-350 brk calls a second
 * against under 10 with these (doc/performance.md).  What stays is at
 * most 8 MiB of free heap.
 */
static void tune_heap(void)
{
	mallopt(M_MMAP_THRESHOLD, 4 << 20);
	mallopt(M_TRIM_THRESHOLD, 8 << 20);
}

int main(int argc, char **argv)
{
	struct bwd_options opt;
	int r = bwd_options_parse(argc, argv, &opt);

	if (r != 0) {
		bwd_options_free(&opt);
		return r < 0 ? 2 : 0;
	}
	bwd_log_set_level(opt.verbose ? BWD_LOG_DEBUG : BWD_LOG_INFO);
	tune_heap();
	r = bwd_server_run(&opt);
	bwd_options_free(&opt);
	return r ? EXIT_FAILURE : EXIT_SUCCESS;
}
