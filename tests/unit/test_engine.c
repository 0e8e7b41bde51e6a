/*
 * test_engine.c - compression engines and batches: round trips with 0, 1, 2 and 4
 * engines, lz4 and zstd:1, on 2 MiB of mixed data cut into 4 KiB, 64 KiB and 2 MiB units;
 * per-job status (-E2BIG, -EBADMSG, -EINVAL) and argument checks; batch reuse and -EBUSY;
 * queue order (an urgent batch is taken before a big normal batch queued ahead of it, and
 * a small batch never waits behind it), made deterministic with the engines' internal job
 * budget rather than with timing; destroy with idle engines, with work queued and with
 * engines running; per-thread context reuse; exact counters with several submitters;
 * completion callbacks, once per job, in the thread that ran it; compress jobs into the
 * engine's own output buffer (ZF_JOB_ENGINE_DST).
 *
 * cmocka's asserts only run in the main thread: helper threads record what they saw.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <xxhash.h>

#include "zfolio.h"
#include "../../src/common/checksum.h"
#include "../../src/engine/engine.h"
#include "testutil.h"
#include "codec_pick.h"

#define FOLIO ((size_t)2 << 20)

/* Room for any codec's output, incompressible data included. */
static size_t cap_for(size_t len)
{
	return len + len / 128 + 256;
}

/* Compressible like program memory: mostly text, some zero, same-filled, half and random pages. */
static void fill_mixed(uint8_t *buf, size_t len, uint64_t seed)
{
	static const enum pattern mix[10] = { PAT_ZERO, PAT_SAME, PAT_TEXT, PAT_TEXT, PAT_TEXT,
					      PAT_TEXT, PAT_HALF, PAT_HALF, PAT_TEXT, PAT_RANDOM };

	for (size_t off = 0; off < len; off += ZF_PAGE_SIZE) {
		uint64_t s = seed ^ (off + 1) * 0x9e3779b97f4a7c15ull;
		const size_t n = ZF_MIN(ZF_PAGE_SIZE, len - off);

		fill_pattern(buf + off, n, mix[test_rand(&s) % 10], seed + off);
	}
}

static const zf_codec *codec_or_null(const char *name)
{
	const zf_codec *c = NULL;

	return zf_codec_find(name, &c) == 0 ? c : NULL;
}

/* The codec called name; without it in this build the test skips, and says why. */
static const zf_codec *codec_or_skip(const char *name)
{
	const zf_codec *c = codec_or_null(name);

	if (!c) {
		print_message("codec %s is not in this build: skipped\n", name);
		skip();
	}
	return c;
}

static zf_engines *new_engines(unsigned n)
{
	zf_engines *e = NULL;

	assert_int_equal(zf_engines_create(n, &e), 0);
	assert_non_null(e);
	assert_int_equal(zf_engines_count(e), n);
	return e;
}

static zf_batch *new_batch(zf_engines *e, unsigned flags)
{
	zf_batch *b = NULL;

	assert_int_equal(zf_batch_create(e, flags, &b), 0);
	assert_non_null(b);
	return b;
}

/* One buffer cut into units, with its compress and decompress jobs. */
struct work {
	uint8_t *src, *cmp, *out;
	size_t len, unit, units, cap;
	zf_job *cjobs, *djobs;
};

static void work_init(struct work *w, const zf_codec *codec, size_t len, size_t unit, uint64_t seed)
{
	memset(w, 0, sizeof(*w));
	w->len = len;
	w->unit = unit;
	w->units = (len + unit - 1) / unit;
	w->cap = cap_for(unit);
	w->src = malloc(len);
	w->out = malloc(len);
	w->cmp = malloc(w->units * w->cap);
	w->cjobs = calloc(w->units, sizeof(zf_job));
	w->djobs = calloc(w->units, sizeof(zf_job));
	assert_true(w->src && w->out && w->cmp && w->cjobs && w->djobs);
	fill_mixed(w->src, len, seed);
	memset(w->out, 0xa5, len);
	for (size_t i = 0; i < w->units; i++) {
		zf_job *j = &w->cjobs[i];

		j->codec = codec;
		j->op = ZF_JOB_COMPRESS;
		j->src = w->src + i * unit;
		j->src_len = ZF_MIN(unit, len - i * unit);
		j->dst = w->cmp + i * w->cap;
		j->dst_cap = w->cap;
		j->status = INT_MIN;
	}
}

/* After the compress jobs: decompress jobs for each unit. */
static void work_prepare_decompress(struct work *w)
{
	for (size_t i = 0; i < w->units; i++) {
		zf_job *j = &w->djobs[i];

		assert_true(w->cjobs[i].status > 0);
		j->codec = w->cjobs[i].codec;
		j->op = ZF_JOB_DECOMPRESS;
		j->src = w->cmp + i * w->cap;
		j->src_len = (size_t)w->cjobs[i].status;
		j->dst = w->out + i * w->unit;
		j->dst_cap = w->cjobs[i].src_len;
		j->status = INT_MIN;
	}
}

static void work_check(const struct work *w)
{
	for (size_t i = 0; i < w->units; i++)
		assert_int_equal(w->djobs[i].status, (int)w->cjobs[i].src_len);
	assert_memory_equal(w->out, w->src, w->len);
}

static void work_free(struct work *w)
{
	free(w->src);
	free(w->out);
	free(w->cmp);
	free(w->cjobs);
	free(w->djobs);
}

