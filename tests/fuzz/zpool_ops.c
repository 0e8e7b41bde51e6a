/*
 * zpool_ops.c - the zf_pool op-stream interpreter and its shadow model (zpool_ops.h has
 * the input format and the ops).
 *
 * The model is what the public header promises, nothing of the implementation:
 *
 *  - each live object: its handle, its size, and a copy of the bytes written to it (only
 *    the longest prefix written so far is defined: a fresh object's bytes are not);
 *  - the number of live objects and the sum of their sizes, which zf_pool_get_stats()
 *    must report exactly ("stats are exact"), after every single alloc and free;
 *  - per class, the live objects it must hold: an object goes to the smallest class whose
 *    max_object takes it, and stays there until an explicit compaction, which may spill
 *    it into a larger class that takes it (not a huge one: those have no header). After
 *    each zf_pool_compact() the model learns each object's class from the pool's
 *    internal zpool_handle_class() and checks the move;
 *  - the class table of the first run, which must not change ("the same for every pool").
 *
 * After every op the interpreter compares the pool's counters with the model and checks
 * what the header says of any pool: mem_used_total is pages_used pages, mem_used_max is
 * at least that and never falls, the compaction counters never fall, the class lines add
 * up to the totals, objs_allocated is whole zspages of slots and pages_used at most their
 * pages, a class with no objects uses no pages (pages go back when objects are freed),
 * the objects fit in the pages used, and zf_pool_compact()'s result is exactly what
 * leaves pages_used and joins pages_compacted. It does not assume that pages_used counts
 * whole zspages (a pool may give back the unused pages of a zspage it keeps), and it
 * only counts how freeable compares with what compaction does (zpool_ops_counts).
 *
 * Every op that touches an object compares all of its defined bytes. Every 16 ops, all
 * objects are read back (size and the ends of their data); after anything that
 * compacted (an explicit zf_pool_compact() or one that a free started, seen in the
 * compactions counter), every byte of every object is compared, since that is when
 * objects move.
 *
 * Pinned reads check the promise compaction makes: the bytes behind a read_begin()
 * pointer stay there, unchanged, through zf_pool_compact() and through allocations and
 * frees of other objects, until read_end().
 *
 * Cost: the checks make an op cost about one pass over the class table (two for an
 * alloc or a free); the full compare after a compaction is a memcmp() of the live bytes
 * (at most ZOPS_MAX_LIVE_BYTES). That keeps a 4 KiB fuzz input in milliseconds.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zpool_ops.h"
#include "op_report.h"
#include "../../src/zpool/zpool.h"

/*
 * The checks are the oracle, not something for libFuzzer to explore: without this their
 * comparisons (a pass over the class table per op) took most of the fuzzer's time in
 * __sanitizer_cov_trace_*cmp*. The pool's own code stays instrumented.
 */
#if defined(__clang__) && __clang_major__ >= 13
#define NO_COVERAGE __attribute__((no_sanitize("coverage")))
#else
#define NO_COVERAGE
#endif

#define SCRATCH_BYTES ((size_t)ZF_UNIT_MAX + 4096)
#define FREED_RING 32u
#define MAX_PINS 4u
#define LIGHT_SWEEP_EVERY 16u
#define ENDS_BYTES 16u
#define FULL_CLASS_PASS_EVERY 16u
#define NTH_LAST (~0u) /* the op's only alloc or free: check_state() checks it */

struct obj {
	uint64_t handle;
	uint8_t *bytes; /* the shadow copy: size bytes, [0, valid) defined */
	const uint8_t *ptr; /* where the last read found it */
	const uint8_t *before; /* where it was before a compaction, to count moves */
	uint32_t size;
	uint32_t valid;
	uint32_t class_idx;
};

struct class_geom {
	uint32_t class_size, max_object, pages_per_zspage, objs_per_zspage, huge;
};

static const char *const op_names[ZOP_NR_CODES] = {
	[ZOP_ALLOC] = "alloc",	   [ZOP_BURST] = "burst",
	[ZOP_FREE] = "free",	   [ZOP_FREE_STRIDE] = "free-stride",
	[ZOP_WRITE] = "write",	   [ZOP_READ] = "read",
	[ZOP_COMPACT] = "compact", [ZOP_PIN_COMPACT] = "pin-compact",
	[ZOP_BAD] = "bad",	   [ZOP_VERIFY] = "verify",
	[ZOP_REALLOC] = "realloc",
};

/* The class table, from the first run (every pool has the same). */
static unsigned nclasses;
static struct class_geom *geom;
static uint32_t *by_max; /* class indices sorted by max_object */

static uint8_t *scratch;
static struct zpool_ops_counts counts;
static const char *context;

/* One run's state. */
static struct {
	zf_pool *pool;
	struct obj *objs;
	unsigned nobjs;
	size_t live_bytes;
	uint64_t *class_live; /* live objects per class, by the model */
	/*
	 * The classes an op may have changed: every class the model has objects in, or had
	 * since its last check. check_state() reads these after each op and the whole table
	 * every FULL_CLASS_PASS_EVERY ops; the sums against the totals catch any other class
	 * that is not empty.
	 */
	uint32_t *active;
	uint8_t *is_active;
	unsigned nactive;
	zf_pool_stats last; /* the previous stats, for the counters that never fall */
	uint64_t freed[FREED_RING];
	unsigned freed_pos;
	unsigned since_sweep;
	int swept; /* a full sweep ended the current op: check_state() need not */
	/* Where we are, for the failure message. */
	const uint8_t *data;
	size_t size, op_no, offset;
	const char *op_name;
	uint8_t rec[ZOP_RECORD];
} R;

