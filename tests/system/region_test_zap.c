/*
 * region_test_zap.c - the program's thread held off between its events, so that what it
 * does after the first is late: a SCHED_FIFO thread takes its CPU the moment the event
 * is read (a test point); MADV_FREE, whose zap never comes; and an event unread while a
 * fault holds read_lock. Five cases:
 *
 *  zap_late     madvise(MADV_DONTNEED) whose zap comes late, with a pageout in between.
 *  remap_late   mremap() whose UNMAP (the kernel's second event of a move: the range it
 *               left) comes after another thread moved region memory to that address.
 *  remap_early  mremap() whose REMAP comes after another thread moved region memory to
 *               the address it left (below).
 *  free         madvise(MADV_FREE): its REMOVE looks like a DONTNEED's, but no zap
 *               follows (below).
 *  wp_eagain    a write to a never-written frame while another thread's event is unread
 *               (below).
 *
 * zap_late: after the madvise returns, the range must read zeros. Part of a unit: a
 * whole unit is empty (and no eviction's) as soon as the event is handled.
 *
 * The kernel sends the REMOVE event before it zaps, and the program's thread zaps only
 * once it runs again after the event is read. Here it cannot run for a while: it is
 * pinned to CPU 0 at SCHED_IDLE, and before its event is read (a test point in the
 * service thread) a SCHED_FIFO thread takes CPU 0 for 300 ms, during which the main
 * thread, on CPU 1, pages the region out once zfolio has handled the event (the old
 * code, which waited at most 100 ms for the zap) or the zap may have come (now).
 *
 * What it shows, and what it cannot: until the dropping thread runs again, the kernel
 * itself refuses every UFFDIO_MOVE (an event is in flight: EAGAIN), so the pageout gives
 * the unit back, and the range reads zeros. The window the REMOVE's wait for the zap
 * closes (zap_pending(), region_events.c) is the one after the dropping thread runs
 * again and before it zaps, a few instructions inside the kernel that no test point can
 * hold open: this test passes with that wait taken out; tests/model checks it.
 *
 * remap_late: thread Y moves memory back from address t; while it is held off, its
 * UNMAP of t unsent, the main thread moves two evicted units to t. Their data cannot be
 * placed until Y's UNMAP is read (the kernel refuses copies while an event is in
 * flight), and then came after their REMAP in the queue: taken for an unmap of the
 * memory just moved there, it dropped their data (zeros at t; found by the soak test).
 * Now an mremap's UNMAPs take the place of its REMAP in the order of layout changes
 * (region_order.c, "Late UNMAPs"). In both remap cases the SCHED_FIFO thread holds CPU 0
 * until the main thread has moved its units (a deadline, not 300 ms that must be enough).
 *
 * All need two CPUs and SCHED_FIFO (root or CAP_SYS_NICE); skipped (77) otherwise.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/test_point.h"
#include "region/region_test.h"
#include "region_harness.h"

#define HOG_MS 300 /* longer than the 100 ms zfolio used to wait for a zap */

struct late {
	uint8_t *addr, *to; /* the dropper's range; the mover's: [to, to + len) to addr */
	size_t len;
	int go[2]; /* a pipe: the hog sleeps on it until its turn */
	_Atomic int armed, hog_go, hog_done, dropped;
	/* remap_held(): the hog spins on until the main thread has moved (released). */
	int hold;
	_Atomic int released;
};

static int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/*
 * CPU 0, SCHED_FIFO: spins HOG_MS from the moment the REMOVE is read, and (l->hold) on
 * until the main thread releases it: a deadline, not a time that must be long enough (it
 * was 300 ms, and under ASan beside two test loops the main thread's move once took
 * longer); the cap only keeps a stuck test from spinning for good.
 */
