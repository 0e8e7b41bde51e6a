/*
 * zpool_compact.c - compaction: a class's objects move into its fullest zspages, so that
 * whole zspages and single pages can be given back.
 *
 * As zsmalloc's __zs_compact: within a class, objects move from the emptiest zspage into
 * the fullest partly used one until the class cannot free a zspage more; emptied zspages
 * are freed. It runs when asked (zf_pool_compact) and from free(), when the pages it would
 * give back pass compact_threshold_pct of the class's pages. An explicit compaction then
 * spills each class's last partly used page into the next classes (see "Spilling" below),
 * so an object's class can change, under both class locks.
 */
#include <string.h>

#include "zpool_internal.h"

/* The emptiest zspage nobody pins, taken for moving (pins == -1), or NULL. */
static struct zspage *take_source(struct size_class *c)
{
	for (int g = 1; g < ZPOOL_GROUP_FULL; g++) {
		struct zspage *best = NULL;

		/* A group spans a tenth of the slots: find its emptiest, not its first. */
		for (struct zspage *zs = group_first(c, g); zs; zs = group_next(c, g, zs)) {
			if ((!best || zs->inuse < best->inuse) && atomic_load(&zs->pins) == 0)
				best = zs;
		}
		if (best) {
			int idle = 0;

			if (atomic_compare_exchange_strong(&best->pins, &idle, -1))
				return best;
			/* Pinned since: take the first idle one of the group instead. */
			for (struct zspage *zs = group_first(c, g); zs; zs = group_next(c, g, zs)) {
				idle = 0;
				if (atomic_compare_exchange_strong(&zs->pins, &idle, -1))
					return zs;
			}
		}
	}
	return NULL;
}

/* Moves the object in slot s of src to the lowest free slot of dst (which may be src). */
static void move_object(zf_pool *pool, struct size_class *c, struct zspage *src, uint32_t s,
			struct zspage *dst)
{
	const uint64_t h = hdr_load(c, src, s);
	const uint32_t d = zpool_slot_take(pool, c, dst, h);

	memcpy(slot_ptr(c, dst, d) + ZPOOL_HDR, slot_ptr(c, src, s) + ZPOOL_HDR,
	       h >> ZPOOL_HDR_SIZE_SHIFT);
	atomic_store_explicit(entry_of(pool, h & ZPOOL_HDR_HANDLE_MASK),
			      entry_make(c->index, dst->id, d), memory_order_release);
	zpool_slot_put(c, src, s, h);
}

/* The highest slot in use, or -1. */
static int64_t highest_used(const struct size_class *c, const struct zspage *zs)
{
	for (size_t w = bitmap_words(c->objs); w-- > 0;) {
		uint64_t used = ~zs->free_bits[w];

		if (w == c->objs / 64 && c->objs % 64)
			used &= (1ull << (c->objs % 64)) - 1;
		if (used)
			return (int64_t)(w * 64 + 63 - (size_t)__builtin_clzll(used));
	}
	return -1;
}

/* The lowest free slot, or c->objs. */
static uint32_t lowest_free(const struct size_class *c, const struct zspage *zs)
{
	for (size_t w = 0; w < bitmap_words(c->objs); w++) {
		if (zs->free_bits[w])
			return (uint32_t)(w * 64 + (size_t)__builtin_ctzll(zs->free_bits[w]));
	}
	return c->objs;
}

/* Whether an object of size bytes in slot s of zs would lie on pages in memory only. */
static int slot_in_memory(const struct size_class *c, const struct zspage *zs, uint32_t s,
			  size_t size)
{
	uint32_t first, last, p;

	slot_pages(c, s, size, &first, &last);
	for (p = first; p <= last && zs->page_resident[p]; p++)
		;
	return p > last;
}

/* The partly used zspage after zs (NULL: the first) fullest first, src left out. */
static const struct zspage *next_partial(const struct size_class *c, const struct zspage *zs,
					 int *g, const struct zspage *src)
{
	zs = zs ? group_next(c, *g, zs) : NULL;
	for (;;) {
		while (zs && zs == src)
			zs = group_next(c, *g, zs);
		if (zs)
			return zs;
		if (--*g < 1)
			return NULL;
		zs = group_first(c, *g);
	}
}

