/*
 * region_internal.h - what the region's files share: the unit state word, struct
 * zf_region, and the small helpers of the fault path.
 *
 * The helpers are static inline: they run on every fault (claiming a unit, waking its
 * waiters, recording latency), and each file keeps them as region.c did when it was one
 * file. Functions shared between the files are declared at the end, with the file that
 * defines them; they take the region_ prefix and never leave the library
 * (-fvisibility=hidden). Nothing outside src/region includes this header.
 *
 * The unit state word. Each unit (4 KiB..2 MiB) has one 32-bit word, changed only by
 * compare-and-swap:
 *
 *   EMPTY --first touch: zero page--> RESIDENT --evict--> EVICTING --stored, dropped--> EVICTED
 *     ^                                 ^  |                   |                          |
 *     |                                 |  +--store refused----+                          |
 *     +--- madvise(DONTNEED) ---        +------------- LOADING <---- fault / readahead ---+
 *
 * Whoever moves a unit into EVICTING or LOADING owns it until it moves it out
 * (unit_move(), unit_release()); everybody else waits (F_WAIT, unit_wait_mark()): a
 * fault-service thread leaves the fault unanswered (the faulting thread stays asleep in
 * the kernel) and the owner wakes the unit's range (UFFDIO_WAKE) when done; a SIGBUS-mode
 * fault sleeps on the state word (futex). So a unit is decompressed once however many
 * threads fault on it, and the service threads never block: they must keep reading the
 * userfaultfd, because the kernel holds madvise() and munmap() callers - our own
 * evictions among them - until their event has been read. An event of the program's
 * (region_events.c) holds the units it covers with F_EVENT: nobody claims them, faults
 * wait, until it is handled.
 *
 * docs/region.md: "The unit state word", "Locks".
 */
#ifndef ZF_REGION_INTERNAL_H
#define ZF_REGION_INTERNAL_H

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../common/common.h"
#include "../group/group.h"
#include "../store/store.h"
#include "uffd_compat.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

#define RG_PAGE ZF_PAGE_SIZE
#define RG_SIG_CTXS 16 /* fault contexts for SIGBUS-mode faults in flight */
/*
 * Bytes an eviction claims and protects at once, and folios it has compressing at once:
 * the engines go idle only between chunks (python 64k, 100 MiB, three alternating runs:
 * chunks of 8 MiB put out in 74-80 ms, of 32 MiB in 72-73 ms). The price: a fault on a
 * claimed unit waits until its folio is stored, up to a chunk's compression (~20 ms).
 */
#define RG_CHUNK ((size_t)32 << 20)
#define RG_QUEUE 256 /* events read and not yet handled */
/*
 * How long a REMOVE waits for the program's zap before it is handled without it (F_DOUBT).
 * A MADV_DONTNEED zaps microseconds after its event is read; a MADV_FREE never does, and
 * the event cannot tell the two apart. Correct either way: the wait only spares a late
 * zap's units from staying resident until the zap comes.
 */
#define RG_ZAP_WAIT_NS (10 * 1000 * 1000ull)
#define RG_TAILS 32 /* REMAPs whose UNMAPs (of the same mremap call) may still come */
#define RG_SEQ_STEP 1024 /* places between two events read in order (region_order.c) */
#define RG_EAGAIN_TRIES 1000 /* an evictor's moves, while the program's events come */
/*
 * Never-written frames opened ahead of a program that fills its memory in order
 * (region_fault.c, fresh_ahead()): 4 saves 4 round trips in 5 and, with the limit's room
 * asked first, holds at most 8 MiB counted resident that may never be written.
 */
#define RG_FRESH_AHEAD 4
/*
 * Frames premapped with the huge zero page at creation; past them, a block of
 * RG_PREMAP_BLOCK frames (32 MiB) at its first fault (region_frame.c, premap_frames()).
 */
#define RG_PREMAP_EAGER 128
#define RG_PREMAP_BLOCK 16
/*
 * How long a service thread that served a fault polls the descriptor before it sleeps
 * (region_fault.c, service_poll()).
 */
#define RG_SERVICE_POLL_NS (100 * 1000ull)

