/*
 * region_test_limit.c - the region's policies: residency limit, clean copies, readahead,
 * advice.
 *
 *  limit      a region 4x its residency limit walked several times (reads and writes,
 *             one and two walkers, and per-page swap-in): resident bytes, sampled from
 *             another thread and by mincore() (the zero page is no memory: with frames,
 *             never-written frames map the huge zero page), stay within limit +
 *             reclaim_batch; idle, reclaim brings them under the limit; every byte reads
 *             back. The limit and the batch are in the region's units (frames).
 *  clean      keep_clean: re-evicting a clean unit compresses nothing (the store's
 *             zswpout does not move), a write (also one by read(2)) drops the copy and
 *             goes out; DONTNEED of a clean unit does not bring the copy back.
 *  readahead  sequential faults read ahead (swap_ra, swap_ra_hit), data right; a
 *             DONTNEED racing the readahead of the same units reads zeros (row 5).
 *  advise     ZF_ADV_HOT brings evicted units in (no fault when touched) and keeps
 *             resident ones from the next reclaim; ZF_ADV_COLD units go first.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "region/region_test.h"
#include "region_harness.h"

/* ---------------------------------------------------------------------------------- */
/* limit                                                                              */
/* ---------------------------------------------------------------------------------- */

struct lim {
	struct rg *g;
	uint64_t bound, slack;
	atomic_int stop;
	atomic_ullong max_resident, max_present, samples;
	uint32_t *ver; /* per page */
};

static void atomic_max(atomic_ullong *a, unsigned long long v)
{
	unsigned long long cur = atomic_load(a);

	while (v > cur && !atomic_compare_exchange_weak(a, &cur, v))
		;
}

static void *lim_sampler_main(void *arg)
{
	struct lim *l = arg;
	unsigned i = 0;

	while (!atomic_load(&l->stop)) {
		const zf_region_stats st = rst(l->g->r);

		atomic_max(&l->max_resident, st.resident_bytes);
		if (i++ % 8 == 0)
			atomic_max(&l->max_present, memory_pages(l->g->base, l->g->size) * PAGE);
		atomic_fetch_add(&l->samples, 1);
		sleep_us(50);
	}
	return NULL;
}

struct lim_walker {
	pthread_t thread;
	struct lim *l;
	size_t u0, u1;
	uint64_t rng;
};

static void lim_check_now(struct lim *l)
{
	const zf_region_stats st = rst(l->g->r);

	CHECK(st.resident_bytes <= l->bound, "resident_bytes %llu > limit + reclaim_batch = %llu",
	      U(st.resident_bytes), U(l->bound));
}

static void *lim_walker_main(void *arg)
{
	struct lim_walker *w = arg;
	struct lim *l = w->l;
	struct rg *g = l->g;

	/* 1: write every unit. 2: read all. 3: random pages rewritten. 4: read backwards. */
	for (size_t u = w->u0; u < w->u1; u++) {
		rg_fill(g, u, u + 1, 2);
		lim_check_now(l);
	}
	for (size_t u = w->u0; u < w->u1; u++) {
		VERIFY_UNITS(g, u, u + 1, "pass 2 (read)");
		lim_check_now(l);
	}
	for (size_t i = 0; i < 2 * (w->u1 - w->u0); i++) {
		const size_t u = w->u0 + stress_rand(&w->rng) % (w->u1 - w->u0);
		const size_t p = u * g->upages + stress_rand(&w->rng) % g->upages;

		gen_page(g->want + p * PAGE, p, ++l->ver[p], g->upages);
		memcpy(g->base + p * PAGE, g->want + p * PAGE, PAGE);
		VERIFY(g, p * PAGE, PAGE, "pass 3 (rewrite)");
		lim_check_now(l);
	}
	for (size_t u = w->u1; u-- > w->u0;) {
		VERIFY_UNITS(g, u, u + 1, "pass 4 (read backwards)");
		lim_check_now(l);
	}
	for (size_t u = w->u0; u < w->u1; u++)
		VERIFY_UNITS(g, u, u + 1, "pass 5 (read)");
	return NULL;
}

