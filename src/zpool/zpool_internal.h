/*
 * zpool_internal.h - zpool's own, for its files only (the rest of the library uses
 * zpool.h): the layout of a handle table entry and of an object header, the size class,
 * zspage and pool structures, the functions one file calls in another, and the small
 * helpers alloc, free, read and compaction all run, static inline so that the hot paths
 * stay as the compiler inlined them in one file. See zpool.c for the design.
 */
#ifndef ZF_ZPOOL_INTERNAL_H
#define ZF_ZPOOL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../common/common.h"
#include "../common/list.h"
#include "zpool.h"

#define ZPOOL_PAGE ZF_PAGE_SIZE
#define ZPOOL_HDR 8u /* the object header: handle and size */
#define ZPOOL_SMALL_STEP 16u /* class step up to a page */
#define ZPOOL_OCTAVE_CLASSES 128u /* classes per octave above a page */
#define ZPOOL_SMALL_MAX_PAGES 64u /* longest zspage for classes up to a page */
#define ZPOOL_MAX_ZSPAGE_PAGES 1024u

/*
 * Fullness groups, zsmalloc's: 1..10 by tenths of the slots in use (rounded up), 11 for
 * full. An empty zspage is freed at once, so group 0 is never on a list.
 */
#define ZPOOL_GROUP_FULL 11
#define ZPOOL_GROUPS 12

/*
 * A handle table entry. Free: ZPOOL_ENTRY_FREE | next free handle of the class. Allocated:
 * class (11 bits) | zspage id (32 bits) | slot (20 bits); never 0, as class and
 * zspage id are stored plus one.
 */
#define ZPOOL_ENTRY_FREE (1ull << 63)
#define ZPOOL_ENTRY_CLASS_SHIFT 52
#define ZPOOL_ENTRY_ZSPAGE_SHIFT 20
#define ZPOOL_ENTRY_SLOT_MASK ((1ull << ZPOOL_ENTRY_ZSPAGE_SHIFT) - 1)

/*
 * An object header (the first 8 bytes of a slot, or zspage->huge_hdr for a huge class):
 * handle (40 bits) | size << 40. Free slots hold nothing: they are tracked in the
 * zspage's bitmap, so that their pages can be given back.
 */
#define ZPOOL_HDR_SIZE_SHIFT 40
#define ZPOOL_HDR_HANDLE_MASK ((1ull << ZPOOL_HDR_SIZE_SHIFT) - 1)

/*
 * Handle and zspage tables grow in chunks, so that a small pool has a small table: at
 * most 2^28 handles (a TiB of 4 KiB units) and 2^22 zspages.
 */
#define ZPOOL_HANDLE_CHUNK_SHIFT 12
#define ZPOOL_HANDLE_CHUNK (1u << ZPOOL_HANDLE_CHUNK_SHIFT)
#define ZPOOL_HANDLE_CHUNKS (1u << 16)
#define ZPOOL_HANDLE_BATCH 16u
#define ZPOOL_ZSPAGE_CHUNK 256u
#define ZPOOL_ZSPAGE_CHUNKS (1u << 14)

struct zspage {
	uint8_t *base; /* pages * ZPOOL_PAGE bytes, fixed for the struct's life */
	union {
		struct list_node node; /* in use: on its class's fullness group list */
		struct zspage *next_free; /* empty: on the pool's free or warm stack */
	};
	uint32_t id;
	uint16_t pages;
	uint16_t class_idx;
	uint8_t group;
	uint32_t inuse;
	uint32_t resident; /* pages with memory behind them */
	uint64_t huge_hdr;
	atomic_int pins; /* > 0: readers/writers; -1: compaction is moving objects */
	/*
	 * One allocation of meta_cap bytes: the free-slot bitmap (1 = free, a bit per slot),
	 * then per page the number of objects on it (uint16_t) and whether it has memory
	 * behind it (uint8_t). A page gets memory when an object is put on it and gives it
	 * back (MADV_DONTNEED) when compaction finds no object on it.
	 */
	uint64_t *free_bits;
	uint16_t *page_refs;
	uint8_t *page_resident;
	size_t meta_cap;
};

