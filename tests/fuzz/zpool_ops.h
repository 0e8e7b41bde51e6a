/*
 * zpool_ops.h - an op-stream interpreter for zf_pool, checked against a shadow model.
 *
 * One byte string is one scenario: zpool_ops_run() makes a pool, decodes the bytes into
 * allocations, frees, writes, reads, compactions and calls that must be refused, runs them
 * through the public API (include/zfolio.h) only, and checks after each one that the pool
 * agrees with a model of what it must hold: every live handle's bytes and size, the
 * number of live objects, the sum of their sizes. Any disagreement prints what was being
 * done and calls abort(). The same interpreter serves three callers, so that an input
 * found by one replays in the others:
 *
 *  - fuzz_zpool.c, the libFuzzer target (and fuzz_replay_zpool, its corpus replay);
 *  - tests/unit/test_zpool_model.c, which feeds it long seeded streams made with the
 *    encoder below (and writes the seed corpus with it);
 *  - a person with a failing input: fuzz_replay_zpool FILE.
 *
 * The format is shared here, as fuzz_codec.h shares the codec targets', so that the
 * generators and the decoder cannot drift apart:
 *
 *   byte 0          pool options: bits 0..2 pick compact_threshold_pct from
 *                   zpool_ops_thresholds[] (slot 0: options NULL, the defaults)
 *   bytes 1..       records of ZOP_RECORD bytes (a short last record is padded with zeros):
 *     rec[0]        bits 0..3: the op (enum zop_code, several codes per op to weight
 *                   random bytes towards the common ones); bits 4..7: param
 *     rec[1]        sel: a size selector (zop_size_sel) or a mode, by op
 *     rec[2..4]     a: 24-bit little-endian value (a size, a length, an offset)
 *     rec[5..7]     b: 24-bit little-endian value (an object index, a count)
 *
 * Object indices are taken modulo the number of live objects, so every byte string is a
 * valid scenario. Data patterns come from param and a hash of the record and its position,
 * so two writes of the same record at different places write different bytes.
 *
 * Bounds: at most ZOPS_MAX_LIVE_BYTES of live objects and ZOPS_MAX_OBJECTS of them (an
 * allocation past either is skipped, not an error), ZOPS_MAX_OPS records per run.
 */
#ifndef ZF_ZPOOL_OPS_H
#define ZF_ZPOOL_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "zfolio.h"

#define ZOP_RECORD 8u
#define ZOPS_MAX_LIVE_BYTES ((size_t)32 << 20)
#define ZOPS_MAX_OBJECTS 4096u
#define ZOPS_MAX_OPS 200000u

/* compact_threshold_pct by byte 0 & 7; -1: pass options NULL (the default, 25). */
static const int zpool_ops_thresholds[8] = { -1, 0, 1, 10, 25, 50, 100, 0 };

/*
 * The ops, by their canonical code (rec[0] & 15). Codes 0..15 all mean something; the
 * ones not named here are the second or third code of an op (zop_of_code()).
 *
 *  ALLOC        allocate a size from (sel, a), fill it with pattern param & 7 (param 15:
 *               leave it unwritten, its bytes undefined)
 *  BURST        allocate 1 + b % 64 objects of one size (fills zspages for compaction)
 *  FREE         free object b; param & 1: free the handle again (must be ignored)
 *  FREE_STRIDE  free every (2 + sel % 6)-th live object from a % stride (fragments zspages)
 *  WRITE        write to object b: a full or partial prefix, nothing, or a length above
 *               the size (must be refused with -EINVAL, nothing written); mode sel % 8
 *  READ         read object b and compare every defined byte; param & 1: size NULL
 *  COMPACT      zf_pool_compact(), then compare every object
 *  PIN_COMPACT  begin reads of 1 + sel % 4 objects, compact (and with param & 1 allocate
 *               and free other objects), check that the pinned bytes did not move or change
 *  BAD          calls that must change nothing: a bad size, a handle that is not allocated
 *               (0, freed, made up), a class index out of range; param picks
 *  VERIFY       compare every object and every class counter now
 *  REALLOC      free object b and allocate one of a size from (sel, a) (sel 0: the same size)
 */
enum zop_code {
	ZOP_ALLOC = 0,
	ZOP_BURST = 3,
	ZOP_FREE = 4,
	ZOP_FREE_STRIDE = 6,
	ZOP_WRITE = 7,
	ZOP_READ = 9,
	ZOP_COMPACT = 11,
	ZOP_PIN_COMPACT = 12,
	ZOP_BAD = 13,
	ZOP_VERIFY = 14,
	ZOP_REALLOC = 15,
};

enum { ZOP_NR_CODES = 16 };

/* The canonical code of each op code: 1 and 2 are ALLOC, 5 FREE, 8 WRITE, 10 READ. */
static inline enum zop_code zop_of_code(unsigned code)
{
	static const uint8_t canon[ZOP_NR_CODES] = {
		ZOP_ALLOC,	 ZOP_ALLOC, ZOP_ALLOC,	ZOP_BURST,   ZOP_FREE, ZOP_FREE,
		ZOP_FREE_STRIDE, ZOP_WRITE, ZOP_WRITE,	ZOP_READ,    ZOP_READ, ZOP_COMPACT,
		ZOP_PIN_COMPACT, ZOP_BAD,   ZOP_VERIFY, ZOP_REALLOC,
	};

	return (enum zop_code)canon[code & 15];
}

