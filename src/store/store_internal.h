/*
 * store_internal.h - what the store's files share: the entry, the table and the store
 * itself, and the helpers of the put and get paths.
 *
 * The design is in store.c's top comment. The helpers here run once per unit or per
 * lookup on the put and get paths, so they are static inline: each file that uses them
 * inlines them as one store.c did. A function of one file that another calls is
 * declared below the structs, store_ prefixed, with its file; none leaves the library.
 */
#ifndef ZF_STORE_INTERNAL_H
#define ZF_STORE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "../backing/backing.h"
#include "../common/common.h"
#include "../common/list.h"
#include "../engine/engine.h"
#include "../zpool/zpool.h"
#include "store.h"

#define STORE_PAGE ZF_PAGE_SIZE
#define STORE_SHARDS 64u
#define STORE_RANGE_PAGES (ZF_UNIT_MAX / STORE_PAGE) /* pages of a range kept in one shard */
/* A run of lookups (a put's commit, a folio get) asks for the bucket this many ahead, */
#define LOOKUP_BUCKET_AHEAD 4u
#define LOOKUP_ENTRY_AHEAD 2u /* and for the first entry of its chain this many */

enum entry_kind { ENTRY_POOL = 0, ENTRY_SAME = 1, ENTRY_BACKING = 2 };

#define ENTRY_RAW 1u /* stored uncompressed */
#define ENTRY_WRITEBACK 2u /* a writeback is copying it */
#define ENTRY_DEAD 4u /* out of the table */

struct entry {
	struct entry *hnext; /* bucket chain */
	struct list_node lru; /* on zf_store.lru, or pointing at itself; under lru_lock */
	uint64_t index; /* first page */
	uint32_t owner;
	uint32_t clen; /* stored bytes (0 when same-filled) */
	uint64_t where; /* pool handle, same-filled value, or first backing slot */
	uint64_t checksum; /* xxh3 of the stored bytes */
	uint8_t codec; /* index in the store's codecs (one today: zf_store_options.codec) */
	uint8_t kind : 2; /* enum entry_kind */
	uint8_t order : 6; /* the unit is STORE_PAGE << order */
	uint8_t flags; /* ENTRY_*, under the shard lock */
	atomic_uint refs;
};

_Static_assert(sizeof(struct entry) == 64, "an entry is 64 bytes: 8 B per page of a 64k unit");

struct shard {
	pthread_mutex_t lock;
	struct entry **buckets;
	size_t nbuckets, count;
};

/* The counters that move under stats_lock (the pool's and the backing's are read live). */
struct counters {
	uint64_t zswpout, zswpin, stored_pages, same_filled_pages, stored_incompressible_pages;
	uint64_t written_back_pages, written_back_total, orig_data_size, compr_data_size;
	uint64_t reject_compress_poor, reject_compress_fail, reject_alloc_fail, reject_pool_full;
	uint64_t pool_limit_hit, decompress_fail, partial_loads, invalidates;
	uint64_t bd_reads, bd_writes, bd_read_errors, bd_write_errors;
	uint64_t zswpout_units[ZF_STORE_ORDERS], swpin_units[ZF_STORE_ORDERS];
	uint64_t swpin_fallback[ZF_STORE_ORDERS];
	/* Entries of each size; counted before they are in the table (store_drop_range()). */
	uint64_t units[ZF_STORE_ORDERS];
};

/* Folios of fewer bytes of units are compressed and decompressed in the caller. */
#define STORE_ENGINES_MIN ((size_t)256 << 10)

struct get_batch;

struct zf_store {
	zf_store_options o;
	const zf_codec *codec;
	uint32_t unit; /* STORE_PAGE in split mode */
	uint32_t unit_order;
	zf_pool *pool;
	zf_engines *engines;
	unsigned batch_flags; /* ZF_BATCH_NO_HELP when the engines fill the CPUs */
	struct backing *backing;

	struct shard shards[STORE_SHARDS];

	pthread_mutex_t lru_lock;
	struct list_node lru; /* entries in the pool, newest first */

	pthread_mutex_t ws_lock;
	struct zf_store_pending *ws_free;
	unsigned ws_cached;
	struct get_batch *gb_free; /* folio gets' batches kept for reuse, under ws_lock */
	unsigned gb_cached;

