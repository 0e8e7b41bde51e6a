/*
 * region_model.c - a model of the region's eviction and fault protocols (src/region/),
 * checked exhaustively by model_explore.c: every interleaving of the program's threads,
 * an evictor, and the service thread that reads the userfaultfd's events, over a region
 * of two units of two pages, with the kernel's part (page tables, mappings, the event
 * rules of userfaultfd) modelled beside it.
 *
 * What it checks, in every state: a read returns the last value written to that page of
 * the program's memory, or zeros once a madvise(MADV_DONTNEED) of it returned, wherever
 * mremap() moved it (no lost write, no stale data, data follows moved memory); zfolio
 * never takes, wipes or reads past the program's own memory (a mapping it put in a hole
 * it unmapped); an evicted unit always has its data; no thread waits forever and no event
 * stays unhandled (no deadlock, no livelock).
 *
 * The model follows the code step by step: each step is one atomic action of the code (a
 * compare-and-swap on a unit's state word, one page of an ioctl, a lock taken with a
 * check under it), and the names are the code's. What it leaves out, and why, is in
 * tests/model/README.md. --bug switches put back the behaviours issue 23 fixed, so that a
 * test can show that the model still finds each of them; two of them (putback-unfollowed,
 * gone-unwaited) are the code's as of 8bdbf10, which the model found wrong: the README
 * says what the code must change.
 *
 * Values: a page's content is one byte, 0 for zeros, else (logical page << 4 | version):
 * every write makes a new version, so a read knows the write it sees and where it came
 * from. Logical pages 0..3 are the region's; 4 + a is memory the program mapped itself
 * (MAP_FIXED) at address a after unmapping what was there.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_explore.h"

#define NU 2 /* units */
#define NP 2 /* pages per unit */
#define NR (NU * NP) /* the region's pages: addresses 0..NR-1 */
#define AREA_X NR /* outside the region: two areas of a unit each, for mremap */
#define AREA_Y (NR + NP)
#define NA (NR + 2 * NP) /* addresses */
#define NL (NR + NA) /* logical pages: the region's, then the program's new memory */
#define NEWL(a) (NR + (a)) /* the program's new memory mapped at address a */
#define QMAX 4 /* events queued (RG_QUEUE) */
#define UMAX 2 /* events sent and not yet read */
#define NOWHERE 0xff
#define BIT(a) (1u << (a))

_Static_assert(NA <= 8 && NU * NP <= 8, "page masks are bytes");
_Static_assert(NL <= 16, "a value is a logical page and a version in a byte");

/* -------------------------------------------------------------------------------- */
/* The state                                                                        */
/* -------------------------------------------------------------------------------- */

/* A unit's state word (region_internal.h), with the model's own bit values. */
enum { ST_EMPTY, ST_RESIDENT, ST_EVICTING, ST_EVICTED, ST_LOADING, ST_GONE };
#define ST_MASK 7u
#define F_WAIT 0x08u
#define F_EVENT 0x10u
#define F_CLEAN 0x20u
#define F_DOUBT 0x40u

/* What is mapped at an address. */
enum {
	VMA_NONE, /* nothing: unmapped */
	VMA_UFFD, /* the region's memory, where it is now: registered with zfolio's descriptor */
	VMA_PLAIN, /* the program's own memory (MAP_FIXED in a hole): registered with nobody */
};

enum { EV_REMOVE = 1, EV_UNMAP, EV_REMAP };

/* A userfaultfd event: [a, b), and for REMAP the destination of a. */
struct event {
	uint8_t type, a, b, to;
	uint8_t who; /* the program thread its call holds until it is read */
};

enum {
	O_END,
	O_WRITE,
	O_READ,
	O_TOUCH,
	O_DONTNEED,
	O_FREE,
	O_MUNMAP,
	O_MUNMAP_MAP,
	O_MREMAP,
	O_FORK,
	O_ANY,
	O_READ_ALL
};

/*
 * An operation of a program thread on logical pages l..l+n-1 (their current address).
 * O_ANY: any operation of the menu below that can run (a choice); O_READ_ALL: reads and
 * checks every page the program has.
 */
struct op {
	uint8_t op, l, n, to;
};

/* A program thread: runs its script; serves its own faults (SIGBUS mode). */
struct prog {
	struct op cur; /* the operation it runs: the script's, or the one it chose */
	uint8_t pc, ph;
	uint8_t a; /* the address accessed */
	uint8_t k; /* the page placed next (a unit's), or zapped next (madvise) */
	uint8_t wpf; /* the fault is a write to a write-protected page */
	uint8_t sleep; /* asleep on unit sleep - 1 until woken (futex, unanswered fault) */
	uint8_t blocked; /* in madvise/munmap/mremap until its event is read */
	uint8_t io; /* IO_MM, IO_BYPAGE: a unit being placed */
	uint8_t clear; /* flags its release clears (a clean copy dropped) */
	uint8_t buf[NP]; /* a swap-in's data */
};
#define IO_MM 1u /* inside a multi-page ioctl: holds mmap_lock for reading */
#define IO_BYPAGE 2u /* after an EEXIST: page by page, an ioctl each */

/* The evictor: region_evict_chunk() over the whole region, cfg.rounds times. */
struct evictor {
	uint8_t ph, round, i, k, sleep, io;
	uint8_t claimed, failed; /* units: claimed; could not move whole (given back) */
	uint8_t settling; /* 0: giving back the units that could not move; 1: settling */
	uint8_t bypage; /* unit i spans two mappings: moved page by page */
	uint8_t snap[NU], torn; /* --bug in-place: pages present when protected; torn units */
	uint8_t buf[NU][NP]; /* --bug in-place: what the compressor read */
};

/* The service thread: reads events, queues them, handles the queue (region_events.c). */
struct service {
	uint8_t ph, u, k;
	uint8_t buf[NP];
};

struct state {
	/* The kernel: the program's mappings and page tables, and the userfaultfd. */
	uint8_t vma[NA], val[NA];
	uint8_t pres, wp; /* addresses with a page; write-protected ones */
	uint8_t stage[NU * NP], stage_pres; /* the evictor's staging area */
	struct event unread[UMAX];
	uint8_t nunread; /* = mmap_changing: while nonzero, COPY/ZEROPAGE/MOVE/WP get EAGAIN */
	uint8_t mm_readers; /* ioctls in flight over several pages: munmap/mremap wait */
	/* zfolio */
	uint8_t st[NU];
	uint8_t store[NU][NP], store_has;
	struct event queue[QMAX];
	uint8_t nq;
	uint8_t rd, wr; /* read_lock: readers; a writer */
	uint8_t remaps_pending;
	/* The program, as the checker knows it: where each page is, what a read must see. */
	uint8_t where[NL], expect[NL], ver[NL];
	uint16_t freed; /* pages MADV_FREE'd and not written since: they may read zeros */
	struct prog p[2];
	struct evictor ev;
	struct service sv;
};

enum { T_P1, T_P2, T_EV, T_SV, NTHREADS };
static const char *const thread_names[NTHREADS] = { "T1", "T2", "evictor", "service" };

/* -------------------------------------------------------------------------------- */
/* The configuration: a scenario, and the behaviours taken back (--bug)             */
/* -------------------------------------------------------------------------------- */

/* clang-format off */
#define W(l) { O_WRITE, (l), 1, 0 } /* write a new version */
#define R(l) { O_READ, (l), 1, 0 } /* read, and check */
#define TOUCH(l) { O_TOUCH, (l), 1, 0 } /* read, unchecked (a racing thread) */
#define DONTNEED(l, n) { O_DONTNEED, (l), (n), 0 }
#define FREE(l, n) { O_FREE, (l), (n), 0 } /* madvise(MADV_FREE): no zap follows */
#define MUNMAP(l, n) { O_MUNMAP, (l), (n), 0 }
#define MUNMAP_MAP(l, n) { O_MUNMAP_MAP, (l), (n), 0 } /* then mmap(MAP_FIXED) new memory */
#define MREMAP(l, n, to) { O_MREMAP, (l), (n), (to) } /* MREMAP_FIXED to address to */
#define FORK { O_FORK, 0, 0, 0 }
#define ANY { O_ANY, 0, 0, 0 }
#define READ_ALL { O_READ_ALL, 0, 0, 0 }
/* clang-format on */

/*
 * What O_ANY chooses from: writes, madvise of part of a unit and of a whole one, and
 * munmap, mremap away and back of unit 0 (a thread touching unit 1 meanwhile stays
 * within what a program may do).
 */
#define NMENU 8
static const struct op menu[NMENU] = {
	W(0),
	W(3),
	DONTNEED(1, 1),
	DONTNEED(2, 2),
	MUNMAP_MAP(0, 2),
	MREMAP(0, 2, AREA_X),
	MREMAP(0, 2, 0),
	FORK,
};

struct scenario {
	const char *name, *what;
	struct op script[2][10];
	uint8_t rounds; /* evictions */
	int clean; /* keep_clean: swap-ins keep the stored copy, pages write-protected */
};

