/*
 * test_zpool_model.c - model-based random test of zf_pool: long seeded op streams run by
 * the fuzz targets' interpreter (tests/fuzz/zpool_ops.c) against its shadow model.
 *
 *   test_zpool_model [STREAMS [SEED]]       run STREAMS streams (default 16; 12 under
 *                                           ASan, 2 under TSan) from SEED
 *   test_zpool_model --seeds DIR            write the seed corpus of fuzz_zpool to DIR
 *
 * Environment: ZF_SEED (the seed, decimal or 0x hex; default: from the clock, printed
 * first), ZF_STREAMS, ZF_OPS (records per stream, default 2500), ZF_STREAM (run only
 * that stream of the seed: how a failure is repeated), ZF_ZPOOL_DUMP (where a failing
 * stream is written; default test_zpool_model-failure.bin in the working directory, a
 * file that fuzz_replay_zpool runs).
 *
 * Random bytes alone would make a pool that drifts around one size: the streams are made
 * of phases instead (grow, fragment, churn, big units, pinned compaction, class edges,
 * refused calls, shrink), each a weighting of the ops and the sizes, encoded with
 * zpool_ops.h's encoder, so that every stream fills zspages, empties them in other
 * orders, compacts with and without pins, and reaches 2 MiB units and class boundaries.
 * Each stream gets a compact_threshold_pct from the seed too (0 = no automatic
 * compaction, 1, 10, 25, 50, 100 or the default).
 *
 * The closing summary counts what the ops did (allocations, objects that compaction
 * moved, pages it gave back, refused calls, bytes compared), so a run that stopped
 * reaching something shows. It also reports, without failing, how often a compaction
 * with nothing pinned left pages that zf_pool_class_stats says are freeable: the header
 * promises "pages compaction could give back now", not that one pass gives all of them.
 *
 * Not cmocka: one main() returning 0 or 1, because a failure is an abort() inside the
 * interpreter, with its own message, like the fuzz targets'.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../fuzz/zpool_ops.h"

/*
 * About 10 s in each preset: fewer streams under ASan (and ZF_DEBUG_FULL), fewer still
 * under TSan, which makes each of the class table's mutexes costly and finds nothing in a
 * single thread (tests/stress/zpool_stress.c is the race test).
 */
#if defined(__SANITIZE_THREAD__)
#define DEFAULT_STREAMS 2
#elif defined(__SANITIZE_ADDRESS__)
#define DEFAULT_STREAMS 12
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DEFAULT_STREAMS 2
#elif __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define DEFAULT_STREAMS 12
#endif
#endif
#ifndef DEFAULT_STREAMS
#define DEFAULT_STREAMS 16
#endif
#define DEFAULT_OPS 2500
#define MAX_OPS 100000

static uint64_t rng_state;

