/*
 * store_ops.c - the zf_store op-stream interpreter and its shadow model (store_ops.h has
 * the input format and the ops).
 *
 * The model is what include/zfolio.h and docs/store.md promise, not the implementation:
 *
 *  - the units: for every stored unit, its pages, its size, whether it is same-filled,
 *    where it is (pool or backing file), whether a test hook corrupted it; and for every
 *    page the descriptor its bytes are made from. A put over stored pages replaces every
 *    unit it overlaps; a get of a unit, of one of its pages, or of a folio of units
 *    must give back exactly the bytes put, or the documented error (-ENOENT, -EINVAL,
 *    -EBADMSG for a corrupt unit, -EIO for an injected read error);
 *  - the LRU: pool units in the order their puts committed. Writeback takes the oldest;
 *    a get of a written-back unit reads the file (bd_reads), one of a pool unit does not,
 *    so every get checks where the unit is. When a writeback had no failure, the units
 *    it moved are exactly the oldest ones, as many as bd_writes says. When some writes
 *    failed (a small backing file, an injected error), the units it may have moved are
 *    the oldest bd_writes + bd_write_errors, and each is read back at once to learn
 *    where it is (a "probe": a get, with all of a get's checks);
 *  - the counters: every event counter (zswpout, zswpin, stored_pages, same_filled_pages,
 *    written_back_pages, invalidates, the rejects, decompress_fail, bd_reads, the
 *    per-size arrays, ...) exactly, after every op. compr_data_size and
 *    stored_incompressible_pages depend on what the codec made of each unit, which the
 *    model knows only for some units (same-filled: 0; random pages: raw). The others
 *    are kept in groups whose sum is known: the units of one put form a group, the
 *    counter's move tells its sum, and when units leave a group its new sum is learned
 *    the same way (groups touched by one op are merged). Each group's sum must stay
 *    within what its units can take (1 byte to the unit each; less than the
 *    incompressible threshold when they surely compress), and a group of one unit
 *    gives that unit's exact size, checked from then on;
 *  - the pool's counters: pool_total_size = mem_used_total <= mem_used_max (which never
 *    falls), warm pages within pool_warm_bytes, compaction's result exactly what leaves
 *    mem_used_total and joins pages_compacted, no pins left after an op, and, at the
 *    end, an empty store with an empty pool once every unit is dropped and compacted.
 *
 * Which puts must succeed: a put of valid arguments may fail only with -ENOSPC when the
 * store has a pool limit, and with -E2BIG when reject_incompressible is set and a unit
 * may not compress. Units of random pages never compress (nor does any unit with the
 * "none" codec or incompressible_pct 0); units of zeros, same-filled, sparse, ramp and
 * near-same pages always do at incompressible_pct >= 25, and text too at 100: there the
 * put's result is checked exactly, elsewhere either result is taken (and counted).
 *
 * After the last record: the puts in flight are finished, every unit is read back, and
 * (unless the header says to destroy the store full) every unit is dropped, the counters
 * must be back at zero, a compaction must leave the pool with no pages, and a store with
 * a backing file must be able to write back as many fresh one-slot units as the file
 * has slots (no slot leaked). Then zf_store_destroy(), under ASan: no leak.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store_ops.h"
#include "op_report.h"
#include "../../src/backing/backing.h"
#include "../../src/store/store.h"

/* The checks are the oracle, not something for libFuzzer to explore (zpool_ops.c). */
#if defined(__clang__) && __clang_major__ >= 13
#define NO_COVERAGE __attribute__((no_sanitize("coverage")))
#else
#define NO_COVERAGE
#endif

#define PAGE ZF_PAGE_SIZE
#define NPAGES (SOP_WINDOWS * SOP_WINDOW_PAGES)
#define MAX_UNITS NPAGES
#define NONE UINT32_MAX
#define SEED_MASK ((UINT64_C(1) << 61) - 1)
#define MAX_FOLIO_PAGES (ZF_UNIT_MAX / PAGE)
#define PINS_EVERY 8u

/* The windows: an owner and the index of its first page (the last one ends the space). */
static const struct {
	uint32_t owner;
	uint64_t base;
} windows[SOP_WINDOWS] = {
	{ 0, 0 },
	{ 1, 0 },
	{ 7, (uint64_t)1 << 32 },
	{ UINT32_MAX, UINT64_MAX - SOP_WINDOW_PAGES + 1 },
};

enum loc { LOC_SAME = 0, LOC_POOL = 1, LOC_BACKING = 2, LOC_MAYBE = 3 };

/* What the model knows of how a unit compresses. */
enum cert { CERT_SAME, CERT_INCOMP, CERT_COMP, CERT_UNKNOWN };

struct unit {
	uint32_t first; /* model page */
	uint32_t clen; /* when clen_known */
	uint32_t group; /* 0: none (everything known) */
	uint32_t live_pos; /* in R.live */
	uint32_t lru_prev, lru_next; /* towards the oldest, the newest; NONE at the ends */
	uint8_t order, cert, loc, corrupt;
	uint8_t clen_known, raw_known, raw, in_lru;
};

/* Units whose stored length (or raw-ness) is known only as a sum. */
struct group {
	uint64_t clen_sum, raw_sum; /* over the members whose clen, raw is not known */
	uint32_t n_clen, n_raw;
	uint8_t used, touched; /* touched: a member left or joined in this op: sums unknown */
};

/* A put in flight. */
struct pend {
	zf_store_pending *p;
	uint8_t *buf;
	uint64_t *descs;
	uint32_t first;
	uint8_t order, expect;
	uint8_t cert[MAX_FOLIO_PAGES];
};

enum expect { EXPECT_OK, EXPECT_E2BIG, EXPECT_EITHER };

static const char *const op_names[SOP_NR_CODES] = {
	[SOP_PUT] = "put",
	[SOP_PUT_START] = "put-start",
	[SOP_PUT_FINISH] = "put-finish",
	[SOP_GET] = "get",
	[SOP_GET_FOLIO] = "get-folio",
	[SOP_INVALIDATE] = "invalidate",
	[SOP_OVERWRITE] = "overwrite",
	[SOP_WRITEBACK] = "writeback",
	[SOP_COMPACT] = "compact",
	[SOP_STATS] = "stats",
	[SOP_CORRUPT] = "corrupt",
	[SOP_INJECT] = "inject",
	[SOP_BAD] = "bad",
	[SOP_VERIFY] = "verify",
};

static struct store_ops_counts counts;
static const char *context;
static uint8_t *scratch; /* a folio being put, or read back */
static char tmpdir[256];

static struct {
	zf_store *s;
	zf_store_options o;
	char backing_path[300];
	unsigned store_order; /* log2 of the unit's pages (0 in split mode) */
	int limit, admit_wb, engines, named_backing, keep;
	uint64_t warm_max_pages;

	/* The model. */
	uint64_t desc[NPAGES]; /* each page's content descriptor (kind << 61 | seed) */
	uint32_t page_unit[NPAGES]; /* the unit holding each page, or NONE */
	struct unit units[MAX_UNITS];
	uint32_t free_units[MAX_UNITS], nfree;
	uint32_t live[MAX_UNITS], nlive;
	uint32_t lru_old, lru_new;
	struct group groups[MAX_UNITS + 1];
	uint32_t free_groups[MAX_UNITS], nfree_groups;
	uint32_t top_group; /* the highest group number used so far */
	uint32_t new_group; /* this op's group of new units, 0 before the first */
	uint64_t known_clen, known_raw; /* the sums over units that are known */
	uint64_t stored_pages, pending_pages, wb_pages;
	uint64_t wb_unknown_pages; /* units dropped in this op before their probe */
	zf_store_stats E; /* the expected counters */
	zf_store_stats last; /* the previous stats, for the counters that never fall */
	struct pend pend[SOP_MAX_PENDING];
	unsigned npend;
	int trace; /* ZF_STORE_TRACE set: each op is printed */
	int final; /* past the last record */
	int read_armed;
	uint64_t read_left; /* reads of the backing file before the injected failure */
	uint64_t budget;

	/* The LRU before an op that may write back, oldest first, and what it did. */
	uint32_t snap[MAX_UNITS], nsnap, nprobe;
	uint64_t probe_writes, probe_pages;

	/* Where we are, for the failure message. */
	const uint8_t *data;
	size_t size, op_no, offset;
	const char *op_name;
	uint8_t rec[SOP_RECORD];
} R;

__attribute__((format(printf, 1, 2), noreturn)) static void fail(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	if (context)
		fprintf(stderr, "store_ops: %s\n", context);
	fprintf(stderr,
		"store_ops: op %zu (%s), record at byte %zu "
		"[%02x %02x %02x %02x %02x %02x %02x %02x] of %zu; store: codec %s, unit %u, "
		"engines %u, limit %llu, backing %s (%llu bytes); %u units, %llu pages: ",
		R.op_no, R.op_name ? R.op_name : "setup", R.offset, R.rec[0], R.rec[1], R.rec[2],
		R.rec[3], R.rec[4], R.rec[5], R.rec[6], R.rec[7], R.size,
		R.o.codec ? R.o.codec : "?", R.o.unit, R.o.engines,
		(unsigned long long)R.o.max_pool_bytes,
		R.o.backing_path ? R.o.backing_path : "none", (unsigned long long)R.o.backing_bytes,
		R.nlive, (unsigned long long)R.stored_pages);
	va_start(ap, fmt);
	op_report_end("store_ops", "ZF_STORE_DUMP", R.data, R.size, fmt, ap);
}

#define ULL(x) ((unsigned long long)(x))

void store_ops_set_context(const char *ctx)
{
	context = ctx;
}

const struct store_ops_counts *store_ops_counts(void)
{
	return &counts;
}

/* ---------------------------------------------------------------------------------- */
/* Page contents                                                                      */
/* ---------------------------------------------------------------------------------- */

NO_COVERAGE static uint64_t mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

