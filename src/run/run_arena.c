/*
 * run_arena.c - the arena: the runtime's region, as address space handed out to mappings.
 *
 * A region is one fixed range of addresses, made once (zf_region_create()), and what the
 * program unmaps of it leaves it for good. So the runtime never unmaps arena memory: a
 * mapping the program takes is a range of the region's addresses, and one it gives back
 * is dropped (MADV_DONTNEED: the region drops what it kept of it) and its addresses go
 * back here for the next mapping. A first-fit list of free ranges, kept sorted and
 * merged; mappings start on the store's unit (at least 64 KiB), so that two mappings
 * share no unit the store compresses, and larger ones on larger powers of two
 * (run_arena_take()). Not on the frame: mappings smaller than 2 MiB share frames, as
 * huge pages span neighbouring mappings in the kernel (padded to frames, python3's 1 MiB
 * arenas took twice their memory).
 *
 * The list is the C library's memory (common_internal), never the arena's own.
 */
#include <stdlib.h>
#include <string.h>

#include "run_internal.h"

#define RUN_FREE_MIN 64
#define RUN_ALIGN_MAX ((uintptr_t)32 << 20)

static uintptr_t round_up(uintptr_t x, uintptr_t to)
{
	return (x + to - 1) & ~(to - 1);
}

/* How much of [s, e) r covers. */
static uintptr_t overlap(const struct run_range *r, uintptr_t s, uintptr_t e)
{
	const uintptr_t lo = ZF_MAX(r->start, s), hi = ZF_MIN(r->end, e);

	return hi > lo ? hi - lo : 0;
}

int run_arena_init(struct run_arena *a, void *base, size_t size, size_t align)
{
	memset(a, 0, sizeof(*a));
	pthread_mutex_init(&a->lock, NULL);
	common_internal++;
	a->free = malloc(RUN_FREE_MIN * sizeof(*a->free));
	common_internal--;
	if (!a->free)
		return -ENOMEM;
	a->cap = RUN_FREE_MIN;
	a->free[0] = (struct run_range){ (uintptr_t)base, (uintptr_t)base + size };
	a->nfree = 1;
	a->align = align;
	a->base = a->top = (uintptr_t)base;
	a->end = (uintptr_t)base + size;
	return 0;
}

/* Takes [s, e) out of free range i, which holds it. Under the lock. 0, or -ENOMEM. */
static int cut(struct run_arena *a, size_t i, uintptr_t s, uintptr_t e)
{
	struct run_range *r = &a->free[i];

	if (s > r->start && e < r->end) {
		/* A hole in the middle: the range becomes two. */
		if (a->nfree == a->cap) {
			struct run_range *more;

			common_internal++;
			more = realloc(a->free, 2 * a->cap * sizeof(*a->free));
			common_internal--;
			if (!more)
				return -ENOMEM;
			a->free = more;
			a->cap *= 2;
			r = &a->free[i];
		}
		memmove(r + 2, r + 1, (a->nfree - i - 1) * sizeof(*r));
		r[1] = (struct run_range){ e, r->end };
		r->end = s;
		a->nfree++;
	} else if (s > r->start) {
		r->end = s;
	} else if (e < r->end) {
		r->start = e;
	} else {
		memmove(r, r + 1, (a->nfree - i - 1) * sizeof(*r));
		a->nfree--;
	}
	a->mapped += e - s;
	a->top = ZF_MAX(a->top, e);
	return 0;
}

void *run_arena_take(struct run_arena *a, size_t len, int *fresh)
{
	uintptr_t align = a->align;
	void *got = NULL;

	/*
	 * The largest power of two in len, up to 32 MiB: mappings of 2 MiB or more fill
	 * whole frames, and mimalloc's 32 MiB segments, which it wants aligned to their
	 * size, come aligned the first time.
	 */
	while (align < RUN_ALIGN_MAX && align * 2 <= len)
		align *= 2;

	len = round_up(len, a->align);
	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < a->nfree; i++) {
		const uintptr_t s = round_up(a->free[i].start, align);

		if (s < a->free[i].end && a->free[i].end - s >= len) {
			*fresh = s >= a->top;
			if (!cut(a, i, s, s + len))
				got = (void *)s;
			break;
		}
	}
	pthread_mutex_unlock(&a->lock);
	return got;
}

