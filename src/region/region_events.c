/*
 * region_events.c - the program's madvise(), munmap() and mremap() on region memory, as
 * userfaultfd events (EVENT_REMOVE, EVENT_UNMAP, EVENT_REMAP).
 *
 * The kernel holds the program's call until a service thread has read the event, and
 * the program goes on before the event is handled. Events are handled in the order they
 * were read, under read_lock (exclusive), before the faults read with them, so that a
 * later fault sees their effect. Every event read joins a queue (r->queue); its units
 * are held from then on (F_EVENT: nobody claims them, faults wait), and it is handled
 * at the head of the queue once none of its units is in a transition (EVICTING,
 * LOADING); the service thread retries before each read.
 *
 * REMOVE (madvise DONTNEED of the program) turns covered units EMPTY and drops their
 * stored copies; a partly covered evicted unit is read back, the covered part zeroed,
 * and stored again. The program zaps its pages only after the event is read, so
 * resident pages may still be there when it is handled: the event waits for the zap
 * (zap_pending()), so that no eviction can store what the program dropped. UNMAP drops
 * the units (GONE). REMAP (mremap moving region memory away): the moved units' stored
 * data is placed at the new address, and the units leave the region (GONE). The memory
 * that moved stays registered with us until the region is destroyed: its faults are
 * served as plain memory's (region_fault.c).
 *
 * Placing a page where the program's memory is now (place_followed()): events queued
 * behind the one handled may have moved that memory on (mremap away and back) or
 * dropped it; the page follows them.
 *
 * The events are read in the order threads got to send them, which is not always the
 * order in which they changed the layout: each queued event has its place in that order
 * (qseq, given by region_order.c as it is read), and following a page (region_follow(),
 * zap_pending()) takes only the events that changed the layout after the one it starts
 * from.
 *
 * docs/region.md: "The program's madvise, munmap and mremap"; failure modes, rows 5, 13,
 * 15, 16 and 18.
 */
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/test_point.h"
#include "region_internal.h"
#include "region_test.h"

/* Whether an event queued after position i covers unit u. */
static int held_later(zf_region *r, unsigned i, uint64_t u)
{
	const uintptr_t ua = (uintptr_t)unit_addr(r, u), ue = ua + r->unit;

	for (unsigned k = i + 1; k < r->nqueue; k++) {
		uintptr_t a, b;

		region_event_range(&r->queue[k], &a, &b);
		if (a < ue && b > ua)
			return 1;
	}
	return 0;
}

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

/*
 * Ends event i of the queue on [u0, u1): units no later event holds leave F_EVENT, and
 * their waiters are woken.
 */