static void *hog_main(void *arg)
{
	struct late *l = arg;
	struct sched_param sp = { .sched_priority = 1 };
	uint64_t end, cap;

	if (pin(0) || pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp)) {
		atomic_store(&l->hog_done, -1);
		return NULL;
	}
	atomic_store(&l->hog_done, 1); /* ready */
	if (read(l->go[0], &end, 1) != 1) {
		atomic_store(&l->hog_done, 2);
		return NULL;
	}
	atomic_store(&l->hog_go, 1);
	end = now_ns() + (uint64_t)HOG_MS * 1000000u;
	cap = now_ns() + (uint64_t)DEADLINE_S(10) * 1000000000u;
	while (now_ns() < end || (l->hold && !atomic_load(&l->released) && now_ns() < cap))
		;
	atomic_store(&l->hog_done, 2);
	return NULL;
}

/*
 * The caller on CPU 1, the hog ready on CPU 0; 0, or -1 when either cannot be had (one
 * CPU, no SCHED_FIFO here): the case is skipped.
 */
static int hog_start(struct late *l, pthread_t *hog)
{
	if (pin(1) || pipe(l->go) || pthread_create(hog, NULL, hog_main, l))
		return -1;
	while (!atomic_load(&l->hog_done))
		sched_yield();
	if (atomic_load(&l->hog_done) < 0) {
		pthread_join(*hog, NULL);
		return -1;
	}
	return 0;
}

/* CPU 0, SCHED_IDLE: the program's thread that drops the range. */
static void *dropper_main(void *arg)
{
	struct late *l = arg;
	struct sched_param sp = { 0 };

	if (pin(0) || pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp))
		return (void *)1;
	if (madvise(l->addr, l->len, MADV_DONTNEED))
		return (void *)2;
	atomic_store(&l->dropped, 1);
	return NULL;
}

/*
 * In the service thread, the dropper's REMOVE waiting to be read (the dropper asleep in
 * madvise): the hog takes CPU 0 first, so that the dropper, woken by the read, cannot
 * run to zap.
 */
static int start_hog(enum test_point point, void *arg)
{
	struct late *l = arg;

	(void)point;
	if (atomic_exchange(&l->armed, 0)) {
		if (write(l->go[1], "g", 1) != 1)
			return 0;
		while (!atomic_load(&l->hog_go))
			sched_yield();
	}
	return 0;
}

static int zap_late(const struct cfg *c)
{
	const size_t n = 8;
	const zf_region_options o = ropts(c->mode, c->unit);
	struct late l = { 0 };
	pthread_t hog, dropper;
	void *ret;
	struct rg g;

	rg_open(&g, &o, n * c->unit, store_make(c->unit, 0));
	rg_fill(&g, 0, n, 2);
	if (hog_start(&l, &hog)) {
		rg_close(&g);
		return SKIP;
	}
	/* Half of unit 3: the unit stays resident, with pages to drop (a whole unit would be
	 * empty at once, and no eviction takes an empty unit). */
	l.addr = g.base + 3 * g.unit + PAGE;
	l.len = g.unit / 2;
	atomic_store(&l.armed, 1);
	test_point_set(TP_EVENTS_PENDING, start_hog, &l);
	CHECK(!pthread_create(&dropper, NULL, dropper_main, &l), "pthread_create");
	while (!atomic_load(&l.hog_go))
		sched_yield();
	/*
	 * The zap is held off now. Page the unit out once zfolio has handled the event, or
	 * once the zap may have come: with the old limit, the first (the bug); now the event
	 * waits for the zap (10 ms, then its pages still there are left under doubt, and no
	 * eviction takes the unit while they are: "free" below), so the second.
	 */
	while (rst(g.r).ev_remove == 0 && atomic_load(&l.hog_done) != 2)
		sched_yield();
	(void)zf_region_pageout(g.r, g.base, g.size);
	CHECK(!pthread_join(dropper, &ret) && !ret, "the dropper failed (%p)", ret);
	pthread_join(hog, NULL);
	test_point_set(TP_EVENTS_PENDING, NULL, NULL);
	close(l.go[0]);
	close(l.go[1]);
	CHECK(atomic_load(&l.dropped), "madvise did not return");
	zero_want(&g, 3 * g.unit + PAGE, g.unit / 2);
	VERIFY(&g, 0, g.size, "after a DONTNEED whose zap came late, with a pageout between");
	PAGEOUT(&g, 0, n, units_in_memory(&g, 0, n));
	VERIFY(&g, 0, g.size, "evicted and read back");
	rg_close(&g);
	return PASS;
}

