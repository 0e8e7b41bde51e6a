/*
 * zpool_zspage.c - zspages: their address ranges, carved from arenas; their memory, given
 * back page by page; their slots and fullness groups.
 *
 * zspages are runs of pages carved from 64 MiB arenas (mmap, no huge pages so that
 * returning 4 KiB pages works). Unlike the kernel's, they are contiguous in the address
 * space, so an object that crosses a page boundary is still one range and reads never
 * copy. An emptied zspage keeps its address range on a free stack by length, for the next
 * zspage of that length; its pages stay in memory while the pool's "warm" pages are under
 * warm_pages_max (a page fault costs more than compressing a page on a VM), and go back
 * (MADV_DONTNEED) otherwise and at the next zf_pool_compact(). Address space is not
 * returned before the pool is destroyed; memory is.
 *
 * A zspage tracks its free slots in a bitmap and the objects on each of its pages, so that
 * compaction can give back any page no object is on.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "zpool_internal.h"

#define ZPOOL_ARENA_BYTES ((size_t)64 << 20)

/* A fresh address range of pages pages from the arenas. Caller holds arena_lock. */
static uint8_t *arena_take(zf_pool *pool, uint32_t pages)
{
	const size_t bytes = (size_t)pages * ZPOOL_PAGE;
	uint8_t *p;

	if (pool->arena_left < bytes) {
		const size_t len = ZF_MAX(ZPOOL_ARENA_BYTES, bytes);
		void *a;

		if (pool->nr_arenas == pool->arenas_cap) {
			const size_t cap = pool->arenas_cap ? 2 * pool->arenas_cap : 16;
			void **arenas = realloc(pool->arenas, cap * 2 * sizeof(void *));

			if (!arenas)
				return NULL;
			pool->arenas = arenas;
			pool->arenas_cap = cap;
		}
		a = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (a == MAP_FAILED)
			return NULL;
		/* 4 KiB pages only: giving back part of a huge page would split it anyway. */
		madvise(a, len, MADV_NOHUGEPAGE);
		pool->arenas[2 * pool->nr_arenas] = a;
		pool->arenas[2 * pool->nr_arenas + 1] = (void *)(uintptr_t)len;
		pool->nr_arenas++;
		pool->arena_cur = a;
		pool->arena_left = len;
	}
	p = pool->arena_cur;
	pool->arena_cur += bytes;
	pool->arena_left -= bytes;
	return p;
}

/* A new struct zspage with an id. Caller holds arena_lock. */
static struct zspage *zspage_struct_new(zf_pool *pool)
{
	const uint32_t id = pool->nr_zspage_structs;
	struct zspage *chunk;

	if (id / ZPOOL_ZSPAGE_CHUNK >= ZPOOL_ZSPAGE_CHUNKS)
		return NULL;
	chunk = atomic_load(&pool->zspage_chunks[id / ZPOOL_ZSPAGE_CHUNK]);
	if (!chunk) {
		chunk = calloc(ZPOOL_ZSPAGE_CHUNK, sizeof(*chunk));
		if (!chunk)
			return NULL;
		for (uint32_t i = 0; i < ZPOOL_ZSPAGE_CHUNK; i++)
			chunk[i].id = id + i;
		atomic_fetch_add(&pool->meta_bytes,
				 ZPOOL_ZSPAGE_CHUNK * sizeof(*chunk) +
					 table_page_cost(id / ZPOOL_ZSPAGE_CHUNK));
		atomic_store_explicit(&pool->zspage_chunks[id / ZPOOL_ZSPAGE_CHUNK], chunk,
				      memory_order_release);
	}
	pool->nr_zspage_structs++;
	return &chunk[id % ZPOOL_ZSPAGE_CHUNK];
}

/* Sizes zs's bitmap and page arrays for class c and marks every slot free. */
static int zspage_meta_init(zf_pool *pool, const struct size_class *c, struct zspage *zs,
			    const uint8_t *resident)
{
	const size_t words = bitmap_words(c->objs);
	const size_t need = words * 8 + (size_t)c->pages * (sizeof(uint16_t) + 1);

	zs->free_bits = malloc(need);
	if (!zs->free_bits)
		return -ENOMEM;
	zs->meta_cap = need;
	atomic_fetch_add(&pool->meta_bytes, need);
	zs->page_refs = (uint16_t *)(void *)(zs->free_bits + words);
	zs->page_resident = (uint8_t *)(zs->page_refs + c->pages);
	memset(zs->free_bits, 0xff, words * 8);
	if (c->objs % 64)
		zs->free_bits[words - 1] = (1ull << (c->objs % 64)) - 1;
	memset(zs->page_refs, 0, (size_t)c->pages * sizeof(uint16_t));
	if (resident)
		memcpy(zs->page_resident, resident, c->pages);
	else
		memset(zs->page_resident, 0, c->pages);
	return 0;
}