static void units_event_done(zf_region *r, unsigned i, uint64_t u0, uint64_t u1)
{
	for (uint64_t u = u0; u < u1; u++) {
		uint32_t old;

		if (held_later(r, i, u))
			continue;
		old = atomic_fetch_and_explicit(&r->state[u], ~(F_EVENT | F_WAIT),
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
		resident_sub(r, 1, (old & F_FORKED) != 0);
	if (old & F_COLD)
		atomic_fetch_sub_explicit(&r->cold_units, 1, memory_order_relaxed);
}

/*
 * Places a page of data that belongs at addr (as of queue position i) where the
 * program's memory is now. Returns 0 (placed, or nothing to place: the page is there
 * already, or was dropped or unmapped since), or -EAGAIN (another event is coming: the
 * caller retries once it is read). Under read_lock.
 */
static int place_followed(zf_region *r, int i, uintptr_t addr, const uint8_t *src)
{
	int dropped;
	const uintptr_t to = region_follow(r, i, addr, &dropped);
	int ret;

	if (!to || dropped)
		return 0;
	ret = region_place(r, (uint8_t *)to, src, RG_PAGE, 0);
	/*
	 * Not -EAGAIN: the events read account for the layout, so no memory there is
	 * memory of ours an event has yet to tell about: it is gone.
	 */
	return ret == -EAGAIN ? -EAGAIN : 0;
}

int region_moved_on(zf_region *r, uintptr_t start, uintptr_t end)
{
	for (unsigned k = 0; k < r->nqueue; k++) {
		uintptr_t a, b;

		region_event_range(&r->queue[k], &a, &b);
		if (r->queue[k].event != UFFD_EVENT_REMOVE && a < end && b > start)
			return 1;
	}
	return 0;
}

void region_put_back(zf_region *r, uint8_t *addr, const uint8_t *src, size_t len)
{
	unsigned char vec[ZF_UNIT_MAX / RG_PAGE];

	for (size_t off = 0; off < len; off += ZF_UNIT_MAX) {
		const size_t n = ZF_MIN(len - off, ZF_UNIT_MAX);

		/* Only the pages that moved out are ours to put back. */
		if (mincore((void *)(src + off), n, vec))
			continue;
		for (size_t p = 0; p < n / RG_PAGE; p++) {
			const size_t o = off + p * RG_PAGE;
			int ret;

			if (!(vec[p] & 1))
				continue;
			/*
			 * Where its memory is now, unless an event since dropped it (a program's
			 * DONTNEED whose zap came before: putting the page back would outlive
			 * the zap) or unmapped it; -EAGAIN: an event is coming, read it first.
			 */
			do {
				pthread_rwlock_wrlock(&r->read_lock);
				ret = place_followed(r, -1, (uintptr_t)(addr + o), src + o);
				pthread_rwlock_unlock(&r->read_lock);
				if (ret)
					sched_yield();
			} while (ret);
		}
	}
}

/* Whether a page of [a, b) (within a unit) is mapped. */
static int pages_present(uintptr_t a, uintptr_t b)
{
	unsigned char vec[ZF_UNIT_MAX / RG_PAGE];

	if (a >= b || mincore((void *)a, b - a, vec))
		return 0; /* unmapped */
	for (size_t p = 0; p < (b - a) / RG_PAGE; p++)
		if (vec[p] & 1)
			return 1;
	return 0;
}

/*
 * Whether the program's zap of [start, end), a REMOVE of queue position i, is still to
 * come: a page of a resident unit in the range is still there, and no event queued
 * after it took the memory away (an UNMAP or REMAP after it: the zap will not come, or
 * finds nothing). Faults cannot put pages back meanwhile: they wait for the event.
 */
static int zap_pending(zf_region *r, int i, uintptr_t start, uintptr_t end, uint64_t u0,
		       uint64_t u1)
{
	for (unsigned k = (unsigned)(i + 1); k < r->nqueue; k++) {
		uintptr_t a, b;

		region_event_range(&r->queue[k], &a, &b);
		if (r->queue[k].event != UFFD_EVENT_REMOVE && r->qseq[k] > r->qseq[i] && a < end &&
		    b > start)
			return 0;
	}
	for (uint64_t u = u0; u < u1; u++) {
		const uint32_t st = atomic_load_explicit(&r->state[u], memory_order_acquire);
		const uintptr_t ua = (uintptr_t)unit_addr(r, u);

		if ((st & ST_MASK) != ST_RESIDENT && !(st & F_PARTIAL))
			continue;
		if (pages_present(ZF_MAX(start, ua), ZF_MIN(end, ua + r->unit)))
			return 1;
	}
	return 0;
}

/*
 * Unit u keeps pages a REMOVE covered (its zap has not come): resident, its stored data
 * stale (the pages still there are the program's until the zap, and MADV_FREE's stay
 * when written), under doubt until those pages are gone or written (F_DOUBT).
 */
static void unit_doubt(zf_region *r, uint64_t u)
{
	uint32_t old = atomic_load_explicit(&r->state[u], memory_order_relaxed);

	while (!atomic_compare_exchange_weak_explicit(&r->state[u], &old,
						      (old & ~(ST_MASK | F_CLEAN | F_PARTIAL)) |
							      ST_RESIDENT | F_DOUBT,
						      memory_order_acq_rel, memory_order_relaxed))
		;
}

/*
 * The program dropped [start, end) (REMOVE) or unmapped it (UNMAP: gone): event i of
 * the queue. Returns 0, or -EAGAIN to be retried later (a unit is in transition, or the
 * layout is changing).
 */
static int event_drop(zf_region *r, struct fault_ctx *c, int i, uintptr_t start, uintptr_t end,
		      int unmap)
{
	uint64_t u0, u1;
	int unzapped = 0;

	if (!units_of(r, start, end, &u0, &u1))
		return 0;
	if (units_busy(r, u0, u1))
		return -EAGAIN;
	/*
	 * The program zaps after its REMOVE event is read, so maybe after we are called.
	 * Until it has, the units stay held: an eviction could still store what it drops
	 * and bring it back. A MADV_FREE's zap never comes (its pages stay until the kernel
	 * reclaims them, or the program writes them again), and its event looks the same:
	 * after RG_ZAP_WAIT_NS the event goes on without the zap. The pages still there are
	 * write-protected, and their units stay resident under doubt (F_DOUBT): no eviction
	 * takes a unit while such a page is there (region_doubt_left(), region_evict.c);
	 * a write unprotects its page (the program's data again, region_fault.c).
	 */
	if (!unmap && zap_pending(r, i, start, end, u0, u1)) {
		const uintptr_t a = ZF_MAX(start, (uintptr_t)r->base);
		const uintptr_t b = ZF_MIN(end, (uintptr_t)(r->base + r->size));
		int ret;

		if (now_ns() - r->qtime[i] < RG_ZAP_WAIT_NS)
			return -EAGAIN;
		ret = protect(r, (void *)a, b - a, 1);
		if (ret && ret != -ENOENT)
			return -EAGAIN; /* the layout changes: after the next event */
		unzapped = 1;
		INC(r, ev_remove_unzapped);
	}
	for (uint64_t u = u0; u < u1; u++) {
		const uintptr_t ua = (uintptr_t)unit_addr(r, u), ue = ua + r->unit;
		const int whole = start <= ua && end >= ue;
		uint32_t st = atomic_load_explicit(&r->state[u], memory_order_acquire);
		const uint32_t s = st & ST_MASK;
		const int left = unzapped && (s == ST_RESIDENT || (st & F_PARTIAL)) &&
				 pages_present(ZF_MAX(start, ua), ZF_MIN(end, ue));

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
			if (left)
				unit_doubt(r, u);
			else
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
				/* Not the pages left under doubt (protected above). */
				if (!left) {
					(void)protect(r, (uint8_t *)ua, r->unit, 0);
				} else {
					if (start > ua)
						(void)protect(r, (uint8_t *)ua, start - ua, 0);
					if (end < ue)
						(void)protect(r, (uint8_t *)end, ue - end, 0);
				}
			}
			if (left)
				unit_doubt(r, u);
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
		if (unmap || left) {
			/*
			 * The part that stays must be in place: unmapped, the rest is gone;
			 * dropped with pages of it left (swapped in page by page), the unit
			 * becomes resident under doubt, its pages all in place.
			 */
			for (uintptr_t p = ua; p < ue; p += RG_PAGE) {
				if (p >= start && p < end)
					continue;
				TRY(place_followed(r, i, p, c->buf + (p - ua)));
			}
			zf_store_invalidate(r->store, r->owner, unit_index(r, u), r->unit_pages);
			if (left)
				unit_doubt(r, u);
			else
				unit_set_settled(r, u, ST_GONE);
			continue;
		}
		memset(c->buf + (ZF_MAX(start, ua) - ua), 0, ZF_MIN(end, ue) - ZF_MAX(start, ua));
		if (zf_store_put(r->store, r->owner, unit_index(r, u), c->buf, r->unit))
			common_log(ZF_LOG_WARN,
				   "region: unit %llu: partial drop not stored; old data kept",
				   (unsigned long long)u);
	}
	units_event_done(r, (unsigned)i, u0, u1);
	return 0;
}

/*
 * mremap moved [from, from + len) to to (event i of the queue): evicted units' data goes
 * where that memory is now, and the units are GONE. A unit partly moved keeps the rest
 * of its data where the rest is.
 */
static int event_remap(zf_region *r, struct fault_ctx *c, int i, uintptr_t from, uintptr_t to,
		       size_t len)
{
	uint64_t u0, u1;

	if (!units_of(r, from, from + len, &u0, &u1))
		return 0; /* memory that left a region before: plain memory */
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
				const uintptr_t at =
					p >= from && p < from + len ? to + (p - from) : p;

				/* Placed pages are skipped (EEXIST) when this is retried. */
				TRY(place_followed(r, i, at, c->buf + (p - ua)));
			}
		}
		if ((st & ST_MASK) == ST_EVICTED || (st & F_CLEAN))
			zf_store_invalidate(r->store, r->owner, unit_index(r, u), r->unit_pages);
		unit_set_settled(r, u, ST_GONE);
	}
	units_event_done(r, (unsigned)i, u0, u1);
	return 0;
}

