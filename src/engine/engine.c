/*
 * engine.c - compression engines: N worker threads that run batches of compress and
 * decompress jobs, the software analog of Intel IAA's engines (and of the kernel's
 * per-CPU acomp contexts), with the waiting caller as one more engine.
 *
 * Queue. One short mutex guards two FIFO lists of submitted batches, urgent and normal.
 * Under the lock an engine looks at the head batch (urgent list first), claims the
 * batch's next job indexes with an atomic add, unlinks the batch when they were its
 * last, and drops the lock before running the jobs. A claim is about 64 KiB of data
 * (one 64 KiB unit, sixteen 4 KiB pages): one job at a time, two engines on a split
 * 2 MiB folio's 512 jobs of a few microseconds passed its counters' cache line back and
 * forth for every page and compressed neighbouring pages, and ran at 0.82-0.93 of two
 * plain loops over halves of the data; with claims, 0.92-1.01. Once its jobs have run,
 * and before they count as finished (so the batch cannot be gone), the engine claims
 * the batch's next indexes with the same add and no lock, as long as no urgent batch is
 * queued. No lock is held across a claim, a batch or a folio, so an urgent batch
 * submitted while a 2 MiB folio's 512 units are queued is the next thing an engine
 * takes, after at most 64 KiB of work. The waiter claims jobs of its own batch one by
 * one, with the same add and without the lock, so the fault path's one-job decompress
 * runs at once in its own thread even when every engine is busy with someone else's
 * folio.
 *
 * Completion. A batch counts its jobs remaining. Whoever finishes the last one swaps the
 * batch's state word to DONE and makes a futex wake only when the waiter had said it
 * sleeps: no wake per job, none when the waiter is still running jobs itself. The waiter
 * runs what it can claim, unlinks its batch if no engine did, spins briefly, then
 * sleeps on the state word. The swap is the finisher's last touch of the batch, so the
 * waiter may reuse or free it as soon as it reads DONE (a FUTEX_WAKE_PRIVATE that comes
 * after that reads no memory: private futexes are keyed by address, and a waiter that
 * is woken by a stale wake checks its word and sleeps again). A job's completion
 * callback, when it has one, runs in the thread that ran the job, before the job counts.
 *
 * For tests, a job budget (engine.h) holds the engines or lets them take k jobs, so that
 * queue order can be checked without timing.
 *
 * Sleep and wake. An idle engine parks on its own condition variable (under the queue
 * lock) on a LIFO stack of sleepers, so the engine woken first is the one whose caches
 * are warmest, and exactly the engines wanted are woken. A submit of n jobs wakes at most
 * n - 1 sleepers: the waiter is the n-th engine, so a one-job batch costs no wake-up at
 * all. Engines do not spin; a waiter spins a few microseconds before it sleeps.
 *
 * Contexts. A codec context holds the compressor's tables and is not thread-safe: each
 * engine thread keeps a small cache of them keyed by the interned zf_codec pointer, and
 * so does each batch, for the jobs its waiter runs (made on first use, kept across
 * submits, the oldest replaced when a ninth codec comes). The same cache holds the
 * thread's output buffer for ZF_JOB_ENGINE_DST jobs, made on first use and grown to twice
 * the largest dst_cap seen: a job's output is read by its completion while it is still in
 * the cache of the CPU that wrote it, as a hardware engine fills a buffer of its own, and
 * its halves take turns, so that a completion may leave its copy to the next job's
 * (engine_batch_set_flush()).
 *
 * Counters. batches and jobs are counted at submit, jobs_by_engines by each engine in its
 * own cache line before the job counts as finished, jobs_by_waiters and failed_jobs when
 * a wait returns: exact once every batch is waited for, and in any snapshot
 * jobs_by_engines + jobs_by_waiters <= jobs.
 *
 * N = 0: submit only records the jobs and wait runs them in the caller, with no lock.
 * The same holds after zf_engines_destroy(): the threads stop after the job each is
 * running, batches still queued are run by their waiters, and the zf_engines memory
 * (reference counted by its batches) lives until the last batch is destroyed.
 */
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../common/checksum.h"
#include "../common/list.h"
#include "../common/options.h"
#include "engine.h"

