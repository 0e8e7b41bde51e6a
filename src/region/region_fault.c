/*
 * region_fault.c - serving a fault: swap-in, the fault's state machine (region_serve()),
 * and the fault-service threads of thread mode (ZF_FAULT_THREAD).
 *
 * Swap-in: a fault on an EVICTED unit claims it (LOADING), reads the whole unit from the
 * store (decompressed once), places it with one UFFDIO_COPY (which wakes every thread
 * waiting on the range) and drops the stored copy - or keeps it, with the pages placed
 * write-protected, when clean copies are on; the first write then drops the copy. In
 * per-page mode only the faulting page is placed (the unit decompressed for each page)
 * and the copy goes when mincore() shows every page in.
 *
 * A service thread reads the descriptor, handles the events it read first
 * (region_events.c), then serves the faults; region_serve() never blocks: a fault on a
 * unit another thread owns is left unanswered (WAIT) and the owner wakes it, so the
 * thread keeps reading events while units are in transition. SIGBUS mode serves faults
 * with the same region_serve(), in the faulting thread (region_sigbus.c).
 *
 * A fault that cannot be served (checksum mismatch, backing read error) fails closed:
 * UFFDIO_POISON on the page in thread mode (the thread gets SIGBUS); never a page of zeros.
 *
 * docs/region.md: "Fault service", "Failing closed"; failure modes, rows 6-8 and 10.
 */
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../common/test_point.h"
#include "region_internal.h"

#define RG_MSGS 16 /* messages read at once */

/* What a fault context costs the region in bookkeeping (zf_region_stats.meta_bytes). */
static uint64_t ctx_bytes(const zf_region *r)
{
	return sizeof(struct fault_ctx) + (r->frames ? 0 : r->unit);
}

/* Makes c ready to bring units in: a store reader, and a unit buffer of its own. */
int region_fault_ctx_init(zf_region *r, struct fault_ctx *c)
{
	TRY(store_reader_create(r->store, &c->reader));
	atomic_fetch_add(&r->n.ctx_bytes, ctx_bytes(r)); /* given back by _fini() */
	c->buf_state = BUF_EMPTY;
	return region_fault_ctx_buf(r, c);
}

/* c's unit buffer (also in a child after fork: it is MADV_DONTFORK). */
int region_fault_ctx_buf(zf_region *r, struct fault_ctx *c)
{
	if (r->frames) {
		/* The nursery: a frame the kernel backs with a huge page (region_frame.c). */
		c->buf = region_map_aligned(r->unit);
		if (c->buf && (madvise(c->buf, r->unit, MADV_HUGEPAGE) ||
			       madvise(c->buf, r->unit, MADV_DONTFORK)))
			return -errno;
	} else {
		c->buf = mmap(NULL, r->unit, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			      -1, 0);
		if (c->buf == MAP_FAILED)
			c->buf = NULL;
	}
	return c->buf ? 0 : -ENOMEM;
}

/* Frees what region_fault_ctx_init() made (of a zeroed or half-made c too). */
void region_fault_ctx_fini(zf_region *r, struct fault_ctx *c)
{
	if (c->reader)
		atomic_fetch_sub(&r->n.ctx_bytes, ctx_bytes(r));
	store_reader_destroy(c->reader);
	region_buf_set(r, c, BUF_EMPTY);
	if (c->buf)
		munmap(c->buf, r->unit);
	memset(c, 0, sizeof(*c));
}

/* Reads unit u from the store into buf: the whole unit, or one page (page >= 0). */
int region_load_data(zf_region *r, struct fault_ctx *c, uint64_t u, int64_t page)
{
	const uint64_t index = unit_index(r, u);

	region_buf_set(r, c, BUF_DATA);
	if (page >= 0)
		return store_get_with(r->store, c->reader, r->owner, index + (uint64_t)page, c->buf,
				      RG_PAGE);
	/* The unit's pieces (the store's units: 4 KiB in split mode) in one folio get. */
	return store_get_folio_with(r->store, c->reader, r->owner, index, c->buf, r->unit);
}

