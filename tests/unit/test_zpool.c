/*
 * test_zpool.c - the allocator for compressed objects: every size class, objects that
 * cross pages, 4 KiB / 64 KiB / 2 MiB objects, compaction (objects move, handles keep
 * reading their own bytes, pages go back), exact stats, bad handles, and mmap/malloc
 * failure injection (-Wl,--wrap) that must give -ENOMEM and leave the pool whole. The
 * dev preset builds with ZF_DEBUG_FULL, which checks the class invariants after its
 * operations (each one while the class is small, ZPOOL_DEBUG_CHECK_OP); here
 * zpool_check() is also called directly.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "zfolio.h"
#include "../../src/zpool/zpool.h"

/* Failure injection: the next N calls of mmap/malloc succeed, then all fail (-1 = off). */
static int mmap_budget = -1, malloc_budget = -1;

void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (mmap_budget == 0)
		return MAP_FAILED;
	if (mmap_budget > 0)
		mmap_budget--;
	return __real_mmap(addr, len, prot, flags, fd, off);
}

void *__real_malloc(size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_malloc(size_t size)
{
	if (malloc_budget == 0)
		return NULL;
	if (malloc_budget > 0)
		malloc_budget--;
	return __real_malloc(size);
}

void *__real_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size)
{
	if (malloc_budget == 0)
		return NULL;
	if (malloc_budget > 0)
		malloc_budget--;
	return __real_calloc(n, size);
}

/* A cookie pattern per handle (mimalloc's (items - i) ^ cookie). */
static void fill(uint8_t *buf, size_t len, uint64_t handle)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)((len - i) ^ (handle * 0x9e3779b97f4a7c15ULL >> 56));
}

static void check_object(zf_pool *pool, uint64_t h, size_t len)
{
	uint8_t *want = malloc(len);
	size_t size = 0;
	const void *p;

	assert_non_null(want);
	fill(want, len, h);
	p = zf_pool_read_begin(pool, h, &size);
	assert_non_null(p);
	assert_int_equal(size, len);
	assert_memory_equal(p, want, len);
	zf_pool_read_end(pool, h);
	assert_int_equal(zf_pool_object_size(pool, h), len);
	free(want);
}

static uint64_t put_object(zf_pool *pool, size_t len)
{
	uint8_t *buf = malloc(len);
	uint64_t h = 0;

	assert_non_null(buf);
	assert_int_equal(zf_pool_alloc(pool, len, &h), 0);
	assert_true(h != 0);
	fill(buf, len, h);
	assert_int_equal(zf_pool_write(pool, h, buf, len), 0);
	free(buf);
	return h;
}

static void check_all_classes(zf_pool *pool)
{
	assert_int_equal(zpool_check(pool), 0);
}

/* Class i's geometry, from its stats. */
static zf_pool_class_stats class_def(zf_pool *pool, unsigned i)
{
	zf_pool_class_stats cs;

	assert_int_equal(zf_pool_class_stats_get(pool, i, &cs, sizeof(cs)), 0);
	return cs;
}

/* The index of the class an object of size bytes is allocated in. */
static unsigned class_index_of(zf_pool *pool, size_t size)
{
	unsigned i = 0;

	while (class_def(pool, i).max_object < size)
		i++;
	return i;
}

static zf_pool *new_pool(unsigned compact_pct)
{
	zf_pool_options o;
	zf_pool *pool = NULL;

	zf_pool_options_init(&o);
	o.compact_threshold_pct = compact_pct;
	assert_int_equal(zf_pool_create(&o, &pool), 0);
	return pool;
}

/* The class table: capacities grow, every size has a class, waste stays small. */
static void test_class_table(void **state)
{
	zf_pool *pool = new_pool(0);
	const unsigned n = zf_pool_class_count();
	zf_pool_class_stats prev = { 0 };

	(void)state;
	assert_true(n > 100);
	for (unsigned i = 0; i < n; i++) {
		const zf_pool_class_stats d = class_def(pool, i);

		if (i)
			assert_true(d.max_object > prev.max_object);
		assert_true(d.objs_per_zspage >= 1);
		assert_true(d.pages_per_zspage * ZF_PAGE_SIZE >= d.objs_per_zspage * d.class_size);
		assert_int_equal(d.huge, d.objs_per_zspage == 1);
		/* A raw 4 KiB page and a raw 64 KiB unit fit a huge class exactly. */
		if (d.max_object == 4096 || d.max_object == 65536)
			assert_true(d.huge && d.class_size == d.max_object &&
				    d.pages_per_zspage * ZF_PAGE_SIZE == d.class_size);
		prev = d;
	}
	assert_int_equal(prev.max_object, ZF_UNIT_MAX);
	zf_pool_destroy(pool);
}

