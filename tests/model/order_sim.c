/*
 * order_sim.c - a randomized simulation of the program's layout changes racing the
 * service thread's reads, against the region's real ordering code (src/region/
 * region_order.c: region_event_seq(), region_follow()).
 *
 * region_model checks the protocols over two units and one mremap; this checks what it
 * cannot: many threads moving memory away to addresses the kernel hands out again and
 * again (mmap(NULL) is top-down, so the address one thread just left is the next one's),
 * holes, and the events of all of them read in any order the kernel allows. It plays the
 * kernel: a small address space of pages (free, a mapping of the program's own, or region
 * memory, which keeps its identity wherever it moves), each thread's call changing the
 * layout at once and sending its events after, one at a time, each once the one before is
 * read, with the thread preempted anywhere in between. The service thread reads any event
 * sent, gives it its place (region_event_seq()) and queues it, and handles the head of the
 * queue.
 *
 * What it checks is what the region does with the places: when a REMAP of region memory
 * is handled, each evicted page's data goes where region_follow() says its memory is now
 * (event_remap()), and an eviction's page put back goes where region_follow(-1) says
 * (region_put_back()). Both happen only when every change made has had its events read
 * (the kernel refuses a copy meanwhile: mmap_changing), so the truth is known: the
 * simulation knows where each page of region memory is. Data sent where its memory is not
 * is lost (the page reads zeros), data sent onto other region memory is wrong data.
 *
 *   order_sim [--seed S] [--runs N] [--steps N] [--threads N] [--verbose]
 *
 * Exit status 0 when every run held, 1 with the first violation and the path to it.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/region/region_internal.h"

#define NP 512u /* pages of address space */
#define RB 384u /* the region: pages [RB, RB + RN) */
#define RN 64u
#define MAXT 6u /* program threads */
#define MAXEV 2u /* events of one call */
#define MAXRUN 4u /* pages one call changes */
#define MAXLOG 4096u

enum slot_kind { FREE, OWN, OURS };

struct slot {
	enum slot_kind kind;
	int id; /* OURS: the region page whose memory this is */
};

struct event {
	struct uffd_msg m;
	int ids[MAXRUN]; /* REMAP: the memory it moved, page by page */
	int waiter; /* --touch: the thread that waits for it to be handled, or -1 */
	unsigned changed; /* the step at which its call changed the layout */
};

enum tstate { IDLE, AWAY_MOVED, AWAY, HOLE_MADE };

struct thread {
	enum tstate st;
	unsigned run, n; /* the run of the region it works on: pages [run, run + n) */
	unsigned res; /* AWAY: where the run is */
	int lost; /* the vacated range was taken: the run does not come back */
	struct event ev[MAXEV];
	unsigned nev, next; /* the call's events, and the next to send */
	int sent; /* ev[next] is sent, not yet read */
	int waiting; /* --touch: reads what it moved away, so waits for the REMAP's handling */
};

struct sim {
	struct slot as[NP];
	int loc[RN]; /* where region page i's memory is (a page), or -1 */
	int gone[RN]; /* an event handled took it out of the region */
	struct thread t[MAXT];
	unsigned nt;
	int layout_locked; /* the soak's layout lock: reserve, move, reserve the vacated */
	zf_region r;
	struct event queue[RG_QUEUE]; /* beside r.queue */
	int snap[8]; /* eviction put-backs pending: region pages moved out, or -1 */
	uint64_t rng;
	char log[MAXLOG][96];
	unsigned nlog;
	int verbose, touch;
};

static uint64_t rnd(struct sim *s, uint64_t n)
{
	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 7;
	s->rng ^= s->rng << 17;
	return s->rng % n;
}

static uintptr_t addr_of(unsigned page)
{
	return (uintptr_t)0x10000000 + (uintptr_t)page * RG_PAGE;
}

static unsigned page_of(uintptr_t a)
{
	return (unsigned)((a - (uintptr_t)0x10000000) / RG_PAGE);
}