__attribute__((format(printf, 1, 2), noreturn)) static void fail(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	if (context)
		fprintf(stderr, "zpool_ops: %s\n", context);
	fprintf(stderr,
		"zpool_ops: op %zu (%s), record at byte %zu "
		"[%02x %02x %02x %02x %02x %02x %02x %02x] of %zu, %u live objects, %zu bytes: ",
		R.op_no, R.op_name ? R.op_name : "setup", R.offset, R.rec[0], R.rec[1], R.rec[2],
		R.rec[3], R.rec[4], R.rec[5], R.rec[6], R.rec[7], R.size, R.nobjs, R.live_bytes);
	va_start(ap, fmt);
	op_report_end("zpool_ops", "ZF_ZPOOL_DUMP", R.data, R.size, fmt, ap);
}

void zpool_ops_set_context(const char *ctx)
{
	context = ctx;
}

const struct zpool_ops_counts *zpool_ops_counts(void)
{
	return &counts;
}

static uint64_t mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The pattern seed of the current record's part-th fill. */
static uint64_t pattern_seed(unsigned part)
{
	uint64_t h = mix64(R.op_no << 8 | part);

	for (unsigned i = 0; i < ZOP_RECORD; i++)
		h = mix64(h ^ R.rec[i]);
	return h;
}

static void put64(uint8_t *p, uint64_t v, size_t n)
{
	memcpy(p, &v, n);
}

/*
 * Fills len bytes with pattern kind (0..7): cookie words (mimalloc's (items - i) ^ cookie),
 * one repeated 64-bit value (zram's same-filled), random, zeros, a byte ramp, sparse bytes
 * in zeros, half random and half zeros, random.
 */
NO_COVERAGE static void fill_pattern(uint8_t *dst, size_t len, unsigned kind, uint64_t seed)
{
	const size_t words = len / 8, tail = len % 8;
	uint64_t s = seed | 1;

	switch (kind & 7) {
	case 0:
		for (size_t i = 0; i < words; i++)
			put64(dst + 8 * i, (uint64_t)(words - i) ^ seed, 8);
		put64(dst + 8 * words, ~seed, tail);
		break;
	case 1:
		for (size_t i = 0; i < words; i++)
			put64(dst + 8 * i, seed, 8);
		put64(dst + 8 * words, seed, tail);
		break;
	case 3:
		memset(dst, 0, len);
		break;
	case 4:
		for (size_t i = 0; i < len; i++)
			dst[i] = (uint8_t)(i + seed);
		break;
	case 5:
		memset(dst, 0, len);
		for (size_t i = seed % 512; i < len; i += 512)
			dst[i] = (uint8_t)((seed >> 8) ^ (i >> 9)) | 1;
		break;
	case 6:
		fill_pattern(dst, len / 2, 2, seed);
		memset(dst + len / 2, 0, len - len / 2);
		break;
	default: /* 2, 7 */
		for (size_t i = 0; i < words; i++) {
			s ^= s << 13;
			s ^= s >> 7;
			s ^= s << 17;
			put64(dst + 8 * i, s, 8);
		}
		put64(dst + 8 * words, s * 31, tail);
		break;
	}
}

/* The class the model expects an object of size bytes in: the smallest that takes it. */
static uint32_t class_of(size_t size)
{
	unsigned lo = 0, hi = nclasses - 1;

	while (lo < hi) {
		const unsigned mid = (lo + hi) / 2;

		if (geom[by_max[mid]].max_object >= size)
			hi = mid;
		else
			lo = mid + 1;
	}
	CHECK(geom[by_max[lo]].max_object >= size, "no class takes %zu bytes", size);
	return by_max[lo];
}

static size_t decode_size(unsigned sel, uint32_t a)
{
	size_t size;

	switch (sel % 16) {
	case 7:
	case 8:
	case 9:
		return 1 + a % 4096;
	case 10:
	case 11:
		return 1 + a % 65536;
	case ZOP_SIZE_CLASS_EDGE:
		size = geom[a % nclasses].max_object;
		switch ((a / nclasses) % 3) {
		case 0:
			return size > 1 ? size - 1 : size;
		case 1:
			return size;
		default:
			return size < ZF_UNIT_MAX ? size + 1 : size;
		}
	case ZOP_SIZE_512K:
		return 1 + a % (512 * 1024);
	case ZOP_SIZE_PAGES:
		return 4096 * (1 + (size_t)(a % 64)) - 1 + (a >> 8) % 3;
	case ZOP_SIZE_UNIT_MAX:
		return (a >> 16) < 32 ? ZF_UNIT_MAX - a % 8 : 1 + a % 65536;
	default: /* 0..6 */
		return 1 + a % 256;
	}
}

NO_COVERAGE static int is_live(uint64_t handle)
{
	for (unsigned i = 0; i < R.nobjs; i++) {
		if (R.objs[i].handle == handle)
			return 1;
	}
	return 0;
}

static struct obj *obj_of(uint64_t handle)
{
	for (unsigned i = 0; i < R.nobjs; i++) {
		if (R.objs[i].handle == handle)
			return &R.objs[i];
	}
	fail("handle %#llx is not in the model", (unsigned long long)handle);
}

/* Compares the n bytes at p with the shadow's, from offset off; names the first difference. */
NO_COVERAGE static void compare_bytes(const struct obj *o, const uint8_t *p, size_t off, size_t n,
				      const char *what)
{
	if (memcmp(p + off, o->bytes + off, n) == 0)
		return;
	for (size_t i = off; i < off + n; i++) {
		CHECK(p[i] == o->bytes[i],
		      "%s: handle %#llx (%u bytes, %u written): byte %zu is %#04x, expected %#04x",
		      what, (unsigned long long)o->handle, o->size, o->valid, i, p[i], o->bytes[i]);
	}
}

