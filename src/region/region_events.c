/*
 * region_events.c - the program's madvise(), munmap() and mremap() on region memory, as
 * userfaultfd events (EVENT_REMOVE, EVENT_UNMAP, EVENT_REMAP).
 *
 * The kernel holds the program's call until a service thread has read the event, and
 * the program goes on before the event is handled: an event is handled under read_lock
 * (exclusive), before the faults read with it, so that a later fault sees its effect.
 *
 * REMOVE (madvise DONTNEED of the program) turns covered units EMPTY and drops
 * their stored copies; a partly covered evicted unit is read back, the covered part
 * zeroed, and stored again. UNMAP drops the units (GONE). REMAP (mremap moving region
 * memory away): the moved units' stored data is placed at the new address, the new
 * range is unregistered, and the units leave the region (GONE). An event that finds a
 * unit in transition (EVICTING, LOADING) is deferred until the owner is done, and faults
 * on the unit wait for it (F_EVENT).
 *
 * Deferred events wait, in order, in r->deferred (under read_lock); the service thread
 * retries them before each read. Our own MADV_DONTNEED (region_evict.c, drop_pages())
 * raises REMOVE events too: the first REMOVE of exactly the range it published is ours
 * (self_remove()), and over split VMAs the pieces are taken back from the deferred ones
 * (region_take_back_deferred()).
 *
 * docs/region.md: "The program's madvise, munmap and mremap"; failure modes, rows 5, 13
 * and 15.
 */
#include <string.h>
#include <sys/mman.h>

#include "region_internal.h"

#define RG_ZAP_WAIT_NS 100000000u /* how long a REMOVE waits for the program's zap */

/*
 * Takes units [u0, u1) for an event (F_EVENT: nobody can claim them, faults wait) and
 * says whether one is still in a transition that began before (the event then waits).
 */
static int units_busy(zf_region *r, uint64_t u0, uint64_t u1)
{
	int busy = 0;

	for (uint64_t u = u0; u < u1; u++) {
		uint32_t st = atomic_fetch_or_explicit(&r->state[u], F_EVENT, memory_order_acq_rel);

		busy |= (st & ST_MASK) == ST_EVICTING || (st & ST_MASK) == ST_LOADING;
	}
	return busy;
}

/* Ends an event on [u0, u1): units leave F_EVENT, waiters are woken. */
static void units_event_done(zf_region *r, uint64_t u0, uint64_t u1)
{
	for (uint64_t u = u0; u < u1; u++) {
		uint32_t old = atomic_fetch_and_explicit(&r->state[u], ~(F_EVENT | F_WAIT),
							 memory_order_acq_rel);

		if (old & F_WAIT) {
			futex_wake_all(&r->state[u]);
			wake_range(r, unit_addr(r, u), r->unit);
		}
	}
}

/* Sets unit u's state to st, settling residency and cold accounting. */
static void unit_set_settled(zf_region *r, uint64_t u, uint32_t st)
{
	uint32_t old = atomic_load_explicit(&r->state[u], memory_order_relaxed);

	while (!atomic_compare_exchange_weak_explicit(&r->state[u], &old,
						      (old & (F_EVENT | F_WAIT)) | st,
						      memory_order_acq_rel, memory_order_relaxed))
		;
	if ((old & ST_MASK) == ST_RESIDENT || (old & F_PARTIAL))
		resident_add(r, -1);
	if (old & F_COLD)
		atomic_fetch_sub_explicit(&r->cold_units, 1, memory_order_relaxed);
}

/* Whether a page of [start, end) (clipped to the region) is in memory. */
static int range_populated(zf_region *r, uintptr_t start, uintptr_t end)
{
	unsigned char vec[512];
	uintptr_t a = ZF_MAX(start, (uintptr_t)r->base) & ~(uintptr_t)(RG_PAGE - 1);
	const uintptr_t b = ZF_MIN(end, (uintptr_t)(r->base + r->size));

	while (a < b) {
		const size_t len = ZF_MIN(b - a, sizeof(vec) * RG_PAGE);

		if (mincore((void *)a, len, vec))
			return 0;
		for (size_t p = 0; p < (len + RG_PAGE - 1) / RG_PAGE; p++)
			if (vec[p] & 1)
				return 1;
		a += len;
	}
	return 0;
}

/*
 * The program dropped [start, end) (REMOVE) or unmapped it (UNMAP: gone). Returns 0, or
 * -EAGAIN to be retried later (a unit is in transition, or the layout is changing).
 */
