/*
 * zpool.c - zfolio's zsmalloc: an allocator for compressed objects. Here: the handle
 * table, the pool's life cycle, and alloc, free, read and write.
 *
 * Objects are kept in size classes (zpool_class.c), each a slot size, in zspages
 * (zpool_zspage.c), runs of pages, which compaction packs (zpool_compact.c). The stats and
 * the invariant checks are in zpool_stats.c, the structures in zpool_internal.h.
 *
 * Handles. A handle indexes a table of 64-bit entries (class, zspage id, slot), kept in
 * chunks that never move, so a reader finds an object without a lock. Each class keeps
 * its own list of free handles and takes new ones 16 at a time from a global counter,
 * so alloc and free take no global lock.
 *
 * Locking. A class lock covers its lists, its zspages' slots and the table entries of
 * its handles. Reads and writes take no class lock: they pin the zspage (a counter),
 * then check that the entry still points there (it may have moved in between).
 * Compaction takes a zspage for moving only when nobody pins it (-1 in the counter),
 * moves each object, updates its entry, and leaves it; a pinned zspage is skipped. So
 * readers never wait for other classes, and within a class only for the zspage being
 * moved. The arena lock is taken only to make or free a zspage.
 */
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>

#include "../common/options.h"
#include "zpool_internal.h"

/* -------------------------------------------------------------------------------- */
/* Handle table                                                                     */
/* -------------------------------------------------------------------------------- */

/* Gives class c a batch of fresh handles. Caller holds c->lock. */
static int refill_handles(zf_pool *pool, struct size_class *c)
{
	const uint64_t first = atomic_fetch_add(&pool->next_handle, ZPOOL_HANDLE_BATCH);
	const uint64_t end = first + ZPOOL_HANDLE_BATCH;

	RETURN_IF(end > (uint64_t)ZPOOL_HANDLE_CHUNKS * ZPOOL_HANDLE_CHUNK, -ENOMEM);
	/* A batch never straddles chunks: a chunk holds a whole number of batches. */
	if (!entry_of(pool, first)) {
		const size_t idx = first >> ZPOOL_HANDLE_CHUNK_SHIFT;
		int ret = 0;

		pthread_mutex_lock(&pool->grow_lock);
		if (!atomic_load(&pool->handle_chunks[idx])) {
			_Atomic uint64_t *chunk = calloc(ZPOOL_HANDLE_CHUNK, sizeof(*chunk));

			if (chunk) {
				atomic_store_explicit(&pool->handle_chunks[idx], chunk,
						      memory_order_release);
				atomic_fetch_add(&pool->meta_bytes,
						 ZPOOL_HANDLE_CHUNK * sizeof(*chunk) +
							 table_page_cost(idx));
			} else {
				ret = -ENOMEM;
			}
		}
		pthread_mutex_unlock(&pool->grow_lock);
		/* The batch is lost on failure: 64 numbers of 2^28, and the pool is intact. */
		TRY(ret);
	}
	for (uint64_t h = end; h-- > first;) {
		if (h == 0)
			continue;
		atomic_store_explicit(entry_of(pool, h), ZPOOL_ENTRY_FREE | c->free_handles,
				      memory_order_relaxed);
		c->free_handles = h;
	}
	return 0;
}

/* -------------------------------------------------------------------------------- */
/* Pins: what keeps compaction from moving an object while it is read or written    */
/* -------------------------------------------------------------------------------- */

static void pin(struct zspage *zs)
{
	for (;;) {
		int v = atomic_load_explicit(&zs->pins, memory_order_relaxed);

		if (v >= 0 && atomic_compare_exchange_weak_explicit(&zs->pins, &v, v + 1,
								    memory_order_acquire,
								    memory_order_relaxed))
			return;
		if (v < 0)
			sched_yield(); /* a zspage's objects are being moved: microseconds */
	}
}

static void unpin(struct zspage *zs)
{
	atomic_fetch_sub_explicit(&zs->pins, 1, memory_order_release);
}