/* Reads o back: its size, and all its defined bytes (full) or their two ends. */
NO_COVERAGE static void verify_obj(struct obj *o, int full, const char *what)
{
	size_t size = 0;
	const uint8_t *p = zf_pool_read_begin(R.pool, o->handle, &size);

	CHECK(p, "%s: read_begin(%#llx) of a live object returned NULL", what,
	      (unsigned long long)o->handle);
	o->ptr = p;
	if (size != o->size) {
		zf_pool_read_end(R.pool, o->handle);
		fail("%s: read_begin(%#llx) gave size %zu, allocated %u", what,
		     (unsigned long long)o->handle, size, o->size);
	}
	if (full || o->valid <= 2 * ENDS_BYTES) {
		compare_bytes(o, p, 0, o->valid, what);
		counts.bytes_verified += o->valid;
	} else {
		compare_bytes(o, p, 0, ENDS_BYTES, what);
		compare_bytes(o, p, o->valid - ENDS_BYTES, ENDS_BYTES, what);
	}
	zf_pool_read_end(R.pool, o->handle);
	size = zf_pool_object_size(R.pool, o->handle);
	CHECK(size == o->size, "%s: object_size(%#llx) = %zu, allocated %u", what,
	      (unsigned long long)o->handle, size, o->size);
}

