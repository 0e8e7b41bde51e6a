/*
 * test_region_order.c - the order of the program's layout changes (src/region/
 * region_order.c), fed event streams as a service thread reads them: each event's place
 * (qseq) against the places of the others. No userfaultfd needed: the region tests
 * (region_remap_late, region_remap_early) make the same streams happen in the kernel.
 *
 * Addresses: the region at R, a unit of memory L long; "home" ranges in the region, "away"
 * ranges outside it. Every event fed is queued, as the service thread does, so that
 * region_follow() can walk the queue.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "../../src/region/region_internal.h"

#define R ((uintptr_t)0x10000000)
#define L ((uintptr_t)0x10000)
#define AWAY ((uintptr_t)0x40000000)

static zf_region *order_new(void)
{
	zf_region *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	r->base = (uint8_t *)R;
	r->size = 64 * L;
	assert_int_equal(region_order_init(r), 0);
	return r;
}

static void order_free(zf_region *r)
{
	region_order_fini(r);
	free(r);
}

/* Event m, read now: its place, and it joins the queue. */
static uint64_t read_event(zf_region *r, const struct uffd_msg *m)
{
	assert_true(r->nqueue < RG_QUEUE);
	r->qseq[r->nqueue] = region_event_seq(r, m);
	r->queue[r->nqueue] = *m;
	return r->qseq[r->nqueue++];
}

static uint64_t remap(zf_region *r, uintptr_t from, uintptr_t to, uintptr_t len)
{
	struct uffd_msg m = { .event = UFFD_EVENT_REMAP };

	m.arg.remap.from = from;
	m.arg.remap.to = to;
	m.arg.remap.len = len;
	return read_event(r, &m);
}

static uint64_t unmap(zf_region *r, uintptr_t a, uintptr_t b)
{
	struct uffd_msg m = { .event = UFFD_EVENT_UNMAP };

	m.arg.remove.start = a;
	m.arg.remove.end = b;
	return read_event(r, &m);
}

static uint64_t drop(zf_region *r, uintptr_t a, uintptr_t b)
{
	struct uffd_msg m = { .event = UFFD_EVENT_REMOVE };

	m.arg.remove.start = a;
	m.arg.remove.end = b;
	return read_event(r, &m);
}

/* Where the page at addr is after the events queued behind position i. */
static uintptr_t follow(zf_region *r, int i, uintptr_t addr)
{
	int dropped;

	return region_follow(r, i, addr, &dropped);
}

/* A whole move: its REMAP, then the UNMAP of the range it left; the REMAP's place. */
static uint64_t move(zf_region *r, uintptr_t from, uintptr_t to, uintptr_t len)
{
	const uint64_t s = remap(r, from, to, len);

	assert_int_equal(unmap(r, from, from + len), s);
	return s;
}

/* Events read in the order of their changes keep it. */
static void in_order(void **state)
{
	zf_region *r = order_new();
	const uint64_t a = move(r, R + 1 * L, AWAY, L);
	const uint64_t b = drop(r, R + 2 * L, R + 3 * L);
	const uint64_t c = move(r, AWAY, R + 1 * L, L);
	const uint64_t d = unmap(r, R + 4 * L, R + 5 * L);

	(void)state;
	assert_true(a < b && b < c && c < d);
	order_free(r);
}

/*
 * Late UNMAP: B moves back from AWAY; before its UNMAP of AWAY is read, A moves region
 * memory to AWAY. The UNMAP takes B's place, before A's REMAP.
 */
static void late_unmap(void **state)
{
	zf_region *r = order_new();
	uint64_t b, a;

	(void)state;
	move(r, R + 1 * L, AWAY, L);
	b = remap(r, AWAY, R + 1 * L, L);
	a = remap(r, R + 5 * L, AWAY, L);
	assert_true(b < a);
	assert_int_equal(unmap(r, AWAY, AWAY + L), b);
	assert_int_equal(unmap(r, R + 5 * L, R + 6 * L), a);
	/* A shrinking move: the part it cut off takes its place too. */
	b = remap(r, R + 8 * L, AWAY + 8 * L, L);
	a = remap(r, R + 20 * L, R + 9 * L, L);
	assert_int_equal(unmap(r, R + 9 * L, R + 10 * L), b);
	order_free(r);
}

/*
 * Early REMAP (the soak test's failure): B's memory is at AWAY; B moves it home and is
 * preempted before its REMAP is sent; A moves region memory to AWAY, which B left, and
 * A's REMAP is read first. B's REMAP and its UNMAP go before A's; A's memory, at AWAY
 * now, stays ours: a later move of it comes after A, and is early to the next thread's.
 */
static void early_remap(void **state)
{
	zf_region *r = order_new();
	const uint64_t away = move(r, R + 1 * L, AWAY, L);
	uint64_t a, b, d, on;

	(void)state;
	a = remap(r, R + 5 * L, AWAY, L); /* lands on B's memory: B's event is to come */
	b = remap(r, AWAY, R + 1 * L, L);
	assert_true(away < b && b < a);
	assert_int_equal(unmap(r, AWAY, AWAY + L), b); /* B's UNMAP of AWAY, late */
	assert_int_equal(unmap(r, R + 5 * L, R + 6 * L), a);
	/* A's memory is ours at AWAY: another early move of it is found too. */
	d = remap(r, R + 10 * L, AWAY, L);
	on = remap(r, AWAY, AWAY + 8 * L, L);
	assert_true(a < on && on < d);
	order_free(r);
}