/* Whether every page of unit u is present (per-page mode). */
static int unit_complete(zf_region *r, uint64_t u)
{
	unsigned char vec[512];

	if (mincore(unit_addr(r, u), r->unit, vec))
		return 0;
	return !memchr(vec, 0, r->unit_pages) && (vec[0] & 1);
}

/*
 * Brings evicted unit u in (or, per page, the page at addr). ra: for readahead (no
 * waiting, not a major fault).
 */
enum serve_result region_swap_in(zf_region *r, struct fault_ctx *c, uint64_t u, uint8_t *addr,
				 int ra)
{
	const int per_page = r->o.swapin == ZF_SWAPIN_PER_PAGE;
	uint32_t st = atomic_load_explicit(&r->state[u], memory_order_acquire);
	const int partial = (st & F_PARTIAL) != 0;
	int64_t page = per_page ? (addr - unit_addr(r, u)) / RG_PAGE : -1;
	uint64_t t0, t1 = 0;
	int ret;

	if (!partial && !resident_reserve(r)) {
		region_reclaim_kick(r);
		return NOROOM;
	}
	if (unit_move(r, u, ST_EVICTED, ST_LOADING, 0, 0)) {
		if (!partial)
			resident_add(r, -1);
		return RETRY;
	}
	/*
	 * Between the look above and the claim, another fault's per-page swap-in may have
	 * made the unit partial (or an eviction whole again): the residency reserved and
	 * the duplicate check below go by it, so a changed unit is looked at again. (Eight
	 * threads faulting one page under TSan brought that page in twice.)
	 */
	if (((atomic_load_explicit(&r->state[u], memory_order_acquire) & F_PARTIAL) != 0) !=
	    partial) {
		if (!partial)
			resident_add(r, -1);
		unit_release(r, u, ST_EVICTED, 0, 0);
		return RETRY;
	}
	if (per_page && partial) {
		unsigned char in;

		/* A duplicate fault on a page placed meanwhile: nothing to bring in. */
		if (!mincore(unit_addr(r, u) + page * RG_PAGE, RG_PAGE, &in) && (in & 1)) {
			unit_release(r, u, ST_EVICTED, 0, 0);
			wake_range(r, unit_addr(r, u) + page * RG_PAGE, RG_PAGE);
			return SERVED;
		}
	}
	t0 = ra ? 0 : now_ns();
	ret = region_load_data(r, c, u, page);
	if (!ra) {
		t1 = now_ns();
		ADD(r, swapin_load_ns, t1 - t0);
	}
	if (ret) {
		if (!c->in_signal)
			common_log(ZF_LOG_WARN, "region: cannot read unit %llu back: %s",
				   (unsigned long long)u, zf_strerror(ret));
		if (!partial)
			resident_add(r, -1);
		unit_release(r, u, ST_EVICTED, 0, 0);
		INC(r, fault_fail);
		return FAILED;
	}
	TEST_POINT(TP_SWAPIN_LOADED);
	pthread_rwlock_rdlock(&r->read_lock);
	if (atomic_load_explicit(&r->state[u], memory_order_acquire) & F_EVENT)
		ret = -EAGAIN; /* an event of the program came meanwhile: it goes first */
	else if (per_page)
		ret = region_place(r, unit_addr(r, u) + page * RG_PAGE, c->buf, RG_PAGE, 0);
	else if (r->frames)
		ret = region_frame_place(r, c, unit_addr(r, u));
	else
		ret = region_place(r, unit_addr(r, u), c->buf, r->unit, r->o.keep_clean);
	pthread_rwlock_unlock(&r->read_lock);
	if (ret > 0) {
		INC(r, thp_swpin);
		ret = 0;
	}
	if (!ra)
		ADD(r, swapin_place_ns, now_ns() - t1);
	if (ret) {
		if (!partial)
			resident_add(r, -1);
		unit_release(r, u, ST_EVICTED, 0, 0);
		return ret == -EAGAIN ? RETRY : GONE;
	}
	if (per_page) {
		ADD(r, swpin, 1);
		INC(r, swpin_fallback);
		if (unit_complete(r, u)) {
			zf_store_invalidate(r->store, r->owner, unit_index(r, u), r->unit_pages);
			unit_release(r, u, ST_RESIDENT, F_PARTIAL, F_REF);
		} else {
			unit_release(r, u, ST_EVICTED, 0, F_PARTIAL);
		}
	} else {
		ADD(r, swpin, r->unit_pages);
		INC(r, swpin_units);
		if (r->o.keep_clean) {
			INC(r, clean_kept);
		} else {
			zf_store_invalidate(r->store, r->owner, unit_index(r, u), r->unit_pages);
		}
		unit_release(r, u, ST_RESIDENT, 0,
			     (ra ? F_RA : F_REF) | (r->o.keep_clean ? F_CLEAN : 0));
	}
	if (ra)
		INC(r, swap_ra);
	else
		INC(r, pgmajfault);
	after_admit(r);
	return SERVED;
}