struct size_class {
	pthread_mutex_t lock;
	uint32_t size; /* slot size */
	uint32_t capacity; /* the largest object: size, less the header unless huge */
	uint32_t pages; /* per zspage */
	uint32_t objs; /* per zspage */
	uint32_t huge;
	uint32_t index;
	struct list_node groups[ZPOOL_GROUPS]; /* zspage lists, by fullness */
	uint64_t free_handles; /* head of the class's free handle list */
	/* Counters, under lock. */
	uint64_t objs_used, compr_bytes, zspages, resident_pages, compactions, pages_compacted;
#ifdef ZF_DEBUG_FULL
	uint64_t ops_unchecked; /* allocs and frees since the last whole check */
#endif
};

struct zf_pool {
	const struct zpool_class_def *defs; /* the class table */
	_Atomic(struct size_class *) *classes; /* made on first use, under grow_lock */
	unsigned nr_classes;
	unsigned compact_threshold_pct;

	/* Handles: chunks made on demand, never moved, so entries can be read lock-free. */
	_Atomic(_Atomic uint64_t *) *handle_chunks;
	atomic_uint_fast64_t next_handle;
	pthread_mutex_t grow_lock; /* making handle chunks and classes */

	/* zspages: structs in chunks, never freed before the pool; ids index them. */
	pthread_mutex_t arena_lock; /* everything below */
	_Atomic(struct zspage *) *zspage_chunks;
	uint32_t nr_zspage_structs;
	struct zspage *free_zspages[ZPOOL_MAX_ZSPAGE_PAGES + 1]; /* by length: pages returned */
	struct zspage *warm_zspages[ZPOOL_MAX_ZSPAGE_PAGES + 1]; /* by length: pages kept */
	uint8_t *arena_cur;
	size_t arena_left;
	void **arenas;
	size_t nr_arenas, arenas_cap;

	atomic_uint_fast64_t pages_used, mem_used_max, meta_bytes;
	/* Pages of empty zspages kept in memory (in pages_used), their limit, and given back. */
	atomic_uint_fast64_t warm_pages, warm_released;
	uint64_t warm_pages_max;
};

/* The class table: built once, the same for every pool. */
struct zpool_class_def {
	uint32_t size, capacity, pages, objs, huge;
};

/* -------------------------------------------------------------------------------- */
/* Functions of one file that the others call                                       */
/* -------------------------------------------------------------------------------- */

/* zpool_class.c: the class table, and class i of pool, made on first use (class_get()). */
const struct zpool_class_def *zpool_class_defs(unsigned *count);
struct size_class *zpool_class_make(zf_pool *pool, unsigned i);

/*
 * zpool_zspage.c, zspages: zpool_zspage_new() makes an empty zspage for class c;
 * zpool_zspage_free() frees an empty one, which is on no list (keep_warm: its pages may
 * stay in memory for the next zspage); zpool_zspage_trim() gives back the pages of zs that
 * no object is on and returns how many; zpool_warm_release_all() gives back the pages of
 * the warm zspages and returns how many. Caller holds c->lock, but for the last.
 */
struct zspage *zpool_zspage_new(zf_pool *pool, struct size_class *c);
void zpool_zspage_free(zf_pool *pool, struct size_class *c, struct zspage *zs, int keep_warm);
uint32_t zpool_zspage_trim(zf_pool *pool, struct size_class *c, struct zspage *zs);
uint64_t zpool_warm_release_all(zf_pool *pool);

/*
 * zpool_zspage.c, slots (caller holds c->lock): zpool_slot_take() takes the lowest free
 * slot of zs for the object of header hdr and writes the header, zpool_slot_take_at() the
 * free slot given; zpool_slot_put() frees slot, whose object has header hdr;
 * zpool_regroup() moves zs to the fullness group its use now calls for.
 */
uint32_t zpool_slot_take(zf_pool *pool, struct size_class *c, struct zspage *zs, uint64_t hdr);
void zpool_slot_take_at(zf_pool *pool, struct size_class *c, struct zspage *zs, uint32_t slot,
			uint64_t hdr);
void zpool_slot_put(struct size_class *c, struct zspage *zs, uint32_t slot, uint64_t hdr);
void zpool_regroup(struct size_class *c, struct zspage *zs);

/*
 * zpool_compact.c: packs class c, without spilling it (free() calls it past its
 * threshold); caller holds c->lock. Returns the pages given back.
 */
uint64_t zpool_compact_class(zf_pool *pool, struct size_class *c);

/* zpool_stats.c: checks every invariant of class c; caller holds c->lock. 0 or -EFAULT. */
int zpool_check_class(zf_pool *pool, struct size_class *c);