/* Every class: objects of its largest size and one byte over the previous class. */
static void test_every_class(void **state)
{
	zf_pool *pool = new_pool(0);
	unsigned n = zf_pool_class_count();
	uint64_t *h = calloc(2 * n, sizeof(*h));
	size_t *len = calloc(2 * n, sizeof(*len));
	zf_pool_stats st;
	uint64_t bytes = 0;

	(void)state;
	for (unsigned i = 0; i < n; i++) {
		zf_pool_class_stats cs;

		assert_int_equal(zf_pool_class_stats_get(pool, i, &cs, sizeof(cs)), 0);
		len[2 * i] = cs.max_object;
		len[2 * i + 1] = i ? class_def(pool, i - 1).max_object + 1 : 1;
	}
	for (unsigned i = 0; i < 2 * n; i++) {
		h[i] = put_object(pool, len[i]);
		bytes += len[i];
	}
	check_all_classes(pool);
	zf_pool_get_stats(pool, &st, sizeof(st));
	assert_int_equal(st.objects, 2 * n);
	assert_int_equal(st.compr_data_size, bytes);
	assert_int_equal(st.mem_used_total, st.pages_used * ZF_PAGE_SIZE);
	assert_true(st.mem_used_total >= bytes);
	for (unsigned i = 0; i < 2 * n; i++)
		check_object(pool, h[i], len[i]);
	/* Each object went to the smallest class that holds it. */
	for (unsigned i = 0; i < n; i++) {
		zf_pool_class_stats cs;

		assert_int_equal(zf_pool_class_stats_get(pool, i, &cs, sizeof(cs)), 0);
		assert_int_equal(cs.objs_used, 2);
	}
	for (unsigned i = 0; i < 2 * n; i++)
		zf_pool_free(pool, h[i]);
	zf_pool_get_stats(pool, &st, sizeof(st));
	assert_int_equal(st.objects, 0);
	assert_int_equal(st.compr_data_size, 0);
	/* Empty zspages keep up to warm_pages_max pages for reuse; compaction returns them. */
	assert_int_equal(st.pages_used, st.warm_pages);
	assert_true(st.warm_pages > 0 && st.warm_pages <= ZF_UNIT_MAX / ZF_PAGE_SIZE);
	assert_int_equal(zf_pool_compact(pool), st.warm_pages);
	zf_pool_get_stats(pool, &st, sizeof(st));
	assert_int_equal(st.pages_used, 0);
	assert_int_equal(st.warm_pages, 0);
	assert_true(st.mem_used_max > 0);
	check_all_classes(pool);
	free(h);
	free(len);
	zf_pool_destroy(pool);
}

/* Objects that cross page boundaries, in a class of several pages per zspage. */
static void test_straddle(void **state)
{
	zf_pool *pool = new_pool(0);
	uint64_t h[64];
	int crossed = 0;

	(void)state;
	for (int i = 0; i < 64; i++) {
		const uint8_t *p;

		h[i] = put_object(pool, 1500);
		p = zf_pool_read_begin(pool, h[i], NULL);
		if ((uintptr_t)p / ZF_PAGE_SIZE != ((uintptr_t)p + 1499) / ZF_PAGE_SIZE)
			crossed++;
		zf_pool_read_end(pool, h[i]);
	}
	assert_true(crossed > 0);
	for (int i = 0; i < 64; i++)
		check_object(pool, h[i], 1500);
	zf_pool_destroy(pool);
}

static void test_large_objects(void **state)
{
	const size_t sizes[] = { 4096,	4095,	 4097,		65536,	65535,
				 40000, 2 << 20, (2 << 20) - 1, 1 << 20 };
	zf_pool *pool = new_pool(0);
	uint64_t h[9];

	(void)state;
	for (int i = 0; i < 9; i++)
		h[i] = put_object(pool, sizes[i]);
	check_all_classes(pool);
	for (int i = 0; i < 9; i++)
		check_object(pool, h[i], sizes[i]);
	assert_int_equal(zf_pool_alloc(pool, (2 << 20) + 1, &h[0]), -EINVAL);
	assert_int_equal(zf_pool_alloc(pool, 0, &h[0]), -EINVAL);
	zf_pool_destroy(pool);
}

/*
 * zf_pool_free_many() frees what n zf_pool_free() calls would, in any order of classes
 * (huge ones too), skips handles that are not allocated, and leaves the others intact.
 */