/* Handles event i of the queue; -EAGAIN: it waits. Under read_lock. */
static int handle_event(zf_region *r, struct fault_ctx *c, int i)
{
	const struct uffd_msg *m = &r->queue[i];

	switch (m->event) {
	case UFFD_EVENT_REMOVE:
		TRY(event_drop(r, c, i, m->arg.remove.start, m->arg.remove.end, 0));
		INC(r, ev_remove);
		return 0;
	case UFFD_EVENT_UNMAP:
		TRY(event_drop(r, c, i, m->arg.remove.start, m->arg.remove.end, 1));
		INC(r, ev_unmap);
		return 0;
	case UFFD_EVENT_REMAP:
		TRY(event_remap(r, c, i, m->arg.remap.from, m->arg.remap.to, m->arg.remap.len));
		atomic_fetch_sub(&r->remaps_pending, 1);
		INC(r, ev_remap);
		return 0;
	default:
		return 0;
	}
}

/* Marks the units of an event queued (F_EVENT), as units_busy() does. */
static void event_hold(zf_region *r, const struct uffd_msg *m)
{
	uintptr_t a, b;
	uint64_t u0, u1;

	region_event_range(m, &a, &b);
	if (units_of(r, a, b, &u0, &u1))
		(void)units_busy(r, u0, u1);
}