static int cmp_u64(const void *a, const void *b)
{
	const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Reads every object back; full: every byte, and the handles are distinct and non-zero. */
NO_COVERAGE static void sweep(int full)
{
	for (unsigned i = 0; i < R.nobjs; i++)
		verify_obj(&R.objs[i], full, full ? "full verify" : "sweep");
	R.since_sweep = 0;
	if (!full)
		return;
	R.swept = 1;
	counts.full_verifies++;
	if (R.nobjs == 0)
		return;
	{
		uint64_t *h = malloc(R.nobjs * sizeof(*h));

		CHECK(h, "out of memory in the model");
		for (unsigned i = 0; i < R.nobjs; i++)
			h[i] = R.objs[i].handle;
		qsort(h, R.nobjs, sizeof(*h), cmp_u64);
		CHECK(h[0] != 0, "a live object has handle 0");
		for (unsigned i = 1; i < R.nobjs; i++)
			CHECK(h[i] != h[i - 1], "two live objects have handle %#llx",
			      (unsigned long long)h[i]);
		free(h);
	}
}

/* The totals: exact against the model, and what holds of any pool. Returns the stats. */
NO_COVERAGE static zf_pool_stats check_totals(const char *what)
{
	zf_pool_stats s;

	zf_pool_get_stats(R.pool, &s, sizeof(s));
	CHECK(s.objects == R.nobjs, "%s: stats.objects %llu, %u live", what,
	      (unsigned long long)s.objects, R.nobjs);
	CHECK(s.compr_data_size == R.live_bytes, "%s: stats.compr_data_size %llu, live %zu", what,
	      (unsigned long long)s.compr_data_size, R.live_bytes);
	CHECK(s.mem_used_total == s.pages_used * ZF_PAGE_SIZE,
	      "%s: mem_used_total %llu, pages_used %llu", what,
	      (unsigned long long)s.mem_used_total, (unsigned long long)s.pages_used);
	CHECK(s.mem_used_max >= s.mem_used_total, "%s: mem_used_max %llu < mem_used_total %llu",
	      what, (unsigned long long)s.mem_used_max, (unsigned long long)s.mem_used_total);
	CHECK(s.mem_used_max >= R.last.mem_used_max, "%s: mem_used_max fell from %llu to %llu",
	      what, (unsigned long long)R.last.mem_used_max, (unsigned long long)s.mem_used_max);
	CHECK(s.pages_compacted >= R.last.pages_compacted && s.compactions >= R.last.compactions,
	      "%s: pages_compacted %llu -> %llu, compactions %llu -> %llu", what,
	      (unsigned long long)R.last.pages_compacted, (unsigned long long)s.pages_compacted,
	      (unsigned long long)R.last.compactions, (unsigned long long)s.compactions);
	CHECK(s.compr_data_size <= s.mem_used_total,
	      "%s: %llu bytes of objects in %llu bytes of pages", what,
	      (unsigned long long)s.compr_data_size, (unsigned long long)s.mem_used_total);
	return s;
}

/*
 * Everything after an op: the totals, the class lines against the model and the totals
 * (full: all of them, else the active ones), then objects read back (all bytes when
 * something compacted since the last check).
 */
NO_COVERAGE static void check_state(int full)
{
	const zf_pool_stats s = check_totals("after the op");
	unsigned n = full ? nclasses : R.nactive;
	uint64_t used = 0, pages = 0;

	for (unsigned k = 0; k < n; k++) {
		const unsigned i = full ? k : R.active[k];
		const struct class_geom *g = &geom[i];
		zf_pool_class_stats c;
		uint64_t zspages;

		CHECK(zf_pool_class_stats_get(R.pool, i, &c, sizeof(c)) == 0,
		      "class_stats_get(%u) failed", i);
		CHECK(c.class_size == g->class_size && c.max_object == g->max_object &&
			      c.pages_per_zspage == g->pages_per_zspage &&
			      c.objs_per_zspage == g->objs_per_zspage && c.huge == g->huge,
		      "class %u changed its geometry", i);
		CHECK(c.objs_used == R.class_live[i],
		      "class %u (max_object %u): objs_used %llu, the model has %llu", i,
		      g->max_object, (unsigned long long)c.objs_used,
		      (unsigned long long)R.class_live[i]);
		CHECK(c.objs_allocated % g->objs_per_zspage == 0,
		      "class %u: objs_allocated %llu is not whole zspages of %u slots", i,
		      (unsigned long long)c.objs_allocated, g->objs_per_zspage);
		zspages = c.objs_allocated / g->objs_per_zspage;
		CHECK(c.pages_used <= zspages * g->pages_per_zspage,
		      "class %u: pages_used %llu, more than its %llu zspages of %u pages", i,
		      (unsigned long long)c.pages_used, (unsigned long long)zspages,
		      g->pages_per_zspage);
		CHECK(c.objs_used <= c.objs_allocated, "class %u: objs_used %llu > allocated %llu",
		      i, (unsigned long long)c.objs_used, (unsigned long long)c.objs_allocated);
		CHECK(c.objs_used || c.pages_used == 0,
		      "class %u: no objects, %llu pages still used", i,
		      (unsigned long long)c.pages_used);
		CHECK(!c.objs_used || c.pages_used, "class %u: %llu objects in no pages", i,
		      (unsigned long long)c.objs_used);
		if (c.freeable > c.pages_used)
			counts.freeable_above_used++;
		used += c.objs_used;
		pages += c.pages_used;
		if (!full && !R.class_live[i] && !c.objs_used && !c.pages_used) {
			/* Empty: the next alloc or free in it makes it active again. */
			R.is_active[i] = 0;
			R.active[k--] = R.active[--R.nactive];
			n--;
		}
	}
	CHECK(used == s.objects && pages + s.warm_pages == s.pages_used,
	      "%s add up to %llu objects in %llu pages (+ %llu warm), stats say %llu in %llu",
	      full ? "the class lines" : "the lines of the classes in use",
	      (unsigned long long)used, (unsigned long long)pages, (unsigned long long)s.warm_pages,
	      (unsigned long long)s.objects, (unsigned long long)s.pages_used);
	CHECK(s.warm_pages <= ZF_UNIT_MAX / ZF_PAGE_SIZE, "%llu warm pages, over the default limit",
	      (unsigned long long)s.warm_pages);
	if (s.compactions != R.last.compactions && !R.swept)
		sweep(1);
	else if (++R.since_sweep >= LIGHT_SWEEP_EVERY)
		sweep(0);
	R.last = s;
	R.swept = 0;
}

/* Stats that no refused call may change. */
NO_COVERAGE static void check_unchanged(const zf_pool_stats *before, const char *what)
{
	zf_pool_stats s;

	zf_pool_get_stats(R.pool, &s, sizeof(s));
	CHECK(s.objects == before->objects && s.compr_data_size == before->compr_data_size &&
		      s.pages_used == before->pages_used &&
		      s.mem_used_max == before->mem_used_max &&
		      s.pages_compacted == before->pages_compacted &&
		      s.compactions == before->compactions,
	      "%s changed the stats: objects %llu -> %llu, bytes %llu -> %llu, pages %llu -> %llu",
	      what, (unsigned long long)before->objects, (unsigned long long)s.objects,
	      (unsigned long long)before->compr_data_size, (unsigned long long)s.compr_data_size,
	      (unsigned long long)before->pages_used, (unsigned long long)s.pages_used);
}

static void write_obj(struct obj *o, size_t len, unsigned kind, uint64_t seed)
{
	int ret;

	fill_pattern(scratch, len, kind, seed);
	ret = zf_pool_write(R.pool, o->handle, scratch, len);
	CHECK(ret == 0, "write(%#llx, %zu bytes) of a %u-byte object: %d",
	      (unsigned long long)o->handle, len, o->size, ret);
	memcpy(o->bytes, scratch, len);
	if (len > o->valid)
		o->valid = (uint32_t)len;
	counts.writes++;
}

static void mark_active(uint32_t class_idx)
{
	if (!R.is_active[class_idx]) {
		R.is_active[class_idx] = 1;
		R.active[R.nactive++] = class_idx;
	}
}

/*
 * The totals after one alloc or free: the model moved by exactly one object and its size,
 * and the totals matched the model before, so this checks the step, not just the sum.
 * In a run of them (a burst, a strided free) only the nth < 4 and every 16th are checked,
 * the rest by check_state() after the op, which also checks an op's only call (NTH_LAST):
 * zf_pool_get_stats() is a pass over the class table, and one per call made bursts cost
 * most of the fuzzer's time.
 */
NO_COVERAGE static void check_step(const char *what, size_t size, unsigned nth)
{
	zf_pool_stats s;

	if (nth >= 4 && nth % 16 != 0)
		return;
	zf_pool_get_stats(R.pool, &s, sizeof(s));
	CHECK(s.objects == R.nobjs && s.compr_data_size == R.live_bytes,
	      "%s of %zu bytes: stats say %llu objects, %llu bytes; the model %u, %zu", what, size,
	      (unsigned long long)s.objects, (unsigned long long)s.compr_data_size, R.nobjs,
	      R.live_bytes);
}

/*
 * Allocates and (unless kind is -1) fills an object; NULL when over the bounds or -ENOMEM.
 * nth: the call's place in its op (check_step()), also what makes each object's pattern.
 */
static struct obj *do_alloc(size_t size, int kind, unsigned nth)
{
	uint64_t handle = 0;
	struct obj *o;
	uint8_t *bytes;
	int ret;

	if (R.nobjs >= ZOPS_MAX_OBJECTS || R.live_bytes + size > ZOPS_MAX_LIVE_BYTES) {
		counts.skipped_allocs++;
		return NULL;
	}
	bytes = malloc(size);
	CHECK(bytes, "out of memory in the model (%zu bytes)", size);
	ret = zf_pool_alloc(R.pool, size, &handle);
	if (ret == -ENOMEM) {
		/* "the pool is left as it was" */
		check_step("alloc that failed with -ENOMEM", size, 0);
		counts.enomem++;
		free(bytes);
		return NULL;
	}
	CHECK(ret == 0, "alloc(%zu) returned %d", size, ret);
	CHECK(handle != 0, "alloc(%zu) gave handle 0", size);
	CHECK(!is_live(handle), "alloc(%zu) gave handle %#llx, which is live", size,
	      (unsigned long long)handle);
	o = &R.objs[R.nobjs++];
	*o = (struct obj){ .handle = handle, .bytes = bytes, .size = (uint32_t)size };
	o->class_idx = class_of(size);
	R.class_live[o->class_idx]++;
	mark_active(o->class_idx);
	R.live_bytes += size;
	counts.allocs++;
	counts.huge_allocs += size > 65536;
	counts.unit_max_allocs += size >= ZF_UNIT_MAX - 8;
	if (R.nobjs > counts.max_live_objects)
		counts.max_live_objects = R.nobjs;
	if (R.live_bytes > counts.max_live_bytes)
		counts.max_live_bytes = R.live_bytes;
	check_step("alloc", size, nth);
	if (kind >= 0)
		write_obj(o, size, (unsigned)kind, pattern_seed(nth) ^ handle);
	verify_obj(o, 1, "after alloc");
	return o;
}

static void remember_freed(uint64_t handle)
{
	R.freed[R.freed_pos++ % FREED_RING] = handle;
}

/*
 * Frees objs[idx] (the last object takes its place); twice: free the handle again; nth:
 * the place in a run of frees (check_step()).
 */
static void do_free(unsigned idx, int twice, unsigned nth)
{
	struct obj o = R.objs[idx];

	zf_pool_free(R.pool, o.handle);
	R.objs[idx] = R.objs[--R.nobjs];
	R.class_live[o.class_idx]--;
	mark_active(o.class_idx);
	R.live_bytes -= o.size;
	free(o.bytes);
	remember_freed(o.handle);
	counts.frees++;
	check_step("free", o.size, nth);
	CHECK(zf_pool_object_size(R.pool, o.handle) == 0, "object_size(%#llx) after its free",
	      (unsigned long long)o.handle);
	CHECK(zf_pool_read_begin(R.pool, o.handle, NULL) == NULL,
	      "read_begin(%#llx) after its free", (unsigned long long)o.handle);
	if (twice) {
		zf_pool_stats after;

		zf_pool_get_stats(R.pool, &after, sizeof(after));
		zf_pool_free(R.pool, o.handle);
		check_unchanged(&after, "a second free of a handle");
	}
}

/* Every call on a handle that is not allocated must be refused and change nothing. */
static void check_bad_handle(uint64_t handle)
{
	size_t size = 12345;
	const void *p;
	int ret;

	if (is_live(handle))
		return;
	counts.bad_calls++;
	CHECK(zf_pool_object_size(R.pool, handle) == 0, "object_size(%#llx), not allocated",
	      (unsigned long long)handle);
	p = zf_pool_read_begin(R.pool, handle, &size);
	CHECK(p == NULL, "read_begin(%#llx), not allocated, returned %p",
	      (unsigned long long)handle, p);
	CHECK(zf_pool_read_begin(R.pool, handle, NULL) == NULL,
	      "read_begin(%#llx, NULL), not allocated", (unsigned long long)handle);
	ret = zf_pool_write(R.pool, handle, scratch, 1);
	CHECK(ret == -EINVAL, "write(%#llx, 1 byte), not allocated: %d", (unsigned long long)handle,
	      ret);
	ret = zf_pool_write(R.pool, handle, scratch, 0);
	CHECK(ret == -EINVAL, "write(%#llx, 0 bytes), not allocated: %d",
	      (unsigned long long)handle, ret);
	zf_pool_free(R.pool, handle); /* op_bad() checks that nothing changed */
}

static void op_bad(unsigned kind, uint32_t a, uint32_t b)
{
	const int all = kind == ZOP_BAD_ALL;
	zf_pool_stats before;
	zf_pool_class_stats cs;
	uint64_t handle;

	zf_pool_get_stats(R.pool, &before, sizeof(before));
	if (all || kind == ZOP_BAD_SIZE) {
		static const size_t sizes[] = { 0, (size_t)ZF_UNIT_MAX + 1, (size_t)ZF_UNIT_MAX * 2,
						SIZE_MAX };

		for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			const int ret = zf_pool_alloc(R.pool, sizes[i], &handle);

			CHECK(ret == -EINVAL, "alloc(%zu) returned %d", sizes[i], ret);
			counts.bad_calls++;
		}
		check_step("alloc of a bad size", 0, 0);
	}
	if (all || kind == ZOP_BAD_FREED) {
		for (unsigned i = 0; i < FREED_RING; i++) {
			if (R.freed[i])
				check_bad_handle(R.freed[i]);
		}
	}
	if (all || kind == ZOP_BAD_ZERO)
		check_bad_handle(0);
	if (all || kind == ZOP_BAD_MADE_UP) {
		const uint64_t made_up[] = { a,
					     b,
					     (uint64_t)a << 24 | b,
					     ~0ull,
					     1ull << 63 | a,
					     1ull << 32 | b,
					     (uint64_t)b << 40 | a };

		for (unsigned i = 0; i < sizeof(made_up) / sizeof(made_up[0]); i++)
			check_bad_handle(made_up[i]);
	}
	if ((all || kind == ZOP_BAD_NEIGHBOUR) && R.nobjs) {
		const uint64_t h = R.objs[b % R.nobjs].handle;

		for (uint64_t d = 1; d <= 4; d++) {
			check_bad_handle(h + d);
			check_bad_handle(h - d);
		}
	}
	if (all || kind == ZOP_BAD_CLASS) {
		const unsigned bad[] = { nclasses, nclasses + a, ~0u };

		CHECK(zf_pool_class_count() == nclasses, "class_count changed");
		for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			const int ret = zf_pool_class_stats_get(R.pool, bad[i], &cs, sizeof(cs));

			CHECK(ret == -EINVAL, "class_stats_get(%u) of %u classes returned %d",
			      bad[i], nclasses, ret);
			counts.bad_calls++;
		}
	}
	if ((all || kind == ZOP_BAD_TOO_LONG) && R.nobjs) {
		struct obj *o = &R.objs[b % R.nobjs];
		const size_t len = o->size + 1 + a % 64;
		int ret;

		fill_pattern(scratch, len, 2, pattern_seed(1));
		ret = zf_pool_write(R.pool, o->handle, scratch, len);
		CHECK(ret == -EINVAL, "write(%#llx, %zu bytes) of a %u-byte object returned %d",
		      (unsigned long long)o->handle, len, o->size, ret);
		counts.bad_calls++;
		verify_obj(o, 1, "after a refused write");
	}
	check_unchanged(&before, "calls that must be refused");
}

