/*
 * store_put.c - the store's put: a folio cut into units, each same-filled, compressed
 * (in this thread or by the engines) or kept raw, stored in the pool, and then all of
 * them put in the table at once (zf_store_put, and zf_store_put_start/finish to keep
 * several folios in flight), with the working sets that hold a put in flight.
 *
 * Why the put is shaped so (the folio rule, completions that store their unit in the
 * compressing thread, units written behind) is in store.c's top comment and beside
 * pool_store_unit() and put_commit().
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../common/checksum.h"
#include "store_internal.h"

#define COMMIT_CHUNK 64u /* units a put adds to the table under one hold of its locks */
#define STORE_CACHED_CTX 16u /* put working sets kept for reuse */

struct unit_out {
	uint64_t where; /* handle or same-filled value */
	uint32_t clen;
	uint8_t kind, raw;
	uint8_t compress_failed; /* status came from the codec or verify: reject_compress_fail */
	int status; /* 0, or why the unit fails the put */
	uint64_t checksum;
	uint8_t *dst; /* written behind: its object's bytes, pinned until unit_write() */
	const void *data; /* and what goes there */
};

/* What a put's jobs share, for their completion (unit_compressed). */
struct put_ctx {
	zf_store *s;
	const uint8_t *src;
	uint32_t unit;
	struct unit_out *out;
	uint8_t *check; /* verify's room: check + index * stride */
	size_t stride; /* 0 when the units are compressed one after another in one thread */
	bool behind; /* each unit's copy into the pool waits for the next unit's compression */
};

/*
 * A put's working memory, and the put itself while it is in flight (the
 * zf_store_pending of zf_store_put_start): kept on a stack for the next put.
 */
struct zf_store_pending {
	struct zf_store_pending *next;
	zf_batch *batch; /* a put's jobs, with engines */
	zf_codec_ctx *ctx; /* the putting thread's compressor */
	uint8_t *buf; /* ZF_UNIT_MAX: a unit compressed by the putting thread */
	uint8_t *check; /* ZF_UNIT_MAX, with verify: the decompressed units */
	zf_job jobs[ZF_UNIT_MAX / STORE_PAGE];

	/* The put in flight. */
	zf_store *s;
	uint64_t index;
	size_t len;
	uint32_t owner, unit, order;
	unsigned n; /* units */
	int ret; /* 0, or why the put already failed (the entries' allocation) */
	bool queued; /* its jobs went to the engines: finish waits for them */
	struct put_ctx pc;
	struct unit_out out[ZF_UNIT_MAX / STORE_PAGE];
	struct entry *ents[ZF_UNIT_MAX / STORE_PAGE];
	struct entry *olds[ZF_UNIT_MAX / STORE_PAGE]; /* at its commit: the entries it replaced */
	uint64_t handles[ZF_UNIT_MAX / STORE_PAGE]; /* and their pool objects */
};

/* -------------------------------------------------------------------------------- */
/* Worksets                                                                         */
/* -------------------------------------------------------------------------------- */

static void workset_destroy(struct zf_store_pending *w)
{
	if (!w)
		return;
	zf_batch_destroy(w->batch);
	zf_codec_ctx_destroy(w->ctx);
	free(w->buf);
	free(w->check);
	free(w);
}

static void put_write_pending(void);

static struct zf_store_pending *workset_get(zf_store *s)
{
	struct zf_store_pending *w;

	pthread_mutex_lock(&s->ws_lock);
	w = s->ws_free;
	if (w) {
		s->ws_free = w->next;
		s->ws_cached--;
	}
	pthread_mutex_unlock(&s->ws_lock);
	if (w)
		return w;
	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->buf = malloc(ZF_UNIT_MAX);
	w->check = s->o.verify ? malloc(ZF_UNIT_MAX) : NULL;
	if (zf_batch_create(s->engines, s->batch_flags, &w->batch) || !w->buf ||
	    (s->o.verify && !w->check) || zf_codec_ctx_create(s->codec, &w->ctx)) {
		workset_destroy(w);
		return NULL;
	}
	engine_batch_set_flush(w->batch, put_write_pending);
	return w;
}