NO_COVERAGE static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* 32 words, each with the space or newline after it: text compresses to about half. */
static const char words[32][10] = {
	"the ",	   "page ",  "store ", "unit ",	 "folio ", "zswap ",  "compress ", "memory\n",
	"swap ",   "pool ",  "entry ", "index ", "owner ", "kernel ", "of ",	   "and ",
	"to ",	   "in ",    "a ",     "is ",	 "that ",  "with\n",  "for ",	   "it ",
	"region ", "fault ", "write ", "read ",	 "zram ",  "slot\n",  "handle ",   "class ",
};
static const uint8_t word_len[32] = { 4, 5, 6, 5, 6, 6, 9, 7, 5, 5, 6, 6, 6, 7, 3, 4,
				      3, 3, 2, 3, 5, 5, 4, 3, 7, 6, 6, 5, 5, 5, 7, 6 };

/* The 4 KiB of page descriptor desc (kind << 61 | seed). */
NO_COVERAGE static void gen_page(uint8_t *dst, uint64_t desc)
{
	const unsigned kind = (unsigned)(desc >> 61);
	const uint64_t seed = desc & SEED_MASK;
	uint64_t s = mix64(seed) | 1, v;
	size_t pos;

	switch (kind) {
	case SOP_ZERO:
		memset(dst, 0, PAGE);
		break;
	case SOP_SAME:
	case SOP_NEAR_SAME:
		v = mix64(seed ^ 0x5a5e);
		for (size_t i = 0; i < PAGE; i += 8)
			memcpy(dst + i, &v, 8);
		if (kind == SOP_NEAR_SAME) {
			v ^= (uint64_t)1 << (seed % 64);
			memcpy(dst + 8 * ((seed >> 6) % (PAGE / 8)), &v, 8);
		}
		break;
	case SOP_TEXT:
		pos = 0;
		for (uint64_t r = xorshift(&s); pos + 10 <= PAGE; r >>= 5) {
			if (r < 32)
				r = xorshift(&s);
			memcpy(dst + pos, words[r % 32], 10); /* the tail is overwritten next */
			pos += word_len[r % 32];
		}
		memset(dst + pos, '.', PAGE - pos);
		break;
	case SOP_SPARSE:
		memset(dst, 0, PAGE);
		for (size_t i = seed % 512; i < PAGE; i += 512)
			dst[i] = (uint8_t)((seed >> 9) + i) | 1;
		break;
	case SOP_RAMP:
		for (size_t i = 0; i < PAGE; i++)
			dst[i] = (uint8_t)(i + seed);
		break;
	default: /* RANDOM, HALF */
		for (size_t i = 0; i < PAGE; i += 8) {
			v = xorshift(&s);
			memcpy(dst + i, &v, 8);
		}
		if (kind == SOP_HALF)
			memset(dst + PAGE / 2, 0, PAGE / 2);
		break;
	}
}

/* Whether the len bytes at p are one 64-bit value repeated (the model's own check). */
NO_COVERAGE static int is_same_filled(const uint8_t *p, size_t len)
{
	for (size_t i = 8; i < len; i += 8) {
		if (memcmp(p, p + i, 8))
			return 0;
	}
	return 1;
}

/* The descriptors of a put's n pages from its param and seed (store_ops.h). */
NO_COVERAGE static void make_descs(uint64_t *descs, unsigned n, unsigned param, uint64_t seed)
{
	for (unsigned i = 0; i < n; i++) {
		const uint64_t h = mix64(seed + i);
		const unsigned kind = param < 8 ? param : sop_mixes[param - 8][h & 3];
		/* A folio of same-filled pages has one value, so its units are same-filled. */
		const uint64_t page_seed = param == SOP_SAME ? seed : h >> 2;

		descs[i] = (uint64_t)kind << 61 | (page_seed & SEED_MASK);
	}
}

/* Compares n pages at got with the model's pages from first; names the first difference. */
NO_COVERAGE static void compare_pages(const uint8_t *got, const uint64_t *descs, unsigned n,
				      uint32_t first, const char *what)
{
	static uint8_t want[PAGE];

	for (unsigned i = 0; i < n; i++) {
		gen_page(want, descs[i]);
		if (memcmp(got + (size_t)i * PAGE, want, PAGE) == 0)
			continue;
		for (size_t k = 0; k < PAGE; k++) {
			CHECK(got[(size_t)i * PAGE + k] == want[k],
			      "%s: page %u of window %u (desc %#llx): byte %zu is %#04x, expected "
			      "%#04x",
			      what, (first + i) % SOP_WINDOW_PAGES, (first + i) / SOP_WINDOW_PAGES,
			      ULL(descs[i]), k, got[(size_t)i * PAGE + k], want[k]);
		}
	}
	counts.bytes_compared += (uint64_t)n * PAGE;
}

/* ---------------------------------------------------------------------------------- */
/* The model's units                                                                  */
/* ---------------------------------------------------------------------------------- */

static uint32_t owner_of(uint32_t page)
{
	return windows[page / SOP_WINDOW_PAGES].owner;
}

static uint64_t index_of(uint32_t page)
{
	return windows[page / SOP_WINDOW_PAGES].base + page % SOP_WINDOW_PAGES;
}

static uint32_t unit_pages(const struct unit *u)
{
	return 1u << u->order;
}

static size_t unit_bytes(const struct unit *u)
{
	return (size_t)PAGE << u->order;
}

/* The incompressible threshold of a unit of len bytes: compressed ones are shorter. */
static uint64_t threshold(size_t len)
{
	return (uint64_t)len * R.o.incompressible_pct / 100;
}

NO_COVERAGE static struct unit *unit_at(uint32_t page)
{
	return R.page_unit[page] == NONE ? NULL : &R.units[R.page_unit[page]];
}

static uint32_t unit_id(const struct unit *u)
{
	return (uint32_t)(u - R.units);
}

NO_COVERAGE static void lru_remove(struct unit *u)
{
	if (!u->in_lru)
		return;
	if (u->lru_prev != NONE)
		R.units[u->lru_prev].lru_next = u->lru_next;
	else
		R.lru_old = u->lru_next;
	if (u->lru_next != NONE)
		R.units[u->lru_next].lru_prev = u->lru_prev;
	else
		R.lru_new = u->lru_prev;
	u->in_lru = 0;
}

NO_COVERAGE static void lru_add_newest(struct unit *u)
{
	const uint32_t id = unit_id(u);

	u->lru_prev = R.lru_new;
	u->lru_next = NONE;
	if (R.lru_new != NONE)
		R.units[R.lru_new].lru_next = id;
	else
		R.lru_old = id;
	R.lru_new = id;
	u->in_lru = 1;
}

static uint32_t group_new(void)
{
	const uint32_t g = R.free_groups[--R.nfree_groups];

	if (g > R.top_group)
		R.top_group = g;
	memset(&R.groups[g], 0, sizeof(R.groups[g]));
	R.groups[g].used = 1;
	return g;
}

static void group_free(uint32_t g)
{
	R.groups[g].used = 0;
	R.free_groups[R.nfree_groups++] = g;
}

/* A unit leaves the model (invalidated or replaced): the counters move as the store's. */
NO_COVERAGE static void unit_drop(struct unit *u)
{
	const uint32_t pages = unit_pages(u), id = unit_id(u);

	R.stored_pages -= pages;
	R.E.stored_pages -= pages;
	R.E.orig_data_size -= (uint64_t)pages * PAGE;
	R.E.invalidates++;
	if (u->loc == LOC_SAME)
		R.E.same_filled_pages -= pages;
	if (u->loc == LOC_BACKING)
		R.wb_pages -= pages;
	if (u->loc == LOC_MAYBE)
		R.wb_unknown_pages += pages;
	if (u->clen_known)
		R.known_clen -= u->clen;
	if (u->raw_known)
		R.known_raw -= u->raw ? pages : 0;
	if (u->group) {
		struct group *g = &R.groups[u->group];

		g->touched = 1;
		g->n_clen -= !u->clen_known;
		g->n_raw -= !u->raw_known;
	}
	lru_remove(u);
	for (uint32_t p = u->first; p < u->first + pages; p++)
		R.page_unit[p] = NONE;
	R.live[u->live_pos] = R.live[--R.nlive];
	R.units[R.live[u->live_pos]].live_pos = u->live_pos;
	R.free_units[R.nfree++] = id;
	counts.invalidated_units++;
}

/* Drops every unit holding a page of [first, first + n): the count. */
NO_COVERAGE static long drop_range(uint32_t first, uint32_t n)
{
	long dropped = 0;

	for (uint32_t p = first; p < first + n; p++) {
		struct unit *u = unit_at(p);

		if (u) {
			unit_drop(u);
			dropped++;
		}
	}
	return dropped;
}

/* A committed unit joins the model. */
NO_COVERAGE static void unit_add(uint32_t first, unsigned order, enum cert cert)
{
	const uint32_t id = R.free_units[--R.nfree];
	struct unit *u = &R.units[id];
	const uint32_t pages = 1u << order;

	memset(u, 0, sizeof(*u));
	u->first = first;
	u->order = (uint8_t)order;
	u->cert = (uint8_t)cert;
	u->lru_prev = u->lru_next = NONE;
	u->live_pos = R.nlive;
	R.live[R.nlive++] = id;
	for (uint32_t p = first; p < first + pages; p++)
		R.page_unit[p] = id;
	R.stored_pages += pages;
	R.E.stored_pages += pages;
	R.E.orig_data_size += (uint64_t)pages * PAGE;
	/* With reject_incompressible, a unit that went in was compressed. */
	if (cert == CERT_UNKNOWN && R.o.reject_incompressible)
		cert = CERT_COMP;
	u->cert = (uint8_t)cert;
	switch (cert) {
	case CERT_SAME:
		u->loc = LOC_SAME;
		u->clen_known = u->raw_known = 1;
		R.E.same_filled_pages += pages;
		counts.same_units++;
		return;
	case CERT_INCOMP:
		u->clen_known = u->raw_known = u->raw = 1;
		u->clen = (uint32_t)unit_bytes(u);
		counts.raw_units++;
		break;
	case CERT_COMP:
		u->raw_known = 1;
		break;
	default:
		break;
	}
	u->loc = LOC_POOL;
	lru_add_newest(u);
	R.known_clen += u->clen_known ? u->clen : 0;
	R.known_raw += u->raw_known && u->raw ? pages : 0;
	if (!u->clen_known || !u->raw_known) {
		struct group *g;

		if (!R.new_group)
			R.new_group = group_new();
		g = &R.groups[R.new_group];
		g->touched = 1;
		g->n_clen += !u->clen_known;
		g->n_raw += !u->raw_known;
		u->group = R.new_group;
	}
}