static void zspage_meta_free(zf_pool *pool, struct zspage *zs)
{
	atomic_fetch_sub(&pool->meta_bytes, zs->meta_cap);
	free(zs->free_bits);
	zs->free_bits = NULL;
	zs->meta_cap = 0;
}

/*
 * Returns a zspage struct (with its address range) to the free lists: the warm list when
 * its pages keep their memory (it keeps its page_resident flags, and zs->resident counts
 * them), else the cold one.
 */
static void zspage_release(zf_pool *pool, struct zspage *zs, int warm)
{
	/* The next class to use the range sizes its own bitmap. */
	if (!warm)
		zspage_meta_free(pool, zs);
	pthread_mutex_lock(&pool->arena_lock);
	if (warm) {
		zs->next_free = pool->warm_zspages[zs->pages];
		pool->warm_zspages[zs->pages] = zs;
	} else {
		zs->next_free = pool->free_zspages[zs->pages];
		pool->free_zspages[zs->pages] = zs;
	}
	pthread_mutex_unlock(&pool->arena_lock);
}

/*
 * Gives back the memory of every warm zspage (they join the cold list). Returns the
 * pages given back.
 */
uint64_t zpool_warm_release_all(zf_pool *pool)
{
	uint64_t given = 0;

	pthread_mutex_lock(&pool->arena_lock);
	for (uint32_t len = 1; len <= ZPOOL_MAX_ZSPAGE_PAGES; len++) {
		while (pool->warm_zspages[len]) {
			struct zspage *zs = pool->warm_zspages[len];

			pool->warm_zspages[len] = zs->next_free;
			madvise(zs->base, (size_t)len * ZPOOL_PAGE, MADV_DONTNEED);
			zspage_meta_free(pool, zs);
			given += zs->resident;
			zs->resident = 0;
			zs->next_free = pool->free_zspages[len];
			pool->free_zspages[len] = zs;
		}
	}
	atomic_fetch_sub(&pool->warm_pages, given);
	atomic_fetch_sub(&pool->pages_used, given);
	atomic_fetch_add(&pool->warm_released, given);
	pthread_mutex_unlock(&pool->arena_lock);
	return given;
}

/* A zspage for class c, empty, with no memory behind it yet. Caller holds c->lock. */
struct zspage *zpool_zspage_new(zf_pool *pool, struct size_class *c)
{
	struct zspage *zs;
	uint32_t warm = 0;
	int ret;

	pthread_mutex_lock(&pool->arena_lock);
	zs = pool->warm_zspages[c->pages];
	if (zs) {
		pool->warm_zspages[c->pages] = zs->next_free;
		atomic_fetch_sub(&pool->warm_pages, zs->resident);
		warm = zs->resident;
	} else if ((zs = pool->free_zspages[c->pages])) {
		pool->free_zspages[c->pages] = zs->next_free;
	} else {
		uint8_t *base = arena_take(pool, c->pages);

		zs = base ? zspage_struct_new(pool) : NULL;
		if (zs) {
			zs->base = base;
			zs->pages = (uint16_t)c->pages;
		}
		/* On failure the range (if any) stays unused in its arena: no memory lost. */
	}
	pthread_mutex_unlock(&pool->arena_lock);
	if (!zs)
		return NULL;
	if (warm) {
		/* Its pages in memory: keep the flags across the new class's layout. */
		uint8_t resident[ZPOOL_MAX_ZSPAGE_PAGES];

		memcpy(resident, zs->page_resident, zs->pages);
		zspage_meta_free(pool, zs);
		ret = zspage_meta_init(pool, c, zs, resident);
		if (ret) {
			/* Its memory goes: nothing describes it any more. */
			madvise(zs->base, (size_t)zs->pages * ZPOOL_PAGE, MADV_DONTNEED);
			atomic_fetch_sub(&pool->pages_used, warm);
		}
	} else {
		ret = zspage_meta_init(pool, c, zs, NULL);
	}
	if (ret) {
		zs->resident = 0;
		zspage_release(pool, zs, 0);
		return NULL;
	}
	list_init(&zs->node);
	zs->class_idx = (uint16_t)c->index;
	zs->group = 0;
	zs->inuse = 0;
	zs->resident = warm;
	zs->huge_hdr = 0;
	c->zspages++;
	/* A warm zspage's pages are counted in pages_used already: now they are the class's. */
	c->resident_pages += warm;
	return zs;
}

static void resident_add(zf_pool *pool, struct size_class *c, struct zspage *zs, int64_t pages)
{
	zs->resident += (uint32_t)pages;
	c->resident_pages += (uint64_t)pages;
	if (pages > 0) {
		const uint64_t used =
			atomic_fetch_add(&pool->pages_used, (uint64_t)pages) + (uint64_t)pages;

		update_max(&pool->mem_used_max, used * ZPOOL_PAGE);
	} else {
		atomic_fetch_sub(&pool->pages_used, (uint64_t)-pages);
	}
}