static void test_free_many(void **state)
{
	enum { N = 300 };
	zf_pool *pool = new_pool(0);
	uint64_t h[N], gone[N + 2];
	size_t len[N], n = 0;
	zf_pool_stats st;
	uint64_t bytes = 0, x = 99;

	(void)state;
	for (int i = 0; i < N; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		len[i] = i % 50 == 0 ? 4096 : 16 + (x >> 33) % 5000;
		h[i] = put_object(pool, len[i]);
	}
	for (int i = 0; i < N; i++) {
		if (i % 3)
			gone[n++] = h[i];
		else
			bytes += len[i];
	}
	gone[n++] = 0; /* never allocated */
	gone[n++] = h[1]; /* freed earlier in the same call */
	zf_pool_free_many(pool, gone, n);
	zf_pool_free_many(pool, gone, 0);
	check_all_classes(pool);
	zf_pool_get_stats(pool, &st, sizeof(st));
	assert_int_equal(st.objects, (N + 2) / 3);
	assert_int_equal(st.compr_data_size, bytes);
	for (int i = 0; i < N; i++) {
		if (i % 3)
			assert_int_equal(zf_pool_object_size(pool, h[i]), 0);
		else
			check_object(pool, h[i], len[i]);
	}
	zf_pool_destroy(pool);
}

/* n objects of min..min + span - 1 bytes (sizes from an LCG started at seed). */
static void put_random(zf_pool *pool, int n, uint64_t seed, size_t min, size_t span, uint64_t *h,
		       size_t *len)
{
	for (int i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		len[i] = min + (seed >> 33) % span;
		h[i] = put_object(pool, len[i]);
	}
}

/* Compaction moves objects; every handle still reads its own bytes; pages go back. */
static void test_compaction(void **state)
{
	enum { N = 6000 };
	zf_pool *pool = new_pool(0);
	uint64_t *h = calloc(N, sizeof(*h));
	size_t *len = calloc(N, sizeof(*len));
	uint64_t *where = calloc(N, sizeof(*where));
	zf_pool_stats before, after;
	size_t given_back;
	int moved = 0;

	(void)state;
	put_random(pool, N, 12345, 100, 3000, h, len);
	for (int i = 0; i < N; i += 3) {
		zf_pool_free(pool, h[i]);
		zf_pool_free(pool, h[i]); /* a second free is ignored */
		h[i] = 0;
	}
	for (int i = 0; i < N; i++) {
		if (h[i]) {
			where[i] = (uintptr_t)zf_pool_read_begin(pool, h[i], NULL);
			zf_pool_read_end(pool, h[i]);
		}
	}
	zf_pool_get_stats(pool, &before, sizeof(before));
	given_back = zf_pool_compact(pool);
	zf_pool_get_stats(pool, &after, sizeof(after));
	check_all_classes(pool);
	assert_true(given_back > 0);
	assert_int_equal(after.pages_used, before.pages_used - given_back);
	assert_int_equal(after.pages_compacted, before.pages_compacted + given_back);
	assert_int_equal(after.objects, before.objects);
	assert_int_equal(after.compr_data_size, before.compr_data_size);
	/* Packed: within a few percent of the live bytes (pages, headers, class rounding). */
	assert_true((double)after.mem_used_total < 1.10 * (double)after.compr_data_size);
	for (int i = 0; i < N; i++) {
		if (!h[i])
			continue;
		check_object(pool, h[i], len[i]);
		if ((uintptr_t)zf_pool_read_begin(pool, h[i], NULL) != where[i])
			moved++;
		zf_pool_read_end(pool, h[i]);
	}
	assert_true(moved > 0);
	/* A compacted pool takes new objects and reuses freed handles. */
	for (int i = 0; i < N; i += 3) {
		len[i] = 2000;
		h[i] = put_object(pool, len[i]);
	}
	for (int i = 0; i < N; i++)
		check_object(pool, h[i], len[i]);
	check_all_classes(pool);
	free(h);
	free(len);
	free(where);
	zf_pool_destroy(pool);
}

/*
 * zf_pool_read_begin_many() is read_begin() of each (NULL for a handle not allocated), and
 * keeps each object where it is through a compaction until zf_pool_read_end_many().
 */
