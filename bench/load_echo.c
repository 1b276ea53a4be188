/*
 * load_echo.c - bwload's physical floor: a raw AF_UNIX stream echo of
 * LOAD_ECHO_MSG-byte messages (a 4-byte length header and a body, the
 * size of a framed Schedule request).  The server is one process with one
 * poll loop, as bitwheeld is one event loop; it parses nothing and writes
 * back whatever it reads.  The client keeps `depth` messages in flight:
 * it writes every message the window allows in one write and counts
 * replies by whole messages, so depth 1 is the bare round trip and depth
 * 64 is batches of 64.
 */
#define _GNU_SOURCE /* accept4 */
#include "bwload.h"

#include <errno.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define ECHO_MAX_CONNS 256

int load_echo_listen(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof a.sun_path)
		return -1;
	strcpy(a.sun_path, path);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 128) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

void load_echo_serve(int lfd)
{
	struct pollfd pfd[ECHO_MAX_CONNS + 1];
	static char buf[65536];
	int n = 1;

	signal(SIGTERM, SIG_DFL);
	pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
	for (;;) {
		if (poll(pfd, (nfds_t)n, 1000) < 0 && errno != EINTR)
			_exit(1);
		if ((pfd[0].revents & POLLIN) && n <= ECHO_MAX_CONNS) {
			int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

			if (c >= 0)
				pfd[n++] = (struct pollfd){ .fd = c, .events = POLLIN };
		}
		for (int i = 1; i < n; i++) {
			ssize_t r, off = 0;

			if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			r = read(pfd[i].fd, buf, sizeof buf);
			while (r > 0 && off < r) {
				ssize_t k = write(pfd[i].fd, buf + off, (size_t)(r - off));

				if (k <= 0)
					break;
				off += k;
			}
			if (r <= 0 || off < r) {
				close(pfd[i].fd);
				pfd[i--] = pfd[--n];
			}
		}
	}
}

static int echo_connect(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int load_echo_worker(const char *socket, const struct load_phase *p, int id,
		     struct load_slot *slot)
{
	char *out = NULL, in[65536];
	uint64_t *sent_at = NULL, end, now;
	unsigned head = 0, tail = 0, inflight = 0;
	size_t partial = 0;
	int fd, ret = -1;

	(void)id;
	fd = echo_connect(socket);
	out = calloc((size_t)p->depth, LOAD_ECHO_MSG);
	sent_at = calloc((size_t)p->depth, sizeof *sent_at);
	if (fd < 0 || !out || !sent_at) {
		snprintf(slot->error, sizeof slot->error, "echo connect %s: %s",
			 socket, strerror(errno));
		goto out;
	}
	for (int i = 0; i < p->depth; i++) {
		uint32_t len = htonl(LOAD_ECHO_MSG - 4);

		memcpy(out + i * LOAD_ECHO_MSG, &len, 4);
		memset(out + i * LOAD_ECHO_MSG + 4, 'x', LOAD_ECHO_MSG - 4);
	}
	load_sleep_until(p->start_ns);
	slot->t_start = load_now_ns();
	end = p->start_ns + p->duration_ns;
	for (;;) {
		unsigned k = 0;
		ssize_t r;

		now = load_now_ns();
		if (now < end) {
			uint64_t allowed = load_allowed(p, now);

			while (inflight + k < (unsigned)p->depth &&
			       slot->sent + k < allowed &&
			       slot->sent + k < p->max_requests)
				k++;
		}
		if (k) {
			size_t len = (size_t)k * LOAD_ECHO_MSG, off = 0;

			while (off < len) {
				r = write(fd, out + off, len - off);
				if (r <= 0) {
					snprintf(slot->error, sizeof slot->error,
						 "echo write: %s", strerror(errno));
					goto out;
				}
				off += (size_t)r;
			}
			for (unsigned i = 0; i < k; i++) {
				sent_at[tail] = now;
				tail = (tail + 1) % (unsigned)p->depth;
			}
			inflight += k;
			slot->sent += k;
		}
		if (!inflight) {
			if (now >= end || slot->sent >= p->max_requests)
				break;
			load_sleep_until(now + 100000);
			continue;
		}
		r = read(fd, in, sizeof in);
		if (r <= 0) {
			snprintf(slot->error, sizeof slot->error,
				 "echo read: %s", r ? strerror(errno) : "closed");
			goto out;
		}
		partial += (size_t)r;
		now = load_now_ns();
		while (partial >= LOAD_ECHO_MSG && inflight) {
			partial -= LOAD_ECHO_MSG;
			if (p->depth == 1)
				load_hist_add(&slot->rtt, now - sent_at[head]);
			head = (head + 1) % (unsigned)p->depth;
			inflight--;
			slot->replies++;
		}
		slot->t_last = now;
	}
	ret = 0;
out:
	if (fd >= 0)
		close(fd);
	free(out);
	free(sent_at);
	return ret;
}
