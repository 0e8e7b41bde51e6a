/*
 * zpool_class.c - the size classes: the table of slot sizes and zspage lengths, built
 * once for every pool, and a pool's class structs, made on first use.
 *
 * A class is a slot size: 16-byte steps up to 4 KiB, then 128 steps per
 * octave up to 2 MiB (the zsmalloc multi-page RFC's unit/256 granularity), so the
 * rounding loss stays under 1% at any size. Each class packs its slots back to back
 * into zspages of 1..N pages, N chosen to waste the least tail; classes that end up with
 * the same pages and slots per zspage are merged into the largest (zsmalloc does the
 * same), which gives fewer, fuller classes. A slot starts with an 8-byte header (the
 * handle and the object's size: compaction needs the handle to find the table entry,
 * free needs the size for exact stats), except in "huge" classes, whose zspage holds
 * one object: a unit that did not compress, stored raw, pays no header and no rounding.
 *
 * Class structs are made on first use: a pool of 4 KiB units touches a few hundred of the
 * 1181 classes, and the others cost a pointer each.
 */
#include <stdlib.h>

#include "zpool_internal.h"

static struct zpool_class_def class_defs[ZPOOL_PAGE / ZPOOL_SMALL_STEP + 9 * ZPOOL_OCTAVE_CLASSES];
static unsigned nr_class_defs;
static pthread_once_t class_defs_once = PTHREAD_ONCE_INIT;

/* The zspage length that wastes the least of its tail, the shorter on a tie. */
static uint32_t best_pages(uint32_t size, uint32_t min_pages, uint32_t max_pages)
{
	uint32_t best = min_pages;
	double best_waste = 2;

	for (uint32_t k = min_pages; k <= max_pages; k++) {
		const uint64_t bytes = (uint64_t)k * ZPOOL_PAGE;
		const double waste = (double)(bytes % size) / (double)bytes;

		if (waste < best_waste - 1e-9) {
			best_waste = waste;
			best = k;
		}
	}
	return best;
}

static void build_class_defs(void)
{
	struct zpool_class_def cand[ZF_ARRAY_SIZE(class_defs)];
	unsigned n = 0;

	for (uint32_t s = ZPOOL_SMALL_STEP; s <= ZPOOL_PAGE; s += ZPOOL_SMALL_STEP)
		cand[n++].size = s;
	for (uint32_t lo = ZPOOL_PAGE; lo < ZF_UNIT_MAX; lo *= 2) {
		const uint32_t step = 2 * lo / (2 * ZPOOL_OCTAVE_CLASSES);

		for (uint32_t s = lo + step; s <= 2 * lo; s += step)
			cand[n++].size = s;
	}
	for (unsigned i = 0; i < n; i++) {
		struct zpool_class_def *d = &cand[i];
		const uint32_t min_pages = (d->size + ZPOOL_PAGE - 1) / ZPOOL_PAGE;
		const uint32_t max_pages = d->size <= ZPOOL_PAGE
						   ? ZPOOL_SMALL_MAX_PAGES
						   : ZF_MIN(ZPOOL_MAX_ZSPAGE_PAGES, 8 * min_pages);

		d->pages = best_pages(d->size, min_pages, ZF_MAX(min_pages, max_pages));
		d->objs = d->pages * ZPOOL_PAGE / d->size;
		d->huge = d->objs == 1;
		/* Capacities grow with the class index: class_for() searches them. */
		d->capacity = d->huge ? d->size : d->size - ZPOOL_HDR;
	}
	/* Merge runs with the same geometry into their largest member. */
	for (unsigned i = 0; i < n; i++) {
		if (i + 1 < n && cand[i + 1].pages == cand[i].pages &&
		    cand[i + 1].objs == cand[i].objs)
			continue;
		class_defs[nr_class_defs++] = cand[i];
	}
}

const struct zpool_class_def *zpool_class_defs(unsigned *count)
{
	pthread_once(&class_defs_once, build_class_defs);
	*count = nr_class_defs;
	return class_defs;
}

unsigned zf_pool_class_count(void)
{
	unsigned n;

	zpool_class_defs(&n);
	return n;
}

/* Class i of pool, made now if it has never been used; NULL when out of memory. */
struct size_class *zpool_class_make(zf_pool *pool, unsigned i)
{
	struct size_class *c;

	pthread_mutex_lock(&pool->grow_lock);
	c = atomic_load_explicit(&pool->classes[i], memory_order_relaxed);
	if (!c && (c = calloc(1, sizeof(*c)))) {
		pthread_mutex_init(&c->lock, NULL);
		c->size = pool->defs[i].size;
		c->capacity = pool->defs[i].capacity;
		c->pages = pool->defs[i].pages;
		c->objs = pool->defs[i].objs;
		c->huge = pool->defs[i].huge;
		c->index = i;
		for (int g = 0; g < ZPOOL_GROUPS; g++)
			list_init(&c->groups[g]);
		atomic_fetch_add(&pool->meta_bytes, sizeof(*c));
		atomic_store_explicit(&pool->classes[i], c, memory_order_release);
	}
	pthread_mutex_unlock(&pool->grow_lock);
	return c;
}
