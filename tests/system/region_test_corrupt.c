/*
 * region_test_corrupt.c - the store fails the region: it holds a bad unit, or it is full.
 *
 *  corrupt  a stored unit with a bad checksum (store_corrupt) kills the thread that
 *           touches it with SIGBUS within 2 s, never a zero page, in both modes, with
 *           several threads on it, in per-page mode, after readahead met it; with the
 *           program's own SIGBUS handler (thread mode) every touch fails again,
 *           fault_fail counts, and several threads on one bad page each get their
 *           SIGBUS and nobody aborts (row 7). With frames a frame is stored as units of
 *           the store's: one of them goes bad, and a touch anywhere in the frame fails.
 *  full     a pageout into a store that fills up on the way (reject policy, folios in
 *           flight), or that refuses incompressible units (a folio refused when its put
 *           finishes is stored unit by unit): refused units stay resident, writable and
 *           intact.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "region_harness.h"
/*
 * The one header from src/: store_corrupt() is a hook of the test build (zfolio_testlib,
 * ZF_TEST_HOOKS), not of the public API. Everything else here is include/zfolio.h.
 */
#include "store/store.h"

/* ---------------------------------------------------------------------------------- */
/* corrupt                                                                            */
/* ---------------------------------------------------------------------------------- */

static sigjmp_buf c_jmp;
static volatile sig_atomic_t c_sigbus;

static void c_on_sigbus(int sig)
{
	(void)sig;
	c_sigbus++;
	siglongjmp(c_jmp, 1);
}

/* Variant 5: threads that catch their own SIGBUS. */
static __thread sigjmp_buf c_tjmp;
static atomic_int c_tsigbus;

static void c_on_sigbus_thread(int sig)
{
	(void)sig;
	atomic_fetch_add(&c_tsigbus, 1);
	siglongjmp(c_tjmp, 1);
}

struct c_racer {
	pthread_t thread;
	pthread_barrier_t *barrier;
	const uint8_t *page;
	int got_sigbus;
};

static void *c_racer_main(void *arg)
{
	struct c_racer *t = arg;

	pthread_barrier_wait(t->barrier);
	if (!sigsetjmp(c_tjmp, 1)) {
		touch_read(t->page);
		return NULL;
	}
	t->got_sigbus = 1;
	return NULL;
}

static void *c_toucher_main(void *arg)
{
	const uint8_t *p = arg;

	touch_read(p);
	return NULL;
}

/*
 * The page whose stored unit store_corrupt() spoils in region unit u: one the store
 * compresses, not same-filled (the store keeps no data for those), from the middle of u.
 * With frames a region unit is stored as several units of the store's (g->sunit).
 */
static uint64_t stored_page(const struct rg *g, size_t u)
{
	const size_t parts = g->unit / g->sunit;

	for (size_t i = 0; i < parts; i++) {
		const size_t off = u * g->unit + (parts / 2 + i) % parts * g->sunit;

		if (!zf_same_filled(g->want + off, g->sunit, NULL))
			return off / PAGE + g->sunit / PAGE / 2;
	}
	FAILF("unit %llu has no stored unit that is not same-filled", U(u));
}

/*
 * variant 0: touch it; 1: four threads touch it; 2: per-page swap-in; 3: readahead met it
 * first; 4 (thread mode): a SIGBUS handler of the program's own sees each touch fail,
 * fault_fail counts, the other units still work.
 */