static int event_drop(zf_region *r, struct fault_ctx *c, uintptr_t start, uintptr_t end, int unmap,
		      uint64_t since)
{
	uint64_t u0, u1;

	if (!units_of(r, start, end, &u0, &u1))
		return 0;
	if (units_busy(r, u0, u1))
		return -EAGAIN;
	/*
	 * The program zaps after its REMOVE event is read, so after we are called. Until
	 * it has, an eviction could still read what it drops and bring it back: the units
	 * stay held until the pages are gone (bounded, for a madvise that failed midway).
	 */
	if (!unmap && range_populated(r, start, end) && now_ns() - since < RG_ZAP_WAIT_NS)
		return -EAGAIN;
	for (uint64_t u = u0; u < u1; u++) {
		const uintptr_t ua = (uintptr_t)unit_addr(r, u), ue = ua + r->unit;
		const int whole = start <= ua && end >= ue;
		uint32_t st = atomic_load_explicit(&r->state[u], memory_order_acquire);
		const uint32_t s = st & ST_MASK;

		if (s == ST_GONE)
			continue;
		if (s == ST_EMPTY) {
			if (unmap)
				unit_set_settled(r, u, ST_GONE);
			continue;
		}
		if (whole) {
			if (s == ST_EVICTED || (st & F_CLEAN))
				zf_store_invalidate(r->store, r->owner, unit_index(r, u),
						    r->unit_pages);
			unit_set_settled(r, u, unmap ? ST_GONE : ST_EMPTY);
			continue;
		}
		if (s == ST_RESIDENT) {
			/* Part of a clean unit dropped: its copy is stale; the rest stays. */
			if (st & F_CLEAN) {
				zf_store_invalidate(r->store, r->owner, unit_index(r, u),
						    r->unit_pages);
				atomic_fetch_and_explicit(&r->state[u], ~F_CLEAN,
							  memory_order_relaxed);
				(void)protect(r, (uint8_t *)ua, r->unit, 0);
			}
			if (unmap)
				unit_set_settled(r, u, ST_GONE);
			continue;
		}
		/* Part of an evicted unit: keep the other pages' data. */
		if (region_load_data(r, c, u, -1)) {
			common_log(ZF_LOG_WARN, "region: cannot read unit %llu for a partial drop",
				   (unsigned long long)u);
			continue;
		}
		if (unmap) {
			/* The unmapped part is gone; the rest must be in place. */
			for (uintptr_t p = ua; p < ue; p += RG_PAGE) {
				int ret;

				if (p >= start && p < end)
					continue;
				ret = region_place(r, (uint8_t *)p, c->buf + (p - ua), RG_PAGE, 0);
				if (ret == -EAGAIN)
					return -EAGAIN;
			}
			zf_store_invalidate(r->store, r->owner, unit_index(r, u), r->unit_pages);
			unit_set_settled(r, u, ST_GONE);
			continue;
		}
		memset(c->buf + (ZF_MAX(start, ua) - ua), 0, ZF_MIN(end, ue) - ZF_MAX(start, ua));
		if (zf_store_put(r->store, r->owner, unit_index(r, u), c->buf, r->unit))
			common_log(ZF_LOG_WARN,
				   "region: unit %llu: partial drop not stored; old data kept",
				   (unsigned long long)u);
	}
	units_event_done(r, u0, u1);
	return 0;
}

/*
 * mremap moved [from, from + len) to to: evicted units' data goes to the new address,
 * which is then unregistered (it is outside the region); the units are GONE.
 */
static int event_remap(zf_region *r, struct fault_ctx *c, uintptr_t from, uintptr_t to, size_t len)
{
	uint64_t u0, u1;

	if (!units_of(r, from, from + len, &u0, &u1))
		return 0;
	if (units_busy(r, u0, u1))
		return -EAGAIN;
	for (uint64_t u = u0; u < u1; u++) {
		const uintptr_t ua = (uintptr_t)unit_addr(r, u);
		uint32_t st = atomic_load_explicit(&r->state[u], memory_order_acquire);

		if ((st & ST_MASK) == ST_EVICTED) {
			if (region_load_data(r, c, u, -1)) {
				common_log(ZF_LOG_WARN, "region: cannot read unit %llu for mremap",
					   (unsigned long long)u);
				continue;
			}
			for (uintptr_t p = ua; p < ua + r->unit; p += RG_PAGE) {
				uint8_t *dst =
					(uint8_t *)(p >= from && p < from + len ? to + (p - from)
										: p);

				if (region_place(r, dst, c->buf + (p - ua), RG_PAGE, 0) == -EAGAIN)
					return -EAGAIN;
			}
		}
		if ((st & ST_MASK) == ST_EVICTED || (st & F_CLEAN))
			zf_store_invalidate(r->store, r->owner, unit_index(r, u), r->unit_pages);
		unit_set_settled(r, u, ST_GONE);
	}
	{
		struct uffdio_range rg = { .start = to, .len = len };
		struct uffdio_writeprotect w = { .range = rg, .mode = 0 };

		(void)uffd_range(r, UFFDIO_WRITEPROTECT, &w);
		(void)uffd_range(r, UFFDIO_UNREGISTER, &rg);
	}
	units_event_done(r, u0, u1);
	return 0;
}

/* Whether an event is the REMOVE of our own MADV_DONTNEED (drop_pages()). Under read_lock. */
static int self_remove(zf_region *r, const struct uffd_msg *m)
{
	if (m->event != UFFD_EVENT_REMOVE || !r->self_pending ||
	    m->arg.remove.start != r->self_start ||
	    m->arg.remove.end - m->arg.remove.start != r->self_len)
		return 0;
	r->self_pending = 0;
	return 1;
}

