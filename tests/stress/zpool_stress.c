/* Description: zf_pool from many threads at once: THREADS workers allocate, write, read,
 * verify, overwrite, pin and free their own objects (cookie patterns, mimalloc's
 * (items - i) ^ cookie) and hand some to each other, while one thread runs
 * zf_pool_compact() in a loop and another reads zf_pool_get_stats() and the class table.
 * At the end every object must hold its bytes and the stats must be exact; then all are
 * freed and the pool must use no pages.
 *
 *   zpool_stress [THREADS [ITER [SCALE [SEED]]]]
 *
 * THREADS workers (default 4), ITER ops each (default 50000; 10000 under a sanitizer),
 * SCALE objects each at most (default 200); the environment's ZF_THREADS, ZF_ITER,
 * ZF_SCALE and ZF_SEED set them too (argv wins). The seed is printed first; a worker's
 * ops depend on it, their interleaving does not. Returns 0 pass, 1 fail.
 *
 * What a worker does, per op, on a random one of its slots:
 *  - empty slot: allocate (sizes mostly up to 512 bytes, some up to 4 KiB, 64 KiB and
 *    256 KiB, one in 2000 a 2 MiB unit) and write the whole object with a fresh cookie;
 *  - else read and verify every byte (40%), overwrite it all with a new cookie (15%),
 *    overwrite a prefix (10%), pin it (read_begin) and verify it twice with a yield
 *    between, so that compaction runs while it is held (5%), free it after a last
 *    verify (25%), or pass it to the mailbox and take another thread's object from it
 *    (5%): its bytes were written by another thread, and it will be freed by this one.
 *
 * The stats thread checks only what holds of a snapshot taken while the pool changes
 * ("a consistent snapshot of each class, summed"): mem_used_total is pages_used pages,
 * mem_used_max and the compaction counters never fall, each class line is whole zspages
 * of slots with no more used than allocated. It counts, without failing, snapshots whose
 * summed mem_used_total exceeds mem_used_max: classes are read one after another, so the
 * sum can add one class before a free to another after an alloc.
 *
 * Under TSan this is the race test of the pool's pin protocol (pins, entry updates,
 * compaction's moves, page trimming): the run must end with no report.
 */
#include <errno.h>
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
#define DEFAULT_ITER (SANITIZED ? 10000 : 50000)
#define DEFAULT_SCALE 200
#define MAILBOX 64
#define THREAD_BYTES_MAX ((size_t)12 << 20) /* live bytes per worker */

struct object {
	uint64_t handle; /* 0: empty slot */
	uint64_t cookie;
	uint64_t prefix_cookie; /* the cookie of a later write of the first prefix_len bytes */
	uint32_t size;
	uint32_t prefix_len; /* 0: the whole object holds cookie's pattern */
};

struct worker {
	pthread_t thread;
	unsigned id;
	uint64_t rng;
	struct object *slots;
	size_t live_bytes;
	uint8_t *buf; /* what it writes is made here */
	size_t cap;
	/* What it did, for the summary. */
	uint64_t allocs, frees, reads, writes, pins, handed, taken, big, unit_max;
};

static zf_pool *pool;
static unsigned nthreads, scale;
static unsigned long iters;
static uint64_t seed;
static atomic_int workers_done;

static pthread_mutex_t mailbox_lock = PTHREAD_MUTEX_INITIALIZER;
static struct object mailbox[MAILBOX];
static unsigned mailbox_count;

/* From the background threads, for the summary. */
static uint64_t compact_calls, compact_pages, stats_reads, stats_max_below_total;

__attribute__((format(printf, 1, 2), noreturn)) static void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "zpool_stress (seed %#llx): ", (unsigned long long)seed);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

/* Byte i of an object of size bytes written with cookie: word (n - w) ^ cookie. */
static uint8_t cookie_byte(uint64_t cookie, size_t size, size_t i)
{
	const uint64_t w = (uint64_t)(size / 8 + 1 - i / 8) ^ cookie;

	return (uint8_t)(w >> (8 * (i % 8)));
}

static void fill_cookie(uint8_t *dst, size_t len, size_t size, uint64_t cookie)
{
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		const uint64_t w = (uint64_t)(size / 8 + 1 - i / 8) ^ cookie;

		memcpy(dst + i, &w, 8);
	}
	for (; i < len; i++)
		dst[i] = cookie_byte(cookie, size, i);
}

