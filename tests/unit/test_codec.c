/*
 * test_codec.c - every codec backend: names, round trips over the codec x level class x
 * unit size x page kind matrix, the -E2BIG bound, exact-size output before a guard
 * page, and corrupt, truncated and random input (which must fail cleanly; run this
 * under the dev preset's ASan to see that nothing is read or written out of bounds).
 *
 * Each case runs once per algorithm, as its own cmocka test ("test_guard_page zstd"): an
 * algorithm this build was configured without (ZF_WITH_ZSTD=OFF, ...) must be refused
 * with -ENOTSUP, and its tests then skip and say so, instead of passing unchecked.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "zfolio.h"
#include "image.h"
#include "testutil.h"

#define KiB 1024u
#define MiB (1024u * 1024u)

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/*
 * Every algorithm zfolio knows: its levels (zf_codec_find() of the bare name gives the
 * default one), and its level classes (the fast end, the default and the slow end).
 */
struct algorithm {
	const char *name;
	int has_level, level_min, level_max, level_default;
	int exact; /* compresses into a bound of exactly its output's size (no ZF_CODEC_SLACK) */
	const char *levels[6]; /* NULL-terminated */
};

static const struct algorithm algorithms[] = {
	{ "lz4", 1, 1, 65537, 1, 1, { "lz4:65537", "lz4", "lz4:8" } },
	{ "lz4hc", 1, 1, 12, 9, 1, { "lz4hc:1", "lz4hc", "lz4hc:12" } },
	{ "zstd", 1, -131072, 22, 3, 0, { "zstd:-50", "zstd:-1", "zstd:1", "zstd", "zstd:19" } },
	{ "deflate", 1, 0, 12, 6, 0, { "deflate:0", "deflate:1", "deflate", "deflate:12" } },
	{ "isal", 1, 0, 3, 1, 0, { "isal:0", "isal:1", "isal:2", "isal:3" } },
	{ "lzo", 0, 0, 0, 0, 1, { "lzo" } },
	{ "none", 0, 0, 0, 0, 1, { "none" } },
};

static const size_t unit_sizes[] = { 4 * KiB, 16 * KiB, 64 * KiB, 2 * MiB };

/* Names the case on stderr when cond fails, then fails the test. */
#define check(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
		}                                                                                  \
		assert_true(cond);                                                                 \
	} while (0)

static int is_slow_level(const char *name)
{
	return !strcmp(name, "lz4hc:12") || !strcmp(name, "zstd:19") || !strcmp(name, "deflate:12");
}

static zf_codec_ctx *ctx_for(const char *name)
{
	const zf_codec *c = NULL;
	zf_codec_ctx *ctx = NULL;

	assert_int_equal(zf_codec_find(name, &c), 0);
	assert_int_equal(zf_codec_ctx_create(c, &ctx), 0);
	return ctx;
}

/* Compresses with a generous bound, decompresses into an exact-size buffer, compares. */
static int round_trip(zf_codec_ctx *ctx, const uint8_t *src, size_t len, uint8_t *cbuf, size_t cap,
		      uint8_t *out)
{
	const int n = zf_codec_compress(ctx, src, len, cbuf, cap);

	if (n < 0)
		return n;
	assert_true((size_t)n <= cap);
	memset(out, 0xa5, len);
	assert_int_equal(zf_codec_decompress(ctx, cbuf, (size_t)n, out, len), (int)len);
	assert_memory_equal(out, src, len);
	return n;
}

/* Whether name is a whole word of zf_codec_algorithms() ("lz4" is not "lz4hc"). */
static int listed(const char *name)
{
	const size_t len = strlen(name);

	for (const char *at = zf_codec_algorithms(); (at = strstr(at, name)); at += len)
		if ((at[len] == ' ' || at[len] == '\0') &&
		    (at == zf_codec_algorithms() || at[-1] == ' '))
			return 1;
	return 0;
}

/*
 * The test's algorithm (its state), or skip() with a message when this build lacks it;
 * a missing algorithm must be refused as such: -ENOTSUP, not -ENOENT.
 */
