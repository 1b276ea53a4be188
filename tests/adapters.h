/*
 * adapters.h - one event loop and its adapter, as tests/check_adapters.c
 * drives them: each loop in a file of its own (tests/adapters_libevent.c,
 * adapters_libev.c, adapters_libuv.c, adapters_glib.c), as libevent's and libev's headers
 * both define EV_READ and cannot meet in one translation unit.
 */
#ifndef BW_TESTS_ADAPTERS_H
#define BW_TESTS_ADAPTERS_H

#include <stdbool.h>

#include "bitwheel-client-loop.h"

struct loop_ops {
	const char *name;
	void *(*create)(void);
	/* Frees the loop; the adapter was detached before. */
	void (*destroy)(void *loop);
	/* Run until stop() or ms pass; true when stop() ended it. */
	bool (*run)(void *loop, int ms);
	void (*stop)(void *loop);
	int (*attach)(void *loop, struct bwc_client *c, bwc_loop_error_fn fn,
		      void *arg, void **adapter);
	void (*update)(void *adapter);
	void (*detach)(void *adapter);
	/* The adapter's struct bwc_loop. */
	const struct bwc_loop *(*core)(void *adapter);
};

extern const struct loop_ops libevent_ops;
#ifdef BW_HAVE_LIBEV
extern const struct loop_ops libev_ops;
#endif
#ifdef BW_HAVE_LIBUV
extern const struct loop_ops libuv_ops;
#endif
#ifdef BW_HAVE_GLIB
extern const struct loop_ops glib_ops;
#endif

#endif /* BW_TESTS_ADAPTERS_H */