static const struct scenario scenarios[] = {
	{ "dontneed",
	  "madvise(DONTNEED) of part of a unit and of a whole unit, racing eviction and a swap-in",
	  { { DONTNEED(0, 1), R(0), R(1), DONTNEED(2, 2), R(2), R(3) }, { TOUCH(1) } },
	  1,
	  0 },
	{ "dontneed-two",
	  "two threads' madvise(DONTNEED) at once, each on its own unit",
	  { { DONTNEED(0, 1), R(0), R(1) }, { DONTNEED(2, 2), R(2), R(3) } },
	  1,
	  0 },
	{ "write",
	  "writes racing eviction and swap-in, then read back",
	  { { W(0), W(2), R(0), R(2) }, { W(1), R(1) } },
	  2,
	  0 },
	{ "munmap",
	  "munmap() of a unit and mmap(MAP_FIXED) of the program's own memory in the hole",
	  { { MUNMAP_MAP(0, 2), W(NEWL(0)), W(NEWL(1)), R(NEWL(0)), R(NEWL(1)) }, { TOUCH(2) } },
	  1,
	  0 },
	{ "munmap-page",
	  "munmap() of one page of a unit, new memory there, the other page read back",
	  { { MUNMAP_MAP(1, 1), W(NEWL(1)), R(0), R(NEWL(1)) }, { TOUCH(0) } },
	  1,
	  0 },
	{ "mremap-back",
	  "mremap() of a unit away and straight back",
	  { { MREMAP(0, 2, AREA_X), MREMAP(0, 2, 0), R(0), R(1) }, { TOUCH(2) } },
	  1,
	  0 },
	{ "mremap-reuse",
	  "away and back, then another unit moved to the same address",
	  { { MREMAP(0, 2, AREA_X), MREMAP(0, 2, 0), MREMAP(2, 2, AREA_X), R(0), R(1), R(2),
	      R(3) } },
	  1,
	  0 },
	{ "mremap-on",
	  "mremap() of a unit away, then on, then written and read",
	  { { MREMAP(0, 2, AREA_X), MREMAP(0, 2, AREA_Y), W(0), R(0), R(1) } },
	  1,
	  0 },
	{ "mremap-page",
	  "mremap() of one page of a unit",
	  { { MREMAP(1, 1, AREA_X), R(0), R(1) }, { TOUCH(0) } },
	  1,
	  0 },
	{ "munmap-remap",
	  "a unit unmapped, another moved into its hole",
	  { { MUNMAP(0, 2), MREMAP(2, 2, 0), R(2), R(3) } },
	  1,
	  0 },
	{ "fork",
	  "fork() between writes and a madvise: the parent loses nothing",
	  { { W(0), FORK, DONTNEED(1, 1), R(0), R(1) }, { W(2), R(2) } },
	  1,
	  0 },
	{ "any",
	  "two operations of any kind (writes, madvise, munmap, mremap away and back, fork) "
	  "in any order, then every page read back",
	  { { ANY, ANY, READ_ALL }, { TOUCH(3), TOUCH(2) } },
	  1,
	  0 },
	{ "free",
	  "madvise(MADV_FREE) of a whole unit and of part of one, then writes and reads, racing "
	  "pageouts: its REMOVE is a DONTNEED's, but no zap follows",
	  { { FREE(0, 2), R(0), W(1), R(1) }, { FREE(2, 1), R(2), W(2), R(3) } },
	  2,
	  0 },
	{ "clean",
	  "clean copies: a swap-in keeps the copy, a write drops it, eviction reuses it",
	  { { R(0), W(0), R(0), DONTNEED(1, 1), R(1) }, { R(2), W(3), R(3) } },
	  2,
	  1 },
};

/*
 * Behaviours that break the invariants, for tests that show the model finds them: those
 * issue 23 took out, and two the code still has (README.md, "Where the code differs").
 */
struct bug {
	const char *name, *what;
};
enum {
	BUG_IN_PLACE,
	BUG_ZAP_UNWAITED,
	BUG_REMAP_UNFOLLOWED,
	BUG_MOVE_UNCHECKED,
	BUG_PUTBACK_UNFOLLOWED,
	BUG_GONE_UNWAITED,
	BUG_DOUBT_UNCHECKED,
	BUG_ZAP_FOREVER,
	NBUGS
};
static const struct bug bugs[NBUGS] = {
	{ "in-place",
	  "eviction reads the program's mapping in place: write-protect, compress, re-protect, "
	  "MADV_DONTNEED (before 8bdbf10)" },
	{ "zap-unwaited",
	  "a REMOVE handled before the program's zap leaves its pages unmarked (the wait was "
	  "bounded, 100 ms, with nothing after it)" },
	{ "remap-unfollowed",
	  "a REMAP places evicted data at its destination, not following later events" },
	{ "move-unchecked",
	  "the evictor moves pages out without checking the queue for an UNMAP/REMAP, or the "
	  "units for an event's hold" },
	{ "putback-unfollowed",
	  "a unit the store refused is copied back at its address first, the queue consulted "
	  "only when that fails, and moves ignore the events' holds (as of 8bdbf10)" },
	{ "gone-unwaited",
	  "a fault on a GONE unit is served as plain memory at once, also while a REMAP that "
	  "moved memory there is unhandled (region_serve() as of 8bdbf10)" },
	{ "doubt-unchecked",
	  "an eviction takes a unit whose pages a REMOVE handled before its zap left "
	  "(F_DOUBT not checked)" },
	{ "zap-forever",
	  "a REMOVE waits for its zap with no time limit (before stop 32): a MADV_FREE's never "
	  "comes" },
};

static struct {
	const struct scenario *sc;
	int bug[NBUGS];
} cfg;

/* -------------------------------------------------------------------------------- */
/* Small helpers                                                                    */
/* -------------------------------------------------------------------------------- */

static const char *const st_names[] = { "EMPTY",   "RESIDENT", "EVICTING",
					"EVICTED", "LOADING",  "GONE" };

static unsigned state_of(uint8_t w)
{
	return w & ST_MASK;
}

static uint8_t unit_addr(unsigned u)
{
	return (uint8_t)(u * NP);
}

static int busy(uint8_t w)
{
	return state_of(w) == ST_EVICTING || state_of(w) == ST_LOADING;
}

/* Units of the region that [a, b) touches: [*u0, *u1); 0 if none. */
static int units_of(uint8_t a, uint8_t b, unsigned *u0, unsigned *u1)
{
	const unsigned lo = a, hi = b < NR ? b : NR;

	if (lo >= hi)
		return 0;
	*u0 = lo / NP;
	*u1 = (hi - 1) / NP + 1;
	return 1;
}

static int overlaps(const struct event *e, unsigned a, unsigned b)
{
	return e->a < b && e->b > a;
}

/* Set when a helper finds the model itself wrong; the step then reports it. */
static int model_broken;

static int model_error(const char *what)
{
	model_broken = 1;
	return mx_violate("model-error", "%s (a scenario the model cannot run)", what);
}

/* A page's content, for a report: "zeros", or "page 2 v3" (logical page 2, 3rd version). */
struct val_text {
	char s[16];
};

static struct val_text val_text(uint8_t v)
{
	struct val_text t;

	if (v)
		snprintf(t.s, sizeof(t.s), "page %u v%u", v >> 4, v & 15);
	else
		snprintf(t.s, sizeof(t.s), "zeros");
	return t;
}

/* An ioctl's outcome, for a report. */
static const char *outcome(int ret)
{
	return ret == -EAGAIN ? "EAGAIN" : ret == -ENOENT ? "ENOENT" : ret ? "EEXIST" : "placed";
}

/* Wakes whoever sleeps on unit u (futex_wake_all(), UFFDIO_WAKE of its range). */
static void wake(struct state *s, unsigned u)
{
	for (int t = 0; t < 2; t++)
		if (s->p[t].sleep == u + 1)
			s->p[t].sleep = 0;
	if (s->ev.sleep == u + 1)
		s->ev.sleep = 0;
}

/* unit_release(): the owner ends the transition; waiters are woken. */
static void unit_release(struct state *s, unsigned u, unsigned to, uint8_t clear, uint8_t set)
{
	const uint8_t old = s->st[u];

	if (!busy(old))
		(void)model_error("a unit released by a thread that does not own it");

	s->st[u] = (uint8_t)((old & ~(ST_MASK | F_WAIT | clear)) | set | to);
	mx_say("unit %u %s", u, st_names[to]);
	if (old & F_WAIT)
		wake(s, u);
}

/* unit_set_settled(): an event sets a unit's state, its hold and waiters kept. */
static void unit_set_settled(struct state *s, unsigned u, unsigned to)
{
	s->st[u] = (uint8_t)((s->st[u] & (F_EVENT | F_WAIT)) | to);
	mx_say("unit %u %s", u, st_names[to]);
}

static void invalidate(struct state *s, unsigned u)
{
	if (s->store_has & BIT(u))
		mx_say("stored copy of unit %u dropped", u);
	s->store_has &= (uint8_t)~BIT(u);
}

/* -------------------------------------------------------------------------------- */
/* The kernel                                                                       */
/* -------------------------------------------------------------------------------- */

/*
 * One page of UFFDIO_COPY (v) or UFFDIO_ZEROPAGE (v 0) at a, the ioctl's mmap_changing
 * check done: 0, -ENOENT (not registered with us), -EEXIST (a page is there).
 */
static int k_fill(struct state *s, uint8_t a, uint8_t v, int wp)
{
	if (s->vma[a] != VMA_UFFD)
		return -ENOENT;
	if (s->pres & BIT(a))
		return -EEXIST;
	s->pres |= (uint8_t)BIT(a);
	s->val[a] = v;
	if (wp)
		s->wp |= (uint8_t)BIT(a);
	else
		s->wp &= (uint8_t)~BIT(a);
	return 0;
}

static void k_zap(struct state *s, uint8_t a)
{
	s->pres &= (uint8_t)~BIT(a);
	s->wp &= (uint8_t)~BIT(a);
	s->val[a] = 0;
}

/* A program thread's call sends event e and sleeps until a service thread reads it. */
static int k_send(struct state *s, unsigned t, struct event e)
{
	if (s->nunread == UMAX)
		return model_error("too many events unread");
	e.who = (uint8_t)t;
	s->unread[s->nunread++] = e;
	s->p[t].blocked = 1;
	return MX_OK;
}

/*
 * One step of placing a unit's pages at base (region_place() of a whole unit, or
 * region_zero_fill()): page *k. A multi-page ioctl checks mmap_changing once, at its
 * start, and holds mmap_lock (munmap and mremap wait); after an EEXIST the rest goes
 * page by page, an ioctl each. Returns 0 (the page placed or there already; *k on),
 * -EAGAIN (an event is unread: nothing done), -ENOENT (the range is gone).
 */
static int place_unit_step(struct state *s, uint8_t *io, uint8_t *k, uint8_t base,
			   const uint8_t *vals, int wp)
{
	int ret;

	if (*k == 0 || (*io & IO_BYPAGE)) {
		if (s->nunread)
			return -EAGAIN;
		if (*k == 0 && NP > 1) {
			*io |= IO_MM;
			s->mm_readers++;
		}
	}
	ret = k_fill(s, (uint8_t)(base + *k), vals ? vals[*k] : 0, wp);
	if (ret == -EEXIST && !(*io & IO_BYPAGE)) {
		*io |= IO_BYPAGE;
		if (*io & IO_MM) {
			*io &= (uint8_t)~IO_MM;
			s->mm_readers--;
		}
	}
	if (ret == -ENOENT || ++*k == NP) {
		if (*io & IO_MM)
			s->mm_readers--;
		*io = 0;
	}
	if (ret == -ENOENT)
		mx_say("ENOENT");
	else
		mx_say("page %u %s", base + *k - 1, ret ? "there already (EEXIST)" : "placed");
	return ret == -ENOENT ? -ENOENT : 0;
}