/*
 * With ZF_DEBUG_FULL, every compaction ends with a check of its class, and allocs and frees
 * as often as keeps the check's cost per operation flat: after each while the class is
 * small, then once in objs_used / 16. A check walks every slot: made after each alloc and
 * free, it took two thirds of the dev preset's region tests with 4 KiB units. A broken
 * invariant stays broken, and is still found, that many operations of its class later.
 */
#ifdef ZF_DEBUG_FULL
#define ZPOOL_DEBUG_CHECK(pool, c)                                                                 \
	do {                                                                                       \
		(c)->ops_unchecked = 0;                                                            \
		if (zpool_check_class(pool, c))                                                    \
			abort();                                                                   \
	} while (0)
#define ZPOOL_DEBUG_CHECK_OP(pool, c)                                                              \
	do {                                                                                       \
		if (++(c)->ops_unchecked > (c)->objs_used / 16)                                    \
			ZPOOL_DEBUG_CHECK(pool, c);                                                \
	} while (0)
#else
#define ZPOOL_DEBUG_CHECK(pool, c) ((void)0)
#define ZPOOL_DEBUG_CHECK_OP(pool, c) ((void)0)
#endif

/* -------------------------------------------------------------------------------- */
/* Classes                                                                          */
/* -------------------------------------------------------------------------------- */

