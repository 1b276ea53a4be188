/*
 * listen.c - the listening socket.
 *
 * Under systemd socket activation the socket is systemd's: it keeps
 * listening while the daemon restarts, so no connection attempt is lost,
 * and none of the checks below apply.  Otherwise we bind the path
 * ourselves, after checking where:
 *
 *   - the directory holding the socket must be owned by the daemon's uid
 *     or root, and not writable by group or others unless sticky (as
 *     /tmp): whoever may rename entries in it could move our socket away
 *     and pose as the daemon, or swap the path for a symbolic link;
 *   - the directory is opened once and everything after happens in it
 *     (fstatat, unlinkat, and bind through /proc/self/fd/N/NAME when
 *     /proc is there), so a parent swapped after the check is not used;
 *   - an existing entry at the path: not a socket, refused; a socket
 *     something answers on (a non-blocking connect: a full backlog
 *     answers too, and nothing can hang us), refused; a socket nobody
 *     answers on is stale (a crash left it) and replaced if it is ours
 *     (the daemon's uid or root), refused otherwise;
 *   - the socket is created with its final mode (umask set around bind),
 *     so it is never reachable with looser permissions, and no chmod by
 *     name follows (chmod follows symbolic links); a mode that came out
 *     otherwise (a default ACL on the directory) is refused;
 *   - --socket-group gives it to a group between bind and listen, by name
 *     in the directory already checked (nobody else may rename entries
 *     there) and without following a link; nobody can connect before
 *     listen(2), so the daemon's own group never had it open.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
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

/* 1: something answers at sa; 0: nobody does.  Non-blocking: a listener
 * whose backlog is full (EAGAIN) answers too, and never holds us up. */
static int someone_listens(const struct sockaddr_un *sa)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), live;

	if (fd < 0)
		return 0;
	live = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0 ||
	       errno == EAGAIN || errno == EINPROGRESS;
	close(fd);
	return live;
}

/* Create the socket's directory if it is missing (only the last level,
 * as systemd's RuntimeDirectory would). */
static void make_parent(const char *dir)
{
	if (mkdir(dir, 0755) == 0)
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

/* The directory that holds the socket, opened and checked; -errno. */
static int open_parent(const char *dir, const char *path, int *dirfd)
{
	uid_t me = geteuid();
	struct stat st;
	int fd;

	make_parent(dir);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		int err = errno;

		bwd_log(BWD_LOG_ERR, "--socket %s: its directory %s: %s", path, dir,
			strerror(err));
		if (fd >= 0)
			close(fd);
		return -err;
	}
	if (st.st_uid != me && st.st_uid != 0) {
		bwd_log(BWD_LOG_ERR, "%s: owned by uid %u, not by the daemon's uid %u or root; chown it or choose another --socket than %s",
			dir, (unsigned)st.st_uid, (unsigned)me, path);
		close(fd);
		return -EPERM;
	}
	if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX)) {
		bwd_log(BWD_LOG_ERR, "%s: writable by %s (mode %04o), who could move the socket away or pose as the daemon; chmod go-w %s (or +t) or choose another --socket than %s",
			dir, st.st_mode & 002 ? "others" : "its group",
			(unsigned)(st.st_mode & 07777), dir, path);
		close(fd);
		return -EPERM;
	}
	*dirfd = fd;
	return 0;
}

/* The address bind uses: the name inside the checked directory
 * (/proc/self/fd/N/NAME) when /proc is there and it fits, else path. */
static void bind_address(int dirfd, const char *name, const char *path,
			 struct sockaddr_un *sa)
{
	int n = snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s",
			 dirfd, name);

	if (n < 0 || (size_t)n >= sizeof(sa->sun_path) ||
	    access("/proc/self/fd", X_OK) < 0)
		snprintf(sa->sun_path, sizeof(sa->sun_path), "%s", path);
}

/* An entry already at the path: 0 when it is gone (stale, removed), or
 * -errno with the reason logged. */
