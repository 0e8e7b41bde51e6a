/* Description: the region from many threads at once, so that faults, evictions by
 * pageout and by reclaim, readahead, clean copies, madvise(MADV_DONTNEED) and munmap
 * events all meet on the same units. Each worker owns the pages p with p % THREADS == its
 * id, so every unit is shared by all workers (they fault it together) while each page has
 * one writer that knows exactly what it must hold: its body is made from (page, version)
 * (sample-image bytes with a header, a same-filled page, a page half zero), its last 8
 * bytes are a counter. The worker checks a page before every change, so a lost write, a
 * stale unit swapped back in or a page dropped to zeros is caught where it happens.
 *
 *   region_stress [THREADS [ITER [SEED]]]
 *
 * THREADS workers (default 4), ITER operations each per configuration (default 1000;
 * 600 under a sanitizer); the environment's ZF_THREADS, ZF_ITER, ZF_SEED set them too
 * (argv wins), ZF_ENGINES the store's compression engines (default 2), ZF_DROPS=0 turns
 * the MADV_DONTNEED and mmap(MAP_FIXED) operations off (to tell their bugs from the
 * others'), ZF_CONFIG=text runs only the configurations whose name has text. The seed is
 * printed first. Configurations, one after the other:
 *   thread mode 64k, readahead 2, 2 fault threads;   SIGBUS mode 64k, keep_clean;
 *   thread mode 4k, keep_clean;                      SIGBUS mode 16k, readahead 2.
 * Each region is 8 MiB with a residency limit of 2 MiB (reclaim runs all the time).
 *
 * A worker's operations: verify a page; rewrite its body (next version); increment its
 * counter in place; MADV_DONTNEED it (it must then read zero); zf_region_advise() HOT or
 * COLD on it; zf_region_pageout() of a random range; rarely, mmap(MAP_FIXED) a fresh
 * anonymous page over it, which takes the page out of the region (an munmap event): from
 * then on it is the program's own memory, and no pageout may touch its data. Besides the
 * workers a pageout thread evicts random ranges without pause and a stats thread checks
 * every snapshot (the monotonic counters never fall, resident bytes within limit + batch,
 * no failed fault) and reads the stats text.
 *
 * At the end every page is checked once more, then again after a pageout of the whole
 * region; after destroy the store holds nothing. Returns 0 pass, 1 fail, 77 skip (no
 * userfaultfd). Under TSan this is the race test of the region's fault, eviction, event
 * and reclaim paths.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "zfolio.h"
#include "image.h"
#include "stress.h"
#include "../unit/codec_pick.h"

#define DEFAULT_THREADS 4
#define DEFAULT_ITER (SANITIZED ? 600 : 1000)
#define DEFAULT_ENGINES 2
#define PAGE ZF_PAGE_SIZE
#define REGION_BYTES (8u << 20)
#define LIMIT_BYTES (2u << 20)
#define BATCH_BYTES (256u << 10)
#define MAX_REMAPS 3 /* pages a worker takes out of the region, per configuration */
#define OWNER 11u
#define U(x) ((unsigned long long)(x))

/*
 * Under TSan: the evictor reads a unit (zf_same_filled() on it, or a copy of a unit with
 * holes, or compresses it) after UFFDIO_WRITEPROTECT, and a program write that races
 * waits in the kernel for the write-protect fault to be served: the kernel orders the
 * two, TSan cannot see it and reports a race on region memory. Those two readers are
 * suppressed, nothing else. In SIGBUS mode the region's handler calls free() (see
 * src/region/region_sigbus.c, and the TSAN_OPTIONS of zf_add_test in tests/CMakeLists.txt).
 */
#ifdef ZF_TSAN
const char *__tsan_default_suppressions(void);
const char *__tsan_default_options(void);

__attribute__((visibility("default"))) const char *__tsan_default_suppressions(void)
{
	/* The evictor's readers; and a worker's own counter increments on its own pages (the
	 * other side of the same race, when TSan cannot restore the evictor's stack). */
	return "race:zf_same_filled\nrace:store_holed\nrace:zf_codec_compress\n"
	       "race_top:worker_main\n";
}

__attribute__((visibility("default"))) const char *__tsan_default_options(void)
{
	return "report_signal_unsafe=0 history_size=7";
}
#endif

struct config {
	const char *name;
	enum zf_fault_mode mode;
	uint32_t unit;
	unsigned readahead, fault_threads;
	int keep_clean;
};