/* The state word of a unit. */
enum unit_state {
	ST_EMPTY = 0, /* never touched, or dropped by the program: reads as zeros */
	ST_RESIDENT = 1,
	ST_EVICTING = 2,
	ST_EVICTED = 3,
	ST_LOADING = 4,
	ST_GONE = 5, /* unmapped or moved away by the program */
};
#define ST_MASK 7u
#define F_REF (1u << 3) /* referenced since the clock hand last passed */
#define F_WAIT (1u << 4) /* somebody waits for the owner of the transition */
#define F_CLEAN (1u << 5) /* the store keeps a copy; the pages are write-protected */
#define F_COLD (1u << 6) /* ZF_ADV_COLD */
#define F_RA (1u << 7) /* brought in by readahead, not yet passed by the faults */
#define F_EVENT (1u << 8) /* an event waits for the transition to end */
#define F_PARTIAL (1u << 9) /* per-page mode: some pages in, the store keeps the unit */
#define F_HOT (1u << 10) /* ZF_ADV_HOT: one more pass of the clock hand */
/*
 * A REMOVE was handled before the program's zap came (MADV_FREE, whose zap never comes, or
 * a MADV_DONTNEED late past RG_ZAP_WAIT_NS): the pages it covered that are still there are
 * write-protected, and no eviction takes the unit while one of them is (region_events.c).
 */
#define F_DOUBT (1u << 11)
/*
 * A member of a group, in a child of fork(): resident since the fork, its pages shared
 * with the parent, which the group charges for them; the child is not charged for the
 * unit until it leaves and comes back (as a memory cgroup charges a page once).
 */
#define F_FORKED (1u << 12)

/* What a frame's nursery holds (fault_ctx.buf with frames, region_frame.c). */
enum buf_state {
	BUF_EMPTY = 0, /* nothing: the kernel fills it at the next touch */
	BUF_DATA = 1, /* a unit read from the store, or scratch */
	BUF_ZERO = 2, /* a huge page of zeros (written: it is memory) */
	BUF_ZERO_READ = 3, /* the huge zero page (read: no memory) */
};

/* What a thread needs to bring a unit in: a store reader (codec context) and a unit buffer. */
struct fault_ctx {
	struct store_reader *reader;
	/*
	 * A unit. With frames, the nursery (region_frame.c): 2 MiB-aligned, MADV_HUGEPAGE,
	 * not registered, moved into the region and so emptied at each placement.
	 */
	uint8_t *buf;
	enum buf_state buf_state;
	int in_signal; /* a SIGBUS handler's: no logging (the program's log sink may lock) */
	int service; /* a service thread's: it must never wait for an event to be read */
};

struct counters {
	_Atomic uint64_t swpout, swpin, pgmajfault, pgfault_zero, wp_faults, fault_waits,
		limit_waits, evict_pageout, evict_reclaim, reject, clean_kept, clean_evict,
		clean_dropped, swap_ra, swap_ra_hit, ev_remove, ev_remove_unzapped, ev_unmap,
		ev_remap, copy_eagain, copy_eexist, fault_fail, resident_max;
	_Atomic uint64_t swpin_fallback, swpin_units, swpout_units;
	_Atomic uint64_t thp_swpin, thp_fault_alloc, thp_zero, frame_split, frame_fallback;
	_Atomic uint64_t fresh_ahead, fresh_filled, fork_unshared;
	_Atomic uint64_t staging, staging_max; /* nursery frames holding a huge page (units) */
	_Atomic uint64_t ctx_bytes; /* the fault contexts' bookkeeping (region_fault_ctx_init) */
	_Atomic uint64_t lat[ZF_REGION_LAT_BUCKETS];
	_Atomic uint64_t fault_ns, swapin_load_ns, swapin_place_ns; /* sums, see zfolio.h */
};

/*
 * Lock order: evict_lock (one evictor at a time), then read_lock (exclusive to read and
 * handle events, shared around a swap-in's copy), then the store's locks. Nobody waits
 * on a unit's state word while holding read_lock.
 */
struct zf_region {
	uint8_t *base;
	size_t size;
	/*
	 * The unit the state word tracks, evicted and placed whole: the frame with frames
	 * (the store's unit, what one object compresses, is then o.unit).
	 */
	uint32_t unit, unit_pages, order;
	int frames; /* 2 MiB frames placed as huge pages (region_frame.c) */
	int pagemap_fd; /* /proc/self/pagemap: a huge mapping, a REMOVE's pages left (or -1) */
	uint64_t nunits;
	uint32_t owner;
	zf_store *store;
	int own_store;
	zf_region_options o;
	int uffd;
	uint64_t features; /* what UFFDIO_API answered: the features the kernel offers */
	uint64_t features_asked; /* what the region asked for (a child asks the same) */
	_Atomic uint32_t *state;
	/* Frames: a block of RG_PREMAP_BLOCK premapped (or being so), or NULL: all done. */
	_Atomic uint8_t *premapped;