#define CACHE_LINE 64
#define ENGINE_CTX_SLOTS 8 /* codec contexts kept per thread (and per batch) */
#define ENGINE_NICE 10 /* the engine threads' nice value */
#define ENGINE_POLL_NS 50000L /* an idle engine polls the queue this long, then sleeps */
#define ENGINE_CLAIM_BYTES ((size_t)64 << 10) /* the data an engine claims at once */
#define WAIT_SPINS 128 /* pauses before a waiter sleeps: a few microseconds */

/* A batch's state word, the waiter's futex. */
enum batch_state { BATCH_RUNNING = 0, BATCH_SLEEPING = 1, BATCH_DONE = 2 };

struct ctx_cache {
	const zf_codec *codec[ENGINE_CTX_SLOTS];
	zf_codec_ctx *ctx[ENGINE_CTX_SLOTS];
	unsigned used;
	unsigned victim; /* the slot to replace next when all are used */
	uint8_t *out; /* the output of ZF_JOB_ENGINE_DST jobs: two halves of out_cap / 2 */
	size_t out_cap;
	unsigned half; /* the half the last job used */
};

struct engine {
	/* Jobs run: written by this engine only, read by zf_engines_get_stats(). */
	_Alignas(CACHE_LINE) atomic_uint_least64_t jobs;
	zf_engines *owner;
	pthread_t thread;
	unsigned id;
	/* Under owner->lock: on the sleepers stack exactly while asleep is set. */
	bool asleep;
	struct engine *next_sleeper;
	pthread_cond_t wake;
	/* The thread's own. */
	struct ctx_cache cache;
};

struct zf_engines {
	pthread_mutex_t lock;
	/* Under lock. */
	struct list_node urgent, normal; /* FIFO lists of zf_batch.link */
	struct engine *sleepers;
	long budget; /* jobs the engines may still take; < 0: no limit */
	bool stopping;
	atomic_uint queued; /* batches linked: what an idle engine polls before it sleeps */
	/* Read without the lock by an engine that would go on with its batch (claim_next). */
	atomic_uint urgent_queued; /* urgent batches linked */
	atomic_bool unlimited; /* budget < 0 and not stopping */

	unsigned n; /* threads started */
	struct engine *engine;
	atomic_uint refs; /* one for the owner until zf_engines_destroy(), one per batch */
	pid_t pid; /* whose threads these are: a child after fork() starts its own */

	/* Counted once per batch (and per context made) from any thread. */
	_Alignas(CACHE_LINE) atomic_uint_least64_t batches;
	atomic_uint_least64_t jobs, jobs_by_waiters, failed_jobs, contexts;
};

struct zf_batch {
	/* Written by every thread that runs the batch's jobs. */
	_Alignas(CACHE_LINE) atomic_size_t next_job; /* the next index to claim */
	atomic_size_t remaining; /* jobs not finished */
	atomic_uint state; /* enum batch_state */
	atomic_uint failed; /* jobs finished with a status < 0 */

	/* Set by the owner at submit, before the batch is linked (read by engines after). */
	_Alignas(CACHE_LINE) zf_engines *engines;
	zf_job *jobs;
	size_t n;
	size_t claim; /* jobs an engine claims at once (ENGINE_CLAIM_BYTES) */
	unsigned flags;
	void (*flush)(void); /* engine_batch_set_flush() */
	bool submitted; /* the owner's: jobs not yet waited for */
	bool queued; /* the owner's: submit linked it (engines were running) */
	/* Set and cleared under engines->lock; read without it by the owner. */
	atomic_bool linked;
	struct list_node link; /* on engines->urgent or ->normal, under engines->lock */
	struct ctx_cache cache; /* for the jobs its waiter runs */
};

_Static_assert(sizeof(atomic_uint) == sizeof(uint32_t), "a futex word is 32 bits");