static void workset_put(zf_store *s, struct zf_store_pending *w)
{
	pthread_mutex_lock(&s->ws_lock);
	if (s->ws_cached < STORE_CACHED_CTX) {
		w->next = s->ws_free;
		s->ws_free = w;
		s->ws_cached++;
		w = NULL;
	}
	pthread_mutex_unlock(&s->ws_lock);
	workset_destroy(w);
}

/* Frees the working sets kept for reuse (zf_store_destroy()). */
void store_worksets_free(zf_store *s)
{
	while (s->ws_free) {
		struct zf_store_pending *w = s->ws_free;

		s->ws_free = w->next;
		workset_destroy(w);
	}
}

/* -------------------------------------------------------------------------------- */
/* Put                                                                              */
/* -------------------------------------------------------------------------------- */

/* Frees the pool objects a failed put allocated. */
static void put_undo(zf_store *s, const struct unit_out *u, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (u[i].kind == ENTRY_POOL && u[i].where)
			pool_free(s, u[i].where);
	}
}

/* Copies a unit written behind into its object (its lines asked for a unit ago). */
static void unit_write(zf_store *s, struct unit_out *u)
{
	memcpy(u->dst, u->data, u->clen);
	zf_pool_read_end(s->pool, u->where);
}

/* The unit this thread left to write behind, waiting for its copy (pool_store_unit()). */
static _Thread_local struct {
	zf_store *s;
	struct unit_out *u;
} behind;

/*
 * The unit this thread left, if any, goes into the pool now: before its next unit's
 * copy, and before the units it stored count as done (the end of a serial put, and
 * engine_batch_set_flush() for the engines and the waiter).
 */
static void put_write_pending(void)
{
	if (!behind.u)
		return;
	unit_write(behind.s, behind.u);
	behind.u = NULL;
}

/*
 * Stores unit i of a put once its compress job j has run (j NULL: it is stored raw): the
 * compressed bytes, or the raw unit when they did not fit, go into the pool with their
 * checksum. Sets the unit's status: 0, or the error that fails the put (the caller frees
 * what was allocated).
 *
 * Written behind (pc->behind: a put of two units or more), the object is allocated and
 * pinned and its lines are asked for, and the copy waits until the same thread has
 * compressed its next unit, into the other half of its buffer. Copied at once, into the
 * lines of a slot nobody had touched since it was freed, a 4 KiB lz4 unit's copy took
 * 1100-1900 cycles, as long as the rest of the store's put work together
 * (bench/results/store-experiments-8d3d082.txt); asked for a compression ahead, the lines
 * are in the cache when it comes. They are asked for reading, into L2: asked for writing
 * they did no better. lz4 split, python, redis and cc1plus, alternated with the copy at
 * once: puts 0.7-2.5 points of the bare loop better on 2 MiB folios, 0-2.1 on 64 KiB ones
 * (bench/results/store.md).
 */
static void pool_store_unit(struct put_ctx *pc, unsigned i, const zf_job *j)
{
	zf_store *s = pc->s;
	struct unit_out *u = &pc->out[i];
	const uint8_t *src = pc->src + (size_t)i * pc->unit;
	const void *data;

	if (pc->behind)
		put_write_pending();

	if (!j || j->status == -E2BIG) {
		if (s->o.reject_incompressible) {
			u->status = -E2BIG;
			return;
		}
		u->raw = 1;
		u->clen = pc->unit;
		data = src;
	} else if (j->status < 0) {
		u->compress_failed = 1;
		u->status = j->status == -ENOMEM ? -ENOMEM : -EIO;
		return;
	} else {
		u->clen = (uint32_t)j->status;
		data = j->dst;
		if (s->o.verify) {
			uint8_t *check = pc->check + i * pc->stride;
			struct get_ctx *g = store_get_ctx(s->codec, 0);

			if (!g) {
				u->status = -ENOMEM;
				return;
			}
			if (zf_codec_decompress(g->ctx, data, u->clen, check, pc->unit) !=
				    (int)pc->unit ||
			    memcmp(check, src, pc->unit)) {
				u->compress_failed = 1;
				u->status = -EIO;
				return;
			}
		}
	}
	u->checksum = j && !u->raw ? j->checksum : zf_checksum(data, u->clen);
	if (zf_pool_alloc(s->pool, u->clen, &u->where)) {
		u->where = 0;
		u->status = -ENOMEM;
		return;
	}
	if (pc->behind && (u->dst = zpool_write_begin(s->pool, u->where))) {
		const uintptr_t end = (uintptr_t)u->dst + u->clen;

		for (uintptr_t line = (uintptr_t)u->dst & ~(uintptr_t)63; line < end; line += 64)
			__builtin_prefetch((const void *)line, 0, 2);
		u->data = data;
		behind.s = s;
		behind.u = u;
		return;
	}
	zf_pool_write(s->pool, u->where, data, u->clen);
}