static const struct algorithm *algorithm_or_skip(void **state)
{
	const struct algorithm *alg = *state;
	const zf_codec *c;
	const int ret = zf_codec_find(alg->name, &c);

	if (ret == -ENOTSUP) {
		assert_false(listed(alg->name));
		print_message("codec %s is not in this build: skipped\n", alg->name);
		skip();
	}
	assert_int_equal(ret, 0);
	return alg;
}

/* The algorithm's names: its default, interning, its levels' range, malformed levels. */
static void test_find(void **state)
{
	const struct algorithm *alg = *state;
	const zf_codec *a, *b;
	char name[64];

	/* Missing from the build: every name of it says so, with a level or without. */
	snprintf(name, sizeof(name), "%s:1", alg->name);
	if (zf_codec_find(alg->name, &a) == -ENOTSUP)
		assert_int_equal(zf_codec_find(name, &a), -ENOTSUP);
	alg = algorithm_or_skip(state);
	assert_true(listed(alg->name));

	assert_int_equal(zf_codec_find(alg->name, &a), 0);
	assert_string_equal(zf_codec_algorithm(a), alg->name);
	if (!alg->has_level) {
		assert_string_equal(zf_codec_name(a), alg->name);
		assert_int_equal(zf_codec_level(a), 0);
		assert_int_equal(zf_codec_find(name, &a), -EINVAL); /* "lzo:1" */
		return;
	}
	snprintf(name, sizeof(name), "%s:%d", alg->name, alg->level_default);
	assert_string_equal(zf_codec_name(a), name);
	assert_int_equal(zf_codec_level(a), alg->level_default);
	assert_int_equal(zf_codec_find(name, &b), 0);
	assert_ptr_equal(a, b); /* interned */

	for (int edge = 0; edge < 2; edge++) {
		const int level = edge ? alg->level_max : alg->level_min;

		snprintf(name, sizeof(name), "%s:%d", alg->name, level);
		assert_int_equal(zf_codec_find(name, &a), 0);
		assert_int_equal(zf_codec_level(a), level);
		snprintf(name, sizeof(name), "%s:%d", alg->name, edge ? level + 1 : level - 1);
		assert_int_equal(zf_codec_find(name, &a), -EINVAL);
	}
	{
		static const char *const malformed[] = {
			"", "1x", " 1", "+1", "--1", "99999999999"
		};

		for (size_t i = 0; i < ARRAY_SIZE(malformed); i++) {
			snprintf(name, sizeof(name), "%s:%s", alg->name, malformed[i]);
			check(zf_codec_find(name, &a) == -EINVAL, "\"%s\" accepted", name);
		}
	}
}

/* Names of no algorithm at all, whatever the build. */
static void test_find_unknown(void **state)
{
	const zf_codec *a;

	(void)state;
	assert_int_equal(zf_codec_find("brotli", &a), -ENOENT);
	assert_int_equal(zf_codec_find("brotli:1", &a), -ENOENT);
	assert_int_equal(zf_codec_find("", &a), -ENOENT);
	assert_int_equal(zf_codec_find(NULL, &a), -EINVAL);
	assert_true(listed("none")); /* the one algorithm every build has */
}

static void test_bad_lengths(void **state)
{
	const struct algorithm *alg = algorithm_or_skip(state);
	zf_codec_ctx *ctx = ctx_for(alg->name);
	uint8_t buf[64] = { 0 }, out[64];

	assert_int_equal(zf_codec_compress(ctx, buf, 0, out, sizeof(out)), -EINVAL);
	assert_int_equal(zf_codec_compress(ctx, buf, ZF_UNIT_MAX + 1, out, sizeof(out)), -EINVAL);
	assert_int_equal(zf_codec_compress(ctx, buf, sizeof(buf), out, 0), -E2BIG);
	assert_int_equal(zf_codec_decompress(ctx, buf, sizeof(buf), out, 0), -EINVAL);
	assert_int_equal(zf_codec_decompress(ctx, buf, 0, out, sizeof(out)), -EBADMSG);
	zf_codec_ctx_destroy(ctx);
	zf_codec_ctx_destroy(NULL);
}