static int corrupt_child(const struct cfg *c)
{
	zf_region_options o = ropts(c->mode, c->unit);
	zf_store *store = store_make(c->unit, 0);
	struct rg g;
	size_t n, bad;
	int ret;

	if (c->variant == 2)
		o.swapin = ZF_SWAPIN_PER_PAGE;
	if (c->variant == 3)
		o.readahead = 4;
	rg_open(&g, &o, (c->unit == MiB(2) ? 6 : 16) * (size_t)c->unit, store);
	n = g.nunits;
	rg_fill(&g, 0, n, 1);
	PAGEOUT(&g, 0, n, n);
	bad = pick_compressible(&g, c->variant == 3 ? 6 : 2);
	ret = store_corrupt(store, OWNER, stored_page(&g, bad));
	CHECK(ret == 0, "store_corrupt(unit %llu): %s", U(bad), zf_strerror(ret));
	VERIFY_UNITS(&g, bad - 1, bad, "the unit before the corrupt one");
	if (c->variant == 3) {
		zf_region_stats st;

		/*
		 * Readahead meets the bad unit: major faults on bad - 2, then bad - 1 (evicted
		 * again) make the second one sequential, and the units read ahead after it
		 * start at bad. Reading it fails there: fault_fail counts that, and the unit
		 * stays evicted for the touch below.
		 */
		PAGEOUT(&g, bad - 2, bad, 1);
		VERIFY_UNITS(&g, bad - 2, bad, "the units before the corrupt one (readahead)");
		WAIT_UNTIL((st = rst(g.r)).fault_fail >= 1, WAIT_MS);
		CHECK(st.fault_fail == 1,
		      "readahead from unit %llu: fault_fail %llu (the corrupt unit is read ahead "
		      "first and fails)",
		      U(bad), U(st.fault_fail));
	}
	if (c->variant == 5) {
		/*
		 * Four threads fault one page of a corrupt unit at once, for several units:
		 * each gets a SIGBUS (its own handler catches it), nobody aborts.
		 */
		pthread_barrier_t barrier;
		int rounds = 0;

		set_sig(SIGBUS, c_on_sigbus_thread);
		pthread_barrier_init(&barrier, NULL, 4);
		for (size_t u = bad; u < n && rounds < 4; u = pick_compressible(&g, u + 1)) {
			struct c_racer t[4];

			if (u != bad) {
				ret = store_corrupt(store, OWNER, stored_page(&g, u));
				CHECK(ret == 0, "store_corrupt(unit %llu): %s", U(u),
				      zf_strerror(ret));
			}
			for (int i = 0; i < 4; i++) {
				t[i] = (struct c_racer){ .barrier = &barrier,
							 .page = g.base + u * g.unit };
				CHECK(!pthread_create(&t[i].thread, NULL, c_racer_main, &t[i]),
				      "thread");
			}
			for (int i = 0; i < 4; i++) {
				pthread_join(t[i].thread, NULL);
				CHECK(t[i].got_sigbus, "unit %llu: thread %d read a corrupt unit",
				      U(u), i);
			}
			rounds++;
			if (u + 1 >= n)
				break;
		}
		pthread_barrier_destroy(&barrier);
		CHECK(rounds >= 2, "only %d corrupt units", rounds);
		set_sig(SIGBUS, SIG_DFL);
		VERIFY_UNITS(&g, 0, bad, "the units before the corrupt ones");
		return PASS;
	}
	if (c->variant == 4) {
		zf_region_stats st;

		set_sig(SIGBUS, c_on_sigbus);
		for (int i = 0; i < 3; i++) {
			if (!sigsetjmp(c_jmp, 1)) {
				touch_read(g.base + bad * g.unit + PAGE * ((size_t)i % g.upages));
				FAILF("touch %d of the corrupt unit returned (its page %s)", i,
				      page_is_zero(g.base + bad * g.unit) ? "reads zeros"
									  : "has data");
			}
		}
		CHECK(c_sigbus == 3, "%d SIGBUS for 3 touches", (int)c_sigbus);
		/* A failed fault is counted before its SIGBUS. */
		st = rst(g.r);
		/* Thread mode poisons the page: touching it again is the kernel's SIGBUS. */
		CHECK(st.fault_fail >= (g.upages >= 3 ? 3 : 1),
		      "fault_fail %llu after failed faults on 3 pages", U(st.fault_fail));
		set_sig(SIGBUS, SIG_DFL);
		VERIFY_UNITS(&g, bad + 1, n, "the units after the corrupt one");
		PAGEOUT(&g, 0, bad, 1); /* bad - 1: the others were never read back */
		VERIFY_UNITS(&g, 0, bad, "the units before the corrupt one, evicted again");
		return PASS; /* no destroy: the bad unit may stay as it is */
	}
	child_mark();
	/* Failing closed is immediate: a unit decompresses in milliseconds. */
	set_phase("corrupt unit touched: no SIGBUS within %u s", DEADLINE_S(2));
	alarm(DEADLINE_S(2));
	if (c->variant == 1) {
		pthread_t t[4];

		for (int i = 0; i < 4; i++)
			CHECK(!pthread_create(&t[i], NULL, c_toucher_main,
					      g.base + bad * g.unit + (size_t)i % g.upages * PAGE),
			      "thread");
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
	} else {
		touch_read(g.base + bad * g.unit + g.upages / 2 * PAGE);
	}
	fprintf(stderr, "the corrupt unit was read without SIGBUS; its first page %s\n",
		page_is_zero(g.base + bad * g.unit) ? "reads zeros" : "has data");
	return 3;
}

int case_corrupt(void)
{
	static const char *const names[] = { "touch",
					     "4 threads touch",
					     "per-page touch",
					     "touch after readahead met it",
					     "touches with the program's SIGBUS handler",
					     "4 threads touch with their own SIGBUS handler" };
	static const uint32_t units[] = { KiB(4), KiB(64), MiB(2) };

	for (int v = 0; v < 6; v++) {
		for (int m = 0; m < 2; m++) {
			for (size_t i = 0; i < 3; i++) {
				const struct cfg c = { m ? ZF_FAULT_SIGBUS : ZF_FAULT_THREAD,
						       units[i], v };
				char what[120];

				if ((v == 2 && units[i] == KiB(4)) || (v >= 4 && m) ||
				    (v >= 1 && units[i] == MiB(2)))
					continue;
				snprintf(what, sizeof(what), "corrupt unit, %s (%s %s)", names[v],
					 mode_name(c.mode), unit_name(c.unit));
				if (!selected(what))
					continue;
				set_phase("%s", what);
				if (v >= 4)
					expect_ok(run_child(corrupt_child, &c, 8), what);
				else
					expect_death_after_mark(corrupt_child, &c, 8, SIGBUS, what);
			}
		}
	}
	return failures ? FAIL : PASS;
}