/* -------------------------------------------------------------------------------- */
/* The queue (region_events.c)                                                      */
/* -------------------------------------------------------------------------------- */

/* follow(): where the page at addr (as of queue position i) is now; NOWHERE if unmapped. */
static uint8_t follow(const struct state *s, int i, uint8_t addr, int *dropped)
{
	*dropped = 0;
	if (cfg.bug[BUG_REMAP_UNFOLLOWED] && i >= 0)
		return addr;
	for (unsigned k = (unsigned)(i + 1); k < s->nq; k++) {
		const struct event *e = &s->queue[k];

		if (addr < e->a || addr >= e->b)
			continue;
		if (e->type == EV_REMAP)
			addr = (uint8_t)(e->to + (addr - e->a));
		else if (e->type == EV_UNMAP)
			return NOWHERE;
		else
			*dropped = 1;
	}
	return addr;
}

/* region_moved_on(): an UNMAP or REMAP queued over [a, b). */
static int moved_on(const struct state *s, unsigned a, unsigned b)
{
	for (unsigned k = 0; k < s->nq; k++)
		if (s->queue[k].type != EV_REMOVE && overlaps(&s->queue[k], a, b))
			return 1;
	return 0;
}

/* held_later(): an event queued after position i covers unit u. */
static int held_later(const struct state *s, unsigned i, unsigned u)
{
	for (unsigned k = i + 1; k < s->nq; k++)
		if (overlaps(&s->queue[k], unit_addr(u), unit_addr(u) + NP))
			return 1;
	return 0;
}

/*
 * zap_pending(): the program's zap of the REMOVE at position i is still to come: a page of
 * a resident unit of the range is there (mincore(); an unmapped part skips the unit), and
 * no UNMAP or REMAP queued after it took the memory.
 */
static int zap_pending(const struct state *s, unsigned i)
{
	const struct event *e = &s->queue[i];
	unsigned u0, u1;

	for (unsigned k = i + 1; k < s->nq; k++)
		if (s->queue[k].type != EV_REMOVE && overlaps(&s->queue[k], e->a, e->b))
			return 0;
	if (!units_of(e->a, e->b, &u0, &u1))
		return 0;
	for (unsigned u = u0; u < u1; u++) {
		const unsigned lo = e->a > unit_addr(u) ? e->a : unit_addr(u);
		const unsigned hi = e->b < unit_addr(u) + NP ? e->b : unit_addr(u) + NP;
		int present = 0, unmapped = 0;

		if (state_of(s->st[u]) != ST_RESIDENT)
			continue;
		for (unsigned a = lo; a < hi; a++) {
			unmapped |= s->vma[a] == VMA_NONE;
			present |= (s->pres & BIT(a)) != 0;
		}
		if (present && !unmapped)
			return 1;
	}
	return 0;
}

/* Whether the event at the head of the queue must wait (units in transition, a zap to come). */
static int head_waits(const struct state *s)
{
	const struct event *e = &s->queue[0];
	unsigned u0, u1;

	if (!units_of(e->a, e->b, &u0, &u1))
		return 0;
	for (unsigned u = u0; u < u1; u++)
		if (busy(s->st[u]))
			return 1;
	return e->type == EV_REMOVE && zap_pending(s, 0);
}

/*
 * region_doubt_left(): unit u (F_DOUBT) still has a page that a REMOVE handled before its
 * zap left: there and write-protected. A unit with none leaves the doubt.
 */
static int doubt_left(struct state *s, unsigned u)
{
	if (!(s->st[u] & F_DOUBT) || cfg.bug[BUG_DOUBT_UNCHECKED])
		return 0;
	for (unsigned k = 0; k < NP; k++)
		if (s->pres & s->wp & BIT(unit_addr(u) + k))
			return 1;
	s->st[u] &= (uint8_t)~F_DOUBT;
	mx_say("unit %u: no page left under doubt", u);
	return 0;
}

/* -------------------------------------------------------------------------------- */
/* The program's threads, and their faults (region_serve(), region_swap_in())       */
/* -------------------------------------------------------------------------------- */

enum {
	P_OP, /* the next operation of the script */
	P_ACCESS, /* reads, writes or touches t->a */
	P_FAULT, /* region_serve() of the fault at t->a */
	P_EAGAIN, /* RETRY (the layout is changing): again once the events are read */
	P_SI_LOCK, /* swap-in: claimed LOADING, data read; read_lock, F_EVENT check, copy */
	P_SI_COPY,
	P_SI_UNLOCK,
	P_SI_RELEASE,
	P_EZ_FILL, /* an empty unit: zero pages (claimed under read_lock) */
	P_EZ_UNLOCK,
	P_EZ_RELEASE,
	P_RF_UNLOCK, /* a resident unit's page fixed (claimed under read_lock) */
	P_RF_RELEASE,
	P_ZAP, /* madvise(DONTNEED), its event read: zapping page k of the range */
	P_FREED, /* madvise(FREE), its event read: the pages marked, no zap */
	P_MAP, /* munmap() returned: mmap(MAP_FIXED) of new memory there */
	P_DONE,
};

static const struct op *script_op(const struct state *s, unsigned t)
{
	return &cfg.sc->script[t][s->p[t].pc];
}

static const struct op *cur_op(const struct state *s, unsigned t)
{
	return &s->p[t].cur;
}

static void next_op(struct state *s, unsigned t)
{
	struct prog *p = &s->p[t];

	p->pc++;
	p->ph = script_op(s, t)->op == O_END ? P_DONE : P_OP;
}

/* The access itself, the page there and writable. */
static int perform(struct state *s, unsigned t)
{
	const struct op *o = cur_op(s, t);
	const uint8_t a = s->p[t].a, l = o->l;

	switch (o->op) {
	case O_WRITE:
		if (s->ver[l] == 15)
			return model_error("too many writes");
		s->val[a] = (uint8_t)(l << 4 | ++s->ver[l]);
		s->expect[l] = s->val[a];
		s->freed &= (uint16_t)~BIT(l);
		mx_say("writes page %u v%u at address %u", l, s->ver[l], a);
		break;
	case O_READ:
		if (s->val[a] != s->expect[l] && !(s->val[a] == 0 && (s->freed & BIT(l))))
			return mx_violate("wrong-data",
					  "%s reads page %u at address %u: %s, not %s",
					  thread_names[t], l, a, val_text(s->val[a]).s,
					  val_text(s->expect[l]).s);
		mx_say("reads %s at address %u: right", val_text(s->val[a]).s, a);
		break;
	default:
		mx_say("touches address %u: %s", a, val_text(s->val[a]).s);
		break;
	}
	if (script_op(s, t)->op == O_READ_ALL) {
		unsigned next = l + 1u;

		while (next < NL && s->where[next] == NOWHERE)
			next++;
		if (next < NL) {
			s->p[t].cur.l = (uint8_t)next;
			s->p[t].a = s->where[next];
			s->p[t].ph = P_ACCESS;
			return MX_OK;
		}
	}
	next_op(s, t);
	return MX_OK;
}

/* Whether operation o can run now (O_ANY chooses only those). */
static int can_run(const struct state *s, const struct op *o)
{
	const uint8_t a = s->where[o->l];

	if (o->op == O_FORK)
		return 1;
	if (a == NOWHERE)
		return 0;
	for (unsigned i = 0; i < o->n; i++)
		if (s->where[o->l + i] != a + i || s->vma[a + i] != s->vma[a])
			return 0;
	if (o->op == O_MREMAP) {
		if (a == o->to)
			return 0;
		for (unsigned i = 0; i < o->n; i++)
			if (s->vma[o->to + i] != VMA_NONE)
				return 0;
	}
	return 1;
}

static int access(struct state *s, unsigned t)
{
	struct prog *p = &s->p[t];
	const uint8_t a = p->a, bit = (uint8_t)BIT(a);

	if (s->vma[a] == VMA_NONE)
		return model_error("the script touches unmapped memory");
	if (!(s->pres & bit) && s->vma[a] == VMA_PLAIN) {
		/* The program's own memory: the kernel maps a zero page. */
		s->pres |= bit;
		s->val[a] = 0;
		s->wp &= (uint8_t)~bit;
	}
	if ((s->pres & bit) && !(cur_op(s, t)->op == O_WRITE && (s->wp & bit)))
		return perform(s, t);
	p->wpf = (s->pres & bit) != 0;
	p->ph = P_FAULT;
	mx_say("%s fault at address %u", p->wpf ? "write-protect" : "missing-page", a);
	return MX_OK;
}

/* A fault on plain memory (a GONE unit, memory moved out): zero page, or unprotect. */
static int serve_plain(struct state *s, unsigned t)
{
	struct prog *p = &s->p[t];

	if (s->nunread) {
		p->ph = P_EAGAIN;
		mx_say("plain memory: EAGAIN, an event is unread");
		return MX_OK;
	}
	if (p->wpf)
		s->wp &= (uint8_t)~BIT(p->a);
	else
		(void)k_fill(s, p->a, 0, 0);
	mx_say("plain memory: %s", p->wpf ? "unprotected" : "zero page");
	p->ph = P_ACCESS;
	return MX_OK;
}

/* The end of a failed placement: the claim undone; RETRY (EAGAIN) or GONE. */
static void place_failed(struct state *s, unsigned t, int ret, unsigned back)
{
	struct prog *p = &s->p[t];

	s->rd--;
	unit_release(s, p->a / NP, back, 0, 0);
	p->ph = ret == -EAGAIN ? P_EAGAIN : P_ACCESS;
	if (ret == -EAGAIN)
		mx_say("EAGAIN: an event is unread, RETRY");
}

