/*
 * region_evict.c - eviction: a region's resident units into the store (zf_region_pageout(),
 * and reclaim's batches, region_reclaim.c).
 *
 * Eviction takes the pages away from the program before it reads them: claim the units
 * (RESIDENT -> EVICTING), move their pages out of the program's mapping into a staging
 * area of our own (UFFDIO_MOVE, page table entries moved, no copy), compress them from
 * there (as folios of up to 2 MiB, a few in flight so the engines get batches), mark the
 * stored units EVICTED and wake whoever waited, and drop the staging pages.
 *
 * Moving is the snapshot (invariant 1, no lost write, and 2, what is read back is what
 * was written). Once the pages are ours, nothing the program does reaches them: a read
 * or a write faults (the page is missing) and waits for the unit; a munmap(), mremap()
 * or madvise(MADV_DONTNEED) finds nothing to take, and its event, which waits for the
 * unit (region_events.c), settles what was stored. A write that came before the move is
 * in the page that moved. No compressor ever reads the program's mapping, which may be
 * gone by then, and never sees a page change under it.
 *
 * A unit that cannot be moved whole (part of it read-only, a page shared or pinned: the
 * kernel refuses) or that the store refuses goes back: its pages are copied back where
 * they belong (region_put_back(): at their address, or where the program's events since
 * took that memory) and it stays resident.
 *
 * docs/region.md: "Eviction"; failure modes, rows 13, 14 and 16.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/test_point.h"
#include "region_internal.h"
#include "region_test.h"

#define RG_PUTS_INFLIGHT 3u

/*
 * An eviction of a chunk of units in flight (region_evict_chunk()): which units it
 * claimed and moved out, which are stored (ok: 1, or 2 for a clean unit whose copy was
 * stored before), the puts still compressing, oldest first, and how far it has settled.
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
	uint64_t settled; /* units [0, settled) are settled: evicted or given back */
	uint64_t evicted, forked; /* units evicted; of them, F_FORKED */
};

/* Where unit k of the chunk waits in staging while it is compressed. */
static uint8_t *staged(const struct evict *ev, uint64_t k)
{
	return ev->r->evict_stage + k * ev->r->unit;
}

/* Whether an event read and not yet handled holds a unit of [a, b). */
static int units_held(zf_region *r, const uint8_t *a, const uint8_t *b)
{
	const uint64_t u1 = (uint64_t)(b - r->base + r->unit - 1) / r->unit;

	for (uint64_t u = (uint64_t)(a - r->base) / r->unit; u < u1; u++)
		if (atomic_load_explicit(&r->state[u], memory_order_acquire) & F_EVENT)
			return 1;
	return 0;
}

/*
 * Moves [src, src + len) of the region to dst in staging, only while it is the region's
 * memory: a move takes any anonymous page it is pointed at, and the program may have
 * unmapped the range and mapped memory of its own there. It cannot have done so unseen:
 * its munmap() (or mremap()) waits until its event is read, and a move is refused
 * (EAGAIN) while an event is unread. So each try holds read_lock, under which no event
 * is read, and goes only if no event read unmapped or moved the range.
 *
 * Nor while an event read holds a unit of the range: after a REMOVE is read the program
 * zaps the pages, with nothing of the kernel's to keep a move out, and a move racing
 * that zap has been seen to spin in the kernel for good (6.18: once in ~120 runs of
 * region_events' "race", sigbus 4k; none in 2000 with this check). Such a unit is given
 * back; its event drops what the program dropped. Returns what region_move() returns;
 * *err -ENOENT: the range left the region, -EINPROGRESS: an event holds a unit of it,
 * -EBUSY (the kernel's): a page is shared with a child since a fork (unshare_unit()).
 */
static size_t move_held(zf_region *r, uint8_t *dst, uint8_t *src, size_t len, int *err)
{
	size_t done = 0;

	for (int tries = 0; done < len && tries < RG_EAGAIN_TRIES; tries++) {
		pthread_rwlock_rdlock(&r->read_lock);
		if (region_moved_on(r, (uintptr_t)src + done, (uintptr_t)src + len)) {
			pthread_rwlock_unlock(&r->read_lock);
			*err = -ENOENT;
			return done;
		}
		if (units_held(r, src + done, src + len)) {
			pthread_rwlock_unlock(&r->read_lock);
			*err = -EINPROGRESS;
			return done;
		}
		done += region_move(r, dst + done, src + done, len - done, 0, err);
		pthread_rwlock_unlock(&r->read_lock);
		if (*err != -EAGAIN)
			break;
		sched_yield();
	}
	return done;
}

