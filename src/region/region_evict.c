/*
 * region_evict.c - eviction: a region's resident units into the store, their pages
 * dropped (zf_region_pageout(), and reclaim's batches, region_reclaim.c).
 *
 * Eviction (invariant 1, no lost write): claim the units (RESIDENT -> EVICTING),
 * write-protect them (UFFDIO_WRITEPROTECT), find holes (mincore: pages never touched or
 * dropped read as zeros and are stored as such, never read, since reading one would
 * fault), store them (as folios of up to 2 MiB so the store's engines get batches, a
 * few folios in flight: zf_store_put_start), drop their pages (MADV_DONTNEED) as each
 * folio's put finishes while the next ones compress, mark them EVICTED and wake whoever
 * waited. A write that races sees the write-protection (or a missing page), waits, and
 * after the wakeup faults the unit back in with its own data still to write. A unit the
 * store refuses is unprotected and stays resident, and so is one the program dropped a
 * page of while it was compressed (F_TORN: write-protection does not stop a zap, and a
 * compressor reads its source more than once, so the stream decodes to bytes the unit
 * never held, on its other pages too). Our own MADV_DONTNEED raises a REMOVE event like
 * the program's would: the evictor publishes the exact range it drops and the service
 * thread takes the first REMOVE of that range as ours (drop_pages()).
 *
 * docs/region.md: "Eviction"; failure modes, rows 13, 14 and 16.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "region_internal.h"

#define RG_PUTS_INFLIGHT 3u

/*
 * Drops the pages of [addr, addr + len) that we stored (caller holds evict_lock). The
 * kernel holds madvise() until a service thread has read its REMOVE event, and the
 * program's own madvise() raises the same event: we publish the range first, and the
 * reader takes the first REMOVE of exactly that range as ours (self_remove()); anything
 * else is the program's. When the region's memory is split into several VMAs (the
 * program mprotect()ed part of it), the kernel sends one event per VMA and none
 * matches: they were deferred (our units are EVICTING), and we take them back here.
 */
static void drop_pages(zf_region *r, uint8_t *addr, size_t len)
{
	pthread_rwlock_wrlock(&r->read_lock);
	r->self_start = (uintptr_t)addr;
	r->self_len = len;
	r->self_pending = 1;
	pthread_rwlock_unlock(&r->read_lock);
	/* It cannot fail on memory we stored from; unmapped meanwhile, it has nothing to drop. */
	(void)madvise(addr, len, MADV_DONTNEED);
	pthread_rwlock_wrlock(&r->read_lock);
	if (r->self_pending)
		region_take_back_deferred(r, (uintptr_t)addr, (uintptr_t)addr + len);
	r->self_pending = 0;
	pthread_rwlock_unlock(&r->read_lock);
}

/*
 * An eviction of a chunk of units in flight (region_evict_chunk()): which units it
 * claimed, which are stored (ok: 1, or 2 for a clean unit whose copy was stored before),
 * the puts still compressing, oldest first, and how far it has dropped.
 */
struct evict {
	zf_region *r;
	uint64_t first;
	uint8_t *claimed, *ok, *partial;
	struct {
		zf_store_pending *p;
		uint64_t i, f; /* units [i, i + f) of the chunk */
	} put[RG_PUTS_INFLIGHT];
	unsigned put_head, puts; /* the oldest in put[], and how many */
	uint64_t dropped; /* units [0, dropped) are settled: dropped or given back */
	uint64_t evicted;
};

static void evict_drop(struct evict *ev, uint64_t upto);

/* Stores units [i, i + f) of the chunk one by one, as after a refused folio. */
static void store_units(struct evict *ev, uint64_t i, uint64_t f)
{
	zf_region *r = ev->r;

	for (uint64_t k = i; k < i + f; k++)
		ev->ok[k] = !zf_store_put(r->store, r->owner, unit_index(r, ev->first + k),
					  unit_addr(r, ev->first + k), r->unit);
}

/*
 * Finishes the oldest put in flight: its units are stored, or (refused as a folio) are
 * stored unit by unit, or not. Then drops what is settled before the next put in flight
 * (after the last one, the caller drops the rest).
 */