/* Pins the zspage that holds handle's object; returns its entry, or 0 if not allocated. */
static uint64_t pin_object(zf_pool *pool, uint64_t handle, struct zspage **zsp)
{
	_Atomic uint64_t *ep = entry_of(pool, handle);

	if (!ep)
		return 0;
	for (;;) {
		const uint64_t e = atomic_load_explicit(ep, memory_order_acquire);
		struct zspage *zs;

		if (!entry_allocated(e))
			return 0;
		zs = zspage_by_id(pool, entry_zspage(e));
		pin(zs);
		/* Moved between the load and the pin? Then follow it. */
		if (atomic_load_explicit(ep, memory_order_acquire) == e) {
			*zsp = zs;
			return e;
		}
		unpin(zs);
	}
}

/* -------------------------------------------------------------------------------- */
/* Life cycle                                                                       */
/* -------------------------------------------------------------------------------- */

void zf_pool_options_init(zf_pool_options *o)
{
	memset(o, 0, sizeof(*o));
	o->struct_size = sizeof(*o);
	o->compact_threshold_pct = 25;
	o->warm_pages_max = ZF_UNIT_MAX / ZPOOL_PAGE;
}

int zf_pool_create(const zf_pool_options *options, zf_pool **poolp)
{
	zf_pool_options o;
	zf_pool *pool;
	unsigned n;

	RETURN_IF(!poolp, -EINVAL);
	zf_pool_options_init(&o);
	TRY(OPTIONS_LOAD(&o, options));
	RETURN_IF(o.compact_threshold_pct > 100, -EINVAL);
	pool = calloc(1, sizeof(*pool));
	RETURN_IF(!pool, -ENOMEM);
	zpool_class_defs(&n);
	pool->classes = calloc(n, sizeof(*pool->classes));
	pool->handle_chunks = calloc(ZPOOL_HANDLE_CHUNKS, sizeof(*pool->handle_chunks));
	pool->zspage_chunks = calloc(ZPOOL_ZSPAGE_CHUNKS, sizeof(*pool->zspage_chunks));
	if (!pool->classes || !pool->handle_chunks || !pool->zspage_chunks) {
		free(pool->classes);
		free(pool->handle_chunks);
		free(pool->zspage_chunks);
		free(pool);
		return -ENOMEM;
	}
	pool->defs = zpool_class_defs(&n);
	pool->nr_classes = n;
	pool->compact_threshold_pct = o.compact_threshold_pct;
	pool->warm_pages_max = o.warm_pages_max;
	atomic_init(&pool->next_handle, 0);
	pthread_mutex_init(&pool->grow_lock, NULL);
	pthread_mutex_init(&pool->arena_lock, NULL);
	atomic_init(&pool->meta_bytes, sizeof(*pool) + n * sizeof(*pool->classes));
	*poolp = pool;
	return 0;
}

void zf_pool_destroy(zf_pool *pool)
{
	if (!pool)
		return;
	for (size_t i = 0; i < pool->nr_arenas; i++)
		munmap(pool->arenas[2 * i], (size_t)(uintptr_t)pool->arenas[2 * i + 1]);
	for (size_t i = 0; i < ZPOOL_HANDLE_CHUNKS; i++)
		free(pool->handle_chunks[i]);
	for (size_t i = 0; i < ZPOOL_ZSPAGE_CHUNKS && pool->zspage_chunks[i]; i++) {
		struct zspage *chunk = pool->zspage_chunks[i];

		for (uint32_t j = 0; j < ZPOOL_ZSPAGE_CHUNK; j++)
			free(chunk[j].free_bits);
		free(chunk);
	}
	for (unsigned i = 0; i < pool->nr_classes; i++) {
		struct size_class *c = class_at(pool, i);

		if (c) {
			pthread_mutex_destroy(&c->lock);
			free(c);
		}
	}
	pthread_mutex_destroy(&pool->grow_lock);
	pthread_mutex_destroy(&pool->arena_lock);
	free(pool->arenas);
	free(pool->handle_chunks);
	free(pool->zspage_chunks);
	free(pool->classes);
	free(pool);
}

/* -------------------------------------------------------------------------------- */
/* Objects: alloc, free, read, write                                                */
/* -------------------------------------------------------------------------------- */

