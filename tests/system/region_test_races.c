/*
 * region_test_races.c - the cases where threads race the region on the same units.
 *
 *  evict_race     writers hammer the pages of a unit (whole-page rewrites and counter
 *                 increments, each checked first) while another thread pages it out
 *                 without pause: no write is ever lost (the eviction protocol, row 1/10).
 *                 The race runs until it has evicted a number of units per unit size
 *                 (fewer under a sanitizer), within a deadline.
 *  many_faulters  8 threads fault one evicted unit at once, round after round: right data,
 *                 and the unit swapped in exactly once per eviction (row 1).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "region_harness.h"

/* ---------------------------------------------------------------------------------- */
/* evict_race                                                                         */
/* ---------------------------------------------------------------------------------- */

/*
 * Each page belongs to one writer (page % nwriters): its body (all but the last 8 bytes)
 * is gen_page() at ver[page], its last 8 bytes a counter cnt[page]. A writer checks the
 * page, then rewrites the body at the next version or increments the counter in place.
 */
struct race {
	struct rg *g;
	unsigned nwriters;
	atomic_int stop;
	atomic_ullong evicted, pageouts;
	atomic_ullong writes; /* of all writers, in steps of WRITES_STEP */
	uint32_t *ver;
	uint64_t *cnt;
};

#define WRITES_STEP 256

struct race_writer {
	pthread_t thread;
	struct race *rc;
	unsigned id;
	uint64_t ops, rewrites;
};

__attribute__((noreturn)) static void race_lost(const struct race *rc, size_t p, const uint8_t *pg)
{
	uint8_t have[PAGE], buf[PAGE];
	uint64_t c;
	const char *what = "neither that version nor the one before";

	memcpy(have, pg, PAGE);
	memcpy(&c, have + PAGE - 8, 8);
	gen_page(buf, p, rc->ver[p], rc->g->upages);
	if (!memcmp(have, buf, PAGE - 8)) {
		what = "that version";
	} else if (rc->ver[p] > 1) {
		gen_page(buf, p, rc->ver[p] - 1, rc->g->upages);
		if (!memcmp(have, buf, PAGE - 8))
			what = "the version before (a lost rewrite)";
	}
	if (page_is_zero(have))
		what = "all zeros";
	FAILF("page %llu (unit %llu): its writer last wrote version %u counter %llu; the body "
	      "holds %s, the counter %llu%s",
	      U(p), U(p / rc->g->upages), rc->ver[p], U(rc->cnt[p]), what, U(c),
	      c + 1 == rc->cnt[p] ? " (a lost increment)" : "");
}

static void *race_writer_main(void *arg)
{
	struct race_writer *w = arg;
	struct race *rc = w->rc;
	struct rg *g = rc->g;
	const size_t mine = g->npages / rc->nwriters;
	uint64_t rng = 0x5eed0000u + w->id;
	uint8_t buf[PAGE];

	while (!atomic_load_explicit(&rc->stop, memory_order_relaxed)) {
		const size_t p = w->id + rc->nwriters * (stress_rand(&rng) % mine);
		uint8_t *pg = g->base + p * PAGE;
		volatile uint64_t *counter = (volatile uint64_t *)(void *)(pg + PAGE - 8);

		gen_page(buf, p, rc->ver[p], g->upages);
		if (memcmp(pg, buf, PAGE - 8) || *counter != rc->cnt[p])
			race_lost(rc, p, pg);
		if (stress_rand(&rng) % 4 == 0) {
			gen_page(buf, p, ++rc->ver[p], g->upages);
			memcpy(pg, buf, PAGE - 8);
			w->rewrites++;
		} else {
			*counter = *counter + 1;
			rc->cnt[p]++;
		}
		if (++w->ops % WRITES_STEP == 0)
			atomic_fetch_add_explicit(&rc->writes, WRITES_STEP, memory_order_relaxed);
	}
	return NULL;
}

static void *race_pageout_main(void *arg)
{
	struct race *rc = arg;
	uint64_t rng = 42;

	while (!atomic_load_explicit(&rc->stop, memory_order_relaxed)) {
		const long n = zf_region_pageout(rc->g->r, rc->g->base, rc->g->size);

		CHECK(n >= 0, "pageout: %ld", n);
		atomic_fetch_add(&rc->evicted, (unsigned long long)n);
		atomic_fetch_add(&rc->pageouts, 1);
		if (stress_rand(&rng) % 8 == 0)
			sleep_us((unsigned)(stress_rand(&rng) % 50));
	}
	return NULL;
}