static void test_read_many(void **state)
{
	enum { N = 400 };
	zf_pool *pool = new_pool(0);
	uint64_t h[N], live[N + 1];
	const void *p[N + 1];
	size_t len[N], n = 0;

	(void)state;
	put_random(pool, N, 7, 16, 3000, h, len);
	for (int i = 0; i < N; i++) {
		if (i % 3 == 0)
			zf_pool_free(pool, h[i]);
		else
			live[n++] = h[i];
	}
	live[n++] = h[0]; /* freed: NULL, and not pinned */
	zf_pool_read_begin_many(pool, live, n, p);
	assert_null(p[n - 1]);
	for (size_t i = 0; i + 1 < n; i++) {
		assert_non_null(p[i]);
		assert_ptr_equal(zf_pool_read_begin(pool, live[i], NULL), p[i]);
		zf_pool_read_end(pool, live[i]);
	}
	zf_pool_compact(pool);
	for (size_t i = 0; i + 1 < n; i++) {
		assert_ptr_equal(zf_pool_read_begin(pool, live[i], NULL), p[i]);
		zf_pool_read_end(pool, live[i]);
	}
	zf_pool_read_end_many(pool, live, n - 1);
	/* Unpinned, they may move now: a compaction frees what the frees left. */
	assert_true(zf_pool_compact(pool) > 0);
	for (int i = 0; i < N; i++)
		if (i % 3)
			check_object(pool, h[i], len[i]);
	check_all_classes(pool);
	zf_pool_destroy(pool);
}

/* A pinned zspage is not moved: its objects stay where the reader sees them. */
static void test_pinned_not_moved(void **state)
{
	zf_pool *pool = new_pool(0);
	uint64_t h[200];
	const void *p;

	(void)state;
	for (int i = 0; i < 200; i++)
		h[i] = put_object(pool, 1000);
	for (int i = 0; i < 199; i++)
		zf_pool_free(pool, h[i]);
	p = zf_pool_read_begin(pool, h[199], NULL);
	zf_pool_compact(pool);
	assert_ptr_equal(zf_pool_read_begin(pool, h[199], NULL), p);
	zf_pool_read_end(pool, h[199]);
	zf_pool_read_end(pool, h[199]);
	check_object(pool, h[199], 1000);
	zf_pool_destroy(pool);
}

/*
 * Spilling: a class's lone object on a page of its own moves into a free slot of the next
 * class, on a page that is in memory already, and the page goes back; a pinned object or
 * a move that would cost too much stays.
 */
static void test_spill(void **state)
{
	zf_pool *pool = new_pool(0);
	const unsigned i = class_index_of(pool, 1000);
	const size_t small = class_def(pool, i).max_object, big = class_def(pool, i + 1).max_object;
	zf_pool_stats before, after;
	uint64_t hb, hs, hx;
	const void *p;

	(void)state;
	assert_false(class_def(pool, i + 1).huge);
	hb = put_object(pool, big); /* the next class: one page in memory, slots free on it */
	hs = put_object(pool, small);
	assert_int_equal(zpool_handle_class(pool, hs), i);
	/* Pinned: stays. */
	p = zf_pool_read_begin(pool, hs, NULL);
	zf_pool_compact(pool);
	assert_int_equal(zpool_handle_class(pool, hs), i);
	assert_ptr_equal(zf_pool_read_begin(pool, hs, NULL), p);
	zf_pool_read_end(pool, hs);
	zf_pool_read_end(pool, hs);
	/* Not pinned: spilled, its page given back. */
	zf_pool_get_stats(pool, &before, sizeof(before));
	assert_int_equal(zf_pool_compact(pool), 1);
	zf_pool_get_stats(pool, &after, sizeof(after));
	assert_int_equal(zpool_handle_class(pool, hs), i + 1);
	assert_int_equal(after.pages_used, before.pages_used - 1);
	assert_int_equal(after.objects, 2);
	check_object(pool, hs, small);
	check_object(pool, hb, big);
	check_all_classes(pool);
	/* Freed from its new class, and its handle is reused. */
	zf_pool_free(pool, hs);
	assert_int_equal(zf_pool_object_size(pool, hs), 0);
	check_all_classes(pool);
	zf_pool_destroy(pool);

	/*
	 * The cost: n objects of a small class moving one class up cost n times the slot
	 * difference; one over a quarter page stays, at a quarter page it goes.
	 */
	pool = new_pool(0);
	{
		const unsigned k = class_index_of(pool, 20);
		const zf_pool_class_stats dk = class_def(pool, k), up = class_def(pool, k + 1);
		const uint32_t step = up.class_size - dk.class_size;
		const unsigned n = ZF_PAGE_SIZE / 4 / step + 1;
		uint64_t hs_many[ZF_PAGE_SIZE / 16];

		assert_true(n <= ZF_PAGE_SIZE / up.class_size - 1);
		hx = put_object(pool, up.max_object);
		for (unsigned j = 0; j < n; j++)
			hs_many[j] = put_object(pool, dk.max_object);
		assert_int_equal(zf_pool_compact(pool), 0);
		for (unsigned j = 0; j < n; j++)
			assert_int_equal(zpool_handle_class(pool, hs_many[j]), k);
		zf_pool_free(pool, hs_many[0]);
		assert_int_equal(zf_pool_compact(pool), 1);
		for (unsigned j = 1; j < n; j++) {
			assert_int_equal(zpool_handle_class(pool, hs_many[j]), k + 1);
			check_object(pool, hs_many[j], dk.max_object);
		}
		check_object(pool, hx, up.max_object);
		check_all_classes(pool);
	}
	zf_pool_destroy(pool);
}