static int limit_one(const struct cfg *c)
{
	zf_region_options o = ropts(c->mode, c->unit);
	/*
	 * Smaller under a sanitizer; 2 MiB units need 16 MiB (the limit is 2 units at least).
	 * The limit and the batch are in the units the region evicts: frames, with frames.
	 */
	const size_t asked = c->unit == MiB(2)	 ? MiB(16)
			     : c->unit == KiB(4) ? MiB(4) / (SANITIZED ? 2 : 1) / TSAN_DIV
						 : MiB(16) / (SANITIZED ? 2 : 1) / TSAN_DIV;
	const size_t size = rg_size_for(&o, asked), place = rg_place_unit(&o);
	const uint64_t limit = size / 4;
	const uint64_t batch = place == KiB(4) ? KiB(64) : place == KiB(64) ? KiB(512) : 0;
	const unsigned nwalkers = c->variant ? 2 : 1;
	struct lim_walker w[2];
	zf_region_stats st;
	struct lim l;
	pthread_t s;
	struct rg g;

	o.limit = limit;
	o.reclaim_batch = batch;
	rg_open(&g, &o, asked, NULL);
	memset(&l, 0, sizeof(l));
	l.g = &g;
	l.bound = limit + (batch ? batch : MiB(2));
	/* mincore() is no snapshot and a unit is in memory a moment before it counts. */
	l.slack = l.bound - limit + nwalkers * g.unit;
	l.ver = calloc(g.npages, sizeof(*l.ver));
	CHECK(l.ver, "out of memory");
	for (size_t p = 0; p < g.npages; p++)
		l.ver[p] = 2;
	CHECK(!pthread_create(&s, NULL, lim_sampler_main, &l), "thread");
	for (unsigned i = 0; i < nwalkers; i++) {
		w[i] = (struct lim_walker){ .l = &l, .rng = i + 1 };
		w[i].u0 = g.nunits * i / nwalkers;
		w[i].u1 = g.nunits * (i + 1) / nwalkers;
		CHECK(!pthread_create(&w[i].thread, NULL, lim_walker_main, &w[i]), "thread");
	}
	for (unsigned i = 0; i < nwalkers; i++)
		pthread_join(w[i].thread, NULL);
	/* Under TSan on a loaded machine the walks can end before the sampler ran much. */
	WAIT_UNTIL(atomic_load(&l.samples) >= 10, WAIT_MS);
	atomic_store(&l.stop, 1);
	pthread_join(s, NULL);
	VERIFY(&g, 0, g.size, "everything after the walks");
	/* Idle, reclaim brings it under the limit. */
	WAIT_UNTIL((st = rst(g.r)).resident_bytes <= limit, WAIT_MS);
	CHECK(st.resident_bytes <= limit, "idle, resident_bytes %llu stays above the limit %llu",
	      U(st.resident_bytes), U(limit));
	CHECK(st.resident_max <= l.bound,
	      "resident_max %llu > limit + reclaim_batch %llu (limit %llu)", U(st.resident_max),
	      U(l.bound), U(limit));
	CHECK(atomic_load(&l.max_resident) <= l.bound,
	      "the sampler saw resident_bytes %llu > limit + reclaim_batch %llu",
	      U(atomic_load(&l.max_resident)), U(l.bound));
	CHECK(atomic_load(&l.max_present) <= l.bound + l.slack,
	      "mincore() saw %llu bytes in memory, limit + reclaim_batch is %llu",
	      U(atomic_load(&l.max_present)), U(l.bound));
	CHECK(memory_pages(g.base, g.size) * PAGE <= l.bound,
	      "idle, %llu bytes of the region in memory, limit + batch %llu",
	      U(memory_pages(g.base, g.size) * PAGE), U(l.bound));
	CHECK(st.evict_reclaim > 0 && st.swpin > 0 && st.fault_fail == 0,
	      "evict_reclaim %llu swpin %llu fault_fail %llu", U(st.evict_reclaim), U(st.swpin),
	      U(st.fault_fail));
	CHECK(atomic_load(&l.samples) >= 10, "the sampler ran %llu times",
	      U(atomic_load(&l.samples)));
	printf("     limit %s %s, %u walker(s): resident max %llu (sampled %llu, mincore %llu) of "
	       "limit %llu + batch %llu; %llu reclaimed, %llu limit waits\n",
	       mode_name(c->mode), unit_name(c->unit), nwalkers, U(st.resident_max),
	       U(atomic_load(&l.max_resident)), U(atomic_load(&l.max_present)), U(limit),
	       U(l.bound - limit), U(st.evict_reclaim), U(st.limit_waits));
	free(l.ver);
	rg_close(&g);
	return PASS;
}