/*
 * For region_serve(): a fault on resident unit u (claimed), at page: zero a hole, or unprotect
 * a written page (a clean unit: drop its stored copy and unprotect it whole). Returns 0,
 * 1 when the clean copy was dropped, or -EAGAIN.
 */
static int fix_resident(zf_region *r, uint64_t u, uint8_t *page, int wp, uint32_t st,
			uint32_t *clear)
{
	int ret = wp > 0 ? -EEXIST : region_zero_fill(r, page, RG_PAGE);

	if (ret != -EEXIST) {
		/*
		 * A hole in a clean unit: a zap of the program's that came after its REMOVE
		 * was handled (the kernel lets the dropping thread go once the event is read,
		 * and it may zap after an eviction and a clean swap-in of the unit). The zero
		 * page placed now is written by copy-on-write, which no write-protect fault
		 * sees: the copy goes, or the unit's next eviction keeps it and the write is
		 * lost (soak run 4; region_clean).
		 */
		if (!ret && (st & F_CLEAN)) {
			zf_store_invalidate(r->store, r->owner, unit_index(r, u), r->unit_pages);
			INC(r, clean_dropped);
			*clear = F_CLEAN;
		}
		return ret;
	}
	if (!wp) {
		/* Thread mode: a duplicate of a fault served meanwhile. */
		wake_range(r, page, RG_PAGE);
		return 0;
	}
	INC(r, wp_faults);
	if (st & F_CLEAN) {
		/* The first write to a clean unit: its stored copy is stale now. */
		zf_store_invalidate(r->store, r->owner, unit_index(r, u), r->unit_pages);
		INC(r, clean_dropped);
		*clear = F_CLEAN; /* gone, whatever the unprotect below does */
		return protect(r, unit_addr(r, u), r->unit, 0);
	}
	return protect(r, page, RG_PAGE, 0);
}

/*
 * Places zeros over never-written unit u, claimed: zero pages, or with frames a frame of
 * zeros made ready before (region_frame_zeros()), or for a write to a frame that maps the
 * huge zero page write-protected (mapped: region_frame_setup()) the protection lifted,
 * so that the write, woken, takes the kernel's own huge-page fault. Under read_lock.
 * Returns 0 or region_zero_fill()'s error.
 */
static int place_zeros(zf_region *r, struct fault_ctx *c, uint64_t u, uint8_t *page, int mapped)
{
	const enum buf_state made = c->buf_state;
	int ret;

	if (!r->frames)
		return region_zero_fill(r, unit_addr(r, u), r->unit);
	if (mapped && region_frame_mapped(page)) {
		TEST_POINT(TP_ZEROS_UNPROTECT);
		ret = protect(r, unit_addr(r, u), r->unit, 0);
		if (!ret)
			INC(r, thp_fault_alloc);
		return ret;
	}
	/* Zapped meanwhile (a REMOVE of the program's): zeros as for a missing frame. */
	if (mapped)
		region_frame_zeros(r, c, 1);
	ret = region_frame_place(r, c, unit_addr(r, u));
	if (ret <= 0)
		return ret;
	if (made == BUF_ZERO_READ)
		INC(r, thp_zero);
	else
		INC(r, thp_fault_alloc);
	return 0;
}