/* The index of the smallest class whose capacity holds size. */
static inline unsigned class_for(zf_pool *pool, size_t size)
{
	unsigned lo = 0, hi = pool->nr_classes - 1;

	while (lo < hi) {
		const unsigned mid = (lo + hi) / 2;

		if (pool->defs[mid].capacity >= size)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* Class i, or NULL when the pool has never used it. */
static inline struct size_class *class_at(zf_pool *pool, unsigned i)
{
	return atomic_load_explicit(&pool->classes[i], memory_order_acquire);
}

/* The class after c (NULL: the first) that the pool has made, or NULL. */
static inline struct size_class *class_next(zf_pool *pool, const struct size_class *c)
{
	for (unsigned i = c ? c->index + 1 : 0; i < pool->nr_classes; i++) {
		struct size_class *next = class_at(pool, i);

		if (next)
			return next;
	}
	return NULL;
}

/* Class i, made on first use (NULL: out of memory). */
static inline struct size_class *class_get(zf_pool *pool, unsigned i)
{
	struct size_class *c = class_at(pool, i);

	return likely(c) ? c : zpool_class_make(pool, i);
}

/* -------------------------------------------------------------------------------- */
/* Handle table entries                                                             */
/* -------------------------------------------------------------------------------- */

static inline _Atomic uint64_t *entry_of(zf_pool *pool, uint64_t handle)
{
	_Atomic uint64_t *chunk;

	if (unlikely(handle == 0 || handle >= (uint64_t)ZPOOL_HANDLE_CHUNKS * ZPOOL_HANDLE_CHUNK))
		return NULL;
	chunk = atomic_load_explicit(&pool->handle_chunks[handle >> ZPOOL_HANDLE_CHUNK_SHIFT],
				     memory_order_acquire);
	return chunk ? &chunk[handle & (ZPOOL_HANDLE_CHUNK - 1)] : NULL;
}

/* The table entry of handle (acquire: what it points at was set before it), or 0. */
static inline uint64_t entry_load(zf_pool *pool, uint64_t handle)
{
	_Atomic uint64_t *ep = entry_of(pool, handle);

	return ep ? atomic_load_explicit(ep, memory_order_acquire) : 0;
}

static inline uint64_t entry_make(unsigned class_idx, uint32_t zspage_id, uint32_t slot)
{
	return (uint64_t)(class_idx + 1) << ZPOOL_ENTRY_CLASS_SHIFT |
	       (uint64_t)(zspage_id + 1) << ZPOOL_ENTRY_ZSPAGE_SHIFT | slot;
}

static inline int entry_allocated(uint64_t e)
{
	return e != 0 && !(e & ZPOOL_ENTRY_FREE);
}

static inline unsigned entry_class(uint64_t e)
{
	return (unsigned)((e & ~ZPOOL_ENTRY_FREE) >> ZPOOL_ENTRY_CLASS_SHIFT) - 1;
}

static inline uint32_t entry_zspage(uint64_t e)
{
	return (uint32_t)(e >> ZPOOL_ENTRY_ZSPAGE_SHIFT) - 1;
}

static inline uint32_t entry_slot(uint64_t e)
{
	return (uint32_t)(e & ZPOOL_ENTRY_SLOT_MASK);
}

/*
 * The two chunk pointer tables are calloc'd whole (a few hundred KiB, zero pages until
 * written); meta_bytes counts a page of one when its first pointer is set.
 */
static inline size_t table_page_cost(size_t chunk_index)
{
	return chunk_index * sizeof(void *) % ZPOOL_PAGE == 0 ? ZPOOL_PAGE : 0;
}

/* -------------------------------------------------------------------------------- */
/* zspages                                                                          */
/* -------------------------------------------------------------------------------- */

static inline struct zspage *zspage_by_id(zf_pool *pool, uint32_t id)
{
	struct zspage *chunk = atomic_load_explicit(&pool->zspage_chunks[id / ZPOOL_ZSPAGE_CHUNK],
						    memory_order_acquire);

	return &chunk[id % ZPOOL_ZSPAGE_CHUNK];
}

static inline size_t bitmap_words(uint32_t bits)
{
	return (bits + 63) / 64;
}

static inline void update_max(atomic_uint_fast64_t *max, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(max, memory_order_relaxed);

	while (cur < v && !atomic_compare_exchange_weak(max, &cur, v))
		;
}

/* -------------------------------------------------------------------------------- */
/* Fullness groups and slots (caller holds the class lock)                          */
/* -------------------------------------------------------------------------------- */

static inline uint8_t group_of(const struct size_class *c, uint32_t inuse)
{
	if (inuse == c->objs)
		return ZPOOL_GROUP_FULL;
	return (uint8_t)(inuse ? (inuse * 10 + c->objs - 1) / c->objs : 0);
}

/* The first zspage of group g, or NULL. */
static inline struct zspage *group_first(const struct size_class *c, int g)
{
	const struct list_node *first = list_first(&c->groups[g]);

	return first ? list_entry(first, struct zspage, node) : NULL;
}

/* The zspage after zs in group g, or NULL. */
static inline struct zspage *group_next(const struct size_class *c, int g, const struct zspage *zs)
{
	const struct list_node *next = zs->node.next;

	return next == &c->groups[g] ? NULL : list_entry(next, struct zspage, node);
}

static inline void group_remove(struct zspage *zs)
{
	list_del(&zs->node);
}

/* Puts zs first in the group its use calls for. */
static inline void group_insert(struct size_class *c, struct zspage *zs)
{
	zs->group = group_of(c, zs->inuse);
	list_add_head(&c->groups[zs->group], &zs->node);
}

static inline uint8_t *slot_ptr(const struct size_class *c, const struct zspage *zs, uint32_t slot)
{
	return zs->base + (size_t)slot * c->size;
}

static inline uint64_t hdr_load(const struct size_class *c, const struct zspage *zs, uint32_t slot)
{
	uint64_t h;

	if (c->huge)
		return zs->huge_hdr;
	memcpy(&h, slot_ptr(c, zs, slot), sizeof(h));
	return h;
}

static inline void hdr_store(const struct size_class *c, struct zspage *zs, uint32_t slot,
			     uint64_t h)
{
	if (c->huge)
		zs->huge_hdr = h;
	else
		memcpy(slot_ptr(c, zs, slot), &h, sizeof(h));
}

static inline int slot_is_free(const struct zspage *zs, uint32_t slot)
{
	return (zs->free_bits[slot / 64] >> (slot % 64)) & 1;
}

/* The pages [first, last] that an object of size bytes in slot covers. */
static inline void slot_pages(const struct size_class *c, uint32_t slot, size_t size,
			      uint32_t *first, uint32_t *last)
{
	const size_t off = (size_t)slot * c->size;
	const size_t len = size + (c->huge ? 0 : ZPOOL_HDR);

	*first = (uint32_t)(off / ZPOOL_PAGE);
	*last = (uint32_t)((off + len - 1) / ZPOOL_PAGE);
}

/*
 * The fullest zspage with a free slot, or NULL. Every alloc runs this over mostly empty
 * groups, so it walks the list nodes: an empty group costs a load and a compare, as with
 * the NULL-ended lists before list.h (group_first() also tests for NULL).
 */
static inline struct zspage *fullest_partial(const struct size_class *c,
					     const struct zspage *except)
{
	for (int g = ZPOOL_GROUP_FULL - 1; g >= 1; g--) {
		const struct list_node *head = &c->groups[g];

		for (const struct list_node *n = head->next; n != head; n = n->next) {
			struct zspage *zs = list_entry(n, struct zspage, node);

			if (zs != except)
				return zs;
		}
	}
	return NULL;
}

#endif /* ZF_ZPOOL_INTERNAL_H */