/*
 * Per-page swap-in under the limit: the whole region is written and evicted, then one
 * page of every unit is read, several times over; resident bytes must stay within
 * limit + reclaim_batch here too (and the data right).
 */
static int limit_per_page(const struct cfg *c)
{
	const size_t size = MiB(16) / TSAN_DIV;
	const uint64_t limit = size / 4, batch = KiB(512);
	zf_region_options o = ropts(c->mode, c->unit);
	zf_region_stats st;
	struct rg g;

	o.limit = limit;
	o.reclaim_batch = batch;
	o.swapin = ZF_SWAPIN_PER_PAGE;
	rg_open(&g, &o, size, NULL);
	for (size_t u = 0; u < g.nunits; u++) {
		rg_fill(&g, u, u + 1, 2);
		st = rst(g.r);
		CHECK(st.resident_bytes <= limit + batch, "filling: resident_bytes %llu > %llu",
		      U(st.resident_bytes), U(limit + batch));
	}
	{
		/* Reclaim evicts too, meanwhile, but leaves limit - batch at the least. */
		const long e = zf_region_pageout(g.r, g.base, g.size);

		CHECK(e > 0, "pageout of a region filled to its limit: %ld", e);
	}
	for (unsigned pass = 0; pass < 3; pass++) {
		for (size_t u = 0; u < g.nunits; u++) {
			const size_t off = u * g.unit + (pass * 5 + u) % g.upages * PAGE;

			VERIFY(&g, off, PAGE,
			       "one page per unit, per-page swap-in, under the limit");
			st = rst(g.r);
			CHECK(st.resident_bytes <= limit + batch &&
				      present_pages(g.base, g.size) * PAGE <= limit + 2 * batch,
			      "pass %u, unit %llu: resident_bytes %llu, %llu bytes in memory; "
			      "limit "
			      "%llu + batch %llu (partly swapped-in units are never reclaimed?)",
			      pass, U(u), U(st.resident_bytes),
			      U(present_pages(g.base, g.size) * PAGE), U(limit), U(batch));
		}
	}
	VERIFY(&g, 0, g.size, "everything");
	rg_close(&g);
	return PASS;
}

int case_limit(void)
{
	static const uint32_t units[] = { KiB(4), KiB(64), MiB(2) };
	static const uint32_t u64k[] = { KiB(64) };

	/* 2 MiB units need 16 MiB: too slow under TSan. */
	each_config("limit", limit_one, units, TSAN_DIV > 1 ? 2 : 3, 0, 15);
	each_config("limit, two walkers", limit_one, u64k, 1, 1, 15);
	each_config("limit, per-page swap-in", limit_per_page, u64k, 1, 0, 10);
	return failures ? FAIL : PASS;
}

/* ---------------------------------------------------------------------------------- */
/* clean                                                                              */
/* ---------------------------------------------------------------------------------- */