/* The byte o must hold at i. */
static uint8_t expected(const struct object *o, size_t i)
{
	if (i < o->prefix_len)
		return cookie_byte(o->prefix_cookie, o->size, i);
	return cookie_byte(o->cookie, o->size, i);
}

/* Compares the object's bytes at p with what it must hold; names the first difference. */
static void check_bytes(const struct object *o, const uint8_t *p, const char *what)
{
	for (size_t i = 0; i < o->size; i += 8) {
		const size_t end = i + 8 < o->size ? i + 8 : o->size;

		/* A whole word of one pattern: compare it at once. */
		if (end == i + 8 && (end <= o->prefix_len || i >= o->prefix_len)) {
			const uint64_t want = (uint64_t)(o->size / 8 + 1 - i / 8) ^
					      (i < o->prefix_len ? o->prefix_cookie : o->cookie);
			uint64_t have;

			memcpy(&have, p + i, 8);
			if (have == want)
				continue;
		}
		for (size_t j = i; j < end; j++) {
			if (p[j] != expected(o, j))
				fail("%s: handle %#llx (%u bytes, prefix %u): byte %zu is %#04x, "
				     "expected %#04x",
				     what, (unsigned long long)o->handle, o->size, o->prefix_len, j,
				     p[j], expected(o, j));
		}
	}
}

static void verify(const struct object *o, const char *what)
{
	size_t size = 0;
	const uint8_t *p = zf_pool_read_begin(pool, o->handle, &size);

	if (!p)
		fail("%s: read_begin(%#llx) of a live object returned NULL", what,
		     (unsigned long long)o->handle);
	if (size != o->size)
		fail("%s: read_begin(%#llx) gave size %zu, allocated %u", what,
		     (unsigned long long)o->handle, size, o->size);
	check_bytes(o, p, what);
	zf_pool_read_end(pool, o->handle);
}

/* The worker's buffer for what it writes, at least len bytes. */
static uint8_t *scratch_for(struct worker *w, size_t len)
{
	if (len > w->cap) {
		free(w->buf);
		w->buf = malloc(len);
		if (!w->buf)
			fail("out of memory for %zu bytes", len);
		w->cap = len;
	}
	return w->buf;
}

/* Writes o's first len bytes with cookie (the whole object when len is its size). */
static void write_cookie(struct worker *w, struct object *o, size_t len, uint64_t cookie)
{
	uint8_t *buf = scratch_for(w, len ? len : 1);
	int ret;

	fill_cookie(buf, len, o->size, cookie);
	ret = zf_pool_write(pool, o->handle, buf, len);
	if (ret)
		fail("write(%#llx, %zu bytes) of a %u-byte object: %d",
		     (unsigned long long)o->handle, len, o->size, ret);
	if (len == o->size) {
		o->cookie = cookie;
		o->prefix_len = 0;
		o->prefix_cookie = 0;
	} else {
		/* Only prefixes over a fully written object: one pattern, one prefix. */
		o->prefix_cookie = cookie;
		o->prefix_len = (uint32_t)len;
	}
}

static size_t pick_size(struct worker *w)
{
	const uint64_t r = stress_rand(&w->rng);

	switch (r % 100) {
	case 0:
		if ((r >> 8) % 20 == 0) /* one in 2000 */
			return ZF_UNIT_MAX - (r >> 16) % 4;
		return 1 + (r >> 16) % (256 * 1024);
	case 1:
	case 2:
	case 3:
	case 4:
	case 5:
	case 6:
	case 7:
	case 8:
		return 1 + (r >> 16) % 65536;
	default:
		return r % 100 < 29 ? 1 + (r >> 16) % 4096 : 1 + (r >> 16) % 512;
	}
}

static void obj_alloc(struct worker *w, struct object *o)
{
	const size_t size = pick_size(w);
	int ret;

	if (w->live_bytes + size > THREAD_BYTES_MAX)
		return;
	memset(o, 0, sizeof(*o));
	ret = zf_pool_alloc(pool, size, &o->handle);
	if (ret == -ENOMEM) {
		o->handle = 0;
		return;
	}
	if (ret || !o->handle)
		fail("alloc(%zu): %d, handle %#llx", size, ret, (unsigned long long)o->handle);
	o->size = (uint32_t)size;
	w->live_bytes += size;
	w->allocs++;
	w->big += size > 65536;
	w->unit_max += size >= ZF_UNIT_MAX - 4;
	write_cookie(w, o, size, stress_rand(&w->rng) | 1);
	verify(o, "after alloc");
}