/*
 * Pages shared with a child since a fork (ZF_FORK_COPY) are not the region's alone:
 * UFFDIO_MOVE refuses them (EBUSY) until a write gives each side pages of its own, and
 * after a fork every page then present is shared, in the parent too, even once the child
 * is gone. MADV_POPULATE_WRITE takes that copy-on-write for each present page of unit u
 * without writing anything: then the move goes. Present pages only (a hole would fault,
 * and the fault wait for this eviction, which holds the unit), none write-protected (a
 * clean unit's would too), under read_lock as a move: no event drops them meanwhile.
 * Costs a copy of each shared page, which the child keeps until it writes or exits.
 * Returns 0 when the pages are the region's now, else -EBUSY.
 */
static int unshare_unit(zf_region *r, uint64_t u)
{
	uint8_t *src = unit_addr(r, u);
	unsigned char vec[512];
	int ret = -EBUSY;

	if (atomic_load_explicit(&r->state[u], memory_order_acquire) & (F_CLEAN | F_DOUBT))
		return ret;
	pthread_rwlock_rdlock(&r->read_lock);
	if (!region_moved_on(r, (uintptr_t)src, (uintptr_t)src + r->unit) &&
	    !units_held(r, src, src + r->unit) && !mincore(src, r->unit, vec)) {
		ret = 0;
		for (size_t p = 0, q; p < r->unit_pages && !ret; p = q) {
			for (q = p; q < r->unit_pages && (vec[q] & 1) == (vec[p] & 1); q++)
				;
			if ((vec[p] & 1) &&
			    madvise(src + p * RG_PAGE, (q - p) * RG_PAGE, MADV_POPULATE_WRITE))
				ret = -EBUSY;
		}
	}
	pthread_rwlock_unlock(&r->read_lock);
	if (!ret)
		INC(r, fork_unshared);
	return ret;
}

/*
 * Moves unit k of the chunk out whole; 0, or an error when some page could not move (the
 * ones that did must go back). A unit that spans two of the program's mappings (it
 * mprotect()ed part of it) is refused as a range (EINVAL) and moves page by page; one
 * shared with a child since a fork, once unshared (unshare_unit()).
 */
static int move_unit(struct evict *ev, uint64_t k)
{
	zf_region *r = ev->r;
	uint8_t *src = unit_addr(r, ev->first + k), *dst = staged(ev, k);
	size_t done;
	int err;

	done = move_held(r, dst, src, r->unit, &err);
	if (done == r->unit)
		return 0;
	if (err == -EBUSY && !unshare_unit(r, ev->first + k)) {
		done += move_held(r, dst + done, src + done, r->unit - done, &err);
		if (done == r->unit)
			return 0;
	}
	if (err != -EINVAL)
		return err;
	for (size_t off = 0; off < r->unit; off += RG_PAGE) {
		if (move_held(r, dst + off, src + off, RG_PAGE, &err) != RG_PAGE)
			return err;
	}
	return 0;
}

/*
 * Gives unit k back: the pages it had moved out are copied back, and it is released as
 * it was (resident, or evicted and partly swapped in). Counted as refused. Its staging
 * is dropped at once: a chunk whose units all went back ends before the chunk's drop,
 * and a later move into pages left there would be refused (EEXIST) for good. A clean
 * unit loses its stored copy: the pages that went back are not write-protected, so a
 * write to them would go unseen and a later eviction keep the stale copy.
 */
static void give_back(struct evict *ev, uint64_t k)
{
	zf_region *r = ev->r;
	const uint64_t u = ev->first + k;
	const uint32_t st = atomic_load_explicit(&r->state[u], memory_order_relaxed);

	region_put_back(r, unit_addr(r, u), staged(ev, k), r->unit);
	(void)madvise(staged(ev, k), r->unit, MADV_DONTNEED);
	if (st & F_CLEAN) {
		zf_store_invalidate(r->store, r->owner, unit_index(r, u), r->unit_pages);
		INC(r, clean_dropped);
	}
	unit_release(r, u, ev->partial[k] ? ST_EVICTED : ST_RESIDENT, F_CLEAN, 0);
	INC(r, reject);
}

/* Stores units [i, i + f) of the chunk one by one, as after a refused folio. */
static void store_units(struct evict *ev, uint64_t i, uint64_t f)
{
	zf_region *r = ev->r;

	for (uint64_t k = i; k < i + f; k++)
		ev->ok[k] = !zf_store_put(r->store, r->owner, unit_index(r, ev->first + k),
					  staged(ev, k), r->unit);
}