static void say(struct sim *s, const char *fmt, ...) ZF_PRINTF(2, 3);
static int fail(struct sim *s, const char *fmt, ...) ZF_PRINTF(2, 3);

static void say(struct sim *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->log[s->nlog % MAXLOG], sizeof(s->log[0]), fmt, ap);
	va_end(ap);
	if (s->verbose)
		printf("  %s\n", s->log[s->nlog % MAXLOG]);
	s->nlog++;
}

/* mmap(NULL, n pages): the highest free range below the region, as the kernel does. */
static int map_anywhere(struct sim *s, unsigned n)
{
	for (unsigned a = RB - n + 1; a-- > 0;) {
		unsigned k = 0;

		while (k < n && s->as[a + k].kind == FREE)
			k++;
		if (k == n) {
			for (k = 0; k < n; k++)
				s->as[a + k] = (struct slot){ OWN, -1 };
			return (int)a;
		}
	}
	return -1;
}

static int all_free(const struct sim *s, unsigned a, unsigned n)
{
	for (unsigned k = 0; k < n; k++)
		if (s->as[a + k].kind != FREE)
			return 0;
	return 1;
}

/* Pages [a, a + n) become free; region memory there is gone. */
static void unmap_pages(struct sim *s, unsigned a, unsigned n)
{
	for (unsigned k = 0; k < n; k++) {
		if (s->as[a + k].kind == OURS)
			s->loc[s->as[a + k].id] = -1;
		s->as[a + k] = (struct slot){ FREE, -1 };
	}
}

/* A new call of thread t, changing the layout now: no events yet. */
static void call_begin(const struct sim *s, struct thread *t)
{
	memset(t->ev, 0, sizeof(t->ev));
	for (unsigned k = 0; k < MAXEV; k++) {
		t->ev[k].waiter = -1;
		t->ev[k].changed = s->nlog;
	}
	t->nev = t->next = 0;
	t->sent = 0;
}

/* mremap(from, n, MREMAP_FIXED, to): the pages move, and the events go after. */
static void move_pages(struct sim *s, struct thread *t, unsigned from, unsigned to, unsigned n)
{
	struct event *e = &t->ev[0];
	int reg = 0;

	call_begin(s, t);
	for (unsigned k = 0; k < n; k++)
		reg |= s->as[from + k].kind == OURS;
	/* Onto a mapping of ours: unmapped first (its own UNMAP; not in these runs). */
	for (unsigned k = 0; k < n; k++) {
		e->ids[k] = s->as[from + k].kind == OURS ? s->as[from + k].id : -1;
		s->as[to + k] = s->as[from + k];
		if (e->ids[k] >= 0)
			s->loc[e->ids[k]] = (int)(to + k);
		s->as[from + k] = (struct slot){ FREE, -1 };
	}
	if (!reg)
		return;
	e->m.event = UFFD_EVENT_REMAP;
	e->m.arg.remap.from = addr_of(from);
	e->m.arg.remap.to = addr_of(to);
	e->m.arg.remap.len = (uintptr_t)n * RG_PAGE;
	t->ev[1].m.event = UFFD_EVENT_UNMAP;
	t->ev[1].m.arg.remove.start = addr_of(from);
	t->ev[1].m.arg.remove.end = addr_of(from + n);
	t->nev = 2;
}

static void unmap_call(struct sim *s, struct thread *t, unsigned a, unsigned n)
{
	int reg = 0;

	for (unsigned k = 0; k < n; k++)
		reg |= s->as[a + k].kind == OURS;
	unmap_pages(s, a, n);
	call_begin(s, t);
	if (!reg)
		return;
	t->ev[0].m.event = UFFD_EVENT_UNMAP;
	t->ev[0].m.arg.remove.start = addr_of(a);
	t->ev[0].m.arg.remove.end = addr_of(a + n);
	t->nev = 1;
}

