/*
 * make_op_seeds.c - writes the seed corpora of the store and backing-tier fuzz targets.
 *
 *   make_op_seeds OUTDIR
 *
 * replaces the seed-* files of OUTDIR/store/ and OUTDIR/backing/ (found-*, regress-*
 * and crash-* are kept) with op streams made with the encoders of store_ops.h and
 * backing_ops.h: a scenario aimed at each part of the store (split and unit modes and
 * folios of every size over each other, the last folio of the index space, puts in
 * flight, engines, a pool limit with each policy, writeback to a file too small for it,
 * injected I/O errors, corrupt units, every codec, rejected calls) and of the backing
 * tier (slot sizes, next fit around the end, reads past the end of the file, batches
 * through the ring, injected errors, reopen and second open for each kind of path), then
 * a few streams from a weighted random generator with a fixed seed. Every seed is run
 * through its interpreter before it is written: a seed that fails is not a seed. The
 * output depends only on this file (and, through those runs, on nothing it writes).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backing_ops.h"
#include "store_ops.h"

struct stream {
	uint8_t *buf;
	size_t len, cap;
};

static uint64_t rng_state;

static uint64_t rng(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t below(uint32_t n)
{
	return (uint32_t)(rng() % n);
}

static void reserve(struct stream *s, size_t n)
{
	if (s->len + n <= s->cap)
		return;
	while (s->len + n > s->cap)
		s->cap = s->cap ? 2 * s->cap : 4096;
	s->buf = realloc(s->buf, s->cap);
	if (!s->buf) {
		fprintf(stderr, "make_op_seeds: out of memory\n");
		exit(1);
	}
}

static void bytes(struct stream *s, const uint8_t *p, size_t n)
{
	reserve(s, n);
	memcpy(s->buf + s->len, p, n);
	s->len += n;
}

/* ---------------------------------------------------------------------------------- */
/* Store streams                                                                      */
/* ---------------------------------------------------------------------------------- */

/* The header fields (store_ops.h), as slots of its tables. */
struct sopts {
	unsigned codec, unitk, verify, engines, reject, pct, wb, keep;
	unsigned limit, accept, backing, bbytes, warm;
};

enum { BK_NONE = 0, BK_DIR = 1, BK_NAMED = 2 };

static void s_begin(struct stream *s, const struct sopts *o)
{
	const uint8_t h[SOP_HEADER] = {
		(uint8_t)((o->codec & 7) | (o->unitk & 15) << 3 | (o->verify & 1) << 7),
		(uint8_t)((o->engines & 3) | (o->reject & 1) << 2 | (o->pct & 7) << 3 |
			  (o->wb & 1) << 6 | (o->keep & 1) << 7),
		(uint8_t)((o->limit & 7) | (o->accept & 7) << 3 | (o->backing & 3) << 6),
		(uint8_t)((o->bbytes & 7) | (o->warm & 7) << 3),
	};

	s->len = 0;
	bytes(s, h, sizeof(h));
}

static void s_op(struct stream *s, enum sop_code op, unsigned param, unsigned sel, uint32_t a,
		 uint32_t b)
{
	uint8_t rec[SOP_RECORD];

	sop_encode(rec, op, param, sel, a, b);
	bytes(s, rec, sizeof(rec));
}

/* sel of a folio order in a window; UNIT: a stored unit's, not a page's. */
#define SEL(order, window) ((unsigned)(order) | (unsigned)(window) << 4)
#define UNIT 0x40u

/* A put of order at page a of window w, with pages of kind(s) param. */
static void s_put(struct stream *s, unsigned order, unsigned w, uint32_t a, unsigned param)
{
	s_op(s, SOP_PUT, param, SEL(order, w), a, (uint32_t)rng());
}

/* Op weights of the random streams, by canonical code. */
struct sweights {
	unsigned w[SOP_NR_CODES];
};

static const struct sweights s_profiles[] = {
	/* put, -, start, finish, get, -, folio, inval, over, wb, compact, stats, corrupt, inject, bad, verify */
	{ { 30, 0, 0, 0, 25, 0, 10, 8, 10, 0, 3, 3, 0, 0, 1, 2 } }, /* basic */
	{ { 10, 0, 25, 20, 15, 0, 5, 5, 5, 0, 2, 2, 0, 0, 0, 2 } }, /* puts in flight */
	{ { 25, 0, 5, 5, 20, 0, 8, 5, 8, 15, 3, 2, 2, 4, 0, 2 } }, /* writeback */
	{ { 20, 0, 5, 5, 20, 0, 8, 5, 5, 10, 2, 2, 8, 8, 2, 2 } }, /* failures */
};

static unsigned pick_order(void)
{
	const uint32_t r = below(100);

	return r < 50 ? below(3) : r < 80 ? 3 + below(3) : 6 + below(4);
}

