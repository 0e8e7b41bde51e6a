/*
 * zpool_internal.h - zpool's own: the layout of a handle table entry and of an object
 * header, the size class and zspage structures, for zpool's files only. The rest of the
 * library uses zpool.h. See zpool.c for the design.
 */
#ifndef ZF_ZPOOL_INTERNAL_H
#define ZF_ZPOOL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

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
const struct zpool_class_def *zpool_class_defs(unsigned *count);

/* Checks every invariant of one class; caller holds class->lock. Returns 0 or -EFAULT. */
int zpool_check_class(zf_pool *pool, struct size_class *c);

#endif /* ZF_ZPOOL_INTERNAL_H */