static void futex_wait(atomic_uint *word, unsigned val)
{
	(void)syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(atomic_uint *word)
{
	(void)syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* -------------------------------------------------------------------------------- */
/* Codec contexts                                                                   */
/* -------------------------------------------------------------------------------- */

static int ctx_cache_get(zf_engines *e, struct ctx_cache *c, const zf_codec *codec,
			 zf_codec_ctx **ctxp)
{
	zf_codec_ctx *ctx;
	unsigned slot;

	for (unsigned i = 0; i < c->used; i++) {
		if (c->codec[i] == codec) {
			*ctxp = c->ctx[i];
			return 0;
		}
	}
	TRY(zf_codec_ctx_create(codec, &ctx));
	atomic_fetch_add_explicit(&e->contexts, 1, memory_order_relaxed);
	if (c->used < ENGINE_CTX_SLOTS) {
		slot = c->used++;
	} else {
		slot = c->victim;
		c->victim = (slot + 1) % ENGINE_CTX_SLOTS;
		zf_codec_ctx_destroy(c->ctx[slot]);
	}
	c->codec[slot] = codec;
	c->ctx[slot] = ctx;
	*ctxp = ctx;
	return 0;
}

static void ctx_cache_clear(struct ctx_cache *c)
{
	for (unsigned i = 0; i < c->used; i++)
		zf_codec_ctx_destroy(c->ctx[i]);
	c->used = 0;
	c->victim = 0;
	free(c->out);
	c->out = NULL;
	c->out_cap = 0;
}

/*
 * The thread's output buffer for a ZF_JOB_ENGINE_DST job of cap bytes, the other half
 * than the last job's; NULL: no memory. It grows only between runs of a batch's jobs,
 * whose caps are the same (one put's units), so never under an output left for a flush.
 */
static uint8_t *ctx_cache_out(struct ctx_cache *c, size_t cap)
{
	if (!c->out || c->out_cap / 2 < cap) {
		const size_t want = 2 * ZF_MAX(cap, ENGINE_CLAIM_BYTES);
		uint8_t *out = malloc(want);

		if (!out)
			return NULL;
		free(c->out);
		c->out = out;
		c->out_cap = want;
	}
	c->half ^= 1;
	return c->out + c->half * (c->out_cap / 2);
}

/* -------------------------------------------------------------------------------- */
/* Jobs                                                                             */
/* -------------------------------------------------------------------------------- */

/* Sets the job's status and runs its completion; returns the status the job ends with. */
static int job_end(zf_job *job, int status)
{
	job->status = status;
	if (job->complete)
		job->complete(job);
	return job->status;
}

int engine_job_run(zf_codec_ctx *ctx, zf_job *job)
{
	int ret;

	if (job->op == ZF_JOB_COMPRESS)
		ret = zf_codec_compress(ctx, job->src, job->src_len, job->dst, job->dst_cap);
	else
		ret = zf_codec_decompress(ctx, job->src, job->src_len, job->dst, job->dst_cap);
	/* The checksum of the compressed bytes, as IAA and QPL give a CRC with the output. */
	if (ret > 0 && (job->flags & ZF_JOB_CHECKSUM))
		job->checksum =
			zf_checksum(job->op == ZF_JOB_COMPRESS ? job->dst : job->src,
				    job->op == ZF_JOB_COMPRESS ? (size_t)ret : job->src_len);
	return job_end(job, ret);
}

/*
 * Runs one job with a context from cache and stores its status (then completes it). A
 * ZF_JOB_ENGINE_DST job compresses into the cache's output buffer, which its completion
 * reads; dst is NULL again after.
 */
static int job_run(zf_engines *e, struct ctx_cache *cache, zf_job *job)
{
	const bool engine_dst = job->flags & ZF_JOB_ENGINE_DST;
	zf_codec_ctx *ctx;
	int ret;

	if (unlikely(!job->codec || !job->src || (!job->dst && !engine_dst) ||
		     (job->op != ZF_JOB_COMPRESS && job->op != ZF_JOB_DECOMPRESS) ||
		     (engine_dst && (job->op != ZF_JOB_COMPRESS || !job->complete ||
				     job->dst_cap > ZF_UNIT_MAX))))
		ret = -EINVAL;
	else if (likely((ret = ctx_cache_get(e, cache, job->codec, &ctx)) == 0)) {
		if (!engine_dst)
			return engine_job_run(ctx, job);
		job->dst = ctx_cache_out(cache, job->dst_cap);
		ret = job->dst ? engine_job_run(ctx, job) : job_end(job, -ENOMEM);
		job->dst = NULL;
		return ret;
	}
	return job_end(job, ret);
}

/*
 * Counts done finished jobs, failed of them with a status < 0; the last one tells the
 * waiter. After the swap to DONE the batch may be reused or freed by its owner: nothing
 * here touches it again (the futex wake is by address only).
 */
static void jobs_finish(zf_batch *b, size_t done, unsigned failed)
{
	if (unlikely(failed))
		atomic_fetch_add_explicit(&b->failed, failed, memory_order_relaxed);
	if (atomic_fetch_sub_explicit(&b->remaining, done, memory_order_acq_rel) != done)
		return;
	if (atomic_exchange_explicit(&b->state, BATCH_DONE, memory_order_acq_rel) == BATCH_SLEEPING)
		futex_wake(&b->state);
}

/* -------------------------------------------------------------------------------- */
/* The queue                                                                        */
/* -------------------------------------------------------------------------------- */

static struct list_node *queue_of(zf_engines *e, const zf_batch *b)
{
	return (b->flags & ZF_BATCH_URGENT) ? &e->urgent : &e->normal;
}

/* Caller holds e->lock. */
static void queue_link(zf_engines *e, zf_batch *b)
{
	struct list_node *q = queue_of(e, b);

	list_add_tail(q, &b->link);
	atomic_store_explicit(&b->linked, true, memory_order_relaxed);
	atomic_fetch_add_explicit(&e->queued, 1, memory_order_relaxed);
	if (q == &e->urgent)
		atomic_fetch_add_explicit(&e->urgent_queued, 1, memory_order_release);
}

/* Caller holds e->lock. */
static void queue_unlink(zf_engines *e, zf_batch *b)
{
	const struct list_node *q = queue_of(e, b);

	list_del(&b->link);
	atomic_store_explicit(&b->linked, false, memory_order_release);
	atomic_fetch_sub_explicit(&e->queued, 1, memory_order_relaxed);
	if (q == &e->urgent)
		atomic_fetch_sub_explicit(&e->urgent_queued, 1, memory_order_relaxed);
}

/* Unlinks b if nobody has yet; for claimers that do not hold the lock. */
static void queue_unlink_unlocked(zf_engines *e, zf_batch *b)
{
	if (!atomic_load_explicit(&b->linked, memory_order_acquire))
		return;
	pthread_mutex_lock(&e->lock);
	if (atomic_load_explicit(&b->linked, memory_order_relaxed))
		queue_unlink(e, b);
	pthread_mutex_unlock(&e->lock);
}

/*
 * Claims up to k next jobs of b, [*first, *end), with one atomic add; *last tells that
 * the add reached the batch's end, so the claimer unlinks it (the one whose add goes past
 * n, or an overshooting one: unlinking twice is checked). Reads b->n before the add: once
 * all its jobs are claimed and unlinked, a batch may be waited for and submitted again at
 * any moment. Returns whether any job is claimed.
 */
static bool batch_claim(zf_batch *b, size_t k, size_t *first, size_t *end, bool *last)
{
	const size_t n = b->n;
	const size_t i = atomic_fetch_add_explicit(&b->next_job, k, memory_order_relaxed);

	*last = i + k >= n;
	if (i >= n)
		return false;
	*first = i;
	*end = ZF_MIN(i + k, n);
	return true;
}

/*
 * Claims the next jobs [*first, *end) of the first batch in the queue, urgent ones first
 * (at most the batch's claim, and what the budget allows), and unlinks the batch when
 * they were its last (or when its waiter already claimed the rest). Caller holds
 * e->lock. Returns the batch, or NULL.
 */
static zf_batch *queue_take(zf_engines *e, size_t *first, size_t *end)
{
	struct list_node *node;

	while ((node = list_empty(&e->urgent) ? list_first(&e->normal) : e->urgent.next)) {
		zf_batch *const b = list_entry(node, zf_batch, link);
		const size_t k = e->budget > 0 ? ZF_MIN(b->claim, (size_t)e->budget) : b->claim;
		bool last;
		const bool got = batch_claim(b, k, first, end, &last);

		if (last)
			queue_unlink(e, b);
		if (got)
			return b;
	}
	return NULL;
}

/*
 * The next jobs [*first, *end) of b for an engine that has run jobs of b and not yet
 * finished them (so b is alive and b->n stable): claimed without the lock unless an
 * urgent batch is queued or a budget holds the engines, which only the locked path
 * honours. Unlinks b when they were its last, as queue_take() does. Returns whether any
 * is claimed.
 */
static bool claim_next(zf_engines *e, zf_batch *b, size_t *first, size_t *end)
{
	bool got, last;

	if (atomic_load_explicit(&e->urgent_queued, memory_order_acquire) ||
	    !atomic_load_explicit(&e->unlimited, memory_order_relaxed) ||
	    atomic_load_explicit(&b->next_job, memory_order_relaxed) >= b->n)
		return false;
	got = batch_claim(b, b->claim, first, end, &last);
	if (last)
		queue_unlink_unlocked(e, b);
	return got;
}

/* Wakes up to want sleeping engines, the most recent sleeper first. Caller holds e->lock. */
static void engines_wake(zf_engines *e, size_t want)
{
	while (want-- > 0 && e->sleepers) {
		struct engine *s = e->sleepers;

		e->sleepers = s->next_sleeper;
		s->next_sleeper = NULL;
		s->asleep = false;
		pthread_cond_signal(&s->wake);
	}
}

/* -------------------------------------------------------------------------------- */
/* Engine threads                                                                   */
/* -------------------------------------------------------------------------------- */

/* Waits up to ENGINE_POLL_NS for a batch to be queued, without the lock. */
static void engine_poll(zf_engines *e)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned k = 1;; k++) {
		if (atomic_load_explicit(&e->queued, memory_order_relaxed))
			return;
		cpu_relax();
		if (k % 64 == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) >
			    ENGINE_POLL_NS)
				return;
		}
	}
}