static void evict_race_one(enum zf_fault_mode mode, uint32_t unit, unsigned fault_threads)
{
	/*
	 * 4k: eight one-page units; 64k: two units; 2m: one unit (with frames: as many
	 * frames). Four writers in each.
	 */
	const size_t size = unit == KiB(4) ? KiB(32) : unit == KiB(64) ? KiB(128) : MiB(2);
	const uint64_t min_writes = 100 * WRITES_STEP;
	zf_region_options o = ropts(mode, unit);
	struct race_writer w[4];
	struct race rc;
	pthread_t pt;
	zf_region_stats st;
	uint64_t ops = 0, rewrites = 0, target;
	struct rg g;

	set_phase("evict_race %s %s", mode_name(mode), unit_name(unit));
	o.fault_threads = fault_threads;
	rg_open(&g, &o, size, NULL);
	/* The race's rounds: units evicted under the writers (of the region's unit). */
	target = (g.unit == KiB(4) ? 4000 : g.unit == KiB(64) ? 1200 : 130) / (SANITIZED ? 4 : 1);
	memset(&rc, 0, sizeof(rc));
	rc.g = &g;
	rc.nwriters = 4;
	rc.ver = calloc(g.npages, sizeof(*rc.ver));
	rc.cnt = calloc(g.npages, sizeof(*rc.cnt));
	CHECK(rc.ver && rc.cnt, "out of memory");
	for (size_t p = 0; p < g.npages; p++) {
		uint8_t buf[PAGE];

		rc.ver[p] = 1;
		gen_page(buf, p, 1, g.upages);
		memset(buf + PAGE - 8, 0, 8);
		memcpy(g.base + p * PAGE, buf, PAGE);
	}
	for (unsigned i = 0; i < 4; i++) {
		w[i] = (struct race_writer){ .rc = &rc, .id = i };
		CHECK(!pthread_create(&w[i].thread, NULL, race_writer_main, &w[i]), "thread");
	}
	CHECK(!pthread_create(&pt, NULL, race_pageout_main, &rc), "thread");
	WAIT_UNTIL(atomic_load(&rc.evicted) >= target && atomic_load(&rc.writes) >= min_writes,
		   DEADLINE_MS(60000));
	atomic_store(&rc.stop, 1);
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(w[i].thread, NULL);
		ops += w[i].ops;
		rewrites += w[i].rewrites;
	}
	pthread_join(pt, NULL);

	/* Every page holds what its writer wrote last, after one more round trip too. */
	for (int round = 0; round < 2; round++) {
		for (size_t p = 0; p < g.npages; p++) {
			uint8_t buf[PAGE];
			uint64_t c;

			gen_page(buf, p, rc.ver[p], g.upages);
			memcpy(&c, g.base + p * PAGE + PAGE - 8, 8);
			if (memcmp(g.base + p * PAGE, buf, PAGE - 8) || c != rc.cnt[p])
				race_lost(&rc, p, g.base + p * PAGE);
		}
		PAGEOUT(&g, 0, g.nunits, g.nunits); /* the checks brought every unit in */
	}
	CHECK(atomic_load(&rc.evicted) >= target && ops >= min_writes,
	      "the race did not happen within %u s: %llu evictions (want %llu) in %llu pageouts, "
	      "%llu writer operations (want %llu)",
	      DEADLINE_S(60), U(atomic_load(&rc.evicted)), U(target), U(atomic_load(&rc.pageouts)),
	      U(ops), U(min_writes));
	/* The round trip above swapped every unit in: wait until that is counted. */
	WAIT_UNTIL((st = rst(g.r)).swpin >= g.npages, WAIT_MS);
	CHECK(st.fault_fail == 0 && st.swpin >= g.npages, "fault_fail %llu swpin %llu",
	      U(st.fault_fail), U(st.swpin));
	printf("ok   evict_race %s %s: %llu writes (%llu rewrites), %llu units evicted in %llu "
	       "pageouts, %llu swap-ins, wp_faults %llu fault_waits %llu\n",
	       mode_name(mode), unit_name(unit), U(ops), U(rewrites), U(atomic_load(&rc.evicted)),
	       U(atomic_load(&rc.pageouts)), U(st.swpin_units[g.order]), U(st.wp_faults),
	       U(st.fault_waits));
	free(rc.ver);
	free(rc.cnt);
	rg_close(&g);
}

int case_evict_race(void)
{
	static const uint32_t units[] = { KiB(4), KiB(64), MiB(2) };

	for (int m = 0; m < 2; m++)
		for (size_t i = 0; i < 3; i++)
			evict_race_one(m ? ZF_FAULT_SIGBUS : ZF_FAULT_THREAD, units[i], 1 + m);
	/* Several service threads in thread mode. */
	evict_race_one(ZF_FAULT_THREAD, KiB(64), 3);
	return PASS;
}

/* ---------------------------------------------------------------------------------- */
/* many_faulters                                                                      */
/* ---------------------------------------------------------------------------------- */

#define MF_THREADS 8

struct mf {
	struct rg *g;
	pthread_barrier_t start, done;
	size_t unit_idx;
	unsigned round;
	int per_page, stop;
};

struct mf_thread {
	pthread_t thread;
	struct mf *m;
	unsigned id;
};