/* ---------------------------------------------------------------------------------- */
/* full                                                                               */
/* ---------------------------------------------------------------------------------- */

/*
 * A pageout into a store that fills up on the way (reject policy, several folios in
 * flight): what it refuses stays resident and writable, what it took is out; the count
 * pageout returns, reject and resident_bytes agree, and every byte reads back.
 */
static void full_one(uint32_t unit, unsigned engines)
{
	zf_region_options o = ropts(ZF_FAULT_THREAD, unit);
	zf_store_options so;
	zf_store *s;
	zf_region_stats st;
	struct rg g;
	long n;

	set_phase("full %s, %u engines", unit_name(unit), engines);
	so = sopts();
	so.max_pool_bytes = MiB(2);
	so.when_full = ZF_STORE_REJECT;
	s = store_make_with(so, unit, engines);
	rg_open(&g, &o, MiB(24), s); /* more than the folios in flight */
	rg_fill(&g, 0, g.nunits, 3);
	/* Its puts have finished when zf_region_pageout() returns: the counters are final. */
	n = zf_region_pageout(g.r, g.base, g.size);
	st = rst(g.r);
	/* How many fit depends on how well the data compresses: some, not all. */
	CHECK(n > 0 && n < (long)g.nunits, "pageout into a full pool evicted %ld of %llu units", n,
	      U(g.nunits));
	CHECK(st.evicted_units == (uint64_t)n && st.reject == g.nunits - (uint64_t)n &&
		      st.resident_bytes == (g.nunits - (uint64_t)n) * g.unit,
	      "evicted %ld: evicted_units %llu reject %llu resident_bytes %llu", n,
	      U(st.evicted_units), U(st.reject), U(st.resident_bytes));
	CHECK(present_pages(g.base, g.size) == (g.nunits - (uint64_t)n) * g.upages,
	      "%llu pages in memory, %llu units were refused", U(present_pages(g.base, g.size)),
	      U(g.nunits - (uint64_t)n));
	CHECK(sst(s).reject_pool_full > 0, "no reject_pool_full");
	printf("     full %s, %u engines: %ld of %llu units out, %llu refused\n", unit_name(unit),
	       engines, n, U(g.nunits), U(st.reject));
	VERIFY(&g, 0, g.size, "after a pageout into a full store");
	/* Every unit writable: the refused ones were given back unprotected. */
	for (size_t u = 0; u < g.nunits; u++) {
		g.want[u * g.unit + 17] ^= 0x5a;
		g.base[u * g.unit + 17] = g.want[u * g.unit + 17];
	}
	VERIFY(&g, 0, g.size, "after a write to every unit");
	rg_close(&g);
}

/*
 * A store that refuses incompressible units (reject_incompressible): a folio with one is
 * refused when its put finishes, and the evictor stores its units one by one; only the
 * incompressible ones stay resident.
 */
static void incompressible_one(uint32_t unit, unsigned engines)
{
	zf_region_options o = ropts(ZF_FAULT_THREAD, unit);
	zf_store_options so;
	zf_store *s;
	zf_region_stats st;
	uint64_t x = 0x9e3779b97f4a7c15ull, noisy = 0;
	struct rg g;
	long n;

	set_phase("incompressible %s, %u engines", unit_name(unit), engines);
	so = sopts();
	so.reject_incompressible = 1;
	s = store_make_with(so, unit, engines);
	rg_open(&g, &o, MiB(8) / TSAN_DIV, s);
	want_units(&g, 0, g.nunits, 4);
	/* Every 37th unit random: most 2 MiB folios hold one. */
	for (size_t u = 0; u < g.nunits; u += 37, noisy++) {
		for (size_t i = 0; i < g.unit; i += 8) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			memcpy(g.want + u * g.unit + i, &x, 8);
		}
	}
	memcpy(g.base, g.want, g.size);
	n = zf_region_pageout(g.r, g.base, g.size);
	st = rst(g.r);
	CHECK(n == (long)(g.nunits - noisy) && st.reject == noisy,
	      "pageout evicted %ld of %llu units, reject %llu: want all but the %llu random ones",
	      n, U(g.nunits), U(st.reject), U(noisy));
	CHECK(sst(s).reject_compress_poor > 0, "no reject_compress_poor");
	VERIFY(&g, 0, g.size, "after a pageout with incompressible units");
	rg_close(&g);
}

int case_full(void)
{
	for (unsigned e = 0; e <= 2; e += 2) {
		full_one(KiB(4), e);
		full_one(KiB(64), e);
		incompressible_one(KiB(4), e);
		incompressible_one(KiB(64), e);
	}
	return PASS;
}
