/*
 * store_get.c - the store's readers: finding a unit and taking a reference on it, and
 * reading units back (zf_store_get, zf_store_get_folio) in the calling thread, with a
 * codec context kept per thread or a reader of the caller's (store_reader_create, for
 * a signal handler, which must not allocate).
 *
 * A get decompresses in its own thread, so it never waits behind a folio's compressions
 * (store.c's top comment), but for a folio get of STORE_ENGINES_MIN or more on a store
 * with engines (and any reader's folio get there), which decompresses its units on them
 * as one batch, its own thread helping (get_on_engines()). The entry's fields are
 * copied under the shard lock into an entry_view, and the object is read without the
 * lock, under the reference.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../common/checksum.h"
#include "store_internal.h"

#define GET_BATCH 64u /* units a folio get looks up under one hold of the shard lock */
#define GET_PIN_GROUP 4u /* and pins at once (store_get_folio()) */

/* -------------------------------------------------------------------------------- */
/* Per-thread contexts                                                              */
/* -------------------------------------------------------------------------------- */

/* Each thread's get_ctx (store_internal.h): made at its first get, freed at its exit. */
static pthread_key_t get_key;
static pthread_once_t get_key_once = PTHREAD_ONCE_INIT;
static int get_key_ok;

static void get_ctx_free(void *p)
{
	struct get_ctx *g = p;

	zf_codec_ctx_destroy(g->ctx);
	zf_batch_destroy(g->batch);
	free(g->jobs);
	free(g->unit);
	free(g->stored);
	free(g);
}

static void get_key_make(void)
{
	get_key_ok = pthread_key_create(&get_key, get_ctx_free) == 0;
}