/* Compresses and decompresses w with batch b, checking every job and byte. */
static void work_round_trip(zf_batch *b, struct work *w)
{
	assert_int_equal(zf_batch_run(b, w->cjobs, w->units), 0);
	work_prepare_decompress(w);
	assert_int_equal(zf_batch_run(b, w->djobs, w->units), 0);
	work_check(w);
}

static void check_stats(zf_engines *e, uint64_t batches, uint64_t jobs, uint64_t failed)
{
	zf_engines_stats s;

	zf_engines_get_stats(e, &s, sizeof(s));
	assert_int_equal(s.batches, batches);
	assert_int_equal(s.jobs, jobs);
	assert_int_equal(s.jobs_by_engines + s.jobs_by_waiters, jobs);
	assert_int_equal(s.failed_jobs, failed);
	if (zf_engines_count(e) == 0)
		assert_int_equal(s.jobs_by_engines, 0);
}

/* -------------------------------------------------------------------------------- */

/* A test run once per codec (its name the test's state), named after it. */
#define CODEC_TEST(fn, codec, seed)                                                                \
	{                                                                                          \
#fn " " codec, fn, NULL, NULL, (void *)&(const struct codec_case)                  \
		{                                                                                  \
			codec, seed                                                                \
		}                                                                                  \
	}

struct codec_case {
	const char *codec;
	unsigned seed;
};

static void test_round_trip(void **state)
{
	static const unsigned engine_counts[] = { 0, 1, 2, 4 };
	static const size_t units[] = { 4096, 65536, FOLIO };
	const struct codec_case *cc = *state;
	const zf_codec *codec = codec_or_skip(cc->codec);

	for (size_t n = 0; n < ZF_ARRAY_SIZE(engine_counts); n++) {
		for (size_t u = 0; u < ZF_ARRAY_SIZE(units); u++) {
			zf_engines *e = new_engines(engine_counts[n]);
			zf_batch *b = new_batch(e, 0);
			struct work w;

			work_init(&w, codec, FOLIO, units[u], cc->seed + 10 * n + u);
			work_round_trip(b, &w);
			check_stats(e, 2, 2 * w.units, 0);
			zf_batch_destroy(b);
			zf_engines_destroy(e);
			work_free(&w);
		}
	}
}

/* Every way a job can fail, in batches that also hold good jobs. */
static void job_status_case(unsigned nengines, const zf_codec *codec)
{
	enum { PAGE = 4096 };
	zf_engines *e = new_engines(nengines);
	zf_batch *b = new_batch(e, 0);
	uint8_t *text = malloc(PAGE), *rnd = malloc(PAGE), *out = malloc(PAGE);
	uint8_t *cmp = malloc(cap_for(PAGE)), *junk = malloc(cap_for(PAGE));
	zf_job c[8], d[5];
	int clen;

	assert_true(text && rnd && out && cmp && junk);
	fill_text(text, PAGE, 7);
	fill_random(rnd, PAGE, 8);
	for (size_t i = 0; i < ZF_ARRAY_SIZE(c); i++)
		c[i] = (zf_job){ .codec = codec,
				 .op = ZF_JOB_COMPRESS,
				 .src = text,
				 .src_len = PAGE,
				 .dst = junk,
				 .dst_cap = cap_for(PAGE),
				 .status = INT_MIN };
	c[0].src = rnd; /* incompressible into a quarter */
	c[0].dst_cap = PAGE / 4;
	c[1].dst = cmp; /* the good one */
	c[2].codec = NULL;
	c[3].src = NULL;
	c[4].dst = NULL;
	c[5].op = (enum zf_job_op)7;
	c[6].src_len = 0;
	c[7].src_len = ZF_UNIT_MAX + 1;
	assert_int_equal(zf_batch_run(b, c, ZF_ARRAY_SIZE(c)), 7);
	assert_int_equal(c[0].status, -E2BIG);
	assert_true(c[1].status > 0);
	for (size_t i = 2; i < ZF_ARRAY_SIZE(c); i++)
		assert_int_equal(c[i].status, -EINVAL);
	clen = c[1].status;

	for (size_t i = 0; i < ZF_ARRAY_SIZE(d); i++)
		d[i] = (zf_job){ .codec = codec,
				 .op = ZF_JOB_DECOMPRESS,
				 .src = cmp,
				 .src_len = (size_t)clen,
				 .dst = out,
				 .dst_cap = PAGE,
				 .status = INT_MIN };
	d[1].src_len = (size_t)clen / 2; /* truncated */
	d[2].dst_cap = PAGE - 96; /* decodes to another length */
	d[3].dst_cap = 0;
	d[4].dst_cap = ZF_UNIT_MAX + 1;
	/* d[0] must see the whole buffer: the bad ones write into junk. */
	for (size_t i = 1; i < ZF_ARRAY_SIZE(d); i++)
		d[i].dst = junk;
	assert_int_equal(zf_batch_run(b, d, ZF_ARRAY_SIZE(d)), 4);
	assert_int_equal(d[0].status, PAGE);
	assert_memory_equal(out, text, PAGE);
	assert_int_equal(d[1].status, -EBADMSG);
	assert_int_equal(d[2].status, -EBADMSG);
	assert_int_equal(d[3].status, -EINVAL);
	assert_int_equal(d[4].status, -EINVAL);

	check_stats(e, 2, ZF_ARRAY_SIZE(c) + ZF_ARRAY_SIZE(d), 11);
	zf_batch_destroy(b);
	zf_engines_destroy(e);
	free(text);
	free(rnd);
	free(out);
	free(cmp);
	free(junk);
}