/* region_serve() */
static int serve(struct state *s, unsigned t)
{
	struct prog *p = &s->p[t];
	const unsigned u = p->a / NP;
	uint8_t w;
	int ret;

	if (p->a >= NR) {
		/* Memory moved out of the region: plain memory once the REMAPs are handled. */
		if (s->remaps_pending)
			return MX_DISABLED;
		return serve_plain(s, t);
	}
	w = s->st[u];
	if ((w & F_EVENT) || busy(w)) {
		s->st[u] |= F_WAIT;
		p->sleep = (uint8_t)(u + 1);
		p->ph = P_ACCESS;
		mx_say("unit %u %s%s: waits", u, st_names[state_of(w)],
		       w & F_EVENT ? ", held" : "");
		return MX_OK;
	}
	switch (state_of(w)) {
	case ST_EVICTED:
		/* region_swap_in(): claim, then read the unit from the store. */
		s->st[u] = (uint8_t)((w & ~ST_MASK) | ST_LOADING);
		if (!(s->store_has & BIT(u)))
			return mx_violate("lost-data", "unit %u is EVICTED without a stored copy",
					  u);
		memcpy(p->buf, s->store[u], NP);
		p->k = 0;
		p->io = 0;
		p->ph = P_SI_LOCK;
		mx_say("unit %u LOADING, its data read from the store", u);
		return MX_OK;
	case ST_EMPTY:
		/* read_lock, claim, UFFDIO_ZEROPAGE over the unit. */
		if (s->wr)
			return MX_DISABLED;
		s->st[u] = (uint8_t)((w & ~ST_MASK) | ST_LOADING);
		s->rd++;
		p->k = 0;
		p->io = 0;
		mx_say("unit %u LOADING (empty): zero pages", u);
		ret = place_unit_step(s, &p->io, &p->k, unit_addr(u), NULL, 0);
		if (ret)
			place_failed(s, t, ret, ST_EMPTY);
		else
			p->ph = p->k == NP ? P_EZ_UNLOCK : P_EZ_FILL;
		return MX_OK;
	case ST_RESIDENT:
		/* read_lock, claim, fix_resident(): a hole zeroed, or a page unprotected. */
		if (s->wr)
			return MX_DISABLED;
		s->st[u] = (uint8_t)((w & ~ST_MASK) | ST_LOADING);
		s->rd++;
		p->clear = 0;
		mx_say("unit %u LOADING (resident): fix", u);
		if (p->wpf && (w & F_CLEAN)) {
			/* The first write to a clean unit: its copy is stale. */
			invalidate(s, u);
			p->clear = F_CLEAN;
		}
		if (s->nunread) {
			s->rd--;
			unit_release(s, u, ST_RESIDENT, p->clear, 0);
			p->ph = P_EAGAIN;
			mx_say("EAGAIN: an event is unread, RETRY");
			return MX_OK;
		}
		if (!p->wpf)
			mx_say("%s", k_fill(s, p->a, 0, 0) ? "page there (EEXIST)" : "zero page");
		else if (p->clear)
			for (unsigned k = 0; k < NP; k++)
				s->wp &= (uint8_t)~BIT(unit_addr(u) + k);
		else
			s->wp &= (uint8_t)~BIT(p->a);
		p->ph = P_RF_UNLOCK;
		return MX_OK;
	case ST_GONE:
		/* Plain memory, maybe moved here: once the REMAPs are handled, as outside. */
		if (s->remaps_pending && !cfg.bug[BUG_GONE_UNWAITED])
			return MX_DISABLED;
		return serve_plain(s, t);
	}
	return model_error("a unit in no state");
}

/* The program's operations on its memory. */
static int start_op(struct state *s, unsigned t, unsigned c)
{
	struct prog *p = &s->p[t];
	const struct op *so = script_op(s, t), *o = cur_op(s, t);
	uint8_t a;

	if (so->op == O_ANY) {
		if (c >= NMENU || !can_run(s, &menu[c]))
			return MX_DISABLED;
		p->cur = menu[c];
	} else if (c) {
		return MX_DISABLED;
	} else if (so->op == O_READ_ALL) {
		unsigned l = 0;

		while (l < NL && s->where[l] == NOWHERE)
			l++;
		if (l == NL) {
			next_op(s, t);
			return MX_OK;
		}
		p->cur = (struct op){ .op = O_READ, .l = (uint8_t)l, .n = 1 };
	} else {
		p->cur = *so;
	}
	a = s->where[o->l];

	if (o->op == O_FORK) {
		/* fork() takes mmap_lock for writing; the region is MADV_DONTFORK. */
		if (s->mm_readers)
			return MX_DISABLED;
		mx_say("fork(): the child has no region, the parent's memory is untouched");
		next_op(s, t);
		return MX_OK;
	}
	if (a == NOWHERE)
		return model_error("the script names a page that is not mapped");
	for (unsigned i = 1; i < o->n; i++)
		if (s->where[o->l + i] != a + i || s->vma[a + i] != s->vma[a])
			return model_error("a range over two mappings");
	switch (o->op) {
	case O_WRITE:
	case O_READ:
	case O_TOUCH:
		p->a = a;
		return access(s, t);
	case O_DONTNEED:
		p->k = 0;
		if (s->vma[a] == VMA_PLAIN) {
			/* Not registered with zfolio: no event. */
			p->ph = P_ZAP;
			mx_say("madvise(DONTNEED) of addresses %u..%u", a, a + o->n - 1);
			return MX_OK;
		}
		mx_say("madvise(DONTNEED) of addresses %u..%u: REMOVE sent, waits for it to be "
		       "read",
		       a, a + o->n - 1);
		p->ph = P_ZAP;
		return k_send(
			s, t,
			(struct event){ .type = EV_REMOVE, .a = a, .b = (uint8_t)(a + o->n) });
	case O_FREE:
		if (s->vma[a] != VMA_UFFD)
			return model_error("MADV_FREE of memory not the region's");
		mx_say("madvise(FREE) of addresses %u..%u: REMOVE sent, waits for it to be read", a,
		       a + o->n - 1);
		p->ph = P_FREED;
		return k_send(
			s, t,
			(struct event){ .type = EV_REMOVE, .a = a, .b = (uint8_t)(a + o->n) });
	case O_MUNMAP:
	case O_MUNMAP_MAP: {
		/* munmap() holds mmap_lock for writing; the event is prepared (mmap_changing)
		 * before the pages go, sent after, and the call waits until it is read. */
		const int registered = s->vma[a] == VMA_UFFD;

		if (s->mm_readers)
			return MX_DISABLED;
		for (unsigned i = 0; i < o->n; i++) {
			k_zap(s, (uint8_t)(a + i));
			s->vma[a + i] = VMA_NONE;
			for (unsigned l = 0; l < NL; l++)
				if (s->where[l] == a + i)
					s->where[l] = NOWHERE;
		}
		p->a = a;
		if (o->op == O_MUNMAP_MAP)
			p->ph = P_MAP;
		else
			next_op(s, t);
		mx_say("munmap() of addresses %u..%u", a, a + o->n - 1);
		if (!registered)
			return MX_OK;
		mx_say("UNMAP sent, waits for it to be read");
		return k_send(s, t,
			      (struct event){ .type = EV_UNMAP, .a = a, .b = (uint8_t)(a + o->n) });
	}
	case O_MREMAP: {
		const int registered = s->vma[a] == VMA_UFFD;
		const uint8_t to = o->to;

		if (s->mm_readers)
			return MX_DISABLED;
		for (unsigned i = 0; i < o->n; i++)
			if (s->vma[to + i] != VMA_NONE)
				return model_error("mremap() onto a mapping");
		for (unsigned i = 0; i < o->n; i++) {
			const uint8_t from = (uint8_t)(a + i), dst = (uint8_t)(to + i);

			s->vma[dst] = s->vma[from];
			s->val[dst] = s->val[from];
			s->pres = (uint8_t)((s->pres & ~BIT(dst)) | ((s->pres >> from & 1) << dst));
			s->wp = (uint8_t)((s->wp & ~BIT(dst)) | ((s->wp >> from & 1) << dst));
			s->vma[from] = VMA_NONE;
			k_zap(s, from);
		}
		/* The page tables moved; the program's pages with them. */
		for (unsigned l = 0; l < NL; l++)
			if (s->where[l] != NOWHERE && s->where[l] >= a && s->where[l] < a + o->n)
				s->where[l] = (uint8_t)(to + (s->where[l] - a));
		mx_say("mremap() of addresses %u..%u to %u", a, a + o->n - 1, to);
		next_op(s, t);
		if (!registered)
			return MX_OK;
		mx_say("REMAP sent, waits for it to be read");
		return k_send(
			s, t,
			(struct event){
				.type = EV_REMAP, .a = a, .b = (uint8_t)(a + o->n), .to = to });
	}
	}
	return model_error("an unknown operation");
}