/* Gives g room for a unit and its stored bytes: 0, or -ENOMEM (and g has none). */
static int get_ctx_scratch(struct get_ctx *g)
{
	g->unit = malloc(ZF_UNIT_MAX);
	g->stored = malloc(ZF_UNIT_MAX);
	if (!g->unit || !g->stored) {
		free(g->unit);
		free(g->stored);
		g->unit = g->stored = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* This thread's get context for codec, with scratch room if asked; NULL: no memory. */
struct get_ctx *store_get_ctx(const zf_codec *codec, int scratch)
{
	struct get_ctx *g;

	pthread_once(&get_key_once, get_key_make);
	if (!get_key_ok)
		return NULL;
	g = pthread_getspecific(get_key);
	if (!g) {
		g = calloc(1, sizeof(*g));
		if (!g || pthread_setspecific(get_key, g)) {
			free(g);
			return NULL;
		}
	}
	if (g->codec != codec) {
		zf_codec_ctx_destroy(g->ctx);
		g->ctx = NULL;
		g->codec = NULL;
		if (zf_codec_ctx_create(codec, &g->ctx))
			return NULL;
		g->codec = codec;
	}
	if (scratch && !g->unit && get_ctx_scratch(g))
		return NULL;
	return g;
}

/* -------------------------------------------------------------------------------- */
/* Lookups                                                                          */
/* -------------------------------------------------------------------------------- */

/*
 * Finds the unit that holds page index of owner and takes a reference on it: the unit
 * at the page's alignment for each size the store can hold, the largest first. The view
 * stays true while the reference is held (writeback switches only unread entries).
 * Caller holds the shard lock (shard_of(s, owner, index)).
 */
static struct entry *entry_lookup_locked(zf_store *s, struct shard *sh, uint32_t owner,
					 uint64_t index, struct entry_view *v)
{
	struct entry *e = NULL;

	for (int order = (int)s->unit_order; order >= 0; order--) {
		const uint64_t first = index & ~(((uint64_t)1 << order) - 1);

		e = table_find(sh, key_hash(owner, first), owner, first);
		if (e && e->order == order)
			break;
		e = NULL;
	}
	if (e) {
		atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
		*v = (struct entry_view){ .index = e->index,
					  .where = e->where,
					  .checksum = e->checksum,
					  .clen = e->clen,
					  .kind = e->kind,
					  .order = e->order,
					  .raw = (e->flags & ENTRY_RAW) != 0 };
	}
	return e;
}

/* entry_lookup_locked() under the shard lock. */
static struct entry *entry_lookup(zf_store *s, uint32_t owner, uint64_t index, struct entry_view *v)
{
	struct shard *sh = shard_of(s, owner, index); /* the same for every size */
	struct entry *e;

	pthread_mutex_lock(&sh->lock);
	e = entry_lookup_locked(s, sh, owner, index, v);
	pthread_mutex_unlock(&sh->lock);
	return e;
}

long zf_store_unit_size(zf_store *s, uint32_t owner, uint64_t index, uint64_t *first)
{
	struct entry_view v;
	struct entry *e;
	long size;

	RETURN_IF(!s, -EINVAL);
	e = entry_lookup(s, owner, index, &v);
	RETURN_IF(!e, -ENOENT);
	size = (long)STORE_PAGE << v.order;
	if (first)
		*first = v.index;
	store_entry_put(s, e);
	return size;
}

#ifdef ZF_TEST_HOOKS
/* entry_lookup(), for store_corrupt() (store_testhooks.c). */
struct entry *store_entry_lookup(zf_store *s, uint32_t owner, uint64_t index, struct entry_view *v)
{
	return entry_lookup(s, owner, index, v);
}
#endif

/* -------------------------------------------------------------------------------- */
/* Get                                                                              */
/* -------------------------------------------------------------------------------- */

static void fill_same(void *dst, size_t len, uint64_t v)
{
	uint64_t *p = dst;

	for (size_t i = 0; i < len / 8; i++)
		p[i] = v;
}

/*
 * Decompresses a unit's stored bytes (data: compressed, or raw) into dst and checks them.
 *
 * Decompressed first, checked after: the decompressor reads the object from memory, its
 * misses overlapped with its work, and the checksum then reads it from the cache.
 * Checked first, the checksum took those misses with nothing to overlap them (64 KiB lz4
 * units, gets alternated with the bare loop: 0.87-0.89 of it for redis, 0.91 for python,
 * against 0.91-0.93 and 0.94 this way; 4 KiB units unchanged). Corrupt bytes do no harm
 * meanwhile: every codec's decompressor is its safe one, which never writes past dst's
 * unit, and what it wrote is not data (-EBADMSG: dst unspecified).
 */
static int unit_decode(struct get_ctx *g, const struct entry_view *e, const void *data,
		       uint8_t *dst)
{
	const uint32_t unit = STORE_PAGE << e->order;
	int ret = 0;

	if (e->raw)
		memcpy(dst, data, unit);
	else if (zf_codec_decompress(g->ctx, data, e->clen, dst, unit) != (int)unit)
		ret = -EBADMSG;
	if (zf_checksum(data, e->clen) != e->checksum)
		ret = -EBADMSG;
	return ret;
}

/* What a get read, counted once it is over (get_count()). */
struct get_tally {
	uint64_t pages; /* read back, if the get succeeds */
	uint64_t units[ZF_STORE_ORDERS]; /* whole units read, by order */
	uint64_t fallback[ZF_STORE_ORDERS]; /* units decompressed for one page of them */
	uint64_t bd_reads, bd_errors; /* reads of the backing file made, and failed */
};

/*
 * Moves the counters for a get that returned ret: what it read in only if it succeeded
 * (a folio comes back whole or not at all), the backing file's reads and errors and a
 * failed check always.
 */
static void get_count(zf_store *s, const struct get_tally *t, int ret)
{
	pthread_mutex_lock(&s->stats_lock);
	if (!ret) {
		s->n.zswpin += t->pages;
		for (unsigned o = 0; o < ZF_STORE_ORDERS; o++) {
			s->n.swpin_units[o] += t->units[o];
			s->n.swpin_fallback[o] += t->fallback[o];
			s->n.partial_loads += t->fallback[o];
		}
	}
	s->n.decompress_fail += ret == -EBADMSG;
	s->n.bd_reads += t->bd_reads;
	s->n.bd_read_errors += t->bd_errors;
	pthread_mutex_unlock(&s->stats_lock);
}

/*
 * Reads a unit's stored bytes (pool or backing: same-filled units never get here),
 * decompresses them into dst and checks them; a read of the backing file goes into t.
 */
static int load_unit(zf_store *s, struct get_ctx *g, const struct entry_view *e, uint8_t *dst,
		     struct get_tally *t)
{
	const void *data;
	int ret;

	if (e->kind == ENTRY_BACKING) {
		struct backing_io io = {
			.slot = e->where, .buf = g->stored, .len = e->clen, .op = BACKING_READ
		};

		if (backing_rw(s->backing, &io, 1)) {
			t->bd_errors++;
			return -EIO;
		}
		t->bd_reads++;
		return unit_decode(g, e, g->stored, dst);
	}
	data = zf_pool_read_begin(s->pool, e->where, NULL);
	if (!data)
		return -EBADMSG;
	ret = unit_decode(g, e, data, dst);
	zf_pool_read_end(s->pool, e->where);
	return ret;
}

/* zf_store_get() with a given context (g NULL: this thread's). */
static int store_get(zf_store *s, struct get_ctx *g, uint32_t owner, uint64_t index, void *dst,
		     size_t len)
{
	struct get_tally t = { 0 };
	struct entry_view v;
	struct entry *e;
	uint32_t unit;
	int ret, partial;

	RETURN_IF(!s || !dst, -EINVAL);
	e = entry_lookup(s, owner, index, &v);
	RETURN_IF(!e, -ENOENT);
	unit = STORE_PAGE << v.order;
	partial = len == STORE_PAGE && unit > STORE_PAGE;
	if ((!partial && (len != unit || index != v.index))) {
		store_entry_put(s, e);
		return -EINVAL;
	}
	if (v.kind == ENTRY_SAME) {
		fill_same(dst, len, v.where);
		ret = 0;
	} else if (!g && !(g = store_get_ctx(s->codec, partial || v.kind == ENTRY_BACKING))) {
		ret = -ENOMEM;
	} else if (partial) {
		ret = load_unit(s, g, &v, g->unit, &t);
		if (!ret)
			memcpy(dst, g->unit + (index - v.index) * STORE_PAGE, STORE_PAGE);
	} else {
		ret = load_unit(s, g, &v, dst, &t);
	}
	t.pages = len / STORE_PAGE;
	if (partial)
		t.fallback[v.order] = 1;
	else
		t.units[v.order] = 1;
	get_count(s, &t, ret);
	store_entry_put(s, e);
	return ret;
}

int zf_store_get(zf_store *s, uint32_t owner, uint64_t index, void *dst, size_t len)
{
	return store_get(s, NULL, owner, index, dst, len);
}

/*
 * Reads n units of a folio get back into the folio at dst (its first page: index), their
 * entries' views in v: their pool objects pinned together, each unit decompressed and
 * checked, the objects unpinned together, also after a failure. Meanwhile it asks for
 * the lines the pins of the next group will need (its views follow in v[n .. n + next)):
 * their handles' table entries before the first decompression, and after the i-th, the
 * zspage and header of the next group's i-th object, so that those misses overlap the
 * decompressions rather than come one after another at the next pins. *gp: the get's
 * context, which a written-back unit may swap for this thread's (it needs scratch room).
 * Returns 0 or the first failing unit's error; the units read go into t.
 */
static int get_group(zf_store *s, struct get_ctx **gp, const struct entry_view *v, unsigned n,
		     unsigned next, uint8_t *dst, uint64_t index, struct get_tally *t)
{
	const void *data[GET_PIN_GROUP];
	uint64_t handles[GET_PIN_GROUP];
	unsigned pooled = 0, pinned = 0;
	int ret = 0;

	for (unsigned i = 0; i < n; i++)
		if (v[i].kind == ENTRY_POOL)
			handles[pooled++] = v[i].where;
	zf_pool_read_begin_many(s->pool, handles, pooled, data);
	for (unsigned i = n; i < n + next; i++)
		if (v[i].kind == ENTRY_POOL)
			zpool_prefetch_entry(s->pool, v[i].where);
	for (unsigned i = 0, k = 0; i < n && !ret; i++) {
		uint8_t *to = dst + (v[i].index - index) * STORE_PAGE;

		if (v[i].kind == ENTRY_SAME) {
			fill_same(to, STORE_PAGE << v[i].order, v[i].where);
		} else if (v[i].kind == ENTRY_POOL) {
			ret = data[k] ? unit_decode(*gp, &v[i], data[k], to) : -EBADMSG;
			k++;
		} else if (!(*gp)->stored && !(*gp = store_get_ctx(s->codec, 1))) {
			ret = -ENOMEM; /* written back: rare, read with scratch room */
		} else {
			ret = load_unit(s, *gp, &v[i], to, t);
		}
		if (i < next && v[n + i].kind == ENTRY_POOL)
			zpool_prefetch_object(s->pool, v[n + i].where);
		t->units[v[i].order]++;
		t->pages += 1u << v[i].order;
	}
	for (unsigned i = 0; i < pooled; i++)
		if (data[i])
			handles[pinned++] = handles[i];
	zf_pool_read_end_many(s->pool, handles, pinned);
	return ret;
}

/* A decompression on the engines is done: it must give back the whole unit, checked. */
static void unit_decoded(zf_job *job)
{
	const struct entry_view *v = job->priv;

	if (job->status != (int)(STORE_PAGE << v->order) || job->checksum != v->checksum)
		job->status = -EBADMSG;
}

/*
 * get_group() on the engines (batch, with its jobs: a reader's, or one the store keeps for
 * large folio gets): the n units of a folio get, their views in v, decompressed as one
 * batch on the store's engines, the getting thread among them, so that a folio comes
 * back in about the time of its share of units on each (the swap-in half of the
 * kernel's batching of compression engines). Their pool objects are pinned
 * together for it; same-filled units are filled and written-back ones read here. The
 * engines compute each object's checksum as they read it (ZF_JOB_CHECKSUM). Returns 0
 * or an error of a unit; the units read go into t.
 */
static int get_on_engines(zf_store *s, struct get_ctx **gp, zf_batch *batch, zf_job *jobs,
			  const struct entry_view *v, unsigned n, uint8_t *dst, uint64_t index,
			  struct get_tally *t)
{
	const void *data[GET_BATCH];
	uint64_t handles[GET_BATCH];
	unsigned pooled = 0, pinned = 0, njobs = 0;
	int ret = 0;

	for (unsigned i = 0; i < n; i++)
		if (v[i].kind == ENTRY_POOL)
			handles[pooled++] = v[i].where;
	zf_pool_read_begin_many(s->pool, handles, pooled, data);
	for (unsigned i = 0, k = 0; i < n && !ret; i++) {
		uint8_t *to = dst + (v[i].index - index) * STORE_PAGE;

		if (v[i].kind == ENTRY_SAME) {
			fill_same(to, STORE_PAGE << v[i].order, v[i].where);
		} else if (v[i].kind == ENTRY_POOL) {
			if (!data[k])
				ret = -EBADMSG;
			else if (v[i].raw)
				ret = unit_decode(*gp, &v[i], data[k], to);
			else
				jobs[njobs++] = (zf_job){ .codec = s->codec,
							  .op = ZF_JOB_DECOMPRESS,
							  .flags = ZF_JOB_CHECKSUM,
							  .src = data[k],
							  .src_len = v[i].clen,
							  .dst = to,
							  .dst_cap = STORE_PAGE << v[i].order,
							  .complete = unit_decoded,
							  .priv = (void *)&v[i] };
			k++;
		} else if (!(*gp)->stored && !(*gp = store_get_ctx(s->codec, 1))) {
			ret = -ENOMEM;
		} else {
			ret = load_unit(s, *gp, &v[i], to, t);
		}
		t->units[v[i].order]++;
		t->pages += 1u << v[i].order;
	}
	if (!ret && njobs && zf_batch_run(batch, jobs, njobs))
		ret = -EBADMSG;
	for (unsigned i = 0; i < pooled; i++)
		if (data[i])
			handles[pinned++] = handles[i];
	zf_pool_read_end_many(s->pool, handles, pinned);
	return ret;
}

/*
 * A batch for a folio get on the engines, and its jobs: kept by the store for reuse, a
 * few of them (a thread's get context is the codec's, not the store's).
 */
struct get_batch {
	zf_batch *batch;
	zf_job jobs[GET_BATCH];
	struct get_batch *next;
};

#define GET_BATCHES_CACHED 8u

static struct get_batch *get_batch_take(zf_store *s)
{
	struct get_batch *b;

	pthread_mutex_lock(&s->ws_lock);
	b = s->gb_free;
	if (b) {
		s->gb_free = b->next;
		s->gb_cached--;
	}
	pthread_mutex_unlock(&s->ws_lock);
	if (b)
		return b;
	b = calloc(1, sizeof(*b));
	if (b && zf_batch_create(s->engines, 0, &b->batch)) { /* 0: the getting thread helps */
		free(b);
		b = NULL;
	}
	return b;
}

static void get_batch_give(zf_store *s, struct get_batch *b)
{
	pthread_mutex_lock(&s->ws_lock);
	if (s->gb_cached < GET_BATCHES_CACHED) {
		b->next = s->gb_free;
		s->gb_free = b;
		s->gb_cached++;
		b = NULL;
	}
	pthread_mutex_unlock(&s->ws_lock);
	if (b) {
		zf_batch_destroy(b->batch);
		free(b);
	}
}

void store_get_batches_free(zf_store *s)
{
	while (s->gb_free) {
		struct get_batch *b = s->gb_free;

		s->gb_free = b->next;
		zf_batch_destroy(b->batch);
		free(b);
	}
}

/*
 * zf_store_get_folio() with a given context (g NULL: this thread's). A folio lies in one
 * shard: its units are looked up GET_BATCH at a time under one hold of the shard lock,
 * asking for the next ones' buckets and entries ahead, and read back GET_PIN_GROUP at a
 * time (get_group()), the entries let go after each group; the counters move once.
 *
 * Why groups of four: a pin or an unpin is an atomic read-modify-write, which waits for
 * the loads and stores before it. Taken back to back, a group's pins share one such wait,
 * and so do its unpins; a pin and an unpin per unit would wait each time for the 4 KiB
 * a decompression just stored. A whole lookup batch pinned at once (64 units) was
 * slower still, presumably since by a unit's decompression and unpin, the lines its pin
 * touched (handle entry, zspage, the object's first line) had left the L1 cache under
 * 256 KiB of output. lz4 split, 2 MiB folios, the variants alternating folio by folio in
 * one process, of the bare loop: 64 at once 0.88-0.93, four 0.90-0.96, one 0.90-0.94.
 * Asking for the next group's lines during this group's decompressions (get_group())
 * added about a point where the pool and the bare loop's buffers are both out of the
 * caches, as in the bench, and up to 5 in its 2 MiB folio gets (bench/results/store.md,
 * thirteenth measurement).
 */
static int store_get_folio(zf_store *s, struct get_ctx *g, uint32_t owner, uint64_t index,
			   void *dst, size_t len)
{
	/*
	 * Offsets from index, not page numbers: the last folio of the index space ends at
	 * 2^64, which wraps to 0 (then at - index is still pages).
	 */
	const uint64_t pages = len / STORE_PAGE;
	struct get_tally t = { 0 };
	struct get_batch *gb = NULL;
	zf_batch *batch;
	zf_job *jobs;
	uint64_t at = index, step;
	int ret = 0;
	struct shard *sh;

	RETURN_IF(!s || !dst || !folio_valid(index, len), -EINVAL);
	step = (uint64_t)1 << s->unit_order; /* the units' pages, most likely */
	if (!g && !(g = store_get_ctx(s->codec, 0)))
		return -ENOMEM;
	batch = g->batch;
	jobs = g->jobs;
	/*
	 * A large folio of several units goes on the engines, as a reader's does: the getting
	 * thread would only wait for it otherwise, and its share of the units comes back in
	 * its share of the time (bench store, get_speedup). Without a batch: in this thread.
	 */
	if (!batch && len >= STORE_ENGINES_MIN && len > ((size_t)STORE_PAGE << s->unit_order) &&
	    zf_engines_count(s->engines) && (gb = get_batch_take(s))) {
		batch = gb->batch;
		jobs = gb->jobs;
	}
	sh = shard_of(s, owner, index);
	while (at - index < pages && !ret) {
		struct entry *ents[GET_BATCH];
		struct entry_view v[GET_BATCH];
		unsigned n = 0;

		pthread_mutex_lock(&sh->lock);
		while (n < GET_BATCH && at - index < pages) {
			/* As put_commit(): the misses of the next lookups overlap this one's. */
			if (at - index + LOOKUP_BUCKET_AHEAD * step < pages)
				table_prefetch_bucket(sh, owner, at + LOOKUP_BUCKET_AHEAD * step);
			if (at - index + LOOKUP_ENTRY_AHEAD * step < pages)
				table_prefetch_chain(sh, owner, at + LOOKUP_ENTRY_AHEAD * step);
			ents[n] = entry_lookup_locked(s, sh, owner, at, &v[n]);
			if (!ents[n]) {
				ret = -ENOENT;
				break;
			}
			/* A unit that begins before the folio or ends after it is not the folio's. */
			if (v[n].index != at || at - index + (1u << v[n].order) > pages) {
				ret = -EINVAL;
				n++;
				break;
			}
			at += 1u << v[n++].order;
		}
		pthread_mutex_unlock(&sh->lock);
		if (batch && n > 1) {
			struct get_ctx *reader = g;

			if (!ret)
				ret = get_on_engines(s, &g, batch, jobs, v, n, dst, index, &t);
			g = reader; /* the caller's context again (a backing read may take another) */
			for (unsigned j = 0; j < n; j++)
				store_entry_put(s, ents[j]);
			continue;
		}
		for (unsigned i = 0; i < n; i += GET_PIN_GROUP) {
			const unsigned k = n - i < GET_PIN_GROUP ? n - i : GET_PIN_GROUP;
			const unsigned next = n - i - k < GET_PIN_GROUP ? n - i - k : GET_PIN_GROUP;

			if (!ret)
				ret = get_group(s, &g, v + i, k, next, dst, index, &t);
			for (unsigned j = i; j < i + k; j++)
				store_entry_put(s, ents[j]);
		}
	}
	if (gb)
		get_batch_give(s, gb);
	get_count(s, &t, ret);
	return ret;
}

int zf_store_get_folio(zf_store *s, uint32_t owner, uint64_t index, void *dst, size_t len)
{
	return store_get_folio(s, NULL, owner, index, dst, len);
}

/* -------------------------------------------------------------------------------- */
/* Readers                                                                          */
/* -------------------------------------------------------------------------------- */

int store_reader_create(zf_store *s, struct store_reader **out)
{
	struct get_ctx *g;

	RETURN_IF(!s || !out, -EINVAL);
	g = calloc(1, sizeof(*g));
	RETURN_IF(!g, -ENOMEM);
	if (get_ctx_scratch(g) || zf_codec_ctx_create(s->codec, &g->ctx)) {
		get_ctx_free(g);
		return -ENOMEM;
	}
	/* Its folio gets go on the engines, made ready now: a signal handler must not allocate. */
	if (zf_engines_count(s->engines) && (!(g->jobs = calloc(GET_BATCH, sizeof(*g->jobs))) ||
					     zf_batch_create(s->engines, 0, &g->batch))) {
		get_ctx_free(g);
		return -ENOMEM;
	}
	g->codec = s->codec;
	*out = (struct store_reader *)g;
	return 0;
}

void store_reader_destroy(struct store_reader *r)
{
	if (r)
		get_ctx_free(r);
}

int store_get_with(zf_store *s, struct store_reader *r, uint32_t owner, uint64_t index, void *dst,
		   size_t len)
{
	RETURN_IF(!r, -EINVAL);
	return store_get(s, (struct get_ctx *)r, owner, index, dst, len);
}

int store_get_folio_with(zf_store *s, struct store_reader *r, uint32_t owner, uint64_t index,
			 void *dst, size_t len)
{
	RETURN_IF(!r, -EINVAL);
	return store_get_folio(s, (struct get_ctx *)r, owner, index, dst, len);
}