static const struct config configs[] = {
	{ "thread 64k readahead", ZF_FAULT_THREAD, 64u << 10, 2, 2, 0 },
	{ "sigbus 64k keep_clean", ZF_FAULT_SIGBUS, 64u << 10, 0, 0, 1 },
	{ "thread 4k keep_clean", ZF_FAULT_THREAD, 4u << 10, 0, 1, 1 },
	{ "sigbus 16k readahead", ZF_FAULT_SIGBUS, 16u << 10, 2, 0, 0 },
};

struct worker {
	pthread_t thread;
	unsigned id;
	uint64_t rng;
	unsigned remaps;
	/* What it did, for the summary. */
	uint64_t verifies, rewrites, increments, drops, advises, pageouts;
};

static zf_region *region;
static zf_store *store;
static uint8_t *base;
static size_t npages;
static unsigned upages, nthreads, nengines, drops;
static unsigned long iters;
static uint64_t seed;
static const struct config *cfg;
static const uint8_t *sample;
static size_t sample_pages;
static atomic_int stop_helpers;
/* The shadow: per page, written by its owner only (read by main after the joins). */
static uint32_t *ver;
static uint64_t *cnt;
static uint8_t *foreign; /* taken out of the region by mmap(MAP_FIXED) */
static atomic_uint ver_next;
static atomic_ullong helper_pageouts, helper_evicted, stats_reads;

__attribute__((format(printf, 1, 2), noreturn)) static void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "region_stress (seed %#llx, %s): ", U(seed), cfg ? cfg->name : "setup");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	_exit(1); /* not abort(): in SIGBUS mode the region owns the signals */
}

/* A configuration that runs past its time is a hang (a fault never served): say which. */
static void on_alarm(int sig)
{
	static const char msg[] = "region_stress: a configuration hung (see its name above; "
				  "the seed is on the first line)\n";
	ssize_t ignored = write(2, msg, sizeof(msg) - 1);

	(void)sig;
	(void)ignored;
	_exit(1);
}

static void sleep_us(unsigned us)
{
	struct timespec ts = { 0, (long)us * 1000 };

	nanosleep(&ts, NULL);
}

/*
 * The body (all but the last 8 bytes) of page p at version v; version 0 is zeros. Any
 * two versions differ, and no version but 0 is all zeros.
 */
static void gen_body(uint8_t *b, size_t p, uint32_t v)
{
	const uint64_t h = stress_mix(p, v, seed);
	uint64_t hdr[2];

	if (v == 0) {
		memset(b, 0, PAGE - 8);
		return;
	}
	if (h % 8 == 0) {
		const uint64_t w = h | 1;

		for (size_t i = 0; i < PAGE - 8; i += 8)
			memcpy(b + i, &w, 8);
		return;
	}
	if (sample) {
		memcpy(b, sample + (h >> 8) % sample_pages * PAGE, PAGE - 8);
	} else {
		uint64_t s = h;

		for (size_t i = 0; i < PAGE - 8; i += 8) {
			const uint64_t w = stress_rand(&s) & 0x0f0f0f0f0f0f0f0full;

			memcpy(b + i, &w, 8);
		}
	}
	if (h % 8 == 1)
		memset(b + 64, 0, PAGE / 2);
	hdr[0] = p;
	hdr[1] = (uint64_t)v << 32 | 0x52u;
	memcpy(b, hdr, sizeof(hdr));
}

/*
 * Where the bytes of a wrong page may have come from, for the failure message: another
 * page's body (by its header), a page's body shifted, or the sample image's bytes. A
 * window of the page (past the zeros a half-zero body has) is looked for in each page's
 * current body and in the sample.
 */