static void test_job_status(void **state)
{
	const struct codec_case *cc = *state;
	const zf_codec *codec = codec_or_skip(cc->codec);

	job_status_case(0, codec);
	job_status_case(2, codec);
}

static void test_bad_arguments(void **state)
{
	zf_engines *e = NULL;
	zf_batch *b = NULL;
	zf_engines_stats s;
	zf_job job = { 0 };

	(void)state;
	assert_int_equal(zf_engines_create(ZF_ENGINES_MAX + 1, &e), -EINVAL);
	assert_null(e);
	assert_int_equal(zf_engines_create(1, NULL), -EINVAL);
	e = new_engines(1);
	assert_int_equal(zf_batch_create(NULL, 0, &b), -EINVAL);
	assert_int_equal(zf_batch_create(e, 0, NULL), -EINVAL);
	assert_int_equal(zf_batch_create(e, 4, &b), -EINVAL);
	assert_null(b);
	b = new_batch(e, ZF_BATCH_URGENT);
	assert_int_equal(zf_batch_submit(NULL, &job, 1), -EINVAL);
	assert_int_equal(zf_batch_submit(b, NULL, 1), -EINVAL);
	assert_int_equal(zf_batch_submit(b, &job, 0), -EINVAL);
	assert_int_equal(zf_batch_submit(b, &job, (size_t)INT_MAX + 1), -EINVAL);
	assert_int_equal(zf_batch_run(b, &job, 0), -EINVAL);
	assert_int_equal(zf_batch_wait(NULL), -EINVAL);
	assert_int_equal(zf_batch_wait(b), 0); /* nothing submitted */
	/* An all-zero job: no codec. */
	assert_int_equal(zf_batch_run(b, &job, 1), 1);
	assert_int_equal(job.status, -EINVAL);
	check_stats(e, 1, 1, 1);

	memset(&s, 0xff, sizeof(s));
	zf_engines_get_stats(NULL, &s, sizeof(s));
	assert_int_equal(s.batches + s.jobs + s.jobs_by_engines + s.jobs_by_waiters + s.failed_jobs,
			 0);
	zf_engines_get_stats(e, NULL, 0);
	assert_int_equal(zf_engines_count(NULL), 0);
	zf_batch_destroy(NULL);
	zf_engines_destroy(NULL);
	zf_batch_destroy(b);
	zf_engines_destroy(e);
}

/*
 * ZF_BATCH_NO_HELP: with engines, the waiter runs none of the jobs (they all count as the
 * engines'); with none, it runs them all. Checksums come with the output on request.
 */
static void test_no_help_and_checksum(void **state)
{
	enum { N = 16, UNIT = 65536 };
	uint8_t *src = malloc(N * UNIT), *dst = malloc(N * UNIT);
	const zf_codec *codec;
	zf_job jobs[N];
	zf_engines_stats st;

	(void)state;
	assert_non_null(src);
	assert_non_null(dst);
	assert_int_equal(zf_codec_find(test_codec_name(), &codec), 0);
	fill_mixed(src, N * UNIT, 7);
	for (unsigned n_engines = 0; n_engines <= 2; n_engines += 2) {
		zf_engines *e = new_engines(n_engines);
		zf_batch *b = new_batch(e, ZF_BATCH_NO_HELP);

		for (int i = 0; i < N; i++)
			jobs[i] = (zf_job){ .codec = codec,
					    .op = ZF_JOB_COMPRESS,
					    .flags = i % 2 ? ZF_JOB_CHECKSUM : 0,
					    .src = src + (size_t)i * UNIT,
					    .src_len = UNIT,
					    .dst = dst + (size_t)i * UNIT,
					    .dst_cap = UNIT - 1 };
		assert_int_equal(zf_batch_run(b, jobs, N), 0);
		for (int i = 0; i < N; i++) {
			assert_true(jobs[i].status > 0);
			if (i % 2)
				assert_true(jobs[i].checksum ==
					    XXH3_64bits(jobs[i].dst, (size_t)jobs[i].status));
			else
				assert_true(jobs[i].checksum == 0);
		}
		zf_engines_get_stats(e, &st, sizeof(st));
		assert_int_equal(st.jobs, N);
		assert_int_equal(st.jobs_by_waiters, n_engines ? 0 : N);
		assert_int_equal(st.jobs_by_engines, n_engines ? N : 0);
		zf_batch_destroy(b);
		zf_engines_destroy(e);
	}
	free(src);
	free(dst);
}

/* What the completion callback saw (jobs complete in several threads at once). */
struct completion_log {
	zf_job *jobs;
	pthread_t caller;
	atomic_uint calls[512];
	atomic_uint in_caller, status_bad, checksum_bad;
};

static void log_completion(zf_job *job)
{
	struct completion_log *log = job->priv;
	const size_t i = (size_t)(job - log->jobs);

	atomic_fetch_add(&log->calls[i], 1);
	if (pthread_equal(pthread_self(), log->caller))
		atomic_fetch_add(&log->in_caller, 1);
	if (job->status <= 0)
		atomic_fetch_add(&log->status_bad, 1);
	else if (job->checksum != XXH3_64bits(job->dst, (size_t)job->status))
		atomic_fetch_add(&log->checksum_bad, 1);
	if (i % 100 == 7)
		job->status = -EIO; /* what the callback did with the output failed */
}

