/*
 * budgets.c - the budget file (--budgets): per-uid overrides of the
 * per-uid budgets, and the lookup of a uid's budget.
 *
 * The file is read at start, and again on SIGHUP (server.c), into a
 * table sorted by uid: one entry per uid that a "uid", "user" or "group"
 * line names, each a whole struct bwd_budget (keys a line leaves out are
 * the "default" line's, or the command line's, which the file leaves as
 * they are).  Users and groups are resolved to uids here, with the name
 * service, so that the loop never calls it per uid; a group's members
 * are the users it lists and those whose primary group it is.  A uid that
 * a "uid" or "user" line names takes that line; otherwise the first
 * "group" line it is a member of; otherwise the defaults.  Root is exempt
 * from every budget unless a "uid" or "user" line names it (a group does
 * not).  Lookup is a binary search, O(log entries), once per uid that
 * comes to have something in the daemon (state.c keeps the pointer).
 *
 * Format (bitwheeld(8), BUDGET FILE): one rule a line, '#' starts a
 * comment, words separated by blanks:
 *
 *   default KEY=VALUE...
 *   uid N KEY=VALUE...
 *   user NAME KEY=VALUE...
 *   group NAME KEY=VALUE...
 *
 * KEY is clients, sessions, timers, bytes (with K, M or G) or
 * periodic-rate (Hz); VALUE may be "unlimited".  Any error names the file
 * and line, and stops the daemon from starting (or, on SIGHUP, leaves the
 * budgets in force).
 *
 * Trust: whoever can write the file sets every uid's budgets (all of
 * --max-memory to one uid, nothing to the others), so it is trusted as
 * the state directory is (store.c), and read as one: opened without
 * following a symbolic link (O_NOFOLLOW) and without blocking (O_NONBLOCK:
 * a FIFO there must not hang the event loop on SIGHUP, or start-up), then
 * checked on the fd it was opened as: a regular file, owned by root or
 * the daemon's uid, writable by neither group nor others, at most
 * BUDGETS_MAX_BYTES (a /dev/zero or a runaway file cannot fill memory).
 * A regular file of at most 1 MiB reads in well under a millisecond, in
 * the loop.  Each refusal is logged naming the file, the reason and the
 * fix.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon-internal.h"

#define UNLIMITED UINT64_MAX
/* The largest budget file: thousands of rules (a rule is tens of bytes),
 * and a bound on what a SIGHUP reads into memory. */
#define BUDGETS_MAX_BYTES (1u << 20)

/* A key, where it goes in struct bwd_budget, and how its value reads. */
struct key {
	const char *name;
	size_t offset;
	bool size;                 /* bytes: K, M, G                         */
	uint64_t scale;            /* stored as value x scale (rate: mHz)    */
};