static void obj_free(struct worker *w, struct object *o)
{
	verify(o, "before free");
	zf_pool_free(pool, o->handle);
	w->live_bytes -= o->size;
	w->frees++;
	o->handle = 0;
}

/* Holds a read open while compaction runs; the bytes must not move or change meanwhile. */
static void obj_pin(struct worker *w, const struct object *o)
{
	size_t size = 0;
	const uint8_t *p = zf_pool_read_begin(pool, o->handle, &size);

	if (!p || size != o->size)
		fail("pin: read_begin(%#llx): %p, size %zu of %u", (unsigned long long)o->handle,
		     (const void *)p, size, o->size);
	check_bytes(o, p, "pinned");
	for (int i = 0; i < 3; i++)
		sched_yield();
	check_bytes(o, p, "pinned, after yields");
	zf_pool_read_end(pool, o->handle);
	w->pins++;
}

/* Puts o in the mailbox and takes the oldest object there (possibly o itself). */
static void obj_swap(struct worker *w, struct object *o)
{
	pthread_mutex_lock(&mailbox_lock);
	if (mailbox_count < MAILBOX) {
		mailbox[mailbox_count++] = *o;
		w->live_bytes -= o->size;
		w->handed++;
		o->handle = 0;
	}
	if (mailbox_count > MAILBOX / 2) {
		const struct object in = mailbox[0];

		if (w->live_bytes + in.size <= THREAD_BYTES_MAX && !o->handle) {
			memmove(mailbox, mailbox + 1, (mailbox_count - 1) * sizeof(mailbox[0]));
			mailbox_count--;
			*o = in;
			w->live_bytes += in.size;
			w->taken++;
		}
	}
	pthread_mutex_unlock(&mailbox_lock);
	if (o->handle)
		verify(o, "taken from the mailbox");
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	for (unsigned long i = 0; i < iters; i++) {
		const uint64_t r = stress_rand(&w->rng);
		struct object *o = &w->slots[r % scale];
		const unsigned what = (unsigned)((r >> 32) % 100);

		if (!o->handle) {
			obj_alloc(w, o);
			continue;
		}
		if (what < 40) {
			verify(o, "read");
			w->reads++;
		} else if (what < 55) {
			write_cookie(w, o, o->size, stress_rand(&w->rng) | 1);
			verify(o, "after overwrite");
			w->writes++;
		} else if (what < 65) {
			if (o->prefix_len == 0) {
				write_cookie(w, o,
					     (size_t)(stress_rand(&w->rng) % (o->size + 1ull)),
					     stress_rand(&w->rng) | 1);
				verify(o, "after a prefix write");
				w->writes++;
			}
		} else if (what < 70) {
			obj_pin(w, o);
		} else if (what < 95) {
			obj_free(w, o);
		} else {
			obj_swap(w, o);
		}
	}
	free(w->buf);
	atomic_fetch_add(&workers_done, 1);
	return NULL;
}

static void *compactor_main(void *arg)
{
	(void)arg;
	while (atomic_load(&workers_done) < (int)nthreads) {
		compact_pages += zf_pool_compact(pool);
		compact_calls++;
		sched_yield();
	}
	return NULL;
}

/* The checks that hold of any snapshot, however the pool changes meanwhile. */
static void *stats_main(void *arg)
{
	const unsigned nclasses = zf_pool_class_count();
	zf_pool_stats last = { 0 };

	(void)arg;
	while (atomic_load(&workers_done) < (int)nthreads) {
		zf_pool_stats s;

		zf_pool_get_stats(pool, &s, sizeof(s));
		if (s.mem_used_total != s.pages_used * ZF_PAGE_SIZE)
			fail("stats: mem_used_total %llu, pages_used %llu",
			     (unsigned long long)s.mem_used_total,
			     (unsigned long long)s.pages_used);
		if (s.mem_used_max < last.mem_used_max ||
		    s.pages_compacted < last.pages_compacted || s.compactions < last.compactions)
			fail("stats: a counter fell: mem_used_max %llu -> %llu, pages_compacted "
			     "%llu "
			     "-> %llu, compactions %llu -> %llu",
			     (unsigned long long)last.mem_used_max,
			     (unsigned long long)s.mem_used_max,
			     (unsigned long long)last.pages_compacted,
			     (unsigned long long)s.pages_compacted,
			     (unsigned long long)last.compactions,
			     (unsigned long long)s.compactions);
		stats_max_below_total += s.mem_used_max < s.mem_used_total;
		last = s;
		if (stats_reads++ % 8 == 0) {
			for (unsigned i = 0; i < nclasses; i++) {
				zf_pool_class_stats c;

				if (zf_pool_class_stats_get(pool, i, &c, sizeof(c)))
					fail("class_stats_get(%u) failed", i);
				if (c.objs_used > c.objs_allocated ||
				    c.objs_allocated % c.objs_per_zspage ||
				    c.pages_used > c.objs_allocated / c.objs_per_zspage *
							   c.pages_per_zspage)
					fail("class %u: %llu of %llu slots used, %llu pages (%u "
					     "slots "
					     "in %u pages per zspage)",
					     i, (unsigned long long)c.objs_used,
					     (unsigned long long)c.objs_allocated,
					     (unsigned long long)c.pages_used, c.objs_per_zspage,
					     c.pages_per_zspage);
			}
		}
		sched_yield();
	}
	return NULL;
}