/* What the model can tell of a unit's compression from its bytes and the options. */
NO_COVERAGE static enum cert classify(const uint8_t *data, const uint64_t *descs, unsigned pages)
{
	const size_t len = (size_t)pages * PAGE;
	const unsigned pct = R.o.incompressible_pct;
	unsigned mask = 0;

	if (is_same_filled(data, len))
		return CERT_SAME;
	for (unsigned i = 0; i < pages; i++)
		mask |= 1u << (descs[i] >> 61);
	if (threshold(len) <= 1 || strcmp(R.o.codec, "none") == 0 || mask == 1u << SOP_RANDOM)
		return CERT_INCOMP;
	if (pct <= 50 && !(mask & ~(1u << SOP_RANDOM | 1u << SOP_HALF)))
		return CERT_INCOMP;
	if (pct >= 25 && !(mask & (1u << SOP_RANDOM | 1u << SOP_HALF | 1u << SOP_TEXT)))
		return CERT_COMP;
	if (pct == 100 && !(mask & (1u << SOP_RANDOM | 1u << SOP_HALF)))
		return CERT_COMP;
	return CERT_UNKNOWN;
}

/* Puts a committed folio in the model: its pages replace every unit they overlap. */
NO_COVERAGE static void commit(uint32_t first, unsigned order, const uint64_t *descs,
			       const uint8_t *cert)
{
	const uint32_t pages = 1u << order;
	const unsigned uorder = order < R.store_order ? order : R.store_order;
	const unsigned n = 1u << (order - uorder);

	drop_range(first, pages);
	memcpy(&R.desc[first], descs, pages * sizeof(*descs));
	for (unsigned i = 0; i < n; i++)
		unit_add(first + (i << uorder), uorder, (enum cert)cert[i]);
	R.E.zswpout += pages;
	R.E.zswpout_units[uorder] += n;
	counts.puts++;
	counts.put_pages += pages;
}

/* ---------------------------------------------------------------------------------- */
/* Checking the counters                                                              */
/* ---------------------------------------------------------------------------------- */

static zf_store_stats stats_now(void)
{
	zf_store_stats s;
	const int ret = zf_store_get_stats(R.s, &s, sizeof(s));

	CHECK(ret == 0, "zf_store_get_stats: %d", ret);
	return s;
}

/* Engines may be compressing (and allocating) for a put in flight: pool figures move. */
static int pool_quiet(void)
{
	return R.engines == 0 || R.npend == 0;
}

#define EXACT(f) CHECK(S->f == R.E.f, "%s: " #f " %llu, expected %llu", what, ULL(S->f), ULL(R.E.f))

/* The counters the model knows exactly. */
NO_COVERAGE static void check_exact(const zf_store_stats *S, const char *what)
{
	EXACT(zswpout);
	EXACT(zswpin);
	EXACT(stored_pages);
	EXACT(same_filled_pages);
	EXACT(written_back_total);
	EXACT(orig_data_size);
	EXACT(reject_compress_poor);
	EXACT(reject_compress_fail);
	EXACT(reject_alloc_fail);
	EXACT(reject_pool_full);
	EXACT(decompress_fail);
	EXACT(partial_loads);
	EXACT(invalidates);
	EXACT(bd_reads);
	EXACT(bd_writes);
	EXACT(bd_read_errors);
	EXACT(bd_write_errors);
	for (unsigned o = 0; o < ZF_STORE_ORDERS; o++) {
		EXACT(zswpout_units[o]);
		EXACT(swpin_units[o]);
		EXACT(swpin_fallback[o]);
	}
	CHECK(S->stored_pages == R.stored_pages, "%s: stored_pages %llu, the model has %llu", what,
	      ULL(S->stored_pages), ULL(R.stored_pages));
	CHECK(S->written_back_pages >= R.wb_pages &&
		      S->written_back_pages <= R.wb_pages + R.wb_unknown_pages,
	      "%s: written_back_pages %llu, expected %llu (+ up to %llu)", what,
	      ULL(S->written_back_pages), ULL(R.wb_pages), ULL(R.wb_unknown_pages));
}

/* Bounds of the members of group g whose clen, raw are unknown: clen lo..hi, raw pages hi. */
NO_COVERAGE static void group_bounds(uint32_t g, uint64_t *clen_lo, uint64_t *clen_hi,
				     uint64_t *raw_hi)
{
	*clen_lo = *clen_hi = *raw_hi = 0;
	for (uint32_t i = 0; i < R.nlive; i++) {
		const struct unit *u = &R.units[R.live[i]];

		if (u->group != g)
			continue;
		if (!u->clen_known) {
			*clen_lo += 1;
			*clen_hi +=
				u->cert == CERT_COMP ? threshold(unit_bytes(u)) - 1 : unit_bytes(u);
		}
		if (!u->raw_known)
			*raw_hi += unit_pages(u);
	}
}

/* Learns what can be learned of group g's members from its sums. */
NO_COVERAGE static void group_resolve(uint32_t g)
{
	struct group *G = &R.groups[g];
	int progress = 1;

	while (progress) {
		progress = 0;
		for (uint32_t i = 0; i < R.nlive; i++) {
			struct unit *u = &R.units[R.live[i]];
			const uint64_t ub = unit_bytes(u), pages = unit_pages(u);

			if (u->group != g)
				continue;
			if (!u->clen_known && G->n_clen == 1) {
				u->clen = (uint32_t)G->clen_sum;
				u->clen_known = 1;
				R.known_clen += u->clen;
				G->clen_sum = 0;
				G->n_clen = 0;
				counts.clen_resolved++;
				progress = 1;
			}
			if (!u->raw_known && G->n_raw == 1) {
				CHECK(G->raw_sum == 0 || G->raw_sum == pages,
				      "stored_incompressible_pages: one unit of %llu pages left to "
				      "count %llu",
				      ULL(pages), ULL(G->raw_sum));
				u->raw = G->raw_sum != 0;
				u->raw_known = 1;
				R.known_raw += G->raw_sum;
				G->raw_sum = 0;
				G->n_raw = 0;
				progress = 1;
			}
			/* A unit is raw exactly when it is stored in its unit's size. */
			if (u->clen_known && !u->raw_known) {
				u->raw = u->clen == ub;
				u->raw_known = 1;
				R.known_raw += u->raw ? pages : 0;
				CHECK(G->raw_sum >= (u->raw ? pages : 0),
				      "stored_incompressible_pages: a raw unit of %llu pages in a "
				      "group counting %llu",
				      ULL(pages), ULL(G->raw_sum));
				G->raw_sum -= u->raw ? pages : 0;
				G->n_raw--;
				progress = 1;
			}
			if (u->raw_known && u->raw && !u->clen_known) {
				u->clen = (uint32_t)ub;
				u->clen_known = 1;
				R.known_clen += ub;
				CHECK(G->clen_sum >= ub,
				      "compr_data_size: a raw unit of %llu bytes in a group of "
				      "%llu",
				      ULL(ub), ULL(G->clen_sum));
				G->clen_sum -= ub;
				G->n_clen--;
				progress = 1;
			}
			if (u->clen_known && u->raw_known) {
				CHECK(u->clen >= 1 && u->clen <= ub && u->raw == (u->clen == ub),
				      "a unit of %llu bytes stored in %u bytes, raw %u", ULL(ub),
				      u->clen, u->raw);
				CHECK(u->cert != CERT_COMP || u->clen < threshold(ub),
				      "a compressible unit of %llu bytes stored in %u bytes "
				      "(threshold %llu)",
				      ULL(ub), u->clen, ULL(threshold(ub)));
				u->group = 0;
			}
		}
	}
}

/*
 * compr_data_size and stored_incompressible_pages: exact when no group was touched;
 * else the touched groups become one, whose sums the counters tell.
 */
NO_COVERAGE static void check_sizes(const zf_store_stats *S, const char *what)
{
	uint64_t rest_clen = 0, rest_raw = 0;
	uint32_t merged = 0;

	for (uint32_t g = 1; g <= R.top_group; g++) {
		struct group *G = &R.groups[g];

		if (!G->used)
			continue;
		if (!G->touched) {
			rest_clen += G->clen_sum;
			rest_raw += G->raw_sum;
			continue;
		}
		if (!merged) {
			merged = g;
			continue;
		}
		R.groups[merged].n_clen += G->n_clen;
		R.groups[merged].n_raw += G->n_raw;
		for (uint32_t i = 0; i < R.nlive; i++) {
			if (R.units[R.live[i]].group == g)
				R.units[R.live[i]].group = merged;
		}
		group_free(g);
	}
	R.new_group = 0;
	CHECK(S->compr_data_size >= R.known_clen + rest_clen &&
		      S->stored_incompressible_pages >= R.known_raw + rest_raw,
	      "%s: compr_data_size %llu, known %llu; stored_incompressible_pages %llu, known "
	      "%llu",
	      what, ULL(S->compr_data_size), ULL(R.known_clen + rest_clen),
	      ULL(S->stored_incompressible_pages), ULL(R.known_raw + rest_raw));
	if (!merged) {
		CHECK(S->compr_data_size == R.known_clen + rest_clen &&
			      S->stored_incompressible_pages == R.known_raw + rest_raw,
		      "%s: compr_data_size %llu, expected %llu; stored_incompressible_pages "
		      "%llu, expected %llu",
		      what, ULL(S->compr_data_size), ULL(R.known_clen + rest_clen),
		      ULL(S->stored_incompressible_pages), ULL(R.known_raw + rest_raw));
		return;
	}
	{
		struct group *G = &R.groups[merged];
		uint64_t lo, hi, raw_hi;

		G->clen_sum = S->compr_data_size - R.known_clen - rest_clen;
		G->raw_sum = S->stored_incompressible_pages - R.known_raw - rest_raw;
		G->touched = 0;
		group_bounds(merged, &lo, &hi, &raw_hi);
		CHECK(G->clen_sum >= lo && G->clen_sum <= hi && G->raw_sum <= raw_hi,
		      "%s: units of unknown size hold %llu bytes (%u of them: %llu..%llu) and %llu "
		      "raw pages (at most %llu)",
		      what, ULL(G->clen_sum), G->n_clen, ULL(lo), ULL(hi), ULL(G->raw_sum),
		      ULL(raw_hi));
		group_resolve(merged);
		if (G->n_clen == 0 && G->n_raw == 0) {
			CHECK(G->clen_sum == 0 && G->raw_sum == 0,
			      "%s: a group with no units left "
			      "counts %llu bytes, %llu raw pages",
			      what, ULL(G->clen_sum), ULL(G->raw_sum));
			for (uint32_t i = 0; i < R.nlive; i++)
				CHECK(R.units[R.live[i]].group != merged,
				      "a unit in a freed group");
			group_free(merged);
		}
	}
}

