/*
 * listen.c - the listening socket.
 *
 * Under systemd socket activation the socket is systemd's: it keeps
 * listening while the daemon restarts, so no connection attempt is lost.
 * Otherwise we bind the path ourselves.  A path that answers a connect
 * belongs to a live daemon, and we refuse to start rather than steal it; a
 * socket file nobody answers on is stale (a crash left it) and is
 * replaced.  The socket is created with its final mode (umask set around
 * bind), so it is never reachable with looser permissions.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "daemon-internal.h"

static int activated_fd(int *fd_out)
{
	int n = sd_listen_fds(1), fd = SD_LISTEN_FDS_START;

	if (n < 0) {
		bwd_log(BWD_LOG_ERR, "sd_listen_fds: %s", strerror(-n));
		return n;
	}
	if (n == 0)
		return 0;
	if (n > 1) {
		bwd_log(BWD_LOG_ERR, "systemd passed %d sockets; bitwheeld listens on exactly one", n);
		return -EINVAL;
	}
	if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0) {
		bwd_log(BWD_LOG_ERR, "the socket systemd passed is not a listening Unix stream socket");
		return -EINVAL;
	}
	*fd_out = fd;
	return 1;
}

/* 1: a daemon answers at path; 0: nobody does. */
static int someone_listens(const struct sockaddr_un *sa)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), live;

	if (fd < 0)
		return 0;
	live = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0;
	close(fd);
	return live;
}

/* Create the socket's directory if it is missing (only the last level,
 * as systemd's RuntimeDirectory would). */
static void make_parent(const char *path)
{
	char dir[PATH_MAX];

	if (strlen(path) >= sizeof(dir))
		return;
	strcpy(dir, path);
	if (mkdir(dirname(dir), 0755) == 0)
		bwd_log(BWD_LOG_INFO, "created %s", dir);
}

static int bind_path(int fd, const struct sockaddr_un *sa, unsigned mode)
{
	mode_t old = umask(~mode & 0777);
	int r = bind(fd, (const struct sockaddr *)sa, sizeof(*sa));
	int err = errno;

	umask(old);
	errno = err;
	return r;
}

int bwd_listen_open(const char *path, unsigned mode, int *fd_out,
		    bool *activated)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, r;

	r = activated_fd(fd_out);
	*activated = r > 0;
	if (r != 0)
		return r < 0 ? r : 0;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		bwd_log(BWD_LOG_ERR, "socket path too long (%zu bytes, at most %zu): %s",
			strlen(path), sizeof(sa.sun_path) - 1, path);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	make_parent(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		r = -errno;
		bwd_log(BWD_LOG_ERR, "socket: %s", strerror(errno));
		return r;
	}
	r = bind_path(fd, &sa, mode);
	if (r < 0 && errno == EADDRINUSE) {
		if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
			bwd_log(BWD_LOG_ERR, "%s exists and is not a socket; not touching it", path);
			r = -EEXIST;
			goto fail;
		}
		if (someone_listens(&sa)) {
			bwd_log(BWD_LOG_ERR, "another bitwheeld is already listening on %s", path);
			r = -EADDRINUSE;
			goto fail;
		}
		bwd_log(BWD_LOG_NOTICE, "replacing stale socket %s", path);
		unlink(path);
		r = bind_path(fd, &sa, mode);
	}
	if (r < 0) {
		r = -errno;
		bwd_log(BWD_LOG_ERR, "cannot bind %s: %s", path, strerror(errno));
		goto fail;
	}
	if (chmod(path, mode) < 0 || listen(fd, SOMAXCONN) < 0) {
		r = -errno;
		bwd_log(BWD_LOG_ERR, "cannot listen on %s: %s", path, strerror(errno));
		unlink(path);
		goto fail;
	}
	*fd_out = fd;
	return 0;
fail:
	close(fd);
	return r;
}