	/* Residency: units resident (or being loaded), and the limit in units. */
	_Atomic uint64_t resident;
	uint64_t limit_units, batch_units;
	_Atomic uint32_t resident_seq; /* futex: bumped when reclaim made room */
	_Atomic int admit_over; /* reclaim found nothing to evict: let faults through */
	/*
	 * A member of a group (zf_region_options.group): the limit is the group's, checked
	 * on its resident bytes (limit_units is the group's limit in units, 0 for none), and
	 * the region's resident units are also counted in its slot there. room_wanted: a
	 * fault found no room and waits (the reclaim thread wakes it when there is room).
	 */
	zf_group *group;
	int group_slot;
	_Atomic int room_wanted;

	/* Eviction: one evictor at a time (pageout callers, the reclaim thread). */
	pthread_mutex_t evict_lock;
	uint64_t hand; /* clock hand, under evict_lock */
	/* Where an eviction moves the pages it takes (RG_CHUNK); under evict_lock. */
	uint8_t *evict_stage;
	struct fault_ctx evict_ctx; /* reads a partly swapped-in unit's copy; under evict_lock */
	uint8_t *probe; /* a page never touched: a hole to move (region_sigbus.c) */
	_Atomic uint64_t cold_units;

	/* Service threads. */
	int stop_fd; /* eventfd: tells service threads to stop */
	pthread_t *threads;
	unsigned nthreads;
	/*
	 * Held exclusively to read messages and handle their events, shared by a swap-in
	 * around its UFFDIO_COPY: the program's madvise() or munmap() goes on as soon as its
	 * event is read, so a copy must either finish before the read (and the zap removes
	 * it) or see the event's F_EVENT mark (and not happen). Without this a copy could
	 * land after the zap and bring dropped data back.
	 */
	pthread_rwlock_t read_lock;
	struct uffd_msg queue[RG_QUEUE]; /* events read, not yet handled; under read_lock */
	unsigned nqueue;
	/*
	 * When each queued event's change of the layout happened, as an order (region_order.c):
	 * threads send their events after their changes, so the events may be read in
	 * another order. seq_handled: the latest of the events handled. Under read_lock.
	 */
	uint64_t qseq[RG_QUEUE], seq_next, seq_handled;
	uint64_t qtime[RG_QUEUE]; /* when each queued event was read (now_ns()) */
	struct {
		uintptr_t from, len;
		uint64_t seq;
	} tails[RG_TAILS]; /* REMAPs read whose source UNMAP has not come yet, oldest first */
	unsigned ntails;
	/* Where memory registered with us is, as the events read say (region_order.c). */
	struct rg_span {
		uintptr_t a, b; /* [a, b) */
		uint64_t seq; /* the place of the event that put it there (0: the region) */
		/* 0, or the place of a REMAP read onto it (then something took it away
		 * before, in an event not read yet), and the last place given just before */
		uint64_t stale, early;
	} * spans;
	unsigned nspans, cap_spans;
	int spans_lost;
	struct fault_ctx *thread_ctx; /* one per service thread */

	/* SIGBUS mode. */
	struct fault_ctx sig_ctx[RG_SIG_CTXS];
	_Atomic uint32_t sig_free; /* bit i: sig_ctx[i] free */
	int slot; /* in the registry, or -1 */
	int was_registered; /* taken out of the registry, the descriptor not yet closed */
	/*
	 * A fault the SIGBUS handler could not serve is logged by the service thread, through
	 * the program's log hook, which cannot be called from a signal handler: the handler
	 * asks (fail_asked, the address, log_fd) and waits a moment for fail_told.
	 */
	int log_fd;
	_Atomic uint32_t fail_asked, fail_told;
	_Atomic uintptr_t fail_addr;