static void op_write(unsigned mode, unsigned kind, uint32_t a, uint32_t b)
{
	struct obj *o;
	size_t len;
	int ret;

	if (!R.nobjs)
		return;
	o = &R.objs[b % R.nobjs];
	switch (mode % 8) {
	case ZOP_WRITE_PREFIX:
		len = a % ((size_t)o->size + 1);
		break;
	case ZOP_WRITE_EMPTY:
		len = 0;
		break;
	case ZOP_WRITE_FEW:
		len = 1 + a % 16;
		len = len < o->size ? len : o->size;
		break;
	case ZOP_WRITE_TOO_LONG:
		len = o->size + 1 + a % 64;
		fill_pattern(scratch, len, kind, pattern_seed(0));
		ret = zf_pool_write(R.pool, o->handle, scratch, len);
		CHECK(ret == -EINVAL, "write(%#llx, %zu bytes) of a %u-byte object returned %d",
		      (unsigned long long)o->handle, len, o->size, ret);
		counts.bad_calls++;
		verify_obj(o, 1, "after a refused write");
		return;
	default:
		len = o->size;
		break;
	}
	write_obj(o, len, kind, pattern_seed(0) ^ o->handle);
	verify_obj(o, 1, "after write");
}

static void op_read(unsigned param, uint32_t b)
{
	struct obj *o;
	const uint8_t *p;

	if (!R.nobjs)
		return;
	o = &R.objs[b % R.nobjs];
	counts.reads++;
	if (param & 1) {
		p = zf_pool_read_begin(R.pool, o->handle, NULL);
		CHECK(p, "read_begin(%#llx, NULL) of a live object returned NULL",
		      (unsigned long long)o->handle);
		compare_bytes(o, p, 0, o->valid, "read with size NULL");
		zf_pool_read_end(R.pool, o->handle);
	} else {
		verify_obj(o, 1, "read");
	}
}