/*
 * A program fills fresh memory in order: a write to never-written frame u, which maps the
 * huge zero page write-protected, right after frame u - 1 became resident. The next
 * RG_FRESH_AHEAD never-written frames get their protection lifted now, counted resident,
 * so that the program's writes there take the kernel's own huge-page fault with no trip
 * through zfolio (in thread mode a wake-up of the service thread and back, about 57 us a
 * frame: bench/results/frames.md, "Fresh memory"). Stops at the first frame that is not
 * never-written with the huge zero page mapped, or when the limit has no room left for
 * it (a fault, not a guess, may take the limit's batch). A frame opened so and never
 * written still maps the huge zero page: no memory, counted resident until the clock,
 * which finds it unreferenced, takes it (a same-filled unit). Under no lock; claims each
 * frame as a fault would. The frames opened go to the background thread, which writes
 * them first (region_fill_note()): the kernel's zeroing of their huge pages then runs
 * beside the program, not in its writes.
 */
static void fresh_ahead(zf_region *r, uint64_t u)
{
	uint64_t v;

	if (u == 0 ||
	    (atomic_load_explicit(&r->state[u - 1], memory_order_acquire) & ST_MASK) != ST_RESIDENT)
		return;
	for (v = u + 1; v <= u + RG_FRESH_AHEAD && v < r->nunits; v++) {
		uint8_t *addr = unit_addr(r, v);
		int ret;

		if (atomic_load_explicit(&r->state[v], memory_order_acquire) != ST_EMPTY ||
		    !region_frame_mapped(addr))
			break;
		if (r->limit_units &&
		    (r->group ? group_over(r->group)
			      : atomic_load_explicit(&r->resident, memory_order_acquire) >=
					r->limit_units))
			break;
		if (!resident_reserve(r))
			break;
		pthread_rwlock_rdlock(&r->read_lock);
		if (unit_move(r, v, ST_EMPTY, ST_LOADING, 0, 0)) {
			pthread_rwlock_unlock(&r->read_lock);
			resident_add(r, -1);
			break;
		}
		ret = protect(r, addr, r->unit, 0);
		pthread_rwlock_unlock(&r->read_lock);
		if (ret) {
			resident_add(r, -1);
			unit_release(r, v, ST_EMPTY, 0, 0);
			break;
		}
		unit_release(r, v, ST_RESIDENT, 0, 0);
		INC(r, fresh_ahead);
	}
	if (v > u + 1)
		region_fill_note(r, u + 1, v);
}

/*
 * Serves a fault at addr: a write-protect fault if wp (in SIGBUS mode the kind is not
 * known, wp = -1), a write if write (not known: -1). Never blocks.
 */
enum serve_result region_serve(zf_region *r, struct fault_ctx *c, uint8_t *addr, int wp, int write)
{
	uint64_t u;
	uint32_t st, seen, clear = 0;
	uint8_t *page = (uint8_t *)((uintptr_t)addr & ~(uintptr_t)(RG_PAGE - 1));
	int ret;