/* A put's compress job is done: its unit is stored by the thread that compressed it. */
static void unit_compressed(zf_job *j)
{
	struct put_ctx *pc = j->priv;

	pool_store_unit(pc, (unsigned)(((const uint8_t *)j->src - pc->src) / pc->unit), j);
}

/*
 * A put's admission: 0, or -ENOSPC when the pool is full and writeback (if that is the
 * policy) could not bring it under the accept threshold. The first check, which every
 * put makes, is here; what a full pool takes is in store_writeback.c.
 */
static int admit(zf_store *s)
{
	if (!store_pool_full(s, 0))
		return 0;
	return store_make_room(s);
}

/* n zeroed entries into ents; on failure none (ents[0] NULL) and -ENOMEM. */
static int entries_alloc(struct entry **ents, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		ents[i] = calloc(1, sizeof(*ents[i]));
		if (!ents[i]) {
			for (unsigned k = 0; k < i; k++)
				free(ents[k]);
			ents[0] = NULL;
			return -ENOMEM;
		}
	}
	return 0;
}

/*
 * zf_store_put_start(); sync for zf_store_put(), whose thread has nothing else to do but
 * wait: it helps the engines compress (below).
 */
static int put_start(zf_store *s, uint32_t owner, uint64_t index, const void *folio, size_t len,
		     bool sync, zf_store_pending **pending)
{
	const uint8_t *src = folio;
	struct zf_store_pending *w;
	uint32_t threshold;
	unsigned njobs = 0;
	int ret;

	RETURN_IF(!pending, -EINVAL);
	*pending = NULL;
	RETURN_IF(!s || !folio || !folio_valid(index, len), -EINVAL);
	TRY(admit(s));
	w = workset_get(s);
	RETURN_IF(!w, -ENOMEM);
	w->s = s;
	w->owner = owner;
	w->index = index;
	w->len = len;
	w->unit = (uint32_t)ZF_MIN(len, (size_t)s->unit);
	w->order = (uint32_t)__builtin_ctz(w->unit / STORE_PAGE);
	w->n = (unsigned)(len / w->unit);
	w->queued = false;
	w->ents[0] = NULL;
	w->pc = (struct put_ctx){ .s = s,
				  .src = src,
				  .unit = w->unit,
				  .out = w->out,
				  .check = w->check,
				  .stride = w->unit };
	threshold = (uint32_t)((uint64_t)w->unit * s->o.incompressible_pct / 100);

	/* Same-filled units need no compression; the rest are jobs, stored as they complete. */
	memset(w->out, 0, w->n * sizeof(w->out[0]));
	for (unsigned i = 0; i < w->n; i++) {
		uint64_t v;

		if (zf_same_filled(src + (size_t)i * w->unit, w->unit, &v)) {
			w->out[i].kind = ENTRY_SAME;
			w->out[i].where = v;
			continue;
		}
		w->out[i].kind = ENTRY_POOL;
		if (threshold <= 1) {
			/* incompressible_pct 0: nothing is worth compressing */
			pool_store_unit(&w->pc, i, NULL);
			continue;
		}
		/* Compressed only when shorter than the threshold: at most threshold - 1. */
		w->jobs[njobs++] = (zf_job){ .codec = s->codec,
					     .op = ZF_JOB_COMPRESS,
					     .flags = ZF_JOB_CHECKSUM,
					     .src = src + (size_t)i * w->unit,
					     .src_len = w->unit,
					     .dst = w->buf,
					     .dst_cap = threshold - 1,
					     .complete = unit_compressed,
					     .priv = &w->pc };
	}
	if (njobs >= 2 && (size_t)njobs * w->unit >= STORE_ENGINES_MIN &&
	    zf_engines_count(s->engines)) {
		/*
		 * Each engine compresses into a buffer of its own, which the completion copies
		 * into the pool while it is in that CPU's cache, instead of streaming 2 MiB per
		 * folio through a buffer per unit (python lz4 split, 2 MiB folios, 2 engines,
		 * alternated three times: 0.82-0.93 of the two-loop ceiling with a buffer per
		 * unit, 0.87-0.96 with the engines' own). There too each unit is written
		 * behind, from the other half of the engine's buffer. A workset's batch has
		 * nothing in flight: it cannot be refused.
		 */
		w->pc.behind = true;
		for (unsigned k = 0; k < njobs; k++) {
			w->jobs[k].flags |= ZF_JOB_ENGINE_DST;
			w->jobs[k].dst = NULL;
		}
		/*
		 * A thread that puts one folio at a time would only sleep until it is done:
		 * it helps, whatever batch_flags say (store.c). One 2 MiB folio of 64 KiB
		 * units in flight, 2 engines on 2 vCPUs: 0.94-0.98 of the two-loop ceiling
		 * against 0.72-0.76 waiting (bench store, redis lz4, alternated three times).
		 */
		engine_batch_set_help(w->batch, sync || !(s->batch_flags & ZF_BATCH_NO_HELP));
		ret = zf_batch_submit(w->batch, w->jobs, njobs);
		w->queued = !ret;
		if (!ret)
			ret = entries_alloc(w->ents, w->n);
	} else {
		/*
		 * One after another in this thread, through a buffer that stays in the cache:
		 * one unit is compressed into one half while the one before waits in the other
		 * to be written behind (pool_store_unit()). Two units or more are a half each.
		 */
		w->pc.stride = 0;
		w->pc.behind = njobs >= 2;
		for (unsigned k = 0; k < njobs; k++) {
			if (w->pc.behind)
				w->jobs[k].dst = w->buf + (k & 1) * w->unit;
			engine_job_run(w->ctx, &w->jobs[k]);
		}
		put_write_pending();
		ret = entries_alloc(w->ents, w->n);
	}
	w->ret = ret;
	*pending = w;
	return 0;
}

