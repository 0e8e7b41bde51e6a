/*
 * store_ops.h - an op-stream interpreter for zf_store, checked against a shadow model.
 *
 * One byte string is one scenario: store_ops_run() makes a store with options taken from
 * the first bytes, decodes the rest into puts, gets, invalidations, puts in flight
 * (zf_store_put_start/finish), writebacks, compactions, stats calls, corruptions and
 * injected backing-file errors, and checks every result against a model of what the
 * header (include/zfolio.h) and docs/store.md promise: the bytes of every page, the
 * error of every call that must fail, and the counters. Any disagreement prints what was
 * being done and calls abort(). Callers: fuzz_store.c (the libFuzzer target and
 * fuzz_replay_store) and make_op_seeds.c (the seed corpus).
 *
 * The format is shared here, as zpool_ops.h shares the pool's, so that the seed
 * generator and the decoder cannot drift apart:
 *
 *   bytes 0..3   the store's options (SOP_HEADER bytes; a short input reads zeros):
 *     h[0] bits 0..2  codec slot (sop_codecs[]; a codec this build lacks: the next one)
 *          bits 3..6  unit: 0 split mode; 1..9 unit mode, 4 KiB << k; 10..15 split mode
 *          bit  7     verify
 *     h[1] bits 0..1  engines 0, 1, 2, 0
 *          bit  2     reject_incompressible
 *          bits 3..5  incompressible_pct (sop_incompressible_pct[])
 *          bit  6     when_full = ZF_STORE_WRITEBACK
 *          bit  7     destroy the store with its units still in it (else: drop them all
 *                     first and check that the store and its pool come back to empty)
 *     h[2] bits 0..2  max_pool_bytes (sop_pool_limits[]); none when there are engines
 *          bits 3..5  accept_threshold_pct (sop_accept_pct[])
 *          bits 6..7  backing file: 0 none, 1 and 3 a directory (an unnamed file in
 *                     it), 2 a named file
 *     h[3] bits 0..2  backing_bytes (sop_backing_bytes[])
 *          bits 3..5  pool_warm_bytes (sop_warm_bytes[])
 *   bytes 4..    records of SOP_RECORD bytes (a short last record is padded with zeros):
 *     rec[0]  bits 0..3: the op (enum sop_code; several codes per op weight random bytes
 *             towards the common ones); bits 4..7: param
 *     rec[1]  sel: bits 0..3 a folio order (0..9; 10..15 mean 0..5), bits 4..5 a
 *             window, bits 6..7 op-specific
 *     rec[2..4] a: 24-bit little-endian (a page index in the window, a length)
 *     rec[5..7] b: 24-bit little-endian (a seed, a unit number, a count)
 *
 * Keys. Pages live in SOP_WINDOWS windows of SOP_WINDOW_PAGES pages, each an (owner,
 * first page) pair, one of them at the very top of the index space (so that ranges
 * that run off its end are tried). An index in a record is taken modulo the window,
 * and aligned down to the folio, so every byte string is a valid scenario.
 *
 * Page contents. A folio's pages are made from param and b by a deterministic generator
 * (enum sop_kind): zeros, a same-filled value, random bytes, text, sparse bytes, half
 * random, a byte ramp, and a same-filled page with one word changed. The model keeps a
 * 64-bit descriptor per page and makes the bytes again to compare.
 *
 * Determinism: every result the model checks is the same on every run, engines or not
 * (they change which thread compresses a unit, not its bytes). The one thing that
 * depends on the pool's layout, and so on the order in which engines allocate, is
 * whether a pool limit is reached: stores with engines get no limit.
 *
 * Bounds: at most SOP_MAX_STORED_PAGES pages stored at once (a put past it is skipped),
 * SOP_BUDGET_BYTES of puts and gets per run (later ones are skipped), SOP_MAX_OPS
 * records, SOP_MAX_PENDING puts in flight.
 */
#ifndef ZF_STORE_OPS_H
#define ZF_STORE_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "zfolio.h"

#define SOP_HEADER 4u
#define SOP_RECORD 8u
#define SOP_WINDOWS 4u
#define SOP_WINDOW_PAGES 2048u /* 8 MiB: four 2 MiB folios */
#define SOP_MAX_STORED_PAGES 4096u
#define SOP_BUDGET_BYTES ((uint64_t)96 << 20)
#define SOP_MAX_OPS 100000u
#define SOP_MAX_PENDING 4u