/*
 * A job's completion runs once, after the job, in the thread that ran it (with NO_HELP
 * and engines: never the waiter), sees the status and checksum, and an error it sets
 * counts as the job's. The engines claim small jobs several at a time: every job of a
 * 512-job batch must still complete exactly once.
 */
static void test_completion(void **state)
{
	const zf_codec *codec = codec_or_skip(test_codec_name());
	static struct completion_log log;
	struct work w;

	(void)state;
	work_init(&w, codec, FOLIO, 4096, 31);
	for (unsigned n_engines = 0; n_engines <= 2; n_engines += 2) {
		for (unsigned flags = 0; flags <= ZF_BATCH_NO_HELP; flags += ZF_BATCH_NO_HELP) {
			zf_engines *e = new_engines(n_engines);
			zf_batch *b = new_batch(e, flags);
			unsigned failed = 0;

			memset(&log, 0, sizeof(log));
			log.jobs = w.cjobs;
			log.caller = pthread_self();
			for (size_t i = 0; i < w.units; i++) {
				w.cjobs[i].flags = ZF_JOB_CHECKSUM;
				w.cjobs[i].complete = log_completion;
				w.cjobs[i].priv = &log;
				w.cjobs[i].status = INT_MIN;
				failed += i % 100 == 7;
			}
			assert_int_equal(zf_batch_run(b, w.cjobs, w.units), (int)failed);
			for (size_t i = 0; i < w.units; i++) {
				assert_int_equal(atomic_load(&log.calls[i]), 1);
				if (i % 100 == 7)
					assert_int_equal(w.cjobs[i].status, -EIO);
				else
					assert_true(w.cjobs[i].status > 0);
			}
			assert_int_equal(atomic_load(&log.status_bad), 0);
			assert_int_equal(atomic_load(&log.checksum_bad), 0);
			if (n_engines && (flags & ZF_BATCH_NO_HELP))
				assert_int_equal(atomic_load(&log.in_caller), 0);
			if (!n_engines)
				assert_int_equal(atomic_load(&log.in_caller), w.units);
			check_stats(e, 1, w.units, failed);
			zf_batch_destroy(b);
			zf_engines_destroy(e);
		}
	}
	work_free(&w);
}

/* Where ZF_JOB_ENGINE_DST jobs' completions copy their output: cap bytes per job. */
struct copy_out {
	zf_job *jobs;
	uint8_t *copy;
	size_t cap;
	atomic_uint bad;
};

static void copy_completion(zf_job *job)
{
	struct copy_out *c = job->priv;
	const size_t i = (size_t)(job - c->jobs);

	if (!job->dst || job->status <= 0 ||
	    job->checksum != XXH3_64bits(job->dst, (size_t)job->status))
		atomic_fetch_add(&c->bad, 1);
	else
		memcpy(c->copy + i * c->cap, job->dst, (size_t)job->status);
}

/* w's compress jobs with no output buffer of their own, complete copying through c. */
static void engine_dst_jobs(struct work *w, struct copy_out *c, void (*complete)(zf_job *))
{
	*c = (struct copy_out){ .jobs = w->cjobs, .copy = w->cmp, .cap = w->cap };
	memset(w->cmp, 0, w->units * w->cap);
	for (size_t i = 0; i < w->units; i++) {
		w->cjobs[i].flags = ZF_JOB_CHECKSUM | ZF_JOB_ENGINE_DST;
		w->cjobs[i].dst = NULL;
		w->cjobs[i].complete = complete;
		w->cjobs[i].priv = c;
	}
}

/*
 * ZF_JOB_ENGINE_DST: compress jobs with no output buffer of their own. Each completion
 * sees its output (and checksum) in the buffer of the thread that ran it and copies it
 * out; dst is NULL again after, and the copies decompress to the source, with 0 and 2
 * engines, 4 KiB and 64 KiB units. A decompress job, or one without a completion, fails
 * with -EINVAL.
 */
static void engine_dst_case(const zf_codec *codec, unsigned n_engines, size_t unit)
{
	zf_engines *e = new_engines(n_engines);
	zf_batch *b = new_batch(e, 0);
	struct copy_out c;
	struct work w;
	zf_job bad[2];

	work_init(&w, codec, FOLIO, unit, 41 + unit);
	engine_dst_jobs(&w, &c, copy_completion);
	assert_int_equal(zf_batch_run(b, w.cjobs, w.units), 0);
	assert_int_equal(atomic_load(&c.bad), 0);
	for (size_t i = 0; i < w.units; i++)
		assert_null(w.cjobs[i].dst);
	work_prepare_decompress(&w);
	assert_int_equal(zf_batch_run(b, w.djobs, w.units), 0);
	work_check(&w);

	bad[0] = w.cjobs[0];
	bad[0].complete = NULL;
	bad[1] = w.djobs[0];
	bad[1].flags = ZF_JOB_ENGINE_DST;
	bad[1].complete = copy_completion; /* it sees the failure */
	bad[1].priv = &c;
	assert_int_equal(zf_batch_run(b, bad, 2), 2);
	assert_int_equal(bad[0].status, -EINVAL);
	assert_int_equal(bad[1].status, -EINVAL);
	zf_batch_destroy(b);
	zf_engines_destroy(e);
	work_free(&w);
}