/* Whether the thread's call still has events to send or to be read. */
static int in_call(const struct thread *t)
{
	return t->next < t->nev;
}

/* Every change made has had its events read: the kernel lets copies and moves through. */
static int quiescent(const struct sim *s)
{
	for (unsigned i = 0; i < s->nt; i++)
		if (in_call(&s->t[i]))
			return 0;
	return 1;
}

/* A run of thread i's slice of the region whose memory is home, region memory. */
static int pick_home_run(struct sim *s, unsigned i, unsigned *run, unsigned *n)
{
	const unsigned slice = RN / s->nt, first = i * slice;
	const unsigned len = 1 + (unsigned)rnd(s, MAXRUN);
	const unsigned p = first + (unsigned)rnd(s, slice - len + 1);

	for (unsigned k = 0; k < len; k++)
		if (s->loc[p + k] != (int)(RB + p + k))
			return 0;
	*run = p;
	*n = len;
	return 1;
}

/* One step of program thread i; 0 when it had nothing to do. */
static int thread_step(struct sim *s, unsigned i)
{
	struct thread *t = &s->t[i];

	if (in_call(t)) {
		if (t->sent)
			return 0; /* blocked until the service thread reads it */
		t->sent = 1;
		say(s, "T%u sends its event %u", i, t->next);
		return 1;
	}
	if (t->waiting)
		return 0; /* reading what it moved: until its REMAP is handled */
	switch (t->st) {
	case IDLE: {
		const unsigned op = (unsigned)rnd(s, 8);
		unsigned run, n;

		if (!pick_home_run(s, i, &run, &n))
			return 0;
		if (op < 5) {
			int res;

			/* mremap away: reserve, move, reserve the vacated range (layout lock). */
			if (s->layout_locked)
				return 0;
			res = map_anywhere(s, n);
			if (res < 0)
				return 0;
			s->layout_locked = 1;
			t->run = run;
			t->n = n;
			t->res = (unsigned)res;
			t->lost = 0;
			move_pages(s, t, RB + run, (unsigned)res, n);
			if (s->touch && t->nev) {
				t->ev[0].waiter = (int)i;
				t->waiting = 1;
			}
			say(s, "T%u mremap region %u+%u -> %d (reserved)", i, run, n, res);
			t->st = AWAY_MOVED;
		} else if (op < 7) {
			unmap_call(s, t, RB + run, n);
			if (op == 5) {
				/* munmap, then mmap(MAP_FIXED_NOREPLACE) there. */
				say(s, "T%u munmap region %u+%u", i, run, n);
				t->run = run;
				t->n = n;
				t->st = HOLE_MADE;
			} else {
				/* mmap(MAP_FIXED) over the run: unmapped and mapped in one call. */
				for (unsigned k = 0; k < n; k++)
					s->as[RB + run + k] = (struct slot){ OWN, -1 };
				say(s, "T%u mmap(MAP_FIXED) over region %u+%u", i, run, n);
			}
		} else {
			call_begin(s, t);
			t->ev[0].m.event = UFFD_EVENT_REMOVE;
			t->ev[0].m.arg.remove.start = addr_of(RB + run);
			t->ev[0].m.arg.remove.end = addr_of(RB + run + n);
			t->nev = 1;
			say(s, "T%u madvise(DONTNEED) region %u+%u", i, run, n);
		}
		return 1;
	}
	case HOLE_MADE:
		if (!all_free(s, RB + t->run, t->n)) {
			say(s, "T%u hole taken", i);
		} else {
			for (unsigned k = 0; k < t->n; k++)
				s->as[RB + t->run + k] = (struct slot){ OWN, -1 };
			say(s, "T%u mmap in the hole %u+%u", i, t->run, t->n);
		}
		t->st = IDLE;
		return 1;
	case AWAY_MOVED:
		if (all_free(s, RB + t->run, t->n)) {
			for (unsigned k = 0; k < t->n; k++)
				s->as[RB + t->run + k] = (struct slot){ OWN, -1 };
		} else {
			t->lost = 1;
		}
		s->layout_locked = 0;
		say(s, "T%u reserves the vacated range%s", i, t->lost ? ": taken, lost" : "");
		t->st = AWAY;
		return 1;
	case AWAY:
		if (t->lost) {
			unmap_call(s, t, t->res, t->n);
			say(s, "T%u munmap %u+%u (away, lost)", i, t->res, t->n);
		} else {
			unmap_pages(s, RB + t->run, t->n); /* the reservation, replaced */
			move_pages(s, t, t->res, RB + t->run, t->n);
			say(s, "T%u mremap %u+%u back -> region %u", i, t->res, t->n, t->run);
		}
		t->st = IDLE;
		return 1;
	}
	return 0;
}

