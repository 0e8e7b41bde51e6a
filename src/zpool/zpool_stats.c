/*
 * zpool_stats.c - what the pool tells about itself: its counters as stats, summed over the
 * classes, and the check of every invariant of a class, which ZF_DEBUG_FULL builds run
 * after every operation and tests call.
 */
#include <string.h>

#include "../common/options.h"
#include "zpool_internal.h"

/* Pages compaction could give back now: the free slots, in whole zspages. */
static uint64_t class_freeable(const struct size_class *c)
{
	const uint64_t free_slots = c->zspages * c->objs - c->objs_used;

	return c->huge ? 0 : free_slots / c->objs * c->pages;
}

static void class_stats(const struct size_class *c, zf_pool_class_stats *s)
{
	s->class_size = c->size;
	s->max_object = c->capacity;
	s->pages_per_zspage = c->pages;
	s->objs_per_zspage = c->objs;
	s->huge = c->huge;
	s->objs_allocated = c->zspages * c->objs;
	s->objs_used = c->objs_used;
	s->pages_used = c->resident_pages;
	s->freeable = class_freeable(c);
}

int zf_pool_class_stats_get(zf_pool *pool, unsigned index, zf_pool_class_stats *out, size_t size)
{
	zf_pool_class_stats st, *const s = &st;
	struct size_class *c;

	RETURN_IF(!pool || index >= pool->nr_classes || !out, -EINVAL);
	c = class_at(pool, index);
	if (!c) {
		const struct zpool_class_def *d = &pool->defs[index];
		const struct size_class unused = { .size = d->size,
						   .capacity = d->capacity,
						   .pages = d->pages,
						   .objs = d->objs,
						   .huge = d->huge };

		class_stats(&unused, s);
	} else {
		pthread_mutex_lock(&c->lock);
		class_stats(c, s);
		pthread_mutex_unlock(&c->lock);
	}
	return struct_copy_out(out, size, &st, sizeof(st));
}

uint64_t zf_pool_mem_used(zf_pool *pool)
{
	return atomic_load_explicit(&pool->pages_used, memory_order_relaxed) * ZPOOL_PAGE;
}

int zf_pool_get_stats(zf_pool *pool, zf_pool_stats *out, size_t size)
{
	zf_pool_stats st = { 0 }, *const s = &st;

	RETURN_IF(!pool, -EINVAL);
	for (struct size_class *c = class_next(pool, NULL); c; c = class_next(pool, c)) {
		pthread_mutex_lock(&c->lock);
		s->objects += c->objs_used;
		s->compr_data_size += c->compr_bytes;
		s->pages_used += c->resident_pages;
		s->pages_compacted += c->pages_compacted;
		s->compactions += c->compactions;
		pthread_mutex_unlock(&c->lock);
	}
	s->warm_pages = atomic_load(&pool->warm_pages);
	s->pages_used += s->warm_pages;
	s->pages_compacted += atomic_load(&pool->warm_released);
	s->mem_used_total = s->pages_used * ZPOOL_PAGE;
	/*
	 * The classes are summed one after another, so with other threads allocating the
	 * sum can pass the pool-wide maximum: raise the maximum to it, which keeps
	 * max >= total in every snapshot and max never falling between snapshots.
	 */
	update_max(&pool->mem_used_max, s->mem_used_total);
	s->mem_used_max = atomic_load(&pool->mem_used_max);
	s->meta_bytes = atomic_load(&pool->meta_bytes);
	return struct_copy_out(out, size, &st, sizeof(st));
}

/* -------------------------------------------------------------------------------- */
/* Checks                                                                           */
/* -------------------------------------------------------------------------------- */

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (unlikely(!(cond))) {                                                           \
			common_log(ZF_LOG_ERROR, "zpool: class %u: check failed: %s", c->index,    \
				   #cond);                                                         \
			return -EFAULT;                                                            \
		}                                                                                  \
	} while (0)

int zpool_check_class(zf_pool *pool, struct size_class *c)
{
	uint64_t used = 0, bytes = 0, zspages = 0, resident = 0;
	uint16_t refs[ZPOOL_MAX_ZSPAGE_PAGES];

	CHECK(list_empty(&c->groups[0]));
	for (int g = 1; g < ZPOOL_GROUPS; g++) {
		for (struct zspage *zs = group_first(c, g); zs; zs = group_next(c, g, zs)) {
			uint32_t live = 0, pages_resident = 0;

			CHECK(zs->group == g && group_of(c, zs->inuse) == g);
			CHECK(zs->class_idx == c->index && zs->pages == c->pages);
			CHECK(zs->node.next->prev == &zs->node && zs->node.prev->next == &zs->node);
			memset(refs, 0, sizeof(refs));
			for (uint32_t s = 0; s < c->objs; s++) {
				uint64_t h;
				uint32_t first, last;
				_Atomic uint64_t *ep;

				if (slot_is_free(zs, s))
					continue;
				h = hdr_load(c, zs, s);
				ep = entry_of(pool, h & ZPOOL_HDR_HANDLE_MASK);
				CHECK(ep && atomic_load(ep) == entry_make(c->index, zs->id, s));
				CHECK((h >> ZPOOL_HDR_SIZE_SHIFT) >= 1 &&
				      (h >> ZPOOL_HDR_SIZE_SHIFT) <= c->capacity);
				slot_pages(c, s, h >> ZPOOL_HDR_SIZE_SHIFT, &first, &last);
				for (uint32_t p = first; p <= last; p++)
					refs[p]++;
				bytes += h >> ZPOOL_HDR_SIZE_SHIFT;
				live++;
			}
			/* No bit set past the last slot. */
			CHECK(c->objs % 64 == 0 ||
			      !(zs->free_bits[c->objs / 64] >> (c->objs % 64)));
			for (uint32_t p = 0; p < zs->pages; p++) {
				CHECK(refs[p] == zs->page_refs[p]);
				CHECK(!refs[p] || zs->page_resident[p]);
				pages_resident += zs->page_resident[p];
			}
			CHECK(live == zs->inuse && pages_resident == zs->resident);
			used += live;
			resident += pages_resident;
			zspages++;
		}
	}
	CHECK(used == c->objs_used && bytes == c->compr_bytes && zspages == c->zspages);
	CHECK(resident == c->resident_pages);
	return 0;
}

#ifdef ZF_TEST_HOOKS
int zpool_check(zf_pool *pool)
{
	int ret = 0;

	for (struct size_class *c = class_next(pool, NULL); c && !ret; c = class_next(pool, c)) {
		pthread_mutex_lock(&c->lock);
		ret = zpool_check_class(pool, c);
		pthread_mutex_unlock(&c->lock);
	}
	return ret;
}

uint64_t zpool_pins(zf_pool *pool)
{
	uint64_t pins = 0;

	for (struct size_class *c = class_next(pool, NULL); c; c = class_next(pool, c)) {
		pthread_mutex_lock(&c->lock);
		for (int g = 1; g < ZPOOL_GROUPS; g++) {
			for (struct zspage *zs = group_first(c, g); zs; zs = group_next(c, g, zs))
				pins += (uint64_t)atomic_load(&zs->pins);
		}
		pthread_mutex_unlock(&c->lock);
	}
	return pins;
}
#endif