/* After the threads: every object verifies and the stats are exact. */
static void check_quiet(struct worker *ws, const char *when)
{
	const unsigned nclasses = zf_pool_class_count();
	uint64_t objects = 0, bytes = 0, class_objects = 0, class_pages = 0;
	zf_pool_stats s;

	for (unsigned t = 0; t < nthreads; t++) {
		for (unsigned i = 0; i < scale; i++) {
			const struct object *o = &ws[t].slots[i];

			if (!o->handle)
				continue;
			verify(o, when);
			if (zf_pool_object_size(pool, o->handle) != o->size)
				fail("%s: object_size(%#llx) is not %u", when,
				     (unsigned long long)o->handle, o->size);
			objects++;
			bytes += o->size;
		}
	}
	for (unsigned i = 0; i < mailbox_count; i++) {
		verify(&mailbox[i], when);
		objects++;
		bytes += mailbox[i].size;
	}
	zf_pool_get_stats(pool, &s, sizeof(s));
	for (unsigned i = 0; i < nclasses; i++) {
		zf_pool_class_stats c;

		if (zf_pool_class_stats_get(pool, i, &c, sizeof(c)))
			fail("class_stats_get(%u) failed", i);
		class_objects += c.objs_used;
		class_pages += c.pages_used;
	}
	printf("zpool_stress: %s: %llu objects, %llu bytes in %llu pages (max %llu KiB)\n", when,
	       (unsigned long long)s.objects, (unsigned long long)s.compr_data_size,
	       (unsigned long long)s.pages_used, (unsigned long long)(s.mem_used_max >> 10));
	if (s.objects != objects || s.compr_data_size != bytes)
		fail("%s: stats say %llu objects of %llu bytes, the threads hold %llu of %llu",
		     when, (unsigned long long)s.objects, (unsigned long long)s.compr_data_size,
		     (unsigned long long)objects, (unsigned long long)bytes);
	/* pages_used also counts the empty zspages kept warm, which are in no class. */
	if (class_objects != s.objects || class_pages + s.warm_pages != s.pages_used)
		fail("%s: class lines add up to %llu objects in %llu pages, stats %llu in %llu",
		     when, (unsigned long long)class_objects, (unsigned long long)class_pages,
		     (unsigned long long)s.objects, (unsigned long long)s.pages_used);
	if (s.mem_used_total != s.pages_used * ZF_PAGE_SIZE || s.mem_used_max < s.mem_used_total ||
	    s.compr_data_size > s.mem_used_total)
		fail("%s: mem_used_total %llu, pages_used %llu, mem_used_max %llu, %llu bytes",
		     when, (unsigned long long)s.mem_used_total, (unsigned long long)s.pages_used,
		     (unsigned long long)s.mem_used_max, (unsigned long long)s.compr_data_size);
}