/*
 * Frees an empty zspage. Caller holds c->lock; zs is on no list. Compaction gives its
 * pages back; otherwise (keep_warm) a zspage with pages in memory is kept warm while the
 * warm ones stay within warm_pages_max: the next zspage of its length takes it without a
 * page fault (a page fault costs more than compressing a page on a VM, and a store that
 * replaces folios frees and allocates zspages all the time). Its pages stay in
 * pages_used. Otherwise, and at the next zf_pool_compact(), the pages go back to the
 * system.
 */
void zpool_zspage_free(zf_pool *pool, struct size_class *c, struct zspage *zs, int keep_warm)
{
	const uint64_t pages = zs->resident;

	c->zspages--;
	if (keep_warm && pages &&
	    atomic_fetch_add(&pool->warm_pages, pages) + pages <= pool->warm_pages_max) {
		c->resident_pages -= pages;
		zspage_release(pool, zs, 1);
		return;
	}
	if (keep_warm && pages)
		atomic_fetch_sub(&pool->warm_pages, pages);
	if (zs->resident)
		madvise(zs->base, (size_t)zs->pages * ZPOOL_PAGE, MADV_DONTNEED);
	resident_add(pool, c, zs, -(int64_t)zs->resident);
	zspage_release(pool, zs, 0);
}

/* Gives back the pages of zs that no object is on. Returns how many. */
uint32_t zpool_zspage_trim(zf_pool *pool, struct size_class *c, struct zspage *zs)
{
	uint32_t trimmed = 0;

	for (uint32_t p = 0; p < zs->pages;) {
		uint32_t end = p;

		while (end < zs->pages && !zs->page_refs[end] && zs->page_resident[end])
			end++;
		if (end == p) {
			p++;
			continue;
		}
		madvise(zs->base + (size_t)p * ZPOOL_PAGE, (size_t)(end - p) * ZPOOL_PAGE,
			MADV_DONTNEED);
		memset(zs->page_resident + p, 0, end - p);
		trimmed += end - p;
		p = end;
	}
	resident_add(pool, c, zs, -(int64_t)trimmed);
	return trimmed;
}

/* -------------------------------------------------------------------------------- */
/* Fullness groups and slots (caller holds the class lock)                          */
/* -------------------------------------------------------------------------------- */

/* Moves zs to the group its use now calls for. */
void zpool_regroup(struct size_class *c, struct zspage *zs)
{
	if (group_of(c, zs->inuse) == zs->group)
		return;
	group_remove(zs);
	group_insert(c, zs);
}

/*
 * Puts the object of header hdr in slot of zs, whose bit is cleared already, and writes
 * the header: the pages it covers get memory (the kernel faults it in on the first write).
 */
static inline void slot_fill(zf_pool *pool, struct size_class *c, struct zspage *zs, uint32_t slot,
			     uint64_t hdr)
{
	uint32_t first, last, fresh = 0;

	slot_pages(c, slot, hdr >> ZPOOL_HDR_SIZE_SHIFT, &first, &last);
	for (uint32_t p = first; p <= last; p++) {
		zs->page_refs[p]++;
		if (!zs->page_resident[p]) {
			zs->page_resident[p] = 1;
			fresh++;
		}
	}
	if (fresh)
		resident_add(pool, c, zs, fresh);
	zs->inuse++;
	hdr_store(c, zs, slot, hdr);
}

/* Takes the lowest free slot of zs for the object of header hdr. */
uint32_t zpool_slot_take(zf_pool *pool, struct size_class *c, struct zspage *zs, uint64_t hdr)
{
	uint32_t slot = 0;

	for (size_t w = 0;; w++) {
		if (zs->free_bits[w]) {
			slot = (uint32_t)(w * 64 + (size_t)__builtin_ctzll(zs->free_bits[w]));
			zs->free_bits[w] &= zs->free_bits[w] - 1;
			break;
		}
	}
	slot_fill(pool, c, zs, slot, hdr);
	return slot;
}

/* Takes slot, which is free, for the object of header hdr: spilling plans its moves. */
void zpool_slot_take_at(zf_pool *pool, struct size_class *c, struct zspage *zs, uint32_t slot,
			uint64_t hdr)
{
	zs->free_bits[slot / 64] &= ~(1ull << (slot % 64));
	slot_fill(pool, c, zs, slot, hdr);
}

/* Frees a slot; its pages keep their memory until compaction trims them. */
void zpool_slot_put(struct size_class *c, struct zspage *zs, uint32_t slot, uint64_t hdr)
{
	uint32_t first, last;

	slot_pages(c, slot, hdr >> ZPOOL_HDR_SIZE_SHIFT, &first, &last);
	for (uint32_t p = first; p <= last; p++)
		zs->page_refs[p]--;
	zs->free_bits[slot / 64] |= 1ull << (slot % 64);
	zs->inuse--;
}