static int step_prog(struct state *s, unsigned t, unsigned c)
{
	struct prog *p = &s->p[t];
	const struct op *o = cur_op(s, t);
	int ret;

	if (p->ph == P_DONE || p->sleep || p->blocked || (c && p->ph != P_OP))
		return MX_DISABLED;
	switch (p->ph) {
	case P_OP:
		return start_op(s, t, c);
	case P_ACCESS:
		return access(s, t);
	case P_FAULT:
		return serve(s, t);
	case P_EAGAIN:
		if (s->nunread)
			return MX_DISABLED;
		p->ph = P_ACCESS;
		mx_say("the events are read: tries again");
		return MX_OK;
	case P_SI_LOCK: {
		const unsigned u = p->a / NP;

		if (s->wr)
			return MX_DISABLED;
		s->rd++;
		if (s->st[u] & F_EVENT) {
			mx_say("read_lock: an event holds unit %u, it goes first", u);
			place_failed(s, t, 0, ST_EVICTED);
			return MX_OK;
		}
		mx_say("read_lock, no event: UFFDIO_COPY");
		ret = place_unit_step(s, &p->io, &p->k, unit_addr(u), p->buf, cfg.sc->clean);
		if (ret)
			place_failed(s, t, ret, ST_EVICTED);
		else
			p->ph = p->k == NP ? P_SI_UNLOCK : P_SI_COPY;
		return MX_OK;
	}
	case P_SI_COPY:
	case P_EZ_FILL: {
		const int si = p->ph == P_SI_COPY;

		ret = place_unit_step(s, &p->io, &p->k, unit_addr(p->a / NP), si ? p->buf : NULL,
				      si && cfg.sc->clean);
		if (ret)
			place_failed(s, t, ret, si ? ST_EVICTED : ST_EMPTY);
		else if (p->k == NP)
			p->ph = si ? P_SI_UNLOCK : P_EZ_UNLOCK;
		return MX_OK;
	}
	case P_SI_UNLOCK:
	case P_EZ_UNLOCK:
	case P_RF_UNLOCK:
		s->rd--;
		p->ph++;
		mx_say("read_unlock");
		return MX_OK;
	case P_SI_RELEASE:
		if (cfg.sc->clean)
			mx_say("copy kept (clean)");
		else
			invalidate(s, p->a / NP);
		unit_release(s, p->a / NP, ST_RESIDENT, 0, cfg.sc->clean ? F_CLEAN : 0);
		p->ph = P_ACCESS;
		return MX_OK;
	case P_EZ_RELEASE:
	case P_RF_RELEASE:
		unit_release(s, p->a / NP, ST_RESIDENT, p->clear, 0);
		p->clear = 0;
		p->ph = P_ACCESS;
		return MX_OK;
	case P_ZAP: {
		const uint8_t a = (uint8_t)(s->where[o->l] + p->k);

		k_zap(s, a);
		mx_say("zaps address %u", a);
		if (++p->k < o->n)
			return MX_OK;
		for (unsigned i = 0; i < o->n; i++)
			s->expect[o->l + i] = 0;
		s->freed &= (uint16_t) ~((BIT(o->n) - 1) << o->l);
		mx_say("madvise() returns: the range reads zeros from now");
		next_op(s, t);
		return MX_OK;
	}
	case P_FREED:
		/* The kernel marks the pages lazily free: they stay, and no zap comes. */
		s->freed |= (uint16_t)((BIT(o->n) - 1) << o->l);
		mx_say("madvise(FREE) returns: the range reads as before, or zeros, until written");
		next_op(s, t);
		return MX_OK;
	case P_MAP:
		if (s->mm_readers)
			return MX_DISABLED;
		for (unsigned i = 0; i < o->n; i++) {
			const uint8_t a = (uint8_t)(p->a + i);

			s->vma[a] = VMA_PLAIN;
			s->where[NEWL(a)] = a;
			s->expect[NEWL(a)] = 0;
		}
		mx_say("mmap(MAP_FIXED) of its own memory at %u..%u", p->a, p->a + o->n - 1);
		next_op(s, t);
		return MX_OK;
	}
	return model_error("a program thread in no phase");
}

/* -------------------------------------------------------------------------------- */
/* The evictor (region_evict.c)                                                     */
/* -------------------------------------------------------------------------------- */

enum {
	E_ROUND, /* a round starts: a pageout (waits for units in transition) or reclaim */
	E_WAIT, /* pageout: waits until unit i is neither in transition nor held */
	E_CLAIM, /* claims unit i: RESIDENT -> EVICTING, unless an event holds it */
	E_MOVE, /* moves unit i out: read_lock, queue check, UFFDIO_MOVE from page k */
	E_MOVE_PAGE, /* the ioctl goes on: page k */
	E_MOVE_WAIT, /* EAGAIN: again once the events are read */
	E_SETTLE, /* unit i: stored (EVICTED) or refused by the store (given back) */
	E_PUT_BACK, /* region_put_back() of unit i, page k: at its address */
	E_PUT_FOLLOW, /* ... or where the events queued took that memory */
	E_PUT_WAIT,
	E_DROP, /* staging dropped; the round ends */
	/* --bug in-place */
	E_PROTECT, /* write-protect unit i, note its pages (mincore) */
	E_PROTECT_WAIT,
	E_READ, /* the compressor reads page k of unit i in the program's mapping */
	E_SETTLE_IN_PLACE, /* stored (choice), or refused or torn: given back */
	E_REPROTECT, /* protect again before the drop */
	E_REPROTECT_WAIT,
	E_ZAP, /* MADV_DONTNEED of the unit's range */
	E_UNPROTECT, /* unit i could not be protected: given back */
	E_DONE,
};

/* The first unit of mask after unit i (0xff: from the first); NU if none. */
static uint8_t next_unit(uint8_t mask, uint8_t i)
{
	unsigned u = i == 0xff ? 0 : i + 1u;

	while (u < NU && !(mask & BIT(u)))
		u++;
	return (uint8_t)u;
}

static void round_end(struct state *s)
{
	struct evictor *e = &s->ev;

	e->round++;
	e->ph = e->round == cfg.sc->rounds ? E_DONE : E_ROUND;
}

/* After unit i is settled or given back: the next one, or the next stage. */
static void evict_next(struct state *s)
{
	struct evictor *e = &s->ev;
	const uint8_t todo = e->settling ? (uint8_t)(e->claimed & ~e->failed) : e->failed;

	e->i = next_unit(todo, e->i);
	e->k = 0;
	if (e->i < NU) {
		if (cfg.bug[BUG_IN_PLACE])
			e->ph = e->settling ? E_READ : E_UNPROTECT;
		else
			e->ph = e->settling ? E_SETTLE : E_PUT_BACK;
		return;
	}
	if (!e->settling) {
		e->settling = 1;
		e->i = next_unit((uint8_t)(e->claimed & ~e->failed), 0xff);
		if (e->i < NU) {
			e->ph = cfg.bug[BUG_IN_PLACE] ? E_READ : E_SETTLE;
			return;
		}
	}
	if (cfg.bug[BUG_IN_PLACE])
		round_end(s);
	else
		e->ph = E_DROP;
}

/* After unit i is moved out (or could not be): the next claimed unit, or give back. */
static void moved_next(struct state *s, int failed)
{
	struct evictor *e = &s->ev;

	if (failed)
		e->failed |= (uint8_t)BIT(e->i);
	e->i = next_unit(e->claimed, e->i);
	e->k = 0;
	e->bypage = 0;
	if (e->i < NU) {
		e->ph = cfg.bug[BUG_IN_PLACE] ? E_PROTECT : E_MOVE;
		return;
	}
	e->settling = 0;
	e->i = 0xff;
	evict_next(s);
}

/* One page of UFFDIO_MOVE from unit i's page k to staging. */
static int move_page(struct state *s)
{
	struct evictor *e = &s->ev;
	const uint8_t a = (uint8_t)(unit_addr(e->i) + e->k), slot = (uint8_t)(e->i * NP + e->k);

	e->k++;
	if (!(s->pres & BIT(a))) {
		mx_say("address %u: a hole, nothing moved", a);
		return MX_OK;
	}
	if (s->vma[a] == VMA_PLAIN)
		return mx_violate("took-program-memory",
				  "the evictor moved the program's own page at address %u (%s) out",
				  a, s->val[a] >= NEWL(0) << 4 ? "its new memory" : "zeros");
	s->stage[slot] = s->val[a];
	s->stage_pres |= (uint8_t)BIT(slot);
	k_zap(s, a);
	mx_say("address %u moved to staging", a);
	return MX_OK;
}

/* The end of the ioctl over unit i's pages: the lock and mmap_lock let go. */
static void move_done(struct state *s)
{
	struct evictor *e = &s->ev;

	if (e->io) {
		s->mm_readers--;
		e->io = 0;
	}
	s->rd--;
	if (e->k == NP)
		moved_next(s, 0);
	else
		e->ph = E_MOVE;
}

static int evict_move(struct state *s, unsigned c)
{
	struct evictor *e = &s->ev;
	const uint8_t ua = unit_addr(e->i);
	unsigned end = NP;

	if (s->wr || c > 1)
		return MX_DISABLED;
	if (!e->bypage)
		for (unsigned k = e->k + 1u; k < NP; k++)
			if (s->vma[ua + k] != s->vma[ua + e->k])
				e->bypage = 1; /* EINVAL: two mappings; page by page */
	if (e->bypage)
		end = e->k + 1u;
	if (!cfg.bug[BUG_MOVE_UNCHECKED] && moved_on(s, ua + e->k, ua + end)) {
		if (c)
			return MX_DISABLED;
		mx_say("read_lock: an UNMAP/REMAP of unit %u is queued: it goes back", e->i);
		moved_next(s, 1);
		return MX_OK;
	}
	if ((s->st[e->i] & F_EVENT) && !cfg.bug[BUG_MOVE_UNCHECKED] &&
	    !cfg.bug[BUG_PUTBACK_UNFOLLOWED]) {
		/*
		 * move_held(): an event read holds the unit (its zap may be racing): -EBUSY.
		 * Not in the code of either bug (8bdbf10): it hid both.
		 */
		if (c)
			return MX_DISABLED;
		mx_say("read_lock: an event holds unit %u: it goes back", e->i);
		moved_next(s, 1);
		return MX_OK;
	}
	if (s->nunread) {
		/* EAGAIN: move_held() tries again (RG_EAGAIN_TRIES), or gives up. */
		if (c == 0) {
			e->ph = E_MOVE_WAIT;
			mx_say("UFFDIO_MOVE of unit %u: EAGAIN, an event is unread: tries again",
			       e->i);
		} else {
			mx_say("UFFDIO_MOVE of unit %u: EAGAIN, gives up: it goes back", e->i);
			moved_next(s, 1);
		}
		return MX_OK;
	}
	if (c)
		return MX_DISABLED;
	if (s->vma[ua + e->k] == VMA_NONE) {
		mx_say("UFFDIO_MOVE of unit %u: ENOENT: it goes back", e->i);
		moved_next(s, 1);
		return MX_OK;
	}
	mx_say("read_lock, UFFDIO_MOVE of unit %u", e->i);
	s->rd++;
	if (end - e->k > 1) {
		e->io = 1;
		s->mm_readers++;
	}
	if (move_page(s) == MX_VIOLATION)
		return MX_VIOLATION;
	if (e->k == end)
		move_done(s);
	else
		e->ph = E_MOVE_PAGE;
	return MX_OK;
}

/*
 * The page followed through the queue (place_followed(-1)): with the fix, under read_lock
 * and for every page; as of 8bdbf10 under the write lock, after a failed first try.
 */
static int put_follow(struct state *s)
{
	struct evictor *e = &s->ev;
	const uint8_t a = (uint8_t)(unit_addr(e->i) + e->k);
	int dropped;
	uint8_t to;

	if (s->wr || (cfg.bug[BUG_PUTBACK_UNFOLLOWED] && s->rd))
		return MX_DISABLED;
	to = follow(s, -1, a, &dropped);
	if (to == NOWHERE || dropped) {
		mx_say("address %u %s since: page %u not put back", a,
		       dropped ? "dropped" : "unmapped", a);
		e->k++;
		e->ph = E_PUT_BACK;
		return MX_OK;
	}
	if (s->nunread) {
		e->ph = E_PUT_WAIT;
		mx_say("page %u to address %u: EAGAIN", a, to);
		return MX_OK;
	}
	mx_say("page %u put back at address %u: %s", a, to,
	       outcome(k_fill(s, to, s->stage[e->i * NP + e->k], 0)));
	e->k++;
	e->ph = E_PUT_BACK;
	return MX_OK;
}