/* The pool's figures: what holds of any store. */
NO_COVERAGE static void check_pool(const zf_store_stats *S, const char *what)
{
	CHECK(S->pool_total_size == S->mem_used_total,
	      "%s: pool_total_size %llu, mem_used_total %llu", what, ULL(S->pool_total_size),
	      ULL(S->mem_used_total));
	CHECK(S->mem_used_total % PAGE == 0 && S->mem_used_max >= S->mem_used_total &&
		      S->mem_used_max >= R.last.mem_used_max,
	      "%s: mem_used_total %llu, mem_used_max %llu (was %llu)", what, ULL(S->mem_used_total),
	      ULL(S->mem_used_max), ULL(R.last.mem_used_max));
	CHECK(S->pages_compacted >= R.last.pages_compacted &&
		      S->pool_limit_hit >= R.last.pool_limit_hit,
	      "%s: pages_compacted %llu -> %llu, pool_limit_hit %llu -> %llu", what,
	      ULL(R.last.pages_compacted), ULL(S->pages_compacted), ULL(R.last.pool_limit_hit),
	      ULL(S->pool_limit_hit));
	CHECK(S->warm_pages * PAGE <= S->mem_used_total && S->warm_pages <= R.warm_max_pages,
	      "%s: %llu warm pages of %llu bytes (at most %llu)", what, ULL(S->warm_pages),
	      ULL(S->mem_used_total), ULL(R.warm_max_pages));
	CHECK(R.limit || S->pool_limit_hit == 0, "%s: pool_limit_hit %llu without a limit", what,
	      ULL(S->pool_limit_hit));
	/* Units in the file count in compr_data_size, not in the pool. */
	if (R.wb_pages == 0 && S->written_back_pages == 0)
		CHECK(S->compr_data_size <= S->mem_used_total,
		      "%s: %llu bytes stored in a pool of %llu bytes", what,
		      ULL(S->compr_data_size), ULL(S->mem_used_total));
	/* A walk of every class: every PINS_EVERY ops (and at the end), not after each. */
	if (pool_quiet() && (R.op_no % PINS_EVERY == 0 || !R.op_name || R.final)) {
		const uint64_t pins = store_pool_pins(R.s);

		CHECK(pins == 0, "%s: %llu pins left on pool objects", what, ULL(pins));
	}
}

/* Every check of the counters after an op; then they are the previous ones. */
NO_COVERAGE static void settle(const char *what)
{
	const zf_store_stats S = stats_now();

	check_exact(&S, what);
	check_sizes(&S, what);
	check_pool(&S, what);
	R.wb_unknown_pages = 0;
	R.last = S;
}

/* ---------------------------------------------------------------------------------- */
/* Gets                                                                               */
/* ---------------------------------------------------------------------------------- */

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	CHECK(p, "out of memory in the model (%zu bytes)", n);
	return p;
}

/* The read of a written-back unit: 0, or the injected error's -EIO (then disarmed). */
static int backing_read(void)
{
	if (R.read_armed && R.read_left == 0) {
		R.read_armed = 0;
		R.E.bd_read_errors++;
		return -EIO;
	}
	R.read_left -= R.read_armed;
	R.E.bd_reads++;
	counts.backing_reads++;
	return 0;
}

static void count_result(int ret)
{
	counts.ebadmsg += ret == -EBADMSG;
	counts.eio += ret == -EIO;
	counts.gets_enoent += ret == -ENOENT;
	counts.gets_einval += ret == -EINVAL;
	counts.gets_ok += ret == 0;
}

/* zf_store_get() of len bytes at page p, checked. */
NO_COVERAGE static int check_get(uint32_t p, size_t len, const char *what)
{
	struct unit *u = unit_at(p);
	uint8_t *dst;
	int expect, ret, partial = 0;

	if (!u) {
		expect = -ENOENT;
	} else {
		partial = len == PAGE && unit_bytes(u) > PAGE;
		CHECK(u->loc != LOC_MAYBE, "a get of a unit not probed");
		if (!partial && (len != unit_bytes(u) || p != u->first))
			expect = -EINVAL;
		else if (u->loc == LOC_SAME)
			expect = 0;
		else if (u->loc == LOC_BACKING && backing_read())
			expect = -EIO;
		else
			expect = u->corrupt ? -EBADMSG : 0;
	}
	R.budget += len;
	dst = xmalloc(len);
	ret = zf_store_get(R.s, owner_of(p), index_of(p), dst, len);
	CHECK(ret == expect, "%s: zf_store_get(page %u of window %u, %zu bytes) = %d, expected %d",
	      what, p % SOP_WINDOW_PAGES, p / SOP_WINDOW_PAGES, len, ret, expect);
	count_result(ret);
	if (ret == -EBADMSG)
		R.E.decompress_fail++;
	if (ret == 0) {
		R.E.zswpin += len / PAGE;
		if (partial) {
			R.E.swpin_fallback[u->order]++;
			R.E.partial_loads++;
			compare_pages(dst, &R.desc[p], 1, p, what);
			counts.partial_gets++;
		} else {
			R.E.swpin_units[u->order]++;
			compare_pages(dst, &R.desc[u->first], unit_pages(u), u->first, what);
		}
	}
	free(dst);
	return ret;
}

/*
 * Learns where unit u is (LOC_MAYBE after a writeback that had failures) by reading it
 * back with an injected error armed on the next read of the file: a unit in the file
 * fails with -EIO (and bd_read_errors), a unit in the pool comes back (and is compared).
 * That takes no stats call, which walks every size class of the pool, per unit.
 * probe_pending() puts the scenario's own injected read error back afterwards.
 */
NO_COVERAGE static void probe(struct unit *u)
{
	const size_t len = unit_bytes(u);
	uint8_t *dst = xmalloc(len);
	int ret;

	CHECK(store_inject_backing_error(R.s, BACKING_READ, 0, -EIO) == 0, "arming a probe");
	ret = zf_store_get(R.s, owner_of(u->first), index_of(u->first), dst, len);
	CHECK(ret == 0 || ret == -EIO || (ret == -EBADMSG && u->corrupt),
	      "probe: zf_store_get of a stored unit (corrupt %u) returned %d", u->corrupt, ret);
	count_result(ret);
	if (ret == -EIO) {
		CHECK(R.probe_writes > 0 && R.probe_pages >= unit_pages(u),
		      "probe: more units in the file than the writeback wrote (%llu pages left)",
		      ULL(R.probe_pages));
		R.probe_writes--;
		R.probe_pages -= unit_pages(u);
		u->loc = LOC_BACKING;
		R.wb_pages += unit_pages(u);
		lru_remove(u);
		R.E.bd_read_errors++;
	} else {
		u->loc = LOC_POOL;
	}
	if (ret == -EBADMSG)
		R.E.decompress_fail++;
	if (ret == 0) {
		R.E.zswpin += unit_pages(u);
		R.E.swpin_units[u->order]++;
		compare_pages(dst, &R.desc[u->first], unit_pages(u), u->first, "probe");
	}
	free(dst);
	counts.probes++;
}

/* zf_store_get_folio() of order at page p (aligned), checked. */
NO_COVERAGE static void check_get_folio(uint32_t p, unsigned order, const char *what)
{
	const uint32_t pages = 1u << order, end = p + pages;
	const size_t len = (size_t)pages * PAGE;
	unsigned problems = 0, nback = 0;
	uint64_t units[ZF_STORE_ORDERS] = { 0 };
	zf_store_stats before, after;
	uint8_t *dst;
	int ret;
	enum { P_ENOENT = 1, P_EINVAL = 2, P_EBADMSG = 4, P_EIO = 8 };

	/* Up to the first lookup that fails, any unit's failure may be the one returned. */
	for (uint32_t at = p; at < end;) {
		const struct unit *u = unit_at(at);

		if (!u) {
			problems |= P_ENOENT;
			break;
		}
		if (u->first != at || u->first + unit_pages(u) > end) {
			problems |= P_EINVAL;
			break;
		}
		if (u->loc == LOC_BACKING) {
			if (R.read_armed && nback == R.read_left)
				problems |= P_EIO;
			nback++;
		}
		if (u->loc != LOC_SAME && u->corrupt)
			problems |= P_EBADMSG;
		units[u->order]++;
		at += unit_pages(u);
	}
	R.budget += len;
	dst = xmalloc(len);
	before = stats_now();
	ret = zf_store_get_folio(R.s, owner_of(p), index_of(p), dst, len);
	after = stats_now();
	count_result(ret);
	counts.folio_gets++;
	if (!problems) {
		CHECK(ret == 0, "%s: zf_store_get_folio(page %u of window %u, %zu bytes) = %d",
		      what, p % SOP_WINDOW_PAGES, p / SOP_WINDOW_PAGES, len, ret);
		compare_pages(dst, &R.desc[p], pages, p, what);
		R.E.zswpin += pages;
		for (unsigned o = 0; o < ZF_STORE_ORDERS; o++)
			R.E.swpin_units[o] += units[o];
		R.E.bd_reads += nback;
		R.read_left -= R.read_armed ? nback : 0;
		counts.backing_reads += nback;
	} else {
		const uint64_t reads = after.bd_reads - before.bd_reads;
		const uint64_t errors = after.bd_read_errors - before.bd_read_errors;
		const unsigned got = ret == -ENOENT    ? P_ENOENT
				     : ret == -EINVAL  ? P_EINVAL
				     : ret == -EBADMSG ? P_EBADMSG
				     : ret == -EIO     ? P_EIO
						       : 0;

		CHECK(got & problems,
		      "%s: zf_store_get_folio(page %u of window %u, %zu bytes) = %d, expected one "
		      "of %#x (1 -ENOENT, 2 -EINVAL, 4 -EBADMSG, 8 -EIO)",
		      what, p % SOP_WINDOW_PAGES, p / SOP_WINDOW_PAGES, len, ret, problems);
		CHECK(reads <= nback && errors == (ret == -EIO),
		      "%s: a folio get that returned %d read %llu written-back units of %u, %llu "
		      "failed",
		      what, ret, ULL(reads), nback, ULL(errors));
		if (R.read_armed) {
			CHECK(reads <= R.read_left && (!errors || reads == R.read_left),
			      "%s: %llu reads and %llu failed, with the injected error %llu reads "
			      "away",
			      what, ULL(reads), ULL(errors), ULL(R.read_left));
			R.read_left -= reads;
			R.read_armed = !errors;
		}
		R.E.bd_reads += reads;
		R.E.bd_read_errors += errors;
		R.E.decompress_fail += ret == -EBADMSG;
		counts.backing_reads += reads;
	}
	free(dst);
}

