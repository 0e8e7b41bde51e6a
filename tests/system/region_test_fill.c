/*
 * region_test_fill.c - the case "fill" (frames only): the region's reader writes the fresh
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
 * Then every frame is written, evicted and read back. Both modes, 4 KiB and 64 KiB store
 * units; skipped where the kernel maps no huge zero page.
 */
#include <sched.h>
#include <stdatomic.h>

#include "common/test_point.h"
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

int case_fill(void)
{
	static const uint32_t units[] = { KiB(4), KiB(64) };

	each_config("a frame evicted under the reader", fill_one, units, 2, 0, 30);
	each_config("a frame dropped under the reader", fill_one, units, 2, 1, 30);
	return failures ? FAIL : PASS;
}