static void *engine_main(void *arg)
{
	struct engine *self = arg;
	zf_engines *e = self->owner;
	bool polled = false;
	char name[16];

	(void)snprintf(name, sizeof(name), "zf-engine-%u", self->id);
	(void)pthread_setname_np(pthread_self(), name);
	/*
	 * Compression is background work: a thread of the program that needs its memory
	 * back (a get, a fault) decompresses in its own thread and should not wait for a
	 * time slice behind the engines. Linux's nice is per thread; raising it needs no
	 * privilege. (Measured, 2 engines on 2 vCPUs under 2 MiB puts: a 64 KiB get's p99
	 * went from ~1 ms to tens of microseconds.)
	 */
	(void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), ENGINE_NICE);

	pthread_mutex_lock(&e->lock);
	while (!e->stopping) {
		zf_batch *b = NULL;
		size_t first = 0, end = 0;

		if (e->budget != 0)
			b = queue_take(e, &first, &end);
		if (!b && !polled) {
			/*
			 * Poll a little before sleeping: a store puts folio after folio, and a
			 * wake-up costs tens of microseconds on a VM, twice per folio.
			 */
			polled = true;
			pthread_mutex_unlock(&e->lock);
			engine_poll(e);
			pthread_mutex_lock(&e->lock);
			continue;
		}
		polled = false;
		if (!b) {
			self->asleep = true;
			self->next_sleeper = e->sleepers;
			e->sleepers = self;
			while (self->asleep && !e->stopping)
				pthread_cond_wait(&self->wake, &e->lock);
			continue;
		}
		if (e->budget > 0)
			e->budget -= (long)(end - first);
		pthread_mutex_unlock(&e->lock);

		for (bool more = true; more;) {
			const size_t done = end - first;
			unsigned failed = 0;

			for (size_t i = first; i < end; i++)
				failed += job_run(e, &self->cache, &b->jobs[i]) < 0;
			if (b->flush)
				b->flush();
			/* Single writer: a plain add, published before the jobs count as done. */
			atomic_store_explicit(
				&self->jobs,
				atomic_load_explicit(&self->jobs, memory_order_relaxed) + done,
				memory_order_release);
			more = claim_next(e, b, &first, &end);
			jobs_finish(b, done, failed);
		}

		pthread_mutex_lock(&e->lock);
	}
	pthread_mutex_unlock(&e->lock);
	ctx_cache_clear(&self->cache);
	return NULL;
}

