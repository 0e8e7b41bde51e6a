/*
 * store.c - zfolio's zswap: the index from (owner, page) to stored units.
 *
 * Entries. A put cuts its folio into units (4 KiB in split mode, the store's unit in unit
 * mode, never more than the folio) and makes one entry per unit, keyed by (owner, first
 * page). An entry says where the unit is: a zf_pool handle (compressed, or raw when it
 * did not compress), a same-filled value (no memory at all), or a run of backing-file
 * slots after writeback; with its stored length, codec, size, xxh3 checksum of the
 * stored bytes, and its place in the LRU.
 *
 * The table is a hash of chained buckets in STORE_SHARDS shards, each with its own lock.
 * A shard holds whole 2 MiB ranges of an owner's pages, so that a folio's units are under
 * one lock, as are all the sizes of unit over a page; puts and gets of different ranges
 * rarely meet. A lookup takes a reference on the entry under the shard lock and reads the
 * object without it. The table holds one reference; the last one to go frees the object
 * (pool handle or backing slots), so an invalidation never pulls an object from under a
 * reader. What an entry points at changes in one place only, writeback, and only when
 * nobody but the writeback holds it (checked under the shard lock, where references are
 * taken), so a reader's snapshot stays valid.
 *
 * The folio rule (DESIGN.md: stored whole or not at all): a put compresses and allocates
 * every unit before it touches the table; if any unit fails, what it allocated is freed
 * and the keys keep what they had. Limits are checked once per folio. The counters move
 * under one lock that zf_store_get_stats() also takes, twice per put: the new units, all
 * of them, before any is in the table, then the units they replaced, all of them. A
 * snapshot never shows half a folio (between the two it shows both versions).
 *
 * Engines. With engines, a put of 256 KiB of units or more queues them as one batch.
 * Each job's completion stores its unit (pool allocation, copy, checksum) in the thread
 * that compressed it, while the bytes are in that CPU's cache: done by the putting
 * thread after the engines, the copies of other CPUs' output took a quarter of a 2 MiB
 * lz4 put. The putting thread compresses too, unless the engines are as many as the
 * CPUs; it makes the entries meanwhile. Smaller puts compress in the caller, each unit
 * stored right after its compression: the handoff costs more than it saves. A put can
 * also be started and finished apart (zf_store_put_start/finish: the batch, the units'
 * results and the entries live in the put's working set), so that a caller keeps a few
 * folios compressing while it finishes one: the table update and the wake-up of one
 * folio then overlap the next ones' compression instead of leaving the engines idle.
 *
 * A get never goes through the engines: it decompresses in its own thread, with a
 * context kept per thread, so it never waits behind a 2 MiB folio's compressions (the
 * lesson of the Linux IAA batching series).
 *
 * Limits follow zswap: when the pool's pages reach max_pool_bytes, pool_limit_hit counts
 * and the store is "full"; it accepts again once the pool is back under
 * accept_threshold_pct of the limit. Full, it compacts the pool (if anything was freed
 * since the last time), then rejects, or first writes the oldest entries back to the
 * backing file (LRU order: the order they were stored). The pool does not compact on
 * free(): a store frees and allocates all the time, and pages given back are faulted in
 * again by the next puts.
 *
 * Lock order: shard lock, then lru_lock, then stats_lock. Writeback takes an entry off
 * the LRU under lru_lock alone (with a reference) and then its shard lock.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../backing/backing.h"
#include "../common/checksum.h"
#include "../common/common.h"
#include "../engine/engine.h"
#include "../zpool/zpool.h"
#include "store.h"
#include "store_internal.h"

#define COMMIT_CHUNK 64u /* units a put adds to the table under one hold of its locks */
#define GET_BATCH 64u /* units a folio get looks up under one hold of the shard lock */
#define GET_PIN_GROUP 4u /* and pins at once (store_get_folio()) */
#define STORE_MIN_BUCKETS 64u
#define STORE_CACHED_CTX 16u /* put working sets kept for reuse */
#define STORE_ENGINES_MIN ((size_t)256 << 10) /* bytes: less is compressed in the caller */

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