#define WIN 3000
static void describe(const uint8_t *have, char *out, size_t cap)
{
	static const uint8_t zeros[64];
	uint8_t body[PAGE];
	uint64_t hdr[2];

	memcpy(hdr, have, sizeof(hdr));
	if (hdr[0] < npages && (hdr[1] & 0xffffffffu) == 0x52u) {
		const uint32_t v = (uint32_t)(hdr[1] >> 32);

		gen_body(body, hdr[0], v);
		snprintf(out, cap,
			 "; its header says page %llu version %u (%s; that page is at %u)",
			 U(hdr[0]), v, memcmp(body, have, PAGE - 8) ? "other bytes after" : "whole",
			 ver[hdr[0]]);
		return;
	}
	if (!memcmp(have + WIN, zeros, sizeof(zeros))) {
		snprintf(out, cap, "; zeros at %d, first words %#llx %#llx", WIN, U(hdr[0]),
			 U(hdr[1]));
		return;
	}
	for (size_t q = 0; q < npages; q++) {
		const uint8_t *at;

		gen_body(body, q, ver[q]);
		at = memmem(body, PAGE - 8, have + WIN, sizeof(zeros));
		if (at) {
			snprintf(out, cap, "; its bytes at %d are page %llu's (version %u) at %lld",
				 WIN, U(q), ver[q], (long long)(at - body));
			return;
		}
	}
	if (sample) {
		const uint8_t *at = memmem(sample, sample_pages * PAGE, have + WIN, sizeof(zeros));

		if (at) {
			snprintf(out, cap,
				 "; its bytes at %d are the sample's at %llu (%llu into a page)",
				 WIN, U(at - sample), U((uint64_t)(at - sample) % PAGE));
			return;
		}
	}
	snprintf(out, cap, "; first words %#llx %#llx, found nowhere", U(hdr[0]), U(hdr[1]));
}

/*
 * For the failure message: which bytes of the page differ (have against want and the
 * counter), whether it is one repeated word, and a map of its unit's pages as they read
 * now ('.' right, 'X' wrong, 'f' the program's own: the other pages have other writers,
 * so the map is a snapshot taken while they go on).
 */
static const char *page_diff(const uint8_t *have, const uint8_t *want, size_t p, uint64_t c)
{
	static char out[512];
	uint64_t w0, w;
	size_t first = PAGE, last = 0, words = 0, same = 1, n;

	for (size_t i = 0; i < PAGE - 8; i++) {
		if (have[i] != want[i]) {
			first = first < i ? first : i;
			last = i;
		}
	}
	for (size_t i = 0; i + 8 <= PAGE - 8; i += 8)
		words += memcmp(have + i, want + i, 8) != 0;
	memcpy(&w0, have, 8);
	for (size_t i = 8; i < PAGE && same; i += 8) {
		memcpy(&w, have + i, 8);
		same = w == w0;
	}
	if (first < PAGE)
		n = (size_t)snprintf(out, sizeof(out), "body differs in %zu words, bytes %zu..%zu",
				     words, first, last);
	else
		n = (size_t)snprintf(out, sizeof(out), "body right");
	if (c != cnt[p])
		n += (size_t)snprintf(out + n, sizeof(out) - n, ", counter wrong");
	if (same)
		n += (size_t)snprintf(out + n, sizeof(out) - n, ", every word %#llx", U(w0));
	n += (size_t)snprintf(out + n, sizeof(out) - n, "; unit %llu now: ", U(p / upages));
	for (size_t k = p / upages * upages; k < (p / upages + 1) * upages && n + 2 < sizeof(out);
	     k++) {
		uint8_t body[PAGE];
		uint64_t kc;

		gen_body(body, k, ver[k]);
		memcpy(&kc, base + k * PAGE + PAGE - 8, 8);
		out[n++] = foreign[k]						      ? 'f'
			   : !memcmp(base + k * PAGE, body, PAGE - 8) && kc == cnt[k] ? '.'
										      : 'X';
	}
	out[n] = '\0';
	return out;
}

/* Page p must hold (ver[p], cnt[p]). */
static void check_page(size_t p, const char *what)
{
	const uint8_t *pg = base + p * PAGE;
	uint8_t want[PAGE], have[PAGE];
	char where[160];
	const char *how;
	uint64_t c;

	gen_body(want, p, ver[p]);
	memcpy(&c, pg + PAGE - 8, 8);
	if (!memcmp(pg, want, PAGE - 8) && c == cnt[p])
		return;
	memcpy(have, pg, PAGE);
	memcpy(&c, have + PAGE - 8, 8);
	how = "other bytes";
	where[0] = '\0';
	if (!memcmp(have, want, PAGE - 8)) {
		how = "the right body";
	} else {
		uint64_t zero = 1;

		for (size_t i = 0; i < PAGE && zero; i++)
			zero = !have[i];
		if (zero) {
			how = "all zeros";
		} else {
			uint64_t hdr[2];

			memcpy(hdr, have, sizeof(hdr));
			if (hdr[0] == p && (hdr[1] & 0xffffffffu) == 0x52u)
				how = (hdr[1] >> 32) < ver[p] ? "an older version"
							      : "another version";
			else
				describe(have, where, sizeof(where));
		}
	}
	fail("%s: page %llu (unit %llu%s) should hold version %u counter %llu; it holds %s, "
	     "counter %llu%s; %s",
	     what, U(p), U(p / upages), foreign[p] ? ", the program's own now" : "", ver[p],
	     U(cnt[p]), how, U(c), where, page_diff(have, want, p, c));
}