int zf_pool_alloc(zf_pool *pool, size_t size, uint64_t *handlep)
{
	struct size_class *c;
	struct zspage *zs;
	uint64_t h;
	uint32_t slot;
	int ret = 0;

	RETURN_IF(size == 0 || size > ZF_UNIT_MAX || !handlep, -EINVAL);
	c = class_get(pool, class_for(pool, size));
	RETURN_IF(!c, -ENOMEM);
	pthread_mutex_lock(&c->lock);
	if (!c->free_handles)
		ret = refill_handles(pool, c);
	if (ret)
		goto out;
	zs = fullest_partial(c, NULL);
	if (!zs) {
		zs = zpool_zspage_new(pool, c);
		if (!zs) {
			ret = -ENOMEM;
			goto out;
		}
		group_insert(c, zs);
	}
	h = c->free_handles;
	c->free_handles =
		atomic_load_explicit(entry_of(pool, h), memory_order_relaxed) & ~ZPOOL_ENTRY_FREE;
	slot = zpool_slot_take(pool, c, zs, h | (uint64_t)size << ZPOOL_HDR_SIZE_SHIFT);
	atomic_store_explicit(entry_of(pool, h), entry_make(c->index, zs->id, slot),
			      memory_order_release);
	zpool_regroup(c, zs);
	c->objs_used++;
	c->compr_bytes += size;
	*handlep = h;
	ZPOOL_DEBUG_CHECK_OP(pool, c);
out:
	pthread_mutex_unlock(&c->lock);
	return ret;
}

/*
 * The pages compaction would give back, about: the pages in memory less those the
 * objects fill when packed slot after slot. Compaction also returns single pages, so
 * this is what tells when it pays (class_freeable() counts whole zspages only).
 */
static uint64_t class_slack(const struct size_class *c)
{
	const uint64_t packed = (c->objs_used * c->size + ZPOOL_PAGE - 1) / ZPOOL_PAGE;

	return c->huge || c->resident_pages <= packed ? 0 : c->resident_pages - packed;
}

#define ZPOOL_AUTO_COMPACT_MIN 16u /* pages: less is not worth a compaction from free() */

void zf_pool_free(zf_pool *pool, uint64_t handle)
{
	_Atomic uint64_t *ep = entry_of(pool, handle);
	struct size_class *c;
	struct zspage *zs;
	uint64_t e, hdr;
	unsigned ci;

	if (!ep)
		return;
	e = atomic_load_explicit(ep, memory_order_acquire);
	if (!entry_allocated(e))
		return;
	/*
	 * An entry is stable under its class's lock; spilling may move the object to another
	 * class before we have the lock, and then we follow it.
	 */
	for (;;) {
		ci = entry_class(e);
		if (ci >= pool->nr_classes || !(c = class_at(pool, ci)))
			return;
		pthread_mutex_lock(&c->lock);
		e = atomic_load_explicit(ep, memory_order_relaxed);
		if (!entry_allocated(e))
			goto out;
		if (entry_class(e) == ci)
			break;
		pthread_mutex_unlock(&c->lock);
	}
	zs = zspage_by_id(pool, entry_zspage(e));
	hdr = hdr_load(c, zs, entry_slot(e));
	c->objs_used--;
	c->compr_bytes -= hdr >> ZPOOL_HDR_SIZE_SHIFT;
	zpool_slot_put(c, zs, entry_slot(e), hdr);
	atomic_store_explicit(ep, ZPOOL_ENTRY_FREE | c->free_handles, memory_order_release);
	c->free_handles = handle;
	if (zs->inuse == 0) {
		group_remove(zs);
		zpool_zspage_free(pool, c, zs, 1);
	} else {
		zpool_regroup(c, zs);
	}
	if (pool->compact_threshold_pct) {
		const uint64_t slack = class_slack(c);

		if (slack >= ZPOOL_AUTO_COMPACT_MIN &&
		    slack * 100 >= (uint64_t)pool->compact_threshold_pct * c->resident_pages)
			zpool_compact_class(pool, c);
	}
	ZPOOL_DEBUG_CHECK_OP(pool, c);
out:
	pthread_mutex_unlock(&c->lock);
}

void zpool_prefetch_entry(zf_pool *pool, uint64_t handle)
{
	_Atomic uint64_t *ep = entry_of(pool, handle);

	if (ep)
		__builtin_prefetch((const void *)ep);
}

void zpool_prefetch_object(zf_pool *pool, uint64_t handle)
{
	const uint64_t e = entry_load(pool, handle);
	const struct size_class *c;
	const struct zspage *zs;

	if (!entry_allocated(e) || entry_class(e) >= pool->nr_classes ||
	    !(c = class_at(pool, entry_class(e))))
		return;
	zs = zspage_by_id(pool, entry_zspage(e));
	__builtin_prefetch(zs);
	if (!c->huge)
		__builtin_prefetch(slot_ptr(c, zs, entry_slot(e)));
}