/* Early UNMAP: the same with B's munmap() of its memory at AWAY. */
static void early_unmap(void **state)
{
	zf_region *r = order_new();
	const uint64_t away = move(r, R + 1 * L, AWAY, 2 * L);
	uint64_t a, b;

	(void)state;
	a = remap(r, R + 5 * L, AWAY + L, L); /* on the second half of B's memory */
	b = unmap(r, AWAY, AWAY + 2 * L);
	assert_true(away < b && b < a);
	/* B's unmap took its first half, not A's memory: A's unmap comes after A. */
	assert_true(unmap(r, AWAY + L, AWAY + 2 * L) > a);
	order_free(r);
}

/*
 * A hand-off is not early: A moves region memory onto B's memory with MREMAP_FIXED (the
 * kernel unmaps B's first: an UNMAP read before A's REMAP), then B moves it on.
 */
static void handoff(void **state)
{
	zf_region *r = order_new();
	uint64_t u, a, b;

	(void)state;
	move(r, R + 1 * L, AWAY, L);
	u = unmap(r, AWAY, AWAY + L);
	a = remap(r, R + 5 * L, AWAY, L);
	assert_true(u < a);
	assert_int_equal(unmap(r, R + 5 * L, R + 6 * L), a);
	b = move(r, AWAY, AWAY + 4 * L, L);
	assert_true(b > a);
	/* Onto the region itself after its memory there was unmapped: not early either. */
	u = unmap(r, R + 30 * L, R + 32 * L);
	a = remap(r, R + 40 * L, R + 30 * L, 2 * L);
	assert_true(u < a);
	assert_true(unmap(r, R + 30 * L, R + 32 * L) > a);
	order_free(r);
}

/* Several early events for one REMAP keep their own order, all before it. */
static void early_chain(void **state)
{
	zf_region *r = order_new();
	uint64_t a, b1, b2;

	(void)state;
	move(r, R + 1 * L, AWAY, 3 * L);
	a = remap(r, R + 5 * L, AWAY, 3 * L);
	b1 = remap(r, AWAY, R + 1 * L, L);
	b2 = unmap(r, AWAY + 2 * L, AWAY + 3 * L);
	assert_true(b1 < b2 && b2 < a);
	order_free(r);
}

/*
 * A page follows the changes in the order they happened, not the order read (order_sim
 * found this): A moves region memory away (its REMAP not handled yet: a unit in
 * transition holds it), back home, and away again, to AWAY2, which B left: B moved its
 * memory at AWAY2 home and was preempted before its REMAP was sent. B's REMAP, early,
 * is queued behind A's second move and goes before it: A's page is at AWAY2, not taken
 * home with B's memory.
 */
static void follow_in_place_order(void **state)
{
	zf_region *r = order_new();
	const uintptr_t away2 = AWAY + 16 * L;
	int dropped;

	(void)state;
	move(r, R + 1 * L, AWAY, L); /* queue position 0, 1 */
	move(r, AWAY, R + 1 * L, L);
	move(r, R + 5 * L, away2, L); /* B's memory */
	remap(r, R + 1 * L, away2, L); /* A, onto B's memory: B's event is to come */
	unmap(r, R + 1 * L, R + 2 * L);
	remap(r, away2, R + 5 * L, L); /* B's, early */
	unmap(r, away2, away2 + L);
	assert_int_equal(follow(r, 0, AWAY), away2);
	assert_int_equal(follow(r, 0, AWAY + L / 2), away2 + L / 2);
	/* From the last handled (none): A's region page too. */
	assert_int_equal(region_follow(r, -1, R + 1 * L, &dropped), away2);
	/* B's memory, from its own move away: home. */
	assert_int_equal(follow(r, 4, away2), R + 5 * L);
	order_free(r);
}

/*
 * A late UNMAP is its own REMAP's even when another REMAP read since left the range just
 * below it (top-down mmap() hands out neighbours): the soak test's zeros at the away
 * address. B's memory is at AWAY, C's just below; B moves home, A moves region memory to
 * AWAY, C moves home, and only then is B's UNMAP of AWAY read. It starts where C's
 * source ends, as the part a shrinking move cuts off would, but it is B's: before A's
 * move, which it must not unmap.
 */
static void late_unmap_beside(void **state)
{
	zf_region *r = order_new();
	uint64_t a, b;
	int pos_a;

	(void)state;
	move(r, R + 1 * L, AWAY, L); /* B */
	move(r, R + 5 * L, AWAY - L, L); /* C */
	b = remap(r, AWAY, R + 1 * L, L);
	pos_a = (int)r->nqueue;
	a = remap(r, R + 10 * L, AWAY, L);
	remap(r, AWAY - L, R + 5 * L, L);
	assert_int_equal(unmap(r, AWAY, AWAY + L), b);
	assert_true(b < a);
	assert_int_equal(follow(r, pos_a, AWAY), AWAY);
	/* C's own UNMAP, and A's, still find their REMAPs. */
	unmap(r, AWAY - L, AWAY);
	assert_int_equal(unmap(r, R + 10 * L, R + 11 * L), a);
	order_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(in_order),
		cmocka_unit_test(late_unmap),
		cmocka_unit_test(early_remap),
		cmocka_unit_test(early_unmap),
		cmocka_unit_test(handoff),
		cmocka_unit_test(early_chain),
		cmocka_unit_test(follow_in_place_order),
		cmocka_unit_test(late_unmap_beside),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