/* Stops and joins the threads; they finish the job each is running. */
static void engines_stop(zf_engines *e)
{
	pthread_mutex_lock(&e->lock);
	e->stopping = true;
	atomic_store_explicit(&e->unlimited, false, memory_order_relaxed);
	for (unsigned i = 0; i < e->n; i++)
		pthread_cond_signal(&e->engine[i].wake);
	pthread_mutex_unlock(&e->lock);
	for (unsigned i = 0; i < e->n; i++) {
		pthread_join(e->engine[i].thread, NULL);
		pthread_cond_destroy(&e->engine[i].wake);
	}
}

static void engines_put(zf_engines *e)
{
	if (atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) != 1)
		return;
	pthread_mutex_destroy(&e->lock);
	free(e->engine);
	free(e);
}

int zf_engines_create(unsigned n, zf_engines **enginesp)
{
	pthread_mutexattr_t attr;
	zf_engines *e;
	int ret = 0;

	RETURN_IF(!enginesp || n > ZF_ENGINES_MAX, -EINVAL);
	e = aligned_alloc(CACHE_LINE, sizeof(*e));
	RETURN_IF(!e, -ENOMEM);
	memset(e, 0, sizeof(*e));
	if (n) {
		e->engine = aligned_alloc(CACHE_LINE, n * sizeof(*e->engine));
		if (!e->engine) {
			free(e);
			return -ENOMEM;
		}
		memset(e->engine, 0, n * sizeof(*e->engine));
	}
	/* Held for a few loads and stores: spin a little before sleeping on it. */
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
	pthread_mutex_init(&e->lock, &attr);
	pthread_mutexattr_destroy(&attr);
	list_init(&e->urgent);
	list_init(&e->normal);
	e->budget = -1;
	atomic_init(&e->unlimited, true);
	atomic_init(&e->urgent_queued, 0);
	atomic_init(&e->refs, 1);
	e->pid = getpid();

	for (unsigned i = 0; i < n; i++) {
		struct engine *s = &e->engine[i];

		s->owner = e;
		s->id = i;
		atomic_init(&s->jobs, 0);
		pthread_cond_init(&s->wake, NULL);
		ret = internal_thread_create(&s->thread, engine_main, s);
		if (ret) {
			pthread_cond_destroy(&s->wake);
			break;
		}
		e->n = i + 1;
	}
	if (ret) {
		engines_stop(e);
		engines_put(e);
		return -ret;
	}
	*enginesp = e;
	return 0;
}

