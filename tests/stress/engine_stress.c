/* Description: zf_engines from many threads at once: THREADS submitters share one set of
 * ENGINES compression engines and run batches, urgent and normal, of compress jobs and
 * then decompress jobs over units of mixed data (4 KiB to 2 MiB, every codec of the
 * build, sometimes several codecs in one batch), and check every byte of every round
 * trip, every job's status and every wait's count of failures. A stats thread reads the
 * counters meanwhile; at the end they must be exact.
 *
 *   engine_stress [THREADS [ITER [ENGINES [SEED]]]]
 *
 * THREADS submitters (default 4), ITER batches of units each (default 600; 200 under a
 * sanitizer), ENGINES engine threads (default 2; 0 runs everything in the waiters); the
 * environment's ZF_THREADS, ZF_ITER, ZF_ENGINES and ZF_SEED set them too (argv wins). The
 * seed is printed first; a submitter's batches depend on it, their interleaving does
 * not. Returns 0 pass, 1 fail.
 *
 * What a submitter does, per iteration, on a fresh stamp of its 2 MiB of data:
 *  - cuts 1..32 units of 4, 16 or 64 KiB (or one of 2 MiB, rarely) and compresses them,
 *    each into the worst-case bound (must succeed) or, one in ten, into an eighth of the
 *    unit (may fail with -E2BIG, nothing else);
 *  - one batch in twenty carries a bad job (no codec, no output, unknown op): -EINVAL;
 *  - decompresses the units that compressed, each into exactly its size, plus one in
 *    twenty into a wrong size (must give -EBADMSG), and compares every byte;
 *  - submits on its normal or its urgent batch at random; one iteration in six splits the
 *    units over both and waits for them in random order; one in fifty makes new batches.
 *
 * Under TSan this is the race test of the queue, the claim counters, the completion
 * handshake and the per-thread contexts: the run must end with no report.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zfolio.h"
#include "stress.h"

#define DEFAULT_THREADS 4
#define DEFAULT_ITER (SANITIZED ? 200 : 600)
#define DEFAULT_ENGINES 2
#define DATA_BYTES ZF_UNIT_MAX
#define MAX_JOBS 32
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Every codec the stress may use; those this build lacks are left out. */
static const char *const codec_names[] = { "lz4", "lz4:8",     "zstd:1", "zstd:-3",
					   "lzo", "deflate:1", "isal:1", "none" };

struct worker {
	pthread_t thread;
	unsigned id;
	uint64_t rng;
	uint8_t *data; /* DATA_BYTES of mixed pages, stamped afresh each iteration */
	uint8_t *cmp; /* MAX_JOBS slots of bound(unit) bytes */
	uint8_t *out; /* decompressed units */
	uint8_t *junk; /* where the jobs that must fail write */
	zf_job cjobs[MAX_JOBS], djobs[MAX_JOBS + 1];
	zf_batch *normal, *urgent;
	/* What it submitted, to check the counters. */
	uint64_t batches, jobs, failed;
	/* What it did, for the summary. */
	uint64_t units, bytes, e2big, einval, ebadmsg, splits, new_batches;
};

static zf_engines *engines;
static const zf_codec *codecs[ARRAY_SIZE(codec_names)];
static unsigned ncodecs, nthreads, nengines;
static unsigned long iters;
static uint64_t seed;
static atomic_int workers_done;
static uint64_t stats_reads;

__attribute__((format(printf, 1, 2), noreturn)) static void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "engine_stress (seed %#llx): ", (unsigned long long)seed);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	fflush(stdout);
	/* Other threads are running: leave without exit handlers. */
	_exit(1);
}

/* Room for any codec's output of len bytes, incompressible input included. */
static size_t bound(size_t len)
{
	return len + len / 128 + 256;
}