/* CPU 0, SCHED_IDLE: the program's thread that moves [to, to + len) back to addr. */
static void *mover_main(void *arg)
{
	struct late *l = arg;
	struct sched_param sp = { 0 };

	if (pin(0) || pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp))
		return (void *)1;
	if (mremap(l->to, l->len, l->len, MREMAP_MAYMOVE | MREMAP_FIXED, l->addr) != l->addr)
		return (void *)2;
	return NULL;
}

/* A PROT_NONE reservation of [p, p + len), where nothing is mapped. */
static int reserve_at(uint8_t *p, size_t len)
{
	return mmap(p, len, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0) == p;
}

/* Whether [p, p + len) holds units [u, u + n) of want. */
static void check_units_at(struct rg *g, const uint8_t *p, size_t u, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (memcmp(p + i * g->unit, g->want + (u + i) * g->unit, g->unit))
			FAILF("%s: unit %llu has other bytes at %p%s", what, U(u + i),
			      (const void *)(p + i * g->unit),
			      page_is_zero(p + i * g->unit) ? " (its first page reads zeros)" : "");
}

/*
 * remap_late and remap_early: units 1-2 moved to t; the mover moves them on from t to
 * l.addr, held off between two of its events, while the main thread moves units k, k + 1
 * to t, which the mover left.
 *
 * remap_early: the mover's destination is units 6-7, registered with us, so its move's
 * first event is the UNMAP of units 6-7, and it is held off once that is read, before
 * its REMAP. The main thread's REMAP is then read before the mover's, which seemed to
 * move units 3-4 on to units 6-7 (their data went there: zeros at t; found by the soak
 * test, with the mover preempted between its change and its REMAP).
 */
static int remap_held(const struct cfg *c, int early)
{
	const zf_region_options o = ropts(c->mode, c->unit);
	const size_t n = 8, len = 2 * rg_place_unit(&o), k = early ? 3 : 5;
	struct late l = { 0 };
	pthread_t hog, mover;
	uint8_t *resv, *t;
	unsigned char v;
	void *ret;
	struct rg g;

	rg_open(&g, &o, n * c->unit, store_make(c->unit, 0));
	rg_fill(&g, 0, n, 2);
	PAGEOUT(&g, 0, n, n);
	if (hog_start(&l, &hog)) {
		rg_close(&g);
		return SKIP;
	}
	/* An address t for two units, aligned to a unit, and units 1-2 moved there. */
	resv = mmap(NULL, len + g.unit, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
		    0);
	CHECK(resv != MAP_FAILED, "mmap: %s", strerror(errno));
	t = (uint8_t *)(((uintptr_t)resv + g.unit - 1) & ~(uintptr_t)(g.unit - 1));
	l.addr = g.base + (early ? 6 : 1) * g.unit;
	l.to = t;
	l.len = len;
	set_phase("units 1-2 moved to t");
	CHECK(mremap(g.base + 1 * g.unit, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, t) == t,
	      "mremap: %s", strerror(errno));
	/* The hole reserved, or a mapping of anyone's (ASan's) could go there, and a move
	 * onto it would replace it. */
	CHECK(reserve_at(g.base + 1 * g.unit, len), "mmap(the hole): %s", strerror(errno));
	check_units_at(&g, t, 1, 2, "units 1-2 moved to t");

	set_phase(early ? "the mover moves them onto units 6-7, held off before its REMAP"
			: "the mover moves them back, held off before its UNMAP of t");
	atomic_store(&l.armed, 1);
	l.hold = 1;
	test_point_set(TP_EVENTS_PENDING, start_hog, &l);
	CHECK(!pthread_create(&mover, NULL, mover_main, &l), "pthread_create");
	while (!atomic_load(&l.hog_go))
		sched_yield();
	/* Its move is done (the layout changes before the events): t is free; reserved. */
	while (!reserve_at(t, len) && errno == EEXIST && atomic_load(&l.hog_done) != 2)
		sched_yield();
	CHECK(mincore(t, PAGE, &v) == 0, "t could not be reserved");
	set_phase(early ? "units 3-4 moved to t before the mover's REMAP is sent"
			: "units 5-6 moved to t while the mover's UNMAP of t is to come");
	CHECK(mremap(g.base + k * g.unit, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, t) == t,
	      "mremap: %s", strerror(errno));
	CHECK(atomic_load(&l.hog_done) != 2, "the mover ran again before units %llu-%llu moved",
	      U(k), U(k + 1));
	atomic_store(&l.released, 1);
	CHECK(reserve_at(g.base + k * g.unit, len), "mmap(the hole): %s", strerror(errno));
	check_units_at(&g, t, k, 2, "units moved to where units 1-2 had been");
	CHECK(!pthread_join(mover, &ret) && !ret, "the mover failed (%p)", ret);
	pthread_join(hog, NULL);
	test_point_set(TP_EVENTS_PENDING, NULL, NULL);
	close(l.go[0]);
	close(l.go[1]);
	check_units_at(&g, l.addr, 1, 2, "units 1-2 moved on by the mover");
	for (size_t u = 0; u < n; u++)
		if ((u < 1 || u > 2) && (u < k || u > k + 1) && (!early || u < 6))
			VERIFY_UNITS(&g, u, u + 1, "the rest of the region");
	munmap(t, len);
	munmap(resv, len + g.unit);
	rg_close(&g);
	return PASS;
}

