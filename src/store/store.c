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
 * The folio rule (docs/store.md: stored whole or not at all): a put compresses and allocates
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
 * A get decompresses in its own thread, with a context kept per thread, so it never
 * waits behind a 2 MiB folio's compressions (the lesson of the Linux IAA batching
 * series). The exception is a folio get of 256 KiB of units or more (a reader's, as a
 * region that places 2 MiB frames makes them, and zf_store_get_folio()'s): it waits for
 * the whole folio anyway, so its units decompress as one batch on the engines, its own
 * thread helping.
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
 *
 * Files: this one has the life cycle and the counters; store_put.c the put and its
 * working sets, store_get.c the lookups, gets and readers, store_table.c the table's
 * growth, entry release and invalidation, store_writeback.c the limits and writeback,
 * store_testhooks.c the test hooks. store_internal.h holds the structs they share and
 * the helpers the put and get paths inline.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/options.h"
#include "store_internal.h"

#define STORE_MIN_BUCKETS 64u

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
	store_worksets_free(s);
	store_get_batches_free(s);
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
	TRY(OPTIONS_LOAD(&o, options));
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
	s->o.backing_path = NULL; /* not kept: the caller's string */
	s->unit = o.unit ? o.unit : STORE_PAGE;
	s->unit_order = (uint32_t)__builtin_ctz(s->unit / STORE_PAGE);
	pthread_mutex_init(&s->lru_lock, NULL);
	list_init(&s->lru);
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
	 * A thread with puts in flight (zf_store_put_start()) helps its engines compress,
	 * unless they are as many as the CPUs: then it would only take turns with them
	 * (measured: 2 engines on 2 vCPUs, 2 MiB folios of 64 KiB units, 3 in flight). One
	 * put at a time (zf_store_put()) helps all the same (store_put.c).
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

/* The counters of s into *st. */
static void stats_fill(zf_store *s, zf_store_stats *st)
{
	zf_pool_stats ps;
	const struct counters *n = &s->n;
	uint64_t n_units[ZF_STORE_ORDERS];

	memset(st, 0, sizeof(*st));
	(void)zf_pool_get_stats(s->pool, &ps, sizeof(ps));
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
	memcpy(n_units, n->units, sizeof(n_units));
	pthread_mutex_unlock(&s->stats_lock);
	st->pool_total_size = ps.mem_used_total;
	st->mem_used_total = ps.mem_used_total;
	st->mem_used_max = ps.mem_used_max;
	st->pages_compacted = ps.pages_compacted;
	st->warm_pages = ps.warm_pages;
	st->meta_bytes = ps.meta_bytes;
	for (unsigned o = 0; o < ZF_STORE_ORDERS; o++)
		st->meta_bytes += n_units[o] * sizeof(struct entry);
	for (unsigned i = 0; i < STORE_SHARDS; i++) {
		pthread_mutex_lock(&s->shards[i].lock);
		st->meta_bytes += s->shards[i].nbuckets * sizeof(struct entry *);
		pthread_mutex_unlock(&s->shards[i].lock);
	}
}

int zf_store_get_stats(zf_store *s, zf_store_stats *out, size_t size)
{
	zf_store_stats st;

	RETURN_IF(!s, -EINVAL);
	stats_fill(s, &st);
	return struct_copy_out(out, size, &st, sizeof(st));
}

static const char *const order_names[ZF_STORE_ORDERS] = { "4k",	  "8k",	  "16k",  "32k", "64k",
							  "128k", "256k", "512k", "1m",	 "2m" };

size_t zf_store_stats_text(zf_store *s, char *buf, size_t cap)
{
	zf_store_stats st;
	size_t len = 0;
	char dummy[1];

	stats_fill(s, &st);
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
	FIELD(meta_bytes);
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

int store_fork_ok(const zf_store *s)
{
	return !s->backing;
}

int store_fork_child(zf_store *s)
{
	if (!store_fork_ok(s))
		return -ENOTSUP;
	return engine_fork_child(s->engines);
}