/*
 * Whether drain_source()'s moves would empty src, for no more pages taken again than src
 * gives back: each object of src, the highest first, into the lowest free slot of the
 * fullest partly used zspage (which stays the fullest, at the head of its group, until
 * it is full), while that one holds at least as many objects as src has left.
 */
static int drain_pays(const struct size_class *c, const struct zspage *src)
{
	const struct zspage *dst = NULL;
	uint8_t fresh[ZPOOL_MAX_ZSPAGE_PAGES];
	uint32_t left = src->inuse, placed = 0, d = 0, taken = 0;
	int g = ZPOOL_GROUP_FULL;

	for (uint32_t s = c->objs; s-- > 0 && left;) {
		uint32_t first, last;

		if (slot_is_free(src, s))
			continue;
		while (!dst || dst->inuse + placed == c->objs) {
			dst = next_partial(c, dst, &g, src);
			placed = d = 0;
			if (!dst)
				return 0;
			memset(fresh, 0, dst->pages);
		}
		if (dst->inuse + placed < left)
			return 0;
		while (!slot_is_free(dst, d))
			d++;
		slot_pages(c, d++, hdr_load(c, src, s) >> ZPOOL_HDR_SIZE_SHIFT, &first, &last);
		for (uint32_t p = first; p <= last; p++) {
			taken += !dst->page_resident[p] && !fresh[p];
			fresh[p] = 1;
		}
		placed++;
		left--;
	}
	return left == 0 && taken <= src->resident;
}

/*
 * Moves src's objects, the highest slot first, into fuller zspages of the class while
 * there are any; then slides what is left of them down within src. Either way the free
 * slots end up together at the end, where whole pages can be given back.
 *
 * A move onto a page that was given back takes it again, which pays when src is emptied
 * and its pages, as many or more, go. Left partly drained (no fuller zspage left, or
 * pinned ones kept from being sources), a compaction that took pages so could end
 * holding more than it began with (the model test saw pages_compacted fall by one, with
 * pins). So unless the moves will empty src and pay (drain_pays()), objects go only into
 * slots on pages in memory.
 */
static void drain_source(zf_pool *pool, struct size_class *c, struct zspage *src)
{
	const int pays = drain_pays(c, src);
	int64_t s;

	while (src->inuse && (s = highest_used(c, src)) >= 0) {
		struct zspage *dst = fullest_partial(c, src);
		const size_t size = hdr_load(c, src, (uint32_t)s) >> ZPOOL_HDR_SIZE_SHIFT;
		uint32_t to;

		if (dst && dst->inuse >= src->inuse &&
		    (pays || slot_in_memory(c, dst, lowest_free(c, dst), size))) {
			move_object(pool, c, src, (uint32_t)s, dst);
			zpool_regroup(c, dst);
		} else if ((to = lowest_free(c, src)) < (uint32_t)s &&
			   slot_in_memory(c, src, to, size)) {
			move_object(pool, c, src, (uint32_t)s, src);
		} else {
			break;
		}
	}
}

/*
 * Packs the class: empties its sparsest zspages into its fullest ones (zsmalloc's
 * __zs_compact), freeing the emptied zspages, and leaves the free slots of the last
 * partly used zspage at its end; then gives back every page no object is on. Zspages
 * someone pins are left as they are. Caller holds c->lock. Returns the pages given back.
 */
uint64_t zpool_compact_class(zf_pool *pool, struct size_class *c)
{
	const uint64_t before = c->resident_pages;

	c->compactions++;
	while (!c->huge) {
		struct zspage *src = take_source(c);
		int last;

		if (!src)
			break;
		group_remove(src);
		last = fullest_partial(c, src) == NULL;
		drain_source(pool, c, src);
		atomic_store_explicit(&src->pins, 0, memory_order_release);
		if (src->inuse == 0) {
			zpool_zspage_free(pool, c, src, 0);
		} else {
			group_insert(c, src);
			/* Not emptied: there was no fuller zspage left to move into. */
			break;
		}
		if (last)
			break;
	}
	/*
	 * No pin needed to trim: a page with no object on it is read by nobody (a reader
	 * checks its handle's entry before it touches the object).
	 */
	for (int g = 1; g < ZPOOL_GROUP_FULL; g++) {
		for (struct zspage *zs = group_first(c, g); zs; zs = group_next(c, g, zs))
			zpool_zspage_trim(pool, c, zs);
	}
	c->pages_compacted += before - c->resident_pages;
	ZPOOL_DEBUG_CHECK(pool, c);
	return before - c->resident_pages;
}

