/*
 * region_test_fresh.c - never-written frames (frames only): the cases "fill" and "premap".
 *
 * fill: the region's reader writes the fresh
 * frames that a fault opened ahead (fresh_ahead) before the program does, so that the
 * kernel zeroes their huge pages beside the program. The reader looks at a frame, then
 * writes it with MADV_POPULATE_WRITE, holding no claim and no lock: what it saw may be
 * stale by then. Here it is, every run: a test point (TP_FILL_SEEN) holds the reader
 * between its look and its write while the program
 *   variant 0  writes its data into the frame and evicts it: the reader's write then
 *              faults on an evicted frame (thread mode: served, a swap-in; SIGBUS mode:
 *              the populate fails, no signal), and the data must come back whole;
 *   variant 1  drops the frame (MADV_DONTNEED): it must read zeros, and the reader's
 *              fault on it must not hang anything.
 * Then every frame is written, evicted and read back.
 *
 * premap: a region premaps the huge zero page over its first frames at creation and over
 * the others a block at a time, at the block's first fault (a 16 GiB region premapped
 * whole cost every process under zfolio run 25 ms and 32 MiB of page tables). A read past
 * the first frames faults once and premaps the block: the block's other frames read
 * zeros with no fault, its frames write as premapped ones, and (thread mode) another
 * thread's fault on one of them, queued while the block is premapped, is answered. While
 * the program runs, a
 * frame's huge zero page is moved in before it is write-protected; a write landing in
 * between (a test point, TP_PREMAP_MOVED, writes then) gets a huge page from the kernel
 * unseen: the frame must count as resident, be evicted and come back with that write.
 *
 * Both modes, 4 KiB and 64 KiB store units; skipped where the kernel maps no huge zero
 * page.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "common/test_point.h"
#include "region/region_test.h"
#include "region_harness.h"

#define FILL_FRAMES 8

struct hold {
	_Atomic int armed, reached, released, seen;
};

/* TP_FILL_SEEN, in the reader: the first frame it is about to write waits for the test. */
static int hold_fill(enum test_point point, void *arg)
{
	struct hold *h = arg;

	(void)point;
	atomic_fetch_add(&h->seen, 1);
	if (!atomic_exchange(&h->armed, 0))
		return 0;
	atomic_store(&h->reached, 1);
	while (!atomic_load(&h->released))
		sched_yield();
	return 0;
}

static int fill_one(const struct cfg *c)
{
	zf_region_options o = ropts(c->mode, c->unit);
	struct hold h = { 0 };
	zf_region_stats st;
	struct rg g;

	o.frame = ZF_FRAME_2M;
	rg_open(&g, &o, FILL_FRAMES * (size_t)c->unit, NULL);
	if (g.nunits != FILL_FRAMES || g.zero_mapped < FILL_FRAMES) {
		rg_close(&g);
		return SKIP; /* no huge zero page here */
	}
	atomic_store(&h.armed, 1);
	test_point_set(TP_FILL_SEEN, hold_fill, &h);
	/* Frames 0 and 1 in order: frame 1's fault opens 2-5, the reader comes to frame 2. */
	set_phase("fill %s: frames 0-1 written", c->variant ? "drop" : "evict");
	rg_fill(&g, 0, 2, 2);
	WAIT_UNTIL(atomic_load(&h.reached), WAIT_MS);
	CHECK(atomic_load(&h.reached), "the reader did not come to frame 2 (fresh_ahead %llu)",
	      U(rst(g.r).fresh_ahead));
	if (c->variant == 0) {
		rg_fill(&g, 2, 3, 3);
		PAGEOUT(&g, 2, 3, 1);
		CHECK(unit_absent(&g, 2), "frame 2 still in memory after its pageout");
	} else {
		CHECK(!madvise(g.base + 2 * g.unit, g.unit, MADV_DONTNEED), "madvise: %s",
		      strerror(errno));
		zero_want(&g, 2 * g.unit, g.unit);
	}
	set_phase("fill %s: the reader writes frames 2-5", c->variant ? "drop" : "evict");
	atomic_store(&h.released, 1);
	/* Frames 3-5 are filled for sure; frame 2 in thread mode, by a fault of the reader's. */
	WAIT_UNTIL(atomic_load(&h.seen) >= 4 && rst(g.r).fresh_filled >= 3, WAIT_MS);
	st = rst(g.r);
	CHECK(atomic_load(&h.seen) >= 4 && st.fresh_filled >= 3,
	      "the reader saw %d frames and filled %llu (want frames 2-5 seen, 3-5 filled)",
	      atomic_load(&h.seen), U(st.fresh_filled));
	test_point_set(TP_FILL_SEEN, NULL, NULL);
	VERIFY(&g, 0, g.size, "frames filled by the reader after a stale look");
	rg_fill(&g, 0, g.nunits, 4);
	PAGEOUT(&g, 0, g.nunits, g.nunits);
	VERIFY(&g, 0, g.size, "every frame written, evicted and back");
	CHECK(rst(g.r).fault_fail == 0, "fault_fail");
	rg_close(&g);
	return PASS;
}