/* Settles units [ev->settled, upto) of the chunk: stored ones are evicted, the rest go back. */
static void evict_settle(struct evict *ev, uint64_t upto)
{
	zf_region *r = ev->r;

	for (uint64_t k = ev->settled; k < upto; k++) {
		const uint64_t u = ev->first + k;

		if (!ev->claimed[k])
			continue;
		if (!ev->ok[k]) {
			give_back(ev, k);
			continue;
		}
		if (ev->ok[k] == 2)
			INC(r, clean_evict);
		const uint32_t st = atomic_load_explicit(&r->state[u], memory_order_relaxed);

		if (st & F_COLD)
			atomic_fetch_sub_explicit(&r->cold_units, 1, memory_order_relaxed);
		unit_release(r, u, ST_EVICTED, F_CLEAN | F_COLD | F_PARTIAL | F_FORKED, 0);
		ev->evicted++;
		ev->forked += (st & F_FORKED) != 0;
	}
	ev->settled = ZF_MAX(ev->settled, upto);
}

/*
 * Finishes the oldest put in flight: its units are stored, or (refused as a folio) are
 * stored unit by unit, or not. Then settles what comes before the next put in flight
 * (after the last one, the caller settles the rest).
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
		evict_settle(ev, ev->put[ev->put_head].i);
}

/*
 * Stores units [i, i + n) of the chunk (moved out, in staging) as folios of up to 2 MiB,
 * each put started while RG_PUTS_INFLIGHT - 1 others compress: the engines go on with the
 * next folios while this thread finishes one and settles its units.
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
		if (zf_store_put_start(r->store, r->owner, unit_index(r, u), staged(ev, i),
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
 * A unit partly swapped in page by page (F_PARTIAL) has moved out only the pages it had
 * in: the others come from its stored copy, into the staging holes. 0, or an error (the
 * unit goes back).
 */
static int fill_partial(struct evict *ev, uint64_t k)
{
	zf_region *r = ev->r;
	unsigned char vec[ZF_UNIT_MAX / RG_PAGE];
	uint8_t *dst = staged(ev, k);

	if (!r->evict_ctx.reader)
		TRY(region_fault_ctx_init(r, &r->evict_ctx));
	TRY(region_load_data(r, &r->evict_ctx, ev->first + k, -1));
	if (mincore(dst, r->unit, vec))
		return -errno;
	for (uint32_t p = 0; p < r->unit_pages; p++)
		if (!(vec[p] & 1))
			memcpy(dst + (size_t)p * RG_PAGE, r->evict_ctx.buf + (size_t)p * RG_PAGE,
			       RG_PAGE);
	return 0;
}

/* Registers or unregisters the staging area's first len bytes with the region's descriptor. */
static int stage_register(zf_region *r, size_t len, int on)
{
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)r->evict_stage, .len = len },
		.mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP,
	};

	if (on)
		return ioctl(r->uffd, UFFDIO_REGISTER, &reg) ? -errno : 0;
	return uffd_range(r, UFFDIO_UNREGISTER, &reg.range);
}

/* Whether no unit of [first, first + n) is in a transition or held by an event. */
static int units_settled(zf_region *r, uint64_t first, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		if (unit_unsettled(
			    atomic_load_explicit(&r->state[first + i], memory_order_acquire)))
			return 0;
	return 1;
}

/*
 * Waits while unit u is LOADING: a fault's claim (a swap-in, or a fault fixing a page of a
 * resident unit), which ends without waiting for any other unit or event. Not for an
 * event (F_EVENT): an eviction that holds units must never wait for one, as the event
 * may be waiting for those units (soak_short hung so, in CI).
 */
static void wait_fault_claim(zf_region *r, uint64_t u)
{
	uint32_t st = atomic_load_explicit(&r->state[u], memory_order_acquire);

	while ((st & ST_MASK) == ST_LOADING) {
		if (!(st & F_WAIT) && !atomic_compare_exchange_weak_explicit(
					      &r->state[u], &st, st | F_WAIT, memory_order_acq_rel,
					      memory_order_acquire))
			continue;
		futex_wait(&r->state[u], st | F_WAIT);
		st = atomic_load_explicit(&r->state[u], memory_order_acquire);
	}
}

/*
 * Whether unit u (F_DOUBT) still has a page a REMOVE left: mapped and write-protected
 * (/proc/self/pagemap: bits 63, present, and 57, uffd-wp). Said yes when pagemap cannot
 * tell: such a unit stays resident, which is never wrong. With settle, a unit without
 * one leaves the doubt (its pages since are zero-fills or written ones, the program's):
 * only under read_lock, under which no event sets the flag anew.
 */