static void evict_finish_put(struct evict *ev)
{
	const unsigned k = ev->put_head;
	const uint64_t i = ev->put[k].i, f = ev->put[k].f;

	ev->put_head = (k + 1) % RG_PUTS_INFLIGHT;
	ev->puts--;
	if (!zf_store_put_finish(ev->put[k].p))
		memset(ev->ok + i, 1, f);
	else
		store_units(ev, i, f);
	if (ev->puts)
		evict_drop(ev, ev->put[ev->put_head].i);
}

/*
 * Stores units [i, i + n) of the chunk (claimed, protected, without holes) as folios of
 * up to 2 MiB, each put started while RG_PUTS_INFLIGHT - 1 others compress: the engines
 * go on with the next folios while this thread finishes one and drops its pages.
 */
static void store_run(struct evict *ev, uint64_t i, uint64_t n)
{
	zf_region *r = ev->r;
	const uint64_t max_units = store_unit(r->store) > r->unit ? 1 : ZF_UNIT_MAX / r->unit;
	const uint64_t end = i + n;

	while (i < end) {
		const uint64_t u = ev->first + i;
		const unsigned k = (ev->put_head + ev->puts) % RG_PUTS_INFLIGHT;
		uint64_t f = 1;

		while (f * 2 <= max_units && i + f * 2 <= end && (u % (f * 2)) == 0)
			f *= 2;
		if (ev->puts == RG_PUTS_INFLIGHT)
			evict_finish_put(ev);
		if (zf_store_put_start(r->store, r->owner, unit_index(r, u), unit_addr(r, u),
				       f * r->unit, &ev->put[k].p)) {
			/* Refused at once (the pool is full): unit by unit, as a refused folio. */
			store_units(ev, i, f);
		} else {
			ev->put[k].i = i;
			ev->put[k].f = f;
			ev->puts++;
		}
		i += f;
	}
}

/*
 * Stores unit u, which has holes (vec: mincore of its pages), from a copy: zeros in the
 * holes, or, for a unit partly swapped in page by page, the stored copy's pages.
 */
static int store_holed(zf_region *r, uint64_t u, const unsigned char *vec, int partial)
{
	const uint8_t *src = unit_addr(r, u);
	uint8_t *base = NULL;

	if (!r->stage && !(r->stage = malloc(r->unit)))
		return -ENOMEM;
	if (partial) {
		if (!r->evict_ctx.reader)
			TRY(region_fault_ctx_init(r, &r->evict_ctx));
		TRY(region_load_data(r, &r->evict_ctx, u, -1));
		base = r->evict_ctx.buf;
	}
	for (uint32_t p = 0; p < r->unit_pages; p++) {
		uint8_t *dst = r->stage + (size_t)p * RG_PAGE;

		if (vec[p] & 1)
			memcpy(dst, src + (size_t)p * RG_PAGE, RG_PAGE);
		else if (base)
			memcpy(dst, base + (size_t)p * RG_PAGE, RG_PAGE);
		else
			memset(dst, 0, RG_PAGE);
	}
	return zf_store_put(r->store, r->owner, unit_index(r, u), r->stage, r->unit);
}

/*
 * An eviction that gives unit u back unprotects it - unless it is clean: a clean unit's
 * pages stay write-protected, or a write would land unseen and the stale copy would be
 * taken for it at the next eviction.
 */
static void unprotect_unless_clean(zf_region *r, uint64_t u)
{
	if (!(atomic_load_explicit(&r->state[u], memory_order_acquire) & F_CLEAN))
		(void)protect(r, unit_addr(r, u), r->unit, 0);
}

/*
 * Drops what the eviction stored among units [ev->dropped, upto) of its chunk, run by run,
 * and gives back what it claimed and could not store.
 */