/* h[0] & 7: codec names; one this build lacks is replaced by the next in the table. */
static const char *const sop_codecs[8] = { "lz4",	"none", "zstd:1", "lz4hc:1",
					   "deflate:1", "lzo",	"isal:0", "zstd:-3" };
/* (h[1] >> 3) & 7 */
static const unsigned sop_incompressible_pct[8] = { 100, 100, 90, 75, 50, 25, 1, 0 };
/* h[2] & 7: 0 = no limit */
static const uint64_t sop_pool_limits[8] = { 0,	      64 << 10, 256 << 10, 1 << 20,
					     2 << 20, 4 << 20,	8 << 20,   16 << 20 };
/* (h[2] >> 3) & 7 */
static const unsigned sop_accept_pct[8] = { 90, 0, 25, 50, 75, 95, 99, 100 };
/* h[3] & 7 */
static const uint64_t sop_backing_bytes[8] = { 4 << 10, 12 << 10, 64 << 10, 256 << 10,
					       1 << 20, 4 << 20,  16 << 20, 1 << 30 };
/* (h[3] >> 3) & 7: 0 = the default (2 MiB) */
static const uint64_t sop_warm_bytes[8] = { 2 << 20,  0,       4 << 10, 12 << 10,
					    64 << 10, 1 << 20, 8 << 20, (2 << 20) + 4095 };

/*
 * The ops, by their canonical code (rec[0] & 15). Codes not named here are the second
 * code of an op (sop_of_code()).
 *
 *  PUT         zf_store_put() of a folio of order sel, at a % window, pages from
 *              (param, b); skipped past the bounds
 *  PUT_START   zf_store_put_start() of such a folio, kept in flight (the oldest is
 *              finished first when SOP_MAX_PENDING are)
 *  PUT_FINISH  zf_store_put_finish() of the put in flight b % count (none: nothing)
 *  GET         zf_store_get() of the page at a: by param & 3 the whole unit that
 *              holds it, the page alone, a wrong length, or its unit's length at the
 *              page (-EINVAL unless it is the first); sel bit 6: a stored unit's page
 *              instead (unit b % count, page a % its pages)
 *  GET_FOLIO   zf_store_get_folio() of the folio of order sel at a
 *  INVALIDATE  zf_store_invalidate() of 1 + b % 4096 pages at a; param 15: to the end
 *              of the index space (only in the top window, whose end it is)
 *  OVERWRITE   zf_store_put() over stored unit b % count: a folio of the unit's order
 *              (sel bit 6) or of order sel, over the unit's first page
 *  WRITEBACK   zf_store_writeback() of (0, 1, 4 KiB, a, a * 64, all) bytes by param % 6
 *  COMPACT     zf_store_compact(): pages_compacted and mem_used_total move by its result,
 *              and no warm pages are left
 *  STATS       zf_store_get_stats() with smaller and larger sizes, zf_store_stats_text()
 *              whole and cut short, zf_store_unit_size() of a few keys
 *  CORRUPT     the store_corrupt() test hook on the unit that holds page a (sel bit 6:
 *              on stored unit b % count): later gets of it fail with -EBADMSG (the hook
 *              flips one byte: a second call on the unit mends it)
 *  INJECT      the store_inject_backing_error() test hook: read (param & 1) or write
 *              io number b % 8 from now fails (with -EIO, -ENOSPC, -EIO; sel % 4 == 3:
 *              disarm)
 *  BAD         calls that must be refused and change nothing (param picks; 7: all)
 *  VERIFY      every stored unit read back whole, and one page of each multi-page unit
 */
enum sop_code {
	SOP_PUT = 0,
	SOP_PUT_START = 2,
	SOP_PUT_FINISH = 3,
	SOP_GET = 4,
	SOP_GET_FOLIO = 6,
	SOP_INVALIDATE = 7,
	SOP_OVERWRITE = 8,
	SOP_WRITEBACK = 9,
	SOP_COMPACT = 10,
	SOP_STATS = 11,
	SOP_CORRUPT = 12,
	SOP_INJECT = 13,
	SOP_BAD = 14,
	SOP_VERIFY = 15,
};