/* splitmix64: the same stream for the same seed on any platform. */
static uint64_t rng(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t rng_below(uint32_t n)
{
	return (uint32_t)(rng() % n);
}

/* A growing buffer of records. */
struct stream {
	uint8_t *buf;
	size_t len, cap;
};

static void reserve(struct stream *s, size_t n)
{
	if (s->len + n <= s->cap)
		return;
	while (s->len + n > s->cap)
		s->cap = s->cap ? 2 * s->cap : 4096;
	s->buf = realloc(s->buf, s->cap);
	if (!s->buf) {
		fprintf(stderr, "test_zpool_model: out of memory\n");
		exit(1);
	}
}

static void emit(struct stream *s, enum zop_code op, unsigned param, unsigned sel, uint32_t a,
		 uint32_t b)
{
	reserve(s, ZOP_RECORD);
	zop_encode(s->buf + s->len, op, param, sel, a, b);
	s->len += ZOP_RECORD;
}

/* Starts a stream: byte 0 picks the pool's compact_threshold_pct (zpool_ops.h). */
static void emit_config(struct stream *s, unsigned slot)
{
	s->len = 0;
	reserve(s, 1);
	s->buf[0] = (uint8_t)(slot & 7);
	s->len = 1;
}

/* Size selectors by phase: the mix of sizes each phase allocates. */
enum size_mix { MIX_SMALL, MIX_ANY, MIX_BIG, MIX_EDGE };

static unsigned pick_sel(enum size_mix mix)
{
	const uint32_t r = rng_below(100);

	switch (mix) {
	case MIX_SMALL: /* compressed 4 KiB pages: mostly under 2 KiB */
		return r < 70 ? ZOP_SIZE_SMALL : r < 95 ? ZOP_SIZE_PAGE : ZOP_SIZE_64K;
	case MIX_BIG:
		return r < 30	? ZOP_SIZE_64K
		       : r < 55 ? ZOP_SIZE_PAGES
		       : r < 80 ? ZOP_SIZE_512K
				: ZOP_SIZE_UNIT_MAX;
	case MIX_EDGE:
		return r < 60 ? ZOP_SIZE_CLASS_EDGE : r < 85 ? ZOP_SIZE_PAGES : ZOP_SIZE_SMALL;
	default:
		return rng_below(16);
	}
}

/* a for a size selector: ZOP_SIZE_UNIT_MAX takes 2 MiB only with (a >> 16) < 32. */
static uint32_t pick_a(unsigned sel)
{
	uint32_t a = rng_below(1u << 24);

	if (sel == ZOP_SIZE_UNIT_MAX && rng_below(4) == 0)
		a &= 0x1fffff;
	return a;
}

enum phase { PH_GROW, PH_FRAGMENT, PH_CHURN, PH_BIG, PH_PIN, PH_EDGE, PH_BAD, PH_SHRINK, PH_N };

/* Op weights per phase, over the canonical codes. */
struct weights {
	unsigned alloc, burst, free, stride, write, read, compact, pin, bad, verify, realloc;
};

static const struct weights phase_weights[PH_N] = {
	[PH_GROW] = { 40, 25, 10, 0, 10, 10, 1, 1, 1, 1, 2 },
	[PH_FRAGMENT] = { 15, 5, 40, 6, 5, 10, 8, 6, 1, 2, 2 },
	[PH_CHURN] = { 20, 5, 20, 2, 15, 15, 4, 4, 4, 1, 10 },
	[PH_BIG] = { 30, 2, 25, 1, 15, 10, 6, 4, 1, 2, 4 },
	[PH_PIN] = { 15, 5, 20, 2, 5, 10, 5, 35, 1, 1, 1 },
	[PH_EDGE] = { 35, 5, 20, 1, 15, 5, 4, 2, 2, 1, 10 },
	[PH_BAD] = { 15, 2, 15, 1, 10, 5, 2, 2, 45, 1, 2 },
	[PH_SHRINK] = { 5, 0, 55, 8, 5, 10, 8, 5, 1, 2, 1 },
};

static enum zop_code pick_op(const struct weights *w)
{
	const unsigned v[] = { w->alloc,   w->burst, w->free, w->stride, w->write,  w->read,
			       w->compact, w->pin,   w->bad,  w->verify, w->realloc };
	static const enum zop_code ops[] = { ZOP_ALLOC, ZOP_BURST,  ZOP_FREE,	 ZOP_FREE_STRIDE,
					     ZOP_WRITE, ZOP_READ,   ZOP_COMPACT, ZOP_PIN_COMPACT,
					     ZOP_BAD,	ZOP_VERIFY, ZOP_REALLOC };
	unsigned total = 0, r;

	for (unsigned i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		total += v[i];
	r = rng_below(total);
	for (unsigned i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		if (r < v[i])
			return ops[i];
		r -= v[i];
	}
	return ZOP_VERIFY;
}

static void emit_random_op(struct stream *s, enum phase ph)
{
	const enum size_mix mix = ph == PH_BIG	   ? MIX_BIG
				  : ph == PH_EDGE  ? MIX_EDGE
				  : ph == PH_CHURN ? MIX_ANY
						   : MIX_SMALL;
	const enum zop_code op = pick_op(&phase_weights[ph]);
	unsigned sel = pick_sel(mix), param = rng_below(16);
	uint32_t a = pick_a(sel), b = rng_below(1u << 24);

	switch (op) {
	case ZOP_ALLOC:
		/* Rarely unwritten (param 15): most objects should be checkable. */
		if (param == 15 && rng_below(4))
			param = 0;
		break;
	case ZOP_BURST:
		/* Bursts of small objects fill zspages; of big ones, a few. */
		sel = pick_sel(ph == PH_BIG ? MIX_BIG : MIX_SMALL);
		a = pick_a(sel);
		b = sel >= ZOP_SIZE_64K ? rng_below(4) : rng_below(64);
		break;
	case ZOP_WRITE:
		sel = ph == PH_EDGE || ph == PH_BAD ? rng_below(8) : rng_below(5);
		break;
	case ZOP_PIN_COMPACT:
		/* sel: pins (sel % 4), churn allocs (sel % 4), their size (sel >> 2), frees. */
		sel = rng_below(256);
		if ((sel >> 2) % 16 >= ZOP_SIZE_64K)
			sel &= ~0x30u;
		param |= ph == PH_PIN;
		break;
	case ZOP_REALLOC:
		if (rng_below(3) == 0)
			sel = 0;
		break;
	case ZOP_FREE_STRIDE:
		sel = rng_below(6);
		break;
	default:
		break;
	}
	emit(s, op, param, sel, a, b);
}

/* A stream of nops records made of random phases, with a config byte first. */
static void make_stream(struct stream *s, uint64_t seed, unsigned nops)
{
	rng_state = seed;
	emit_config(s, rng_below(8));
	while ((s->len - 1) / ZOP_RECORD < nops) {
		const enum phase ph = (enum phase)rng_below(PH_N);
		const unsigned len = 20 + rng_below(300);

		for (unsigned i = 0; i < len && (s->len - 1) / ZOP_RECORD < nops; i++)
			emit_random_op(s, ph);
	}
}

/* ------------------------------------------------------------------------------ */
/* Seeds for fuzz_zpool: short scenarios, each aimed at one part of the pool        */
/* ------------------------------------------------------------------------------ */

static int write_file(const char *dir, const char *name, const struct stream *s)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(s->buf, 1, s->len, f) != s->len || fclose(f) != 0) {
		fprintf(stderr, "test_zpool_model: %s: %s\n", path, strerror(errno));
		return -1;
	}
	printf("  %s (%zu bytes, %zu ops)\n", path, s->len, (s->len - 1) / ZOP_RECORD);
	/* Every seed must pass, or it is not a seed. */
	zpool_ops_set_context(path);
	zpool_ops_run(s->buf, s->len);
	zpool_ops_set_context(NULL);
	return 0;
}