static int clear_path(int dirfd, const char *name, const char *path,
		      const struct sockaddr_un *sa)
{
	uid_t me = geteuid();
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		bwd_log(BWD_LOG_ERR, "%s: %s", path, strerror(errno));
		return -errno;
	}
	if (!S_ISSOCK(st.st_mode)) {
		bwd_log(BWD_LOG_ERR, "%s exists and is not a socket (a %s); not touching it",
			path, bwd_mode_name(st.st_mode));
		return -EEXIST;
	}
	if (someone_listens(sa)) {
		bwd_log(BWD_LOG_ERR, "another bitwheeld (or something else) listens on %s",
			path);
		return -EADDRINUSE;
	}
	if (st.st_uid != me && st.st_uid != 0) {
		bwd_log(BWD_LOG_ERR, "%s: a stale socket of uid %u, not of the daemon's uid %u or root; not removing it (remove it yourself)",
			path, (unsigned)st.st_uid, (unsigned)me);
		return -EPERM;
	}
	bwd_log(BWD_LOG_NOTICE, "replacing stale socket %s", path);
	if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT) {
		bwd_log(BWD_LOG_ERR, "cannot remove the stale socket %s: %s", path,
			strerror(errno));
		return -errno;
	}
	return 0;
}

int bwd_listen_open(const char *path, unsigned mode, gid_t gid, int *fd_out,
		    bool *activated)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char dirbuf[PATH_MAX];
	const char *dir, *name, *slash;
	struct stat st = { 0 };
	int fd = -1, dirfd = -1, r;

	r = activated_fd(fd_out);
	*activated = r > 0;
	if (r > 0 && gid != (gid_t)-1)
		bwd_log(BWD_LOG_WARNING, "--socket-group does not apply to the socket systemd passed: its unit's SocketGroup= does");
	if (r != 0)
		return r < 0 ? r : 0;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		bwd_log(BWD_LOG_ERR, "socket path too long (%zu bytes, at most %zu): %s",
			strlen(path), sizeof(sa.sun_path) - 1, path);
		return -ENAMETOOLONG;
	}
	/* The directory and the last component; a path ending in '/' names
	 * no socket. */
	slash = strrchr(path, '/');
	name = slash ? slash + 1 : path;
	dir = !slash ? "." : slash == path ? "/" : dirbuf;
	if (slash && slash != path) {
		memcpy(dirbuf, path, (size_t)(slash - path));
		dirbuf[slash - path] = '\0';
	}
	if (!*name || !strcmp(name, ".") || !strcmp(name, "..")) {
		bwd_log(BWD_LOG_ERR, "--socket %s: not a file name", path);
		return -EINVAL;
	}
	r = open_parent(dir, path, &dirfd);
	if (r)
		return r;
	bind_address(dirfd, name, path, &sa);
	r = clear_path(dirfd, name, path, &sa);
	if (r)
		goto fail;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		r = -errno;
		bwd_log(BWD_LOG_ERR, "socket: %s", strerror(errno));
		goto fail;
	}
	if (bind_path(fd, &sa, mode) < 0) {
		r = -errno;
		if (errno == EADDRINUSE)
			bwd_log(BWD_LOG_ERR, "cannot bind %s: something else created it meanwhile",
				path);
		else
			bwd_log(BWD_LOG_ERR, "cannot bind %s: %s", path, strerror(errno));
		goto fail;
	}
	/* The umask made the mode; a default ACL on the directory would
	 * override it, and chmod by name is not safe: check, never fix. */
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISSOCK(st.st_mode) || (st.st_mode & 07777) != mode) {
		r = -EPERM;
		bwd_log(BWD_LOG_ERR, "%s: the socket came out with mode %04o, not --socket-mode %04o (a default ACL on %s?)",
			path, (unsigned)(st.st_mode & 07777), mode, dir);
		if (S_ISSOCK(st.st_mode))
			unlinkat(dirfd, name, 0);
		goto fail;
	}
	if (gid != (gid_t)-1 &&
	    fchownat(dirfd, name, (uid_t)-1, gid, AT_SYMLINK_NOFOLLOW) < 0) {
		r = -errno;
		bwd_log(BWD_LOG_ERR, "cannot give %s to --socket-group %u: %s (the daemon's user must be root or a member of the group)",
			path, (unsigned)gid, strerror(errno));
		unlinkat(dirfd, name, 0);
		goto fail;
	}
	if (listen(fd, SOMAXCONN) < 0) {
		r = -errno;
		bwd_log(BWD_LOG_ERR, "cannot listen on %s: %s", path, strerror(errno));
		unlinkat(dirfd, name, 0);
		goto fail;
	}
	close(dirfd);
	*fd_out = fd;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	close(dirfd);
	return r;
}