/* A mapping of someone else's (a library's, the allocator's) comes or goes: no event. */
static int foreign_step(struct sim *s)
{
	if (rnd(s, 2)) {
		const int a = map_anywhere(s, 1 + (unsigned)rnd(s, MAXRUN));

		if (a >= 0)
			say(s, "foreign mmap at %d", a);
		return a >= 0;
	}
	for (int tries = 0; tries < 8; tries++) {
		const unsigned a = (unsigned)rnd(s, RB);
		int ours = 0;

		if (s->as[a].kind != OWN)
			continue;
		/* Only what no thread holds: a page of a reservation has its thread's run. */
		for (unsigned i = 0; i < s->nt; i++)
			ours |= s->t[i].st >= AWAY_MOVED && s->t[i].st != HOLE_MADE &&
				a >= s->t[i].res && a < s->t[i].res + s->t[i].n;
		if (ours)
			continue;
		s->as[a] = (struct slot){ FREE, -1 };
		say(s, "foreign munmap of page %u", a);
		return 1;
	}
	return 0;
}

static int fail(struct sim *s, const char *fmt, ...)
{
	va_list ap;

	printf("order_sim: VIOLATION: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n  the last %u steps:\n", ZF_MIN(s->nlog, MAXLOG));
	for (unsigned k = s->nlog > MAXLOG ? s->nlog - MAXLOG : 0; k < s->nlog; k++)
		printf("    %5u  %s\n", k, s->log[k % MAXLOG]);
	return 1;
}

/*
 * Where data placed at page `to` lands (the memory it should be in: region page id, or
 * -1 when that memory is gone): 0, or a violation.
 */
static int check_place(struct sim *s, const char *what, int id, uintptr_t to)
{
	const int want = id >= 0 ? s->loc[id] : -1;
	const unsigned got = to ? page_of(to) : 0;

	if (want >= 0 && (!to || got != (unsigned)want))
		return fail(s,
			    "%s: region page %d's data sent to %s%u, its memory is at %d "
			    "(reads zeros there)",
			    what, id, to ? "" : "nowhere ", to ? got : 0, want);
	if (want < 0 && to && got < NP && s->as[got].kind == OURS)
		return fail(s,
			    "%s: region page %d's data (memory gone) sent onto region page "
			    "%d's memory at %u",
			    what, id, s->as[got].id, got);
	return 0;
}