static void clean_one(enum zf_fault_mode mode, uint32_t unit)
{
	zf_region_options o = ropts(mode, unit);
	const size_t n = unit == KiB(4) ? 512 : 32;
	uint64_t compressible = 0, kept, zsw, evict0;
	size_t wu, du, ru;
	zf_region_stats st;
	zf_store_stats ss;
	uint8_t buf[PAGE];
	int pfd[2];
	ssize_t got;
	struct rg g;

	set_phase("clean %s %s", mode_name(mode), unit_name(unit));
	o.keep_clean = 1;
	rg_open(&g, &o, n * unit, store_make(unit, 0));
	rg_fill(&g, 0, n, 1);
	for (size_t u = 0; u < n; u++)
		compressible += !zf_same_filled(g.want + u * unit, unit, NULL);
	wu = pick_compressible(&g, 1);
	du = pick_compressible(&g, wu + 1);
	ru = pick_compressible(&g, du + 1);
	PAGEOUT(&g, 0, n, n);
	zsw = sst(g.store).zswpout;
	CHECK(zsw == n * g.upages, "zswpout %llu after the first pageout", U(zsw));

	/*
	 * Swapped in, the copies stay (at least those of the units that are not
	 * same-filled); evicted again unwritten, the kept ones are not compressed again.
	 */
	VERIFY(&g, 0, g.size, "first read back");
	/* n major faults, each counted (after the kept copy) a moment after its wakeup. */
	WAIT_UNTIL((st = rst(g.r)).pgmajfault >= n, WAIT_MS);
	kept = st.clean_kept;
	CHECK(kept >= compressible && kept <= n,
	      "clean_kept %llu after %llu swap-ins (%llu units not same-filled)", U(kept),
	      U((uint64_t)n), U(compressible));
	ss = sst(g.store);
	CHECK(ss.stored_pages >= kept * g.upages, "the store keeps %llu pages of %llu clean units",
	      U(ss.stored_pages), U(kept));
	PAGEOUT(&g, 0, n, n); /* clean units */
	st = rst(g.r);
	ss = sst(g.store);
	CHECK(st.clean_evict == kept && ss.zswpout == zsw + (n - kept) * g.upages,
	      "re-evicting %llu units, %llu of them clean: clean_evict %llu, zswpout %llu -> %llu "
	      "(want +%llu: the clean ones are not stored again)",
	      U((uint64_t)n), U(kept), U(st.clean_evict), U(zsw), U(ss.zswpout),
	      U((n - kept) * g.upages));
	zsw = ss.zswpout;
	VERIFY(&g, 0, g.size, "read back from kept copies");

	/* One write drops a unit's copy; that unit goes out compressed, the others clean. */
	g.want[wu * unit + 100] ^= 0x33;
	g.base[wu * unit + 100] = g.want[wu * unit + 100];
	WAIT_UNTIL((st = rst(g.r)).clean_dropped >= 1, WAIT_MS);
	CHECK(st.clean_dropped >= 1 && st.wp_faults >= 1,
	      "after a write to a clean unit: clean_dropped %llu wp_faults %llu",
	      U(st.clean_dropped), U(st.wp_faults));
	evict0 = st.clean_evict;
	PAGEOUT(&g, 0, n, n);
	ss = sst(g.store);
	st = rst(g.r);
	CHECK(ss.zswpout == zsw + (n - kept + 1) * g.upages && st.clean_evict - evict0 == kept - 1,
	      "one clean unit written: zswpout +%llu (want +%llu), clean_evict +%llu (want "
	      "+%llu)",
	      U(ss.zswpout - zsw), U((n - kept + 1) * g.upages), U(st.clean_evict - evict0),
	      U(kept - 1));
	VERIFY(&g, 0, g.size, "after a write to a clean unit and re-eviction");

	/* DONTNEED of a clean unit: zeros, and the kept copy never comes back. */
	CHECK(madvise(g.base + du * unit, unit, MADV_DONTNEED) == 0, "madvise");
	zero_want(&g, du * unit, unit);
	VERIFY_UNITS(&g, du, du + 1, "a clean unit after DONTNEED");
	PAGEOUT(&g, du, du + 1, 1);
	VERIFY_UNITS(&g, du, du + 1, "a clean unit after DONTNEED, evicted and read back");

	/* A write by the kernel (read(2) into a clean page). */
	CHECK(pipe(pfd) == 0, "pipe");
	gen_page(buf, ru * g.upages, 7, g.upages);
	CHECK(write(pfd[1], buf, PAGE) == PAGE, "pipe write");
	touch_read(g.base + ru * unit);
	got = read(pfd[0], g.base + ru * unit, PAGE);
	if (mode == ZF_FAULT_THREAD)
		CHECK(got == PAGE, "thread mode: read(2) into a clean page: %lld (%s)",
		      (long long)got, got < 0 ? strerror(errno) : "short");
	else
		CHECK(got == PAGE || (got < 0 && errno == EFAULT),
		      "SIGBUS mode: read(2) into a clean page: %lld (%s)", (long long)got,
		      got < 0 ? strerror(errno) : "short");
	if (got == PAGE)
		memcpy(g.want + ru * unit, buf, PAGE);
	close(pfd[0]);
	close(pfd[1]);
	PAGEOUT(&g, 0, n, n); /* every unit was read since the last one */
	VERIFY(&g, 0, g.size, "after read(2) into a clean page and re-eviction");

	/*
	 * A page of a clean unit gone with no event: the zap of a DONTNEED that came after
	 * its REMOVE was handled, and after an eviction and a clean swap-in of the unit
	 * meanwhile (soak run 4). Read, the hole gets the zero page; written then, that is a
	 * copy-on-write, which no write-protect fault sees. The unit must not stay clean, or
	 * its next eviction keeps the old copy (the old bytes came back: 4/4 configurations
	 * without the fix in fix_resident()).
	 */
	{
		const size_t zu = pick_compressible(&g, ru + 1),
			     off = zu * unit + (g.upages > 1) * PAGE;
		int ret;

		ret = region_test_zap_page(g.r, g.base + off);
		CHECK(ret == 0, "region_test_zap_page: %s", strerror(-ret));
		memset(g.want + off, 0, PAGE);
		VERIFY(&g, off, PAGE, "a page of a clean unit gone with no event, read");
		g.want[off + 7] = 0x5a;
		g.base[off + 7] = 0x5a;
		PAGEOUT(&g, zu, zu + 1, 1);
		VERIFY_UNITS(&g, zu, zu + 1, "that page written after its zero page, evicted");
	}
	st = rst(g.r);
	CHECK(st.fault_fail == 0, "fault_fail %llu", U(st.fault_fail));
	printf("ok   clean %s %s: clean_kept %llu clean_evict %llu clean_dropped %llu\n",
	       mode_name(mode), unit_name(unit), U(st.clean_kept), U(st.clean_evict),
	       U(st.clean_dropped));
	rg_close(&g);
}