int engine_fork_child(zf_engines *e)
{
	pthread_mutexattr_t attr;
	unsigned n;
	int ret = 0;

	if (!e || e->pid == getpid())
		return 0; /* none, or restarted already (engines shared by two stores) */
	e->pid = getpid();
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
	pthread_mutex_init(&e->lock, &attr);
	pthread_mutexattr_destroy(&attr);
	e->sleepers = NULL;
	n = e->n;
	e->n = 0;
	for (unsigned i = 0; i < n && !ret; i++) {
		struct engine *s = &e->engine[i];

		s->asleep = false;
		s->next_sleeper = NULL;
		pthread_cond_init(&s->wake, NULL);
		ret = internal_thread_create(&s->thread, engine_main, s);
		if (!ret)
			e->n = i + 1;
	}
	return -ret;
}

void zf_engines_destroy(zf_engines *engines)
{
	if (!engines)
		return;
	engines_stop(engines);
	engines_put(engines);
}

unsigned zf_engines_count(const zf_engines *engines)
{
	return engines ? engines->n : 0;
}

int zf_engines_get_stats(zf_engines *e, zf_engines_stats *out, size_t size)
{
	zf_engines_stats st = { 0 }, *const stats = &st;
	uint64_t by_engines = 0;

	if (!e)
		return struct_copy_out(out, size, &st, sizeof(st));
	/* Who ran them before how many there are: a snapshot never shows more run than submitted. */
	for (unsigned i = 0; i < e->n; i++)
		by_engines += atomic_load_explicit(&e->engine[i].jobs, memory_order_acquire);
	stats->jobs_by_engines = by_engines;
	stats->jobs_by_waiters = atomic_load(&e->jobs_by_waiters);
	stats->failed_jobs = atomic_load(&e->failed_jobs);
	stats->jobs = atomic_load(&e->jobs);
	stats->batches = atomic_load(&e->batches);
	return struct_copy_out(out, size, &st, sizeof(st));
}