/* The service thread reads a sent event (any: the kernel's order is not the calls'). */
static int read_step(struct sim *s)
{
	unsigned cand[MAXT], nc = 0;

	for (unsigned i = 0; i < s->nt; i++)
		if (in_call(&s->t[i]) && s->t[i].sent)
			cand[nc++] = i;
	if (!nc || s->r.nqueue == RG_QUEUE)
		return 0;
	{
		struct thread *t = &s->t[cand[rnd(s, nc)]];
		const struct event *e = &t->ev[t->next];
		uintptr_t a, b;

		s->r.qseq[s->r.nqueue] = region_event_seq(&s->r, &e->m);
		s->r.queue[s->r.nqueue] = e->m;
		s->queue[s->r.nqueue++] = *e;
		region_event_range(&e->m, &a, &b);
		if (e->m.event == UFFD_EVENT_REMAP)
			say(s, "read REMAP %u+%u -> %u, place %" PRIu64 " (T%u, changed at %u)",
			    page_of(a), page_of(b) - page_of(a), page_of(e->m.arg.remap.to),
			    s->r.qseq[s->r.nqueue - 1], (unsigned)(t - s->t), e->changed);
		else
			say(s, "read %s %u+%u, place %" PRIu64 " (T%u, changed at %u)",
			    e->m.event == UFFD_EVENT_UNMAP ? "UNMAP" : "REMOVE", page_of(a),
			    page_of(b) - page_of(a), s->r.qseq[s->r.nqueue - 1],
			    (unsigned)(t - s->t), e->changed);
		t->next++;
		t->sent = 0;
	}
	return 1;
}

/* Whether [a, b) covers region page p. */
static int covers(uintptr_t a, uintptr_t b, unsigned p)
{
	return addr_of(RB + p) >= a && addr_of(RB + p) < b;
}

/*
 * The service thread handles the head of the queue. A REMAP of region memory places
 * the evicted data (only when the kernel lets copies through), as every event on a unit
 * an eviction holds waits for it.
 */
static int handle_step(struct sim *s, int *bad)
{
	const struct event *e = &s->queue[0];
	uintptr_t a, b;
	int from_region;

	if (!s->r.nqueue)
		return 0;
	region_event_range(&e->m, &a, &b);
	for (unsigned k = 0; k < ZF_ARRAY_SIZE(s->snap); k++)
		if (s->snap[k] >= 0 && covers(a, b, (unsigned)s->snap[k]))
			return 0;
	from_region = a >= addr_of(RB) && a < addr_of(RB + RN);
	if (e->m.event == UFFD_EVENT_REMAP && from_region) {
		if (!quiescent(s))
			return 0;
		say(s, "handling REMAP %u+%u -> %u, place %" PRIu64, page_of(a),
		    page_of(b) - page_of(a), page_of(e->m.arg.remap.to), s->r.qseq[0]);
		for (unsigned k = 0; k < e->m.arg.remap.len / RG_PAGE; k++) {
			int dropped;
			const uintptr_t to =
				region_follow(&s->r, 0, e->m.arg.remap.to + k * RG_PAGE, &dropped);

			if (!dropped && (*bad = check_place(s, "a REMAP handled", e->ids[k], to)))
				return 1;
		}
	}
	if (e->m.event != UFFD_EVENT_REMOVE && from_region)
		for (unsigned p = 0; p < RN; p++)
			if (covers(a, b, p))
				s->gone[p] = 1;
	if (e->waiter >= 0)
		s->t[e->waiter].waiting = 0;
	say(s, "handled the head (place %" PRIu64 ")", s->r.qseq[0]);
	s->r.seq_handled = ZF_MAX(s->r.seq_handled, s->r.qseq[0]);
	memmove(s->r.queue, s->r.queue + 1, --s->r.nqueue * sizeof(s->r.queue[0]));
	memmove(s->r.qseq, s->r.qseq + 1, s->r.nqueue * sizeof(s->r.qseq[0]));
	memmove(s->queue, s->queue + 1, s->r.nqueue * sizeof(s->queue[0]));
	return 1;
}

/*
 * An eviction: moves a page of a region unit out (a page whose memory is home, no event
 * queued on it, its unit not gone: what claim_and_move() and move_held() let through,
 * when the kernel lets the move through), or puts one back where region_follow(-1) says.
 */