static void s_random_op(struct stream *s, const struct sweights *w)
{
	unsigned total = 0, r, op = 0;

	for (unsigned i = 0; i < SOP_NR_CODES; i++)
		total += w->w[i];
	r = below(total);
	while (r >= w->w[op])
		r -= w->w[op++];
	{
		/* One call per statement: the order of calls in one expression is unspecified. */
		const unsigned order = pick_order();
		const unsigned window = below(SOP_WINDOWS);
		unsigned sel = SEL(order, window) | (below(3) == 0 ? UNIT : 0);
		unsigned param = below(16);
		const uint32_t a = below(1u << 24);
		uint32_t b = below(1u << 24);

		switch ((enum sop_code)op) {
		case SOP_WRITEBACK:
			param = below(6);
			break;
		case SOP_INVALIDATE:
			b = below(64); /* a few pages to a few thousand */
			b <<= below(3) * 4;
			break;
		case SOP_INJECT:
			sel = below(4);
			break;
		case SOP_BAD:
			param = below(7); /* not all of them each time */
			break;
		case SOP_CORRUPT:
			sel |= UNIT;
			break;
		default:
			break;
		}
		s_op(s, (enum sop_code)op, param, sel, a, b);
	}
}

static void s_random(struct stream *s, unsigned profile, unsigned nops)
{
	for (unsigned i = 0; i < nops; i++)
		s_random_op(s, &s_profiles[profile]);
}

/* ---------------------------------------------------------------------------------- */
/* Backing streams                                                                    */
/* ---------------------------------------------------------------------------------- */

struct bopts {
	unsigned shift, io_mode, path, slots, depth, partial;
};

enum { P_DIR = 0, P_NEW = 1, P_OLD = 2 };
enum { IO_AUTO = 0, IO_URING = 1, IO_SYNC = 2 };

static void b_begin(struct stream *s, const struct bopts *o)
{
	const uint8_t h[BOP_HEADER] = {
		(uint8_t)((o->shift & 15) | (o->io_mode & 3) << 4 | (o->path & 3) << 6),
		(uint8_t)((o->slots & 15) | (o->depth & 7) << 4 | (o->partial & 1) << 7),
	};

	s->len = 0;
	bytes(s, h, sizeof(h));
}

static void b_op(struct stream *s, enum bop_code op, unsigned param, unsigned sel, uint32_t a,
		 uint32_t b)
{
	uint8_t rec[BOP_RECORD];

	bop_encode(rec, op, param, sel, a, b);
	bytes(s, rec, sizeof(rec));
}

static void b_random(struct stream *s, unsigned nops)
{
	/* alloc, -, burst, free, stride, write, -, read, -, mixed, bad, inject, stats, verify, reopen, second */
	static const unsigned w[BOP_NR_CODES] = {
		20, 0, 6, 12, 3, 15, 0, 15, 0, 8, 3, 4, 2, 2, 1, 1
	};
	unsigned total = 0;

	for (unsigned i = 0; i < BOP_NR_CODES; i++)
		total += w[i];
	for (unsigned i = 0; i < nops; i++) {
		unsigned r = below(total), op = 0, param, sel;
		uint32_t a, b;

		while (r >= w[op])
			r -= w[op++];
		/* One call per statement: the order of a call's arguments is unspecified. */
		param = below(16);
		sel = below(256);
		a = below(1u << 24);
		b = below(1u << 24);
		b_op(s, (enum bop_code)op, param, sel, a, b);
	}
}

/* ---------------------------------------------------------------------------------- */
/* Writing                                                                            */
/* ---------------------------------------------------------------------------------- */

static int failed;

static void remove_old_seeds(const char *dir)
{
	DIR *dp = opendir(dir);
	struct dirent *d;

	if (!dp)
		return;
	while ((d = readdir(dp))) {
		if (strncmp(d->d_name, "seed-", 5) == 0 && unlinkat(dirfd(dp), d->d_name, 0) != 0)
			fprintf(stderr, "make_op_seeds: %s/%s: %s\n", dir, d->d_name,
				strerror(errno));
	}
	closedir(dp);
}

static void write_seed(const char *dir, const char *name, const struct stream *s, int store)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/seed-%s", dir, name);
	/* Every seed must pass, or it is not a seed. */
	if (store) {
		store_ops_set_context(path);
		store_ops_run(s->buf, s->len);
	} else {
		backing_ops_set_context(path);
		backing_ops_run(s->buf, s->len);
	}
	f = fopen(path, "wb");
	if (!f || fwrite(s->buf, 1, s->len, f) != s->len || fclose(f) != 0) {
		fprintf(stderr, "make_op_seeds: %s: %s\n", path, strerror(errno));
		failed = 1;
		return;
	}
	printf("  %s (%zu bytes)\n", path, s->len);
}

/* ---------------------------------------------------------------------------------- */
/* The store's seeds                                                                  */
/* ---------------------------------------------------------------------------------- */