/* ---------------------------------------------------------------------------------- */
/* Writeback                                                                          */
/* ---------------------------------------------------------------------------------- */

/* The LRU now, oldest first, before an op that may write back. */
NO_COVERAGE static void snapshot(void)
{
	R.nsnap = 0;
	for (uint32_t id = R.lru_old; id != NONE; id = R.units[id].lru_next)
		R.snap[R.nsnap++] = id;
	R.nprobe = 0;
}

/*
 * What a writeback did, from the counters (S: read right after the call): with no
 * failure, the oldest bd_writes units went to the file; with failures, any of the
 * oldest bd_writes + bd_write_errors may have, and probe_pending() finds out.
 */
NO_COVERAGE static void learn_writeback(const zf_store_stats *S, int may)
{
	const uint64_t writes = S->bd_writes - R.E.bd_writes;
	const uint64_t errors = S->bd_write_errors - R.E.bd_write_errors;
	const uint64_t pages = S->written_back_total - R.E.written_back_total;

	if (!may) {
		CHECK(!writes && !errors && !pages,
		      "an op that does not write back wrote %llu units, %llu pages (%llu failed)",
		      ULL(writes), ULL(pages), ULL(errors));
		return;
	}
	CHECK(writes <= R.nsnap && (writes || !pages) && pages <= (uint64_t)writes << 9,
	      "writeback of %llu units (%llu pages, %llu failed) from an LRU of %u", ULL(writes),
	      ULL(pages), ULL(errors), R.nsnap);
	R.E.bd_writes += writes;
	R.E.bd_write_errors += errors;
	R.E.written_back_total += pages;
	counts.written_back_units += writes;
	counts.write_errors += errors;
	if (!errors) {
		uint64_t sum = 0;

		for (uint32_t i = 0; i < writes; i++) {
			struct unit *u = &R.units[R.snap[i]];

			sum += unit_pages(u);
			u->loc = LOC_BACKING;
			R.wb_pages += unit_pages(u);
			lru_remove(u);
		}
		CHECK(sum == pages,
		      "writeback: the oldest %llu units have %llu pages, written_back_total "
		      "moved by %llu",
		      ULL(writes), ULL(sum), ULL(pages));
		return;
	}
	R.nprobe = (uint32_t)(writes + errors < R.nsnap ? writes + errors : R.nsnap);
	for (uint32_t i = 0; i < R.nprobe; i++)
		R.units[R.snap[i]].loc = LOC_MAYBE;
	R.probe_writes = writes;
	R.probe_pages = pages;
}

/* Probes the units a writeback with failures may have moved (after the op's own changes). */
static void probe_pending(void)
{
	int probed = 0;

	for (uint32_t i = 0; i < R.nprobe; i++) {
		struct unit *u = &R.units[R.snap[i]];

		/* Dropped meanwhile (wb_unknown_pages), or the slot reused by a new unit. */
		if (u->live_pos < R.nlive && R.live[u->live_pos] == R.snap[i] &&
		    u->loc == LOC_MAYBE) {
			probe(u);
			probed = 1;
		}
	}
	R.nprobe = 0;
	/* The scenario's own injected read error, as it was (a get says -EIO for any errno). */
	if (probed)
		CHECK(store_inject_backing_error(R.s, BACKING_READ, R.read_left,
						 R.read_armed ? -EIO : 0) == 0,
		      "re-arming the injected read error");
}

/* ---------------------------------------------------------------------------------- */
/* Puts                                                                               */
/* ---------------------------------------------------------------------------------- */

/* A put's result: what it must be, given its units' certainties. */
static enum expect put_expect(const uint8_t *cert, unsigned n)
{
	int incomp = 0, unknown = 0;

	if (!R.o.reject_incompressible)
		return EXPECT_OK;
	for (unsigned i = 0; i < n; i++) {
		incomp |= cert[i] == CERT_INCOMP;
		unknown |= cert[i] == CERT_UNKNOWN;
	}
	return incomp ? EXPECT_E2BIG : unknown ? EXPECT_EITHER : EXPECT_OK;
}

/* A put's (or a finish's) ret against expect; returns whether it committed. */
static int put_result(int ret, enum expect expect, const char *what, uint32_t first, unsigned order)
{
	if (ret == 0) {
		CHECK(expect != EXPECT_E2BIG,
		      "%s of order %u at page %u of window %u: 0, expected -E2BIG (a unit cannot "
		      "compress)",
		      what, order, first % SOP_WINDOW_PAGES, first / SOP_WINDOW_PAGES);
		return 1;
	}
	if (ret == -E2BIG) {
		CHECK(expect != EXPECT_OK,
		      "%s of order %u at page %u of window %u: -E2BIG, but every unit compresses",
		      what, order, first % SOP_WINDOW_PAGES, first / SOP_WINDOW_PAGES);
		R.E.reject_compress_poor++;
		counts.e2big++;
		return 0;
	}
	fail("%s of order %u at page %u of window %u: %d", what, order, first % SOP_WINDOW_PAGES,
	     first / SOP_WINDOW_PAGES, ret);
}

static void finish(unsigned i)
{
	struct pend *pd = &R.pend[i];
	const int ret = zf_store_put_finish(pd->p);
	R.pending_pages -= 1u << pd->order;
	if (put_result(ret, (enum expect)pd->expect, "zf_store_put_finish", pd->first, pd->order))
		commit(pd->first, pd->order, pd->descs, pd->cert);
	free(pd->buf);
	free(pd->descs);
	memmove(&R.pend[i], &R.pend[i + 1], (R.npend - i - 1) * sizeof(R.pend[0]));
	R.npend--;
}

/* A put (or, pending, a put_start) of a folio of order at page first, checked. */
NO_COVERAGE static void do_put(uint32_t first, unsigned order, unsigned param, uint64_t seed,
			       int pending)
{
	const uint32_t pages = 1u << order;
	const size_t len = (size_t)pages * PAGE;
	const unsigned uorder = order < R.store_order ? order : R.store_order;
	const unsigned n = 1u << (order - uorder);
	static uint64_t descs[MAX_FOLIO_PAGES];
	static uint8_t cert[MAX_FOLIO_PAGES];
	struct pend *pd = NULL;
	zf_store_pending *p = NULL;
	zf_store_stats S;
	uint8_t *buf = scratch;
	enum expect expect;
	int ret;

	if (R.budget + len > SOP_BUDGET_BYTES ||
	    R.stored_pages + R.pending_pages + pages > SOP_MAX_STORED_PAGES) {
		counts.skipped++;
		return;
	}
	R.budget += len;
	if (pending && R.npend == SOP_MAX_PENDING) {
		finish(0);
		settle("finishing the oldest put in flight");
	}
	make_descs(descs, pages, param, seed);
	if (pending) {
		pd = &R.pend[R.npend];
		buf = xmalloc(len);
	}
	for (uint32_t i = 0; i < pages; i++)
		gen_page(buf + (size_t)i * PAGE, descs[i]);
	for (unsigned i = 0; i < n; i++)
		cert[i] = (uint8_t)classify(buf + ((size_t)i * PAGE << uorder),
					    descs + (i << uorder), 1u << uorder);
	expect = put_expect(cert, n);
	if (R.admit_wb)
		snapshot();
	if (pending)
		ret = zf_store_put_start(R.s, owner_of(first), index_of(first), buf, len, &p);
	else
		ret = zf_store_put(R.s, owner_of(first), index_of(first), buf, len);
	S = stats_now();
	learn_writeback(&S, R.admit_wb);
	if (ret == -ENOSPC) {
		CHECK(R.limit, "a put returned -ENOSPC in a store without a pool limit");
		CHECK(!p, "zf_store_put_start failed and left a pending put");
		R.E.reject_pool_full++;
		counts.enospc++;
	} else if (pending) {
		CHECK(ret == 0 && p, "zf_store_put_start of order %u at page %u of window %u: %d",
		      order, first % SOP_WINDOW_PAGES, first / SOP_WINDOW_PAGES, ret);
		pd->p = p;
		pd->buf = buf;
		pd->descs = xmalloc(pages * sizeof(*descs));
		memcpy(pd->descs, descs, pages * sizeof(*descs));
		memcpy(pd->cert, cert, n);
		pd->first = first;
		pd->order = (uint8_t)order;
		pd->expect = (uint8_t)expect;
		R.npend++;
		R.pending_pages += pages;
		counts.pending_puts++;
		buf = NULL;
	} else if (put_result(ret, expect, "zf_store_put", first, order)) {
		commit(first, order, descs, cert);
	}
	if (pending && buf)
		free(buf);
	probe_pending();
}