static void evict_drop(struct evict *ev, uint64_t upto)
{
	zf_region *r = ev->r;
	const uint64_t first = ev->first;
	const uint8_t *claimed = ev->claimed, *partial = ev->partial;
	uint8_t *ok = ev->ok;

	/*
	 * Units torn while compressed (region_serve()) are not kept: what was stored is no
	 * content they ever had. Each is given back with its pages, as a refused one. (A partly
	 * swapped-in unit is stored from a copy, which tearing cannot make inconsistent, and
	 * its store entry holds the pages it lacks.)
	 */
	for (uint64_t k = ev->dropped; k < upto; k++) {
		/* A plain load first: no locked instruction per unit evicted for a rare flag. */
		if (claimed[k] && ok[k] == 1 && !partial[k] &&
		    (atomic_load_explicit(&r->state[first + k], memory_order_acquire) & F_TORN) &&
		    (atomic_fetch_and_explicit(&r->state[first + k], ~F_TORN,
					       memory_order_acq_rel) &
		     F_TORN)) {
			zf_store_invalidate(r->store, r->owner, unit_index(r, first + k),
					    r->unit_pages);
			ok[k] = 0;
			INC(r, evict_torn);
		}
	}
	for (uint64_t i = ev->dropped; i < upto;) {
		uint64_t j = i;

		if (!claimed[i]) {
			i++;
			continue;
		}
		if (!ok[i]) {
			unprotect_unless_clean(r, first + i);
			unit_release(r, first + i, partial[i] ? ST_EVICTED : ST_RESIDENT, 0, 0);
			INC(r, reject);
			i++;
			continue;
		}
		while (j < upto && claimed[j] && ok[j])
			j++;
		/*
		 * Still ours? The program may have unmapped part of the run and mapped its
		 * own memory there (its UNMAP event comes after): MADV_DONTNEED would wipe
		 * that. Protecting the run again fails on memory not registered with us.
		 * (A munmap between this check and the drop is not caught: a window of
		 * two system calls.)
		 */
		if (protect(r, unit_addr(r, first + i), (j - i) * r->unit, 1)) {
			for (uint64_t k = i; k < j; k++) {
				if (ok[k] != 2)
					zf_store_invalidate(r->store, r->owner,
							    unit_index(r, first + k),
							    r->unit_pages);
				unprotect_unless_clean(r, first + k);
				unit_release(r, first + k, partial[k] ? ST_EVICTED : ST_RESIDENT, 0,
					     0);
			}
			i = j;
			continue;
		}
		drop_pages(r, unit_addr(r, first + i), (j - i) * r->unit);
		for (uint64_t k = i; k < j; k++) {
			if (ok[k] == 2)
				INC(r, clean_evict);
			if (atomic_load_explicit(&r->state[first + k], memory_order_relaxed) &
			    F_COLD)
				atomic_fetch_sub_explicit(&r->cold_units, 1, memory_order_relaxed);
			unit_release(r, first + k, ST_EVICTED, F_CLEAN | F_COLD | F_PARTIAL, 0);
		}
		ev->evicted += j - i;
		i = j;
	}
	ev->dropped = ZF_MAX(ev->dropped, upto);
}

/*
 * Evicts the units of [first, first + n) that are resident (sel NULL) or selected (sel[i]),
 * under evict_lock, in a registered thread (common/internal.c). Returns the units evicted.
 */