/*
 * region_put_back() of unit i from page k: the next page that moved out. As of 8bdbf10
 * (--bug putback-unfollowed) it is copied back to its address first, without a lock, and
 * followed through the queue only if that fails; the model follows every page.
 */
static int put_back(struct state *s)
{
	struct evictor *e = &s->ev;
	uint8_t a;
	int ret;

	while (e->k < NP && !(s->stage_pres & BIT(e->i * NP + e->k)))
		e->k++;
	if (e->k == NP) {
		unit_release(s, e->i, ST_RESIDENT, 0, 0);
		mx_say("(given back)");
		evict_next(s);
		return MX_OK;
	}
	if (!cfg.bug[BUG_PUTBACK_UNFOLLOWED])
		return put_follow(s);
	a = (uint8_t)(unit_addr(e->i) + e->k);
	ret = s->nunread ? -EAGAIN : k_fill(s, a, s->stage[e->i * NP + e->k], 0);
	mx_say("UFFDIO_COPY back to address %u: %s", a, outcome(ret));
	if (ret == -EAGAIN || ret == -ENOENT)
		e->ph = E_PUT_FOLLOW;
	else
		e->k++;
	return MX_OK;
}

/* --bug in-place: the old eviction, reading the program's mapping. */
static void inplace_give_back(struct state *s, unsigned u)
{
	for (unsigned k = 0; k < NP; k++)
		if (s->vma[unit_addr(u) + k] == VMA_UFFD)
			s->wp &= (uint8_t)~BIT(unit_addr(u) + k);
	unit_release(s, u, ST_RESIDENT, 0, 0);
	mx_say("(unprotected, given back)");
}

static int inplace_protect(struct state *s, unsigned c, int again)
{
	struct evictor *e = &s->ev;
	const uint8_t ua = unit_addr(e->i);

	if (c > 1)
		return MX_DISABLED;
	if (s->nunread) {
		/* protect() retries EAGAIN, then gives up. */
		if (c == 0) {
			e->ph = again ? E_REPROTECT_WAIT : E_PROTECT_WAIT;
			mx_say("UFFDIO_WRITEPROTECT: EAGAIN, tries again");
			return MX_OK;
		}
		mx_say("UFFDIO_WRITEPROTECT: EAGAIN, gives up");
		c = 2;
	} else if (c) {
		return MX_DISABLED;
	}
	for (unsigned k = 0; k < NP && c != 2; k++)
		if (s->vma[ua + k] != VMA_UFFD) {
			mx_say("UFFDIO_WRITEPROTECT of unit %u: not ours (ENOENT)", e->i);
			c = 2;
		}
	if (c == 2) {
		if (again) {
			invalidate(s, e->i);
			inplace_give_back(s, e->i);
			evict_next(s);
		} else {
			moved_next(s, 1);
		}
		return MX_OK;
	}
	for (unsigned k = 0; k < NP; k++)
		if (s->pres & BIT(ua + k))
			s->wp |= (uint8_t)BIT(ua + k);
	mx_say("unit %u write-protected%s", e->i, again ? " again" : "");
	if (again) {
		e->ph = E_ZAP;
		return MX_OK;
	}
	e->snap[e->i] = (uint8_t)((s->pres >> ua) & (BIT(NP) - 1));
	moved_next(s, 0);
	return MX_OK;
}

static int step_evict(struct state *s, unsigned c)
{
	struct evictor *e = &s->ev;

	if (e->ph == E_DONE || e->sleep)
		return MX_DISABLED;
	switch (e->ph) {
	case E_ROUND:
		if (c > 1)
			return MX_DISABLED;
		memset(&e->claimed, 0, sizeof(*e) - offsetof(struct evictor, claimed));
		e->i = 0;
		e->ph = c ? E_CLAIM : E_WAIT;
		mx_say("%s of the region", c ? "reclaim" : "zf_region_pageout()");
		return MX_OK;
	case E_WAIT:
		if (c)
			return MX_DISABLED;
		while (e->i < NU && !busy(s->st[e->i]) && !(s->st[e->i] & F_EVENT))
			e->i++;
		if (e->i < NU) {
			s->st[e->i] |= F_WAIT;
			e->sleep = (uint8_t)(e->i + 1);
			mx_say("waits for unit %u", e->i);
			return MX_OK;
		}
		e->i = 0;
		e->ph = E_CLAIM;
		mx_say("no unit in transition");
		return MX_OK;
	case E_CLAIM: {
		const uint8_t w = s->st[e->i];

		if (c)
			return MX_DISABLED;
		if (!(w & F_EVENT) && state_of(w) == ST_RESIDENT && doubt_left(s, e->i)) {
			mx_say("unit %u not claimed (a page under doubt)", e->i);
		} else if (!(w & F_EVENT) && state_of(w) == ST_RESIDENT) {
			s->st[e->i] = (uint8_t)((s->st[e->i] & ~ST_MASK) | ST_EVICTING);
			e->claimed |= (uint8_t)BIT(e->i);
			mx_say("unit %u EVICTING", e->i);
		} else {
			mx_say("unit %u not claimed (%s%s)", e->i, st_names[state_of(w)],
			       w & F_EVENT ? ", held" : "");
		}
		if (++e->i < NU)
			return MX_OK;
		if (!e->claimed) {
			round_end(s);
			return MX_OK;
		}
		e->i = next_unit(e->claimed, 0xff);
		e->k = 0;
		e->bypage = 0;
		e->ph = cfg.bug[BUG_IN_PLACE] ? E_PROTECT : E_MOVE;
		return MX_OK;
	}
	case E_MOVE:
		return evict_move(s, c);
	case E_MOVE_PAGE:
		if (c)
			return MX_DISABLED;
		if (move_page(s) == MX_VIOLATION)
			return MX_VIOLATION;
		if (e->k == NP || e->bypage)
			move_done(s);
		return MX_OK;
	case E_MOVE_WAIT:
	case E_PUT_WAIT:
	case E_PROTECT_WAIT:
	case E_REPROTECT_WAIT:
		if (c || s->nunread)
			return MX_DISABLED;
		e->ph = e->ph == E_MOVE_WAIT	  ? E_MOVE
			: e->ph == E_PUT_WAIT	  ? E_PUT_FOLLOW
			: e->ph == E_PROTECT_WAIT ? E_PROTECT
						  : E_REPROTECT;
		mx_say("the events are read");
		return MX_OK;
	case E_SETTLE: {
		const unsigned u = e->i;
		const int clean = (s->st[u] & F_CLEAN) != 0;

		if (c > (unsigned)!clean)
			return MX_DISABLED;
		if (clean) {
			unit_release(s, u, ST_EVICTED, F_CLEAN, 0);
			mx_say("(clean: its stored copy kept)");
		} else if (!c) {
			for (unsigned k = 0; k < NP; k++)
				s->store[u][k] =
					s->stage_pres & BIT(u * NP + k) ? s->stage[u * NP + k] : 0;
			s->store_has |= (uint8_t)BIT(u);
			unit_release(s, u, ST_EVICTED, F_CLEAN, 0);
			mx_say("(stored)");
		} else {
			mx_say("the store refuses unit %u: it goes back", u);
			e->k = 0;
			e->ph = E_PUT_BACK;
			return MX_OK;
		}
		evict_next(s);
		return MX_OK;
	}
	case E_PUT_BACK:
		if (c)
			return MX_DISABLED;
		return put_back(s);
	case E_PUT_FOLLOW:
		if (c)
			return MX_DISABLED;
		return put_follow(s);
	case E_DROP:
		if (c)
			return MX_DISABLED;
		s->stage_pres = 0;
		memset(s->stage, 0, sizeof(s->stage));
		mx_say("staging dropped; the round ends");
		round_end(s);
		return MX_OK;
	case E_PROTECT:
		return inplace_protect(s, c, 0);
	case E_READ: {
		const uint8_t a = (uint8_t)(unit_addr(e->i) + e->k);

		if (c)
			return MX_DISABLED;
		if (s->vma[a] == VMA_NONE)
			return mx_violate(
				"crash",
				"the compressor reads address %u, unmapped by the program: "
				"SIGSEGV inside zfolio",
				a);
		if (s->pres & BIT(a)) {
			e->buf[e->i][e->k] = s->val[a];
		} else {
			e->buf[e->i][e->k] = 0;
			if (e->snap[e->i] & BIT(e->k))
				e->torn |= (uint8_t)BIT(e->i);
		}
		mx_say("the compressor reads %s at address %u", val_text(e->buf[e->i][e->k]).s, a);
		if (++e->k == NP)
			e->ph = E_SETTLE_IN_PLACE;
		return MX_OK;
	}
	case E_SETTLE_IN_PLACE: {
		const unsigned u = e->i;

		if (c > 1)
			return MX_DISABLED;
		if (c || (e->torn & BIT(u))) {
			mx_say(c ? "the store refuses unit %u" : "unit %u torn: not kept", u);
			inplace_give_back(s, u);
			evict_next(s);
			return MX_OK;
		}
		if (!(s->st[u] & F_CLEAN)) {
			memcpy(s->store[u], e->buf[u], NP);
			s->store_has |= (uint8_t)BIT(u);
		}
		mx_say("unit %u stored", u);
		e->ph = E_REPROTECT;
		return MX_OK;
	}
	case E_REPROTECT:
		return inplace_protect(s, c, 1);
	case E_UNPROTECT:
		if (c)
			return MX_DISABLED;
		inplace_give_back(s, e->i);
		evict_next(s);
		return MX_OK;
	case E_ZAP: {
		const uint8_t ua = unit_addr(e->i);

		if (c)
			return MX_DISABLED;
		for (unsigned k = 0; k < NP; k++)
			if (s->vma[ua + k] == VMA_PLAIN && (s->pres & BIT(ua + k)))
				return mx_violate(
					"wiped-program-memory",
					"zfolio's MADV_DONTNEED drops the program's own page "
					"at address %u",
					ua + k);
		for (unsigned k = 0; k < NP; k++)
			k_zap(s, (uint8_t)(ua + k));
		mx_say("MADV_DONTNEED of unit %u", e->i);
		unit_release(s, e->i, ST_EVICTED, F_CLEAN, 0);
		evict_next(s);
		return MX_OK;
	}
	}
	return model_error("the evictor in no phase");
}