int region_doubt_left(zf_region *r, uint64_t u, int settle)
{
	uint64_t pm[ZF_UNIT_MAX / RG_PAGE];
	const uintptr_t ua = (uintptr_t)unit_addr(r, u);
	const size_t len = r->unit_pages * sizeof(pm[0]);

	if (!(atomic_load_explicit(&r->state[u], memory_order_acquire) & F_DOUBT))
		return 0;
	if (r->pagemap_fd < 0 ||
	    pread(r->pagemap_fd, pm, len, (off_t)(ua / RG_PAGE * sizeof(pm[0]))) != (ssize_t)len)
		return 1;
	for (uint32_t p = 0; p < r->unit_pages; p++)
		if ((pm[p] >> 63 & 1) && (pm[p] >> 57 & 1))
			return 1;
	if (settle)
		atomic_fetch_and_explicit(&r->state[u], ~F_DOUBT, memory_order_acq_rel);
	return 0;
}

/*
 * Claims the units of [first, first + n) that are resident (sel NULL) or selected
 * (sel[i]) and moves their pages out to staging. Returns how many it claimed.
 */
static uint64_t claim_and_move(struct evict *ev, uint64_t n, const uint8_t *sel, int reclaim)
{
	zf_region *r = ev->r;
	const uint64_t first = ev->first;
	uint64_t claimed = 0;

	/*
	 * A unit being brought in is resident a moment later (its UFFDIO_COPY woke the
	 * program before the loader marked it), and one an event holds is settled a moment
	 * later (the program goes on once its madvise's event is read, before it is
	 * handled): a pageout waits for both, before it claims anything, so that a pageout
	 * that follows a touch or a madvise sees the unit. Neither waits for evictors.
	 *
	 * The claim holds read_lock: the program's madvise() goes on as its event is read,
	 * inside read(), before the event marks its units (F_EVENT, under the lock), and a
	 * pageout that follows would claim a unit it must wait for; its move would then
	 * find the mark and give the unit back (move_held()).
	 */
	for (;;) {
		for (uint64_t i = 0; i < n && !reclaim; i++) {
			uint32_t seen;

			while (!unit_wait_mark(r, first + i, &seen))
				futex_wait(&r->state[first + i], seen);
		}
		pthread_rwlock_rdlock(&r->read_lock);
		if (reclaim || units_settled(r, first, n))
			break;
		pthread_rwlock_unlock(&r->read_lock);
	}
	TEST_POINT(TP_EVICT_SETTLED);
	for (uint64_t i = 0; i < n; i++) {
		uint32_t st = atomic_load_explicit(&r->state[first + i], memory_order_relaxed);

		if ((sel && !sel[i]) || (st & F_EVENT) || region_doubt_left(r, first + i, 1))
			continue;
		for (;;) {
			/* A unit partly swapped in (per page) has the rest of its pages in the
			 * store. */
			ev->partial[i] = (st & F_PARTIAL) != 0;
			ev->claimed[i] =
				!unit_move(r, first + i, ev->partial[i] ? ST_EVICTED : ST_RESIDENT,
					   ST_EVICTING, F_REF | F_RA | F_HOT, 0);
			st = atomic_load_explicit(&r->state[first + i], memory_order_acquire);
			/*
			 * A fault on a resident unit (a hole, a write to a clean page, a
			 * duplicate fault served late) claims it for a moment, under read_lock
			 * shared like ours: one that came in between the look above and this
			 * claim is waited for, and the unit claimed after (region_many_faulters
			 * under ASan once evicted nothing; region_evict_meets "evict after
			 * fault"). Only for that: not for an event (wait_fault_claim()).
			 * Reclaim takes what it can.
			 */
			if (ev->claimed[i] || reclaim || (st & ST_MASK) != ST_LOADING)
				break;
			pthread_rwlock_unlock(&r->read_lock);
			wait_fault_claim(r, first + i);
			pthread_rwlock_rdlock(&r->read_lock);
			st = atomic_load_explicit(&r->state[first + i], memory_order_acquire);
			if (st & F_EVENT)
				break;
		}
		claimed += ev->claimed[i];
	}
	pthread_rwlock_unlock(&r->read_lock);
	if (!claimed)
		return 0;
	TEST_POINT(TP_EVICT_CLAIMED);
	/* The staging area takes moved pages only while it is registered with us. */
	if (stage_register(r, n * r->unit, 1)) {
		for (uint64_t i = 0; i < n; i++)
			if (ev->claimed[i])
				unit_release(r, first + i,
					     ev->partial[i] ? ST_EVICTED : ST_RESIDENT, 0, 0);
		return 0;
	}
	for (uint64_t i = 0; i < n;) {
		uint64_t j = i;
		int err;

		if (!ev->claimed[i]) {
			i++;
			continue;
		}
		while (j < n && ev->claimed[j])
			j++;
		/* The run in one call; what it refused, unit by unit. */
		i += move_held(r, staged(ev, i), unit_addr(r, first + i), (j - i) * r->unit, &err) /
		     r->unit;
		for (; i < j; i++)
			if (move_unit(ev, i))
				ev->ok[i] = 3; /* not whole: goes back (ok is set again below) */
	}
	(void)stage_register(r, n * r->unit, 0);
	for (uint64_t i = 0; i < n; i++) {
		if (ev->ok[i] == 3 || (ev->claimed[i] && ev->partial[i] && fill_partial(ev, i))) {
			ev->ok[i] = 0;
			give_back(ev, i);
			ev->claimed[i] = 0;
			claimed--;
		}
	}
	TEST_POINT(TP_EVICT_MOVED);
	return claimed;
}