	if (addr < r->base || addr >= r->base + r->size) {
		/*
		 * Memory moved out of the region (it stays registered with us, region_events.c):
		 * plain memory, once the REMAP events read have put the evicted data there.
		 */
		if (atomic_load(&r->remaps_pending))
			return RETRY;
		ret = wp > 0 ? -EEXIST : region_zero_fill(r, page, RG_PAGE);
		if (ret == -EEXIST)
			ret = protect(r, page, RG_PAGE, 0);
		return ret == -EAGAIN ? RETRY : SERVED;
	}
	u = (uint64_t)(addr - r->base) >> (r->order + 12);
	st = atomic_load_explicit(&r->state[u], memory_order_acquire);
	if (st & F_EVENT) {
		if (!unit_wait_mark(r, u, &seen))
			return WAIT;
		st = atomic_load_explicit(&r->state[u], memory_order_acquire);
	}
	switch (st & ST_MASK) {
	case ST_EVICTING:
	case ST_LOADING:
		if (!unit_wait_mark(r, u, &seen)) {
			INC(r, fault_waits);
			return WAIT;
		}
		return RETRY; /* it just changed: look again */
	case ST_EVICTED: {
		const enum serve_result res = region_swap_in(r, c, u, addr, 0);

		if (res == SERVED && r->want_reader)
			region_readahead_note(r, u);
		if (res == NOROOM)
			INC(r, limit_waits);
		return res;
	}
	case ST_EMPTY: {
		int present = 0;

		/* The first fault in a block of frames not premapped yet premaps it. */
		if (r->premapped && region_frame_premap(r, u, page))
			return SERVED;
		/*
		 * A fault that missed the page (thread mode: not a write-protect one), read
		 * after another thread's fault premapped the block, finds the page present:
		 * the access, tried again, reads or faults to write. Present, not mincore()'s
		 * mapped, which can say yes where the access still faults (soak hung so).
		 * Only where blocks are premapped while the program runs (r->premapped): a
		 * region premapped whole at creation pays no pagemap read here.
		 */
		if (r->premapped && (present = region_page_present(r, page)) && wp == 0) {
			wake_range(r, page, RG_PAGE);
			return SERVED;
		}
		/*
		 * A write (or a fault of unknown kind) on a frame that maps the huge zero page:
		 * a write-protect fault. A read never faults there.
		 */
		const int mapped = r->frames && wp != 0 && write != 0 && region_frame_mapped(page);

		/* Memory never written: zero pages, the whole unit at once. */
		if (!resident_reserve(r)) {
			region_reclaim_kick(r);
			INC(r, limit_waits);
			return NOROOM;
		}
		/* A frame: its zeros made first (the kernel zeroes a huge page meanwhile). */
		if (r->frames && !mapped)
			region_frame_zeros(r, c, write != 0);
		/* Under read_lock, as a swap-in's copy: see fix_resident(). */
		pthread_rwlock_rdlock(&r->read_lock);
		if (unit_move(r, u, ST_EMPTY, ST_LOADING, 0, 0)) {
			pthread_rwlock_unlock(&r->read_lock);
			resident_add(r, -1);
			return RETRY;
		}
		if (r->premapped && !present && region_page_present(r, page)) {
			/* Premapped since the look (another fault in the block): again. */
			pthread_rwlock_unlock(&r->read_lock);
			resident_add(r, -1);
			unit_release(r, u, ST_EMPTY, 0, 0);
			return RETRY;
		}
		ret = place_zeros(r, c, u, page, mapped);
		pthread_rwlock_unlock(&r->read_lock);
		if (ret == -EEXIST) {
			/*
			 * A one-page unit whose page is there already (the program's zap of a
			 * REMOVE we could not take the pages of is still to come): the page is
			 * the unit's content, the unit is resident.
			 */
			wake_range(r, page, RG_PAGE);
			ret = 0;
		}
		if (ret) {
			resident_add(r, -1);
			unit_release(r, u, ST_EMPTY, 0, 0);
			return ret == -EAGAIN ? RETRY : GONE;
		}
		unit_release(r, u, ST_RESIDENT, 0, F_REF);
		INC(r, pgfault_zero);
		if (mapped)
			fresh_ahead(r, u);
		after_admit(r);
		return SERVED;
	}
	case ST_GONE:
		/*
		 * No longer ours to evict: plain memory, once the REMAP events read have put
		 * their data there (memory may have been moved into this hole: a zero page
		 * now would keep its data out, tests/model "gone-unwaited").
		 */
		if (atomic_load(&r->remaps_pending))
			return RETRY;
		ret = wp > 0 ? -EEXIST : region_zero_fill(r, page, RG_PAGE);
		if (ret == -EEXIST)
			ret = wp ? protect(r, page, RG_PAGE, 0) : (wake_range(r, page, RG_PAGE), 0);
		return ret == -EAGAIN ? RETRY : SERVED;
	case ST_RESIDENT:
		/*
		 * A hole, or a write to a write-protected page. The unit is claimed while its
		 * pages change, so that no eviction protects it in between: a page zeroed or
		 * unprotected under an eviction would let a write land unseen.
		 */
		/*
		 * Under read_lock: an event read before this fault (the program's madvise
		 * returned, then it touched the unit) is handled before it, or the page
		 * we zero now would be in a unit the event then calls EMPTY.
		 */
		TEST_POINT(TP_FAULT_RESIDENT);
		pthread_rwlock_rdlock(&r->read_lock);
		if (unit_move(r, u, ST_RESIDENT, ST_LOADING, 0, 0)) {
			pthread_rwlock_unlock(&r->read_lock);
			return RETRY;
		}
		st = atomic_load_explicit(&r->state[u], memory_order_acquire);
		ret = fix_resident(r, u, page, wp, st, &clear);
		pthread_rwlock_unlock(&r->read_lock);
		TEST_POINT(TP_FAULT_FIXED);
		unit_release(r, u, ST_RESIDENT, clear, F_REF);
		return ret == -EAGAIN ? RETRY : SERVED;
	}
	return SERVED;
}