/* Runs a ZF_JOB_ENGINE_DST case with the tests' codec, 0 and 2 engines, 4k and 64k units. */
static void each_engine_dst_case(void (*run)(const zf_codec *, unsigned, size_t))
{
	const zf_codec *codec = codec_or_skip(test_codec_name());

	for (unsigned n_engines = 0; n_engines <= 2; n_engines += 2)
		for (size_t unit = 4096; unit <= 65536; unit *= 16)
			run(codec, n_engines, unit);
}

static void test_engine_dst(void **state)
{
	(void)state;
	each_engine_dst_case(engine_dst_case);
}

/* A copy left for later by the thread that ran the job (engine_batch_set_flush()). */
static _Thread_local struct {
	struct copy_out *c;
	const void *out;
	size_t i, len;
} left;
static atomic_uint flushes;

static void copy_left(void)
{
	if (!left.c)
		return;
	memcpy(left.c->copy + left.i * left.c->cap, left.out, left.len);
	left.c = NULL;
}

static void flush_left(void)
{
	atomic_fetch_add(&flushes, 1);
	copy_left();
}

/* As copy_completion(), but the copy waits for the thread's next job, or its flush. */
static void copy_later_completion(zf_job *job)
{
	struct copy_out *c = job->priv;

	copy_left();
	if (!job->dst || job->status <= 0 ||
	    job->checksum != XXH3_64bits(job->dst, (size_t)job->status)) {
		atomic_fetch_add(&c->bad, 1);
		return;
	}
	left.c = c;
	left.out = job->dst;
	left.i = (size_t)(job - c->jobs);
	left.len = (size_t)job->status;
}

/*
 * With a flush: a ZF_JOB_ENGINE_DST job's output stays where its completion found it
 * through the next job of the same thread, and every thread that ran jobs flushes before
 * they count as done. The completions copy each output a job late, and the copies must
 * all be there, whole, when the batch is waited for (0 and 2 engines, 4 and 64 KiB).
 */
static void engine_dst_flush_case(const zf_codec *codec, unsigned n_engines, size_t unit)
{
	zf_engines *e = new_engines(n_engines);
	zf_batch *b = new_batch(e, 0);
	struct copy_out c;
	struct work w;

	engine_batch_set_flush(b, flush_left);
	atomic_store(&flushes, 0);
	work_init(&w, codec, FOLIO, unit, 43 + unit);
	engine_dst_jobs(&w, &c, copy_later_completion);
	assert_int_equal(zf_batch_run(b, w.cjobs, w.units), 0);
	assert_int_equal(atomic_load(&c.bad), 0);
	assert_true(atomic_load(&flushes) > 0);
	work_prepare_decompress(&w);
	assert_int_equal(zf_batch_run(b, w.djobs, w.units), 0);
	work_check(&w);
	zf_batch_destroy(b);
	zf_engines_destroy(e);
	work_free(&w);
}

static void test_engine_dst_flush(void **state)
{
	(void)state;
	each_engine_dst_case(engine_dst_flush_case);
}

static void test_batch_reuse(void **state)
{
	const zf_codec *codec = codec_or_skip(test_codec_name());
	zf_engines *e;
	zf_batch *b;
	struct work w;
	uint64_t batches = 0, jobs = 0;

	(void)state;
	e = new_engines(2);
	b = new_batch(e, 0);
	for (unsigned round = 0; round < 60; round++) {
		const size_t unit = (size_t)4096 << (round % 5);
		const size_t len = unit * (1 + round % 23);

		work_init(&w, codec, len, unit, round);
		work_round_trip(b, &w);
		batches += 2;
		jobs += 2 * w.units;
		work_free(&w);
	}
	check_stats(e, batches, jobs, 0);

	/* -EBUSY until the wait. */
	work_init(&w, codec, 64 * 4096, 4096, 99);
	assert_int_equal(zf_batch_submit(b, w.cjobs, w.units), 0);
	assert_int_equal(zf_batch_submit(b, w.cjobs, w.units), -EBUSY);
	assert_int_equal(zf_batch_run(b, w.cjobs, w.units), -EBUSY);
	assert_int_equal(zf_batch_wait(b), 0);
	assert_int_equal(zf_batch_wait(b), 0);
	work_prepare_decompress(&w);
	assert_int_equal(zf_batch_submit(b, w.djobs, w.units), 0);
	assert_int_equal(zf_batch_wait(b), 0);
	work_check(&w);
	check_stats(e, batches + 2, jobs + 2 * w.units, 0);
	work_free(&w);

	/* Destroying a batch with jobs in flight waits for them. */
	work_init(&w, codec, FOLIO, 4096, 100);
	assert_int_equal(zf_batch_submit(b, w.cjobs, w.units), 0);
	zf_batch_destroy(b);
	for (size_t i = 0; i < w.units; i++)
		assert_true(w.cjobs[i].status > 0);
	work_free(&w);
	zf_engines_destroy(e);
}

/* Waits (without timing assumptions) until the engines have taken their whole budget. */
static void wait_budget_spent(zf_engines *e)
{
	while (engine_budget(e) != 0)
		sched_yield();
}