	/* Reclaim and readahead threads. */
	pthread_mutex_t bg_lock;
	pthread_cond_t bg_cond;
	int bg_stop, reclaim_kick;
	_Atomic int bg_stopping; /* bg_stop, for the reclaimer's loop outside bg_lock */
	uint64_t ra_next, ra_end; /* readahead wanted for [next, end), under bg_lock */
	uint64_t fill_next, fill_end; /* fresh frames to fill for [next, end), under bg_lock */
	_Atomic uint64_t ra_last; /* the last unit a fault brought in, + 1 */
	pthread_t reclaimer, reader;
	int have_reclaimer, have_reader;
	int want_reader; /* readahead on: set before the service threads start */
	int want_filler; /* frames: the reader fills fresh frames opened ahead (fresh_ahead) */
	struct fault_ctx ra_ctx;
	pthread_mutex_t advise_lock; /* for advise_ctx: ZF_ADV_HOT swap-ins */
	struct fault_ctx advise_ctx;

	_Atomic int dying; /* zf_region_destroy() has unregistered the memory */
	/*
	 * fork (region_fork.c): read while a fault is served or a unit swapped in; written
	 * by a fork with ZF_FORK_COPY, which so finds no unit in transition.
	 */
	pthread_rwlock_t fork_lock;
	zf_region *fork_next; /* in the list of ZF_FORK_COPY regions, under its lock */
	/*
	 * REMAP events read and not yet handled, plus one while a read of the descriptor is
	 * under way: an mremap() goes on as soon as its REMAP is read, inside read(), before
	 * it can be counted (region_read_events()). Memory moved out is not served while
	 * this is nonzero.
	 */
	_Atomic int remaps_pending;
	_Atomic int remapped; /* memory ever moved out by mremap */
	struct counters n;
};

/* What serving a fault came to (region_serve(), region_swap_in()). */
enum serve_result {
	SERVED = 0,
	WAIT = 1, /* another thread owns the unit: try again after it wakes us */
	RETRY = 2, /* the layout is changing (EAGAIN): try again after the events are read */
	FAILED = 3, /* cannot be served: fail closed */
	GONE = 4, /* the range went away */
	NOROOM = 5, /* at the residency limit: try again after reclaim */
};

/* -------------------------------------------------------------------------------- */
/* Small helpers                                                                    */
/* -------------------------------------------------------------------------------- */

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define INC(r, field) atomic_fetch_add_explicit(&(r)->n.field, 1, memory_order_relaxed)
#define ADD(r, field, v) atomic_fetch_add_explicit(&(r)->n.field, (v), memory_order_relaxed)

/* Bucket of a latency: two per power of two, from 1 ns. */
static inline unsigned lat_bucket(uint64_t ns)
{
	unsigned b, i;

	if (ns < 2)
		return 0;
	b = 63u - (unsigned)__builtin_clzll(ns);
	i = 2 * b + (unsigned)((ns >> (b - 1)) & 1);
	return i < ZF_REGION_LAT_BUCKETS ? i : ZF_REGION_LAT_BUCKETS - 1;
}

static inline void lat_record(zf_region *r, uint64_t t0)
{
	const uint64_t ns = now_ns() - t0;

	atomic_fetch_add_explicit(&r->n.lat[lat_bucket(ns)], 1, memory_order_relaxed);
	ADD(r, fault_ns, ns);
}

static inline void futex_wait(_Atomic uint32_t *word, uint32_t val)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static inline void futex_wake_all(_Atomic uint32_t *word)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/*
 * Serving a fault or swapping a unit in: never across a fork of a ZF_FORK_COPY region
 * (region_fork.c). Other regions are not in a child: their faults take no lock for it.
 */
static inline void fork_gate_enter(zf_region *r)
{
	if (r->o.fork == ZF_FORK_COPY)
		pthread_rwlock_rdlock(&r->fork_lock);
}

static inline void fork_gate_leave(zf_region *r)
{
	if (r->o.fork == ZF_FORK_COPY)
		pthread_rwlock_unlock(&r->fork_lock);
}

static inline uint8_t *unit_addr(const zf_region *r, uint64_t u)
{
	return r->base + (u << (r->order + 12));
}

static inline uint64_t unit_index(const zf_region *r, uint64_t u)
{
	return u * r->unit_pages;
}