static int evict_step(struct sim *s, int *bad)
{
	const unsigned k = (unsigned)rnd(s, ZF_ARRAY_SIZE(s->snap));

	if (!quiescent(s))
		return 0;
	if (s->snap[k] >= 0) {
		int dropped;
		const int p = s->snap[k];
		const uintptr_t to = region_follow(&s->r, -1, addr_of(RB + (unsigned)p), &dropped);

		say(s, "eviction puts region page %d back", p);
		s->snap[k] = -1;
		if (!dropped)
			*bad = check_place(s, "a put-back", p, to);
		return 1;
	}
	{
		const unsigned p = (unsigned)rnd(s, RN);

		if (s->gone[p] || s->loc[p] != (int)(RB + p))
			return 0;
		for (unsigned q = 0; q < s->r.nqueue; q++) {
			uintptr_t a, b;

			region_event_range(&s->queue[q].m, &a, &b);
			if (covers(a, b, p))
				return 0;
		}
		for (unsigned q = 0; q < ZF_ARRAY_SIZE(s->snap); q++)
			if (s->snap[q] == (int)p)
				return 0;
		s->snap[k] = (int)p;
		say(s, "eviction moves region page %u out", p);
		return 1;
	}
}

/* One run of steps from seed; 0, or 1 on a violation (reported). */
static int run(uint64_t seed, unsigned steps, unsigned nt, int verbose, int touch)
{
	struct sim *s = calloc(1, sizeof(*s));
	int bad = 0;

	if (!s) {
		fprintf(stderr, "order_sim: out of memory\n");
		exit(2);
	}
	s->rng = seed * 2654435761u + 1;
	s->nt = nt;
	s->verbose = verbose;
	s->touch = touch;
	for (unsigned k = 0; k < ZF_ARRAY_SIZE(s->snap); k++)
		s->snap[k] = -1;
	for (unsigned p = 0; p < RN; p++) {
		s->as[RB + p] = (struct slot){ OURS, (int)p };
		s->loc[p] = (int)(RB + p);
	}
	s->r.base = (uint8_t *)addr_of(RB);
	s->r.size = (size_t)RN * RG_PAGE;
	if (region_order_init(&s->r)) {
		fprintf(stderr, "order_sim: out of memory\n");
		exit(2);
	}
	for (unsigned n = 0; n < steps && !bad; n++) {
		const unsigned who = (unsigned)rnd(s, nt + 4);

		if (who < nt)
			(void)thread_step(s, who);
		else if (who == nt)
			(void)read_step(s);
		else if (who == nt + 1)
			(void)handle_step(s, &bad);
		else if (who == nt + 2)
			(void)evict_step(s, &bad);
		else if (rnd(s, 8) == 0)
			(void)foreign_step(s);
	}
	if (bad)
		printf("order_sim: seed %" PRIu64 " (--seed %" PRIu64 " --runs 1 --steps %u "
		       "--threads %u%s)\n",
		       seed, seed, steps, nt, touch ? " --touch" : "");
	region_order_fini(&s->r);
	free(s);
	return bad;
}

void common_log(enum zf_log_level level, const char *fmt, ...)
{
	va_list ap;

	(void)level;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int main(int argc, char **argv)
{
	uint64_t seed = 1;
	unsigned runs = 2000, steps = 4000, nt = 4;
	int verbose = 0, touch = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
			runs = (unsigned)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
			steps = (unsigned)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			nt = (unsigned)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--verbose"))
			verbose = 1;
		else if (!strcmp(argv[i], "--touch"))
			touch = 1;
		else {
			fprintf(stderr,
				"usage: %s [--seed S] [--runs N] [--steps N] "
				"[--threads N] [--touch] [--verbose]\n",
				argv[0]);
			return 2;
		}
	}
	if (nt < 1 || nt > MAXT) {
		fprintf(stderr, "order_sim: --threads is 1 to %u\n", MAXT);
		return 2;
	}
	for (unsigned k = 0; k < runs; k++)
		if (run(seed + k, steps, nt, verbose, touch))
			return 1;
	printf("order_sim: %u runs of %u steps, %u threads, seeds %" PRIu64 "..%" PRIu64
	       ": no violation\n",
	       runs, steps, nt, seed, seed + runs - 1);
	return 0;
}