/* The matrix: codec x level class x unit size x page kind, plus a one-byte change. */
static void test_round_trip_matrix(void **state)
{
	const struct algorithm *alg = algorithm_or_skip(state);
	const size_t max = 2 * MiB, cap = 2 * max + 4096;
	uint8_t *src = malloc(max), *cbuf = malloc(cap), *out = malloc(max);

	assert_non_null(src);
	assert_non_null(cbuf);
	assert_non_null(out);
	for (size_t ci = 0; alg->levels[ci]; ci++) {
		const char *name = alg->levels[ci];
		zf_codec_ctx *ctx = ctx_for(name);
		const int is_none = !strcmp(name, "none");
		/*
		 * Level 0 of libdeflate only stores, and lz4's top acceleration skips so far
		 * ahead that it misses even runs.
		 */
		const int checks_ratio =
			!is_none && strcmp(name, "lz4:65537") && strcmp(name, "deflate:0");

		for (size_t ui = 0; ui < sizeof(unit_sizes) / sizeof(unit_sizes[0]); ui++) {
			const size_t len = unit_sizes[ui];

			for (int p = 0; p < PAT_COUNT; p++) {
				int n, n2;

				/* The slowest levels on 2 MiB: one kind of page is enough. */
				if (len == 2 * MiB && is_slow_level(name) && p != PAT_TEXT)
					continue;
				fill_pattern(src, len, (enum pattern)p, 1000 + ui * 10 + (size_t)p);
				n = round_trip(ctx, src, len, cbuf, cap, out);
				assert_true(n > 0);
				if ((p == PAT_ZERO || p == PAT_SAME) && checks_ratio)
					check((size_t)n < len / 8, "%s %zu %s: %d", name, len,
					      pattern_names[p], n);
				if (p == PAT_TEXT && checks_ratio)
					check((size_t)n < len, "%s %zu %s: %d", name, len,
					      pattern_names[p], n);

				/* Bounded by the unit size: fits, or -E2BIG, never more. */
				n2 = round_trip(ctx, src, len, cbuf, len - 1, out);
				if (p == PAT_RANDOM || is_none)
					assert_int_equal(n2, -E2BIG);
				else if (p != PAT_HALF && checks_ratio)
					check(n2 > 0, "%s %zu %s: %d", name, len, pattern_names[p],
					      n2);

				/* One byte changed: a reused context must not leak the last input. */
				src[len / 3] ^= 0x40;
				assert_true(round_trip(ctx, src, len, cbuf, cap, out) > 0);
			}
		}
		zf_codec_ctx_destroy(ctx);
	}
	free(src);
	free(cbuf);
	free(out);
}

/*
 * A bound of the output's size succeeds (within ZF_CODEC_SLACK for the codecs that need
 * working room); one byte less is -E2BIG and writes nothing past the bound.
 */
static void test_exact_bound(void **state)
{
	const struct algorithm *alg = algorithm_or_skip(state);
	const size_t lens[] = { 4 * KiB, 16 * KiB, 64 * KiB };
	uint8_t *src = malloc(64 * KiB), *cbuf = malloc(128 * KiB), *out = malloc(64 * KiB);

	for (size_t ci = 0; alg->levels[ci]; ci++) {
		const char *name = alg->levels[ci];
		zf_codec_ctx *ctx = ctx_for(name);

		for (size_t li = 0; li < 3; li++) {
			for (int p = 0; p < PAT_COUNT; p++) {
				const size_t len = lens[li];
				size_t bound;
				int n;

				fill_pattern(src, len, (enum pattern)p, 7 + (uint64_t)p);
				n = zf_codec_compress(ctx, src, len, cbuf, 128 * KiB);
				assert_true(n > 0);
				bound = (size_t)n + (alg->exact ? 0 : ZF_CODEC_SLACK);
				check(round_trip(ctx, src, len, cbuf, bound, out) == n,
				      "%s %zu %s: bound %zu for %d bytes", name, len,
				      pattern_names[p], bound, n);
				memset(cbuf, 0x5a, 128 * KiB);
				assert_int_equal(
					zf_codec_compress(ctx, src, len, cbuf, (size_t)n - 1),
					-E2BIG);
				for (size_t i = (size_t)n - 1; i < 128 * KiB; i++)
					assert_int_equal(cbuf[i], 0x5a);
			}
		}
		zf_codec_ctx_destroy(ctx);
	}
	free(src);
	free(cbuf);
	free(out);
}

