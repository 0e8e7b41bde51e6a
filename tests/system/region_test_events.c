/*
 * region_test_events.c - the case "events": what the program does to the region's
 * memory behind its back, and the UFFD events that tell it.
 *
 *  dontneed  madvise(MADV_DONTNEED) of evicted, resident and partly covered units reads
 *            zeros and drops the stored copies, also when the program touches the unit
 *            right after (it is resident again: a pageout takes it, no page stays in
 *            memory uncounted);
 *  munmap    unmapping part of the region (whole units, by a mapping of the program's
 *            own over them, and single pages, by munmap()) drops that part, the rest
 *            works and a mapping the program puts in the hole is never touched, not
 *            even by zf_region_destroy();
 *  mremap    mremap() of part of the region keeps the data;
 *  race      DONTNEED/unmapping racing pageout and faults of other threads (rows 2, 3,
 *            5).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "region_harness.h"

/*
 * Units per region in the events children: 64 at 4k, 32 at 64k, 8 at 2m; of the unit the
 * region evicts, the frame with frames (fewer then: rg_size_for()). A region of
 * n * o->unit bytes has as many.
 */
static size_t events_units(const zf_region_options *o)
{
	const size_t asked = o->unit == KiB(4) ? 64 : o->unit == KiB(64) ? 32 : 8;

	return rg_size_for(o, asked * o->unit) / rg_place_unit(o);
}

/* The store must come to hold exactly pages pages (the events are handled a moment later). */
static void expect_stored(struct rg *g, uint64_t pages, const char *what)
{
	zf_store_stats ss;

	WAIT_UNTIL((ss = sst(g->store)).stored_pages == pages, WAIT_MS);
	CHECK(ss.stored_pages == pages, "%s: the store holds %llu pages, want %llu", what,
	      U(ss.stored_pages), U(pages));
}