static int remap_late(const struct cfg *c)
{
	return remap_held(c, 0);
}

static int remap_early(const struct cfg *c)
{
	return remap_held(c, 1);
}

static const uint32_t units[] = { KiB(64), KiB(2048) };

int case_zap_late(void)
{
	each_config("zap late", zap_late, units, 2, 0, 20);
	return failures ? FAIL : PASS;
}

int case_remap_late(void)
{
	static const uint32_t all[] = { KiB(4), KiB(64), KiB(2048) };

	each_config("remap late", remap_late, all, 3, 0, 20);
	return failures ? FAIL : PASS;
}

int case_remap_early(void)
{
	static const uint32_t all[] = { KiB(4), KiB(64), KiB(2048) };

	each_config("remap early", remap_early, all, 3, 0, 20);
	return failures ? FAIL : PASS;
}

/*
 * free: MADV_FREE's REMOVE is a DONTNEED's, but the pages stay (until the kernel reclaims
 * them, which it does not here, or the program writes them). The event used to wait for a
 * zap that never came, holding its units: the next pageout waited for them for good.
 * Now, after RG_ZAP_WAIT_NS, the event goes on and leaves the pages write-protected, their
 * units resident and unevictable until every such page is gone or written (F_DOUBT).
 *
 * Eight units: 1 and 2 freed whole, the second half of 4 (a unit of one page: all of it),
 * 6 evicted and then freed; the rest untouched. Unit 2 stands for a MADV_DONTNEED whose
 * zap comes after its event was handled: its pages are taken afterwards with no event
 * (region_test_zap_page(), as the late zap would), and must then read zeros, whatever
 * pageout came in between; without the doubt, that pageout stored the old bytes and they
 * came back. Unit 1 is written just after the madvise (before the event is handled),
 * written again, and has its other pages taken; unit 4's freed pages are all written.
 */
static void free_expect(const struct rg *g, size_t off, size_t len, const char *what)
{
	/* Freed and not written since: as before, or zeros if the kernel took the page. */
	for (size_t p = off; p < off + len; p += PAGE)
		if (memcmp(g->base + p, g->want + p, PAGE) && !page_is_zero(g->base + p))
			FAILF("%s: page %llu of the region reads neither its data nor zeros", what,
			      U(p / PAGE));
}

static void take_pages(struct rg *g, size_t off, size_t len)
{
	for (size_t p = off; p < off + len; p += PAGE) {
		const int ret = region_test_zap_page(g->r, g->base + p);

		/* -ENOENT: nothing there (an eviction took it first: the late zap finds none). */
		CHECK(ret == 0 || ret == -ENOENT, "region_test_zap_page: %s", strerror(-ret));
	}
	zero_want(g, off, len);
}