/* ---------------------------------------------------------------------------------- */
/* The other ops                                                                      */
/* ---------------------------------------------------------------------------------- */

static unsigned sel_order(unsigned sel)
{
	const unsigned o = sel & 15;

	return o < 10 ? o : o - 10;
}

static uint32_t sel_page(unsigned sel, uint32_t a, unsigned order)
{
	const uint32_t w = (sel >> 4) & 3;

	return w * SOP_WINDOW_PAGES + ((a % SOP_WINDOW_PAGES) & ~((1u << order) - 1));
}

static struct unit *pick_unit(uint32_t b)
{
	return R.nlive ? &R.units[R.live[b % R.nlive]] : NULL;
}

static void op_get(unsigned param, unsigned sel, uint32_t a, uint32_t b)
{
	const struct unit *pu = sel & 0x40 ? pick_unit(b) : NULL;
	const uint32_t p = pu ? pu->first + a % unit_pages(pu) : sel_page(sel, a, 0);
	const struct unit *u = unit_at(p);
	size_t len;

	if (R.budget > SOP_BUDGET_BYTES) {
		counts.skipped++;
		return;
	}
	switch (param & 3) {
	case 0: /* the whole unit, from its first page */
		if (u) {
			check_get(u->first, unit_bytes(u), "get of a unit");
			return;
		}
		len = PAGE;
		break;
	case 1:
		len = PAGE;
		break;
	case 2: /* neither a page nor the unit */
		len = param & 4 ? PAGE + 1 + a % PAGE : (u ? unit_bytes(u) * 2 : 2 * PAGE);
		break;
	default: /* the unit's length, at this page */
		len = u ? unit_bytes(u) : PAGE;
		break;
	}
	check_get(p, len, "get");
}

static void op_invalidate(unsigned param, unsigned sel, uint32_t a, uint32_t b)
{
	const uint32_t w = (sel >> 4) & 3, first = w * SOP_WINDOW_PAGES + a % SOP_WINDOW_PAGES;
	uint64_t pages = 1 + b % 4096;
	uint32_t n;
	long ret, expect;

	if (param == 15 && w == SOP_WINDOWS - 1)
		pages = UINT64_MAX; /* the range runs off the end of the index space */
	else if (param == 14)
		pages = 0;
	n = (uint32_t)(pages < SOP_WINDOW_PAGES - first % SOP_WINDOW_PAGES
			       ? pages
			       : SOP_WINDOW_PAGES - first % SOP_WINDOW_PAGES);
	/* Whole units: one that begins before the range and reaches into it goes too. */
	expect = drop_range(first, n);
	ret = zf_store_invalidate(R.s, owner_of(first), index_of(first), pages);
	CHECK(ret == expect,
	      "zf_store_invalidate(page %u of window %u, %llu pages) = %ld, expected %ld",
	      first % SOP_WINDOW_PAGES, w, ULL(pages), ret, expect);
}

static void op_writeback(unsigned param, uint32_t a)
{
	static const char *const what = "zf_store_writeback";
	uint64_t bytes;
	zf_store_stats S;
	long ret;

	switch (param % 6) {
	case 0:
		bytes = 0;
		break;
	case 1:
		bytes = 1;
		break;
	case 2:
		bytes = PAGE;
		break;
	case 3:
		bytes = a;
		break;
	case 4:
		bytes = (uint64_t)a * 64;
		break;
	default:
		bytes = UINT64_MAX;
		break;
	}
	snapshot();
	ret = zf_store_writeback(R.s, bytes);
	S = stats_now();
	if (!R.o.backing_path) {
		CHECK(ret == -ENODEV, "%s without a backing file: %ld", what, ret);
		learn_writeback(&S, 0);
		return;
	}
	if (bytes == 0) {
		CHECK(ret == 0, "%s of 0 bytes: %ld", what, ret);
		learn_writeback(&S, 0);
		return;
	}
	{
		const uint64_t writes = S.bd_writes - R.E.bd_writes;
		const uint64_t errors = S.bd_write_errors - R.E.bd_write_errors;
		const uint64_t pages = S.written_back_total - R.E.written_back_total;

		if (ret > 0)
			CHECK((uint64_t)ret == pages && writes, "%s: %ld pages, %llu written back",
			      what, ret, ULL(pages));
		else if (ret == 0)
			CHECK(R.nsnap == 0 && !writes && !errors, "%s: 0 with %u units in the pool",
			      what, R.nsnap);
		else
			CHECK((ret == -EIO || ret == -ENOSPC) && !writes && errors,
			      "%s: %ld after %llu writes, %llu failed", what, ret, ULL(writes),
			      ULL(errors));
		/* "Until at least bytes of compressed data have left the pool". */
		if (!errors && writes < R.nsnap) {
			uint64_t sum = 0;
			int known = 1;

			for (uint32_t i = 0; i < writes; i++) {
				known &= R.units[R.snap[i]].clen_known;
				sum += R.units[R.snap[i]].clen;
			}
			CHECK(!known || sum >= bytes,
			      "%s(%llu bytes) stopped after %llu units of %llu bytes, with %u "
			      "left",
			      what, ULL(bytes), ULL(writes), ULL(sum), R.nsnap - (uint32_t)writes);
		}
	}
	learn_writeback(&S, 1);
	probe_pending();
}

static void op_compact(void)
{
	const zf_store_stats before = stats_now();
	const long ret = zf_store_compact(R.s);
	const zf_store_stats after = stats_now();

	CHECK(ret >= 0, "zf_store_compact: %ld", ret);
	counts.compactions++;
	counts.pages_compacted += (uint64_t)ret;
	if (!pool_quiet())
		return;
	CHECK(after.pages_compacted - before.pages_compacted == (uint64_t)ret &&
		      before.mem_used_total - after.mem_used_total == (uint64_t)ret * PAGE,
	      "zf_store_compact gave back %ld pages: pages_compacted %llu -> %llu, "
	      "mem_used_total %llu -> %llu",
	      ret, ULL(before.pages_compacted), ULL(after.pages_compacted),
	      ULL(before.mem_used_total), ULL(after.mem_used_total));
	CHECK(after.warm_pages == 0, "zf_store_compact left %llu warm pages",
	      ULL(after.warm_pages));
}

/* zf_store_unit_size() of page p, checked. */
static void check_unit_size(uint32_t p)
{
	const struct unit *u = unit_at(p);
	uint64_t first = 12345;
	const long ret = zf_store_unit_size(R.s, owner_of(p), index_of(p), &first);

	if (!u)
		CHECK(ret == -ENOENT, "zf_store_unit_size of a page not stored: %ld", ret);
	else
		CHECK(ret == (long)unit_bytes(u) && first == index_of(u->first),
		      "zf_store_unit_size: %ld, first %#llx; expected %zu, %#llx", ret, ULL(first),
		      unit_bytes(u), ULL(index_of(u->first)));
}

/* The value of line name in text, or -1. */
static long long text_value(const char *text, const char *name)
{
	const size_t n = strlen(name);

	for (const char *line = text; line && *line; line = strchr(line, '\n')) {
		if (*line == '\n')
			line++;
		if (strncmp(line, name, n) == 0 && line[n] == ' ')
			return strtoll(line + n + 1, NULL, 10);
	}
	return -1;
}

NO_COVERAGE static void op_stats(uint32_t a, uint32_t b)
{
	static const char *const order_names[ZF_STORE_ORDERS] = { "4k",	 "8k",	 "16k",	 "32k",
								  "64k", "128k", "256k", "512k",
								  "1m",	 "2m" };
	const zf_store_stats S = stats_now();
	struct {
		zf_store_stats s;
		uint8_t tail[64];
	} big;
	zf_store_stats small;
	const size_t cut = offsetof(zf_store_stats, stored_pages);
	size_t len, len2;
	char *text;

	for (unsigned i = 0; i < 4; i++)
		check_unit_size((uint32_t)(mix64(a + ((uint64_t)b << 24) + i) % NPAGES));
	if (R.nlive)
		check_unit_size(pick_unit(b)->first + a % unit_pages(pick_unit(b)));

	/* An older caller's smaller struct, a newer one's larger: statx's way. */
	memset(&small, 0xa5, sizeof(small));
	CHECK(zf_store_get_stats(R.s, &small, cut) == 0, "zf_store_get_stats of %zu bytes", cut);
	memset(&big, 0xa5, sizeof(big));
	CHECK(zf_store_get_stats(R.s, &big.s, sizeof(big)) == 0, "zf_store_get_stats of %zu bytes",
	      sizeof(big));
	for (size_t i = 0; i < sizeof(big.tail); i++)
		CHECK(big.tail[i] == 0, "zf_store_get_stats left byte %zu past the struct", i);
	for (size_t i = cut; i < sizeof(small); i++)
		CHECK(((const uint8_t *)&small)[i] == 0xa5,
		      "zf_store_get_stats of %zu bytes wrote byte %zu", cut, i);
	CHECK(memcmp(&small, &S, cut) == 0 && (!pool_quiet() || memcmp(&big.s, &S, sizeof(S)) == 0),
	      "zf_store_get_stats differs with another size");

	/*
	 * The text form, whole and cut short. With an engine storing a put in flight the
	 * pool's figures move between two calls, and the length with them: then only each
	 * text on its own is checked.
	 */
	len = zf_store_stats_text(R.s, NULL, 0);
	text = xmalloc(len + 64);
	len2 = zf_store_stats_text(R.s, text, len + 64);
	CHECK((pool_quiet() ? len2 == len : len2 < len + 64) && strlen(text) == len2,
	      "zf_store_stats_text: %zu bytes, then %zu", len, len2);
	len = len2;
	CHECK(text_value(text, "zswpout") == (long long)S.zswpout &&
		      text_value(text, "stored_pages") == (long long)S.stored_pages &&
		      text_value(text, "invalidates") == (long long)S.invalidates &&
		      text_value(text, "bd_reads") == (long long)S.bd_reads,
	      "zf_store_stats_text disagrees with the counters:\n%s", text);
	for (unsigned o = 0; o < ZF_STORE_ORDERS; o++) {
		char name[32];

		snprintf(name, sizeof(name), "zswpout_%s", order_names[o]);
		CHECK(text_value(text, name) ==
			      (S.zswpout_units[o] || S.swpin_units[o] || S.swpin_fallback[o]
				       ? (long long)S.zswpout_units[o]
				       : -1),
		      "zf_store_stats_text: %s", name);
	}
	if (len > 2) {
		const size_t cap = 1 + a % (len - 1);
		char *cut_text = xmalloc(cap);

		len2 = zf_store_stats_text(R.s, cut_text, cap);
		CHECK(len2 >= cap && strlen(cut_text) == cap - 1 &&
			      (!pool_quiet() ||
			       (len2 == len && memcmp(cut_text, text, cap - 1) == 0)),
		      "zf_store_stats_text cut to %zu bytes: %zu, \"%s\"", cap, len2, cut_text);
		free(cut_text);
	}
	free(text);
}