/*
 * Handles the queue from its head, in order; an event that must wait keeps the later
 * ones waiting (their units stay held).
 */
void region_run_queue(zf_region *r, struct fault_ctx *c)
{
	unsigned done = 0;

	while (done < r->nqueue && !TEST_POINT_WAITS(TP_EVENT_HANDLE) &&
	       !handle_event(r, c, (int)done)) {
		r->seq_handled = ZF_MAX(r->seq_handled, r->qseq[done]);
		done++;
	}
	memmove(r->queue, r->queue + done, (r->nqueue - done) * sizeof(r->queue[0]));
	memmove(r->qseq, r->qseq + done, (r->nqueue - done) * sizeof(r->qseq[0]));
	memmove(r->qtime, r->qtime + done, (r->nqueue - done) * sizeof(r->qtime[0]));
	r->nqueue -= done;
}

/*
 * Queues the events among msgs[0..n) (page faults are the caller's), in order, and runs
 * the queue. Caller holds read_lock exclusively.
 */
static void handle_events(zf_region *r, struct fault_ctx *c, const struct uffd_msg *msgs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (msgs[i].event == UFFD_EVENT_PAGEFAULT)
			continue;
		if (msgs[i].event == UFFD_EVENT_REMAP) {
			atomic_store(&r->remapped, 1);
			atomic_fetch_add(&r->remaps_pending, 1);
		}
		/* Its units wait with it, from now: no claim, faults wait. */
		event_hold(r, &msgs[i]);
		while (r->nqueue == RG_QUEUE) {
			/* Full: wait for the transitions to end (an evictor needs read_lock to
			 * end its own). */
			pthread_rwlock_unlock(&r->read_lock);
			sched_yield();
			pthread_rwlock_wrlock(&r->read_lock);
			region_run_queue(r, c);
		}
		r->qseq[r->nqueue] = region_event_seq(r, &msgs[i]);
		r->qtime[r->nqueue] = now_ns();
		r->queue[r->nqueue++] = msgs[i];
	}
	region_run_queue(r, c);
}

/*
 * Reads up to cap messages into msgs and handles the events among them; returns the
 * bytes read, or -errno (-EAGAIN: none). Caller holds read_lock exclusively.
 *
 * The kernel lets an mremap() go on as soon as its REMAP is read, inside read(): a
 * thread can touch the memory it moved before the event is counted in remaps_pending,
 * and would have been served zeros there (or, in SIGBUS mode, the first REMAP not seen
 * yet, killed). So the read itself counts as a REMAP pending, until its events are
 * queued (region_test_remap.c, "remap touch").
 */
ssize_t region_read_events(zf_region *r, struct fault_ctx *c, struct uffd_msg *msgs, size_t cap)
{
	ssize_t got;

	atomic_fetch_add(&r->remaps_pending, 1);
	got = read(r->uffd, msgs, cap * sizeof(msgs[0]));
	if (got < 0)
		got = -errno;
	if (got > 0) {
		TEST_POINT(TP_EVENTS_READ);
		handle_events(r, c, msgs, (size_t)got / sizeof(msgs[0]));
	}
	atomic_fetch_sub(&r->remaps_pending, 1);
	return got;
}

void region_drain_events(zf_region *r, struct fault_ctx *c)
{
	struct uffd_msg msgs[16];

	pthread_rwlock_wrlock(&r->read_lock);
	for (int pass = 0; pass < 1000; pass++) {
		const ssize_t got = region_read_events(r, c, msgs, ZF_ARRAY_SIZE(msgs));

		if (got <= 0)
			region_run_queue(r, c);
		if (got <= 0 && !r->nqueue)
			break;
		if (got <= 0)
			sched_yield();
	}
	pthread_rwlock_unlock(&r->read_lock);
}

#ifdef ZF_TEST_HOOKS
int region_test_events_unread(zf_region *r)
{
	struct pollfd p = { .fd = r->uffd, .events = POLLIN };

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}
#endif