/* -------------------------------------------------------------------------------- */
/* Fault-service threads                                                            */
/* -------------------------------------------------------------------------------- */

/* Thread mode: a fault that cannot be served gets a poisoned page (SIGBUS), or we abort. */
static void fail_closed(zf_region *r, uint8_t *addr)
{
	uint8_t *page = (uint8_t *)((uintptr_t)addr & ~(uintptr_t)(RG_PAGE - 1));

	if (r->features & UFFD_FEATURE_POISON) {
		struct uffdio_poison p = { .range = { .start = (uintptr_t)page, .len = RG_PAGE } };
		int ret = uffd_range(r, UFFDIO_POISON, &p);

		/* EEXIST: poisoned already, by a fault on the same page a moment ago. */
		if (!ret || ret == -EEXIST) {
			wake_range(r, page, RG_PAGE);
			return;
		}
	}
	/* The program's sink, else stderr (common/error.c); then fail closed all the same. */
	common_log(ZF_LOG_ERROR,
		   "region %p: the fault at %p cannot be served (stored data lost or corrupt) "
		   "and the page cannot be poisoned: aborting",
		   (void *)r->base, (void *)addr);
	abort();
}

/*
 * SIGBUS mode: a fault the handler could not serve, logged here through the program's log
 * hook (region_sigbus.c asks; it waits for fail_told).
 */
static void log_failure(zf_region *r)
{
	uint64_t n;

	if (read(r->log_fd, &n, sizeof(n)) != (ssize_t)sizeof(n))
		return;
	common_log(ZF_LOG_ERROR,
		   "region %p: the fault at %p cannot be served (stored data lost or corrupt): "
		   "SIGBUS",
		   (void *)r->base, (void *)atomic_load(&r->fail_addr));
	atomic_store(&r->fail_told, atomic_load(&r->fail_asked));
	futex_wake_all(&r->fail_told);
}

/*
 * poll() of the service thread's descriptors, after a poll of RG_SERVICE_POLL_NS without
 * sleeping if the thread served a fault at last_fault (ns; 0: none yet). A program
 * faulting its way through evicted memory faults again within microseconds: a thread
 * still awake takes the fault without a wake-up, one of the two a fault costs in thread
 * mode. Measured (zfolio pageout, redis lz4, 100 MiB, no frames, alternated twice in one
 * run): 64 KiB units swapped in in 115-120 ms against 165-168 ms, 4 KiB units in 417-430
 * ms against 1404-1428 ms (one service thread, the default). The cost is up to 100 us of
 * a CPU after the last fault of a burst, on a CPU the faulting thread leaves idle while it
 * waits; with fault_threads > 1, of as many CPUs as threads that served a fault.
 */