/* len bytes that end exactly where a PROT_NONE page begins. */
static uint8_t *guarded(size_t len, void **map, size_t *map_len)
{
	const size_t page = (size_t)sysconf(_SC_PAGESIZE);
	const size_t span = (len + page - 1) / page * page + page;
	uint8_t *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	assert_int_equal(mprotect(p + span - page, page, PROT_NONE), 0);
	*map = p;
	*map_len = span;
	return p + span - page - len;
}

static void test_guard_page(void **state)
{
	const struct algorithm *alg = algorithm_or_skip(state);
	const size_t lens[] = { 4 * KiB, 64 * KiB, 4 * KiB + 1000 };

	for (size_t ci = 0; alg->levels[ci]; ci++) {
		zf_codec_ctx *ctx = ctx_for(alg->levels[ci]);

		for (size_t li = 0; li < 3; li++) {
			const size_t len = lens[li];
			uint8_t *src = malloc(len), *cbuf = malloc(2 * len);
			void *map;
			size_t map_len;
			uint8_t *dst;
			int n;

			for (int p = 0; p < PAT_COUNT; p++) {
				fill_pattern(src, len, (enum pattern)p, 99);
				n = zf_codec_compress(ctx, src, len, cbuf, 2 * len);
				assert_true(n > 0);

				/* Output that ends at the guard page. */
				dst = guarded(len, &map, &map_len);
				assert_int_equal(
					zf_codec_decompress(ctx, cbuf, (size_t)n, dst, len),
					(int)len);
				assert_memory_equal(dst, src, len);
				/* One byte short: must fail, not run into the guard. */
				assert_int_equal(
					zf_codec_decompress(ctx, cbuf, (size_t)n, dst + 1, len - 1),
					-EBADMSG);
				munmap(map, map_len);

				/* Compressed input that ends at the guard page. */
				dst = guarded((size_t)n, &map, &map_len);
				memcpy(dst, cbuf, (size_t)n);
				memset(cbuf, 0, len);
				assert_int_equal(
					zf_codec_decompress(ctx, dst, (size_t)n, cbuf, len),
					(int)len);
				assert_memory_equal(cbuf, src, len);
				munmap(map, map_len);

				/* A compression bound that ends at the guard page. */
				dst = guarded(len / 2, &map, &map_len);
				n = zf_codec_compress(ctx, src, len, dst, len / 2);
				assert_true(n == -E2BIG || (n > 0 && (size_t)n <= len / 2));
				munmap(map, map_len);
			}
			free(src);
			free(cbuf);
		}
		zf_codec_ctx_destroy(ctx);
	}
}