/* The library's diagnostics (a unit it cannot read back, ...) go to stderr. */
static void log_line(enum zf_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (level <= ZF_LOG_WARN)
		fprintf(stderr, "region_stress: zfolio says: %s\n", msg);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	const size_t mine = (npages - w->id + nthreads - 1) / nthreads;
	uint8_t buf[PAGE];

	for (unsigned long i = 0; i < iters; i++) {
		const size_t p = w->id + nthreads * (stress_rand(&w->rng) % mine);
		uint8_t *pg = base + p * PAGE;
		const unsigned op = (unsigned)(stress_rand(&w->rng) % 100);

		check_page(p, "before an operation");
		w->verifies++;
		if (op < 35) {
			ver[p] = atomic_fetch_add(&ver_next, 1);
			gen_body(buf, p, ver[p]);
			memcpy(pg, buf, PAGE - 8);
			w->rewrites++;
		} else if (op < 55) {
			volatile uint64_t *c = (volatile uint64_t *)(void *)(pg + PAGE - 8);

			*c = *c + 1;
			cnt[p]++;
			w->increments++;
		} else if (op < 60 && drops) {
			if (madvise(pg, PAGE, MADV_DONTNEED))
				fail("madvise(DONTNEED): %s", strerror(errno));
			ver[p] = 0;
			cnt[p] = 0;
			w->drops++;
		} else if (op < 64) {
			const int adv = op < 62 ? ZF_ADV_COLD : ZF_ADV_HOT;
			const int ret = zf_region_advise(region, pg, PAGE, adv);

			if (ret && !(ret == -EINVAL && foreign[p]))
				fail("zf_region_advise: %s", zf_strerror(ret));
			w->advises++;
		} else if (op < 66) {
			const size_t q = stress_rand(&w->rng) % npages;
			const size_t len = 1 + stress_rand(&w->rng) % (npages - q);
			const long n = zf_region_pageout(region, base + q * PAGE, len * PAGE);

			if (n < 0 && n != -EINVAL)
				fail("zf_region_pageout: %ld", n);
			w->pageouts++;
		} else if (op == 66 && drops && w->remaps < MAX_REMAPS && !foreign[p] &&
			   stress_rand(&w->rng) % 16 == 0) {
			/* Take the page out of the region: the program's own memory from now on. */
			void *q = mmap(pg, PAGE, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);

			if (q != pg)
				fail("mmap(MAP_FIXED) over a page of the region: %s",
				     strerror(errno));
			foreign[p] = 1;
			ver[p] = 0;
			cnt[p] = 0;
			w->remaps++;
		}
		check_page(p, "after an operation");
	}
	return NULL;
}

/* Evicts random ranges (a pageout over a remapped page may say -EINVAL). */
static void *pageout_main(void *arg)
{
	uint64_t rng = seed ^ 0x9a9e;

	(void)arg;
	while (!atomic_load(&stop_helpers)) {
		const size_t q = stress_rand(&rng) % npages;
		const size_t len = 1 + stress_rand(&rng) % (npages - q);
		const long n = zf_region_pageout(region, base + q * PAGE, len * PAGE);

		if (n < 0 && n != -EINVAL)
			fail("zf_region_pageout: %ld", n);
		atomic_fetch_add(&helper_pageouts, 1);
		if (n > 0)
			atomic_fetch_add(&helper_evicted, (unsigned long long)n);
		sleep_us((unsigned)(stress_rand(&rng) % 300));
	}
	return NULL;
}