static void store_seeds(const char *dir)
{
	struct stream s = { 0 };
	struct sopts o;
	char name[64];

	/* Split mode: folios of every size, read back whole, by page and as folios. */
	o = (struct sopts){ 0 };
	s_begin(&s, &o);
	for (unsigned k = 0; k < 10; k++)
		s_put(&s, k, k % 3, 512 * (k % 4), (k * 5) % 16);
	for (unsigned k = 0; k < 10; k++) {
		s_op(&s, SOP_GET, k % 4, UNIT, k * 37, k * 101);
		s_op(&s, SOP_GET_FOLIO, 0, SEL(k, k % 3), 512 * (k % 4), 0);
	}
	s_op(&s, SOP_INVALIDATE, 0, SEL(0, 1), 100, 300);
	s_op(&s, SOP_STATS, 0, 0, 5, 6);
	s_op(&s, SOP_VERIFY, 0, 0, 0, 0);
	write_seed(dir, "split-folios", &s, 1);

	/* Unit mode (64 KiB): smaller and larger folios over each other. */
	o = (struct sopts){ .unitk = 4 };
	s_begin(&s, &o);
	s_put(&s, 9, 0, 0, 11); /* 32 units of 64 KiB */
	s_put(&s, 2, 0, 64, 3); /* a 16 KiB unit in place of the fifth */
	s_op(&s, SOP_GET, 1, SEL(0, 0), 68, 0); /* the rest of the fifth went too */
	s_op(&s, SOP_GET, 0, SEL(0, 0), 64, 0);
	s_op(&s, SOP_GET, 3, SEL(0, 0), 65, 0); /* its length, not at its first page */
	s_op(&s, SOP_GET, 2, SEL(0, 0), 64, 0); /* twice its length */
	s_op(&s, SOP_GET, 1, SEL(0, 0), 130, 0); /* one page of a 64 KiB unit */
	s_op(&s, SOP_GET_FOLIO, 0, SEL(4, 0), 64, 0); /* -ENOENT */
	s_op(&s, SOP_GET_FOLIO, 0, SEL(1, 0), 64, 0); /* the unit reaches out: -EINVAL */
	s_op(&s, SOP_GET_FOLIO, 0, SEL(8, 0), 256, 0);
	s_put(&s, 6, 0, 32, 12); /* 256 KiB: four units over two old ones */
	s_op(&s, SOP_OVERWRITE, 5, UNIT, 0, 7);
	s_op(&s, SOP_OVERWRITE, 9, SEL(0, 0), 0, 9);
	s_op(&s, SOP_OVERWRITE, 1, SEL(9, 0), 0, 3);
	s_op(&s, SOP_INVALIDATE, 0, SEL(0, 0), 40, 100);
	s_op(&s, SOP_STATS, 0, 0, 1, 2);
	s_op(&s, SOP_VERIFY, 0, 0, 0, 0);
	write_seed(dir, "unit-64k-overlap", &s, 1);

	/* 2 MiB units, with small folios inside them and partial loads. */
	o = (struct sopts){ .unitk = 9, .codec = 2 };
	s_begin(&s, &o);
	s_put(&s, 9, 1, 0, 13);
	s_put(&s, 9, 1, 512, 10);
	s_op(&s, SOP_GET, 1, SEL(0, 1), 77, 0);
	s_op(&s, SOP_GET, 0, SEL(0, 1), 600, 0);
	s_put(&s, 0, 1, 520, 6);
	s_op(&s, SOP_GET_FOLIO, 0, SEL(9, 1), 512, 0);
	s_op(&s, SOP_GET_FOLIO, 0, SEL(9, 1), 0, 0);
	s_op(&s, SOP_GET_FOLIO, 0, SEL(3, 1), 8, 0);
	s_op(&s, SOP_VERIFY, 0, 0, 0, 0);
	write_seed(dir, "unit-2m", &s, 1);

	/*
	 * The last folios of the index space (window 3 ends at 2^64): a folio get there once
	 * returned 0 without reading anything (regress-get-folio-at-top).
	 */
	for (unsigned u = 0; u < 2; u++) {
		o = (struct sopts){ .unitk = u ? 4 : 0 };
		s_begin(&s, &o);
		s_op(&s, SOP_GET_FOLIO, 0, SEL(9, 3), 1536, 0);
		s_put(&s, 9, 3, 1536, 8);
		s_op(&s, SOP_GET_FOLIO, 0, SEL(9, 3), 1536, 0);
		s_op(&s, SOP_GET_FOLIO, 0, SEL(8, 3), 1792, 0);
		s_op(&s, SOP_GET_FOLIO, 0, SEL(0, 3), 2047, 0);
		s_op(&s, SOP_INVALIDATE, 15, SEL(0, 3), 1800, 0);
		s_op(&s, SOP_GET_FOLIO, 0, SEL(8, 3), 1792, 0);
		s_put(&s, 0, 3, 2047, 3);
		s_op(&s, SOP_GET, 0, SEL(0, 3), 2047, 0);
		s_op(&s, SOP_GET_FOLIO, 0, SEL(0, 3), 2047, 0);
		s_op(&s, SOP_INVALIDATE, 15, SEL(0, 3), 2047, 0);
		s_op(&s, SOP_VERIFY, 0, 0, 0, 0);
		write_seed(dir, u ? "top-of-index-unit" : "top-of-index-split", &s, 1);
	}

	/* Same-filled folios (one value across units), near-same and sparse pages. */
	o = (struct sopts){ .unitk = 3 };
	s_begin(&s, &o);
	for (unsigned k = 0; k < 8; k++)
		s_put(&s, k, k % 4, 64 * k, k % 2 ? SOP_SAME : SOP_ZERO);
	s_put(&s, 5, 0, 1024, SOP_NEAR_SAME);
	s_put(&s, 5, 0, 1056, 8 + 2);
	s_put(&s, 4, 0, 1100, 8 + 4);
	s_op(&s, SOP_GET_FOLIO, 0, SEL(5, 0), 1024, 0);
	s_op(&s, SOP_CORRUPT, 0, SEL(0, 0), 64, 0); /* same-filled: -ENOTSUP */
	s_op(&s, SOP_STATS, 0, 0, 9, 9);
	s_op(&s, SOP_VERIFY, 0, 0, 0, 0);
	write_seed(dir, "same-filled", &s, 1);

	/* reject_incompressible: random pages refused, text, sparse and same-filled taken. */
	for (unsigned pct = 0; pct < 8; pct += 4) {
		o = (struct sopts){ .reject = 1, .pct = pct, .unitk = pct ? 0 : 2 };
		s_begin(&s, &o);
		for (unsigned k = 0; k < 16; k++)
			s_put(&s, k % 6, k % 4, 64 * k, k);
		s_op(&s, SOP_STATS, 0, 0, 3, 4);
		s_op(&s, SOP_VERIFY, 0, 0, 0, 0);
		snprintf(name, sizeof(name), "reject-incompressible-pct%u",
			 sop_incompressible_pct[pct]);
		write_seed(dir, name, &s, 1);
	}

	/* Every codec, and each incompressible threshold, on mixed pages. */
	for (unsigned c = 0; c < 8; c++) {
		rng_state = 0x73746f7265000000ull + c;
		o = (struct sopts){ .codec = c, .unitk = c % 3 ? 2 * c % 10 : 0, .pct = c };
		s_begin(&s, &o);
		s_random(&s, 0, 60);
		snprintf(name, sizeof(name), "codec-%u-%s", c, sop_codecs[c]);
		for (char *p = name; *p; p++)
			*p = *p == ':' ? '_' : *p;
		write_seed(dir, name, &s, 1);
	}

	/* Puts in flight: overlapping, finished out of order, invalidated meanwhile. */
	o = (struct sopts){ .unitk = 2 };
	s_begin(&s, &o);
	s_op(&s, SOP_PUT_START, 3, SEL(5, 0), 0, 1);
	s_op(&s, SOP_PUT_START, 10, SEL(3, 0), 8, 2);
	s_op(&s, SOP_PUT_START, 2, SEL(5, 0), 0, 3);
	s_op(&s, SOP_GET, 1, SEL(0, 0), 9, 0);
	s_op(&s, SOP_PUT_FINISH, 0, 0, 0, 1);
	s_op(&s, SOP_PUT_FINISH, 0, 0, 0, 0);
	s_op(&s, SOP_INVALIDATE, 0, SEL(0, 0), 0, 15);
	s_op(&s, SOP_PUT_FINISH, 0, 0, 0, 0);
	s_op(&s, SOP_GET_FOLIO, 0, SEL(5, 0), 0, 0);
	for (unsigned k = 0; k < 6; k++)
		s_op(&s, SOP_PUT_START, k + 8, SEL(k, 1), 64 * k, k);
	s_op(&s, SOP_PUT_FINISH, 0, 0, 0, 2);
	s_op(&s, SOP_VERIFY, 0, 0, 0, 0);
	write_seed(dir, "puts-in-flight", &s, 1);

	/* Engines: 2 MiB folios go to them (split: 512 units; unit mode: 32 of 64 KiB). */
	for (unsigned e = 1; e <= 2; e++) {
		o = (struct sopts){ .engines = e,
				    .unitk = e == 2 ? 4 : 0,
				    .codec = e == 2 ? 2 : 0 };
		s_begin(&s, &o);
		s_op(&s, SOP_PUT_START, 8 + e, SEL(9, 0), 0, 1);
		s_op(&s, SOP_PUT_START, 3, SEL(9, 0), 512, 2);
		s_op(&s, SOP_PUT_START, 11, SEL(8, 1), 0, 3);
		s_op(&s, SOP_COMPACT, 0, 0, 0, 0);
		s_op(&s, SOP_PUT_FINISH, 0, 0, 0, 1);
		s_put(&s, 9, 2, 1024, 9);
		s_op(&s, SOP_GET_FOLIO, 0, SEL(9, 2), 1024, 0);
		s_op(&s, SOP_PUT_FINISH, 0, 0, 0, 0);
		s_op(&s, SOP_PUT_FINISH, 0, 0, 0, 0);
		s_op(&s, SOP_GET_FOLIO, 0, SEL(9, 0), 0, 0);
		s_op(&s, SOP_STATS, 0, 0, 1, 1);
		write_seed(dir, e == 1 ? "engines-1-split" : "engines-2-unit", &s, 1);
	}

	/* A pool limit, reject policy: -ENOSPC, then room again after invalidation. */
	o = (struct sopts){ .limit = 2, .accept = 3 };
	s_begin(&s, &o);
	for (unsigned k = 0; k < 10; k++)
		s_put(&s, 4, 0, 16 * k, SOP_RANDOM);
	s_op(&s, SOP_INVALIDATE, 0, SEL(0, 0), 0, 64);
	s_op(&s, SOP_PUT, SOP_RANDOM, SEL(4, 0), 200, 5);
	s_op(&s, SOP_COMPACT, 0, 0, 0, 0);
	s_op(&s, SOP_INVALIDATE, 0, SEL(0, 0), 0, 200);
	s_op(&s, SOP_PUT, SOP_TEXT, SEL(4, 0), 300, 5);
	s_op(&s, SOP_STATS, 0, 0, 0, 0);
	write_seed(dir, "limit-reject", &s, 1);

	/* A pool limit, writeback policy: puts write the oldest units back to make room. */
	for (unsigned b = 0; b < 2; b++) {
		o = (struct sopts){ .limit = 2,
				    .wb = 1,
				    .backing = b ? BK_DIR : BK_NAMED,
				    .bbytes = b ? 6 : 2,
				    .unitk = b ? 0 : 2 };
		s_begin(&s, &o);
		rng_state = 0x6c696d6974ull + b;
		for (unsigned k = 0; k < 24; k++)
			s_put(&s, k % 4, k % 2, 32 * k, k % 2 ? SOP_RANDOM : 8 + k % 8);
		s_op(&s, SOP_GET, 0, UNIT, 0, 0);
		s_op(&s, SOP_GET, 1, UNIT, 1, 1);
		s_op(&s, SOP_OVERWRITE, 3, UNIT, 0, 2);
		s_op(&s, SOP_INVALIDATE, 0, SEL(0, 0), 0, 40);
		s_op(&s, SOP_VERIFY, 0, 0, 0, 0);
		write_seed(dir, b ? "limit-writeback" : "limit-writeback-small-file", &s, 1);
	}

	/* Writeback on request: a byte, a page, some, all; then gets from the file. */
	o = (struct sopts){ .backing = BK_DIR, .bbytes = 7, .unitk = 1 };
	s_begin(&s, &o);
	for (unsigned k = 0; k < 12; k++)
		s_put(&s, k % 3, 0, 8 * k, 8 + k % 8);
	s_op(&s, SOP_WRITEBACK, 1, 0, 0, 0);
	s_op(&s, SOP_WRITEBACK, 2, 0, 0, 0);
	s_op(&s, SOP_WRITEBACK, 3, 0, 20000, 0);
	s_op(&s, SOP_GET, 0, UNIT, 0, 0);
	s_op(&s, SOP_CORRUPT, 0, UNIT, 0, 0); /* in the file: -ENOTSUP */
	s_op(&s, SOP_WRITEBACK, 5, 0, 0, 0);
	s_op(&s, SOP_GET_FOLIO, 0, SEL(5, 0), 0, 0);
	s_op(&s, SOP_OVERWRITE, 3, UNIT, 0, 4);
	s_op(&s, SOP_INVALIDATE, 0, SEL(0, 0), 30, 20);
	s_op(&s, SOP_WRITEBACK, 5, 0, 0, 0);
	s_op(&s, SOP_WRITEBACK, 5, 0, 0, 0); /* nothing left: 0 */
	s_op(&s, SOP_VERIFY, 0, 0, 0, 0);
	write_seed(dir, "writeback", &s, 1);

	/* A backing file of 3 slots: writeback fails for want of room (probes). */
	o = (struct sopts){ .backing = BK_DIR, .bbytes = 1 };
	s_begin(&s, &o);
	for (unsigned k = 0; k < 10; k++)
		s_put(&s, 0, 0, k, k % 2 ? SOP_RANDOM : SOP_TEXT);
	s_op(&s, SOP_WRITEBACK, 5, 0, 0, 0);
	s_op(&s, SOP_GET, 0, SEL(0, 0), 0, 0);
	s_op(&s, SOP_INVALIDATE, 0, SEL(0, 0), 0, 2);
	s_op(&s, SOP_WRITEBACK, 5, 0, 0, 0);
	s_op(&s, SOP_WRITEBACK, 4, 0, 100, 0);
	s_op(&s, SOP_VERIFY, 0, 0, 0, 0);
	write_seed(dir, "writeback-file-full", &s, 1);

	/* Injected write and read errors of the backing file. */
	o = (struct sopts){ .backing = BK_DIR, .bbytes = 5, .unitk = 2 };
	s_begin(&s, &o);
	for (unsigned k = 0; k < 12; k++)
		s_put(&s, k % 3, 0, 4 * k, 8 + k % 8);
	s_op(&s, SOP_INJECT, 1, 0, 0, 2); /* the third write fails */
	s_op(&s, SOP_WRITEBACK, 5, 0, 0, 0);
	s_op(&s, SOP_INJECT, 1, 1, 0, 0);
	s_op(&s, SOP_WRITEBACK, 5, 0, 0, 0);
	s_op(&s, SOP_INJECT, 0, 0, 0, 1); /* the second read fails */
	for (unsigned k = 0; k < 4; k++)
		s_op(&s, SOP_GET, 0, UNIT, 0, k);
	s_op(&s, SOP_INJECT, 0, 1, 0, 3);
	s_op(&s, SOP_GET_FOLIO, 0, SEL(6, 0), 0, 0);
	s_op(&s, SOP_GET_FOLIO, 0, SEL(6, 0), 0, 0);
	s_op(&s, SOP_INJECT, 0, 3, 0, 0); /* disarmed */
	s_op(&s, SOP_VERIFY, 0, 0, 0, 0);
	write_seed(dir, "inject-io-errors", &s, 1);

	/* Corrupt units: -EBADMSG from the pool, by page, in a folio, from the file. */
	o = (struct sopts){ .backing = BK_DIR, .bbytes = 7, .unitk = 2, .codec = 4 };
	s_begin(&s, &o);
	for (unsigned k = 0; k < 8; k++)
		s_put(&s, 2, 0, 4 * k, k % 2 ? SOP_RANDOM : SOP_TEXT);
	s_op(&s, SOP_CORRUPT, 0, SEL(0, 0), 5, 0);
	s_op(&s, SOP_GET, 1, SEL(0, 0), 6, 0);
	s_op(&s, SOP_GET, 0, SEL(0, 0), 4, 0);
	s_op(&s, SOP_GET_FOLIO, 0, SEL(5, 0), 0, 0);
	s_op(&s, SOP_CORRUPT, 0, SEL(0, 0), 12, 0);
	s_op(&s, SOP_CORRUPT, 0, SEL(0, 0), 13, 0); /* the same unit again: mended */
	s_op(&s, SOP_GET, 0, SEL(0, 0), 12, 0);
	s_op(&s, SOP_WRITEBACK, 5, 0, 0, 0);
	s_op(&s, SOP_GET, 0, SEL(0, 0), 4, 0);
	s_op(&s, SOP_OVERWRITE, 3, SEL(2, 0), 0, 0);
	s_op(&s, SOP_VERIFY, 0, 0, 0, 0);
	write_seed(dir, "corrupt", &s, 1);

	/* Calls that must be refused, each kind, then all together. */
	o = (struct sopts){ .backing = BK_NAMED, .bbytes = 3 };
	s_begin(&s, &o);
	s_put(&s, 3, 0, 0, 3);
	for (unsigned k = 0; k < 8; k++)
		s_op(&s, SOP_BAD, k, 0, 3 * k, 0);
	s_op(&s, SOP_WRITEBACK, 0, 0, 0, 0);
	write_seed(dir, "refused-calls", &s, 1);

	/* Warm pages: none kept, a few, more than the pool; compaction gives them back. */
	for (unsigned wm = 1; wm < 8; wm += 3) {
		o = (struct sopts){ .warm = wm, .unitk = wm == 7 ? 5 : 0 };
		s_begin(&s, &o);
		rng_state = 0x7761726dull + wm;
		for (unsigned k = 0; k < 6; k++) {
			s_put(&s, 1 + k % 5, k % 2, 64 * k, 8 + k);
			s_op(&s, SOP_INVALIDATE, 0, SEL(0, (k + 1) % 2), 64 * (k - 1), 64);
		}
		s_op(&s, SOP_STATS, 0, 0, 0, 0);
		s_op(&s, SOP_COMPACT, 0, 0, 0, 0);
		s_random(&s, 0, 30);
		snprintf(name, sizeof(name), "warm-pages-%u", wm);
		write_seed(dir, name, &s, 1);
	}

	/* verify, zstd, 512 KiB units; the store destroyed full (with a named backing file). */
	o = (struct sopts){
		.verify = 1, .codec = 2, .unitk = 7, .keep = 1, .backing = BK_NAMED, .bbytes = 6
	};
	s_begin(&s, &o);
	rng_state = 0x6b656570ull;
	s_random(&s, 2, 40);
	s_op(&s, SOP_WRITEBACK, 4, 0, 500, 0);
	write_seed(dir, "verify-keep-full", &s, 1);

	/* Random streams of each profile, with random options (no engines: kept short). */
	for (unsigned i = 0; i < 8; i++) {
		rng_state = 0x73656564ull << 24 | i;
		o.codec = below(8);
		o.unitk = below(16);
		o.verify = below(4) == 0;
		o.engines = 0;
		o.reject = below(4) == 0;
		o.pct = below(8);
		o.wb = below(2);
		o.keep = below(4) == 0;
		o.limit = below(8);
		o.accept = below(8);
		o.backing = below(4);
		o.bbytes = below(8);
		o.warm = below(8);
		s_begin(&s, &o);
		s_random(&s, i % 4, 120);
		snprintf(name, sizeof(name), "random-%u", i);
		write_seed(dir, name, &s, 1);
	}
	free(s.buf);
}