/* One page like program memory: words and numbers, zeros, a repeated word, noise. */
static void fill_page(uint8_t *p, uint64_t *s)
{
	static const char *const words[] = { "the ",  "page ", "folio ", "zswap ",  "{\"id\": ",
					     "null,", "true,", "\n    ", "return ", "value " };
	const uint64_t kind = stress_rand(s) % 10;
	size_t i = 0;

	if (kind == 0) {
		memset(p, 0, ZF_PAGE_SIZE);
		return;
	}
	if (kind == 1) {
		const uint64_t v = stress_rand(s);

		for (; i < ZF_PAGE_SIZE; i += 8)
			memcpy(p + i, &v, 8);
		return;
	}
	if (kind == 9) {
		for (; i < ZF_PAGE_SIZE; i += 8) {
			const uint64_t v = stress_rand(s);

			memcpy(p + i, &v, 8);
		}
		return;
	}
	while (i < (kind == 8 ? ZF_PAGE_SIZE / 2 : ZF_PAGE_SIZE)) {
		const uint64_t r = stress_rand(s);
		char num[24];
		const char *w = words[r % ARRAY_SIZE(words)];
		size_t n;

		if (r % 4 == 0) {
			n = (size_t)snprintf(num, sizeof(num), "%u ", (unsigned)(r >> 40) % 100000);
			w = num;
		} else {
			n = strlen(w);
		}
		n = n < ZF_PAGE_SIZE - i ? n : ZF_PAGE_SIZE - i;
		memcpy(p + i, w, n);
		i += n;
	}
	for (; i + 8 <= ZF_PAGE_SIZE; i += 8) {
		const uint64_t v = stress_rand(s);

		memcpy(p + i, &v, 8);
	}
}

/* Reports the first byte where a round trip differs. */
static void check_unit(const uint8_t *have, const uint8_t *want, size_t len, const char *what,
		       size_t unit)
{
	if (memcmp(have, want, len) == 0)
		return;
	for (size_t i = 0; i < len; i++) {
		if (have[i] != want[i])
			fail("%s: unit %zu of %zu bytes: byte %zu is %#04x, expected %#04x", what,
			     unit, len, i, have[i], want[i]);
	}
}

static size_t pick_unit(struct worker *w, size_t *count)
{
	const uint64_t r = stress_rand(&w->rng);
	const unsigned p = (unsigned)(r % 100);
	size_t unit;

	if (p < (SANITIZED ? 1 : 4)) {
		*count = 1;
		return ZF_UNIT_MAX;
	}
	unit = p < 45 ? 4096 : p < 65 ? 16384 : 65536;
	*count = (r >> 8) % 10 < 3 ? 1 : 1 + (size_t)((r >> 16) % MAX_JOBS);
	if (*count * unit > DATA_BYTES)
		*count = DATA_BYTES / unit;
	return unit;
}

/* Submits jobs on one batch, or split over both, and waits; returns the failures counted. */
static int run_jobs(struct worker *w, zf_job *jobs, size_t n, int want_failed)
{
	const uint64_t r = stress_rand(&w->rng);
	int ret;

	if (n >= 2 && r % 6 == 0) {
		const size_t half = 1 + (size_t)((r >> 8) % (n - 1));
		int a, b;

		w->splits++;
		if (zf_batch_submit(w->normal, jobs, half) ||
		    zf_batch_submit(w->urgent, jobs + half, n - half))
			fail("split submit failed");
		if ((r >> 32) & 1) {
			b = zf_batch_wait(w->urgent);
			a = zf_batch_wait(w->normal);
		} else {
			a = zf_batch_wait(w->normal);
			b = zf_batch_wait(w->urgent);
		}
		if (a < 0 || b < 0)
			fail("split wait: %d, %d", a, b);
		ret = a + b;
		w->batches += 2;
	} else {
		zf_batch *b = (r >> 8) % 3 == 0 ? w->urgent : w->normal;

		if ((r >> 16) & 1) {
			ret = zf_batch_run(b, jobs, n);
		} else {
			ret = zf_batch_submit(b, jobs, n);
			if (ret == 0 && (r >> 20) % 4 == 0 && zf_batch_submit(b, jobs, n) != -EBUSY)
				fail("a second submit before the wait was not -EBUSY");
			if (ret == 0)
				ret = zf_batch_wait(b);
		}
		if (ret < 0)
			fail("run of %zu jobs: %d", n, ret);
		w->batches++;
	}
	w->jobs += n;
	w->failed += (uint64_t)ret;
	if (want_failed >= 0 && ret != want_failed)
		fail("wait counted %d failed jobs, expected %d", ret, want_failed);
	return ret;
}