/* The sum of the active classes' freeable pages (an empty class has none). */
NO_COVERAGE static uint64_t freeable_pages(void)
{
	uint64_t sum = 0;

	for (unsigned k = 0; k < R.nactive; k++) {
		zf_pool_class_stats c;

		CHECK(zf_pool_class_stats_get(R.pool, R.active[k], &c, sizeof(c)) == 0,
		      "class_stats_get(%u) failed", R.active[k]);
		sum += c.freeable;
	}
	return sum;
}

/* zf_pool_compact(); the pages it returns must leave pages_used and join pages_compacted. */
static size_t compact_checked(void)
{
	zf_pool_stats before, after;
	const uint64_t freeable = freeable_pages();
	size_t n;

	zf_pool_get_stats(R.pool, &before, sizeof(before));
	n = zf_pool_compact(R.pool);
	zf_pool_get_stats(R.pool, &after, sizeof(after));
	CHECK(after.pages_used == before.pages_used - n &&
		      after.pages_compacted == before.pages_compacted + n,
	      "compact returned %zu pages: pages_used %llu -> %llu, pages_compacted %llu -> %llu",
	      n, (unsigned long long)before.pages_used, (unsigned long long)after.pages_used,
	      (unsigned long long)before.pages_compacted,
	      (unsigned long long)after.pages_compacted);
	if (n > freeable)
		counts.compact_above_freeable++;
	CHECK(after.objects == before.objects && after.compr_data_size == before.compr_data_size,
	      "compact changed the objects");
	for (unsigned i = 0; i < R.nobjs; i++) {
		struct obj *o = &R.objs[i];
		const unsigned now = zpool_handle_class(R.pool, o->handle);

		if (now == o->class_idx)
			continue;
		CHECK(now < nclasses && geom[now].max_object >= o->size && !geom[now].huge &&
			      geom[now].max_object > geom[class_of(o->size)].max_object,
		      "compact moved a %u-byte object from class %u to class %u", o->size,
		      o->class_idx, now);
		R.class_live[o->class_idx]--;
		mark_active(o->class_idx);
		R.class_live[now]++;
		mark_active(now);
		o->class_idx = now;
		counts.objects_spilled++;
	}
	counts.compactions++;
	counts.pages_compacted += n;
	return n;
}

/*
 * After a compaction with nothing pinned, no class may have freeable pages (the kernel's
 * __zs_compact loops until zs_can_compact() is 0). On by default;
 * ZF_ZPOOL_STRICT_COMPACT=0 only counts such cases.
 */