/* -------------------------------------------------------------------------------- */
/* Spilling: the last page of a class into the free slots of the next classes       */
/* -------------------------------------------------------------------------------- */

/*
 * Compaction leaves each class with at most one partly used page, and a pool uses a few
 * hundred classes: half a page each, about 1% of a pool of 4 KiB units. Spilling takes
 * the objects on a class's last page and moves them up into free slots of the next few
 * classes that lie on pages already in memory, when every one of them finds such a slot;
 * the page is then given back. Each moved object keeps the larger slot, which costs the
 * difference from the slot of its own class; a page is spilled only when that costs less
 * than SPILL_MAX_COST in all. Classes are spilled in ascending order, so the free tails of
 * the larger classes fill up with the smaller classes' last objects.
 *
 * A handle's class therefore can change, but only with both class locks held (taken in
 * ascending order, the only place that holds two), and only for objects of a zspage taken
 * for moving, as compaction takes it.
 */
#define SPILL_REACH 8u /* spilling moves objects at most this many classes up */
#define SPILL_MAX_COST (ZPOOL_PAGE / 4)
#define SPILL_MAX_OBJS (ZPOOL_PAGE / ZPOOL_SMALL_STEP + 1)

struct spill_move {
	uint32_t slot; /* in the source zspage */
	struct size_class *to;
	struct zspage *zs;
	uint32_t to_slot;
};

/* Whether slot s of zs is free and not yet claimed by an earlier move of the plan. */
static int spill_slot_open(const struct spill_move *plan, unsigned n, const struct zspage *zs,
			   uint32_t s)
{
	if (!slot_is_free(zs, s))
		return 0;
	for (unsigned i = 0; i < n; i++) {
		if (plan[i].zs == zs && plan[i].to_slot == s)
			return 0;
	}
	return 1;
}

/* Finds a free slot for an object of size bytes in class d, on pages in memory. */
static int spill_find(const struct size_class *d, size_t size, struct spill_move *plan, unsigned n)
{
	for (int g = ZPOOL_GROUP_FULL - 1; g >= 1; g--) {
		for (struct zspage *zs = group_first(d, g); zs; zs = group_next(d, g, zs)) {
			for (uint32_t s = 0; s < d->objs; s++) {
				if (!spill_slot_open(plan, n, zs, s))
					continue;
				if (slot_in_memory(d, zs, s, size)) {
					plan[n].to = (struct size_class *)d;
					plan[n].zs = zs;
					plan[n].to_slot = s;
					return 1;
				}
			}
		}
	}
	return 0;
}

/*
 * Plans the moves that empty the last page with an object on it in src (class c; the
 * classes above it that exist are in up[0..nr_up), locked). Returns how many, or 0 if
 * the page cannot be emptied within SPILL_MAX_COST.
 */
static unsigned spill_plan(zf_pool *pool, struct size_class *c, struct size_class *const *up,
			   unsigned nr_up, struct zspage *src, struct spill_move *plan)
{
	const int64_t hi = highest_used(c, src);
	uint32_t first, last, page, cost = 0;
	unsigned n = 0;

	if (hi < 0)
		return 0;
	slot_pages(c, (uint32_t)hi, hdr_load(c, src, (uint32_t)hi) >> ZPOOL_HDR_SIZE_SHIFT, &first,
		   &page);
	for (int64_t s = hi; s >= 0; s--) {
		uint64_t h;
		unsigned u;

		if (slot_is_free(src, (uint32_t)s))
			continue;
		h = hdr_load(c, src, (uint32_t)s);
		slot_pages(c, (uint32_t)s, h >> ZPOOL_HDR_SIZE_SHIFT, &first, &last);
		if (last < page)
			break; /* slots below end on earlier pages */
		if (n == SPILL_MAX_OBJS)
			return 0;
		plan[n].slot = (uint32_t)s;
		for (u = 0; u < nr_up; u++) {
			if (!up[u]->huge && spill_find(up[u], h >> ZPOOL_HDR_SIZE_SHIFT, plan, n))
				break;
		}
		if (u == nr_up)
			return 0;
		/* Against the object's own class: an object spilled before may move again. */
		cost += up[u]->size - pool->defs[class_for(pool, h >> ZPOOL_HDR_SIZE_SHIFT)].size;
		if (cost > SPILL_MAX_COST)
			return 0;
		n++;
	}
	return n;
}