/* -------------------------------------------------------------------------------- */
/* The service thread (region_service_main(), region_events.c)                       */
/* -------------------------------------------------------------------------------- */

enum {
	S_IDLE,
	S_RUN, /* holds read_lock (write): handles the head of the queue, else reads */
	S_READ, /* holds it: reads an event (after a placement met EAGAIN) */
	S_PLACE, /* holds it: places page k of unit u's data where the memory is now */
};

/* units_event_done(): the head's units that no later event holds are let go. */
static void event_done(struct state *s)
{
	const struct event *e = &s->queue[0];
	unsigned u0, u1;

	if (units_of(e->a, e->b, &u0, &u1))
		for (unsigned u = u0; u < u1; u++) {
			const uint8_t old = s->st[u];

			if (held_later(s, 0, u))
				continue;
			s->st[u] &= (uint8_t) ~(F_EVENT | F_WAIT);
			if (old & F_WAIT)
				wake(s, u);
		}
	if (e->type == EV_REMAP)
		s->remaps_pending--;
	mx_say("%s handled", e->type == EV_REMOVE  ? "REMOVE"
			     : e->type == EV_UNMAP ? "UNMAP"
						   : "REMAP");
	memmove(s->queue, s->queue + 1, (s->nq - 1u) * sizeof(s->queue[0]));
	s->nq--;
	memset(&s->queue[s->nq], 0, sizeof(s->queue[0]));
}

/* Where page k of unit u's data belongs, as of the head event; NOWHERE: nothing to place. */
static uint8_t place_at(const struct state *s, unsigned u, unsigned k)
{
	const struct event *e = &s->queue[0];
	const uint8_t a = (uint8_t)(unit_addr(u) + k);
	const int in = a >= e->a && a < e->b;

	if (e->type == EV_REMAP)
		return in ? (uint8_t)(e->to + (a - e->a)) : a;
	return in ? NOWHERE : a; /* a partial UNMAP: the pages still mapped */
}

/* Whether a page of [lo, hi) is there. */
static int present_in(const struct state *s, unsigned lo, unsigned hi)
{
	for (unsigned a = lo; a < hi; a++)
		if (s->pres & BIT(a))
			return 1;
	return 0;
}

/*
 * The head event: event_drop() (REMOVE, UNMAP) or event_remap(), up to a placement.
 * unzapped: a REMOVE whose zap has not come, handled after RG_ZAP_WAIT_NS: its pages
 * still there were write-protected (give_up()), and their units stay under doubt.
 */
static int handle_head(struct state *s, int unzapped)
{
	const struct event *e = &s->queue[0];
	unsigned u0, u1;

	if (!units_of(e->a, e->b, &u0, &u1)) {
		mx_say("not the region's (memory moved out before)");
		event_done(s);
		return MX_OK;
	}
	for (unsigned u = u0; u < u1; u++) {
		const uint8_t w = s->st[u], ua = unit_addr(u);
		const int whole = e->a <= ua && e->b >= ua + NP;
		const unsigned st = state_of(w);
		const unsigned lo = e->a > ua ? e->a : ua, hi = e->b < ua + NP ? e->b : ua + NP;
		const int left = unzapped && st == ST_RESIDENT && present_in(s, lo, hi) &&
				 !cfg.bug[BUG_ZAP_UNWAITED];

		if (st == ST_GONE)
			continue;
		if (e->type == EV_REMAP || (e->type == EV_UNMAP && !whole && st == ST_EVICTED)) {
			if (st == ST_EVICTED) {
				if (!(s->store_has & BIT(u)))
					return mx_violate(
						"lost-data",
						"unit %u is EVICTED without a stored copy", u);
				memcpy(s->sv.buf, s->store[u], NP);
				s->sv.u = (uint8_t)u;
				s->sv.k = 0;
				s->sv.ph = S_PLACE;
				mx_say("unit %u's data read to be placed where its memory is", u);
				return MX_OK;
			}
			if (w & F_CLEAN)
				invalidate(s, u);
			unit_set_settled(s, u, ST_GONE);
			continue;
		}
		if (st == ST_EMPTY) {
			if (e->type == EV_UNMAP)
				unit_set_settled(s, u, ST_GONE);
			continue;
		}
		if (whole) {
			if (st == ST_EVICTED || (w & F_CLEAN))
				invalidate(s, u);
			if (left) {
				s->st[u] = (uint8_t)((s->st[u] & ~F_CLEAN) | F_DOUBT);
				mx_say("unit %u stays RESIDENT, under doubt", u);
			} else {
				unit_set_settled(s, u, e->type == EV_UNMAP ? ST_GONE : ST_EMPTY);
			}
			continue;
		}
		if (st == ST_RESIDENT) {
			if (w & F_CLEAN) {
				invalidate(s, u);
				s->st[u] &= (uint8_t)~F_CLEAN;
				/* protect(..., 0): EAGAIN while an event is unread; ignored. */
				if (!s->nunread)
					for (unsigned k = 0; k < NP; k++)
						s->wp &= (uint8_t)~BIT(ua + k);
				if (left)
					for (unsigned a = lo; a < hi; a++)
						if (s->pres & BIT(a))
							s->wp |= (uint8_t)BIT(a);
			}
			if (left) {
				s->st[u] |= F_DOUBT;
				mx_say("unit %u under doubt", u);
			}
			if (e->type == EV_UNMAP)
				unit_set_settled(s, u, ST_GONE);
			continue;
		}
		/* A REMOVE of part of an evicted unit: read back, the part zeroed, put again. */
		if (!(s->store_has & BIT(u)))
			return mx_violate("lost-data", "unit %u is EVICTED without a stored copy",
					  u);
		for (unsigned k = 0; k < NP; k++)
			if (ua + k >= e->a && ua + k < e->b)
				s->store[u][k] = 0;
		mx_say("unit %u: the dropped part zeroed in its stored copy", u);
	}
	event_done(s);
	return MX_OK;
}

static void read_event(struct state *s)
{
	const struct event e = s->unread[0];
	unsigned u0, u1;

	memmove(s->unread, s->unread + 1, (s->nunread - 1u) * sizeof(s->unread[0]));
	s->nunread--;
	memset(&s->unread[s->nunread], 0, sizeof(s->unread[0]));
	s->p[e.who].blocked = 0;
	if (units_of(e.a, e.b, &u0, &u1))
		for (unsigned u = u0; u < u1; u++)
			s->st[u] |= F_EVENT;
	if (e.type == EV_REMAP)
		s->remaps_pending++;
	s->queue[s->nq] = e;
	s->queue[s->nq].who = 0;
	s->nq++;
	mx_say("reads %s of %u..%u%s: %s goes on; queued",
	       e.type == EV_REMOVE  ? "REMOVE"
	       : e.type == EV_UNMAP ? "UNMAP"
				    : "REMAP",
	       e.a, e.b - 1, e.type == EV_REMAP ? " (moved)" : "", thread_names[e.who]);
}

/* One action under the lock; the lock is let go when nothing is left to do. */
static int service_act(struct state *s)
{
	struct service *v = &s->sv;
	int ret = MX_OK;

	if (v->ph == S_RUN && s->nq && !head_waits(s)) {
		ret = handle_head(s, 0);
	} else if (s->nunread) {
		if (s->nq == QMAX)
			return model_error("the queue is full");
		read_event(s);
		v->ph = S_RUN;
	}
	if (v->ph == S_RUN && !(s->nq && !head_waits(s)) && !s->nunread) {
		s->wr = 0;
		v->ph = S_IDLE;
		mx_say("unlocks");
	}
	return ret;
}

/*
 * RG_ZAP_WAIT_NS passed with the head REMOVE still waiting for its zap (a MADV_FREE's
 * never comes; a MADV_DONTNEED's may come late by any time): its pages still there are
 * write-protected, and it is handled. Can happen at any moment of the wait; the
 * protection needs no event unread (EAGAIN: the event waits on).
 */
static int give_up(struct state *s)
{
	struct service *v = &s->sv;
	const struct event *e = &s->queue[0];

	if (cfg.bug[BUG_ZAP_FOREVER] ||
	    !(v->ph == S_RUN || (v->ph == S_IDLE && !s->wr && !s->rd)) || !s->nq ||
	    e->type != EV_REMOVE || s->nunread || !zap_pending(s, 0))
		return MX_DISABLED;
	for (unsigned u = 0; u < NU; u++)
		if (busy(s->st[u]) && e->a < unit_addr(u) + NP && e->b > unit_addr(u))
			return MX_DISABLED;
	if (v->ph == S_IDLE) {
		s->wr = 1;
		mx_say("read_lock (write)");
	}
	v->ph = S_RUN;
	if (!cfg.bug[BUG_ZAP_UNWAITED])
		for (unsigned a = e->a; a < e->b && a < NR; a++)
			if (s->pres & BIT(a))
				s->wp |= (uint8_t)BIT(a);
	mx_say("the REMOVE waited 10 ms for its zap: handled without it%s",
	       cfg.bug[BUG_ZAP_UNWAITED] ? "" : ", its pages left write-protected");
	return handle_head(s, 1);
}

