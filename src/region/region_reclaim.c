/*
 * region_reclaim.c - the residency limit, the clock that picks units to evict, and
 * readahead: the region's two background threads.
 *
 * A fault takes room for its unit before it brings it in (resident_reserve(),
 * region_internal.h); past the limit (zf_region_options.limit) it kicks the reclaim
 * thread, which evicts a batch (reclaim_batch) and wakes the faults that waited for
 * room. A fault that finds no room waits (NOROOM) instead of going over, unless reclaim
 * found nothing at all to evict: then faults are let through (admit_over) rather than
 * hang.
 *
 * Access information: faults only. The clock's referenced bit is set when a unit is
 * faulted or zero-filled and by ZF_ADV_HOT, and cleared by the hand: reads of a resident
 * unit are invisible without a fault, and scanning for them (soft-dirty, page_idle,
 * PAGEMAP_SCAN) would cost a pass over page tables per reclaim for information that a
 * compressed tier, whose residents were all faulted recently, mostly has already.
 * UFFD_FEATURE_WP_ASYNC was not used: it resolves write-protect faults in the kernel,
 * and the eviction protocol needs writers to wait.
 *
 * Readahead (whole-unit swap-in only): a major fault on unit u right after one on u - 1,
 * or one that passes units read ahead (F_RA: hits), asks the readahead thread for the
 * next zf_region_options.readahead units. With frames the same thread writes the fresh
 * frames that faults opened ahead (fresh_ahead(), region_fault.c) before the program
 * does, so that the kernel zeroes their huge pages beside it.
 *
 * docs/region.md: "Residency limit and reclaim", "Readahead".
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../common/test_point.h"
#include "region_internal.h"

#define RECLAIM_RETRIES 20u /* empty reclaim batches, 0.2 ms apart, before faults go over */

/*
 * Wakes the reclaim thread: the region went past its limit, or a fault found no room. A
 * group's member wakes every member's (each evicts its share).
 */
void region_reclaim_kick(zf_region *r)
{
	if (r->group) {
		atomic_store(&r->room_wanted, 1);
		group_kick(r->group);
		return;
	}
	pthread_mutex_lock(&r->bg_lock);
	r->reclaim_kick = 1;
	pthread_cond_broadcast(&r->bg_cond);
	pthread_mutex_unlock(&r->bg_lock);
}

/* Whether reclaim may pick a unit: resident, or partly swapped in page by page. */
static int evictable(uint32_t st)
{
	if (st & F_EVENT)
		return 0;
	return (st & ST_MASK) == ST_RESIDENT || ((st & ST_MASK) == ST_EVICTED && (st & F_PARTIAL));
}

/*
 * One reclaim batch of want units: cold units first, then the clock (a referenced unit
 * loses its bit and is passed once). Returns the units evicted.
 */
static uint64_t reclaim_batch(zf_region *r, uint64_t want)
{
	uint8_t *sel = calloc(r->nunits, 1);
	uint64_t picked = 0, evicted = 0;

	if (!sel)
		return 0;
	pthread_mutex_lock(&r->evict_lock);
	if (atomic_load_explicit(&r->cold_units, memory_order_relaxed)) {
		for (uint64_t u = 0; u < r->nunits && picked < want; u++) {
			uint32_t st = atomic_load_explicit(&r->state[u], memory_order_relaxed);

			if (evictable(st) && (st & F_COLD) && !sel[u] &&
			    !region_doubt_left(r, u, 0)) {
				sel[u] = 1;
				picked++;
			}
		}
	}
	for (uint64_t scanned = 0; picked < want && scanned < 3 * r->nunits; scanned++) {
		const uint64_t u = r->hand;
		uint32_t st = atomic_load_explicit(&r->state[u], memory_order_relaxed);

		r->hand = (r->hand + 1) % r->nunits;
		if (!evictable(st) || sel[u] || region_doubt_left(r, u, 0))
			continue;
		if (st & (F_REF | F_HOT)) {
			/* Second chance; a hot unit gets a third (its F_HOT goes first). */
			atomic_fetch_and_explicit(&r->state[u], (st & F_HOT) ? ~F_HOT : ~F_REF,
						  memory_order_relaxed);
			continue;
		}
		sel[u] = 1;
		picked++;
	}
	if (picked) {
		/* Evict the selected units in address order, a chunk at a time. */
		const uint64_t chunk = ZF_MAX(RG_CHUNK / r->unit, 1);

		for (uint64_t u = 0; u < r->nunits; u += chunk) {
			const uint64_t m = ZF_MIN(chunk, r->nunits - u);

			if (memchr(sel + u, 1, m))
				evicted += region_evict_chunk(r, u, m, sel + u, 1);
		}
	}
	pthread_mutex_unlock(&r->evict_lock);
	free(sel);
	return evicted;
}

/*
 * Whether a reclaim batch that evicted nothing may yet evict something: some unit is
 * being evicted, brought in or held by an event, or is evictable now (it was not when
 * the batch looked: a fault or a write had it for a moment).
 */