/* Every snapshot: monotonic counters never fall, residency within the bound, no failure. */
static void *stats_main(void *arg)
{
	const uint64_t bound = LIMIT_BYTES + BATCH_BYTES;
	zf_region_stats prev, st;
	char *text = malloc(1 << 16);
	unsigned i = 0;

	(void)arg;
	if (!text)
		fail("out of memory");
	memset(&prev, 0, sizeof(prev));
	while (!atomic_load(&stop_helpers)) {
		zf_region_get_stats(region, &st, sizeof(st));
#define MONO(f)                                                                                    \
	if (st.f < prev.f)                                                                         \
		fail("stats: " #f " fell from %llu to %llu", U(prev.f), U(st.f));
		MONO(swpout)
		MONO(swpin)
		MONO(pgmajfault)
		MONO(pgfault_zero)
		MONO(evict_pageout)
		MONO(evict_reclaim)
		MONO(ev_remove)
		MONO(ev_unmap)
		MONO(swap_ra)
		MONO(swap_ra_hit)
		MONO(resident_max)
#undef MONO
		if (st.resident_bytes > bound || st.resident_max > bound)
			fail("stats: resident_bytes %llu (max %llu) > limit + batch %llu",
			     U(st.resident_bytes), U(st.resident_max), U(bound));
		if (st.fault_fail)
			fail("stats: fault_fail %llu", U(st.fault_fail));
		if (st.swap_ra_hit > st.swap_ra)
			fail("stats: swap_ra_hit %llu > swap_ra %llu", U(st.swap_ra_hit),
			     U(st.swap_ra));
		if (i++ % 64 == 0 && zf_region_stats_text(region, text, 1 << 16) >= 1 << 16)
			fail("stats text longer than 64 KiB");
		prev = st;
		atomic_fetch_add(&stats_reads, 1);
		sleep_us(200);
	}
	free(text);
	return NULL;
}

static int run_config(const struct config *c)
{
	struct worker *w = calloc(nthreads, sizeof(*w));
	zf_region_options o;
	zf_store_options so;
	zf_region_stats st;
	zf_store_stats ss;
	pthread_t pt, stt;
	uint64_t totals[6] = { 0 }, remaps = 0;
	int ret;

	cfg = c;
	printf("region_stress %s ...\n", c->name);
	alarm(SANITIZED ? 200 : 90);
	if (!w)
		fail("out of memory");
	zf_store_options_init(&so);
	so.codec = test_codec_name();
	so.unit = c->unit > PAGE ? c->unit : 0;
	so.engines = nengines;
	ret = zf_store_create(&so, &store);
	if (ret)
		fail("zf_store_create: %s", zf_strerror(ret));
	zf_region_options_init(&o);
	o.unit = c->unit;
	o.fault_mode = c->mode;
	o.fault_threads = c->fault_threads;
	o.readahead = c->readahead;
	o.keep_clean = c->keep_clean;
	o.limit = LIMIT_BYTES;
	o.reclaim_batch = BATCH_BYTES;
	o.owner = OWNER;
	ret = zf_region_create(store, REGION_BYTES, &o, &region);
	if (ret == -EPERM || ret == -ENOSYS || ret == -ENOTSUP) {
		printf("region_stress: zf_region_create: %s: skipped (no userfaultfd)\n",
		       zf_strerror(ret));
		zf_store_destroy(store);
		free(w);
		return 77;
	}
	if (ret)
		fail("zf_region_create: %s", zf_strerror(ret));
	base = zf_region_base(region);
	npages = zf_region_size(region) / PAGE;
	upages = c->unit / PAGE;
	ver = calloc(npages, sizeof(*ver));
	cnt = calloc(npages, sizeof(*cnt));
	foreign = calloc(npages, 1);
	if (!ver || !cnt || !foreign)
		fail("out of memory");
	atomic_store(&ver_next, 1);
	atomic_store(&stop_helpers, 0);
	atomic_store(&helper_pageouts, 0);
	atomic_store(&helper_evicted, 0);
	atomic_store(&stats_reads, 0);

	if (pthread_create(&pt, NULL, pageout_main, NULL) ||
	    pthread_create(&stt, NULL, stats_main, NULL))
		fail("pthread_create");
	for (unsigned i = 0; i < nthreads; i++) {
		w[i].id = i;
		w[i].rng = stress_mix(seed, i, 0x3c);
		if (pthread_create(&w[i].thread, NULL, worker_main, &w[i]))
			fail("pthread_create");
	}
	for (unsigned i = 0; i < nthreads; i++) {
		pthread_join(w[i].thread, NULL);
		totals[0] += w[i].verifies;
		totals[1] += w[i].rewrites;
		totals[2] += w[i].increments;
		totals[3] += w[i].drops;
		totals[4] += w[i].advises;
		totals[5] += w[i].pageouts;
		remaps += w[i].remaps;
	}
	atomic_store(&stop_helpers, 1);
	pthread_join(pt, NULL);
	pthread_join(stt, NULL);

	/* Everything once more, then out and back again. */
	for (size_t p = 0; p < npages; p++)
		check_page(p, "at the end");
	if (zf_region_pageout(region, base, npages * PAGE) < 0) {
		for (size_t p = 0; p < npages; p++)
			if (!foreign[p])
				zf_region_pageout(region, base + p * PAGE, PAGE);
	}
	for (size_t p = 0; p < npages; p++)
		check_page(p, "at the end, after a pageout of everything");
	zf_region_get_stats(region, &st, sizeof(st));
	if (st.fault_fail)
		fail("fault_fail %llu", U(st.fault_fail));
	if (st.resident_max > LIMIT_BYTES + BATCH_BYTES)
		fail("resident_max %llu > limit + batch", U(st.resident_max));
	if (!st.evict_reclaim || !st.swpin || (drops && !st.ev_remove) || (remaps && !st.ev_unmap))
		fail("the paths did not all run: evict_reclaim %llu swpin %llu ev_remove %llu "
		     "ev_unmap %llu",
		     U(st.evict_reclaim), U(st.swpin), U(st.ev_remove), U(st.ev_unmap));
	if (c->keep_clean && !st.clean_evict)
		fail("keep_clean: no clean eviction happened");
	printf("region_stress %-22s %llu checks, %llu rewrites, %llu increments, %llu drops, "
	       "%llu advises, %llu remaps, %llu+%llu pageouts (%llu units); swpin %llu, "
	       "pgmajfault %llu, reclaimed %llu, limit_waits %llu, fault_waits %llu, wp_faults "
	       "%llu, clean_evict %llu, swap_ra %llu/%llu, copy_eagain %llu, copy_eexist %llu, "
	       "p50 %llu ns p99 %llu ns; %llu stats reads\n",
	       c->name, U(totals[0]), U(totals[1]), U(totals[2]), U(totals[3]), U(totals[4]),
	       U(remaps), U(totals[5]), U(atomic_load(&helper_pageouts)),
	       U(atomic_load(&helper_evicted)), U(st.swpin_units[__builtin_ctz(upages)]),
	       U(st.pgmajfault), U(st.evict_reclaim), U(st.limit_waits), U(st.fault_waits),
	       U(st.wp_faults), U(st.clean_evict), U(st.swap_ra_hit), U(st.swap_ra),
	       U(st.copy_eagain), U(st.copy_eexist), U(st.fault_p50_ns), U(st.fault_p99_ns),
	       U(atomic_load(&stats_reads)));
	zf_region_destroy(region);
	zf_store_get_stats(store, &ss, sizeof(ss));
	if (ss.stored_pages)
		fail("after zf_region_destroy() the store still holds %llu pages",
		     U(ss.stored_pages));
	zf_store_destroy(store);
	/* The pages taken out of the region are the program's: unmap them. */
	for (size_t p = 0; p < npages; p++)
		if (foreign[p])
			munmap(base + p * PAGE, PAGE);
	free(ver);
	free(cnt);
	free(foreign);
	free(w);
	region = NULL;
	return 0;
}

int main(int argc, char **argv)
{
	zf_image *img = NULL;
	int ret = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	zf_set_log_fn(log_line, NULL);
	signal(SIGALRM, on_alarm);
	nthreads = (unsigned)arg_or_env(argc, argv, 1, "ZF_THREADS", DEFAULT_THREADS);
	iters = (unsigned long)arg_or_env(argc, argv, 2, "ZF_ITER", DEFAULT_ITER);
	seed = arg_or_env(argc, argv, 3, "ZF_SEED", (uint64_t)time(NULL) ^ (uint64_t)getpid());
	nengines = (unsigned)arg_or_env(0, NULL, 0, "ZF_ENGINES", DEFAULT_ENGINES);
	drops = (unsigned)arg_or_env(0, NULL, 0, "ZF_DROPS", 1);
	if (nthreads < 1 || nthreads > 64)
		fail("THREADS must be 1..64");
	printf("region_stress: seed %#llx, %u threads, %lu operations each, %u engines%s%s\n",
	       U(seed), nthreads, iters, nengines, drops ? "" : ", no DONTNEED/remaps",
	       SANITIZED ? " (sanitizer)" : "");
	if (stress_open_sample(&img, &sample, &sample_pages))
		printf("region_stress: no sample image: text-like pages instead\n");
	for (size_t i = 0; i < sizeof(configs) / sizeof(configs[0]) && ret == 0; i++) {
		const char *only = getenv("ZF_CONFIG");

		if (!only || strstr(configs[i].name, only))
			ret = run_config(&configs[i]);
	}
	zf_image_close(img);
	return ret;
}