static int step_service(struct state *s, unsigned c)
{
	struct service *v = &s->sv;

	if (c == 1)
		return give_up(s);
	if (c)
		return MX_DISABLED;
	switch (v->ph) {
	case S_IDLE:
		if (s->wr || s->rd || !(s->nunread || (s->nq && !head_waits(s))))
			return MX_DISABLED;
		s->wr = 1;
		v->ph = S_RUN;
		mx_say("read_lock (write)");
		return service_act(s);
	case S_RUN:
	case S_READ:
		return service_act(s);
	case S_PLACE: {
		const uint8_t at = place_at(s, v->u, v->k);

		if (at != NOWHERE) {
			int dropped;
			const uint8_t to = follow(s, 0, at, &dropped);

			if (to != NOWHERE && !dropped && s->nunread) {
				/* TRY(place_followed()): the handler stops; the queue waits. */
				v->ph = S_READ;
				mx_say("placing page %u at address %u: EAGAIN, the event waits",
				       unit_addr(v->u) + v->k, to);
				return MX_OK;
			}
			if (to == NOWHERE || dropped)
				mx_say("page %u: %s since", unit_addr(v->u) + v->k,
				       dropped ? "dropped" : "unmapped");
			else
				mx_say("page %u's data to address %u: %s", unit_addr(v->u) + v->k,
				       to, outcome(k_fill(s, to, v->buf[v->k], 0)));
		}
		if (++v->k < NP)
			return MX_OK;
		invalidate(s, v->u);
		unit_set_settled(s, v->u, ST_GONE);
		v->ph = S_RUN;
		if (!(s->nq && !head_waits(s)) && !s->nunread) {
			s->wr = 0;
			v->ph = S_IDLE;
			mx_say("unlocks");
		}
		return MX_OK;
	}
	}
	return model_error("the service thread in no phase");
}

/* -------------------------------------------------------------------------------- */
/* The model                                                                        */
/* -------------------------------------------------------------------------------- */

static int step(void *sp, unsigned t, unsigned c)
{
	struct state *s = sp;
	int ret;

	model_broken = 0;
	switch (t) {
	case T_P1:
	case T_P2:
		ret = step_prog(s, t, c);
		break;
	case T_EV:
		ret = step_evict(s, c);
		break;
	default:
		ret = step_service(s, c);
		break;
	}
	if (model_broken && ret != MX_DISABLED)
		return MX_VIOLATION;
	return ret;
}

static int end_check(const void *sp)
{
	const struct state *s = sp;

	for (unsigned t = 0; t < 2; t++)
		if (s->p[t].ph != P_DONE)
			return mx_violate("deadlock", "%s never finishes (%s)", thread_names[t],
					  s->p[t].sleep	    ? "asleep on a unit nobody wakes"
					  : s->p[t].blocked ? "its event is never read"
							    : "blocked");
	if (s->ev.ph != E_DONE)
		return mx_violate("deadlock", "the evictor never finishes");
	if (s->nq)
		return mx_violate("deadlock",
				  "the event at the head of the queue is never handled: its units "
				  "stay held, faults on them hang");
	for (unsigned u = 0; u < NU; u++)
		if (s->st[u] & F_EVENT)
			return mx_violate("deadlock", "unit %u is held by an event forever", u);
	return MX_OK;
}

static void show(const void *sp, FILE *f)
{
	const struct state *s = sp;
	static const char *const vma_names[] = { "-", "region", "program" };

	for (unsigned u = 0; u < NU; u++) {
		fprintf(f, "  unit %u: %s%s%s%s, stored:", u, st_names[state_of(s->st[u])],
			s->st[u] & F_EVENT ? " F_EVENT" : "", s->st[u] & F_WAIT ? " F_WAIT" : "",
			s->st[u] & F_CLEAN ? " F_CLEAN" : "");
		for (unsigned k = 0; k < NP; k++)
			if (s->store_has & BIT(u))
				fprintf(f, " %02x", s->store[u][k]);
			else
				fprintf(f, " --");
		fprintf(f, "\n");
	}
	fprintf(f, "  address:");
	for (unsigned a = 0; a < NA; a++)
		fprintf(f, " %u=%s:%s%s", a, vma_names[s->vma[a]], s->pres & BIT(a) ? "" : "hole",
			s->wp & BIT(a) ? "(wp)" : "");
	fprintf(f, "\n  values (page<<4 | version):");
	for (unsigned a = 0; a < NA; a++)
		if (s->pres & BIT(a))
			fprintf(f, " @%u=%02x", a, s->val[a]);
	fprintf(f, "\n  queue: %u events, unread: %u; read_lock: %u readers%s\n", s->nq, s->nunread,
		s->rd, s->wr ? ", a writer" : "");
}

static const struct mx_model model = {
	.state_size = sizeof(struct state),
	.threads = NTHREADS,
	.choices = NMENU,
	.thread_names = thread_names,
	.step = step,
	.end_check = end_check,
	.show = show,
};

/* -------------------------------------------------------------------------------- */
/* Initial states, and the driver                                                   */
/* -------------------------------------------------------------------------------- */

enum { I_EMPTY, I_RESIDENT, I_EVICTED, I_CLEAN, I_KINDS };

/* Every unit empty, resident (a first version in each page), evicted, or resident clean. */
static size_t initial_states(struct state *out)
{
	const unsigned kinds = cfg.sc->clean ? I_KINDS : I_CLEAN;
	size_t n = 0;
	unsigned combo[NU] = { 0 };

	for (;;) {
		struct state *s = &out[n++];

		memset(s, 0, sizeof(*s));
		memset(s->where, NOWHERE, sizeof(s->where));
		for (unsigned a = 0; a < NR; a++) {
			s->vma[a] = VMA_UFFD;
			s->where[a] = (uint8_t)a;
		}
		for (unsigned u = 0; u < NU; u++)
			for (unsigned k = 0; k < NP; k++) {
				const uint8_t a = (uint8_t)(unit_addr(u) + k),
					      v = (uint8_t)(a << 4 | 1);

				if (combo[u] == I_EMPTY)
					continue;
				s->expect[a] = v;
				s->ver[a] = 1;
				if (combo[u] == I_EVICTED) {
					s->st[u] = ST_EVICTED;
					s->store[u][k] = v;
					s->store_has |= (uint8_t)BIT(u);
					continue;
				}
				s->st[u] = ST_RESIDENT;
				s->val[a] = v;
				s->pres |= (uint8_t)BIT(a);
				if (combo[u] == I_CLEAN) {
					s->st[u] |= F_CLEAN;
					s->wp |= (uint8_t)BIT(a);
					s->store[u][k] = v;
					s->store_has |= (uint8_t)BIT(u);
				}
			}
		for (unsigned t = 0; t < 2; t++)
			s->p[t].ph = cfg.sc->script[t][0].op == O_END ? P_DONE : P_OP;
		s->ev.ph = cfg.sc->rounds ? E_ROUND : E_DONE;
		s->ev.i = 0;
		for (unsigned u = 0;; u++) {
			if (u == NU)
				return n;
			if (++combo[u] < kinds)
				break;
			combo[u] = 0;
		}
	}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: region_model [--scenario NAME]... [--bug NAME]... [--expect KIND]\n"
		   "                    [--only KIND] [--max-states N] [--list]\n"
		   "Explores every interleaving of each scenario (all by default) and reports the\n"
		   "first violation with its path. --expect KIND: exit 0 only if a violation of\n"
		   "that kind is found (KIND any: of any kind), looking for that kind only.\n"
		   "--only KIND: report only that kind; a path that breaks another invariant ends\n"
		   "there, unreported.\n");
}

static void list(void)
{
	printf("scenarios:\n");
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		printf("  %-14s %s\n", scenarios[i].name, scenarios[i].what);
	printf("bugs (--bug):\n");
	for (int i = 0; i < NBUGS; i++)
		printf("  %-20s %s\n", bugs[i].name, bugs[i].what);
	printf("violations: wrong-data lost-data took-program-memory wiped-program-memory crash\n"
	       "            deadlock livelock\n");
}

int main(int argc, char **argv)
{
	const size_t nsc = sizeof(scenarios) / sizeof(scenarios[0]);
	int want[sizeof(scenarios) / sizeof(scenarios[0])] = { 0 }, any = 0, found = 0;
	const char *expect = NULL;
	static struct state init[64];

	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		int ok = 0;

		if (!strcmp(arg, "--list")) {
			list();
			return 0;
		}
		if (!val) {
			usage(stderr);
			return 2;
		}
		i++;
		if (!strcmp(arg, "--scenario")) {
			for (size_t k = 0; k < nsc; k++)
				if (!strcmp(val, scenarios[k].name))
					ok = want[k] = any = 1;
		} else if (!strcmp(arg, "--bug")) {
			for (int k = 0; k < NBUGS; k++)
				if (!strcmp(val, bugs[k].name))
					ok = cfg.bug[k] = 1;
		} else if (!strcmp(arg, "--expect")) {
			expect = val;
			if (strcmp(val, "any"))
				mx_only_kind = val;
			ok = 1;
		} else if (!strcmp(arg, "--only")) {
			mx_only_kind = val;
			ok = 1;
		} else if (!strcmp(arg, "--max-states")) {
			mx_max_states = strtoull(val, NULL, 0);
			ok = 1;
		}
		if (!ok) {
			fprintf(stderr, "region_model: %s %s: unknown\n", arg, val);
			usage(stderr);
			return 2;
		}
	}
	for (int k = 0; k < NBUGS; k++)
		if (cfg.bug[k])
			printf("with bug %s: %s\n", bugs[k].name, bugs[k].what);
	for (size_t k = 0; k < nsc && !found; k++) {
		struct mx_stats st = { 0 };
		size_t n;
		int ret;

		if (any && !want[k])
			continue;
		cfg.sc = &scenarios[k];
		n = initial_states(init);
		mx_reset();
		printf("scenario %s: %s\n", cfg.sc->name, cfg.sc->what);
		fflush(stdout);
		ret = mx_explore(&model, init, n, &st, stdout);
		printf("  %zu initial states, %llu states, %llu transitions, paths up to %u steps: "
		       "%s\n",
		       n, (unsigned long long)st.states, (unsigned long long)st.transitions,
		       st.max_depth,
		       ret < 0 ? "INCOMPLETE"
		       : ret   ? "VIOLATION"
			       : "ok");
		if (st.skipped)
			printf("  (%llu violations of other kinds than %s not reported)\n",
			       (unsigned long long)st.skipped, mx_only_kind);
		fflush(stdout);
		if (ret < 0)
			return 2;
		if (ret) {
			found = 1;
			if (expect &&
			    (!strcmp(expect, "any") || !strcmp(expect, mx_violation_kind())))
				printf("region_model: the expected violation (%s) was found\n",
				       mx_violation_kind());
		}
	}
	mx_reset();
	if (expect) {
		if (!found)
			printf("region_model: no violation found, %s was expected\n", expect);
		return found && (!strcmp(expect, "any") || !strcmp(expect, mx_violation_kind()))
			       ? 0
			       : 1;
	}
	return found;
}