static void *mf_main(void *arg)
{
	const struct mf_thread *t = arg;
	struct mf *m = t->m;
	struct rg *g = m->g;

	for (;;) {
		size_t page, off;

		pthread_barrier_wait(&m->start);
		if (m->stop)
			break;
		/* Even rounds: all on one page; odd rounds: each on its own page. */
		if (m->round % 2 == 0 || m->per_page)
			page = m->round % g->upages;
		else
			page = (t->id * g->upages / MF_THREADS + m->round) % g->upages;
		off = m->unit_idx * g->unit + page * PAGE;
		VERIFY(g, off, PAGE, "a page of a unit faulted by 8 threads at once");
		if (!m->per_page && m->round % 8 == 1)
			VERIFY(g, m->unit_idx * g->unit, g->unit, "the unit faulted by 8 threads");
		pthread_barrier_wait(&m->done);
	}
	return NULL;
}

static void many_faulters_one(enum zf_fault_mode mode, uint32_t unit, int per_page,
			      unsigned fault_threads)
{
	zf_region_options o = ropts(mode, unit);
	struct mf_thread t[MF_THREADS];
	zf_region_stats st;
	unsigned rounds;
	struct mf m;
	struct rg g;

	set_phase("many_faulters %s %s%s fault_threads %u", mode_name(mode), unit_name(unit),
		  per_page ? " per-page" : "", fault_threads);
	o.fault_threads = fault_threads;
	o.swapin = per_page ? ZF_SWAPIN_PER_PAGE : ZF_SWAPIN_WHOLE;
	rg_open(&g, &o, 2 * (size_t)unit, NULL);
	rounds = (g.unit == MiB(2) ? 60 : 300) / (SANITIZED ? 2 : 1); /* fewer of 2 MiB */
	rg_fill(&g, 0, 2, 2); /* version 2: no zero units */
	memset(&m, 0, sizeof(m));
	m.g = &g;
	m.per_page = per_page;
	pthread_barrier_init(&m.start, NULL, MF_THREADS + 1);
	pthread_barrier_init(&m.done, NULL, MF_THREADS + 1);
	for (unsigned i = 0; i < MF_THREADS; i++) {
		t[i] = (struct mf_thread){ .m = &m, .id = i };
		CHECK(!pthread_create(&t[i].thread, NULL, mf_main, &t[i]), "thread");
	}
	/* Both units out: from then on each round evicts one and all threads fault it. */
	PAGEOUT(&g, 0, 2, 2);
	for (unsigned r = 0; r < rounds; r++) {
		m.unit_idx = r % 2;
		m.round = r;
		if (r >= 2)
			PAGEOUT(&g, m.unit_idx, m.unit_idx + 1,
				1); /* the unit the threads faulted */
		pthread_barrier_wait(&m.start);
		pthread_barrier_wait(&m.done);
	}
	m.stop = 1;
	pthread_barrier_wait(&m.start);
	for (unsigned i = 0; i < MF_THREADS; i++)
		pthread_join(t[i].thread, NULL);
	/* One swap-in a round: wait until the last is counted (thread mode: after the wakeup). */
	WAIT_UNTIL((st = rst(g.r)).pgmajfault >= rounds &&
			   st.swpin >= (uint64_t)rounds * (per_page ? 1 : g.upages),
		   WAIT_MS);
	if (!per_page) {
		CHECK(st.swpin_units[g.order] == rounds && st.swpin == (uint64_t)rounds * g.upages,
		      "%u evictions, each faulted by 8 threads: swpin_units %llu swpin %llu (each "
		      "should come in once)",
		      rounds, U(st.swpin_units[g.order]), U(st.swpin));
	} else {
		CHECK(st.swpin == rounds && st.swpin_fallback[g.order] == rounds,
		      "%u evictions, one page of each faulted by 8 threads: swpin %llu "
		      "swpin_fallback %llu (the page should come in once)",
		      rounds, U(st.swpin), U(st.swpin_fallback[g.order]));
	}
	CHECK(st.pgmajfault >= rounds && st.pgmajfault <= (uint64_t)rounds * MF_THREADS,
	      "pgmajfault %llu for %u rounds of 8 threads", U(st.pgmajfault), rounds);
	CHECK(st.fault_fail == 0, "fault_fail %llu", U(st.fault_fail));
	printf("ok   many_faulters %s %s%s: %u rounds, pgmajfault %llu fault_waits %llu "
	       "copy_eexist %llu copy_eagain %llu\n",
	       mode_name(mode), unit_name(unit), per_page ? " per-page" : "", rounds,
	       U(st.pgmajfault), U(st.fault_waits), U(st.copy_eexist), U(st.copy_eagain));
	pthread_barrier_destroy(&m.start);
	pthread_barrier_destroy(&m.done);
	rg_close(&g);
}

int case_many_faulters(void)
{
	static const uint32_t units[] = { KiB(4), KiB(64), MiB(2) };

	for (int m = 0; m < 2; m++) {
		const enum zf_fault_mode mode = m ? ZF_FAULT_SIGBUS : ZF_FAULT_THREAD;

		for (size_t i = 0; i < 3; i++)
			many_faulters_one(mode, units[i], 0, 1);
		many_faulters_one(mode, KiB(64), 1, 1);
	}
	many_faulters_one(ZF_FAULT_THREAD, KiB(64), 0, 3);
	many_faulters_one(ZF_FAULT_THREAD, KiB(4), 0, 4);
	return PASS;
}