/* ---------------------------------------------------------------------------------- */
/* The backing tier's seeds                                                           */
/* ---------------------------------------------------------------------------------- */

static void backing_seeds(const char *dir)
{
	static const char *const kinds[3] = { "dir", "new", "old" };
	struct stream s = { 0 };
	struct bopts o;
	char name[64];

	/* 4 KiB slots: allocations, writes, reads back, frees, reuse. */
	o = (struct bopts){ .shift = 3, .slots = 7 };
	b_begin(&s, &o);
	b_op(&s, BOP_BURST, 0, BOP_LEN_SLOT, 100, 9);
	b_op(&s, BOP_ALLOC, 0, BOP_LEN_SLOTS, 0x100, 0);
	b_op(&s, BOP_ALLOC, 0, BOP_LEN_8SLOTS, 20000, 0);
	b_op(&s, BOP_WRITE, 0, 15, 0, 0);
	b_op(&s, BOP_READ, 0, 15, 1, 0);
	b_op(&s, BOP_READ, 1, 3, 2, 1);
	b_op(&s, BOP_FREE_STRIDE, 0, 0, 1, 0);
	b_op(&s, BOP_BURST, 0, BOP_LEN_SLOTS, 2, 4);
	b_op(&s, BOP_WRITE, 1, 7, 3, 2);
	b_op(&s, BOP_FREE, 1, 0, 700, 3);
	b_op(&s, BOP_MIXED, 0, 9, 1, 0);
	b_op(&s, BOP_STATS, 0, 0, 12345, 0);
	b_op(&s, BOP_VERIFY, 0, 0, 0, 0);
	write_seed(dir, "slots-4k", &s, 0);

	/* Every slot size, in each I/O mode. */
	for (unsigned sh = 0; sh <= 12; sh += 3) {
		for (unsigned m = 0; m < 3; m++) {
			rng_state = 0x736c6f74ull << 16 | sh << 4 | m;
			o = (struct bopts){ .shift = sh, .io_mode = m, .slots = 9 + m, .depth = m };
			b_begin(&s, &o);
			b_random(&s, 50);
			snprintf(name, sizeof(name), "slot-%u-%s", 512u << sh,
				 m == IO_AUTO	 ? "auto"
				 : m == IO_URING ? "uring"
						 : "sync");
			write_seed(dir, name, &s, 0);
		}
	}

	/* Next fit: fill, free every other, then runs that only fit after wrapping. */
	o = (struct bopts){ .shift = 1, .slots = 5, .partial = 1 };
	b_begin(&s, &o);
	b_op(&s, BOP_BURST, 0, BOP_LEN_SLOT, 5, 31);
	b_op(&s, BOP_ALLOC, 0, BOP_LEN_SLOT, 5, 0); /* -ENOSPC */
	b_op(&s, BOP_FREE_STRIDE, 0, 0, 0, 0);
	b_op(&s, BOP_ALLOC, 0, BOP_LEN_SLOTS, 0x100, 0); /* two slots: no run */
	b_op(&s, BOP_FREE, 0, 0, 0, 3);
	b_op(&s, BOP_FREE, 0, 0, 0, 4);
	b_op(&s, BOP_BURST, 0, BOP_LEN_SLOT, 7, 4);
	b_op(&s, BOP_FREE_STRIDE, 0, 1, 1, 0);
	b_op(&s, BOP_ALLOC, 0, BOP_LEN_FREE, 0, 0);
	b_op(&s, BOP_FREE_STRIDE, 0, 2, 0, 0);
	b_op(&s, BOP_ALLOC, 0, BOP_LEN_FREE, 3, 0);
	b_op(&s, BOP_ALLOC, 0, BOP_LEN_8SLOTS, 1500, 0);
	b_op(&s, BOP_WRITE, 0, 15, 0, 0);
	b_op(&s, BOP_VERIFY, 0, 0, 0, 0);
	write_seed(dir, "next-fit-wrap", &s, 0);

	/* Reads past the end of what was written: -EIO; holes read as zeros. */
	o = (struct bopts){ .shift = 3, .slots = 8, .io_mode = IO_URING };
	b_begin(&s, &o);
	b_op(&s, BOP_BURST, 0, BOP_LEN_SLOT, 4095, 6);
	b_op(&s, BOP_READ, 0, 5, 1, 0);
	b_op(&s, BOP_WRITE, 0, 0, 0, 5);
	b_op(&s, BOP_READ, 0, 5, 1, 0);
	b_op(&s, BOP_FREE, 0, 0, 0, 5);
	b_op(&s, BOP_ALLOC, 0, BOP_LEN_SLOT, 4000, 0);
	b_op(&s, BOP_MIXED, 0, 5, 1, 2);
	b_op(&s, BOP_VERIFY, 0, 0, 0, 0);
	write_seed(dir, "end-of-file", &s, 0);

	/* Injected errors: reads and writes, in batches through the ring and not. */
	for (unsigned m = 0; m < 3; m++) {
		o = (struct bopts){ .shift = 2, .slots = 6, .io_mode = m };
		b_begin(&s, &o);
		b_op(&s, BOP_BURST, 0, BOP_LEN_SLOTS, 0, 20);
		b_op(&s, BOP_INJECT, 1, 0, 0, 2);
		b_op(&s, BOP_WRITE, 0, 7, 0, 0);
		b_op(&s, BOP_INJECT, 0, 1, 0, 0);
		b_op(&s, BOP_WRITE, 2, 0, 0, 4);
		b_op(&s, BOP_INJECT, 0, 2, 0, 3);
		b_op(&s, BOP_READ, 0, 7, 0, 0);
		b_op(&s, BOP_INJECT, 1, 3, 0, 0);
		b_op(&s, BOP_MIXED, 0, 9, 1, 0);
		b_op(&s, BOP_VERIFY, 0, 0, 0, 0);
		snprintf(name, sizeof(name), "inject-%u", m);
		write_seed(dir, name, &s, 0);
	}

	/* Invalid ios of each kind between valid ones; options backing_open() refuses. */
	o = (struct bopts){ .shift = 3, .slots = 3 };
	b_begin(&s, &o);
	b_op(&s, BOP_BURST, 0, BOP_LEN_SLOT, 99, 2);
	b_op(&s, BOP_WRITE, 0, 2, 0, 0);
	for (unsigned k = 0; k < 8; k++)
		b_op(&s, BOP_BAD, k | (k == 7 ? 8 : 0), 0, k, k + 1);
	b_op(&s, BOP_ALLOC, 0, BOP_LEN_ZERO, 0, 0);
	b_op(&s, BOP_ALLOC, 0, BOP_LEN_HUGE, 0, 0);
	b_op(&s, BOP_STATS, 0, 0, 0, 0);
	write_seed(dir, "invalid", &s, 0);

	/* Reopen and a second open, for each kind of path. */
	for (unsigned p = 0; p < 3; p++) {
		o = (struct bopts){ .shift = 3, .slots = 8, .path = p };
		b_begin(&s, &o);
		b_op(&s, BOP_BURST, 0, BOP_LEN_SLOTS, 7, 5);
		b_op(&s, BOP_WRITE, 0, 7, 0, 0);
		b_op(&s, BOP_SECOND, 0, 0, 1, 2);
		b_op(&s, BOP_REOPEN, 0, 0, 0, 0);
		b_op(&s, BOP_BURST, 0, BOP_LEN_SLOT, 3, 3);
		b_op(&s, BOP_READ, 0, 2, 0, 0);
		b_op(&s, BOP_WRITE, 0, 1, 0, 1);
		b_op(&s, BOP_SECOND, 0, 0, 0, 0);
		b_op(&s, BOP_VERIFY, 0, 0, 0, 0);
		snprintf(name, sizeof(name), "reopen-%s", kinds[p]);
		write_seed(dir, name, &s, 0);
	}

	/* A ring of one entry and batches of 16: the batch streams through it. */
	o = (struct bopts){ .shift = 0, .slots = 15, .io_mode = IO_URING, .depth = 1 };
	b_begin(&s, &o);
	b_op(&s, BOP_BURST, 0, BOP_LEN_8SLOTS, 3000, 31);
	b_op(&s, BOP_WRITE, 0, 15, 0, 0);
	b_op(&s, BOP_READ, 0, 15, 0, 0);
	b_op(&s, BOP_MIXED, 1, 15, 2, 3);
	b_op(&s, BOP_VERIFY, 0, 0, 0, 0);
	write_seed(dir, "ring-depth-1", &s, 0);

	for (unsigned i = 0; i < 6; i++) {
		rng_state = 0x6261636bull << 24 | i;
		o.shift = below(13);
		o.io_mode = below(4);
		o.path = below(4);
		o.slots = below(16);
		o.depth = below(8);
		o.partial = below(2);
		b_begin(&s, &o);
		b_random(&s, 150);
		snprintf(name, sizeof(name), "random-%u", i);
		write_seed(dir, name, &s, 0);
	}
	free(s.buf);
}