static int write_seeds(const char *dir)
{
	struct stream s = { 0 };
	int ret = 0;

	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "test_zpool_model: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	printf("test_zpool_model: writing seeds\n");

	/* Fill classes, free every other object, compact (no automatic compaction). */
	emit_config(&s, 1);
	for (unsigned i = 0; i < 6; i++)
		emit(&s, ZOP_BURST, i, ZOP_SIZE_SMALL, 17 + 40 * i, 63);
	emit(&s, ZOP_FREE_STRIDE, 0, 0, 0, 0);
	emit(&s, ZOP_FREE_STRIDE, 0, 1, 1, 0);
	emit(&s, ZOP_COMPACT, 0, 0, 0, 0);
	emit(&s, ZOP_BURST, 2, ZOP_SIZE_PAGE, 3000, 40);
	emit(&s, ZOP_FREE_STRIDE, 0, 2, 0, 0);
	emit(&s, ZOP_COMPACT, 0, 0, 0, 0);
	emit(&s, ZOP_VERIFY, 0, 0, 0, 0);
	ret |= write_file(dir, "seed-fragment-compact", &s);

	/* The same with compaction from free (threshold 1%). */
	s.buf[0] = 2;
	ret |= write_file(dir, "seed-auto-compact", &s);

	/* Pinned reads through compaction, with allocations and frees around them. */
	emit_config(&s, 1);
	for (unsigned i = 0; i < 4; i++)
		emit(&s, ZOP_BURST, 0, ZOP_SIZE_SMALL, 100 + i, 63);
	emit(&s, ZOP_FREE_STRIDE, 0, 1, 0, 0);
	for (unsigned i = 0; i < 8; i++)
		emit(&s, ZOP_PIN_COMPACT, 1, (i * 37) & 0xcf, 5 * i, 11 * i);
	emit(&s, ZOP_FREE_STRIDE, 0, 0, 1, 0);
	emit(&s, ZOP_PIN_COMPACT, 0, 3, 1, 2);
	ret |= write_file(dir, "seed-pinned", &s);

	/* Class edges and page multiples +-1, then frees in another order. */
	emit_config(&s, 0);
	for (unsigned i = 0; i < 120; i++)
		emit(&s, ZOP_ALLOC, i % 7, i % 3 ? ZOP_SIZE_CLASS_EDGE : ZOP_SIZE_PAGES,
		     i * 97 + i / 3, 0);
	emit(&s, ZOP_FREE_STRIDE, 0, 1, 0, 0);
	emit(&s, ZOP_COMPACT, 0, 0, 0, 0);
	for (unsigned i = 0; i < 40; i++)
		emit(&s, ZOP_REALLOC, i & 7, ZOP_SIZE_CLASS_EDGE, i * 1031, i * 13);
	ret |= write_file(dir, "seed-class-edges", &s);

	/* 2 MiB units (huge classes), writes of every kind, frees and reuse. */
	emit_config(&s, 4);
	for (unsigned i = 0; i < 6; i++)
		emit(&s, ZOP_ALLOC, 2, ZOP_SIZE_UNIT_MAX, i, 0);
	emit(&s, ZOP_ALLOC, 0, ZOP_SIZE_512K, 300000, 0);
	emit(&s, ZOP_ALLOC, 15, ZOP_SIZE_64K, 65535, 0);
	for (unsigned m = 0; m < 8; m++)
		emit(&s, ZOP_WRITE, m, m, 12345 * m, m);
	emit(&s, ZOP_FREE, 1, 0, 0, 2);
	emit(&s, ZOP_REALLOC, 4, 0, 0, 1);
	emit(&s, ZOP_COMPACT, 0, 0, 0, 0);
	emit(&s, ZOP_READ, 1, 0, 0, 3);
	ret |= write_file(dir, "seed-unit-max", &s);

	/* Every call that must be refused, on a pool with live and freed handles. */
	emit_config(&s, 3);
	emit(&s, ZOP_BURST, 0, ZOP_SIZE_SMALL, 50, 20);
	emit(&s, ZOP_FREE, 0, 0, 0, 3);
	emit(&s, ZOP_FREE, 1, 0, 0, 7);
	for (unsigned k = 0; k < 8; k++)
		emit(&s, ZOP_BAD, k, 0, 1 + 77 * k, 2 + 5 * k);
	emit(&s, ZOP_ALLOC, 0, ZOP_SIZE_SMALL, 50, 0);
	emit(&s, ZOP_BAD, ZOP_BAD_ALL, 0, 64, 65);
	ret |= write_file(dir, "seed-refused", &s);

	/*
	 * Two zspages of the 248-byte class (16 slots of 256 bytes per page in the first
	 * class table): free all but 2 objects of the second, then all but 3 of the first, so
	 * both end in the same fullness group with the fuller one first, then compact. The
	 * compaction of 2026-12 (zpool.c rewrite in progress) takes the fuller one as source,
	 * will not move into an emptier zspage, and gives nothing back: 5 objects stay in 2
	 * zspages and freeable stays 1 (ZF_ZPOOL_STRICT_COMPACT=1 turns that into an abort).
	 */
	emit_config(&s, 1);
	emit(&s, ZOP_BURST, 0, ZOP_SIZE_SMALL, 247, 31);
	{
		unsigned ids[32], n = 32;

		for (unsigned i = 0; i < n; i++)
			ids[i] = i;
		for (unsigned id = 31; id > 0; id--) {
			if (id == 16 || id == 17 || id < 3)
				continue;
			for (unsigned i = 0; i < n; i++) {
				if (ids[i] == id) {
					emit(&s, ZOP_FREE, 0, 0, 0, i);
					ids[i] = ids[--n]; /* as the interpreter's model does */
					break;
				}
			}
		}
	}
	emit(&s, ZOP_COMPACT, 0, 0, 0, 0);
	emit(&s, ZOP_COMPACT, 0, 0, 0, 0);
	ret |= write_file(dir, "seed-compact-same-group", &s);

	/* Short random streams from the phase generator. */
	for (unsigned i = 0; i < 6; i++) {
		char name[32];

		make_stream(&s, 0x7a706f6f6c000000ull + i, 300);
		snprintf(name, sizeof(name), "seed-random-%u", i);
		ret |= write_file(dir, name, &s);
	}
	free(s.buf);
	return ret ? 1 : 0;
}