/* Truncated input always fails; flipped bits and random input fail or decode to len. */
static void test_corrupt_input(void **state)
{
	const struct algorithm *alg = algorithm_or_skip(state);
	zf_codec_ctx *ctx = ctx_for(alg->name);
	const size_t len = 4 * KiB;
	uint8_t *src = malloc(len), *cbuf = malloc(2 * len), *bad = malloc(2 * len);
	uint8_t *out = malloc(len);
	uint64_t seed = 42;

	for (int p = 0; p < PAT_COUNT; p++) {
		int n;

		fill_pattern(src, len, (enum pattern)p, 5);
		n = zf_codec_compress(ctx, src, len, cbuf, 2 * len);
		assert_true(n > 0);
		for (int cut = 1; cut < n; cut++) {
			memcpy(bad, cbuf, (size_t)cut);
			assert_int_equal(zf_codec_decompress(ctx, bad, (size_t)cut, out, len),
					 -EBADMSG);
		}
		for (int k = 0; k < 300; k++) {
			int r;

			memcpy(bad, cbuf, (size_t)n);
			bad[test_rand(&seed) % (uint64_t)n] ^=
				(uint8_t)(1u << (test_rand(&seed) % 8));
			r = zf_codec_decompress(ctx, bad, (size_t)n, out, len);
			assert_true(r == -EBADMSG || r == (int)len);
		}
	}
	for (int k = 0; k < 300; k++) {
		const size_t in_len = 1 + test_rand(&seed) % (2 * len - 1);
		int r;

		fill_random(bad, in_len, test_rand(&seed));
		r = zf_codec_decompress(ctx, bad, in_len, out, len);
		assert_true(r == -EBADMSG || r == (int)len);
	}
	/* A valid stream decoded into a wrong expected length is an error. */
	fill_pattern(src, len, PAT_TEXT, 3);
	{
		const int n = zf_codec_compress(ctx, src, len, cbuf, 2 * len);

		assert_true(n > 0);
		assert_int_equal(zf_codec_decompress(ctx, cbuf, (size_t)n, out, len / 2), -EBADMSG);
		assert_int_equal(zf_codec_decompress(ctx, cbuf, (size_t)n, bad, 2 * len), -EBADMSG);
	}
	zf_codec_ctx_destroy(ctx);
	free(src);
	free(cbuf);
	free(bad);
	free(out);
}

/* Every 4k and 64k unit of the shipped sample image, with the algorithm's default level. */
static void test_sample_image(void **state)
{
	const struct algorithm *alg = algorithm_or_skip(state);
	zf_image *img = NULL;
	const size_t units[] = { 4 * KiB, 64 * KiB };
	zf_codec_ctx *ctx;
	uint8_t *cbuf, *out;

	if (!ZF_IMAGE_ZSTD) {
		/* The pages of a real program: no test-made data stands in for them. */
		print_message("the sample image is a .zst file, and this build has no zstd: "
			      "skipped\n");
		skip();
	}
	ctx = ctx_for(alg->name);
	cbuf = malloc(2 * 64 * KiB);
	out = malloc(64 * KiB);
	assert_int_equal(zf_image_open(ZF_TEST_DATA "/sample.bin.zst", 0, &img), 0);

	for (size_t ui = 0; ui < 2; ui++) {
		const uint8_t *data = zf_image_data(img);
		const size_t size = zf_image_size(img);

		for (size_t off = 0; off < size; off += units[ui]) {
			const size_t len = units[ui] < size - off ? units[ui] : size - off;

			assert_true(round_trip(ctx, data + off, len, cbuf, 2 * 64 * KiB, out) > 0);
		}
	}
	zf_codec_ctx_destroy(ctx);
	zf_image_close(img);
	free(cbuf);
	free(out);
}

/* Each case once per algorithm, named "case algorithm"; then the ones without an algorithm. */
int main(void)
{
	static const struct {
		const char *name;
		CMUnitTestFunction fn;
	} cases[] = {
		{ "test_find", test_find },
		{ "test_bad_lengths", test_bad_lengths },
		{ "test_round_trip_matrix", test_round_trip_matrix },
		{ "test_exact_bound", test_exact_bound },
		{ "test_guard_page", test_guard_page },
		{ "test_corrupt_input", test_corrupt_input },
		{ "test_sample_image", test_sample_image },
	};
	static char names[ARRAY_SIZE(cases) * ARRAY_SIZE(algorithms)][48];
	struct CMUnitTest tests[ARRAY_SIZE(cases) * ARRAY_SIZE(algorithms) + 1];
	size_t n = 0;

	for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
		for (size_t a = 0; a < ARRAY_SIZE(algorithms); a++, n++) {
			snprintf(names[n], sizeof(names[n]), "%s %s", cases[c].name,
				 algorithms[a].name);
			tests[n] = (struct CMUnitTest){ .name = names[n],
							.test_func = cases[c].fn,
							.initial_state = (void *)&algorithms[a] };
		}
	}
	tests[n] = (struct CMUnitTest)cmocka_unit_test(test_find_unknown);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