static int events_dontneed(const struct cfg *c)
{
	const zf_region_options o = ropts(c->mode, c->unit);
	const size_t n = events_units(&o), half = n / 2;
	zf_region_stats st;
	uint64_t swpin0, zero0;
	struct rg g;
	size_t a, b;

	rg_open(&g, &o, n * c->unit, store_make(c->unit, 0));
	rg_fill(&g, 0, n, 2);
	PAGEOUT(&g, 0, half, half);
	expect_stored(&g, half * g.upages, "after paging out half");

	/* An evicted unit: its stored copy goes, it reads zeros, nothing comes from the store. */
	CHECK(madvise(g.base + 1 * g.unit, g.unit, MADV_DONTNEED) == 0, "madvise");
	zero_want(&g, 1 * g.unit, g.unit);
	expect_stored(&g, (half - 1) * g.upages, "after DONTNEED of an evicted unit");
	WAIT_UNTIL((st = rst(g.r)).ev_remove >= 1, WAIT_MS);
	CHECK(st.ev_remove >= 1 && st.evicted_units == half - 1,
	      "after DONTNEED of an evicted unit: ev_remove %llu evicted_units %llu",
	      U(st.ev_remove), U(st.evicted_units));
	swpin0 = st.swpin;
	zero0 = st.pgfault_zero;
	VERIFY_UNITS(&g, 1, 2, "an evicted unit after DONTNEED");
	/* Its fault is counted either way: as zeros (right) or as a swap-in. */
	WAIT_UNTIL((st = rst(g.r)).pgfault_zero > zero0 || st.swpin > swpin0, WAIT_MS);
	CHECK(st.swpin == swpin0 && st.pgfault_zero == zero0 + 1,
	      "reading a DONTNEED'd unit swapped %llu pages in, zero-filled %llu units",
	      U(st.swpin - swpin0), U(st.pgfault_zero - zero0));

	/* A resident unit. */
	CHECK(madvise(g.base + (half + 1) * g.unit, g.unit, MADV_DONTNEED) == 0, "madvise");
	zero_want(&g, (half + 1) * g.unit, g.unit);
	VERIFY_UNITS(&g, half + 1, half + 2, "a resident unit after DONTNEED");

	if (g.upages > 2) {
		/* One page of an evicted unit: that page zero, the others intact. */
		CHECK(madvise(g.base + 3 * g.unit + 2 * PAGE, PAGE, MADV_DONTNEED) == 0, "madvise");
		zero_want(&g, 3 * g.unit + 2 * PAGE, PAGE);
		VERIFY_UNITS(&g, 3, 4, "an evicted unit after DONTNEED of one of its pages");
		PAGEOUT(&g, 3, 4, 1);
		VERIFY_UNITS(&g, 3, 4, "that unit evicted again and read back");
		/* One page of a resident unit, then the unit evicted and read back. */
		CHECK(madvise(g.base + (half + 3) * g.unit + PAGE, PAGE, MADV_DONTNEED) == 0,
		      "madvise");
		zero_want(&g, (half + 3) * g.unit + PAGE, PAGE);
		PAGEOUT(&g, half + 3, half + 4, 1); /* a unit with one page dropped */
		VERIFY_UNITS(&g, half + 3, half + 4, "a resident unit after DONTNEED of one page");
	}

	/*
	 * A range from the middle of an evicted unit to the middle of a resident one. (Of
	 * half - 2 and half - 1, the unit read back above is in memory, if it is one of them.)
	 */
	PAGEOUT(&g, half - 2, half, units_in_memory(&g, half - 2, half));
	a = (half - 2) * g.unit + g.upages / 2 * PAGE;
	b = (half + 1) * g.unit + g.upages / 2 * PAGE;
	CHECK(madvise(g.base + a, b - a, MADV_DONTNEED) == 0, "madvise");
	zero_want(&g, a, b - a);
	VERIFY(&g, 0, g.size, "after DONTNEED across evicted and resident units");

	/* Everything still works: write, page out, read back. */
	for (size_t u = 0; u < n; u += 3)
		rg_fill(&g, u, u + 1, 3);
	PAGEOUT(&g, 0, n, n); /* the check above read every unit */
	VERIFY(&g, 0, g.size, "after writes, pageout, read back");

	/*
	 * DONTNEED then an immediate touch, many times: the touch may come before the
	 * REMOVE event is handled; either way the unit reads zeros, is resident again and
	 * a pageout takes it (no page may stay in memory that the region does not count).
	 */
	for (unsigned i = 0; i < (g.upages == 1 ? 2000u : 300u) / (SANITIZED ? 2 : 1); i++) {
		const size_t u = half + i % (n - half);
		long e;

		rg_fill(&g, u, u + 1, 5 + i);
		CHECK(madvise(g.base + u * g.unit, g.unit, MADV_DONTNEED) == 0, "madvise");
		zero_want(&g, u * g.unit, g.unit);
		VERIFY_UNITS(&g, u, u + 1, "a unit touched right after DONTNEED");
		e = zf_region_pageout(g.r, g.base + u * g.unit, g.unit);
		CHECK(e == 1,
		      "iteration %u: a unit read right after DONTNEED: pageout evicted %ld units, "
		      "%llu of its pages stay in memory",
		      i, e, U(present_pages(g.base + u * g.unit, g.unit)));
	}
	PAGEOUT(&g, 0, n, half); /* the loop evicted each of its units [half, n) */
	CHECK(present_pages(g.base, g.size) == 0,
	      "after a pageout of the whole region %llu pages stay in memory",
	      U(present_pages(g.base, g.size)));
	VERIFY(&g, 0, g.size, "after DONTNEED-and-touch");

	/* The whole region: nothing is left anywhere. */
	PAGEOUT(&g, 0, half, half);
	CHECK(madvise(g.base, g.size, MADV_DONTNEED) == 0, "madvise");
	expect_stored(&g, 0, "after DONTNEED of the whole region");
	zero_want(&g, 0, g.size);
	WAIT_UNTIL((st = rst(g.r)).evicted_units == 0 && st.resident_bytes == 0, WAIT_MS);
	CHECK(st.evicted_units == 0 && st.resident_bytes == 0,
	      "after DONTNEED of the whole region: evicted_units %llu resident_bytes %llu",
	      U(st.evicted_units), U(st.resident_bytes));
	VERIFY(&g, 0, g.size, "after DONTNEED of the whole region");
	rg_fill(&g, 0, n, 4);
	PAGEOUT(&g, 0, n, n);
	VERIFY(&g, 0, g.size, "refilled after DONTNEED of everything");
	st = rst(g.r);
	CHECK(st.fault_fail == 0, "fault_fail %llu", U(st.fault_fail));
	rg_close(&g);
	return PASS;
}