static int free_one(const struct cfg *c)
{
	const size_t n = 8;
	const zf_region_options o = ropts(c->mode, c->unit);
	zf_region_stats st;
	size_t u4, u4len;
	struct rg g;

	rg_open(&g, &o, n * c->unit, store_make(c->unit, 0));
	u4 = 4 * g.unit + (g.upages > 1 ? g.unit / 2 : 0);
	u4len = 5 * g.unit - u4;
	rg_fill(&g, 0, n, 3);
	PAGEOUT(&g, 6, 7, 1);
	CHECK(madvise(g.base + g.unit, 2 * g.unit, MADV_FREE) == 0, "madvise(MADV_FREE): %s",
	      strerror(errno));
	g.base[g.unit + 9] = g.want[g.unit + 9] ^= 0x5a; /* most likely before the event */
	CHECK(madvise(g.base + u4, u4len, MADV_FREE) == 0, "madvise: %s", strerror(errno));
	CHECK(madvise(g.base + 6 * g.unit, g.unit, MADV_FREE) == 0, "madvise: %s", strerror(errno));
	zero_want(&g, 6 * g.unit, g.unit); /* evicted: dropped, as a DONTNEED */
	WAIT_UNTIL((st = rst(g.r)).ev_remove >= 3 && st.ev_remove_unzapped >= 2, WAIT_MS);

	/* The freed units stay; the others go, the freed-evicted one is empty. */
	set_phase("free %s %s: pageout", mode_name(c->mode), unit_name(c->unit));
	PAGEOUT(&g, 0, n, n - 4);
	/* Unit 2: a late DONTNEED zap, after that pageout, before the next touch. */
	take_pages(&g, 2 * g.unit, g.unit);
	VERIFY(&g, 2 * g.unit, g.unit, "unit 2, its pages taken as by a late zap");
	VERIFY(&g, 0, g.unit, "unit 0");
	VERIFY(&g, g.unit + 9, 1, "a byte written to a freed page");
	free_expect(&g, g.unit, g.unit, "unit 1, freed, after a pageout");
	VERIFY(&g, 3 * g.unit, u4 - 3 * g.unit, "units 3 and 4 before the freed part");
	free_expect(&g, u4, u4len, "the freed part of unit 4");
	VERIFY(&g, 5 * g.unit, 3 * g.unit, "units 5 to 7 (6: zeros)");
	/* Unit 1: written again (a write-protect fault), its other pages taken. */
	memcpy(g.want + g.unit, g.base + g.unit, PAGE);
	g.base[g.unit + 10] = g.want[g.unit + 10] ^= 0xa5;
	if (g.upages > 1)
		take_pages(&g, g.unit + PAGE, g.unit - PAGE);
	/* Unit 4: every freed page written. */
	for (size_t p = u4; p < u4 + u4len; p += PAGE) {
		memcpy(g.want + p, g.base + p, PAGE);
		g.base[p] = g.want[p] ^= 0x11;
	}
	st = rst(g.r);
	CHECK(st.wp_faults >= 2, "writes to freed pages: wp_faults %llu", U(st.wp_faults));
	/* Every unit was read since the first pageout: all go, the freed ones too now. */
	PAGEOUT(&g, 0, n, n);
	VERIFY(&g, 0, g.size, "after the freed pages were written or taken, evicted");
	CHECK(rst(g.r).fault_fail == 0, "fault_fail");
	rg_close(&g);
	return PASS;
}

int case_free(void)
{
	static const uint32_t all[] = { KiB(4), KiB(64), KiB(2048) };

	each_config("free", free_one, all, 3, 0, 30);
	return failures ? FAIL : PASS;
}