uint64_t region_evict_chunk(zf_region *r, uint64_t first, uint64_t n, const uint8_t *sel,
			    int reclaim)
{
	uint8_t *claimed = calloc(n, 1), *ok = calloc(n, 1), *partial = calloc(n, 1);
	struct evict ev = {
		.r = r, .first = first, .claimed = claimed, .ok = ok, .partial = partial
	};
	unsigned char *vec = r->snap;
	uint64_t evicted = 0;

	/* Our reads of the units are told from the program's (common/internal.c). */
	assert(internal_thread_is_me());
	if (!claimed || !ok || !partial)
		goto out;
	/*
	 * A unit being brought in is resident a moment later (its UFFDIO_COPY woke the
	 * program before the loader marked it), and one an event holds is settled a moment
	 * later (the program goes on once its madvise's event is read, before it is
	 * handled): a pageout waits for both, before it claims anything, so that a pageout
	 * that follows a touch or a madvise sees the unit. Neither waits for evictors.
	 */
	for (uint64_t i = 0; i < n && !reclaim; i++) {
		uint32_t seen;

		while (!unit_wait_mark(r, first + i, &seen))
			futex_wait(&r->state[first + i], seen);
	}
	for (uint64_t i = 0; i < n; i++) {
		uint32_t st = atomic_load_explicit(&r->state[first + i], memory_order_relaxed);

		if ((sel && !sel[i]) || (st & F_EVENT))
			continue;

		/* A unit partly swapped in (per page) has the rest of its pages in the store. */
		partial[i] = (st & F_PARTIAL) != 0;
		claimed[i] = !unit_move(r, first + i, partial[i] ? ST_EVICTED : ST_RESIDENT,
					ST_EVICTING, F_REF | F_RA | F_HOT | F_TORN, 0);
	}
	/* Protect each run of claimed units, then find the holes. */
	for (uint64_t i = 0; i < n;) {
		uint64_t j = i;

		if (!claimed[i]) {
			i++;
			continue;
		}
		while (j < n && claimed[j])
			j++;
		if (protect(r, unit_addr(r, first + i), (j - i) * r->unit, 1) ||
		    mincore(unit_addr(r, first + i), (j - i) * r->unit, vec + i * r->unit_pages)) {
			for (uint64_t k = i; k < j; k++) {
				claimed[k] = 0;
				unprotect_unless_clean(r, first + k);
				unit_release(r, first + k, partial[k] ? ST_EVICTED : ST_RESIDENT, 0,
					     0);
			}
		}
		i = j;
	}
	atomic_store_explicit(&r->snap_first, first, memory_order_relaxed);
	atomic_store_explicit(&r->snap_n, n, memory_order_release);
	/*
	 * Store: clean units have their copy already; holed ones go alone. What is stored is
	 * dropped as the puts finish, while the next ones compress.
	 */
	for (uint64_t i = 0; i < n;) {
		uint64_t j = i;
		uint32_t st;

		if (!claimed[i]) {
			i++;
			continue;
		}
		st = atomic_load_explicit(&r->state[first + i], memory_order_relaxed);
		if (st & F_CLEAN) {
			ok[i++] = 2;
			continue;
		}
		if (partial[i] || memchr(vec + i * r->unit_pages, 0, r->unit_pages)) {
			ok[i] = !store_holed(r, first + i, vec + i * r->unit_pages, partial[i]);
			i++;
			continue;
		}
		while (j < n && claimed[j] && !partial[j] &&
		       !(atomic_load_explicit(&r->state[first + j], memory_order_relaxed) &
			 F_CLEAN) &&
		       !memchr(vec + j * r->unit_pages, 0, r->unit_pages))
			j++;
		store_run(&ev, i, j - i);
		i = j;
	}
	while (ev.puts)
		evict_finish_put(&ev);
	evict_drop(&ev, n);
	atomic_store_explicit(&r->snap_n, 0, memory_order_release);
	evicted = ev.evicted;
	if (evicted) {
		resident_add(r, -(int64_t)evicted);
		ADD(r, swpout, evicted * r->unit_pages);
		ADD(r, swpout_units, evicted);
		if (reclaim)
			ADD(r, evict_reclaim, evicted);
		else
			ADD(r, evict_pageout, evicted);
		atomic_fetch_add_explicit(&r->resident_seq, 1, memory_order_release);
		futex_wake_all(&r->resident_seq);
	}
out:
	free(claimed);
	free(ok);
	free(partial);
	return evicted;
}

long zf_region_pageout(zf_region *r, void *addr, size_t len)
{
	uint64_t first, last, evicted = 0;
	int was_internal;
	const size_t chunk_units = ZF_MAX(RG_CHUNK / (r ? r->unit : 1), 1);

	RETURN_IF(!r || !len, -EINVAL);
	RETURN_IF((uint8_t *)addr < r->base || (uint8_t *)addr + len > r->base + r->size, -EINVAL);
	first = (uint64_t)((uint8_t *)addr - r->base) >> (r->order + 12);
	last = (uint64_t)((uint8_t *)addr + len - 1 - r->base) >> (r->order + 12);
	/* The caller evicts: registered while it does (an engine or a reclaimer is already). */
	was_internal = internal_thread_is_me();
	if (!was_internal)
		TRY(internal_thread_enter());
	pthread_mutex_lock(&r->evict_lock);
	for (uint64_t u = first; u <= last; u += chunk_units)
		evicted += region_evict_chunk(r, u, ZF_MIN(chunk_units, last + 1 - u), NULL, 0);
	pthread_mutex_unlock(&r->evict_lock);
	if (!was_internal)
		internal_thread_leave();
	return (long)evicted;
}
