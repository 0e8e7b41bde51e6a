/*
 * test_codec.c - every codec backend: names, round trips over the codec x level class x
 * unit size x page kind matrix, the -E2BIG bound, exact-size output before a guard
 * page, and corrupt, truncated and random input (which must fail cleanly; run this
 * under the dev preset's ASan to see that nothing is read or written out of bounds).
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

/* Each algorithm at the fast end, the default and the slow end of its levels. */
static const char *const level_classes[] = {
	"lz4:65537",  "lz4",	"lz4:8",  "lz4hc:1", "lz4hc",	  "lz4hc:12",  "zstd:-50",
	"zstd:-1",    "zstd:1", "zstd",	  "zstd:19", "deflate:0", "deflate:1", "deflate",
	"deflate:12", "isal:0", "isal:1", "isal:2",  "isal:3",	  "lzo",       "none",
};
/* Defaults only: for the larger, slower cases. */
static const char *const defaults[] = { "lz4", "lz4hc", "zstd", "deflate", "isal", "lzo", "none" };

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

static void test_find(void **state)
{
	const zf_codec *a, *b;

	(void)state;
	assert_int_equal(zf_codec_find("lz4", &a), 0);
	assert_string_equal(zf_codec_name(a), "lz4:1");
	assert_int_equal(zf_codec_find("lz4:1", &b), 0);
	assert_ptr_equal(a, b); /* interned */
	assert_int_equal(zf_codec_find("zstd", &a), 0);
	assert_string_equal(zf_codec_name(a), "zstd:3");
	assert_string_equal(zf_codec_algorithm(a), "zstd");
	assert_int_equal(zf_codec_level(a), 3);
	assert_int_equal(zf_codec_find("zstd:-5", &a), 0);
	assert_int_equal(zf_codec_level(a), -5);
	assert_int_equal(zf_codec_find("lzo", &a), 0);
	assert_string_equal(zf_codec_name(a), "lzo");
	assert_int_equal(zf_codec_find("isal:3", &a), 0);

	assert_int_equal(zf_codec_find("zstd:23", &a), -EINVAL);
	assert_int_equal(zf_codec_find("zstd:", &a), -EINVAL);
	assert_int_equal(zf_codec_find("zstd:1x", &a), -EINVAL);
	assert_int_equal(zf_codec_find("zstd: 1", &a), -EINVAL);
	assert_int_equal(zf_codec_find("zstd:99999999999", &a), -EINVAL);
	assert_int_equal(zf_codec_find("lz4:0", &a), -EINVAL);
	assert_int_equal(zf_codec_find("lz4hc:13", &a), -EINVAL);
	assert_int_equal(zf_codec_find("deflate:13", &a), -EINVAL);
	assert_int_equal(zf_codec_find("isal:4", &a), -EINVAL);
	assert_int_equal(zf_codec_find("lzo:1", &a), -EINVAL);
	assert_int_equal(zf_codec_find("brotli", &a), -ENOENT);
	assert_int_equal(zf_codec_find("", &a), -ENOENT);
	assert_int_equal(zf_codec_find(NULL, &a), -EINVAL);
	assert_non_null(strstr(zf_codec_algorithms(), "zstd"));
}