/* ------------------------------------------------------------------------------ */

static unsigned long long env_ull(const char *name, unsigned long long def)
{
	const char *v = getenv(name);

	return v && *v ? strtoull(v, NULL, 0) : def;
}

static void print_counts(double seconds)
{
	const struct zpool_ops_counts *c = zpool_ops_counts();

	printf("test_zpool_model: %llu streams in %.1f s: %llu allocs (%llu > 64 KiB, %llu of "
	       "~2 MiB), %llu frees, %llu writes, %llu reads, %llu pinned reads\n",
	       (unsigned long long)c->runs, seconds, (unsigned long long)c->allocs,
	       (unsigned long long)c->huge_allocs, (unsigned long long)c->unit_max_allocs,
	       (unsigned long long)c->frees, (unsigned long long)c->writes,
	       (unsigned long long)c->reads, (unsigned long long)c->pinned_reads);
	printf("test_zpool_model: %llu compactions gave back %llu pages and moved %llu objects "
	       "(%llu spilled to a larger class); %llu full verifies compared %llu MiB; %llu "
	       "refused calls; %llu allocs skipped (bounds), %llu -ENOMEM; at most %llu objects, "
	       "%llu KiB live\n",
	       (unsigned long long)c->compactions, (unsigned long long)c->pages_compacted,
	       (unsigned long long)c->objects_moved, (unsigned long long)c->objects_spilled,
	       (unsigned long long)c->full_verifies, (unsigned long long)(c->bytes_verified >> 20),
	       (unsigned long long)c->bad_calls, (unsigned long long)c->skipped_allocs,
	       (unsigned long long)c->enomem, (unsigned long long)c->max_live_objects,
	       (unsigned long long)(c->max_live_bytes >> 10));
	printf("test_zpool_model: note (not checked): %llu of %llu compactions with nothing "
	       "pinned left freeable pages (%llu pages in all); %llu gave back more than the "
	       "classes called freeable; %llu class lines had freeable > pages_used\n",
	       (unsigned long long)c->compact_left_freeable,
	       (unsigned long long)c->ops[ZOP_COMPACT],
	       (unsigned long long)c->compact_left_freeable_pages,
	       (unsigned long long)c->compact_above_freeable,
	       (unsigned long long)c->freeable_above_used);
}

