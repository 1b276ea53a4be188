/*
 * bitwheeld.c - main(): parse the command line, run the server.
 *
 * Exit status: 0 after a clean stop, 1 when the daemon cannot start or
 * fails, 2 on a usage error (systemd's RestartPreventExitStatus material).
 */
#include <stdlib.h>

#include "daemon-internal.h"

int main(int argc, char **argv)
{
	struct bwd_options opt;
	int r = bwd_options_parse(argc, argv, &opt);

	if (r != 0) {
		bwd_options_free(&opt);
		return r < 0 ? 2 : 0;
	}
	bwd_log_set_level(opt.verbose ? BWD_LOG_DEBUG : BWD_LOG_INFO);
	r = bwd_server_run(&opt);
	bwd_options_free(&opt);
	return r ? EXIT_FAILURE : EXIT_SUCCESS;
}