static int strict_compact(void)
{
	static int strict = -1;

	if (strict < 0) {
		const char *v = getenv("ZF_ZPOOL_STRICT_COMPACT");

		strict = !(v && *v == '0');
	}
	return strict;
}

static void op_compact(void)
{
	uint64_t left;

	for (unsigned i = 0; i < R.nobjs; i++) {
		struct obj *o = &R.objs[i];

		o->before = zf_pool_read_begin(R.pool, o->handle, NULL);
		CHECK(o->before, "read_begin(%#llx) of a live object returned NULL",
		      (unsigned long long)o->handle);
		zf_pool_read_end(R.pool, o->handle);
	}
	compact_checked();
	sweep(1);
	for (unsigned i = 0; i < R.nobjs; i++)
		counts.objects_moved += R.objs[i].ptr != R.objs[i].before;
	/* Nothing was pinned: a class that could still give pages back was left undone. */
	left = freeable_pages();
	if (left) {
		counts.compact_left_freeable++;
		counts.compact_left_freeable_pages += left;
		CHECK(!strict_compact(),
		      "compact with nothing pinned left %llu freeable pages "
		      "(ZF_ZPOOL_STRICT_COMPACT=0 only counts this)",
		      (unsigned long long)left);
	}
}

static void op_pin_compact(unsigned npins, int churn, unsigned sel, uint32_t a, uint32_t b)
{
	uint64_t pinned[MAX_PINS];
	const uint8_t *ptrs[MAX_PINS];
	unsigned n = 0;

	npins = npins < R.nobjs ? npins : R.nobjs;
	for (unsigned j = 0; n < npins && j < 4 * MAX_PINS; j++) {
		struct obj *o = &R.objs[(b + j * (1 + a % 7)) % R.nobjs];
		size_t size = 0;
		int dup = 0;

		for (unsigned k = 0; k < n; k++)
			dup |= pinned[k] == o->handle;
		if (dup)
			continue;
		ptrs[n] = zf_pool_read_begin(R.pool, o->handle, &size);
		CHECK(ptrs[n] && size == o->size, "read_begin(%#llx) to pin: %p, size %zu of %u",
		      (unsigned long long)o->handle, (const void *)ptrs[n], size, o->size);
		compare_bytes(o, ptrs[n], 0, o->valid, "pinned, before compact");
		pinned[n++] = o->handle;
		counts.pinned_reads++;
	}
	compact_checked();
	if (churn) {
		/* Others come and go (frees may compact too); the pinned ones are not touched. */
		for (unsigned i = 0; i < 1 + sel % 4; i++)
			do_alloc(decode_size(sel >> 2, a + i), (int)(i % 8), i);
		for (unsigned i = 0, tries = 0; i < 1 + (sel >> 4) % 4 && tries < 16; tries++) {
			if (R.nobjs == 0)
				break;
			const unsigned idx = (b + tries * 7) % R.nobjs;
			int is_pinned = 0;

			for (unsigned k = 0; k < n; k++)
				is_pinned |= pinned[k] == R.objs[idx].handle;
			if (!is_pinned) {
				do_free(idx, 0, i);
				i++;
			}
		}
		compact_checked();
	}
	for (unsigned k = 0; k < n; k++) {
		const struct obj *o = obj_of(pinned[k]);

		compare_bytes(o, ptrs[k], 0, o->valid, "pinned, after compact");
		zf_pool_read_end(R.pool, pinned[k]);
	}
	sweep(1);
}

static void op_free_stride(unsigned sel, uint32_t a)
{
	const unsigned stride = 2 + sel % 6, first = a % stride;

	/* Downwards: the last object, moved into a freed place, has been passed already. */
	unsigned nth = 0;

	for (unsigned i = R.nobjs; i-- > 0;) {
		if (i % stride == first)
			do_free(i, 0, nth++);
	}
}

static void run_op(const uint8_t *rec)
{
	const enum zop_code op = zop_of_code(rec[0]);
	const unsigned param = rec[0] >> 4, sel = rec[1];
	const uint32_t a = zop_get24(rec + 2), b = zop_get24(rec + 5);

	R.op_name = op_names[op];
	counts.ops[op]++;
	switch (op) {
	case ZOP_ALLOC:
		do_alloc(decode_size(sel, a), param == 15 ? -1 : (int)(param & 7), NTH_LAST);
		break;
	case ZOP_BURST:
		for (unsigned i = 0; i < 1 + b % 64; i++) {
			if (!do_alloc(decode_size(sel, a), (int)(param & 7), i))
				break;
		}
		break;
	case ZOP_FREE:
		if (R.nobjs)
			do_free(b % R.nobjs, param & 1, NTH_LAST);
		break;
	case ZOP_FREE_STRIDE:
		op_free_stride(sel, a);
		break;
	case ZOP_WRITE:
		op_write(sel, param & 7, a, b);
		break;
	case ZOP_READ:
		op_read(param, b);
		break;
	case ZOP_COMPACT:
		op_compact();
		break;
	case ZOP_PIN_COMPACT:
		op_pin_compact(1 + sel % MAX_PINS, param & 1, sel, a, b);
		break;
	case ZOP_BAD:
		op_bad(param % 8, a, b);
		break;
	case ZOP_VERIFY:
		sweep(1);
		break;
	case ZOP_REALLOC:
		if (R.nobjs) {
			const unsigned idx = b % R.nobjs;
			const size_t size = sel ? decode_size(sel, a) : R.objs[idx].size;

			do_free(idx, 0, 0);
			do_alloc(size, (int)(param & 7), NTH_LAST);
		}
		break;
	}
	check_state(R.op_no % FULL_CLASS_PASS_EVERY == 0);
}