/* premap: a region of PREMAP_FRAMES frames, more than creation premaps. */
#define PREMAP_FRAMES 200
#define FRAME ((size_t)ZF_FRAME_2M)

struct window {
	uint8_t *frame; /* the frame the hook writes: the first of the block */
	_Atomic int armed, wrote;
};

/* TP_PREMAP_MOVED: a write to the frame just moved in, not yet write-protected. */
static int write_in_window(enum test_point point, void *arg)
{
	struct window *w = arg;

	(void)point;
	if (!atomic_exchange(&w->armed, 0))
		return 0;
	memset(w->frame + 4096, 0x5a, 8192);
	atomic_store(&w->wrote, 1);
	return 0;
}

/* Faults the region served, of every kind (its latency histogram). */
static uint64_t faults(const zf_region_stats *s)
{
	return lat_sum(s);
}

/*
 * Thread mode: another thread's fault on a later frame of a block, queued unread while
 * the service thread premaps the block, must be answered: the premap's wake of each
 * frame it maps lets the access go on (the kernel drops a fault woken before it is read).
 * The hook, at the first frame the premap moves, lets a reader thread fault on a later
 * frame of the block and waits until that fault is queued.
 */
struct stale {
	zf_region *r;
	uint8_t *addr; /* what the reader reads */
	_Atomic int armed, go, queued, done;
	uint8_t got;
};

static void *stale_reader(void *arg)
{
	struct stale *t = arg;

	while (!atomic_load(&t->go))
		sched_yield();
	t->got = *(volatile uint8_t *)t->addr;
	atomic_store(&t->done, 1);
	return NULL;
}

static int queue_stale_fault(enum test_point point, void *arg)
{
	struct stale *t = arg;
	const uint64_t deadline = now_ns() + 2000000000ull;

	(void)point;
	if (!atomic_exchange(&t->armed, 0))
		return 0;
	atomic_store(&t->go, 1);
	while (!region_test_events_unread(t->r) && now_ns() < deadline)
		sched_yield();
	atomic_store(&t->queued, region_test_events_unread(t->r));
	return 0;
}

