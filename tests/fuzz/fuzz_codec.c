/*
 * fuzz_codec.c - libFuzzer target for one codec, built once per codec with
 * -DFUZZ_CODEC="lz4" (lz4hc, zstd, deflate, isal, lzo).
 *
 * The first byte of an input picks one of two jobs and a level (fuzz_codec.h has the
 * format, shared with the seed generator):
 *
 *  - decompress untrusted input: the next three bytes give an expected length of 1..2 MiB,
 *    the rest is handed to zf_codec_decompress() as a compressed stream. The documented
 *    outcomes are exactly that length, -EBADMSG or -ENOMEM; anything else aborts. When
 *    the stream does decode, it must also be rejected for one byte less and one byte more,
 *    because the caller relies on "exactly dst_len or an error".
 *  - round trip: the rest is compressed with a generous bound (which must succeed),
 *    decompressed, and compared; then compressed again with bounds that are too small
 *    (the compressed length minus one, half of it, and 1), which must give -E2BIG or a
 *    result that is itself valid.
 *
 * Every buffer handed to the library - the input copy, the compressed output, the
 * decompressed output - ends exactly at a PROT_NONE page, as libdeflate's tests place
 * theirs. The codecs are Debian's shared libraries, which ASan does not instrument, so
 * an overrun inside liblz4 or libisal would go unseen on the heap; against a guard page
 * it is a SIGSEGV in any build, the sanitized libFuzzer one and the plain replay alike.
 * A read or write past src + src_len or dst + dst_cap is a bug by the API's contract.
 *
 * libFuzzer only sees the coverage of code built with it: the harness and the codec wrappers
 * in src/codec/, not the codec libraries. To give it something to aim for past the
 * wrappers, each outcome - job, level, result class, size and ratio buckets - also bumps
 * one of libFuzzer's "extra counters" (a section it reads as coverage when linked in, and
 * plain data otherwise), so an input that makes a codec behave in a new way is kept.
 *
 * The contexts live in statics, one per level slot, made on first use and kept, as a
 * store keeps one per thread: a bug where state left by one call corrupts the next shows
 * up as a round-trip mismatch.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_codec.h"

#ifndef FUZZ_CODEC
#error "build with -DFUZZ_CODEC=\"lz4\" (or lz4hc, zstd, deflate, isal, lzo)"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Large enough for the input copy and for a full-bound output of a ZF_UNIT_MAX unit. */
#define ARENA_SIZE (2 * (size_t)ZF_UNIT_MAX)

/* The generous bound: above the worst case of every backend (LZO's n + n/16 + 67 is it). */
#define FULL_BOUND(n) ((n) + (n) / 8 + 1024)

enum arena_id { ARENA_SRC, ARENA_DST, ARENA_BACK, ARENA_COUNT };

/* Outcome features for libFuzzer (see the top); a hash picks the counter. */
#define FEATURES 4096
__attribute__((section("__libfuzzer_extra_counters"), used)) static uint8_t features[FEATURES];

static const struct fuzz_codec_levels *levels;
static zf_codec_ctx *ctxs[FUZZ_MAX_LEVELS];
static uint8_t *arena_end[ARENA_COUNT];

/* What is being done, for the message before an abort(). */
static struct {
	const char *job;
	int level;
	size_t len;
} cur;

__attribute__((format(printf, 1, 2), noreturn)) static void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fuzz_codec " FUZZ_CODEC ": %s, level %d, %zu bytes: ", cur.job, cur.level,
		cur.len);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond))                                                                       \
			fail(__VA_ARGS__);                                                         \
	} while (0)

static unsigned log2_bucket(size_t n)
{
	unsigned b = 0;

	while (n > 1) {
		n >>= 1;
		b++;
	}
	return b;
}

/* Counts one outcome: a small tuple of numbers, hashed (FNV-1a) to a counter. */
static void feature(unsigned a, unsigned b, unsigned c, unsigned d)
{
	const unsigned v[4] = { a, b, c, d };
	uint32_t h = 2166136261u;

	for (int i = 0; i < 4; i++)
		h = (h ^ v[i]) * 16777619u;
	if (features[h % FEATURES] < 255)
		features[h % FEATURES]++;
}