static void fill_foreign(uint8_t *p, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i += PAGE)
		fill_u64(p + i, PAGE, stress_mix(seed, i, 77) | 1);
}

static void check_foreign(const uint8_t *p, size_t len, uint64_t seed, const char *what)
{
	for (size_t i = 0; i < len; i += PAGE) {
		uint64_t v;

		if (!zf_same_filled(p + i, PAGE, &v) || v != (stress_mix(seed, i, 77) | 1))
			FAILF("%s: the program's own mapping in the hole lost its data at +%llu "
			      "(the region touched memory that is not its own any more)",
			      what, U(i));
	}
}

/*
 * Memory of the program's own at p, filled from seed: MAP_FIXED over what the caller
 * holds there (region memory, unmapped by this call, or a reservation of its own in a
 * hole), so that nothing else (the library's or ASan's mappings) can take the range in
 * between, as one did once in 50 ASan runs after a munmap.
 */
static uint8_t *map_foreign(uint8_t *p, size_t len, uint64_t seed)
{
	uint8_t *m = mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			  -1, 0);

	CHECK(m == p, "mmap in the hole: %s", strerror(errno));
	fill_foreign(m, len, seed);
	return m;
}

/* Destroys g's region: the program's own mapping p in a hole of it must stay as it was. */
static void close_keeping_foreign(struct rg *g, uint8_t *p, size_t len, uint64_t seed)
{
	unsigned char vec[1];

	rg_close(g);
	CHECK(mincore(p, PAGE, vec) == 0,
	      "zf_region_destroy() unmapped the program's own mapping in the hole (%s)",
	      strerror(errno));
	check_foreign(p, len, seed, "after zf_region_destroy()");
	munmap(p, len);
}

