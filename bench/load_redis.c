/*
 * load_redis.c - bwload's redis subjects, through hiredis (built only
 * with BENCH_HAVE_HIREDIS):
 *
 *   'z' a sorted-set delay queue: ZADD q <deadline ms> <member> to
 *       schedule, ZREM q <member> to cancel; a consumer process pops what
 *       is due with one Lua script (ZRANGEBYSCORE q -inf now LIMIT 0 512,
 *       then ZREM of those: the usual atomic delay-queue pop), polling
 *       again at once while it finds work and after 100 us when not.
 *   'x' key expiry notifications: SET <key> 1 PX <delay ms> to schedule,
 *       DEL <key> to cancel; a subscriber on __keyevent@0__:expired
 *       (notify-keyspace-events Ex).
 *
 * The member or key carries its deadline in CLOCK_MONOTONIC ns, so the
 * consumer measures lateness as bitwheel's client does.  Workers keep
 * `depth` commands in flight with redisAppendCommand / redisGetReply.
 * PX takes whole milliseconds, so 'x' rounds each delay up to one.
 */
#include "bwload.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECENT 64

static const char pop_script[] =
	"local r = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 512) "
	"if #r > 0 then redis.call('ZREM', KEYS[1], unpack(r)) end "
	"return r";

static redisContext *rconnect(const char *socket, struct load_slot *slot)
{
	struct timeval tv = { .tv_sec = 5 };
	redisContext *c = redisConnectUnixWithTimeout(socket, tv);

	if (!c || c->err) {
		snprintf(slot->error, sizeof slot->error, "redis connect %s: %s",
			 socket, c ? c->errstr : "out of memory");
		redisFree(c);
		return NULL;
	}
	redisSetTimeout(c, tv);
	return c;
}

int load_redis_prepare(const char *socket, char kind,
		       const struct load_phase *p, char *err, size_t errlen)
{
	struct load_slot tmp;
	redisContext *c = rconnect(socket, &tmp);
	redisReply *r;
	int ret = -1;

	(void)p;
	if (!c) {
		snprintf(err, errlen, "%s", tmp.error);
		return -1;
	}
	r = redisCommand(c, "FLUSHALL");
	if (!r || r->type == REDIS_REPLY_ERROR)
		goto fail;
	freeReplyObject(r);
	r = redisCommand(c, "CONFIG SET notify-keyspace-events %s",
			 kind == 'x' ? "Ex" : "");
	if (!r || r->type == REDIS_REPLY_ERROR)
		goto fail;
	ret = 0;
fail:
	if (ret)
		snprintf(err, errlen, "redis: %s", r ? r->str : c->errstr);
	if (r)
		freeReplyObject(r);
	redisFree(c);
	return ret;
}

static int append(redisContext *c, char kind, const struct load_phase *p,
		  int id, uint64_t *seq, uint64_t now, uint64_t *rs,
		  uint64_t *recent, unsigned *nrecent, char *is_cancel)
{
	char name[64];

	if (*nrecent && (int)(load_rand(rs) % 100) < p->cancel_pct) {
		uint64_t k = recent[load_rand(rs) % *nrecent];

		*is_cancel = 1;
		/* The deadline is part of the name: look it up again. */
		snprintf(name, sizeof name, "%" PRIu64 ":%d:%" PRIu64,
			 recent[RECENT + k % RECENT], id, k);
		return kind == 'z' ? redisAppendCommand(c, "ZREM bwload:q:%s %s", p->name, name)
				   : redisAppendCommand(c, "DEL bwload:x:%s", name);
	}
	uint64_t delay = load_delay(p, rs), k = (*seq)++, deadline;

	if (kind == 'x')
		delay = (delay + 999999) / 1000000 * 1000000;
	deadline = now + delay;
	*is_cancel = 0;
	if (*nrecent < RECENT)
		recent[(*nrecent)++] = k;
	else
		recent[k % RECENT] = k;
	recent[RECENT + k % RECENT] = deadline;
	snprintf(name, sizeof name, "%" PRIu64 ":%d:%" PRIu64, deadline, id, k);
	if (kind == 'z')
		return redisAppendCommand(c, "ZADD bwload:q:%s %.6f %s", p->name,
					  (double)deadline / 1e6, name);
	return redisAppendCommand(c, "SET bwload:x:%s 1 PX %" PRIu64, name,
				  delay / 1000000);
}

int load_redis_worker(const char *socket, char kind,
		      const struct load_phase *p, int id,
		      struct load_slot *slot)
{
	redisContext *c = rconnect(socket, slot);
	uint64_t *sent_at = calloc((size_t)p->depth, sizeof *sent_at);
	char *cancel = calloc((size_t)p->depth, 1);
	uint64_t recent[2 * RECENT], seq = 0, end, now;
	uint64_t rs = 0xD1B54A32D192ED03ULL ^ (uint64_t)(id + 1) * 104729;
	unsigned nrecent = 0, head = 0, tail = 0, inflight = 0;
	int ret = -1;