/*
 * One engine, held. A 512-job compress batch is queued, then an urgent one-job
 * decompress: the engine, allowed one job, must take the urgent one. A normal one-job
 * batch queued behind the big one runs in its waiter. Only then does the big batch run.
 */
static void test_urgent_first(void **state)
{
	const zf_codec *codec = codec_or_skip(test_codec_name());
	zf_engines *e;
	zf_batch *big, *urgent, *small;
	struct work w, u;
	zf_engines_stats s;

	(void)state;
	e = new_engines(1);
	big = new_batch(e, 0);
	urgent = new_batch(e, ZF_BATCH_URGENT);
	small = new_batch(e, 0);
	work_init(&u, codec, 2 * 65536, 65536, 5);
	assert_int_equal(zf_batch_run(small, u.cjobs, u.units), 0);
	work_prepare_decompress(&u);
	check_stats(e, 1, 2, 0);

	engine_set_budget(e, 0);
	work_init(&w, codec, FOLIO, 4096, 6);
	assert_int_equal(w.units, 512);
	assert_int_equal(zf_batch_submit(big, w.cjobs, w.units), 0);
	assert_int_equal(zf_batch_submit(urgent, &u.djobs[0], 1), 0);
	zf_engines_get_stats(e, &s, sizeof(s));
	engine_set_budget(e, 1);
	wait_budget_spent(e);
	/* The engine took the urgent job: its waiter has nothing left to run. */
	assert_int_equal(zf_batch_wait(urgent), 0);
	assert_int_equal(u.djobs[0].status, 65536);
	{
		zf_engines_stats t;

		zf_engines_get_stats(e, &t, sizeof(t));
		assert_int_equal(t.jobs_by_engines - s.jobs_by_engines, 1);
		assert_int_equal(t.jobs_by_waiters, s.jobs_by_waiters);
		s = t;
	}
	/* A one-job normal batch behind the big one: its waiter runs it at once. */
	assert_int_equal(zf_batch_run(small, &u.djobs[1], 1), 0);
	work_check(&u);
	{
		zf_engines_stats t;

		zf_engines_get_stats(e, &t, sizeof(t));
		assert_int_equal(t.jobs_by_engines, s.jobs_by_engines);
		assert_int_equal(t.jobs_by_waiters, s.jobs_by_waiters + 1);
	}
	/* Nothing of the big batch ran while it was held. */
	for (size_t i = 0; i < w.units; i++)
		assert_int_equal(w.cjobs[i].status, INT_MIN);

	engine_set_budget(e, -1);
	assert_int_equal(zf_batch_wait(big), 0);
	work_prepare_decompress(&w);
	assert_int_equal(zf_batch_run(big, w.djobs, w.units), 0);
	work_check(&w);
	check_stats(e, 5, 2 + 1 + 512 + 1 + 512, 0);

	zf_batch_destroy(big);
	zf_batch_destroy(urgent);
	zf_batch_destroy(small);
	zf_engines_destroy(e);
	work_free(&w);
	work_free(&u);
}

struct urgent_arg {
	zf_engines *e;
	zf_job *job;
	int create_ret, run_ret;
	zf_engines_stats after; /* when its wait returned */
};

static void *urgent_thread(void *p)
{
	struct urgent_arg *a = p;
	zf_batch *b = NULL;

	a->create_ret = zf_batch_create(a->e, ZF_BATCH_URGENT, &b);
	if (a->create_ret == 0) {
		a->run_ret = zf_batch_run(b, a->job, 1);
		zf_engines_get_stats(a->e, &a->after, sizeof(a->after));
		zf_batch_destroy(b);
	}
	return NULL;
}

/*
 * The same from another thread, with the engine busy on the big batch: it may run at
 * most 256 jobs (budget), so the big batch cannot be complete when the urgent one is,
 * however the threads are scheduled.
 */
static void test_urgent_from_thread(void **state)
{
	const zf_codec *codec = codec_or_skip(test_codec_name());
	struct urgent_arg a = { 0 };
	zf_engines_stats s;
	zf_engines *e;
	zf_batch *big, *b;
	struct work w, u;
	pthread_t t;

	(void)state;
	e = new_engines(1);
	big = new_batch(e, 0);
	b = new_batch(e, 0);
	work_init(&u, codec, 65536, 65536, 11);
	assert_int_equal(zf_batch_run(b, u.cjobs, 1), 0);
	work_prepare_decompress(&u);
	zf_batch_destroy(b);

	zf_engines_get_stats(e, &s, sizeof(s));
	engine_set_budget(e, 256);
	work_init(&w, codec, FOLIO, 4096, 12);
	assert_int_equal(zf_batch_submit(big, w.cjobs, w.units), 0);
	a.e = e;
	a.job = &u.djobs[0];
	assert_int_equal(pthread_create(&t, NULL, urgent_thread, &a), 0);
	pthread_join(t, NULL);
	assert_int_equal(a.create_ret, 0);
	assert_int_equal(a.run_ret, 0);
	work_check(&u);
	/*
	 * Since the budget was set the engine ran at most 256 jobs, and the only waiter was the
	 * urgent one's: at most 256 of the big batch's 512 had run when the urgent one was done.
	 */
	assert_true(a.after.jobs_by_engines - s.jobs_by_engines <= 256);
	assert_true(a.after.jobs_by_waiters - s.jobs_by_waiters <= 1);

	engine_set_budget(e, -1);
	assert_int_equal(zf_batch_wait(big), 0);
	work_prepare_decompress(&w);
	assert_int_equal(zf_batch_run(big, w.djobs, w.units), 0);
	work_check(&w);
	check_stats(e, 4, 1 + 512 + 1 + 512, 0);
	zf_batch_destroy(big);
	zf_engines_destroy(e);
	work_free(&w);
	work_free(&u);
}