int case_clean(void)
{
	for (int m = 0; m < 2; m++) {
		clean_one(m ? ZF_FAULT_SIGBUS : ZF_FAULT_THREAD, KiB(4));
		clean_one(m ? ZF_FAULT_SIGBUS : ZF_FAULT_THREAD, KiB(64));
	}
	return PASS;
}

/* ---------------------------------------------------------------------------------- */
/* readahead                                                                          */
/* ---------------------------------------------------------------------------------- */

#define RA_UNITS 4 /* the readahead window, in units */

/* Whether every unit of [u0, u1) has all its pages in memory. */
static int units_present(const struct rg *g, size_t u0, size_t u1)
{
	for (size_t u = u0; u < u1; u++)
		if (!unit_present(g, u))
			return 0;
	return 1;
}

static void readahead_one(enum zf_fault_mode mode, uint32_t unit)
{
	zf_region_options o = ropts(mode, unit);
	const unsigned iters = SANITIZED ? 60 : 150;
	uint64_t majors, read_ahead, last_window;
	zf_region_stats st;
	struct rg g;
	size_t n;

	set_phase("readahead %s %s", mode_name(mode), unit_name(unit));
	o.readahead = RA_UNITS;
	rg_open(&g, &o, (unit == KiB(4) ? 1024 : 128) * (size_t)unit, NULL);
	n = g.nunits; /* with frames, frames are read ahead */
	CHECK(n >= 16, "readahead needs 16 units (%llu)", U(n));
	rg_fill(&g, 0, n, 2);
	PAGEOUT(&g, 0, n, n);
	/*
	 * A sequential walk. A major fault on unit u that follows the one before (the
	 * first, on unit 0, counts as such) reads the next RA_UNITS units ahead: the walk
	 * waits until swap_ra counts them (they are in memory a moment before, but a fault
	 * sees them as read ahead only then), so every (RA_UNITS + 1)-th unit is a major
	 * fault and the others are read ahead; a fault counts the units read ahead before it
	 * that it passed as hits.
	 */
	for (size_t u = 0, ra = 0; u < n; u++) {
		const int major = unit_absent(&g, u);
		const size_t end = u + 1 + RA_UNITS < n ? u + 1 + RA_UNITS : n;

		VERIFY_UNITS(&g, u, u + 1, "sequential read with readahead");
		if (!major)
			continue;
		ra += end - (u + 1);
		WAIT_UNTIL((st = rst(g.r)).swap_ra >= ra, WAIT_MS);
		CHECK(st.swap_ra == ra && units_present(&g, u + 1, end),
		      "the fault on unit %llu should read units [%llu, %llu) ahead: swap_ra %llu, "
		      "want %llu",
		      U(u), U(u + 1), U(end), U(st.swap_ra), U(ra));
	}
	majors = (n + RA_UNITS) / (RA_UNITS + 1);
	read_ahead = n - majors;
	last_window = n - 1 - (majors - 1) * (RA_UNITS + 1); /* no fault after it: no hits */
	WAIT_UNTIL((st = rst(g.r)).pgmajfault >= majors &&
			   st.swap_ra_hit >= read_ahead - last_window,
		   WAIT_MS);
	CHECK(st.pgmajfault == majors && st.swap_ra == read_ahead &&
		      st.swap_ra_hit == read_ahead - last_window,
	      "a sequential walk of %llu units: pgmajfault %llu swap_ra %llu swap_ra_hit %llu, "
	      "want %llu, %llu and %llu",
	      U(n), U(st.pgmajfault), U(st.swap_ra), U(st.swap_ra_hit), U(majors), U(read_ahead),
	      U(read_ahead - last_window));
	CHECK(st.evicted_units == 0 && st.swpin == n * g.upages,
	      "after the walk: evicted_units %llu swpin %llu (want 0 and %llu)",
	      U(st.evicted_units), U(st.swpin), U(n * g.upages));
	printf("     readahead %s %s: %llu units, pgmajfault %llu swap_ra %llu swap_ra_hit %llu\n",
	       mode_name(mode), unit_name(unit), U((uint64_t)n), U(st.pgmajfault), U(st.swap_ra),
	       U(st.swap_ra_hit));

	/* Sequential writes with readahead, then out and back. */
	PAGEOUT(&g, 0, n, n);
	for (size_t p = 0; p < g.npages; p++) {
		g.want[p * PAGE + p % PAGE] ^= 0x11;
		g.base[p * PAGE + p % PAGE] = g.want[p * PAGE + p % PAGE];
	}
	PAGEOUT(&g, 0, n, n);
	VERIFY(&g, 0, g.size, "after sequential writes with readahead");

	/*
	 * DONTNEED racing the readahead of the same units: they must read zeros. Each block
	 * of 8 units is resident when its turn comes (the last check read it whole); the
	 * sleeps only vary where in the readahead the DONTNEED lands.
	 */
	for (unsigned i = 0; i < iters; i++) {
		const size_t u = 8 * (i % (n / 8 - 1));

		PAGEOUT(&g, u, u + 8, 8);
		touch_read(g.base + u * g.unit);
		touch_read(g.base + (u + 1) * g.unit);
		if (i % 3 == 1)
			sleep_us(i % 50);
		CHECK(madvise(g.base + (u + 2) * g.unit, 4 * g.unit, MADV_DONTNEED) == 0,
		      "madvise");
		zero_want(&g, (u + 2) * g.unit, 4 * g.unit);
		if (i % 2)
			sleep_ms(1);
		VERIFY_UNITS(&g, u, u + 8, "units after DONTNEED racing their readahead");
		rg_fill(&g, u + 2, u + 6, 3 + i);
	}
	PAGEOUT(&g, 0, n, n);
	VERIFY(&g, 0, g.size, "everything at the end");
	st = rst(g.r);
	CHECK(st.fault_fail == 0, "fault_fail %llu", U(st.fault_fail));
	rg_close(&g);
}