/*
 * Evicts the units of [first, first + n) that are resident (sel NULL) or selected (sel[i]),
 * under evict_lock, n * unit at most RG_CHUNK. Returns the units evicted.
 */
uint64_t region_evict_chunk(zf_region *r, uint64_t first, uint64_t n, const uint8_t *sel,
			    int reclaim)
{
	uint8_t *claimed = calloc(n, 1), *ok = calloc(n, 1), *partial = calloc(n, 1);
	struct evict ev = {
		.r = r, .first = first, .claimed = claimed, .ok = ok, .partial = partial
	};
	uint64_t evicted = 0;

	if (!claimed || !ok || !partial || !claim_and_move(&ev, n, sel, reclaim))
		goto out;
	/* Store: clean units have their copy already; the rest in runs, from staging. */
	for (uint64_t i = 0; i < n;) {
		uint64_t j = i;

		if (!claimed[i]) {
			i++;
			continue;
		}
		if (atomic_load_explicit(&r->state[first + i], memory_order_relaxed) & F_CLEAN) {
			ok[i++] = 2;
			continue;
		}
		while (j < n && claimed[j] &&
		       !(atomic_load_explicit(&r->state[first + j], memory_order_relaxed) &
			 F_CLEAN))
			j++;
		store_run(&ev, i, j - i);
		i = j;
	}
	while (ev.puts)
		evict_finish_put(&ev);
	TEST_POINT(TP_EVICT_STORED);
	evict_settle(&ev, n);
	/* Unregistered: dropping staging raises no event. */
	(void)madvise(r->evict_stage, n * r->unit, MADV_DONTNEED);
	evicted = ev.evicted;
	if (evicted) {
		resident_sub(r, evicted, ev.forked);
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
	const size_t chunk_units = ZF_MAX(RG_CHUNK / (r ? r->unit : 1), 1);

	RETURN_IF(!r || !len, -EINVAL);
	RETURN_IF((uint8_t *)addr < r->base || (uint8_t *)addr + len > r->base + r->size, -EINVAL);
	first = (uint64_t)((uint8_t *)addr - r->base) >> (r->order + 12);
	last = (uint64_t)((uint8_t *)addr + len - 1 - r->base) >> (r->order + 12);
	pthread_mutex_lock(&r->evict_lock);
	for (uint64_t u = first; u <= last; u += chunk_units)
		evicted += region_evict_chunk(r, u, ZF_MIN(chunk_units, last + 1 - u), NULL, 0);
	pthread_mutex_unlock(&r->evict_lock);
	return (long)evicted;
}

#ifdef ZF_TEST_HOOKS
int region_test_zap_page(zf_region *r, void *addr)
{
	int err;

	pthread_mutex_lock(&r->evict_lock);
	err = stage_register(r, RG_PAGE, 1);
	if (!err) {
		pthread_rwlock_rdlock(&r->read_lock);
		if (region_move(r, r->evict_stage, addr, RG_PAGE, RG_EAGAIN_TRIES, &err) !=
			    RG_PAGE &&
		    !err)
			err = -ENOENT;
		pthread_rwlock_unlock(&r->read_lock);
		(void)stage_register(r, RG_PAGE, 0);
		(void)madvise(r->evict_stage, RG_PAGE, MADV_DONTNEED);
	}
	pthread_mutex_unlock(&r->evict_lock);
	return err;
}
#endif