/* Destroy with work queued (held) and with engines running: the waiters finish it. */
static void test_destroy_with_work(void **state)
{
	const zf_codec *codec = codec_or_skip(test_codec_name());
	zf_engines *e;
	zf_batch *b, *b2;
	struct work w, w2;

	(void)state;
	e = new_engines(2);
	b = new_batch(e, 0);
	b2 = new_batch(e, ZF_BATCH_URGENT);
	engine_set_budget(e, 0);
	work_init(&w, codec, FOLIO, 65536, 21);
	work_init(&w2, codec, FOLIO, 4096, 22);
	assert_int_equal(zf_batch_submit(b, w.cjobs, w.units), 0);
	assert_int_equal(zf_batch_submit(b2, w2.cjobs, w2.units), 0);
	zf_engines_destroy(e);
	/* The batches outlive their engines: waits run what was queued, submits run inline. */
	assert_int_equal(zf_batch_wait(b2), 0);
	assert_int_equal(zf_batch_wait(b), 0);
	work_prepare_decompress(&w);
	work_prepare_decompress(&w2);
	assert_int_equal(zf_batch_run(b, w.djobs, w.units), 0);
	assert_int_equal(zf_batch_run(b2, w2.djobs, w2.units), 0);
	work_check(&w);
	work_check(&w2);
	zf_batch_destroy(b);
	zf_batch_destroy(b2);
	work_free(&w);
	work_free(&w2);

	/* Engines busy when destroyed. */
	for (unsigned round = 0; round < 10; round++) {
		e = new_engines(1 + round % 3);
		b = new_batch(e, 0);
		work_init(&w, codec, FOLIO, 4096, 30 + round);
		assert_int_equal(zf_batch_submit(b, w.cjobs, w.units), 0);
		if (round % 2)
			sched_yield();
		zf_engines_destroy(e);
		assert_int_equal(zf_batch_wait(b), 0);
		work_prepare_decompress(&w);
		assert_int_equal(zf_batch_run(b, w.djobs, w.units), 0);
		work_check(&w);
		zf_batch_destroy(b);
		work_free(&w);
	}
}

static void test_create_destroy_cycles(void **state)
{
	const zf_codec *codec = codec_or_skip(test_codec_name());
	struct work w;

	(void)state;
	work_init(&w, codec, 8 * 4096, 4096, 40);
	for (unsigned i = 0; i < 200; i++) {
		zf_engines *e = new_engines(i % 5);

		if (i % 3 == 1) {
			/* Idle engines: give them time to go to sleep. */
			sched_yield();
		} else if (i % 3 == 2) {
			zf_batch *b = new_batch(e, i % 2 ? ZF_BATCH_URGENT : 0);

			assert_int_equal(zf_batch_run(b, w.cjobs, w.units), 0);
			zf_batch_destroy(b);
		}
		zf_engines_destroy(e);
	}
	work_free(&w);
}

/*
 * The checksum a job and the store compute (AVX2 where the CPU has it) is libxxhash's
 * XXH3_64bits() to the bit, at every length XXH3 treats apart (0, 1-3, 4-8, 9-16,
 * 17-128, 129-240, and the long loop with its stripes, blocks and tail).
 */
static void test_checksum_is_xxh3(void **state)
{
	static const size_t lens[] = { 0,    1,	   3,	 4,    8,    9,		 16,
				       17,   128,  129,	 240,  241,  255,	 256,
				       1023, 1024, 1025, 4096, 4097, 65536 + 13, 1u << 20 };
	const size_t max = 1u << 20;
	uint8_t *buf = malloc(max + 64);
	uint64_t s = 42;

	(void)state;
#ifdef ZF_CHECKSUM_AVX2
	/* The choice was made before main(), and made right. */
	assert_int_equal(checksum_use_avx2, __builtin_cpu_supports("avx2") != 0);
#endif
	assert_non_null(buf);
	for (size_t i = 0; i < max + 64; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		buf[i] = (uint8_t)(s >> 56);
	}
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (size_t off = 0; off < 64; off += 21) /* aligned or not */
			assert_true(zf_checksum(buf + off, lens[i]) ==
				    XXH3_64bits(buf + off, lens[i]));
	free(buf);
}

/* Each thread makes a context once per codec and keeps it; a ninth codec replaces one. */
static void test_context_reuse(void **state)
{
	static const char *const names[] = { "lz4",   "lz4:2", "lz4:3", "lz4:4", "zstd:1",
					     "lz4:5", "lz4:6", "none",	"lz4:7", "lz4:8" };
	const zf_codec *lz4 = codec_or_skip("lz4");
	zf_engines *e;
	zf_batch *b;
	struct work w;

	(void)state;
	e = new_engines(2);
	b = new_batch(e, 0);
	for (unsigned i = 0; i < 16; i++) {
		work_init(&w, lz4, FOLIO / 2, 65536, 50 + i);
		work_round_trip(b, &w);
		work_free(&w);
	}
	/* Two engines and one waiter. */
	assert_true(engine_contexts_created(e) <= 3);
	assert_true(engine_contexts_created(e) >= 1);

	/* More codecs than a cache keeps, mixed in one batch. */
	work_init(&w, lz4, FOLIO, 16384, 60);
	for (size_t i = 0; i < w.units; i++) {
		const zf_codec *c = codec_or_null(names[i % ZF_ARRAY_SIZE(names)]);

		w.cjobs[i].codec = c ? c : lz4;
	}
	work_round_trip(b, &w);
	work_free(&w);
	zf_batch_destroy(b);
	zf_engines_destroy(e);
}