int case_readahead(void)
{
	for (int m = 0; m < 2; m++) {
		readahead_one(m ? ZF_FAULT_SIGBUS : ZF_FAULT_THREAD, KiB(64));
		readahead_one(m ? ZF_FAULT_SIGBUS : ZF_FAULT_THREAD, KiB(4));
	}
	return PASS;
}

/* ---------------------------------------------------------------------------------- */
/* advise                                                                             */
/* ---------------------------------------------------------------------------------- */

static int advise_child(const struct cfg *c)
{
	zf_region_options o = ropts(c->mode, c->unit);
	/* 32 units (RG_FRAMES_MAX frames, with frames), of the unit the region evicts. */
	const size_t size = 32 * (size_t)c->unit, place = rg_place_unit(&o);
	const size_t n = rg_size_for(&o, size) / place;
	zf_region_stats st;
	uint64_t maj0, swpin0;
	struct rg g;

	/* HOT on evicted units brings them in: no faults when touched. */
	rg_open(&g, &o, size, NULL);
	CHECK(g.nunits == n && n >= 16, "%llu units", U(g.nunits));
	rg_fill(&g, 0, n, 2);
	PAGEOUT(&g, 0, n, n);
	swpin0 = rst(g.r).swpin;
	/* It swaps the units in before it returns, in the caller's thread. */
	CHECK(zf_region_advise(g.r, g.base + 8 * g.unit, 8 * g.unit, ZF_ADV_HOT) == 0, "advise");
	st = rst(g.r);
	CHECK(st.resident_bytes == 8 * g.unit && st.evicted_units == n - 8 &&
		      st.swpin - swpin0 == 8 * g.upages,
	      "ZF_ADV_HOT on 8 evicted units: resident_bytes %llu evicted_units %llu swpin +%llu",
	      U(st.resident_bytes), U(st.evicted_units), U(st.swpin - swpin0));
	for (size_t u = 8; u < 16; u++)
		CHECK(unit_present(&g, u), "unit %llu not in memory after ZF_ADV_HOT", U(u));
	maj0 = st.pgmajfault;
	VERIFY_UNITS(&g, 8, 16, "units brought in by ZF_ADV_HOT");
	/*
	 * Then one fault that must count, on an evicted unit: the fault thread counts in
	 * order, so once it shows, so would any fault the check above made.
	 */
	touch_read(g.base + 4 * g.unit);
	WAIT_UNTIL((st = rst(g.r)).pgmajfault > maj0, WAIT_MS);
	CHECK(st.pgmajfault == maj0 + 1,
	      "touching units brought in by ZF_ADV_HOT faulted %llu times (and an evicted one "
	      "once)",
	      U(st.pgmajfault - maj0));
	VERIFY(&g, 0, g.size, "everything");
	rg_close(&g);

	/* COLD units go first when reclaim needs room. */
	o.limit = 8 * (uint64_t)place;
	o.reclaim_batch = 2 * (uint64_t)place;
	rg_open(&g, &o, size, NULL);
	rg_fill(&g, 0, 7, 2);
	CHECK(zf_region_advise(g.r, g.base + 4 * g.unit, 2 * g.unit, ZF_ADV_COLD) == 0, "advise");
	rg_fill(&g, 7, 9, 2);
	WAIT_UNTIL((st = rst(g.r)).evict_reclaim >= 2, WAIT_MS);
	CHECK(st.evict_reclaim >= 2, "9 units resident, limit 8: evict_reclaim %llu",
	      U(st.evict_reclaim));
	CHECK(unit_absent(&g, 4) && unit_absent(&g, 5),
	      "reclaim evicted %llu units but not both ZF_ADV_COLD ones (unit 4 %s, unit 5 %s)",
	      U(st.evict_reclaim), unit_absent(&g, 4) ? "out" : "in",
	      unit_absent(&g, 5) ? "out" : "in");
	VERIFY(&g, 0, g.size, "everything");
	rg_close(&g);

	/* HOT resident units: the next reclaim passes them. */
	rg_open(&g, &o, size, NULL);
	rg_fill(&g, 0, 7, 2);
	CHECK(zf_region_advise(g.r, g.base, 2 * g.unit, ZF_ADV_HOT) == 0, "advise");
	rg_fill(&g, 7, 9, 2);
	WAIT_UNTIL((st = rst(g.r)).evict_reclaim >= 2, WAIT_MS);
	CHECK(st.evict_reclaim >= 2, "evict_reclaim %llu", U(st.evict_reclaim));
	CHECK(unit_present(&g, 0) && unit_present(&g, 1),
	      "the first reclaim (%llu units) evicted a ZF_ADV_HOT unit (unit 0 %s, unit 1 %s)",
	      U(st.evict_reclaim), unit_present(&g, 0) ? "in" : "out",
	      unit_present(&g, 1) ? "in" : "out");
	VERIFY(&g, 0, g.size, "everything");
	st = rst(g.r);
	CHECK(st.fault_fail == 0, "fault_fail %llu", U(st.fault_fail));
	rg_close(&g);
	return PASS;
}

int case_advise(void)
{
	static const uint32_t units[] = { KiB(4), KiB(64) };

	each_config("advise", advise_child, units, 2, 0, 15);
	return failures ? FAIL : PASS;
}