static int units_may_come_free(zf_region *r)
{
	for (uint64_t u = 0; u < r->nunits; u++) {
		const uint32_t st = atomic_load_explicit(&r->state[u], memory_order_relaxed);

		if ((st & ST_MASK) == ST_EVICTING || (st & ST_MASK) == ST_LOADING ||
		    (st & F_EVENT) || (evictable(st) && !region_doubt_left(r, u, 0)))
			return 1;
	}
	return 0;
}

/* Faults that found no room fault again (thread mode), or look again (SIGBUS mode). */
static void wake_room_waiters(zf_region *r)
{
	wake_range(r, r->base, r->size);
	atomic_fetch_add_explicit(&r->resident_seq, 1, memory_order_release);
	futex_wake_all(&r->resident_seq);
}

/* A group's member: publishes its counters for a reader of the group. */
static void answer(zf_region *r)
{
	zf_region_stats rs;
	zf_store_stats ss;

	if (!zf_region_get_stats(r, &rs, sizeof(rs)) &&
	    !zf_store_get_stats(r->store, &ss, sizeof(ss)))
		group_publish(r->group, r->group_slot, &rs, &ss);
}

/*
 * A group's member's reclaim thread. Woken by any member's kick (the group went over its
 * limit, a fault found no room, a member made room, a reader asks for counters), it
 * answers a request, evicts this region's share of what the group holds over its limit
 * a batch at a time, kicks the others when it evicted something, and wakes this region's
 * faults waiting for room once there is room. Faults wait for room as long as some
 * member makes progress; when none has evicted anything for RECLAIM_RETRIES waits
 * (0.2 ms each) and none is evicting, they go over rather than hang.
 */
static void group_reclaim_main(zf_region *r)
{
	zf_group *g = r->group;
	uint64_t progress = 0, seen;
	unsigned stuck = 0;

	while (!atomic_load(&r->bg_stopping)) {
		const uint32_t seq = group_seq(g);
		int waiting;

		if (group_asked(g, r->group_slot))
			answer(r);
		if (over_limit(r)) {
			uint64_t share, got = 0, units;

			group_reap(g);
			while (!atomic_load(&r->bg_stopping) &&
			       (share = group_share(g, r->group_slot)) > 0) {
				units = ZF_MIN((share + r->unit - 1) / r->unit, r->batch_units);
				group_reclaiming(g, 1);
				got = reclaim_batch(r, units);
				group_reclaiming(g, -1);
				if (!got)
					break;
				group_reclaimed(g, got * r->unit);
				group_kick(g); /* room: members with faults waiting look again */
				if (group_asked(g, r->group_slot))
					answer(r);
			}
		}
		waiting = atomic_load(&r->room_wanted);
		if (room_for_one(r)) {
			if (!over_limit(r))
				atomic_store(&r->admit_over, 0);
			if (waiting) {
				atomic_store(&r->room_wanted, 0);
				wake_room_waiters(r);
			}
			stuck = 0;
		} else if (waiting) {
			/* No room: is anyone getting anywhere? */
			if (group_busy(g, &seen) || seen != progress) {
				progress = seen;
				stuck = 0;
			} else if (++stuck > RECLAIM_RETRIES) {
				atomic_store(&r->admit_over, 1);
				atomic_store(&r->room_wanted, 0);
				wake_room_waiters(r);
				stuck = 0;
			}
		}
		group_wait(g, seq, waiting ? 200000 : 1000000000);
	}
}

void *region_reclaim_main(void *arg)
{
	zf_region *r = arg;
	int woke;

	if (r->group) {
		group_reclaim_main(r);
		return NULL;
	}

	pthread_mutex_lock(&r->bg_lock);
	while (!r->bg_stop) {
		uint64_t got;

		if (!r->reclaim_kick) {
			pthread_cond_wait(&r->bg_cond, &r->bg_lock);
			continue;
		}
		r->reclaim_kick = 0;
		pthread_mutex_unlock(&r->bg_lock);
		woke = 0;
		for (unsigned empty = 0; over_limit(r);) {
			got = reclaim_batch(r, r->batch_units);
			empty = got ? 0 : empty + 1;
			/*
			 * Units in flux are evictable in a moment: no overshoot for that. Units
			 * that stay unevictable (a store that refuses everything) must not hang
			 * the faults: after RECLAIM_RETRIES empty batches in a row, let them in.
			 */
			if (!got && empty <= RECLAIM_RETRIES && units_may_come_free(r) &&
			    !atomic_load(&r->bg_stopping)) {
				struct timespec ts = { 0, 200000 };

				nanosleep(&ts, NULL);
				continue;
			}
			/* Nothing evictable at all: let faults through rather than hang them. */
			atomic_store(&r->admit_over, got == 0);
			/* Faults left waiting for room (thread mode) fault again now. */
			wake_room_waiters(r);
			woke = 1;
			if (!got)
				break;
		}
		/*
		 * A kick may come from a fault that found no room, and the room may have come
		 * meanwhile from elsewhere (a pageout, a DONTNEED), before this thread looked: with
		 * nothing left to reclaim, that fault still waits to be woken (region_stress hung
		 * so, "thread 64k readahead", with two instances at once on two CPUs).
		 */
		if (!woke)
			wake_room_waiters(r);
		if (atomic_load(&r->resident) <= r->limit_units)
			atomic_store(&r->admit_over, 0); /* under the limit again */
		pthread_mutex_lock(&r->bg_lock);
	}
	pthread_mutex_unlock(&r->bg_lock);
	return NULL;
}