/*
 * wp_eagain (SIGBUS mode, frames): a write to a never-written frame, which maps the huge
 * zero page write-protected, is served by lifting the protection (place_zeros()), under
 * read_lock shared. While another thread's event is unread (mmap_changing),
 * UFFDIO_WRITEPROTECT fails with EAGAIN; retried there, under the lock, as it once was,
 * it kept the service thread from taking read_lock to read that event, so it failed
 * for good: the fault spun and the region hung (frames_test "racing", SIGBUS mode, 2 of 2
 * runs). Now the fault lets go and retries. Here the event is unread at that very moment:
 * a test point just before the unprotect wakes a thread that drops the other frame
 * (madvise(DONTNEED): a REMOVE) and waits until the region's descriptor holds the event
 * (region_test_events_unread()), which the service thread cannot read meanwhile: that
 * takes read_lock exclusive. (Waiting for the service thread to see it instead hung when
 * that thread, new, took the lock at the top of its loop after the fault had it.) The
 * fault must then finish, the dropper return.
 */
struct eagain {
	zf_region *r;
	uint8_t *drop; /* the frame the dropper drops */
	int go[2]; /* a pipe: the dropper sleeps on it */
	_Atomic int armed, pending, dropped;
};

static void *eagain_dropper(void *arg)
{
	struct eagain *e = arg;
	char ch;

	if (read(e->go[0], &ch, 1) != 1)
		return (void *)1;
	if (madvise(e->drop, ZF_FRAME_2M, MADV_DONTNEED))
		return (void *)2;
	atomic_store(&e->dropped, 1);
	return NULL;
}

/* TP_ZEROS_UNPROTECT, in the faulting thread's SIGBUS handler: an event sent, unread. */
static int eagain_unprotect(enum test_point point, void *arg)
{
	struct eagain *e = arg;

	(void)point;
	if (!atomic_exchange(&e->armed, 0))
		return 0;
	if (write(e->go[1], "g", 1) != 1)
		return 0;
	while (!region_test_events_unread(e->r))
		sched_yield();
	atomic_store(&e->pending, 1);
	return 0;
}

static int wp_eagain_one(const struct cfg *c)
{
	zf_region_options o = ropts(c->mode, c->unit);
	struct eagain e = { 0 };
	zf_region_stats st;
	pthread_t dropper;
	void *ret;
	struct rg g;

	o.frame = ZF_FRAME_2M;
	rg_open(&g, &o, 2 * (size_t)c->unit, NULL);
	if (g.nunits != 2 || g.zero_mapped < 2) {
		rg_close(&g);
		return SKIP; /* no huge zero page here */
	}
	e.r = g.r;
	e.drop = g.base + g.unit;
	CHECK(pipe(e.go) == 0, "pipe: %s", strerror(errno));
	CHECK(!pthread_create(&dropper, NULL, eagain_dropper, &e), "pthread_create");
	test_point_set(TP_ZEROS_UNPROTECT, eagain_unprotect, &e);
	atomic_store(&e.armed, 1);
	set_phase("wp_eagain %s: the write", unit_name(c->unit));
	g.base[100] = g.want[100] = 0x5a;
	CHECK(!pthread_join(dropper, &ret) && !ret, "the dropper failed (%p)", ret);
	test_point_set(TP_ZEROS_UNPROTECT, NULL, NULL);
	close(e.go[0]);
	close(e.go[1]);
	CHECK(atomic_load(&e.pending) && atomic_load(&e.dropped),
	      "the event was not pending at the unprotect (pending %d, dropped %d)",
	      atomic_load(&e.pending), atomic_load(&e.dropped));
	WAIT_UNTIL((st = rst(g.r)).ev_remove >= 1 && st.thp_fault_alloc >= 1, WAIT_MS);
	VERIFY(&g, 0, g.size, "a frame written while an event was unread, the other dropped");
	CHECK(rst(g.r).fault_fail == 0, "fault_fail");
	rg_close(&g);
	return PASS;
}

int case_wp_eagain(void)
{
	static const uint32_t sizes[] = { KiB(4), KiB(64) };

	for (size_t i = 0; i < 2; i++) {
		const struct cfg c = { ZF_FAULT_SIGBUS, sizes[i], 0 };
		char name[64];

		snprintf(name, sizeof(name), "wp_eagain sigbus %s", unit_name(sizes[i]));
		if (!selected(name))
			continue;
		set_phase("%s", name);
		expect_ok(run_child(wp_eagain_one, &c, 30), name);
	}
	return failures ? FAIL : PASS;
}