	pthread_mutex_t stats_lock;
	struct counters n;
	int full; /* zswap's zswap_pool_reached_full; under stats_lock */
	atomic_uint_fast64_t pool_frees, frees_at_compact; /* see store_make_room() */
};

/* What a reader needs of an entry, copied under the shard lock. */
struct entry_view {
	uint64_t index, where, checksum;
	uint32_t clen;
	uint8_t kind, order, raw;
};

/*
 * A get's working memory, per thread (a put's verify uses its context too, in whichever
 * thread compressed the unit): a context for the last codec it decompressed, and
 * (made on the first partial load or backing read, kept until the thread exits) room for
 * a unit and for its stored bytes. Per thread, not from the worksets' stack: a 4 KiB get
 * takes about two microseconds, and the stack's lock and cache misses were a tenth of it.
 */
struct get_ctx {
	const zf_codec *codec;
	zf_codec_ctx *ctx;
	uint8_t *unit, *stored; /* ZF_UNIT_MAX each */
	/*
	 * A reader's (store_reader_create()) on a store with engines: its folio gets
	 * decompress on them, the reader's thread helping (store_get.c, get_on_engines()).
	 */
	zf_batch *batch;
	zf_job *jobs; /* GET_BATCH */
};

/* store_get.c: this thread's get context (scratch: with room for a unit), or NULL. */
struct get_ctx *store_get_ctx(const zf_codec *codec, int scratch);
#ifdef ZF_TEST_HOOKS
/* The entry holding page index of owner, with a reference and its view, or NULL. */
struct entry *store_entry_lookup(zf_store *s, uint32_t owner, uint64_t index, struct entry_view *v);
#endif

/* store_put.c: frees the put working sets kept for reuse (at destroy). */
void store_worksets_free(zf_store *s);
/* store_get.c: frees the folio gets' batches kept for reuse (at destroy). */
void store_get_batches_free(zf_store *s);

/* store_table.c */
void store_table_grow(struct shard *sh); /* caller holds the shard lock */
void store_entry_put(zf_store *s, struct entry *e); /* drops a reference */
/* Adds e to the counters n (sign +1) or takes it from them (-1). */
void store_count_entry(struct counters *n, const struct entry *e, int sign);
/* Drops owner's units over pages [index, index + pages), uncounted into delta; how many. */
long store_drop_range(zf_store *s, uint32_t owner, uint64_t index, uint64_t pages,
		      struct counters *delta);

/* store_writeback.c */
/* Whether the pool is full, with zswap's accept threshold; count: a pool_limit_hit if so. */
int store_pool_full(zf_store *s, int count);
/* What a put does about a full pool: 0 once there is room, or -ENOSPC. */
int store_make_room(zf_store *s);

/* -------------------------------------------------------------------------------- */
/* The table                                                                        */
/* -------------------------------------------------------------------------------- */

static inline uint64_t key_hash(uint32_t owner, uint64_t index)
{
	uint64_t h = index * 0x9e3779b97f4a7c15ull ^ (uint64_t)owner * 0xc2b2ae3d27d4eb4full;

	return h ^ (h >> 29);
}

/*
 * The shard of a page: every page of an owner's 2 MiB range (a folio's largest size) in
 * the same one, so that a put takes one shard lock for its whole folio and a lookup one
 * for every size of unit over a page.
 */
static inline struct shard *shard_of(zf_store *s, uint32_t owner, uint64_t index)
{
	return &s->shards[key_hash(owner, index / STORE_RANGE_PAGES) % STORE_SHARDS];
}

static inline struct entry **bucket_of(struct shard *sh, uint64_t hash)
{
	return &sh->buckets[hash & (sh->nbuckets - 1)];
}

/* The entry of (owner, index), or NULL. Caller holds the shard lock. */
static inline struct entry *table_find(struct shard *sh, uint64_t hash, uint32_t owner,
				       uint64_t index)
{
	for (struct entry *e = *bucket_of(sh, hash); e; e = e->hnext) {
		if (e->index == index && e->owner == owner)
			return e;
	}
	return NULL;
}

/*
 * The lines a lookup of (owner, index) will need, asked for ahead of it so that the
 * misses of a run of lookups overlap: its bucket LOOKUP_BUCKET_AHEAD lookups ahead, and
 * the first entry of its chain, once the bucket has come, LOOKUP_ENTRY_AHEAD ahead.
 * Caller holds the shard lock. Always inlined: GCC (12) takes a function whose only
 * effect is a prefetch for a const one, and drops the calls to it.
 */