static void op_corrupt(unsigned sel, uint32_t a, uint32_t b)
{
	const struct unit *pu = sel & 0x40 ? pick_unit(b) : NULL;
	const uint32_t p = pu ? pu->first + a % unit_pages(pu) : sel_page(sel, a, 0);
	struct unit *u = unit_at(p);
	const int ret = store_corrupt(R.s, owner_of(p), index_of(p));
	const int expect = !u ? -ENOENT : u->loc == LOC_POOL ? 0 : -ENOTSUP;

	CHECK(ret == expect, "store_corrupt(page %u of window %u): %d, expected %d",
	      p % SOP_WINDOW_PAGES, p / SOP_WINDOW_PAGES, ret, expect);
	/* The hook flips one byte, the same each time: a second call mends the unit. */
	if (ret == 0)
		u->corrupt ^= 1;
}

static void op_inject(unsigned param, unsigned sel, uint32_t b)
{
	/* The errors zf_store_writeback() documents passing on (and gets turn into -EIO). */
	static const int errs[4] = { -EIO, -ENOSPC, -EIO, 0 };
	const int op = param & 1 ? BACKING_WRITE : BACKING_READ;
	const int err = errs[sel & 3];
	const int ret = store_inject_backing_error(R.s, op, b % 8, err);

	CHECK(ret == (R.o.backing_path ? 0 : -ENODEV), "store_inject_backing_error: %d", ret);
	if (ret == 0 && op == BACKING_READ) {
		R.read_armed = err != 0;
		R.read_left = b % 8;
	}
}

#define REFUSED(call, expect)                                                                      \
	do {                                                                                       \
		const long ret_ = (long)(call);                                                    \
		CHECK(ret_ == (long)(expect), "%s returned %ld, expected %ld", #call, ret_,        \
		      (long)(expect));                                                             \
		counts.bad_calls++;                                                                \
	} while (0)

/* zf_store_create() of options that must be refused with expect (or, if not 0, alt). */
static void bad_create(const zf_store_options *o, int expect, int alt, const char *what)
{
	zf_store *s = NULL;
	const int ret = zf_store_create(o, &s);

	CHECK(ret == expect || (alt && ret == alt), "zf_store_create with %s: %d, expected %d",
	      what, ret, expect);
	if (ret == 0)
		zf_store_destroy(s);
	counts.bad_calls++;
}