/* Handles an event message; -EAGAIN: keep it for later. Under read_lock. */
static int handle_event(zf_region *r, struct fault_ctx *c, const struct uffd_msg *m, uint64_t since)
{
	switch (m->event) {
	case UFFD_EVENT_REMOVE:
		if (event_drop(r, c, m->arg.remove.start, m->arg.remove.end, 0, since))
			return -EAGAIN;
		INC(r, ev_remove); /* counted when handled: deferred ones may turn out ours */
		return 0;
	case UFFD_EVENT_UNMAP:
		if (event_drop(r, c, m->arg.remove.start, m->arg.remove.end, 1, since))
			return -EAGAIN;
		INC(r, ev_unmap);
		return 0;
	case UFFD_EVENT_REMAP: {
		const int ret =
			event_remap(r, c, m->arg.remap.from, m->arg.remap.to, m->arg.remap.len);

		if (!ret) {
			atomic_fetch_sub(&r->remaps_pending, 1);
			INC(r, ev_remap);
		}
		return ret;
	}
	default:
		return 0;
	}
}

/* Marks the units of an event that must wait (F_EVENT), as units_busy() does. */
static void event_hold(zf_region *r, const struct uffd_msg *m)
{
	uintptr_t a = m->arg.remove.start, b = m->arg.remove.end;
	uint64_t u0, u1;

	if (m->event == UFFD_EVENT_REMAP) {
		a = m->arg.remap.from;
		b = a + m->arg.remap.len;
	}
	if (units_of(r, a, b, &u0, &u1))
		(void)units_busy(r, u0, u1);
}

/* Retries deferred events, in order; an event still blocked keeps the later ones waiting. */
void region_retry_deferred(zf_region *r, struct fault_ctx *c)
{
	unsigned done = 0;

	while (done < r->ndeferred &&
	       !handle_event(r, c, &r->deferred[done].msg, r->deferred[done].since))
		done++;
	memmove(r->deferred, r->deferred + done, (r->ndeferred - done) * sizeof(r->deferred[0]));
	r->ndeferred -= done;
}

/*
 * drop_pages() saw none of its REMOVE events match (split VMAs): the deferred REMOVE
 * events inside [start, end) are its own; drop them and free their units. Under read_lock.
 */
void region_take_back_deferred(zf_region *r, uintptr_t start, uintptr_t end)
{
	unsigned kept = 0;
	uint64_t u0, u1;

	for (unsigned i = 0; i < r->ndeferred; i++) {
		const struct uffd_msg *m = &r->deferred[i].msg;

		if (m->event == UFFD_EVENT_REMOVE && m->arg.remove.start >= start &&
		    m->arg.remove.end <= end)
			continue;
		r->deferred[kept++] = r->deferred[i];
	}
	r->ndeferred = kept;
	if (!units_of(r, start, end, &u0, &u1))
		return;
	/* Units no other deferred event waits for leave F_EVENT. */
	for (uint64_t u = u0; u < u1; u++) {
		const uintptr_t ua = (uintptr_t)unit_addr(r, u), ue = ua + r->unit;
		int held = 0;

		for (unsigned i = 0; i < r->ndeferred && !held; i++) {
			const struct uffd_msg *m = &r->deferred[i].msg;
			uintptr_t a = m->arg.remove.start, b = m->arg.remove.end;

			if (m->event == UFFD_EVENT_REMAP) {
				a = m->arg.remap.from;
				b = a + m->arg.remap.len;
			}
			held = a < ue && b > ua;
		}
		if (!held)
			units_event_done(r, u, u + 1);
	}
}

/*
 * Handles the events among msgs[0..n) (page faults are the caller's), in order. One that
 * must wait for units in transition, or comes after one that does, is deferred, and its
 * units are held from now on. Caller holds read_lock exclusively.
 */
void region_handle_events(zf_region *r, struct fault_ctx *c, const struct uffd_msg *msgs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (msgs[i].event == UFFD_EVENT_PAGEFAULT || self_remove(r, &msgs[i]))
			continue;
		if (msgs[i].event == UFFD_EVENT_REMAP) {
			atomic_store(&r->remapped, 1);
			atomic_fetch_add(&r->remaps_pending, 1);
		}
		const uint64_t read_at = now_ns();

		if (r->ndeferred || handle_event(r, c, &msgs[i], read_at) == -EAGAIN) {
			/* Its units wait with it, from now: no claim, faults wait. */
			event_hold(r, &msgs[i]);
			if (r->ndeferred < RG_DEFERRED) {
				r->deferred[r->ndeferred].since = read_at;
				r->deferred[r->ndeferred++].msg = msgs[i];
			} else {
				/* Too many: wait for the transitions to end (an
				 * evictor needs read_lock to end its own). */
				do {
					pthread_rwlock_unlock(&r->read_lock);
					sched_yield();
					pthread_rwlock_wrlock(&r->read_lock);
					region_retry_deferred(r, c);
				} while (r->ndeferred == RG_DEFERRED);
				r->deferred[r->ndeferred].since = read_at;
				r->deferred[r->ndeferred++].msg = msgs[i];
			}
		}
	}
}