static int events_munmap(const struct cfg *c)
{
	const zf_region_options o = ropts(c->mode, c->unit);
	const size_t n = events_units(&o), q = n / 4;
	zf_region_stats st;
	uint8_t *hole, *foreign;
	size_t flen;
	struct rg g;
	long e;

	rg_open(&g, &o, n * c->unit, store_make(c->unit, 0));
	rg_fill(&g, 0, n, 2);
	PAGEOUT(&g, 0, 2 * q, 2 * q);

	/*
	 * Unmap units [q, 3q): q evicted, q resident. The hole is kept reserved (PROT_NONE,
	 * MAP_FIXED over the region: the same UNMAP as a munmap), for map_foreign() below.
	 */
	hole = g.base + q * g.unit;
	CHECK(mmap(hole, 2 * q * g.unit, PROT_NONE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == hole,
	      "mmap(PROT_NONE) over units [q, 3q): %s", strerror(errno));
	expect_stored(&g, q * g.upages, "after munmap of q evicted and q resident units");
	WAIT_UNTIL((st = rst(g.r)).ev_unmap >= 1, WAIT_MS);
	CHECK(st.ev_unmap >= 1 && st.evicted_units == q, "ev_unmap %llu evicted_units %llu",
	      U(st.ev_unmap), U(st.evicted_units));
	VERIFY_UNITS(&g, 0, q, "evicted units before the hole");
	VERIFY_UNITS(&g, 3 * q, n, "resident units after the hole");

	/* Pageout over the hole: the rest goes (or -EINVAL, and then each side alone). */
	e = zf_region_pageout(g.r, g.base, g.size);
	if (e < 0) {
		CHECK(e == -EINVAL || e == -ENOMEM, "pageout over a hole: %ld", e);
		e = zf_region_pageout(g.r, g.base, q * g.unit) +
		    zf_region_pageout(g.r, g.base + 3 * q * g.unit, q * g.unit);
	}
	CHECK(e == (long)(2 * q), "pageout around the hole evicted %ld units, want %llu", e,
	      U(2 * q));
	VERIFY_UNITS(&g, 0, q, "before the hole after pageout");
	VERIFY_UNITS(&g, 3 * q, n, "after the hole after pageout");

	/* The program maps memory of its own in the hole: the region must leave it alone. */
	flen = 2 * q * g.unit;
	foreign = map_foreign(hole, flen, 5);
	e = zf_region_pageout(g.r, g.base, g.size);
	CHECK(e == (long)(2 * q) || e == -EINVAL || e == -ENOMEM,
	      "pageout over the program's mapping: %ld, want the %llu units around it", e,
	      U(2 * q));
	e = zf_region_pageout(g.r, hole, 2 * q * g.unit);
	CHECK(e == 0 || e == -EINVAL || e == -ENOMEM, "pageout of the hole: %ld", e);
	zf_region_advise(g.r, hole, g.unit, ZF_ADV_HOT);
	zf_region_advise(g.r, hole, g.unit, ZF_ADV_COLD);
	CHECK(present_pages(foreign, 2 * q * g.unit) == 2 * q * g.upages,
	      "the program's mapping in the hole lost pages (the region paged it out)");
	check_foreign(foreign, 2 * q * g.unit, 5, "after pageout over it");
	VERIFY_UNITS(&g, 0, q, "before the hole");
	VERIFY_UNITS(&g, 3 * q, n, "after the hole");

	if (g.upages > 2) {
		/*
		 * One page out of an evicted unit and out of a resident one. A unit partly
		 * unmapped leaves the region: its other pages are put in place, and from then
		 * on they are the program's plain memory, which no pageout takes.
		 */
		PAGEOUT(&g, 0, 1, 1);
		CHECK(munmap(g.base + 2 * PAGE, PAGE) == 0, "munmap of a page");
		VERIFY(&g, 0, 2 * PAGE, "pages before the page unmapped in an evicted unit");
		VERIFY(&g, 3 * PAGE, g.unit - 3 * PAGE,
		       "pages after the page unmapped in an evicted unit");
		touch_read(g.base + (n - 1) * g.unit);
		CHECK(munmap(g.base + (n - 1) * g.unit + PAGE, PAGE) == 0, "munmap of a page");
		PAGEOUT(&g, n - 1, n, 0);
		VERIFY(&g, (n - 1) * g.unit, PAGE, "first page of a unit with one page unmapped");
		VERIFY(&g, (n - 1) * g.unit + 2 * PAGE, g.unit - 2 * PAGE,
		       "the rest of a unit with one page unmapped");
		PAGEOUT(&g, 0, 1, 0);
		VERIFY(&g, 3 * PAGE, g.unit - 3 * PAGE, "a unit with a hole, after a pageout");
	}
	st = rst(g.r);
	CHECK(st.fault_fail == 0, "fault_fail %llu", U(st.fault_fail));

	/* Destroy: the region's pages leave the store, the program's mapping stays. */
	close_keeping_foreign(&g, foreign, flen, 5);
	return PASS;
}

static int events_mremap(const struct cfg *c)
{
	const zf_region_options o = ropts(c->mode, c->unit);
	const size_t n = events_units(&o), half = n / 2;
	size_t len, first;
	uint8_t *resv, *dst, *moved;
	zf_region_stats st;
	struct rg g;

	rg_open(&g, &o, n * c->unit, store_make(c->unit, 0));
	rg_fill(&g, 0, n, 2);
	PAGEOUT(&g, 0, half, half);

	/* Move units [half - 2, half + 2): two evicted, two resident. */
	first = half - 2;
	len = 4 * g.unit;
	resv = mmap(NULL, len + g.unit, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
		    0);
	CHECK(resv != MAP_FAILED, "mmap: %s", strerror(errno));
	dst = (uint8_t *)(((uintptr_t)resv + g.unit - 1) & ~(uintptr_t)(g.unit - 1));
	moved = mremap(g.base + first * g.unit, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
	CHECK(moved == dst, "mremap: %s", strerror(errno));
	WAIT_UNTIL((st = rst(g.r)).ev_remap >= 1, WAIT_MS);
	CHECK(st.ev_remap >= 1, "ev_remap %llu after mremap", U(st.ev_remap));

	/* The data is at the new address, evicted units included. */
	for (size_t i = 0; i < 4; i++) {
		if (memcmp(dst + i * g.unit, g.want + (first + i) * g.unit, g.unit))
			FAILF("after mremap, unit %llu (%s before the move) has other bytes at its "
			      "new address (%s)",
			      U(first + i), first + i < half ? "evicted" : "resident",
			      page_is_zero(dst + i * g.unit) ? "its first page reads zeros" : "");
	}
	/* Writable there, and the rest of the region works. */
	for (size_t i = 0; i < len; i += PAGE)
		dst[i] ^= 1;
	for (size_t i = 0; i < len; i += PAGE)
		CHECK(dst[i] == (g.want[first * g.unit + i] ^ 1), "moved memory not writable");
	VERIFY_UNITS(&g, 0, first, "units before the moved range");
	VERIFY_UNITS(&g, first + 4, n, "units after the moved range");
	PAGEOUT(&g, 0, first, first); /* all read just above */
	PAGEOUT(&g, first + 4, n, n - first - 4);
	VERIFY_UNITS(&g, 0, first, "units before the moved range, evicted again");
	VERIFY_UNITS(&g, first + 4, n, "units after the moved range, evicted again");
	for (size_t i = 0; i < len; i += PAGE)
		CHECK(dst[i] == (g.want[first * g.unit + i] ^ 1), "moved memory changed");
	st = rst(g.r);
	CHECK(st.fault_fail == 0, "fault_fail %llu", U(st.fault_fail));
	munmap(resv, len + g.unit);
	rg_close(&g);
	return PASS;
}

/*
 * DONTNEED and munmap racing pageout: thread A pages the whole region out without pause,
 * thread C reads the units [n/2, n - 2) (their faults meet A's evictions and the events),
 * the main thread owns [0, n/2): writes, DONTNEEDs whole units and single pages, and
 * checks the unit after each step; halfway it unmaps the last two units and maps memory
 * of its own there. It takes a number of steps (fewer under a sanitizer, and of frames),
 * and more until A and C have run too.
 */
struct ev_race {
	struct rg *g;
	atomic_int stop;
	atomic_ullong evicted, reads;
	int allow_einval;
};

static void *ev_pageout_main(void *arg)
{
	struct ev_race *er = arg;

	while (!atomic_load(&er->stop)) {
		const long n = zf_region_pageout(er->g->r, er->g->base, er->g->size);

		CHECK(n >= 0 || n == -EINVAL || n == -ENOMEM, "pageout: %ld", n);
		if (n > 0)
			atomic_fetch_add(&er->evicted, (unsigned long long)n);
	}
	return NULL;
}

static void *ev_reader_main(void *arg)
{
	struct ev_race *er = arg;
	struct rg *g = er->g;
	const size_t n = g->nunits;
	uint64_t rng = 99;

	while (!atomic_load(&er->stop)) {
		const size_t u = n / 2 + stress_rand(&rng) % (n / 2 - 2);

		VERIFY_UNITS(g, u, u + 1, "a unit of the reader, racing DONTNEED and pageout");
		atomic_fetch_add(&er->reads, 1);
	}
	return NULL;
}

static int events_race(const struct cfg *c)
{
	const zf_region_options o = ropts(c->mode, c->unit);
	const size_t n = events_units(&o), mine = n / 2;
	/* A step writes, drops and checks a unit: a quarter as many of frames (2 MiB units
	 * keep theirs, as before). */
	const uint64_t steps = (SANITIZED ? 800 : 2000) / (rg_frame(&o) ? 4 : 1);
	const uint64_t deadline = now_ns() + DEADLINE_MS(60000) * 1000000ull;
	uint8_t *tail = NULL;
	uint32_t *ver = calloc(mine, sizeof(*ver));
	uint64_t rng = 7, ops = 0, drops = 0;
	pthread_t a, r;
	zf_region_stats st;
	struct ev_race er;
	struct rg g;

	CHECK(ver, "out of memory");
	rg_open(&g, &o, n * c->unit, store_make(c->unit, 0));
	rg_fill(&g, 0, n, 2);
	for (size_t u = 0; u < mine; u++)
		ver[u] = 2;
	memset(&er, 0, sizeof(er));
	er.g = &g;
	CHECK(!pthread_create(&a, NULL, ev_pageout_main, &er), "thread");
	CHECK(!pthread_create(&r, NULL, ev_reader_main, &er), "thread");
	while (ops < steps || atomic_load(&er.evicted) < 10 || atomic_load(&er.reads) < 10) {
		const size_t u = stress_rand(&rng) % mine;
		const unsigned op = (unsigned)(stress_rand(&rng) % 8);
		const size_t pg = stress_rand(&rng) % g.upages;

		if (op <= 2) {
			rg_fill(&g, u, u + 1, ++ver[u] + 2);
		} else if (op == 3) {
			CHECK(madvise(g.base + u * g.unit, g.unit, MADV_DONTNEED) == 0, "madvise");
			zero_want(&g, u * g.unit, g.unit);
			drops++;
		} else if (op == 4) {
			CHECK(madvise(g.base + u * g.unit + pg * PAGE, PAGE, MADV_DONTNEED) == 0,
			      "madvise");
			zero_want(&g, u * g.unit + pg * PAGE, PAGE);
			drops++;
		} else if (op == 5) {
			gen_page(g.want + u * g.unit + pg * PAGE, u * g.upages + pg, ++ver[u] + 2,
				 g.upages);
			memcpy(g.base + u * g.unit + pg * PAGE, g.want + u * g.unit + pg * PAGE,
			       PAGE);
		}
		VERIFY_UNITS(&g, u, u + 1, "a unit of the main thread, racing pageout");
		ops++;
		CHECK(now_ns() < deadline,
		      "the race did not happen within %u s: %llu steps, %llu units evicted, %llu "
		      "reads",
		      DEADLINE_S(60), U(ops), U(atomic_load(&er.evicted)),
		      U(atomic_load(&er.reads)));
		if (!tail && ops == steps / 2) {
			/* Unmap the last two units while A pages them out: map our own there. */
			tail = map_foreign(g.base + (n - 2) * g.unit, 2 * g.unit, 9);
		}
	}
	atomic_store(&er.stop, 1);
	pthread_join(a, NULL);
	pthread_join(r, NULL);
	CHECK(tail, "the munmap step did not run");
	check_foreign(tail, 2 * g.unit, 9, "after racing pageouts");
	VERIFY_UNITS(&g, 0, n - 2, "every unit at the end");
	/* The DONTNEEDs and the munmap: their events are counted when handled. */
	WAIT_UNTIL((st = rst(g.r)).ev_remove > 0 && st.ev_unmap > 0, WAIT_MS);
	CHECK(drops > 0, "no DONTNEED in %llu steps", U(ops));
	CHECK(st.fault_fail == 0 && st.ev_remove > 0 && st.ev_unmap > 0,
	      "fault_fail %llu ev_remove %llu ev_unmap %llu", U(st.fault_fail), U(st.ev_remove),
	      U(st.ev_unmap));
	printf("     events race %s %s: %llu steps (%llu DONTNEEDs), %llu units evicted, %llu "
	       "reads, copy_eagain %llu, reject %llu\n",
	       mode_name(c->mode), unit_name(c->unit), U(ops), U(drops),
	       U(atomic_load(&er.evicted)), U(atomic_load(&er.reads)), U(st.copy_eagain),
	       U(st.reject));
	close_keeping_foreign(&g, tail, 2 * g.unit, 9);
	free(ver);
	return PASS;
}

int case_events(void)
{
	static const uint32_t all[] = { KiB(4), KiB(64), MiB(2) };
	static const uint32_t small[] = { KiB(4), KiB(64) };

	each_config("events dontneed", events_dontneed, all, 3, 0, 15);
	each_config("events munmap", events_munmap, all, 3, 0, 15);
	each_config("events race", events_race, small, 2, 0, 12);
	each_config("events mremap", events_mremap, all, 3, 0, 10);
	return failures ? FAIL : PASS;
}