/* Puts a finished put's units in the table, replacing what the keys held. */
static void put_commit(zf_store *s, struct zf_store_pending *w)
{
	struct counters delta;
	struct shard *sh;
	unsigned nr_handles = 0;

	/*
	 * The new units are counted (once, for the folio) before any is in the table, where
	 * a writeback or an invalidation may count them too; the units they replace are
	 * uncounted once, after. A snapshot in between sees both: never half a folio, never
	 * less than is stored. Units of other sizes over these pages go too (a store in unit
	 * mode also holds smaller units of smaller folios).
	 */
	memset(&delta, 0, sizeof(delta));
	for (unsigned i = 0; i < w->n; i++) {
		struct entry *e = w->ents[i];

		e->index = w->index + (uint64_t)i * (w->unit / STORE_PAGE);
		e->owner = w->owner;
		e->clen = w->out[i].kind == ENTRY_SAME ? 0 : w->out[i].clen;
		e->where = w->out[i].where;
		e->checksum = w->out[i].checksum;
		e->codec = 0;
		e->kind = w->out[i].kind;
		e->order = (uint8_t)w->order;
		e->flags = w->out[i].raw ? ENTRY_RAW : 0;
		list_init(&e->lru); /* on the LRU at the commit if it is in the pool */
		atomic_init(&e->refs, 1);
		store_count_entry(&delta, e, +1);
	}
	delta.zswpout += w->len / STORE_PAGE;
	delta.zswpout_units[w->order] += w->n;
	counters_add(s, &delta);

	memset(&delta, 0, sizeof(delta));
	if (s->unit_order)
		store_drop_range(s, w->owner, w->index, w->len / STORE_PAGE, &delta);
	/*
	 * A folio lies in one 2 MiB range, so in one shard: its units go in, in their order
	 * (the LRU's), COMMIT_CHUNK at a time under one hold of the shard lock and lru_lock,
	 * instead of taking both for each unit. Each unit's bucket is asked for four units
	 * ahead and its chain's first entry two ahead, so that the lookups' misses overlap
	 * (python, lz4, 4 KiB units, alternated with a lock pair per unit: puts 0.88-0.89 of
	 * the bare loop against 0.91-0.92, and the gets of the next pass 0.85 against 0.89).
	 * A chunk bounds what a get of the same range, or a writeback, may wait for.
	 */
	sh = shard_of(s, w->owner, w->index);
	for (unsigned i = 0; i < w->n; i++) {
		struct entry *e = w->ents[i], *old;
		const uint64_t hash = key_hash(w->owner, e->index);

		if (i % COMMIT_CHUNK == 0) {
			if (i) {
				pthread_mutex_unlock(&s->lru_lock);
				pthread_mutex_unlock(&sh->lock);
			}
			pthread_mutex_lock(&sh->lock);
			pthread_mutex_lock(&s->lru_lock);
		}
		if (i + LOOKUP_BUCKET_AHEAD < w->n)
			table_prefetch_bucket(sh, w->owner,
					      w->ents[i + LOOKUP_BUCKET_AHEAD]->index);
		if (i + LOOKUP_ENTRY_AHEAD < w->n)
			table_prefetch_chain(sh, w->owner, w->ents[i + LOOKUP_ENTRY_AHEAD]->index);
		old = table_find(sh, hash, w->owner, e->index);
		if (old) {
			entry_remove_locked(sh, hash, old);
			store_count_entry(&delta, old, -1);
			delta.invalidates++;
		}
		w->olds[i] = old;
		table_insert(sh, hash, e);
		if (e->kind == ENTRY_POOL)
			lru_add(s, e);
	}
	pthread_mutex_unlock(&s->lru_lock);
	pthread_mutex_unlock(&sh->lock);
	counters_add(s, &delta);
	for (unsigned i = 0; i < w->n; i++)
		if (w->olds[i])
			nr_handles += (unsigned)entry_unref(s, w->olds[i], &w->handles[nr_handles]);
	/*
	 * The replaced units' pool objects go together, in the units' order: untouched since
	 * they were stored, they are freed with their cache misses overlapped (python, lz4,
	 * 2 MiB folios of 4 KiB units put over the units they replace: the put 2% faster).
	 * The order matters: the next put of these pages fills the freed slots in it, which
	 * keeps neighbouring units together in the pool (freed in another order, the gets of
	 * the next pass were 7% slower).
	 */
	pool_free_many(s, w->handles, nr_handles);
}