__attribute__((always_inline)) static inline void
table_prefetch_bucket(struct shard *sh, uint32_t owner, uint64_t index)
{
	__builtin_prefetch(bucket_of(sh, key_hash(owner, index)));
}

__attribute__((always_inline)) static inline void
table_prefetch_chain(struct shard *sh, uint32_t owner, uint64_t index)
{
	const struct entry *head = *bucket_of(sh, key_hash(owner, index));

	if (head)
		__builtin_prefetch(head);
}

/*
 * Whether len and index make a folio: a power of two of pages up to ZF_UNIT_MAX, its
 * first page aligned to its size.
 */
static inline bool folio_valid(uint64_t index, size_t len)
{
	return len >= STORE_PAGE && len <= ZF_UNIT_MAX && !(len & (len - 1)) &&
	       !(index & (len / STORE_PAGE - 1));
}

/*
 * Puts e first in its bucket, and doubles the buckets once the entries are as many.
 * Caller holds the shard lock.
 */
static inline void table_insert(struct shard *sh, uint64_t hash, struct entry *e)
{
	struct entry **b = bucket_of(sh, hash);

	e->hnext = *b;
	*b = e;
	if (++sh->count >= sh->nbuckets)
		store_table_grow(sh);
}

static inline void table_unlink(struct shard *sh, uint64_t hash, struct entry *e)
{
	struct entry **p = bucket_of(sh, hash);

	while (*p != e)
		p = &(*p)->hnext;
	*p = e->hnext;
	sh->count--;
}

/* -------------------------------------------------------------------------------- */
/* LRU (lru_lock)                                                                   */
/* -------------------------------------------------------------------------------- */

/* A newly stored entry goes first: the LRU is in the order the entries were stored. */
static inline void lru_add(zf_store *s, struct entry *e)
{
	list_add_head(&s->lru, &e->lru);
}

/* Takes e off the LRU; an entry that is not on it points at itself, and stays so. */
static inline void lru_del(struct entry *e)
{
	list_del(&e->lru);
}

/* -------------------------------------------------------------------------------- */
/* Entries                                                                          */
/* -------------------------------------------------------------------------------- */

/* Frees pool objects, counting the frees a full store's compaction may make use of. */
static inline void pool_free_many(zf_store *s, const uint64_t *handles, size_t n)
{
	zf_pool_free_many(s->pool, handles, n);
	atomic_fetch_add_explicit(&s->pool_frees, n, memory_order_relaxed);
}

static inline void pool_free(zf_store *s, uint64_t handle)
{
	pool_free_many(s, &handle, 1);
}

static inline uint32_t entry_pages(const struct entry *e)
{
	return 1u << e->order;
}

/*
 * Drops a reference; the last one frees the entry and its backing slot, and returns 1
 * with the handle of its pool object, if it has one, for the caller to free.
 */
static inline int entry_unref(zf_store *s, struct entry *e, uint64_t *pool_handle)
{
	int pooled;

	if (atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) != 1)
		return 0;
	pooled = e->kind == ENTRY_POOL;
	if (pooled)
		*pool_handle = e->where;
	else if (e->kind == ENTRY_BACKING)
		backing_free(s->backing, e->where, e->clen);
	free(e);
	return pooled;
}

/* Adds a delta made by store_count_entry() and friends to the store's counters. */
static inline void counters_add(zf_store *s, const struct counters *d)
{
	uint64_t *to = (uint64_t *)(void *)&s->n;
	const uint64_t *from = (const uint64_t *)(const void *)d;

	pthread_mutex_lock(&s->stats_lock);
	for (size_t i = 0; i < sizeof(*d) / sizeof(uint64_t); i++)
		to[i] += from[i];
	pthread_mutex_unlock(&s->stats_lock);
}

/*
 * Takes e out of the table and off the LRU (caller holds its shard lock and lru_lock);
 * the caller uncounts it and drops the table's reference.
 */
static inline void entry_remove_locked(struct shard *sh, uint64_t hash, struct entry *e)
{
	table_unlink(sh, hash, e);
	e->flags |= ENTRY_DEAD;
	lru_del(e);
}

#endif /* ZF_STORE_INTERNAL_H */