NO_COVERAGE static void bad_options(void)
{
	zf_store_options o;
	struct {
		zf_store_options o;
		uint64_t tail[2];
	} big;

#define BAD_OPTION(field, value, expect)                                                           \
	do {                                                                                       \
		zf_store_options_init(&o);                                                         \
		o.codec = R.o.codec;                                                               \
		o.field = value;                                                                   \
		bad_create(&o, expect, 0, #field " = " #value);                                    \
	} while (0)
	BAD_OPTION(unit, PAGE, -EINVAL);
	BAD_OPTION(unit, 3 * PAGE, -EINVAL);
	BAD_OPTION(unit, 2 * ZF_UNIT_MAX, -EINVAL);
	BAD_OPTION(engines, ZF_ENGINES_MAX + 1, -EINVAL);
	BAD_OPTION(accept_threshold_pct, 101, -EINVAL);
	BAD_OPTION(incompressible_pct, 101, -EINVAL);
	BAD_OPTION(when_full, (enum zf_store_when_full)2, -EINVAL);
	BAD_OPTION(codec, NULL, -EINVAL);
	BAD_OPTION(codec, "nope", -ENOENT);
	BAD_OPTION(struct_size, 7, -EINVAL);
	BAD_OPTION(backing_path, "/nonexistent-zfolio-fuzz/backing", -ENOENT);
#undef BAD_OPTION
	zf_store_options_init(&o);
	o.codec = "zstd:99";
	bad_create(&o, -EINVAL, -ENOTSUP, "codec zstd:99");
	/* A newer header's struct: fine when its options are left at zero, else -E2BIG. */
	memset(&big, 0, sizeof(big));
	zf_store_options_init(&big.o);
	big.o.struct_size = sizeof(big);
	big.o.codec = R.o.codec;
	bad_create(&big.o, 0, 0, "a larger struct, zeros past ours");
	big.tail[1] = 1;
	bad_create(&big.o, -E2BIG, 0, "a larger struct with an unknown option set");
	REFUSED(zf_store_create(&o, NULL), -EINVAL);
}

/* A second store on the first one's backing file: -EBUSY for a named file. */
static void bad_second_store(void)
{
	zf_store_options o;

	zf_store_options_init(&o);
	o.backing_path = R.o.backing_path;
	if (!o.backing_path)
		return;
	bad_create(&o, R.named_backing ? -EBUSY : 0, 0, "the first store's backing file");
}

NO_COVERAGE static void op_bad(unsigned kind, uint32_t a)
{
	const int all = kind == 7;
	const uint32_t owner = 2; /* an owner of no window */
	zf_store_pending *p = (zf_store_pending *)&p;
	zf_store_stats st;

	if (all || kind == 0) {
		static const size_t lens[] = { 0, PAGE - 1, PAGE + 1, 3 * PAGE, 2 * ZF_UNIT_MAX };

		for (unsigned i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
			REFUSED(zf_store_put(R.s, 0, 0, scratch, lens[i]), -EINVAL);
			REFUSED(zf_store_put_start(R.s, 0, 0, scratch, lens[i], &p), -EINVAL);
			CHECK(!p, "a refused put_start left a pending put");
		}
		/* A folio of 2^k pages at an index that is not a multiple of 2^k. */
		REFUSED(zf_store_put(R.s, 0, 1 + 2 * (a % 64), scratch, 2 * PAGE), -EINVAL);
		REFUSED(zf_store_put(R.s, 0, 256, scratch, ZF_UNIT_MAX), -EINVAL);
		REFUSED(zf_store_put(R.s, 0, 0, NULL, PAGE), -EINVAL);
		REFUSED(zf_store_put(NULL, 0, 0, scratch, PAGE), -EINVAL);
		REFUSED(zf_store_put_start(R.s, 0, 0, scratch, PAGE, NULL), -EINVAL);
		REFUSED(zf_store_put_finish(NULL), -EINVAL);
	}
	if (all || kind == 1) {
		REFUSED(zf_store_get(R.s, 0, 0, NULL, PAGE), -EINVAL);
		REFUSED(zf_store_get(NULL, 0, 0, scratch, PAGE), -EINVAL);
		REFUSED(zf_store_get_folio(R.s, 0, 0, scratch, 3 * PAGE), -EINVAL);
		REFUSED(zf_store_get_folio(R.s, 0, 0, scratch, 0), -EINVAL);
		REFUSED(zf_store_get_folio(R.s, 0, 0, scratch, 2 * ZF_UNIT_MAX), -EINVAL);
		REFUSED(zf_store_get_folio(R.s, 0, 1 + 2 * (a % 64), scratch, 2 * PAGE), -EINVAL);
		REFUSED(zf_store_get_folio(R.s, 0, 0, NULL, PAGE), -EINVAL);
		REFUSED(zf_store_get_folio(NULL, 0, 0, scratch, PAGE), -EINVAL);
	}
	if (all || kind == 2) {
		REFUSED(zf_store_get_stats(NULL, &st, sizeof(st)), -EINVAL);
		REFUSED(zf_store_get_stats(R.s, NULL, sizeof(st)), -EINVAL);
		REFUSED(zf_store_get_stats(R.s, &st, 0), -EINVAL);
		REFUSED(zf_store_compact(NULL), -EINVAL);
		REFUSED(zf_store_writeback(NULL, 1), -EINVAL);
		REFUSED(zf_store_invalidate(NULL, 0, 0, 1), -EINVAL);
		REFUSED(zf_store_unit_size(NULL, 0, 0, NULL), -EINVAL);
		zf_store_destroy(NULL);
	}
	if (all || kind == 3)
		bad_options();
	if (all || kind == 4) {
		REFUSED(zf_store_invalidate(R.s, 0, a, 0), 0);
		REFUSED(zf_store_writeback(R.s, 0), R.o.backing_path ? 0 : -ENODEV);
	}
	if (all || kind == 5) {
		/* Keys nobody stored. */
		REFUSED(zf_store_get(R.s, owner, a, scratch, PAGE), -ENOENT);
		REFUSED(zf_store_get_folio(R.s, owner, 0, scratch, ZF_UNIT_MAX), -ENOENT);
		REFUSED(zf_store_unit_size(R.s, owner, a, NULL), -ENOENT);
		REFUSED(zf_store_invalidate(R.s, owner, 0, 4096), 0);
		REFUSED(store_corrupt(R.s, owner, a), -ENOENT);
	}
	if (all || kind == 6)
		bad_second_store();
}

static void op_verify(void)
{
	for (uint32_t i = 0; i < R.nlive; i++) {
		const struct unit *u = &R.units[R.live[i]];

		check_get(u->first, unit_bytes(u), "verify");
		if (u->order)
			check_get(u->first + (uint32_t)(mix64(R.op_no + i) % unit_pages(u)), PAGE,
				  "verify, one page");
	}
}

/* ---------------------------------------------------------------------------------- */
/* A run                                                                              */
/* ---------------------------------------------------------------------------------- */

static void run_op(const uint8_t *rec)
{
	const enum sop_code op = sop_of_code(rec[0]);
	const unsigned param = rec[0] >> 4, sel = rec[1];
	const uint32_t a = sop_get24(rec + 2), b = sop_get24(rec + 5);
	const uint64_t seed = b ^ (uint64_t)R.op_no << 24;

	R.op_name = op_names[op];
	counts.ops[op]++;
	if (R.trace)
		fprintf(stderr, "store_ops: op %zu: %s param %u sel %#x a %u b %u\n", R.op_no,
			R.op_name, param, sel, a, b);
	switch (op) {
	case SOP_PUT:
	case SOP_PUT_START:
		do_put(sel_page(sel, a, sel_order(sel)), sel_order(sel), param, seed,
		       op == SOP_PUT_START);
		break;
	case SOP_PUT_FINISH:
		if (R.npend)
			finish(b % R.npend);
		break;
	case SOP_GET:
		op_get(param, sel, a, b);
		break;
	case SOP_GET_FOLIO:
		if (R.budget <= SOP_BUDGET_BYTES)
			check_get_folio(sel_page(sel, a, sel_order(sel)), sel_order(sel),
					"get_folio");
		else
			counts.skipped++;
		break;
	case SOP_INVALIDATE:
		op_invalidate(param, sel, a, b);
		break;
	case SOP_OVERWRITE:
		if (R.nlive) {
			const struct unit *u = pick_unit(b);
			const unsigned order = sel & 0x40 ? u->order : sel_order(sel);
			const uint32_t w = u->first / SOP_WINDOW_PAGES * SOP_WINDOW_PAGES;

			do_put(w + ((u->first - w) & ~((1u << order) - 1)), order, param, seed, 0);
		}
		break;
	case SOP_WRITEBACK:
		op_writeback(param, a);
		break;
	case SOP_COMPACT:
		op_compact();
		break;
	case SOP_STATS:
		op_stats(a, b);
		break;
	case SOP_CORRUPT:
		op_corrupt(sel, a, b);
		break;
	case SOP_INJECT:
		op_inject(param, sel, b);
		break;
	case SOP_BAD:
		op_bad(param & 7, a);
		break;
	case SOP_VERIFY:
		op_verify();
		break;
	}
	settle("after the op");
}

/* A directory for the backing files of this process, removed at exit. */
static void rm_tmpdir(void)
{
	rmdir(tmpdir);
}

static const char *get_tmpdir(void)
{
	if (!tmpdir[0]) {
		const char *base = getenv("TMPDIR");

		snprintf(tmpdir, sizeof(tmpdir), "%s/zf-fuzz-store-XXXXXX",
			 base && *base ? base : "/tmp");
		CHECK(mkdtemp(tmpdir), "mkdtemp(%s) failed", tmpdir);
		atexit(rm_tmpdir);
	}
	return tmpdir;
}

/* The store's options from the header (store_ops.h). */
static void setup(const uint8_t *h)
{
	const unsigned unitk = (h[0] >> 3) & 15, backing = h[2] >> 6;
	const zf_codec *c;
	int ret;

	zf_store_options_init(&R.o);
	for (unsigned k = 0; k < 8; k++) {
		R.o.codec = sop_codecs[((h[0] & 7) + k) % 8];
		if (zf_codec_find(R.o.codec, &c) == 0)
			break;
	}
	R.o.unit = unitk >= 1 && unitk <= 9 ? PAGE << unitk : 0;
	R.store_order = R.o.unit ? unitk : 0;
	R.o.verify = h[0] >> 7;
	R.o.engines = (h[1] & 3) == 3 ? 0 : h[1] & 3;
	R.engines = (int)R.o.engines;
	R.o.reject_incompressible = (h[1] >> 2) & 1;
	R.o.incompressible_pct = sop_incompressible_pct[(h[1] >> 3) & 7];
	R.o.when_full = (h[1] >> 6) & 1 ? ZF_STORE_WRITEBACK : ZF_STORE_REJECT;
	R.keep = h[1] >> 7;
	R.o.max_pool_bytes = R.engines ? 0 : sop_pool_limits[h[2] & 7];
	R.limit = R.o.max_pool_bytes != 0;
	R.o.accept_threshold_pct = sop_accept_pct[(h[2] >> 3) & 7];
	R.o.backing_bytes = sop_backing_bytes[h[3] & 7];
	R.o.pool_warm_bytes = sop_warm_bytes[(h[3] >> 3) & 7];
	R.warm_max_pages = R.o.pool_warm_bytes / PAGE;
	if (backing) {
		R.named_backing = backing == 2;
		snprintf(R.backing_path, sizeof(R.backing_path), "%s%s", get_tmpdir(),
			 R.named_backing ? "/backing" : "");
		R.o.backing_path = R.backing_path;
	}
	R.admit_wb = R.limit && R.o.backing_path && R.o.when_full == ZF_STORE_WRITEBACK;
	ret = zf_store_create(&R.o, &R.s);
	CHECK(ret == 0 && R.s, "zf_store_create: %d", ret);

	for (uint32_t i = 0; i < NPAGES; i++)
		R.page_unit[i] = NONE;
	for (uint32_t i = 0; i < MAX_UNITS; i++) {
		R.free_units[i] = MAX_UNITS - 1 - i;
		R.free_groups[i] = MAX_UNITS - i;
	}
	R.nfree = R.nfree_groups = MAX_UNITS;
	R.lru_old = R.lru_new = NONE;
}

/*
 * The end: every unit dropped, the counters back at zero, the pool empty once
 * compacted; then as many one-slot units as the backing file has slots (up to 32) must
 * all go to the file, or a slot leaked.
 */
NO_COVERAGE static void drain(void)
{
	zf_store_stats S;
	uint32_t n;

	R.op_name = "drop everything";
	for (unsigned w = 0; w < SOP_WINDOWS; w++) {
		const uint32_t first = w * SOP_WINDOW_PAGES;
		const long expect = drop_range(first, SOP_WINDOW_PAGES);
		const long ret =
			zf_store_invalidate(R.s, windows[w].owner, windows[w].base,
					    w == SOP_WINDOWS - 1 ? UINT64_MAX : SOP_WINDOW_PAGES);

		CHECK(ret == expect, "zf_store_invalidate of window %u: %ld, expected %ld", w, ret,
		      expect);
	}
	settle("every unit dropped");
	op_compact();
	S = stats_now();
	CHECK(S.stored_pages == 0 && S.compr_data_size == 0 && S.same_filled_pages == 0 &&
		      S.stored_incompressible_pages == 0 && S.written_back_pages == 0 &&
		      S.orig_data_size == 0 && S.mem_used_total == 0 && S.warm_pages == 0,
	      "an empty store: %llu pages, %llu bytes, %llu in the file, a pool of %llu bytes",
	      ULL(S.stored_pages), ULL(S.compr_data_size), ULL(S.written_back_pages),
	      ULL(S.mem_used_total));
	R.last = S;

	if (!R.o.backing_path)
		return;
	R.op_name = "slot leak check";
	R.budget = 0;
	CHECK(store_inject_backing_error(R.s, BACKING_WRITE, 0, 0) == 0, "disarming writes");
	n = (uint32_t)(R.o.backing_bytes / PAGE < 32 ? R.o.backing_bytes / PAGE : 32);
	if (R.limit && n > R.o.max_pool_bytes / PAGE / 4)
		n = (uint32_t)(R.o.max_pool_bytes / PAGE / 4);
	for (uint32_t i = 0; i < n; i++) {
		const unsigned kind = R.o.reject_incompressible ? SOP_SPARSE : SOP_RANDOM;
		uint64_t desc = (uint64_t)kind << 61 | i;

		gen_page(scratch, desc);
		if (classify(scratch, &desc, 1) !=
		    (R.o.reject_incompressible ? CERT_COMP : CERT_INCOMP))
			return; /* cannot make units that surely go in */
		do_put(i, 0, kind, i, 0);
		CHECK(R.page_unit[i] != NONE, "a one-page put of the leak check was refused");
	}
	settle("the leak check's puts");
	snapshot();
	{
		const long ret = zf_store_writeback(R.s, UINT64_MAX);

		S = stats_now();
		CHECK(ret == (long)n && S.bd_write_errors == R.E.bd_write_errors,
		      "zf_store_writeback of %u one-slot units to an empty file of %llu bytes: "
		      "%ld, "
		      "%llu failed (a slot leaked?)",
		      n, ULL(R.o.backing_bytes), ret, ULL(S.bd_write_errors - R.E.bd_write_errors));
		learn_writeback(&S, 1);
	}
	settle("the leak check's writeback");
	op_verify();
	settle("the leak check's gets");
}

int store_ops_run(const uint8_t *data, size_t size)
{
	uint8_t h[SOP_HEADER] = { 0 };

	memset(&R, 0, sizeof(R));
	R.data = data;
	R.size = size;
	counts.runs++;
	if (!scratch) {
		scratch = malloc(ZF_UNIT_MAX);
		CHECK(scratch, "out of memory for the scratch buffer");
	}
	R.trace = getenv("ZF_STORE_TRACE") != NULL;
	memcpy(h, data, size < SOP_HEADER ? size : SOP_HEADER);
	setup(h);
	settle("a new store");

	for (size_t off = SOP_HEADER; off < size && R.op_no < SOP_MAX_OPS; off += SOP_RECORD) {
		const size_t n = size - off < SOP_RECORD ? size - off : SOP_RECORD;

		memset(R.rec, 0, sizeof(R.rec));
		memcpy(R.rec, data + off, n);
		R.offset = off;
		run_op(R.rec);
		R.op_no++;
	}

	R.final = 1;
	R.op_name = "finish the puts in flight";
	while (R.npend) {
		finish(0);
		settle("a put in flight finished");
	}
	R.op_name = "final verify";
	op_verify();
	settle("the final verify");
	if (!R.keep)
		drain();
	zf_store_destroy(R.s);
	if (R.named_backing)
		CHECK(access(R.backing_path, F_OK) != 0,
		      "the named backing file %s is still there after zf_store_destroy",
		      R.backing_path);
	R.s = NULL;
	R.data = NULL;
	return 0;
}