/* Units that [start, end) touches: [*u0, *u1). */
static inline int units_of(zf_region *r, uintptr_t start, uintptr_t end, uint64_t *u0, uint64_t *u1)
{
	const uintptr_t lo = ZF_MAX(start, (uintptr_t)r->base);
	const uintptr_t hi = ZF_MIN(end, (uintptr_t)(r->base + r->size));

	if (lo >= hi)
		return 0;
	*u0 = (lo - (uintptr_t)r->base) >> (r->order + 12);
	*u1 = ((hi - 1 - (uintptr_t)r->base) >> (r->order + 12)) + 1;
	return 1;
}

static inline int uffd_range(zf_region *r, unsigned long req, void *arg)
{
	return ioctl(r->uffd, req, arg) ? -errno : 0;
}

static inline void wake_range(zf_region *r, void *addr, size_t len)
{
	struct uffdio_range rg = { .start = (uintptr_t)addr, .len = len };

	(void)uffd_range(r, UFFDIO_WAKE, &rg);
}

/*
 * Write-protects (wp 1) or unprotects [addr, addr + len), waking the faults waiting on it:
 * 0, or -EAGAIN while the layout changes (an event is unread: the caller lets go of
 * read_lock and retries; retried here under read_lock, it kept the event from being read,
 * and SIGBUS-mode faults retrying so starved the service thread for good: frames_test
 * racing), or the range's error.
 */
static inline int protect(zf_region *r, void *addr, size_t len, int wp)
{
	struct uffdio_writeprotect w = {
		.range = { .start = (uintptr_t)addr, .len = len },
		.mode = wp ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
	};

	return uffd_range(r, UFFDIO_WRITEPROTECT, &w);
}

/*
 * Claims unit u: moves it from state from to to (keeping its flags, minus clear, plus
 * set); 0, or -EAGAIN when it was not in from or an event holds it (F_EVENT).
 */
static inline int unit_move(zf_region *r, uint64_t u, uint32_t from, uint32_t to, uint32_t clear,
			    uint32_t set)
{
	uint32_t old = atomic_load_explicit(&r->state[u], memory_order_acquire);

	do {
		if ((old & ST_MASK) != from || (old & F_EVENT))
			return -EAGAIN;
	} while (!atomic_compare_exchange_weak_explicit(
		&r->state[u], &old, ((old & ~(ST_MASK | clear)) | set | to), memory_order_acq_rel,
		memory_order_acquire));
	return 0;
}

/*
 * Ends the transition of unit u (its owner calls it): state to, flags cleared and set;
 * wakes whoever waited (futex sleepers, and faults left unanswered on the range).
 */
static inline void unit_release(zf_region *r, uint64_t u, uint32_t to, uint32_t clear, uint32_t set)
{
	uint32_t old = atomic_load_explicit(&r->state[u], memory_order_acquire), nw;

	do
		nw = (old & ~(ST_MASK | F_WAIT | clear)) | set | to;
	while (!atomic_compare_exchange_weak_explicit(&r->state[u], &old, nw, memory_order_acq_rel,
						      memory_order_acquire));
	if (old & F_WAIT) {
		futex_wake_all(&r->state[u]);
		wake_range(r, unit_addr(r, u), r->unit);
	}
}

/* Whether a unit in state word st is in a transition or held by an event: to wait for. */
static inline int unit_unsettled(uint32_t st)
{
	return (st & ST_MASK) == ST_EVICTING || (st & ST_MASK) == ST_LOADING || (st & F_EVENT);
}

/* Marks that somebody waits on unit u while it is in state st; 0, or -EAGAIN if it left st. */
static inline int unit_wait_mark(zf_region *r, uint64_t u, uint32_t *seen)
{
	uint32_t old = atomic_load_explicit(&r->state[u], memory_order_acquire);

	for (;;) {
		if (!unit_unsettled(old))
			return -EAGAIN;
		if (old & F_WAIT)
			break;
		if (atomic_compare_exchange_weak_explicit(&r->state[u], &old, old | F_WAIT,
							  memory_order_acq_rel,
							  memory_order_acquire)) {
			old |= F_WAIT;
			break;
		}
	}
	*seen = old;
	return 0;
}

/* Raises *max to now if now is higher (a peak counter). */
static inline void counter_max(_Atomic uint64_t *max, uint64_t now)
{
	uint64_t seen = atomic_load_explicit(max, memory_order_relaxed);

	while (now > seen && !atomic_compare_exchange_weak_explicit(
				     max, &seen, now, memory_order_relaxed, memory_order_relaxed))
		;
}