/* Readahead bookkeeping for a major fault on unit u: hits, and the next window. */
void region_readahead_note(zf_region *r, uint64_t u)
{
	const uint64_t last = atomic_exchange_explicit(&r->ra_last, u + 1, memory_order_relaxed);
	int sequential = last == u; /* the previous fault was on u - 1 */

	if (!r->want_reader)
		return;
	/* Units read ahead that the faults have moved past were used: hits. */
	for (uint64_t v = u; v-- > 0 && u - v <= r->o.readahead;) {
		uint32_t st = atomic_load_explicit(&r->state[v], memory_order_relaxed);

		if (!(st & F_RA))
			break;
		atomic_fetch_and_explicit(&r->state[v], ~F_RA, memory_order_relaxed);
		INC(r, swap_ra_hit);
		sequential = 1;
	}
	if (!sequential || u + 1 >= r->nunits)
		return;
	pthread_mutex_lock(&r->bg_lock);
	r->ra_next = u + 1;
	r->ra_end = ZF_MIN(u + 1 + r->o.readahead, r->nunits);
	pthread_cond_broadcast(&r->bg_cond);
	pthread_mutex_unlock(&r->bg_lock);
}

/* Fresh frames [first, end) opened ahead of the program (fresh_ahead()), to write first. */
void region_fill_note(zf_region *r, uint64_t first, uint64_t end)
{
	if (!r->want_filler)
		return;
	pthread_mutex_lock(&r->bg_lock);
	/*
	 * Where the program goes on in order, the range grows (the frames before first it
	 * has reached, those the reader did are not done again); elsewhere, these instead.
	 */
	if (first <= r->fill_end && end > r->fill_next) {
		r->fill_next = ZF_MAX(r->fill_next, first);
		r->fill_end = ZF_MAX(r->fill_end, end);
	} else {
		r->fill_next = first;
		r->fill_end = end;
	}
	pthread_cond_broadcast(&r->bg_cond);
	pthread_mutex_unlock(&r->bg_lock);
}

/*
 * Writes fresh frame u, opened ahead of the program, before the program does: the kernel
 * zeroes its huge page here, on the other CPU, rather than in the program's first write
 * (fresh huge pages cost 2-5 ms each on this machine class: FIRST-TOUCH.md). Neither
 * claimed nor under read_lock: a claim would make a fault of this thread's, on a unit
 * evicted or dropped since the look, wait for itself (the service thread serves it after
 * the claim). Such a fault is served as any (thread mode), or fails (SIGBUS mode: no
 * signal for MADV_POPULATE_WRITE); the cost is a frame brought in for nothing. A frame
 * the program wrote already costs a walk of its page table.
 */
static void fill_fresh(zf_region *r, uint64_t u)
{
	const uint32_t st = atomic_load_explicit(&r->state[u], memory_order_acquire);

	if ((st & ST_MASK) != ST_RESIDENT || (st & (F_EVENT | F_PARTIAL)))
		return;
	TEST_POINT(TP_FILL_SEEN);
	if (!madvise(unit_addr(r, u), r->unit, MADV_POPULATE_WRITE))
		INC(r, fresh_filled);
}

/* The reader: readahead first, then fresh frames to fill. */
void *region_readahead_main(void *arg)
{
	zf_region *r = arg;

	pthread_mutex_lock(&r->bg_lock);
	while (!r->bg_stop) {
		uint64_t u;

		if (r->ra_next >= r->ra_end && r->fill_next < r->fill_end) {
			u = r->fill_next++;
			pthread_mutex_unlock(&r->bg_lock);
			fill_fresh(r, u);
			pthread_mutex_lock(&r->bg_lock);
			continue;
		}
		if (r->ra_next >= r->ra_end) {
			pthread_cond_wait(&r->bg_cond, &r->bg_lock);
			continue;
		}
		u = r->ra_next++;
		pthread_mutex_unlock(&r->bg_lock);
		if ((atomic_load_explicit(&r->state[u], memory_order_relaxed) &
		     (ST_MASK | F_PARTIAL)) == ST_EVICTED &&
		    room_for_one(r)) {
			fork_gate_enter(r);
			(void)region_swap_in(r, &r->ra_ctx, u, unit_addr(r, u), 1);
			fork_gate_leave(r);
		}
		pthread_mutex_lock(&r->bg_lock);
	}
	pthread_mutex_unlock(&r->bg_lock);
	return NULL;
}