static const struct key keys[] = {
	{ "clients", offsetof(struct bwd_budget, clients), false, 1 },
	{ "sessions", offsetof(struct bwd_budget, sessions), false, 1 },
	{ "timers", offsetof(struct bwd_budget, timers), false, 1 },
	{ "bytes", offsetof(struct bwd_budget, bytes), true, 1 },
	{ "periodic-rate", offsetof(struct bwd_budget, periodic_mhz), false, 1000 },
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

enum rule_kind { RULE_DEFAULT, RULE_UID, RULE_USER, RULE_GROUP };

/* One line of the file, before the defaults are known. */
struct rule {
	enum rule_kind kind;
	unsigned line;
	uid_t uid;                 /* uid and user                           */
	char *group;               /* group: its name                        */
	uint64_t value[NKEYS];
	unsigned set;              /* bit i: keys[i] given                   */
};

struct parse {
	const char *path;
	unsigned line;
	struct rule *rule;
	size_t nrules, cap;
	struct bwd_budget_entry *entry;
	size_t nentries, ecap;
};

static int fail(const struct parse *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int fail(const struct parse *p, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	bwd_log(BWD_LOG_ERR, "%s:%u: %s", p->path, p->line, msg);
	return -1;
}

static uint64_t *field(struct bwd_budget *b, size_t k)
{
	return (uint64_t *)(void *)((char *)b + keys[k].offset);
}

static int parse_value(const struct parse *p, size_t k, const char *v,
		       uint64_t *out)
{
	char *end;
	unsigned long long n;

	if (strcmp(v, "unlimited") == 0) {
		*out = UNLIMITED;
		return 0;
	}
	if (keys[k].size) {
		if (bwd_parse_size(v, out))
			return fail(p, "%s=%s: not a size (e.g. 65536, 64K, 16M, 1G, unlimited)",
				    keys[k].name, v);
		return 0;
	}
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || end == v || *end || *v == '-' || n > UINT64_MAX / 2 / keys[k].scale)
		return fail(p, "%s=%s: not a whole number (or unlimited)", keys[k].name, v);
	*out = (uint64_t)n * keys[k].scale;
	return 0;
}

/* KEY=VALUE words into r. */
static int parse_keys(const struct parse *p, char *save, struct rule *r)
{
	char *w;

	while ((w = strtok_r(NULL, " \t", &save))) {
		char *eq = strchr(w, '=');
		size_t k;

		if (!eq)
			return fail(p, "'%s' is not KEY=VALUE", w);
		*eq = '\0';
		for (k = 0; k < NKEYS && strcmp(keys[k].name, w); k++)
			;
		if (k == NKEYS)
			return fail(p, "unknown key '%s' (clients, sessions, timers, bytes, periodic-rate)",
				    w);
		if (r->set & (1u << k))
			return fail(p, "%s given twice", w);
		if (parse_value(p, k, eq + 1, &r->value[k]))
			return -1;
		r->set |= 1u << k;
	}
	if (!r->set)
		return fail(p, "no KEY=VALUE: a rule sets at least one budget");
	return 0;
}

static int parse_line(struct parse *p, char *line)
{
	char *save, *w = strtok_r(line, " \t", &save), *who;
	struct rule r = { .line = p->line };

	if (!w)
		return 0;
	if (strcmp(w, "default") == 0) {
		r.kind = RULE_DEFAULT;
	} else if (strcmp(w, "uid") == 0 || strcmp(w, "user") == 0 ||
		   strcmp(w, "group") == 0) {
		r.kind = w[0] == 'g' ? RULE_GROUP : w[1] == 'i' ? RULE_UID : RULE_USER;
		who = strtok_r(NULL, " \t", &save);
		if (!who || strchr(who, '='))
			return fail(p, "'%s' needs a %s", w,
				    r.kind == RULE_UID ? "number" : "name");
		if (r.kind == RULE_UID) {
			char *end;
			unsigned long long n;

			errno = 0;
			n = strtoull(who, &end, 10);
			if (errno || end == who || *end || *who == '-' || n >= UINT32_MAX)
				return fail(p, "uid '%s' is not a number below 4294967295", who);
			r.uid = (uid_t)n;
		} else if (r.kind == RULE_USER) {
			struct passwd *pw = getpwnam(who);

			if (!pw)
				return fail(p, "no user '%s'", who);
			r.uid = pw->pw_uid;
		} else {
			if (!getgrnam(who))
				return fail(p, "no group '%s'", who);
			r.group = strdup(who);
			if (!r.group)
				return fail(p, "out of memory");
		}
	} else {
		return fail(p, "'%s' is not default, uid, user or group", w);
	}
	if (parse_keys(p, save, &r))
		goto fail;
	if (p->nrules == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 16;
		struct rule *n = realloc(p->rule, cap * sizeof(*n));

		if (!n) {
			fail(p, "out of memory");
			goto fail;
		}
		p->rule = n;
		p->cap = cap;
	}
	p->rule[p->nrules++] = r;
	return 0;
fail:
	free(r.group);
	return -1;
}

static struct bwd_budget_entry *entry_find(const struct parse *p, uid_t uid)
{
	for (size_t i = 0; i < p->nentries; i++)
		if (p->entry[i].uid == uid)
			return &p->entry[i];
	return NULL;
}

/* uid takes rule r's budget (keys it leaves out: def's), unless an
 * earlier rule gave it one: a group's members keep theirs, but a uid or
 * user rule naming a uid twice is an error. */
static int add_entry(struct parse *p, const struct rule *r, uid_t uid,
		     const struct bwd_budget *def)
{
	struct bwd_budget_entry *e = entry_find(p, uid);

	p->line = r->line;
	if (e) {
		if (r->kind == RULE_GROUP)
			return 0;
		return fail(p, "uid %lu already has its budget (line %u)",
			    (unsigned long)uid, e->line);
	}
	if (p->nentries == p->ecap) {
		size_t cap = p->ecap ? 2 * p->ecap : 16;
		struct bwd_budget_entry *n = realloc(p->entry, cap * sizeof(*n));

		if (!n)
			return fail(p, "out of memory");
		p->entry = n;
		p->ecap = cap;
	}
	e = &p->entry[p->nentries++];
	e->uid = uid;
	e->line = r->line;
	e->budget = *def;
	for (size_t k = 0; k < NKEYS; k++)
		if (r->set & (1u << k))
			*field(&e->budget, k) = r->value[k];
	return 0;
}

/* A group rule: its listed members, then those whose primary group it
 * is; never root. */
static int add_group(struct parse *p, const struct rule *r,
		     const struct bwd_budget *def)
{
	struct group *gr = getgrnam(r->group);
	struct passwd *pw;
	gid_t gid;
	int err = 0;

	p->line = r->line;
	if (!gr)
		return fail(p, "no group '%s'", r->group);
	gid = gr->gr_gid;
	for (char **m = gr->gr_mem; *m && !err; m++) {
		pw = getpwnam(*m);
		if (pw && pw->pw_uid != 0)
			err = add_entry(p, r, pw->pw_uid, def);
	}
	setpwent();
	while (!err && (pw = getpwent()))
		if (pw->pw_gid == gid && pw->pw_uid != 0)
			err = add_entry(p, r, pw->pw_uid, def);
	endpwent();
	return err;
}

static int by_uid(const void *a, const void *b)
{
	uid_t x = ((const struct bwd_budget_entry *)a)->uid,
	      y = ((const struct bwd_budget_entry *)b)->uid;

	return x < y ? -1 : x > y;
}

void bwd_budgets_defaults(const struct bwd_limits *l, struct bwd_budgets *out)
{
	out->def = (struct bwd_budget){
		.clients = l->max_clients_per_uid,
		.sessions = l->max_sessions_per_uid,
		.timers = l->max_timers_per_uid,
		.periodic_mhz = l->max_periodic_mhz_per_uid,
		.bytes = l->max_bytes_per_uid,
	};
}

/* The rules in order: the default first, whatever its line, then uid and
 * user rules, then groups, so that a rule naming a uid wins over a group
 * whatever their order. */
static int build(struct parse *p, const struct bwd_limits *l, struct bwd_budgets *out)
{
	struct bwd_budget def;
	const struct rule *dflt = NULL;
	int err = 0;

	for (size_t i = 0; i < p->nrules; i++) {
		if (p->rule[i].kind != RULE_DEFAULT)
			continue;
		if (dflt) {
			p->line = p->rule[i].line;
			return fail(p, "a second default rule (the first is line %u)",
				    dflt->line);
		}
		dflt = &p->rule[i];
	}
	bwd_budgets_defaults(l, out);
	def = out->def;
	for (size_t k = 0; dflt && k < NKEYS; k++)
		if (dflt->set & (1u << k))
			*field(&def, k) = dflt->value[k];
	for (size_t i = 0; i < p->nrules && !err; i++)
		if (p->rule[i].kind == RULE_UID || p->rule[i].kind == RULE_USER)
			err = add_entry(p, &p->rule[i], p->rule[i].uid, &def);
	for (size_t i = 0; i < p->nrules && !err; i++)
		if (p->rule[i].kind == RULE_GROUP)
			err = add_group(p, &p->rule[i], &def);
	if (err)
		return err;
	qsort(p->entry, p->nentries, sizeof(*p->entry), by_uid);
	out->def = def;
	out->entry = p->entry;
	out->n = p->nentries;
	p->entry = NULL;
	return 0;
}

/*
 * The file at path, whole, into *text (NUL-terminated after its *len
 * bytes; the caller frees it), if it may be trusted (see the top); -1,
 * logged, if not.
 */
static int read_trusted(const char *path, char **text, size_t *len)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	char *buf = NULL;
	size_t n = 0;

	if (fd < 0) {
		bwd_log(BWD_LOG_ERR, "--budgets %s: %s", path,
			errno == ELOOP ? "a symbolic link; name the file itself, which must be a regular file"
				       : strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0) {
		bwd_log(BWD_LOG_ERR, "--budgets %s: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		bwd_log(BWD_LOG_ERR, "--budgets %s: a %s, not a regular file",
			path, bwd_mode_name(st.st_mode));
		goto fail;
	}
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		bwd_log(BWD_LOG_ERR, "--budgets %s: owned by uid %u, not by the daemon's uid %u or root, and whoever owns it sets every uid's budgets; chown it (if you trust it)",
			path, (unsigned)st.st_uid, (unsigned)geteuid());
		goto fail;
	}
	if (st.st_mode & 022) {
		bwd_log(BWD_LOG_ERR, "--budgets %s: writable by %s (mode %04o), who could set every uid's budgets; chmod go-w it",
			path, st.st_mode & 002 ? "others" : "its group",
			(unsigned)(st.st_mode & 07777));
		goto fail;
	}
	if (st.st_size > BUDGETS_MAX_BYTES) {
		bwd_log(BWD_LOG_ERR, "--budgets %s: %lld bytes, more than a budget file may hold (%u)",
			path, (long long)st.st_size, BUDGETS_MAX_BYTES);
		goto fail;
	}
	buf = malloc((size_t)st.st_size + 2);
	if (!buf) {
		bwd_log(BWD_LOG_ERR, "--budgets %s: out of memory", path);
		goto fail;
	}
	/* Up to one byte past the size fstat gave, to see it grow. */
	while (n <= (size_t)st.st_size) {
		ssize_t r = read(fd, buf + n, (size_t)st.st_size + 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			bwd_log(BWD_LOG_ERR, "--budgets %s: %s", path, strerror(errno));
			goto fail;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > (size_t)st.st_size) {
		bwd_log(BWD_LOG_ERR, "--budgets %s: grew past its %lld bytes while being read; not read",
			path, (long long)st.st_size);
		goto fail;
	}
	close(fd);
	buf[n] = '\0';
	*text = buf;
	*len = n;
	return 0;
fail:
	free(buf);
	close(fd);
	return -1;
}

int bwd_budgets_load(const char *path, const struct bwd_limits *l,
		     struct bwd_budgets *out)
{
	struct parse p = { .path = path };
	char *text, *line, *nl;
	size_t len;
	int err = 0;

	out->path = path;
	if (read_trusted(path, &text, &len))
		return -1;
	for (line = text; !err && line < text + len; line = nl + 1) {
		nl = memchr(line, '\n', (size_t)(text + len - line));
		if (!nl)
			nl = text + len;
		*nl = '\0';
		p.line++;
		if (strlen(line) != (size_t)(nl - line)) {
			err = fail(&p, "a NUL byte");
			break;
		}
		line[strcspn(line, "#\r")] = '\0';
		err = parse_line(&p, line);
	}
	free(text);
	if (!err)
		err = build(&p, l, out);
	for (size_t i = 0; i < p.nrules; i++)
		free(p.rule[i].group);
	free(p.rule);
	free(p.entry);
	return err;
}

const struct bwd_budget *bwd_budget_of(const struct bwd_budgets *b, uid_t uid)
{
	struct bwd_budget_entry key = { .uid = uid };
	const struct bwd_budget_entry *e = b->n ?
		bsearch(&key, b->entry, b->n, sizeof(key), by_uid) : NULL;

	if (e)
		return &e->budget;
	return uid == 0 ? NULL : &b->def;
}

void bwd_budgets_free(struct bwd_budgets *b)
{
	free(b->entry);
	b->entry = NULL;
	b->n = 0;
}