int run_arena_take_at(struct run_arena *a, uintptr_t addr, size_t len)
{
	int ret = -1;

	len = round_up(len, ZF_PAGE_SIZE);
	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < a->nfree && a->free[i].start <= addr; i++) {
		if (addr >= a->free[i].start && addr + len <= a->free[i].end) {
			ret = cut(a, i, addr, addr + len) ? -1 : 0;
			break;
		}
	}
	pthread_mutex_unlock(&a->lock);
	return ret;
}

void run_arena_give(struct run_arena *a, uintptr_t s, size_t len)
{
	uintptr_t e = s + round_up(len, ZF_PAGE_SIZE);
	size_t i, j;

	pthread_mutex_lock(&a->lock);
	/* i: the first free range that ends at or after s (it may touch or overlap). */
	for (i = 0; i < a->nfree && a->free[i].end < s; i++)
		;
	/* j: past the last free range that starts at or before e. */
	for (j = i; j < a->nfree && a->free[j].start <= e; j++)
		;
	if (j > i) {
		/* Ranges i..j-1 touch or overlap [s, e): one range from them all. */
		uintptr_t covered = 0;

		for (size_t k = i; k < j; k++)
			covered += overlap(&a->free[k], s, e);
		a->mapped -= ZF_MIN(a->mapped, (e - s) - covered);
		s = ZF_MIN(s, a->free[i].start);
		e = ZF_MAX(e, a->free[j - 1].end);
		a->free[i] = (struct run_range){ s, e };
		memmove(&a->free[i + 1], &a->free[j], (a->nfree - j) * sizeof(a->free[0]));
		a->nfree -= j - i - 1;
	} else {
		if (a->nfree == a->cap) {
			struct run_range *more;

			common_internal++;
			more = realloc(a->free, 2 * a->cap * sizeof(*a->free));
			common_internal--;
			if (!more) {
				/* The addresses are lost to the arena, not the memory: dropped. */
				pthread_mutex_unlock(&a->lock);
				return;
			}
			a->free = more;
			a->cap *= 2;
		}
		memmove(&a->free[i + 1], &a->free[i], (a->nfree - i) * sizeof(a->free[0]));
		a->free[i] = (struct run_range){ s, e };
		a->nfree++;
		a->mapped -= ZF_MIN(a->mapped, e - s);
	}
	pthread_mutex_unlock(&a->lock);
}

void run_arena_lose(struct run_arena *a, uintptr_t s, size_t len)
{
	const uintptr_t e = s + round_up(len, ZF_PAGE_SIZE);

	(void)run_arena_take_at(a, s, e - s); /* if it was free */
	pthread_mutex_lock(&a->lock);
	if (a->nlost == a->caplost) {
		const size_t cap = a->caplost ? 2 * a->caplost : RUN_FREE_MIN;
		struct run_range *more;

		common_internal++;
		more = realloc(a->lost, cap * sizeof(*a->lost));
		common_internal--;
		if (!more) {
			/* Then it stays taken: never handed out, only never unmapped either. */
			pthread_mutex_unlock(&a->lock);
			return;
		}
		a->lost = more;
		a->caplost = cap;
	}
	a->lost[a->nlost++] = (struct run_range){ s, e };
	pthread_mutex_unlock(&a->lock);
}

int run_arena_lost(struct run_arena *a, uintptr_t s, size_t len)
{
	const uintptr_t e = s + round_up(len, ZF_PAGE_SIZE);
	int hit = 0;

	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < a->nlost && !hit; i++)
		hit = overlap(&a->lost[i], s, e) > 0;
	pthread_mutex_unlock(&a->lock);
	return hit;
}