/* Automatic compaction runs from free() once a class's free slots pass the threshold. */
static void test_auto_compaction(void **state)
{
	zf_pool *pool = new_pool(25);
	uint64_t h[3000];
	zf_pool_stats st;

	(void)state;
	for (int i = 0; i < 3000; i++)
		h[i] = put_object(pool, 700);
	for (int i = 0; i < 3000; i += 2)
		zf_pool_free(pool, h[i]);
	zf_pool_get_stats(pool, &st, sizeof(st));
	assert_true(st.compactions > 0);
	assert_true(st.pages_compacted > 0);
	for (int i = 1; i < 3000; i += 2)
		check_object(pool, h[i], 700);
	zf_pool_destroy(pool);
}

static void test_bad_handles(void **state)
{
	zf_pool *pool = new_pool(0);
	uint8_t buf[16] = { 0 };
	uint64_t h = put_object(pool, 16);

	(void)state;
	assert_null(zf_pool_read_begin(pool, 0, NULL));
	assert_null(zf_pool_read_begin(pool, h + 1, NULL));
	assert_null(zf_pool_read_begin(pool, ~0ull, NULL));
	assert_int_equal(zf_pool_write(pool, h, buf, 17), -EINVAL);
	assert_int_equal(zf_pool_write(pool, 0, buf, 1), -EINVAL);
	assert_int_equal(zf_pool_object_size(pool, 987654321), 0);
	zf_pool_free(pool, 0);
	zf_pool_free(pool, ~0ull);
	zf_pool_free(pool, h + 5);
	zf_pool_read_end(pool, 0);
	check_object(pool, h, 16);
	zf_pool_free(pool, h);
	assert_null(zf_pool_read_begin(pool, h, NULL));
	check_all_classes(pool);
	zf_pool_destroy(pool);
	zf_pool_destroy(NULL);
}

/* Every allocation failure gives -ENOMEM and leaves the pool whole and usable. */
static void test_failure_injection(void **state)
{
	zf_pool *pool = NULL;
	zf_pool_stats st;
	uint64_t h;
	int failures = 0;

	(void)state;
	malloc_budget = 0;
	assert_int_equal(zf_pool_create(NULL, &pool), -ENOMEM);
	malloc_budget = -1;
	pool = new_pool(0);
	for (int budget = 0; budget < 6; budget++) {
		for (int kind = 0; kind < 2; kind++) {
			/* A size no earlier round used: its class needs a new zspage. */
			const size_t size = kind ? (64 << 10) + (size_t)budget * 4096
						 : 100 + 97 * (size_t)budget;
			int ret;

			/* Fresh classes need a zspage (mmap for a new arena, malloc for meta). */
			if (kind)
				mmap_budget = budget;
			else
				malloc_budget = budget;
			ret = zf_pool_alloc(pool, size, &h);
			mmap_budget = malloc_budget = -1;
			assert_true(ret == 0 || ret == -ENOMEM);
			if (ret == -ENOMEM)
				failures++;
			else
				zf_pool_free(pool, h);
			check_all_classes(pool);
		}
	}
	assert_true(failures > 0);
	zf_pool_get_stats(pool, &st, sizeof(st));
	assert_int_equal(st.objects, 0);
	/* Still usable. */
	h = put_object(pool, 3000);
	check_object(pool, h, 3000);
	zf_pool_destroy(pool);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_class_table), cmocka_unit_test(test_every_class),
		cmocka_unit_test(test_straddle),    cmocka_unit_test(test_large_objects),
		cmocka_unit_test(test_compaction),  cmocka_unit_test(test_pinned_not_moved),
		cmocka_unit_test(test_spill),	    cmocka_unit_test(test_auto_compaction),
		cmocka_unit_test(test_bad_handles), cmocka_unit_test(test_failure_injection),
		cmocka_unit_test(test_free_many),   cmocka_unit_test(test_read_many),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