static inline void resident_add(zf_region *r, int64_t units)
{
	counter_max(&r->n.resident_max,
		    atomic_fetch_add_explicit(&r->resident, (uint64_t)units, memory_order_acq_rel) +
			    (uint64_t)units);
	if (r->group && units)
		group_add(r->group, r->group_slot, units * (int64_t)r->unit);
}

/* Units leave residency; forked of them were not charged to the group (F_FORKED). */
static inline void resident_sub(zf_region *r, uint64_t units, uint64_t forked)
{
	atomic_fetch_sub_explicit(&r->resident, units, memory_order_acq_rel);
	if (r->group && units > forked)
		group_add(r->group, r->group_slot, -(int64_t)((units - forked) * r->unit));
}

/* -------------------------------------------------------------------------------- */
/* Residency limit (the fault side; reclaim is in region_reclaim.c)                 */
/* -------------------------------------------------------------------------------- */

void region_reclaim_kick(zf_region *r);

/* Whether one more unit may come in now: resident stays within limit + one batch. */
static inline int room_for_one(zf_region *r)
{
	if (!r->limit_units)
		return 1;
	if (r->group ? group_room(r->group, r->unit)
		     : atomic_load_explicit(&r->resident, memory_order_acquire) + 1 <=
			       r->limit_units + r->batch_units)
		return 1;
	return atomic_load_explicit(&r->admit_over, memory_order_acquire);
}

/* Whether the region (or its group) holds more than its limit: reclaim's work. */
static inline int over_limit(zf_region *r)
{
	if (!r->limit_units)
		return 0;
	return r->group ? group_over(r->group)
			: atomic_load_explicit(&r->resident, memory_order_acquire) > r->limit_units;
}

/*
 * Takes room for one more unit (resident + 1), if the limit allows: the check and the
 * increment are one step, so concurrent faults cannot pass the limit together.
 */
static inline int resident_reserve(zf_region *r)
{
	uint64_t cur;

	if (r->group) {
		if (!group_reserve(r->group, r->group_slot, r->unit,
				   !r->limit_units || atomic_load_explicit(&r->admit_over,
									   memory_order_acquire)))
			return 0;
		counter_max(&r->n.resident_max,
			    atomic_fetch_add_explicit(&r->resident, 1, memory_order_acq_rel) + 1);
		return 1;
	}
	cur = atomic_load_explicit(&r->resident, memory_order_acquire);
	do {
		if (r->limit_units && cur + 1 > r->limit_units + r->batch_units &&
		    !atomic_load_explicit(&r->admit_over, memory_order_acquire))
			return 0;
	} while (!atomic_compare_exchange_weak_explicit(
		&r->resident, &cur, cur + 1, memory_order_acq_rel, memory_order_acquire));
	resident_add(r, 0); /* the maximum */
	return 1;
}

/* After a unit came in: past the limit, reclaim starts. */
static inline void after_admit(zf_region *r)
{
	if (over_limit(r))
		region_reclaim_kick(r);
}

/* -------------------------------------------------------------------------------- */
/* Functions shared between the region's files                                      */
/* -------------------------------------------------------------------------------- */

/* Each is described where it is defined; grouped here by file. */

/* region.c: anonymous memory at a 2 MiB boundary. */
uint8_t *region_map_aligned(size_t len);

/* region_uffd.c: the descriptor, placing pages. */
int region_uffd_register(zf_region *r);
int region_uffd_reopen(zf_region *r);
int region_place(zf_region *r, uint8_t *dst, const uint8_t *src, size_t len, int wp);
/*
 * Moves [src, src + len) to dst (UFFDIO_MOVE; dst registered with us, holes stay holes):
 * the bytes moved, in order, before the kernel refused (*err); -EAGAIN is retried tries
 * times while no progress is made.
 */
size_t region_move(zf_region *r, uint8_t *dst, uint8_t *src, size_t len, int tries, int *err);
int region_zero_fill(zf_region *r, uint8_t *addr, size_t len);

/* region_frame.c: frames placed as huge pages. */
int region_frame_setup(zf_region *r);

/* region_fork.c: the ZF_FORK_COPY regions a child gets (list kept by region.c). */
void region_fork_add(zf_region *r);
void region_fork_remove(zf_region *r);
/* region.c: the region's threads started (at creation, and in a child after fork). */
int region_start_threads(zf_region *r);
int region_open_eventfds(zf_region *r);
void region_locks_init(zf_region *r);
/* fn(r, addr, len, arg) on each run of units still the region's (not GONE). */
void region_live_runs(zf_region *r, void (*fn)(zf_region *r, uint8_t *addr, size_t len, int arg),
		      int arg);