int zf_store_put_start(zf_store *s, uint32_t owner, uint64_t index, const void *folio, size_t len,
		       zf_store_pending **pending)
{
	const uint8_t *src = folio;
	struct zf_store_pending *w;
	uint32_t threshold;
	unsigned njobs = 0;
	int ret;

	RETURN_IF(!pending, -EINVAL);
	*pending = NULL;
	RETURN_IF(!s || !folio || len < STORE_PAGE || len > ZF_UNIT_MAX || (len & (len - 1)),
		  -EINVAL);
	RETURN_IF(index & (len / STORE_PAGE - 1), -EINVAL);
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
		if (i + COMMIT_BUCKET_AHEAD < w->n)
			__builtin_prefetch(bucket_of(
				sh, key_hash(w->owner, w->ents[i + COMMIT_BUCKET_AHEAD]->index)));
		if (i + COMMIT_ENTRY_AHEAD < w->n) {
			const struct entry *head = *bucket_of(
				sh, key_hash(w->owner, w->ents[i + COMMIT_ENTRY_AHEAD]->index));

			if (head)
				__builtin_prefetch(head);
		}
		old = table_find(sh, hash, w->owner, e->index);
		if (old) {
			entry_remove_locked(s, sh, hash, old);
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

int zf_store_put(zf_store *s, uint32_t owner, uint64_t index, const void *folio, size_t len)
{
	zf_store_pending *p;

	TRY(zf_store_put_start(s, owner, index, folio, len, &p));
	return zf_store_put_finish(p);
}

/* -------------------------------------------------------------------------------- */
/* Life cycle                                                                       */
/* -------------------------------------------------------------------------------- */

void zf_store_options_init(zf_store_options *o)
{
	memset(o, 0, sizeof(*o));
	o->struct_size = sizeof(*o);
	o->codec = "lz4";
	o->accept_threshold_pct = 90;
	o->incompressible_pct = 100;
	o->backing_bytes = (uint64_t)1 << 30;
	o->pool_warm_bytes = ZF_UNIT_MAX;
}

static void store_free(zf_store *s)
{
	for (unsigned i = 0; i < STORE_SHARDS; i++) {
		struct shard *sh = &s->shards[i];

		for (size_t b = 0; sh->buckets && b < sh->nbuckets; b++) {
			struct entry *e = sh->buckets[b];

			while (e) {
				struct entry *next = e->hnext;

				store_entry_put(s, e);
				e = next;
			}
		}
		free(sh->buckets);
		pthread_mutex_destroy(&sh->lock);
	}
	while (s->ws_free) {
		struct zf_store_pending *w = s->ws_free;

		s->ws_free = w->next;
		workset_destroy(w);
	}
	zf_engines_destroy(s->engines);
	zf_pool_destroy(s->pool);
	backing_close(s->backing);
	pthread_mutex_destroy(&s->lru_lock);
	pthread_mutex_destroy(&s->ws_lock);
	pthread_mutex_destroy(&s->stats_lock);
	free(s);
}

int zf_store_create(const zf_store_options *options, zf_store **out)
{
	zf_store_options o;
	zf_store *s;
	int ret;

	RETURN_IF(!out, -EINVAL);
	zf_store_options_init(&o);
	if (options) {
		RETURN_IF(options->struct_size < sizeof(o.struct_size) ||
				  options->struct_size > sizeof(o),
			  -EINVAL);
		memcpy(&o, options, options->struct_size);
	}
	RETURN_IF(o.unit && (o.unit < 2 * STORE_PAGE || o.unit > ZF_UNIT_MAX ||
			     (o.unit & (o.unit - 1))),
		  -EINVAL);
	RETURN_IF(o.engines > ZF_ENGINES_MAX || o.accept_threshold_pct > 100 ||
			  o.incompressible_pct > 100 || !o.codec,
		  -EINVAL);
	RETURN_IF(o.when_full != ZF_STORE_REJECT && o.when_full != ZF_STORE_WRITEBACK, -EINVAL);
	s = calloc(1, sizeof(*s));
	RETURN_IF(!s, -ENOMEM);
	s->o = o;
	s->o.struct_size = sizeof(o);
	s->o.backing_path = NULL; /* not kept: the caller's string */
	s->unit = o.unit ? o.unit : STORE_PAGE;
	s->unit_order = (uint32_t)__builtin_ctz(s->unit / STORE_PAGE);
	pthread_mutex_init(&s->lru_lock, NULL);
	pthread_mutex_init(&s->ws_lock, NULL);
	pthread_mutex_init(&s->stats_lock, NULL);
	for (unsigned i = 0; i < STORE_SHARDS; i++) {
		pthread_mutex_init(&s->shards[i].lock, NULL);
		s->shards[i].nbuckets = STORE_MIN_BUCKETS;
		s->shards[i].buckets = calloc(STORE_MIN_BUCKETS, sizeof(struct entry *));
		if (!s->shards[i].buckets) {
			ret = -ENOMEM;
			goto fail;
		}
	}
	ret = zf_codec_find(o.codec, &s->codec);
	if (ret)
		goto fail;
	{
		zf_pool_options po;

		/*
		 * No compaction from free(): a store frees and allocates all the time (a put
		 * over a key allocates the new units before it frees the old), and pages
		 * compacted away are faulted back in by the next puts. It compacts when the
		 * pool is full and when asked (zf_store_compact), as zswap leaves zsmalloc's
		 * compaction to memory pressure.
		 */
		zf_pool_options_init(&po);
		po.compact_threshold_pct = 0;
		po.warm_pages_max = o.pool_warm_bytes / ZF_PAGE_SIZE;
		ret = zf_pool_create(&po, &s->pool);
	}
	if (ret)
		goto fail;
	ret = zf_engines_create(o.engines, &s->engines);
	if (ret)
		goto fail;
	/*
	 * A putting thread helps its engines compress, unless they are as many as the CPUs:
	 * then it would only take turns with them (measured: 2 engines on 2 vCPUs, 2 MiB
	 * folios of 64 KiB units).
	 */
	if (o.engines && o.engines >= (unsigned)sysconf(_SC_NPROCESSORS_ONLN))
		s->batch_flags = ZF_BATCH_NO_HELP;
	if (o.backing_path) {
		struct backing_options bo;

		backing_options_init(&bo);
		bo.path = o.backing_path;
		bo.max_bytes = o.backing_bytes;
		ret = backing_open(&bo, &s->backing);
		if (ret)
			goto fail;
	}
	*out = s;
	return 0;
fail:
	store_free(s);
	return ret;
}

void zf_store_destroy(zf_store *s)
{
	if (s)
		store_free(s);
}

uint32_t store_unit(const zf_store *s)
{
	return STORE_PAGE << s->unit_order;
}

/* -------------------------------------------------------------------------------- */
/* Counters                                                                         */
/* -------------------------------------------------------------------------------- */

void zf_store_get_stats(zf_store *s, zf_store_stats *st)
{
	zf_pool_stats ps;
	const struct counters *n = &s->n;

	memset(st, 0, sizeof(*st));
	zf_pool_get_stats(s->pool, &ps);
	pthread_mutex_lock(&s->stats_lock);
	st->zswpout = n->zswpout;
	st->zswpin = n->zswpin;
	st->stored_pages = n->stored_pages;
	st->same_filled_pages = n->same_filled_pages;
	st->stored_incompressible_pages = n->stored_incompressible_pages;
	st->written_back_pages = n->written_back_pages;
	st->written_back_total = n->written_back_total;
	st->orig_data_size = n->orig_data_size;
	st->compr_data_size = n->compr_data_size;
	st->reject_compress_poor = n->reject_compress_poor;
	st->reject_compress_fail = n->reject_compress_fail;
	st->reject_alloc_fail = n->reject_alloc_fail;
	st->reject_pool_full = n->reject_pool_full;
	st->pool_limit_hit = n->pool_limit_hit;
	st->decompress_fail = n->decompress_fail;
	st->partial_loads = n->partial_loads;
	st->invalidates = n->invalidates;
	st->bd_reads = n->bd_reads;
	st->bd_writes = n->bd_writes;
	st->bd_read_errors = n->bd_read_errors;
	st->bd_write_errors = n->bd_write_errors;
	memcpy(st->zswpout_units, n->zswpout_units, sizeof(st->zswpout_units));
	memcpy(st->swpin_units, n->swpin_units, sizeof(st->swpin_units));
	memcpy(st->swpin_fallback, n->swpin_fallback, sizeof(st->swpin_fallback));
	pthread_mutex_unlock(&s->stats_lock);
	st->pool_total_size = ps.mem_used_total;
	st->mem_used_total = ps.mem_used_total;
	st->mem_used_max = ps.mem_used_max;
	st->pages_compacted = ps.pages_compacted;
	st->warm_pages = ps.warm_pages;
}

static const char *const order_names[ZF_STORE_ORDERS] = { "4k",	  "8k",	  "16k",  "32k", "64k",
							  "128k", "256k", "512k", "1m",	 "2m" };

size_t zf_store_stats_text(zf_store *s, char *buf, size_t cap)
{
	zf_store_stats st;
	size_t len = 0;
	char dummy[1];

	zf_store_get_stats(s, &st);
	if (!buf || !cap) {
		buf = dummy;
		cap = 0;
	}
#define LINE(name, v)                                                                              \
	do {                                                                                       \
		const int k = snprintf(len < cap ? buf + len : NULL, len < cap ? cap - len : 0,    \
				       "%s %llu\n", name, (unsigned long long)(v));                \
		len += k > 0 ? (size_t)k : 0;                                                      \
	} while (0)
#define FIELD(f) LINE(#f, st.f)
	FIELD(zswpout);
	FIELD(zswpin);
	FIELD(stored_pages);
	FIELD(same_filled_pages);
	FIELD(stored_incompressible_pages);
	FIELD(written_back_pages);
	FIELD(written_back_total);
	FIELD(orig_data_size);
	FIELD(compr_data_size);
	FIELD(pool_total_size);
	FIELD(mem_used_total);
	FIELD(mem_used_max);
	FIELD(pages_compacted);
	FIELD(warm_pages);
	FIELD(reject_compress_poor);
	FIELD(reject_compress_fail);
	FIELD(reject_alloc_fail);
	FIELD(reject_pool_full);
	FIELD(pool_limit_hit);
	FIELD(decompress_fail);
	FIELD(partial_loads);
	FIELD(invalidates);
	FIELD(bd_reads);
	FIELD(bd_writes);
	FIELD(bd_read_errors);
	FIELD(bd_write_errors);
	for (unsigned o = 0; o < ZF_STORE_ORDERS; o++) {
		char name[40];

		if (!st.zswpout_units[o] && !st.swpin_units[o] && !st.swpin_fallback[o])
			continue;
		snprintf(name, sizeof(name), "zswpout_%s", order_names[o]);
		LINE(name, st.zswpout_units[o]);
		snprintf(name, sizeof(name), "swpin_%s", order_names[o]);
		LINE(name, st.swpin_units[o]);
		snprintf(name, sizeof(name), "swpin_fallback_%s", order_names[o]);
		LINE(name, st.swpin_fallback[o]);
	}
#undef FIELD
#undef LINE
	if (cap)
		buf[ZF_MIN(len, cap - 1)] = '\0';
	return len;
}