/* Moves the object in slot s of src (class c) to the planned slot of class m->to. */
static void spill_move(zf_pool *pool, struct size_class *c, struct zspage *src,
		       const struct spill_move *m)
{
	struct size_class *d = m->to;
	const uint64_t h = hdr_load(c, src, m->slot);
	const size_t size = h >> ZPOOL_HDR_SIZE_SHIFT;

	/* Its pages are in memory (spill_find() saw to it): none is taken again. */
	zpool_slot_take_at(pool, d, m->zs, m->to_slot, h);
	memcpy(slot_ptr(d, m->zs, m->to_slot) + ZPOOL_HDR, slot_ptr(c, src, m->slot) + ZPOOL_HDR,
	       size);
	atomic_store_explicit(entry_of(pool, h & ZPOOL_HDR_HANDLE_MASK),
			      entry_make(d->index, m->zs->id, m->to_slot), memory_order_release);
	zpool_slot_put(c, src, m->slot, h);
	zpool_regroup(d, m->zs);
	c->objs_used--;
	c->compr_bytes -= size;
	d->objs_used++;
	d->compr_bytes += size;
}

/* Spills class c's last pages while it pays. Returns the pages given back. */
static uint64_t spill_class(zf_pool *pool, struct size_class *c)
{
	struct size_class *up[SPILL_REACH];
	struct spill_move plan[SPILL_MAX_OBJS];
	unsigned nr_up = 0;
	struct zspage *src = NULL;
	uint64_t given = 0;
	int idle = 0;

	pthread_mutex_lock(&c->lock);
	if (c->huge)
		goto out;
	/* Only a class compaction left with one partly used zspage, nobody reading it. */
	for (int g = 1; g < ZPOOL_GROUP_FULL; g++) {
		for (struct zspage *zs = group_first(c, g); zs; zs = group_next(c, g, zs)) {
			if (src)
				goto out;
			src = zs;
		}
	}
	if (!src || !atomic_compare_exchange_strong(&src->pins, &idle, -1))
		goto out;
	/* Locks in ascending class order, as everywhere. */
	for (unsigned i = c->index + 1; i <= c->index + SPILL_REACH && i < pool->nr_classes; i++) {
		if ((up[nr_up] = class_at(pool, i)))
			pthread_mutex_lock(&up[nr_up++]->lock);
	}
	for (;;) {
		const unsigned n = spill_plan(pool, c, up, nr_up, src, plan);
		uint32_t trimmed;

		if (!n)
			break;
		for (unsigned i = 0; i < n; i++)
			spill_move(pool, c, src, &plan[i]);
		trimmed = zpool_zspage_trim(pool, c, src);
		given += trimmed;
		if (!src->inuse || !trimmed)
			break;
	}
	for (unsigned u = 0; u < nr_up; u++) {
		ZPOOL_DEBUG_CHECK(pool, up[u]);
		pthread_mutex_unlock(&up[u]->lock);
	}
	atomic_store_explicit(&src->pins, 0, memory_order_release);
	group_remove(src);
	if (src->inuse) {
		group_insert(c, src);
	} else {
		given += src->resident;
		zpool_zspage_free(pool, c, src, 0);
	}
	c->pages_compacted += given;
	ZPOOL_DEBUG_CHECK(pool, c);
out:
	pthread_mutex_unlock(&c->lock);
	return given;
}

long zf_pool_compact(zf_pool *pool)
{
	size_t freed = 0;

	RETURN_IF(!pool, -EINVAL);
	for (struct size_class *c = class_next(pool, NULL); c; c = class_next(pool, c)) {
		pthread_mutex_lock(&c->lock);
		if (c->zspages)
			freed += zpool_compact_class(pool, c);
		pthread_mutex_unlock(&c->lock);
	}
	for (struct size_class *c = class_next(pool, NULL); c; c = class_next(pool, c))
		freed += spill_class(pool, c);
	return (long)(freed + zpool_warm_release_all(pool));
}