enum { SOP_NR_CODES = 16 };

/* The canonical code of each op code: 1 is PUT, 5 GET. */
static inline enum sop_code sop_of_code(unsigned code)
{
	static const uint8_t canon[SOP_NR_CODES] = {
		SOP_PUT,       SOP_PUT,	      SOP_PUT_START, SOP_PUT_FINISH,
		SOP_GET,       SOP_GET,	      SOP_GET_FOLIO, SOP_INVALIDATE,
		SOP_OVERWRITE, SOP_WRITEBACK, SOP_COMPACT,   SOP_STATS,
		SOP_CORRUPT,   SOP_INJECT,    SOP_BAD,	     SOP_VERIFY,
	};

	return (enum sop_code)canon[code & 15];
}

/*
 * Page kinds. A put's param picks them: 0..7 every page of that kind; 8..15 a mix,
 * each page's kind drawn from sop_mixes[param - 8] by a hash of the seed and the page.
 */
enum sop_kind {
	SOP_ZERO = 0,
	SOP_SAME = 1, /* one 64-bit value from the seed */
	SOP_RANDOM = 2, /* incompressible */
	SOP_TEXT = 3, /* words from a small dictionary: compresses to about half */
	SOP_SPARSE = 4, /* zeros with a byte every 512 */
	SOP_HALF = 5, /* random, then zeros */
	SOP_RAMP = 6, /* bytes i + seed */
	SOP_NEAR_SAME = 7, /* same-filled but for one word */
};

static const uint8_t sop_mixes[8][4] = {
	{ SOP_ZERO, SOP_SAME, SOP_RANDOM, SOP_TEXT },
	{ SOP_TEXT, SOP_SPARSE, SOP_RAMP, SOP_HALF },
	{ SOP_ZERO, SOP_ZERO, SOP_ZERO, SOP_NEAR_SAME },
	{ SOP_RANDOM, SOP_RANDOM, SOP_RANDOM, SOP_TEXT },
	{ SOP_SAME, SOP_SAME, SOP_SAME, SOP_SAME }, /* a value per page: not same-filled */
	{ SOP_TEXT, SOP_TEXT, SOP_TEXT, SOP_SPARSE },
	{ SOP_HALF, SOP_RANDOM, SOP_ZERO, SOP_RAMP },
	{ SOP_NEAR_SAME, SOP_SPARSE, SOP_ZERO, SOP_SAME },
};

static inline void sop_put24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
}

static inline uint32_t sop_get24(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
}

/* Encodes one record at rec (SOP_RECORD bytes). */
static inline void sop_encode(uint8_t *rec, enum sop_code op, unsigned param, unsigned sel,
			      uint32_t a, uint32_t b)
{
	rec[0] = (uint8_t)((unsigned)op | (param & 15) << 4);
	rec[1] = (uint8_t)sel;
	sop_put24(rec + 2, a);
	sop_put24(rec + 5, b);
}

/* What all runs so far did (the counters add up across calls), for the seed generator. */
struct store_ops_counts {
	uint64_t runs, ops[SOP_NR_CODES];
	uint64_t puts, put_pages, pending_puts, same_units, raw_units, skipped;
	uint64_t enospc, e2big, gets_ok, gets_enoent, gets_einval, partial_gets, folio_gets;
	uint64_t ebadmsg, eio, invalidated_units, written_back_units, backing_reads;
	uint64_t write_errors, probes, compactions, pages_compacted, bad_calls;
	uint64_t clen_resolved, bytes_compared;
};

/*
 * Runs one scenario. Returns 0; every check that fails calls abort() after printing what
 * was done (op number, record offset, the op, expected and actual values). When the
 * environment has ZF_STORE_DUMP=path, the input is written there before the abort.
 * Not thread-safe: the interpreter keeps its state in statics.
 */
int store_ops_run(const uint8_t *data, size_t size);

/* A line printed before a failure message (e.g. the seed file's name); NULL: none. */
void store_ops_set_context(const char *context);

/* The counters of every run so far. */
const struct store_ops_counts *store_ops_counts(void);

#endif /* ZF_STORE_OPS_H */