static void test_bad_lengths(void **state)
{
	zf_codec_ctx *ctx = ctx_for("lz4");
	uint8_t buf[64] = { 0 }, out[64];

	(void)state;
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
	const size_t max = 2 * MiB, cap = 2 * max + 4096;
	uint8_t *src = malloc(max), *cbuf = malloc(cap), *out = malloc(max);

	(void)state;
	assert_non_null(src);
	assert_non_null(cbuf);
	assert_non_null(out);
	for (size_t ci = 0; ci < sizeof(level_classes) / sizeof(level_classes[0]); ci++) {
		const char *name = level_classes[ci];
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
	const size_t lens[] = { 4 * KiB, 16 * KiB, 64 * KiB };
	uint8_t *src = malloc(64 * KiB), *cbuf = malloc(128 * KiB), *out = malloc(64 * KiB);

	(void)state;
	for (size_t ci = 0; ci < sizeof(level_classes) / sizeof(level_classes[0]); ci++) {
		const char *name = level_classes[ci];
		const int exact =
			!strncmp(name, "lz4", 3) || !strcmp(name, "lzo") || !strcmp(name, "none");
		zf_codec_ctx *ctx = ctx_for(name);

		for (size_t li = 0; li < 3; li++) {
			for (int p = 0; p < PAT_COUNT; p++) {
				const size_t len = lens[li];
				size_t bound;
				int n;

				fill_pattern(src, len, (enum pattern)p, 7 + (uint64_t)p);
				n = zf_codec_compress(ctx, src, len, cbuf, 128 * KiB);
				assert_true(n > 0);
				bound = (size_t)n + (exact ? 0 : ZF_CODEC_SLACK);
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
	const size_t lens[] = { 4 * KiB, 64 * KiB, 4 * KiB + 1000 };

	(void)state;
	for (size_t ci = 0; ci < sizeof(level_classes) / sizeof(level_classes[0]); ci++) {
		zf_codec_ctx *ctx = ctx_for(level_classes[ci]);

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
	const size_t len = 4 * KiB;
	uint8_t *src = malloc(len), *cbuf = malloc(2 * len), *bad = malloc(2 * len);
	uint8_t *out = malloc(len);
	uint64_t seed = 42;

	(void)state;
	for (size_t ci = 0; ci < sizeof(defaults) / sizeof(defaults[0]); ci++) {
		zf_codec_ctx *ctx = ctx_for(defaults[ci]);

		for (int p = 0; p < PAT_COUNT; p++) {
			int n;

			fill_pattern(src, len, (enum pattern)p, 5);
			n = zf_codec_compress(ctx, src, len, cbuf, 2 * len);
			assert_true(n > 0);
			for (int cut = 1; cut < n; cut++) {
				memcpy(bad, cbuf, (size_t)cut);
				assert_int_equal(
					zf_codec_decompress(ctx, bad, (size_t)cut, out, len),
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
			assert_int_equal(zf_codec_decompress(ctx, cbuf, (size_t)n, out, len / 2),
					 -EBADMSG);
			assert_int_equal(zf_codec_decompress(ctx, cbuf, (size_t)n, bad, 2 * len),
					 -EBADMSG);
		}
		zf_codec_ctx_destroy(ctx);
	}
	free(src);
	free(cbuf);
	free(bad);
	free(out);
}

/* Every 4k and 64k unit of the shipped sample image, with every codec's default. */
static void test_sample_image(void **state)
{
	zf_image *img = NULL;
	const size_t units[] = { 4 * KiB, 64 * KiB };
	uint8_t *cbuf, *out;

	(void)state;
	if (!ZF_IMAGE_ZSTD)
		skip(); /* the sample is a .zst file, and this build reads raw images only */
	cbuf = malloc(2 * 64 * KiB);
	out = malloc(64 * KiB);
	assert_int_equal(zf_image_open(ZF_TEST_DATA "/sample.bin.zst", 0, &img), 0);
	for (size_t ci = 0; ci < sizeof(defaults) / sizeof(defaults[0]); ci++) {
		zf_codec_ctx *ctx = ctx_for(defaults[ci]);

		for (size_t ui = 0; ui < 2; ui++) {
			const uint8_t *data = zf_image_data(img);
			const size_t size = zf_image_size(img);

			for (size_t off = 0; off < size; off += units[ui]) {
				const size_t len = units[ui] < size - off ? units[ui] : size - off;

				assert_true(round_trip(ctx, data + off, len, cbuf, 2 * 64 * KiB,
						       out) > 0);
			}
		}
		zf_codec_ctx_destroy(ctx);
	}
	zf_image_close(img);
	free(cbuf);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_bad_lengths),
		cmocka_unit_test(test_round_trip_matrix),
		cmocka_unit_test(test_exact_bound),
		cmocka_unit_test(test_guard_page),
		cmocka_unit_test(test_corrupt_input),
		cmocka_unit_test(test_sample_image),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