static int make_dir(const char *path)
{
	if (mkdir(path, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "make_op_seeds: %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	char store[4096], backing[4096];

	if (argc != 2) {
		fprintf(stderr, "usage: %s OUTDIR (tests/fuzz/corpus)\n", argv[0]);
		return 1;
	}
	snprintf(store, sizeof(store), "%s/store", argv[1]);
	snprintf(backing, sizeof(backing), "%s/backing", argv[1]);
	if (make_dir(argv[1]) || make_dir(store) || make_dir(backing))
		return 1;
	remove_old_seeds(store);
	remove_old_seeds(backing);
	printf("make_op_seeds: the store's seeds\n");
	store_seeds(store);
	printf("make_op_seeds: the backing tier's seeds\n");
	backing_seeds(backing);
	{
		const struct store_ops_counts *c = store_ops_counts();
		const struct backing_ops_counts *d = backing_ops_counts();

		printf("make_op_seeds: store: %llu runs, %llu puts (%llu pages, %llu in flight, "
		       "%llu skipped), %llu -ENOSPC, %llu -E2BIG, %llu gets (%llu partial, %llu "
		       "folios), %llu -ENOENT, %llu -EINVAL, %llu -EBADMSG, %llu -EIO, %llu "
		       "units written back (%llu writes failed, %llu probes), %llu read back from "
		       "the file, %llu compactions, %llu unit sizes learned, %llu MiB compared\n",
		       (unsigned long long)c->runs, (unsigned long long)c->puts,
		       (unsigned long long)c->put_pages, (unsigned long long)c->pending_puts,
		       (unsigned long long)c->skipped, (unsigned long long)c->enospc,
		       (unsigned long long)c->e2big, (unsigned long long)c->gets_ok,
		       (unsigned long long)c->partial_gets, (unsigned long long)c->folio_gets,
		       (unsigned long long)c->gets_enoent, (unsigned long long)c->gets_einval,
		       (unsigned long long)c->ebadmsg, (unsigned long long)c->eio,
		       (unsigned long long)c->written_back_units,
		       (unsigned long long)c->write_errors, (unsigned long long)c->probes,
		       (unsigned long long)c->backing_reads, (unsigned long long)c->compactions,
		       (unsigned long long)c->clen_resolved,
		       (unsigned long long)(c->bytes_compared >> 20));
		printf("make_op_seeds: backing: %llu runs, %llu allocs (%llu -ENOSPC, %llu "
		       "wrapped), %llu frees, %llu writes, %llu reads (%llu -EIO past the end, "
		       "%llu "
		       "racing a write), %llu injected, %llu invalid, %llu reopens, %llu -EBUSY, "
		       "%llu "
		       "MiB compared\n",
		       (unsigned long long)d->runs, (unsigned long long)d->allocs,
		       (unsigned long long)d->enospc, (unsigned long long)d->wraps,
		       (unsigned long long)d->frees, (unsigned long long)d->writes,
		       (unsigned long long)d->reads, (unsigned long long)d->read_eio,
		       (unsigned long long)d->racy_reads, (unsigned long long)d->injected,
		       (unsigned long long)d->invalid_ios, (unsigned long long)d->reopens,
		       (unsigned long long)d->ebusy, (unsigned long long)(d->bytes_compared >> 20));
	}
	return failed;
}