/* len bytes that end where the arena's guard page starts. */
static uint8_t *guarded(enum arena_id id, size_t len)
{
	if (len > ARENA_SIZE)
		fail("buffer of %zu bytes above the arena", len);
	return arena_end[id] - len;
}

/* At exit, so that valgrind's leak check (--errors-for-leak-kinds=all) sees nothing left. */
static void teardown(void)
{
	for (int i = 0; i < FUZZ_MAX_LEVELS; i++)
		zf_codec_ctx_destroy(ctxs[i]);
	for (int i = 0; i < ARENA_COUNT; i++)
		munmap(arena_end[i] - ARENA_SIZE, ARENA_SIZE + (size_t)sysconf(_SC_PAGESIZE));
}

static void setup(void)
{
	const size_t page = (size_t)sysconf(_SC_PAGESIZE);

	levels = fuzz_codec_levels(FUZZ_CODEC);
	CHECK(levels, "no level table for this codec");
	for (int i = 0; i < ARENA_COUNT; i++) {
		uint8_t *base = mmap(NULL, ARENA_SIZE + page, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		CHECK(base != MAP_FAILED, "mmap: %s", strerror(errno));
		CHECK(mprotect(base + ARENA_SIZE, page, PROT_NONE) == 0, "mprotect: %s",
		      strerror(errno));
		arena_end[i] = base + ARENA_SIZE;
	}
	/* atexit() handlers run before the library's destructor frees the interned codecs. */
	CHECK(atexit(teardown) == 0, "atexit failed");
}

static zf_codec_ctx *slot_ctx(int slot)
{
	const zf_codec *codec;
	char name[32];
	int ret;

	if (ctxs[slot])
		return ctxs[slot];
	if (levels->has_level)
		snprintf(name, sizeof(name), "%s:%d", FUZZ_CODEC, levels->levels[slot]);
	else
		snprintf(name, sizeof(name), "%s", FUZZ_CODEC);
	ret = zf_codec_find(name, &codec);
	CHECK(ret == 0, "zf_codec_find(\"%s\"): %s", name, zf_strerror(ret));
	ret = zf_codec_ctx_create(codec, &ctxs[slot]);
	CHECK(ret == 0, "zf_codec_ctx_create(\"%s\"): %s", name, zf_strerror(ret));
	return ctxs[slot];
}

/*
 * Decompresses src_len bytes at src, which decoded to want bytes once already, into
 * buffers of want - 1 and want + 1 bytes: both must be refused.
 */
static void check_exact_length(zf_codec_ctx *ctx, const uint8_t *src, size_t src_len, size_t want)
{
	int ret;

	if (want > 1) {
		ret = zf_codec_decompress(ctx, src, src_len, guarded(ARENA_BACK, want - 1),
					  want - 1);
		CHECK(ret == -EBADMSG || ret == -ENOMEM,
		      "stream of %zu bytes decodes to %zu, but into %zu bytes it gives %d", src_len,
		      want, want - 1, ret);
	}
	if (want < ZF_UNIT_MAX) {
		ret = zf_codec_decompress(ctx, src, src_len, guarded(ARENA_BACK, want + 1),
					  want + 1);
		CHECK(ret == -EBADMSG || ret == -ENOMEM,
		      "stream of %zu bytes decodes to %zu, but into %zu bytes it gives %d", src_len,
		      want, want + 1, ret);
	}
}

static void fuzz_decompress(zf_codec_ctx *ctx, const uint8_t *body, size_t body_len)
{
	const size_t header = FUZZ_DECOMPRESS_HEADER - 1;
	size_t want, src_len;
	uint8_t *src, *dst;
	int ret;

	if (body_len < header)
		return;
	want = fuzz_get_length(body);
	src_len = body_len - header;
	if (src_len > ARENA_SIZE)
		src_len = ARENA_SIZE;
	cur.len = src_len;
	src = guarded(ARENA_SRC, src_len);
	memcpy(src, body + header, src_len);
	dst = guarded(ARENA_DST, want);

	ret = zf_codec_decompress(ctx, src, src_len, dst, want);
	feature(1, ret > 0 ? 0 : (unsigned)-ret, log2_bucket(want), log2_bucket(src_len));
	if (ret == -EBADMSG || ret == -ENOMEM)
		return;
	CHECK(ret == (int)want, "decompress into %zu bytes returned %d (%s)", want, ret,
	      ret < 0 ? zf_strerror(ret) : "wrong length");
	check_exact_length(ctx, src, src_len, want);
}

/* comp (clen bytes) must decode to exactly the n bytes at orig. */
static void check_decodes(zf_codec_ctx *ctx, const uint8_t *comp, size_t clen, const uint8_t *orig,
			  size_t n, size_t cap)
{
	uint8_t *back = guarded(ARENA_BACK, n);
	int ret;

	/* Stale bytes from an earlier input must not pass for output never written. */
	memset(back, 0xa5, n);
	ret = zf_codec_decompress(ctx, comp, clen, back, n);
	CHECK(ret == (int)n, "compressed (bound %zu) to %zu, decompress returned %d (%s)", cap,
	      clen, ret, ret < 0 ? zf_strerror(ret) : "wrong length");
	if (memcmp(back, orig, n) != 0) {
		size_t i = 0;

		while (back[i] == orig[i])
			i++;
		fail("round trip (bound %zu, %zu compressed) differs at byte %zu: %#x != %#x", cap,
		     clen, i, back[i], orig[i]);
	}
	check_exact_length(ctx, comp, clen, n);
}

static void fuzz_round_trip(zf_codec_ctx *ctx, const uint8_t *body, size_t body_len)
{
	const size_t n = body_len < ZF_UNIT_MAX ? body_len : ZF_UNIT_MAX;
	const size_t cap = FULL_BOUND(n);
	size_t small[3];
	uint8_t *src, *dst;
	int clen, ret;

	cur.len = n;
	if (n == 0) {
		ret = zf_codec_compress(ctx, body, 0, guarded(ARENA_DST, 64), 64);
		CHECK(ret == -EINVAL, "compress of 0 bytes returned %d", ret);
		return;
	}
	src = guarded(ARENA_SRC, n);
	memcpy(src, body, n);

	dst = guarded(ARENA_DST, cap);
	clen = zf_codec_compress(ctx, src, n, dst, cap);
	if (clen == -ENOMEM)
		return;
	CHECK(clen > 0 && (size_t)clen <= cap, "compress with bound %zu returned %d (%s)", cap,
	      clen, clen < 0 ? zf_strerror(clen) : "above the bound");
	/* The ratio in sixteenths, per level and size: new ratios mean new compressor paths. */
	feature(2, (unsigned)cur.level, log2_bucket(n), (unsigned)((size_t)clen * 16 / n));
	check_decodes(ctx, dst, (size_t)clen, src, n, cap);

	/* Bounds the output does not fit in; each ends at the guard page too. */
	small[0] = (size_t)clen - 1;
	small[1] = (size_t)clen / 2;
	small[2] = 1;
	for (int i = 0; i < 3; i++) {
		const size_t c = small[i];

		if (c == 0 || (i > 0 && c >= small[i - 1]))
			continue;
		dst = guarded(ARENA_DST, c);
		ret = zf_codec_compress(ctx, src, n, dst, c);
		feature(3, (unsigned)i, ret > 0 ? 0 : (unsigned)-ret, log2_bucket(n));
		if (ret == -E2BIG || ret == -ENOMEM)
			continue;
		CHECK(ret > 0 && (size_t)ret <= c, "compress with bound %zu returned %d (%s)", c,
		      ret, ret < 0 ? zf_strerror(ret) : "above the bound");
		check_decodes(ctx, dst, (size_t)ret, src, n, c);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	zf_codec_ctx *ctx;
	int slot;

	if (!levels)
		setup();
	if (size == 0)
		return 0;
	slot = (data[0] >> 1) % levels->nlevels;
	ctx = slot_ctx(slot);
	cur.level = levels->levels[slot];
	if ((data[0] & 1) == FUZZ_JOB_DECOMPRESS) {
		cur.job = "decompress";
		fuzz_decompress(ctx, data + 1, size - 1);
	} else {
		cur.job = "round trip";
		fuzz_round_trip(ctx, data + 1, size - 1);
	}
	return 0;
}