/* Several submitters on shared engines, with a known number of failing jobs. */
struct producer {
	pthread_t thread;
	zf_engines *e;
	const zf_codec *codec;
	unsigned id;
	uint64_t batches, jobs, failed;
	int errors; /* what went wrong, for the main thread to assert */
};

static void *producer_main(void *p)
{
	struct producer *pr = p;
	zf_batch *b = NULL;
	struct work w;

	if (zf_batch_create(pr->e, pr->id % 2 ? ZF_BATCH_URGENT : 0, &b)) {
		pr->errors++;
		return NULL;
	}
	for (unsigned i = 0; i < 24; i++) {
		const size_t unit = (size_t)4096 << (i % 5);
		const size_t bad = i % 3 == 0; /* every third batch: a first job with no codec */
		int ret;

		work_init(&w, pr->codec, unit * (1 + (i + pr->id) % 9), unit, pr->id * 100 + i);
		if (bad)
			w.cjobs[0].codec = NULL;
		ret = zf_batch_run(b, w.cjobs, w.units);
		pr->batches++;
		pr->jobs += w.units;
		pr->failed += bad;
		if (ret != (int)bad || (bad && w.cjobs[0].status != -EINVAL))
			pr->errors++;
		/* The unit that failed is kept as it is; the others come back from the codec. */
		if (bad)
			memcpy(w.out, w.src, w.cjobs[0].src_len);
		for (size_t j = bad; j < w.units; j++) {
			if (w.cjobs[j].status <= 0) {
				pr->errors++;
				continue;
			}
			w.djobs[j] = (zf_job){ .codec = pr->codec,
					       .op = ZF_JOB_DECOMPRESS,
					       .src = w.cmp + j * w.cap,
					       .src_len = (size_t)w.cjobs[j].status,
					       .dst = w.out + j * w.unit,
					       .dst_cap = w.cjobs[j].src_len };
		}
		if (w.units > bad && !pr->errors) {
			ret = zf_batch_run(b, w.djobs + bad, w.units - bad);
			pr->batches++;
			pr->jobs += w.units - bad;
			for (size_t j = bad; j < w.units; j++)
				pr->errors += w.djobs[j].status != (int)w.cjobs[j].src_len;
			if (ret != 0)
				pr->errors++;
		}
		if (memcmp(w.out, w.src, w.len) != 0)
			pr->errors++;
		work_free(&w);
	}
	zf_batch_destroy(b);
	return NULL;
}

static void test_stats_many_producers(void **state)
{
	const zf_codec *codec = codec_or_skip(test_codec_name());
	struct producer pr[4];
	uint64_t batches = 0, jobs = 0, failed = 0;
	zf_engines *e;

	(void)state;
	for (unsigned n = 0; n <= 2; n++) {
		e = new_engines(n);
		batches = jobs = failed = 0;
		for (unsigned t = 0; t < ZF_ARRAY_SIZE(pr); t++) {
			pr[t] = (struct producer){ .e = e, .codec = codec, .id = t };
			assert_int_equal(pthread_create(&pr[t].thread, NULL, producer_main, &pr[t]),
					 0);
		}
		for (unsigned t = 0; t < ZF_ARRAY_SIZE(pr); t++) {
			pthread_join(pr[t].thread, NULL);
			assert_int_equal(pr[t].errors, 0);
			batches += pr[t].batches;
			jobs += pr[t].jobs;
			failed += pr[t].failed;
		}
		check_stats(e, batches, jobs, failed);
		zf_engines_destroy(e);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CODEC_TEST(test_round_trip, "lz4", 0),
		CODEC_TEST(test_round_trip, "zstd:1", 1000),
		CODEC_TEST(test_job_status, "lz4", 0),
		CODEC_TEST(test_job_status, "zstd:1", 0),
		cmocka_unit_test(test_bad_arguments),
		cmocka_unit_test(test_batch_reuse),
		cmocka_unit_test(test_no_help_and_checksum),
		cmocka_unit_test(test_completion),
		cmocka_unit_test(test_engine_dst),
		cmocka_unit_test(test_engine_dst_flush),
		cmocka_unit_test(test_urgent_first),
		cmocka_unit_test(test_urgent_from_thread),
		cmocka_unit_test(test_destroy_with_work),
		cmocka_unit_test(test_create_destroy_cycles),
		cmocka_unit_test(test_context_reuse),
		cmocka_unit_test(test_checksum_is_xxh3),
		cmocka_unit_test(test_stats_many_producers),
	};

	/* ZF_TEST_FILTER=test_urgent* runs the matching tests only. */
	if (getenv("ZF_TEST_FILTER"))
		cmocka_set_test_filter(getenv("ZF_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