static void one_iteration(struct worker *w, unsigned long iter)
{
	size_t count, unit = pick_unit(w, &count);
	const uint64_t r = stress_rand(&w->rng);
	const zf_codec *codec = codecs[r % ncodecs];
	const int mixed = (r >> 8) % 5 == 0;
	const size_t bad = (r >> 16) % 20 == 0 ? (size_t)((r >> 24) % count) : SIZE_MAX;
	const size_t cap = bound(unit);
	size_t nd = 0, wrong = SIZE_MAX;
	int failed = 0;

	/* A fresh stamp in every unit, so no two iterations compress the same bytes. */
	for (size_t i = 0; i < count; i++) {
		const uint64_t stamp = (uint64_t)w->id << 48 ^ iter << 16 ^ i;

		memcpy(w->data + i * unit, &stamp, sizeof(stamp));
	}
	for (size_t i = 0; i < count; i++) {
		zf_job *j = &w->cjobs[i];
		const uint64_t q = stress_rand(&w->rng);

		*j = (zf_job){ .codec = mixed ? codecs[q % ncodecs] : codec,
			       .op = ZF_JOB_COMPRESS,
			       .src = w->data + i * unit,
			       .src_len = unit,
			       .dst = w->cmp + i * cap,
			       .dst_cap = (q >> 8) % 10 == 0 ? unit / 8 : cap,
			       .status = INT_MIN };
		if (i == bad) {
			switch ((q >> 16) % 3) {
			case 0:
				j->codec = NULL;
				break;
			case 1:
				j->dst = NULL;
				break;
			default:
				j->op = (enum zf_job_op)9;
				break;
			}
		}
	}
	failed = run_jobs(w, w->cjobs, count, -1);

	/* Every status is what it may be; the good ones become decompress jobs. */
	for (size_t i = 0; i < count; i++) {
		const zf_job *j = &w->cjobs[i];

		if (i == bad) {
			if (j->status != -EINVAL)
				fail("bad compress job %zu: status %d, expected -EINVAL", i,
				     j->status);
			w->einval++;
			failed--;
			continue;
		}
		if (j->status == -E2BIG && j->dst_cap < cap) {
			w->e2big++;
			failed--;
			continue;
		}
		if (j->status <= 0 || (size_t)j->status > j->dst_cap)
			fail("compress of unit %zu (%zu bytes, cap %zu, %s): status %d", i, unit,
			     j->dst_cap, zf_codec_name(j->codec), j->status);
		w->djobs[nd++] = (zf_job){ .codec = j->codec,
					   .op = ZF_JOB_DECOMPRESS,
					   .src = j->dst,
					   .src_len = (size_t)j->status,
					   .dst = w->out + i * unit,
					   .dst_cap = unit,
					   .status = INT_MIN };
	}
	if (failed != 0)
		fail("compress wait counted %d failures more than the jobs show", failed);
	if (nd == 0)
		return;
	if ((r >> 32) % 20 == 0) {
		/* A good object decoded into the wrong size. */
		wrong = nd;
		w->djobs[nd] = w->djobs[(r >> 40) % nd];
		w->djobs[nd].dst = w->junk;
		w->djobs[nd].dst_cap = unit - 64;
		nd++;
	}
	run_jobs(w, w->djobs, nd, wrong == SIZE_MAX ? 0 : 1);
	for (size_t k = 0; k < nd; k++) {
		const zf_job *d = &w->djobs[k];
		size_t off;

		if (k == wrong) {
			if (d->status != -EBADMSG)
				fail("decompress into a wrong size: status %d", d->status);
			w->ebadmsg++;
			continue;
		}
		if (d->status != (int)unit)
			fail("decompress (%s) of %zu bytes into %zu: status %d",
			     zf_codec_name(d->codec), d->src_len, unit, d->status);
		off = (size_t)((const uint8_t *)d->dst - w->out);
		check_unit(d->dst, w->data + off, unit, zf_codec_name(d->codec), off / unit);
		w->units++;
		w->bytes += unit;
	}
}