void engine_set_budget(zf_engines *e, long budget)
{
	pthread_mutex_lock(&e->lock);
	e->budget = budget;
	atomic_store_explicit(&e->unlimited, budget < 0 && !e->stopping, memory_order_relaxed);
	if (budget != 0 && !e->stopping)
		engines_wake(e, e->n);
	pthread_mutex_unlock(&e->lock);
}

long engine_budget(zf_engines *e)
{
	long budget;

	pthread_mutex_lock(&e->lock);
	budget = e->budget;
	pthread_mutex_unlock(&e->lock);
	return budget;
}

uint64_t engine_contexts_created(zf_engines *e)
{
	return atomic_load(&e->contexts);
}

/* -------------------------------------------------------------------------------- */
/* Batches                                                                          */
/* -------------------------------------------------------------------------------- */

int zf_batch_create(zf_engines *engines, unsigned flags, zf_batch **batchp)
{
	zf_batch *b;

	RETURN_IF(!engines || !batchp || (flags & ~(ZF_BATCH_URGENT | ZF_BATCH_NO_HELP)), -EINVAL);
	b = aligned_alloc(CACHE_LINE, sizeof(*b));
	RETURN_IF(!b, -ENOMEM);
	memset(b, 0, sizeof(*b));
	atomic_init(&b->next_job, 0);
	atomic_init(&b->remaining, 0);
	atomic_init(&b->state, BATCH_DONE);
	atomic_init(&b->failed, 0);
	atomic_init(&b->linked, false);
	list_init(&b->link);
	b->engines = engines;
	b->flags = flags;
	atomic_fetch_add_explicit(&engines->refs, 1, memory_order_relaxed);
	*batchp = b;
	return 0;
}

void zf_batch_destroy(zf_batch *batch)
{
	if (!batch)
		return;
	/* Engines may still be running its jobs: they must be done before it goes. */
	if (batch->submitted)
		(void)zf_batch_wait(batch);
	ctx_cache_clear(&batch->cache);
	engines_put(batch->engines);
	free(batch);
}

/*
 * How many jobs like the first of a batch an engine claims at once: ENGINE_CLAIM_BYTES of
 * uncompressed data, at least one.
 */
static size_t claim_of(const zf_job *jobs)
{
	const size_t bytes = jobs->op == ZF_JOB_COMPRESS ? jobs->src_len : jobs->dst_cap;

	return bytes && bytes < ENGINE_CLAIM_BYTES ? ENGINE_CLAIM_BYTES / bytes : 1;
}