int main(int argc, char **argv)
{
	struct timespec t0, t1;
	struct stream s = { 0 };
	unsigned long long seed, streams, nops, only;
	char ctx[256];

	if (argc == 3 && strcmp(argv[1], "--seeds") == 0)
		return write_seeds(argv[2]);
	if (argc > 3 || (argc > 1 && argv[1][0] == '-')) {
		fprintf(stderr, "usage: %s [STREAMS [SEED]] | --seeds DIR\n", argv[0]);
		return 1;
	}
	clock_gettime(CLOCK_REALTIME, &t0);
	seed = env_ull("ZF_SEED", (unsigned long long)t0.tv_nsec ^
					  (unsigned long long)t0.tv_sec << 20 ^
					  (unsigned long long)getpid() << 40);
	streams = env_ull("ZF_STREAMS", DEFAULT_STREAMS);
	if (argc > 1)
		streams = strtoull(argv[1], NULL, 0);
	if (argc > 2)
		seed = strtoull(argv[2], NULL, 0);
	nops = env_ull("ZF_OPS", DEFAULT_OPS);
	if (nops > MAX_OPS)
		nops = MAX_OPS;
	only = env_ull("ZF_STREAM", ~0ull);
	if (!getenv("ZF_ZPOOL_DUMP"))
		setenv("ZF_ZPOOL_DUMP", "test_zpool_model-failure.bin", 1);
	printf("test_zpool_model: seed %#llx (ZF_SEED=%#llx to repeat), %llu streams of %llu ops\n",
	       seed, seed, streams, nops);
	fflush(stdout);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned long long i = 0; i < streams; i++) {
		if (only != ~0ull && i != only)
			continue;
		make_stream(&s, seed ^ (i + 1) * 0x9e3779b97f4a7c15ull, (unsigned)nops);
		snprintf(ctx, sizeof(ctx),
			 "stream %llu of seed %#llx (threshold slot %u); repeat with ZF_SEED=%#llx "
			 "ZF_STREAM=%llu ZF_OPS=%llu",
			 i, seed, s.buf[0], seed, i, nops);
		zpool_ops_set_context(ctx);
		zpool_ops_run(s.buf, s.len);
	}
	zpool_ops_set_context(NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	free(s.buf);
	print_counts((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	/* A run this long always spills (thousands of times): none means the test lost it. */
	if (only == ~0ull && streams >= 8 && nops >= 1000 && !zpool_ops_counts()->objects_spilled) {
		fprintf(stderr, "test_zpool_model: no compaction spilled an object\n");
		return 1;
	}
	printf("test_zpool_model: passed\n");
	return 0;
}