static void new_batches(struct worker *w)
{
	zf_batch_destroy(w->normal);
	zf_batch_destroy(w->urgent);
	w->normal = w->urgent = NULL;
	if (zf_batch_create(engines, 0, &w->normal) ||
	    zf_batch_create(engines, ZF_BATCH_URGENT, &w->urgent))
		fail("batch_create failed");
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	for (size_t off = 0; off < DATA_BYTES; off += ZF_PAGE_SIZE)
		fill_page(w->data + off, &w->rng);
	new_batches(w);
	for (unsigned long i = 0; i < iters; i++) {
		if (stress_rand(&w->rng) % 50 == 0) {
			new_batches(w);
			w->new_batches++;
		}
		one_iteration(w, i);
	}
	zf_batch_destroy(w->normal);
	zf_batch_destroy(w->urgent);
	atomic_fetch_add(&workers_done, 1);
	return NULL;
}

/* What holds of any snapshot taken while batches run. */
static void *stats_main(void *arg)
{
	zf_engines_stats last = { 0 };

	(void)arg;
	while (atomic_load(&workers_done) < (int)nthreads) {
		zf_engines_stats s;

		zf_engines_get_stats(engines, &s, sizeof(s));
		if (s.batches < last.batches || s.jobs < last.jobs ||
		    s.jobs_by_engines < last.jobs_by_engines ||
		    s.jobs_by_waiters < last.jobs_by_waiters || s.failed_jobs < last.failed_jobs)
			fail("stats: a counter fell");
		if (s.jobs_by_engines + s.jobs_by_waiters > s.jobs || s.failed_jobs > s.jobs ||
		    s.batches > s.jobs)
			fail("stats: %llu jobs run by engines and %llu by waiters, %llu failed, of "
			     "%llu in %llu batches",
			     (unsigned long long)s.jobs_by_engines,
			     (unsigned long long)s.jobs_by_waiters,
			     (unsigned long long)s.failed_jobs, (unsigned long long)s.jobs,
			     (unsigned long long)s.batches);
		if (nengines == 0 && s.jobs_by_engines)
			fail("stats: jobs run by engines that do not exist");
		last = s;
		stats_reads++;
		usleep(200);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct worker *ws;
	struct timespec t0, t1;
	pthread_t stats_thread;
	zf_engines_stats s;
	uint64_t sum[10] = { 0 }, seen_failed;
	int ret;

	clock_gettime(CLOCK_REALTIME, &t0);
	nthreads = (unsigned)arg_or_env(argc, argv, 1, "ZF_THREADS", DEFAULT_THREADS);
	iters = (unsigned long)arg_or_env(argc, argv, 2, "ZF_ITER", DEFAULT_ITER);
	nengines = (unsigned)arg_or_env(argc, argv, 3, "ZF_ENGINES", DEFAULT_ENGINES);
	seed = arg_or_env(argc, argv, 4, "ZF_SEED",
			  (unsigned long long)t0.tv_nsec ^ (unsigned long long)t0.tv_sec << 20 ^
				  (unsigned long long)getpid() << 40);
	if (nthreads < 1 || nthreads > 256 || nengines > ZF_ENGINES_MAX) {
		fprintf(stderr, "usage: %s [THREADS (1..256) [ITER [ENGINES (0..%u) [SEED]]]]\n",
			argv[0], ZF_ENGINES_MAX);
		return 1;
	}
	for (size_t i = 0; i < ARRAY_SIZE(codec_names); i++) {
		if (zf_codec_find(codec_names[i], &codecs[ncodecs]) == 0)
			ncodecs++;
		else
			printf("engine_stress: codec %s is not in this build: runs without it\n",
			       codec_names[i]);
	}
	if (ncodecs == 0)
		fail("no codec");
	printf("engine_stress: seed %#llx (ZF_SEED=%#llx to repeat), %u threads x %lu "
	       "iterations, %u engines, %u codecs\n",
	       (unsigned long long)seed, (unsigned long long)seed, nthreads, iters, nengines,
	       ncodecs);
	fflush(stdout);

	ret = zf_engines_create(nengines, &engines);
	if (ret)
		fail("engines_create(%u): %d", nengines, ret);
	ws = calloc(nthreads, sizeof(*ws));
	if (!ws)
		fail("out of memory");
	for (unsigned t = 0; t < nthreads; t++) {
		struct worker *w = &ws[t];

		w->id = t;
		w->rng = seed ^ (t + 1) * 0xd1b54a32d192ed03ull;
		w->data = malloc(DATA_BYTES);
		w->out = malloc(DATA_BYTES);
		w->junk = malloc(ZF_UNIT_MAX);
		w->cmp = malloc(MAX_JOBS * bound(65536) > bound(ZF_UNIT_MAX)
					? MAX_JOBS * bound(65536)
					: bound(ZF_UNIT_MAX));
		if (!w->data || !w->out || !w->junk || !w->cmp)
			fail("out of memory");
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned t = 0; t < nthreads; t++) {
		if (pthread_create(&ws[t].thread, NULL, worker_main, &ws[t]))
			fail("pthread_create");
	}
	if (pthread_create(&stats_thread, NULL, stats_main, NULL))
		fail("pthread_create");
	for (unsigned t = 0; t < nthreads; t++)
		pthread_join(ws[t].thread, NULL);
	pthread_join(stats_thread, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);

	for (unsigned t = 0; t < nthreads; t++) {
		const struct worker *w = &ws[t];
		const uint64_t v[10] = { w->batches, w->jobs,	    w->failed, w->units,
					 w->bytes,   w->e2big,	    w->einval, w->ebadmsg,
					 w->splits,  w->new_batches };

		for (int i = 0; i < 10; i++)
			sum[i] += v[i];
	}
	zf_engines_get_stats(engines, &s, sizeof(s));
	printf("engine_stress: %.1f s: %llu batches, %llu jobs (%llu by engines, %llu by "
	       "waiters), %llu units round-tripped (%llu MiB), %llu -E2BIG, %llu -EINVAL, "
	       "%llu -EBADMSG, %llu split batches, %llu batch renewals, %llu stats reads\n",
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
	       (unsigned long long)s.batches, (unsigned long long)s.jobs,
	       (unsigned long long)s.jobs_by_engines, (unsigned long long)s.jobs_by_waiters,
	       (unsigned long long)sum[3], (unsigned long long)(sum[4] >> 20),
	       (unsigned long long)sum[5], (unsigned long long)sum[6], (unsigned long long)sum[7],
	       (unsigned long long)sum[8], (unsigned long long)sum[9],
	       (unsigned long long)stats_reads);
	if (s.batches != sum[0] || s.jobs != sum[1] || s.failed_jobs != sum[2] ||
	    s.jobs_by_engines + s.jobs_by_waiters != s.jobs ||
	    (nengines == 0 && s.jobs_by_engines != 0))
		fail("stats: %llu batches, %llu jobs (%llu + %llu run), %llu failed; the "
		     "threads submitted %llu batches, %llu jobs, %llu failed",
		     (unsigned long long)s.batches, (unsigned long long)s.jobs,
		     (unsigned long long)s.jobs_by_engines, (unsigned long long)s.jobs_by_waiters,
		     (unsigned long long)s.failed_jobs, (unsigned long long)sum[0],
		     (unsigned long long)sum[1], (unsigned long long)sum[2]);
	seen_failed = sum[5] + sum[6] + sum[7];
	if (sum[2] != seen_failed)
		fail("%llu failed jobs counted by waits, %llu seen in statuses",
		     (unsigned long long)sum[2], (unsigned long long)seen_failed);

	zf_engines_destroy(engines);
	for (unsigned t = 0; t < nthreads; t++) {
		free(ws[t].data);
		free(ws[t].out);
		free(ws[t].junk);
		free(ws[t].cmp);
	}
	free(ws);
	printf("engine_stress: passed\n");
	return 0;
}