int zf_batch_submit(zf_batch *b, zf_job *jobs, size_t n)
{
	zf_engines *e;

	RETURN_IF(!b || !jobs || n == 0 || n > INT_MAX, -EINVAL);
	RETURN_IF(b->submitted, -EBUSY);
	e = b->engines;
	/* No engine sees the batch until it is linked, under the lock, below. */
	b->jobs = jobs;
	b->n = n;
	b->claim = claim_of(jobs);
	atomic_store_explicit(&b->next_job, 0, memory_order_relaxed);
	atomic_store_explicit(&b->remaining, n, memory_order_relaxed);
	atomic_store_explicit(&b->failed, 0, memory_order_relaxed);
	atomic_store_explicit(&b->state, BATCH_RUNNING, memory_order_relaxed);
	b->submitted = true;
	b->queued = false;
	atomic_fetch_add_explicit(&e->batches, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&e->jobs, n, memory_order_relaxed);
	if (e->n == 0)
		return 0;

	pthread_mutex_lock(&e->lock);
	b->queued = !e->stopping;
	if (b->queued) {
		queue_link(e, b);
		/* The waiter will be the n-th engine, unless it does not help. */
		if (e->budget != 0)
			engines_wake(e, (b->flags & ZF_BATCH_NO_HELP) ? n : n - 1);
	}
	pthread_mutex_unlock(&e->lock);
	return 0;
}

/* Returns when the finisher of the batch's last job has let go of it. */
static void batch_wait_done(zf_batch *b)
{
	unsigned state;

	for (int spin = 0; spin < WAIT_SPINS; spin++) {
		if (atomic_load_explicit(&b->state, memory_order_acquire) == BATCH_DONE)
			return;
		cpu_relax();
	}
	state = BATCH_RUNNING;
	if (!atomic_compare_exchange_strong_explicit(&b->state, &state, BATCH_SLEEPING,
						     memory_order_acq_rel, memory_order_acquire))
		return; /* DONE meanwhile */
	while (atomic_load_explicit(&b->state, memory_order_acquire) == BATCH_SLEEPING)
		futex_wait(&b->state, BATCH_SLEEPING);
}

void engine_batch_set_help(zf_batch *b, bool help)
{
	if (help)
		b->flags &= ~ZF_BATCH_NO_HELP;
	else
		b->flags |= ZF_BATCH_NO_HELP;
}

void engine_batch_set_flush(zf_batch *b, void (*flush)(void))
{
	b->flush = flush;
}

int zf_batch_wait(zf_batch *b)
{
	zf_engines *e;
	uint64_t own = 0;
	unsigned failed;
	size_t i;

	RETURN_IF(!b, -EINVAL);
	if (!b->submitted)
		return 0;
	e = b->engines;

	/*
	 * Be an engine for our own batch: claim what no engine has taken, then take the batch
	 * off the queue if no engine did. Not with ZF_BATCH_NO_HELP when there are engines:
	 * they alone fill the CPUs, and they unlink the batch as they claim its last job.
	 */
	if (!(b->flags & ZF_BATCH_NO_HELP) || !b->queued) {
		while ((i = atomic_fetch_add_explicit(&b->next_job, 1, memory_order_relaxed)) <
		       b->n) {
			const bool job_failed = job_run(e, &b->cache, &b->jobs[i]) < 0;

			if (b->flush)
				b->flush();
			jobs_finish(b, 1, job_failed);
			own++;
		}
		queue_unlink_unlocked(e, b);
	}
	batch_wait_done(b);

	failed = atomic_load_explicit(&b->failed, memory_order_relaxed);
	b->submitted = false;
	if (own)
		atomic_fetch_add(&e->jobs_by_waiters, own);
	if (failed)
		atomic_fetch_add(&e->failed_jobs, failed);
	return (int)failed;
}

int zf_batch_run(zf_batch *batch, zf_job *jobs, size_t n)
{
	TRY(zf_batch_submit(batch, jobs, n));
	return zf_batch_wait(batch);
}