int main(int argc, char **argv)
{
	pthread_t compactor, stats_thread;
	struct worker *ws;
	struct timespec t0, t1;
	zf_pool_stats s;
	uint64_t sum[9] = { 0 };
	int ret;

	clock_gettime(CLOCK_REALTIME, &t0);
	nthreads = (unsigned)arg_or_env(argc, argv, 1, "ZF_THREADS", DEFAULT_THREADS);
	iters = (unsigned long)arg_or_env(argc, argv, 2, "ZF_ITER", DEFAULT_ITER);
	scale = (unsigned)arg_or_env(argc, argv, 3, "ZF_SCALE", DEFAULT_SCALE);
	seed = arg_or_env(argc, argv, 4, "ZF_SEED",
			  (unsigned long long)t0.tv_nsec ^ (unsigned long long)t0.tv_sec << 20 ^
				  (unsigned long long)getpid() << 40);
	if (nthreads < 1 || nthreads > 256 || scale < 1 || scale > 1u << 20) {
		fprintf(stderr, "usage: %s [THREADS (1..256) [ITER [SCALE [SEED]]]]\n", argv[0]);
		return 1;
	}
	printf("zpool_stress: seed %#llx (ZF_SEED=%#llx to repeat), %u threads x %lu ops, "
	       "%u objects each\n",
	       (unsigned long long)seed, (unsigned long long)seed, nthreads, iters, scale);
	fflush(stdout);

	ret = zf_pool_create(NULL, &pool);
	if (ret)
		fail("pool_create: %d", ret);
	ws = calloc(nthreads, sizeof(*ws));
	if (!ws)
		fail("out of memory");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned t = 0; t < nthreads; t++) {
		ws[t].id = t;
		ws[t].rng = seed ^ (t + 1) * 0xd1b54a32d192ed03ull;
		ws[t].slots = calloc(scale, sizeof(*ws[t].slots));
		if (!ws[t].slots)
			fail("out of memory");
	}
	for (unsigned t = 0; t < nthreads; t++) {
		if (pthread_create(&ws[t].thread, NULL, worker_main, &ws[t]))
			fail("pthread_create");
	}
	if (pthread_create(&compactor, NULL, compactor_main, NULL) ||
	    pthread_create(&stats_thread, NULL, stats_main, NULL))
		fail("pthread_create");
	for (unsigned t = 0; t < nthreads; t++)
		pthread_join(ws[t].thread, NULL);
	pthread_join(compactor, NULL);
	pthread_join(stats_thread, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);

	for (unsigned t = 0; t < nthreads; t++) {
		const struct worker *w = &ws[t];
		const uint64_t v[9] = { w->allocs, w->frees, w->reads, w->writes,  w->pins,
					w->handed, w->taken, w->big,   w->unit_max };

		for (int i = 0; i < 9; i++)
			sum[i] += v[i];
	}
	printf("zpool_stress: %.1f s: %llu allocs (%llu > 64 KiB, %llu of 2 MiB), %llu frees, "
	       "%llu reads, %llu writes, %llu pinned reads, %llu objects handed over, %llu taken\n",
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
	       (unsigned long long)sum[0], (unsigned long long)sum[7], (unsigned long long)sum[8],
	       (unsigned long long)sum[1], (unsigned long long)sum[2], (unsigned long long)sum[3],
	       (unsigned long long)sum[4], (unsigned long long)sum[5], (unsigned long long)sum[6]);
	zf_pool_get_stats(pool, &s, sizeof(s));
	printf("zpool_stress: %llu compact calls gave back %llu pages (%llu by all compactions, "
	       "%llu passes); %llu stats snapshots, %llu with mem_used_max < mem_used_total "
	       "(not an error: see the top of the file)\n",
	       (unsigned long long)compact_calls, (unsigned long long)compact_pages,
	       (unsigned long long)s.pages_compacted, (unsigned long long)s.compactions,
	       (unsigned long long)stats_reads, (unsigned long long)stats_max_below_total);

	check_quiet(ws, "after the threads");
	zf_pool_compact(pool);
	check_quiet(ws, "after a last compaction");

	for (unsigned t = 0; t < nthreads; t++) {
		for (unsigned i = 0; i < scale; i++) {
			if (ws[t].slots[i].handle)
				zf_pool_free(pool, ws[t].slots[i].handle);
		}
		free(ws[t].slots);
	}
	for (unsigned i = 0; i < mailbox_count; i++)
		zf_pool_free(pool, mailbox[i].handle);
	/* Empty zspages may keep their pages warm for reuse; a compaction gives them back. */
	zf_pool_compact(pool);
	zf_pool_get_stats(pool, &s, sizeof(s));
	if (s.objects || s.compr_data_size || s.pages_used || s.warm_pages)
		fail("all freed: %llu objects, %llu bytes, %llu pages left",
		     (unsigned long long)s.objects, (unsigned long long)s.compr_data_size,
		     (unsigned long long)s.pages_used);
	zf_pool_destroy(pool);
	free(ws);
	printf("zpool_stress: passed\n");
	return 0;
}