	if (!c || !sent_at || !cancel) {
		if (c)
			snprintf(slot->error, sizeof slot->error, "out of memory");
		goto out;
	}
	load_sleep_until(p->start_ns);
	slot->t_start = load_now_ns();
	end = p->start_ns + p->duration_ns;
	for (;;) {
		redisReply *r;

		now = load_now_ns();
		if (now < end) {
			uint64_t allowed = load_allowed(p, now);

			while (inflight < (unsigned)p->depth && slot->sent < allowed &&
			       slot->sent < p->max_requests) {
				if (append(c, kind, p, id, &seq, now, &rs, recent,
					   &nrecent, &cancel[tail]) != REDIS_OK)
					goto fail;
				sent_at[tail] = now;
				tail = (tail + 1) % (unsigned)p->depth;
				inflight++;
				slot->sent++;
			}
		}
		if (!inflight) {
			if (now >= end || slot->sent >= p->max_requests)
				break;
			load_sleep_until(now + 100000);
			continue;
		}
		if (redisGetReply(c, (void **)&r) != REDIS_OK || !r)
			goto fail;
		now = load_now_ns();
		if (p->depth == 1)
			load_hist_add(&slot->rtt, now - sent_at[head]);
		if (r->type == REDIS_REPLY_ERROR) {
			if (slot->errors++ == 0)
				snprintf(slot->error, sizeof slot->error, "redis: %s", r->str);
		} else if (cancel[head]) {
			if (r->type == REDIS_REPLY_INTEGER && r->integer > 0)
				slot->cancel_hit++;
		} else {
			slot->scheduled++;
		}
		freeReplyObject(r);
		head = (head + 1) % (unsigned)p->depth;
		inflight--;
		slot->replies++;
		slot->t_last = now;
	}
	ret = 0;
	goto out;
fail:
	snprintf(slot->error, sizeof slot->error, "redis: %s", c->errstr);
out:
	redisFree(c);
	free(sent_at);
	free(cancel);
	return ret;
}

static void record(struct load_slot *slot, const char *name, size_t len)
{
	uint64_t now = load_now_ns(), deadline;
	char buf[64];

	if (len >= sizeof buf)
		len = sizeof buf - 1;
	memcpy(buf, name, len);
	buf[len] = '\0';
	if (sscanf(buf, "%" SCNu64, &deadline) != 1)
		return;
	slot->fires++;
	if (now < deadline)
		slot->early++;
	else
		load_hist_add(&slot->late, now - deadline);
}

int load_redis_consumer(const char *socket, char kind,
			const struct load_phase *p, volatile int *stop,
			struct load_slot *slot)
{
	uint64_t bound = p->start_ns + p->duration_ns + p->max_delay_ns +
			 p->drain_ns + 5000000000ULL;
	redisContext *c = rconnect(socket, slot);
	char key[64];
	int ret = -1;

	if (!c)
		return -1;
	snprintf(key, sizeof key, "bwload:q:%s", p->name);
	if (kind == 'x') {
		redisReply *r = redisCommand(c, "SUBSCRIBE __keyevent@0__:expired");

		if (!r)
			goto fail;
		freeReplyObject(r);
	}
	while (!*stop && load_now_ns() < bound) {
		redisReply *r;

		if (kind == 'x') {
			struct pollfd pfd = { .fd = c->fd, .events = POLLIN };

			/* Replies already buffered first; else wait at most
			 * 20 ms for more, so the stop flag is seen. */
			r = NULL;
			if (redisReaderGetReply(c->reader, (void **)&r) != REDIS_OK)
				goto fail;
			if (!r) {
				if (poll(&pfd, 1, 20) > 0 && redisBufferRead(c) != REDIS_OK)
					goto fail;
				continue;
			}
			if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
			    r->element[2]->type == REDIS_REPLY_STRING &&
			    r->element[2]->len > 9)
				/* "bwload:x:<deadline>:..." */
				record(slot, r->element[2]->str + 9,
				       r->element[2]->len - 9);
			freeReplyObject(r);
			continue;
		}
		char now_ms[32];

		snprintf(now_ms, sizeof now_ms, "%.6f", (double)load_now_ns() / 1e6);
		r = redisCommand(c, "EVAL %s 1 %s %s", pop_script, key, now_ms);
		if (!r)
			goto fail;
		if (r->type == REDIS_REPLY_ARRAY) {
			for (size_t i = 0; i < r->elements; i++)
				record(slot, r->element[i]->str, r->element[i]->len);
		}
		if (r->type != REDIS_REPLY_ARRAY || r->elements == 0)
			load_sleep_until(load_now_ns() + 100000);
		freeReplyObject(r);
	}
	ret = 0;
	goto out;
fail:
	snprintf(slot->error, sizeof slot->error, "redis consumer: %s", c->errstr);
out:
	redisFree(c);
	return ret;
}