/*
 * Size selectors (sel % 16) and the sizes they make from a (all in 1..ZF_UNIT_MAX):
 * mostly small, as compressed 4 KiB pages are, but also up to 64 KiB, beyond, on class
 * boundaries (the largest object of class a % count, plus -1, 0 or +1 by (a / count) % 3),
 * on page multiples +-1, and 2 MiB (ZF_UNIT_MAX - a % 8) when (a >> 16) < 32.
 */
enum zop_size_sel {
	ZOP_SIZE_SMALL = 0, /* 1 + a % 256; also sel 1..6 */
	ZOP_SIZE_PAGE = 7, /* 1 + a % 4096; also 8, 9 */
	ZOP_SIZE_64K = 10, /* 1 + a % 65536; also 11 */
	ZOP_SIZE_CLASS_EDGE = 12,
	ZOP_SIZE_512K = 13, /* 1 + a % 512 KiB */
	ZOP_SIZE_PAGES = 14, /* 4096 * (1 + a % 64) - 1 + (a >> 8) % 3 */
	ZOP_SIZE_UNIT_MAX = 15, /* ZF_UNIT_MAX - a % 8 if (a >> 16) < 32, else 1 + a % 65536 */
};

/* WRITE modes (sel % 8). */
enum zop_write_mode {
	ZOP_WRITE_FULL = 0, /* also 1..3 */
	ZOP_WRITE_PREFIX = 4, /* a % (size + 1) bytes */
	ZOP_WRITE_EMPTY = 5, /* 0 bytes */
	ZOP_WRITE_FEW = 6, /* 1 + a % 16 bytes, at most size */
	ZOP_WRITE_TOO_LONG = 7, /* size + 1 + a % 64 bytes: -EINVAL */
};

/* BAD kinds (param % 8). */
enum zop_bad_kind {
	ZOP_BAD_SIZE = 0, /* alloc of 0, ZF_UNIT_MAX + 1 and SIZE_MAX bytes */
	ZOP_BAD_FREED = 1, /* a recently freed handle that is not live again */
	ZOP_BAD_ZERO = 2, /* handle 0 */
	ZOP_BAD_MADE_UP = 3, /* a, b, a << 24 | b, ~0, 1 << 63 | a, 1 << 32 | b, b << 40 | a */
	ZOP_BAD_NEIGHBOUR = 4, /* a live handle +-1 .. +-4, when not live */
	ZOP_BAD_CLASS = 5, /* zf_pool_class_stats_get() of count, count + a, UINT_MAX */
	ZOP_BAD_TOO_LONG = 6, /* a write longer than the object */
	ZOP_BAD_ALL = 7, /* all of the above */
};

static inline void zop_put24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
}

static inline uint32_t zop_get24(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
}

/* Encodes one record at rec (ZOP_RECORD bytes). */
static inline void zop_encode(uint8_t *rec, enum zop_code op, unsigned param, unsigned sel,
			      uint32_t a, uint32_t b)
{
	rec[0] = (uint8_t)((unsigned)op | (param & 15) << 4);
	rec[1] = (uint8_t)sel;
	zop_put24(rec + 2, a);
	zop_put24(rec + 5, b);
}

/*
 * What all runs so far did (the counters add up across calls), for a test's closing
 * summary and to show that the ops reach what they are meant to.
 */
struct zpool_ops_counts {
	uint64_t runs, ops[ZOP_NR_CODES]; /* ops by canonical code */
	uint64_t allocs, frees, writes, reads, enomem, skipped_allocs;
	uint64_t huge_allocs, unit_max_allocs; /* objects > 64 KiB, objects >= 2 MiB - 8 */
	uint64_t compactions, pages_compacted, auto_compactions, objects_moved, objects_spilled;
	uint64_t pinned_reads, bad_calls, full_verifies, bytes_verified;
	uint64_t max_live_objects, max_live_bytes;
	/*
	 * How zf_pool_class_stats.freeable ("pages compaction could give back now") compares
	 * with what compaction did; counted, not checked, as the header promises no more:
	 * compactions (none pinned) after which a class still had freeable pages, and those
	 * pages; compactions that gave back more pages than the classes said were freeable;
	 * class lines with freeable above pages_used.
	 */
	uint64_t compact_left_freeable, compact_left_freeable_pages;
	uint64_t compact_above_freeable, freeable_above_used;
};

/*
 * Runs one scenario. Returns 0; every check that fails calls abort() after printing what
 * was done (op number, record offset, the op, expected and actual values). When the
 * environment has ZF_ZPOOL_DUMP=path, the input is written there before the abort.
 * Not thread-safe: the interpreter keeps its scratch buffer and counters in statics.
 */
int zpool_ops_run(const uint8_t *data, size_t size);

/* A line printed before the failure message (e.g. the seed of a generated stream); NULL: none. */
void zpool_ops_set_context(const char *context);

/* The counters of every run so far. */
const struct zpool_ops_counts *zpool_ops_counts(void);

#endif /* ZF_ZPOOL_OPS_H */