static int service_poll(struct pollfd *pfd, int timeout, uint64_t last_fault)
{
	if (last_fault) {
		const uint64_t until = last_fault + RG_SERVICE_POLL_NS;

		while (now_ns() < until) {
			const int n = poll(pfd, 3, 0);

			if (n != 0)
				return n;
		}
	}
	return poll(pfd, 3, timeout);
}

/*
 * A fault-service thread: reads the descriptor, handles the events, serves the faults
 * (thread mode). In SIGBUS mode the one service thread reads the events only.
 */
void *region_service_main(void *arg)
{
	zf_region *r = ((struct service_arg *)arg)->r;
	struct fault_ctx *c = ((struct service_arg *)arg)->c;
	struct uffd_msg msgs[RG_MSGS];
	uintptr_t retry[RG_MSGS];
	uint64_t last_fault = 0;
	sigset_t all;

	free(arg);
	/* Signals go to the program's threads: a read() here must not see EINTR. */
	sigfillset(&all);
	internal_unblock_sync(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		struct pollfd pfd[3] = { { .fd = r->uffd, .events = POLLIN },
					 { .fd = r->stop_fd, .events = POLLIN },
					 { .fd = r->log_fd, .events = POLLIN } };
		unsigned nretry = 0;
		ssize_t got;
		int timeout;

		pthread_rwlock_wrlock(&r->read_lock);
		timeout = r->nqueue ? 1 : -1;
		pthread_rwlock_unlock(&r->read_lock);
		if (service_poll(pfd, timeout, last_fault) < 0 && errno != EINTR)
			break;
		if (pfd[1].revents)
			break;
		if (pfd[2].revents)
			log_failure(r);
		if (pfd[0].revents)
			TEST_POINT(TP_EVENTS_PENDING);
		pthread_rwlock_wrlock(&r->read_lock);
		if (r->nqueue)
			region_run_queue(r, c);
		/* Events first, in order, under the lock: a later fault sees their effect. */
		got = region_read_events(r, c, msgs, RG_MSGS);
		pthread_rwlock_unlock(&r->read_lock);
		if (got == -EAGAIN || got == -EINTR)
			continue;
		if (got < 0) {
			common_log(ZF_LOG_WARN, "region: read(userfaultfd): %s",
				   strerror((int)-got));
			break;
		}
		for (size_t i = 0; i < (size_t)got / sizeof(msgs[0]); i++) {
			uint8_t *addr;
			uint64_t t0;
			enum serve_result res;
			int wp, write;

			if (msgs[i].event != UFFD_EVENT_PAGEFAULT)
				continue;
			wp = (msgs[i].arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP) != 0;
			write = (msgs[i].arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WRITE) != 0;
			addr = (uint8_t *)(uintptr_t)msgs[i].arg.pagefault.address;
			t0 = now_ns();
			fork_gate_enter(r);
			res = region_serve(r, c, addr, wp, write);
			if (res == RETRY)
				res = region_serve(r, c, addr, wp, write);
			fork_gate_leave(r);
			if (res == RETRY)
				retry[nretry++] = (uintptr_t)addr;
			if (res == FAILED)
				fail_closed(r, addr);
			else if (res == GONE)
				wake_range(r, (void *)((uintptr_t)addr & ~(uintptr_t)(RG_PAGE - 1)),
					   RG_PAGE);
			if (res == SERVED)
				lat_record(r, t0);
			last_fault = now_ns();
		}
		/* Faults that met a layout change fault again once the events are read. */
		for (unsigned i = 0; i < nretry; i++)
			wake_range(r, (void *)(retry[i] & ~(uintptr_t)(RG_PAGE - 1)), RG_PAGE);
	}
	return NULL;
}