static int premap_one(const struct cfg *c)
{
	zf_region_options o = ropts(c->mode, c->unit);
	struct window w = { 0 };
	zf_region_stats s0, s;
	zf_region *r;
	uint8_t *base;
	size_t eager, b1, b2;
	int ret;

	o.frame = ZF_FRAME_2M;
	ret = zf_region_create(NULL, PREMAP_FRAMES * FRAME, &o, &r);
	if (ret == -EPERM || ret == -ENOSYS || ret == -ENOTSUP)
		return SKIP;
	CHECK(ret == 0, "zf_region_create: %s", zf_strerror(ret));
	base = zf_region_base(r);
	s0 = rst(r);
	eager = s0.thp_zero;
	if (!eager) {
		zf_region_destroy(r);
		return SKIP; /* no huge zero page here */
	}
	CHECK(eager < PREMAP_FRAMES && eager % 16 == 0,
	      "%llu of %d frames premapped at creation: want the first blocks only", U(eager),
	      PREMAP_FRAMES);
	b1 = eager + 16; /* the first frame of the second block past them */
	b2 = eager; /* and of the first */

	set_phase("premap %s %s: a read past the premapped frames", mode_name(c->mode),
		  unit_name(c->unit));
	touch_read(base + (b1 + 3) * FRAME + 100);
	/* The read goes on once its frame is mapped; the block's others follow. */
	WAIT_UNTIL((s = rst(r)).thp_zero >= eager + 16, WAIT_MS);
	CHECK(s.thp_zero == eager + 16 && s.resident_bytes == 0,
	      "after a read of frame %llu: thp_zero %llu (want %llu), resident %llu bytes",
	      U(b1 + 3), U(s.thp_zero), U(eager + 16), U(s.resident_bytes));
	s0 = s;
	for (size_t f = b1; f < b1 + 16; f++)
		CHECK(base[f * FRAME + 777] == 0, "frame %llu of a premapped block is not zeros",
		      U(f));
	s = rst(r);
	CHECK(faults(&s) == faults(&s0) && s.thp_zero == s0.thp_zero,
	      "reads of a premapped block faulted: %llu faults, thp_zero %llu",
	      U(faults(&s) - faults(&s0)), U(s.thp_zero));
	memset(base + (b1 + 5) * FRAME, 0x33, FRAME);
	s = rst(r);
	CHECK(s.resident_bytes == FRAME, "a frame of the block written: %llu bytes resident",
	      U(s.resident_bytes));

	set_phase("premap %s %s: a write between the move and the protection", mode_name(c->mode),
		  unit_name(c->unit));
	w.frame = base + b2 * FRAME;
	atomic_store(&w.armed, 1);
	test_point_set(TP_PREMAP_MOVED, write_in_window, &w);
	base[(b2 + 7) * FRAME + 1] = 0x77; /* faults: premaps the block of frames b2.. */
	test_point_set(TP_PREMAP_MOVED, NULL, NULL);
	CHECK(atomic_load(&w.wrote), "the test point did not write");
	s = rst(r);
	CHECK(s.resident_bytes == 3 * FRAME,
	      "frames written: %llu bytes resident, want 3 frames (the one written in the "
	      "window counted)",
	      U(s.resident_bytes));
	ret = (int)zf_region_pageout(r, base, PREMAP_FRAMES * FRAME);
	CHECK(ret == 3, "pageout of everything: %d frames evicted, want 3", ret);
	CHECK(!present_pages(w.frame, FRAME), "the frame written in the window is still in memory");
	for (size_t i = 0; i < FRAME; i++) {
		const uint8_t want = i >= 4096 && i < 4096 + 8192 ? 0x5a : 0;

		if (w.frame[i] != want)
			FAILF("the frame written in the window: byte %llu is %u, want %u", U(i),
			      w.frame[i], want);
	}
	CHECK(base[(b2 + 7) * FRAME + 1] == 0x77 && base[(b1 + 5) * FRAME + 4095] == 0x33,
	      "frames written after a premap, evicted and back");
	if (c->mode == ZF_FAULT_THREAD) {
		struct stale t = { .r = r, .addr = base + (b1 + 16 + 9) * FRAME + 64 };
		pthread_t th;

		set_phase("premap %s %s: a read fault queued while its block is premapped",
			  mode_name(c->mode), unit_name(c->unit));
		CHECK(b1 + 32 <= PREMAP_FRAMES, "the region is too small for a third block");
		CHECK(!pthread_create(&th, NULL, stale_reader, &t), "pthread_create");
		atomic_store(&t.armed, 1);
		test_point_set(TP_PREMAP_MOVED, queue_stale_fault, &t);
		touch_read(base + (b1 + 16 + 2) * FRAME);
		WAIT_UNTIL(atomic_load(&t.done), WAIT_MS);
		test_point_set(TP_PREMAP_MOVED, NULL, NULL);
		CHECK(atomic_load(&t.done), "a read fault queued during its block's premap hung");
		pthread_join(th, NULL);
		CHECK(atomic_load(&t.queued),
		      "the reader's fault was not queued during the premap");
		CHECK(t.got == 0, "a never-written frame read %u", t.got);
		/* The service thread answered the queued fault: it serves another. */
		CHECK(base[(b1 + 16 + 12) * FRAME] == 0 && rst(r).resident_bytes == 3 * FRAME,
		      "after the queued fault: %llu bytes resident", U(rst(r).resident_bytes));
	}
	CHECK(rst(r).fault_fail == 0, "fault_fail");
	zf_region_destroy(r);
	return PASS;
}

int case_premap(void)
{
	static const uint32_t units[] = { KiB(4), KiB(64) };

	each_config("blocks premapped at their first fault", premap_one, units, 2, 0, 30);
	return failures ? FAIL : PASS;
}

int case_fill(void)
{
	static const uint32_t units[] = { KiB(4), KiB(64) };

	each_config("a frame evicted under the reader", fill_one, units, 2, 0, 30);
	each_config("a frame dropped under the reader", fill_one, units, 2, 1, 30);
	return failures ? FAIL : PASS;
}