void region_unmap_run(zf_region *r, uint8_t *addr, size_t len, int arg);
int region_frame_mapped(const uint8_t *addr);
int region_page_present(zf_region *r, const uint8_t *addr);
int region_frame_premap(zf_region *r, uint64_t u, const uint8_t *page);
void region_frame_zeros(zf_region *r, struct fault_ctx *c, int write);
void region_buf_set(zf_region *r, struct fault_ctx *c, enum buf_state to);
int region_frame_place(zf_region *r, struct fault_ctx *c, uint8_t *dst);

/* region_evict.c: evicts units of a chunk; evict_lock held. */
uint64_t region_evict_chunk(zf_region *r, uint64_t first, uint64_t n, const uint8_t *sel,
			    int reclaim);
int region_doubt_left(zf_region *r, uint64_t u, int settle);

/*
 * region_reclaim.c: the threads' bodies, readahead's note and the fresh frames to fill
 * (region_reclaim_kick(): above).
 */
void *region_reclaim_main(void *arg);
void *region_readahead_main(void *arg);
void region_readahead_note(zf_region *r, uint64_t u);
void region_fill_note(zf_region *r, uint64_t first, uint64_t end);

/* region_fault.c: fault contexts, reading a unit back, swap-in, serving, service threads. */
int region_fault_ctx_init(zf_region *r, struct fault_ctx *c);
int region_fault_ctx_buf(zf_region *r, struct fault_ctx *c);
void region_fault_ctx_fini(zf_region *r, struct fault_ctx *c);
int region_load_data(zf_region *r, struct fault_ctx *c, uint64_t u, int64_t page);
enum serve_result region_swap_in(zf_region *r, struct fault_ctx *c, uint64_t u, uint8_t *addr,
				 int ra);
enum serve_result region_serve(zf_region *r, struct fault_ctx *c, uint8_t *addr, int wp, int write);
/* What region_start() hands a service thread; region_service_main() frees it. */
struct service_arg {
	zf_region *r;
	struct fault_ctx *c;
};
void *region_service_main(void *arg);

/* region_order.c: the order of the program's layout changes. */
int region_order_init(zf_region *r);
void region_order_fini(zf_region *r);
/* Where event m, just read, goes in the order of layout changes (its qseq). */
uint64_t region_event_seq(zf_region *r, const struct uffd_msg *m);
/* The range event m covers: [*a, *b). */
void region_event_range(const struct uffd_msg *m, uintptr_t *a, uintptr_t *b);
/*
 * Where the page at addr is now, after the events queued behind position i (-1: the
 * whole queue, from the last event handled) moved it, counting only changes that came
 * after the one it starts from: its address, or 0 when unmapped. *dropped: a later
 * REMOVE dropped it (it reads as zeros there). Under read_lock.
 */
uintptr_t region_follow(zf_region *r, int i, uintptr_t addr, int *dropped);

/* region_events.c: reading, queueing and handling events. */
ssize_t region_read_events(zf_region *r, struct fault_ctx *c, struct uffd_msg *msgs, size_t cap);
void region_run_queue(zf_region *r, struct fault_ctx *c);
/* Reads and handles the events left, the service threads gone (zf_region_destroy()). */
void region_drain_events(zf_region *r, struct fault_ctx *c);
/* Whether an event queued unmapped or moved memory of [start, end). Under read_lock. */
int region_moved_on(zf_region *r, uintptr_t start, uintptr_t end);
/*
 * Copies the pages present in [src, src + len) back to addr (region memory they were
 * moved out of), or where the program's events since took that memory; takes read_lock.
 */
void region_put_back(zf_region *r, uint8_t *addr, const uint8_t *src, size_t len);

/*
 * region_sigbus.c: a SIGBUS-mode region enters the handler's registry, and leaves it; a
 * fault in memory moved out of a region waits from then until its descriptor is closed.
 */
int region_sigbus_register(zf_region *r);
void region_sigbus_fork_child(void);
void region_sigbus_unregister(zf_region *r);
void region_sigbus_closed(zf_region *r);

#endif /* ZF_REGION_INTERNAL_H */