/*
 * Each free reads the object's table entry and header, lines nobody has touched since the
 * object was stored: a cache miss each, one after the other. Here the entry of the object
 * FREE_AHEAD places on is asked for, then its header half as far on, so the misses of
 * several frees overlap (a store's lz4 put of 2 MiB in 4 KiB units, replacing the units
 * it finds: 2% faster; 81% of zf_pool_free()'s samples were on the header's load).
 */
#define FREE_AHEAD 4

/*
 * Asks for the table entry of the object FREE_AHEAD places after i, and for the header and
 * zspage of the one half as far.
 */
static void prefetch_ahead(zf_pool *pool, const uint64_t *handles, size_t n, size_t i)
{
	if (i + FREE_AHEAD < n)
		zpool_prefetch_entry(pool, handles[i + FREE_AHEAD]);
	if (i + FREE_AHEAD / 2 < n)
		zpool_prefetch_object(pool, handles[i + FREE_AHEAD / 2]);
}

void zf_pool_free_many(zf_pool *pool, const uint64_t *handles, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		prefetch_ahead(pool, handles, n, i);
		zf_pool_free(pool, handles[i]);
	}
}

const void *zf_pool_read_begin(zf_pool *pool, uint64_t handle, size_t *size)
{
	struct zspage *zs;
	const uint64_t e = pin_object(pool, handle, &zs);
	const struct size_class *c;
	uint64_t hdr;

	if (!e)
		return NULL;
	c = class_at(pool, entry_class(e));
	hdr = hdr_load(c, zs, entry_slot(e));
	if (size)
		*size = hdr >> ZPOOL_HDR_SIZE_SHIFT;
	return slot_ptr(c, zs, entry_slot(e)) + (c->huge ? 0 : ZPOOL_HDR);
}

void zf_pool_read_end(zf_pool *pool, uint64_t handle)
{
	/* Pinned: the entry cannot change until the unpin. */
	const uint64_t e = entry_load(pool, handle);

	if (entry_allocated(e))
		unpin(zspage_by_id(pool, entry_zspage(e)));
}

/*
 * A pin or an unpin is an atomic read-modify-write, which waits for the loads before it:
 * one after another, each object's entry and zspage would be missed in turn. As in
 * zf_pool_free_many(), those of the object FREE_AHEAD places on are asked for first, so
 * that the misses overlap (a prefetch is not held back by a locked instruction).
 */
void zf_pool_read_begin_many(zf_pool *pool, const uint64_t *handles, size_t n, const void **ptrs)
{
	for (size_t i = 0; i < n; i++) {
		prefetch_ahead(pool, handles, n, i);
		ptrs[i] = zf_pool_read_begin(pool, handles[i], NULL);
	}
}

void zf_pool_read_end_many(zf_pool *pool, const uint64_t *handles, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		prefetch_ahead(pool, handles, n, i);
		zf_pool_read_end(pool, handles[i]);
	}
}

void *zpool_write_begin(zf_pool *pool, uint64_t handle)
{
	/* A pin holds a writer's object where it is as it does a reader's. */
	return (void *)(uintptr_t)zf_pool_read_begin(pool, handle, NULL);
}

int zf_pool_write(zf_pool *pool, uint64_t handle, const void *src, size_t len)
{
	size_t size;
	void *dst = (void *)(uintptr_t)zf_pool_read_begin(pool, handle, &size);

	RETURN_IF(!dst, -EINVAL);
	if (len > size) {
		zf_pool_read_end(pool, handle);
		return -EINVAL;
	}
	memcpy(dst, src, len);
	zf_pool_read_end(pool, handle);
	return 0;
}

size_t zf_pool_object_size(zf_pool *pool, uint64_t handle)
{
	size_t size = 0;

	if (zf_pool_read_begin(pool, handle, &size))
		zf_pool_read_end(pool, handle);
	return size;
}

unsigned zpool_handle_class(zf_pool *pool, uint64_t handle)
{
	const uint64_t e = entry_load(pool, handle);

	return entry_allocated(e) ? entry_class(e) : UINT32_MAX;
}