/* A put is refused (ret): what it allocated goes, and the first unit that failed is counted. */
static void put_refuse(zf_store *s, struct zf_store_pending *w, int ret)
{
	unsigned k = 0;

	while (k < w->n && !w->out[k].status)
		k++;
	if (w->ents[0])
		for (unsigned i = 0; i < w->n; i++)
			free(w->ents[i]);
	put_undo(s, w->out, w->n);
	/* The first unit that failed says why the folio was refused, as a serial put would. */
	pthread_mutex_lock(&s->stats_lock);
	if (k < w->n) {
		s->n.reject_compress_poor += w->out[k].status == -E2BIG;
		s->n.reject_compress_fail += w->out[k].compress_failed;
	}
	s->n.reject_alloc_fail += ret == -ENOMEM;
	pthread_mutex_unlock(&s->stats_lock);
}

int zf_store_put_finish(zf_store_pending *w)
{
	zf_store *s;
	int ret;

	RETURN_IF(!w, -EINVAL);
	s = w->s;
	if (w->queued)
		zf_batch_wait(w->batch);
	ret = w->ret;
	for (unsigned i = 0; i < w->n && !ret; i++)
		ret = w->out[i].status;
	if (ret)
		put_refuse(s, w, ret);
	else
		put_commit(s, w);
	workset_put(s, w);
	return ret;
}

int zf_store_put_start(zf_store *s, uint32_t owner, uint64_t index, const void *folio, size_t len,
		       zf_store_pending **pending)
{
	return put_start(s, owner, index, folio, len, false, pending);
}

int zf_store_put(zf_store *s, uint32_t owner, uint64_t index, const void *folio, size_t len)
{
	zf_store_pending *p;

	TRY(put_start(s, owner, index, folio, len, true, &p));
	return zf_store_put_finish(p);
}