static int cmp_by_max(const void *x, const void *y)
{
	const uint32_t a = geom[*(const uint32_t *)x].max_object;
	const uint32_t b = geom[*(const uint32_t *)y].max_object;

	return a < b ? -1 : a > b;
}

/* Reads the class table once (and checks that a later pool has the same). */
static void setup_classes(void)
{
	const unsigned n = zf_pool_class_count();

	if (geom) {
		CHECK(n == nclasses, "class_count %u, earlier %u", n, nclasses);
		return;
	}
	CHECK(n > 0, "class_count 0");
	geom = calloc(n, sizeof(*geom));
	by_max = calloc(n, sizeof(*by_max));
	CHECK(geom && by_max, "out of memory in the model");
	nclasses = n;
	for (unsigned i = 0; i < n; i++) {
		zf_pool_class_stats c;

		CHECK(zf_pool_class_stats_get(R.pool, i, &c, sizeof(c)) == 0,
		      "class_stats_get(%u) failed", i);
		geom[i] = (struct class_geom){ c.class_size, c.max_object, c.pages_per_zspage,
					       c.objs_per_zspage, c.huge };
		CHECK(c.max_object >= 1 && c.max_object <= c.class_size && c.objs_per_zspage >= 1 &&
			      c.pages_per_zspage >= 1 &&
			      (uint64_t)c.class_size * c.objs_per_zspage <=
				      (uint64_t)c.pages_per_zspage * ZF_PAGE_SIZE &&
			      c.huge == (c.objs_per_zspage == 1),
		      "class %u: size %u, max_object %u, %u pages, %u objects, huge %u", i,
		      c.class_size, c.max_object, c.pages_per_zspage, c.objs_per_zspage, c.huge);
		by_max[i] = i;
	}
	qsort(by_max, n, sizeof(*by_max), cmp_by_max);
	for (unsigned i = 1; i < n; i++)
		CHECK(geom[by_max[i]].max_object > geom[by_max[i - 1]].max_object,
		      "classes %u and %u both take %u bytes at most", by_max[i - 1], by_max[i],
		      geom[by_max[i]].max_object);
	CHECK(geom[by_max[n - 1]].max_object == ZF_UNIT_MAX, "the largest class takes %u bytes",
	      geom[by_max[n - 1]].max_object);
}

int zpool_ops_run(const uint8_t *data, size_t size)
{
	zf_pool_options options;
	zf_pool_stats s;
	int threshold, ret;

	memset(&R, 0, sizeof(R));
	R.data = data;
	R.size = size;
	counts.runs++;
	if (!scratch) {
		scratch = malloc(SCRATCH_BYTES);
		CHECK(scratch, "out of memory for the scratch buffer");
	}
	threshold = zpool_ops_thresholds[size ? data[0] & 7 : 0];
	zf_pool_options_init(&options);
	if (threshold >= 0)
		options.compact_threshold_pct = (unsigned)threshold;
	ret = zf_pool_create(threshold >= 0 ? &options : NULL, &R.pool);
	CHECK(ret == 0 && R.pool, "pool_create: %d", ret);
	setup_classes();
	R.objs = calloc(ZOPS_MAX_OBJECTS, sizeof(*R.objs));
	R.class_live = calloc(nclasses, sizeof(*R.class_live));
	R.active = calloc(nclasses, sizeof(*R.active));
	R.is_active = calloc(nclasses, sizeof(*R.is_active));
	CHECK(R.objs && R.class_live && R.active && R.is_active, "out of memory in the model");
	s = check_totals("a new pool");
	CHECK(s.pages_used == 0 && s.mem_used_max == 0 && s.pages_compacted == 0,
	      "a new pool has %llu pages used, max %llu, %llu compacted",
	      (unsigned long long)s.pages_used, (unsigned long long)s.mem_used_max,
	      (unsigned long long)s.pages_compacted);
	check_state(1);

	for (size_t off = 1; off < size && R.op_no < ZOPS_MAX_OPS; off += ZOP_RECORD) {
		const size_t n = size - off < ZOP_RECORD ? size - off : ZOP_RECORD;

		memset(R.rec, 0, sizeof(R.rec));
		memcpy(R.rec, data + off, n);
		R.offset = off;
		run_op(R.rec);
		R.op_no++;
	}

	/* The end: everything still holds, then each free drops the stats exactly. */
	R.op_name = "final verify";
	sweep(1);
	R.op_name = "final frees";
	while (R.nobjs) {
		/* Alternate ends so that zspages empty in both orders. */
		do_free(R.nobjs % 2 ? R.nobjs - 1 : 0, 0, R.nobjs);
		if (R.nobjs % 64 == 0)
			check_state(0);
	}
	check_state(1);
	s = check_totals("with no objects");
	/* Only the empty zspages kept warm for reuse hold pages; compaction returns them. */
	CHECK(s.pages_used == s.warm_pages, "no objects, %llu pages still used, %llu warm",
	      (unsigned long long)s.pages_used, (unsigned long long)s.warm_pages);
	CHECK(compact_checked() == s.warm_pages, "compact of an empty pool gave back %s",
	      "other than its warm pages");
	s = check_totals("with no objects, compacted");
	CHECK(s.pages_used == 0 && s.warm_pages == 0, "compacted, %llu pages still used",
	      (unsigned long long)s.pages_used);
	CHECK(zf_pool_compact(R.pool) == 0, "compact of an empty pool gave pages back");
	zf_pool_destroy(R.pool);
	free(R.objs);
	free(R.class_live);
	free(R.active);
	free(R.is_active);
	memset(&R, 0, sizeof(R));
	return 0;
}
