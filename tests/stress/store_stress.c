/* Description: zf_store from many threads at once, with 2 compression engines, a small
 * pool limit and writeback to a backing file, so that puts, gets, invalidations,
 * writeback and compaction all meet. Each worker has an owner of its own, whose content
 * it knows exactly (a shadow of every page: version, unit size), and all share one more
 * owner whose content nobody can predict. At the end every counter must be exact.
 *
 *   store_stress [THREADS [ITER [SEED]]]
 *
 * THREADS workers (default 4), ITER operations each per store (default 1500; 300 under a
 * sanitizer), over two stores one after the other: unit mode 64k and split mode. The
 * environment's ZF_THREADS, ZF_ITER and ZF_SEED set them too (argv wins); ZF_ENGINES
 * (default 2) and ZF_POOL_KB (the pool limit, default 1024). The seed is printed first;
 * a worker's operations depend on it, their interleaving does not. Returns 0 pass, 1 fail.
 *
 * Every page a worker puts is made from (owner, index, version) alone: a zero page, a
 * same-filled page, or a page of random bytes, sample-image bytes (data/sample.bin.zst,
 * else text) with a header (magic, owner, index, version, checksum of the page). So:
 *  - own owner: puts of 4 KiB, 16 KiB, 64 KiB and 2 MiB folios, gets of whole units and
 *    of single pages that must return exactly the latest put of the page (or -ENOENT
 *    where the shadow has nothing), invalidations that must drop exactly the units the
 *    shadow has there, unit sizes that must match;
 *  - shared owner: puts of 64 KiB folios at the same indexes from every thread,
 *    invalidations, and gets (of a page, a unit, or the folio with zf_store_get_folio)
 *    that must return -ENOENT or pages with a valid header for that owner and index (and
 *    one version across a whole unit: a unit is stored whole);
 *  - a stats thread reads zf_store_get_stats() and the text and checks what holds of any
 *    snapshot (a folio's counters move together; nothing negative; the monotonic ones
 *    never fall), and now and then writes back and compacts.
 * A put may be refused with -ENOSPC (writeback could not bring the pool under the accept
 * threshold while others read); nothing else may fail.
 *
 * At the end: every own page reads back; zswpout, zswpin, the per-size counters,
 * partial_loads, reject_pool_full and invalidates equal what the workers did; stored,
 * same-filled and incompressible pages and compr_data_size equal what the store holds
 * (each unit classified again with the store's codec); then everything is invalidated,
 * the "now" counters are 0 and, compacted, the pool is empty.
 *
 * Under TSan this is the race test of the table, the references, the LRU and writeback.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zfolio.h"
#include "image.h"
#include "stress.h"
#include "../unit/codec_pick.h"

#define DEFAULT_THREADS 4
#define DEFAULT_ITER (SANITIZED ? 300 : 1500)
#define DEFAULT_ENGINES 2
#define DEFAULT_POOL_KB 1024
#define PAGE ZF_PAGE_SIZE
#define OWN_PAGES 2048u /* 8 MiB of keys per worker */
#define SHARED_PAGES 512u /* 2 MiB of keys for all */
#define SHARED_OWNER 0xfffffff0u
#define SHARED_FOLIO (64u << 10)
#define MAGIC 0x5a464f4cu

struct hdr {
	uint32_t magic, owner;
	uint64_t index;
	uint32_t version, kind;
	uint64_t sum; /* of the page with sum = 0 */
};

struct worker {
	pthread_t thread;
	unsigned id;
	uint32_t owner;
	uint64_t rng;
	uint32_t version;
	/* The shadow of the own owner's pages. */
	uint32_t ver[OWN_PAGES];
	uint8_t present[OWN_PAGES], order[OWN_PAGES];
	uint8_t *folio, *out, *want; /* ZF_UNIT_MAX each */
	/* What it did, for the exact counters. */
	uint64_t zswpout, zswpin, partial_loads, enospc;
	uint64_t invalidated, replaced; /* own units dropped by invalidations, by puts */
	uint64_t shared_put_units, zswpout_units[ZF_STORE_ORDERS], swpin_units[ZF_STORE_ORDERS],
		swpin_fallback[ZF_STORE_ORDERS];
	/* For the summary. */
	uint64_t puts, gets, enoent, invalidates, shared_gets_found;
};

static zf_store *store;
static uint32_t store_unit; /* PAGE in split mode */
static unsigned nthreads, nengines;
static unsigned long iters;
static uint64_t seed, pool_bytes;
static atomic_int workers_done;
static const uint8_t *sample;
static size_t sample_pages;
static uint64_t stats_reads, stats_writebacks, stats_compactions;
static const char *phase = "";
static char dir[80]; /* the backing files' directory */

__attribute__((format(printf, 1, 2), noreturn)) static void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "store_stress (seed %#llx, %s): ", (unsigned long long)seed, phase);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (*dir)
		rmdir(dir); /* the backing file has no name: the directory is empty */
	abort();
}

static uint64_t page_sum(const uint8_t *p)
{
	uint64_t h = 0x84222325cbf29ce4ull;

	for (size_t i = 0; i < PAGE; i += 8) {
		uint64_t w;

		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	return h;
}

/*
 * The page (owner, index, version) of the own owner (any kind) or of the shared one
 * (always with a header).
 */
static void gen_page(uint8_t *p, uint32_t owner, uint64_t index, uint32_t version, int shared)
{
	const uint64_t h = stress_mix(owner, index, version);
	const unsigned kind = shared ? 2 + (unsigned)(h % 14) : (unsigned)(h % 16);
	struct hdr hd = { MAGIC, owner, index, version, kind, 0 };

	if (kind == 0) {
		memset(p, 0, PAGE);
		return;
	}
	if (kind == 1) {
		const uint64_t v = h | 1;

		for (size_t i = 0; i < PAGE; i += 8)
			memcpy(p + i, &v, 8);
		return;
	}
	if (kind <= 3 || !sample) {
		uint64_t s = h;

		for (size_t i = 0; i < PAGE; i += 8) {
			/* Random, or (no sample) words from a small alphabet: compressible. */
			uint64_t w = stress_rand(&s);

			if (kind > 3)
				w &= 0x0f0f0f0f0f0f0f0full;
			memcpy(p + i, &w, 8);
		}
	} else {
		memcpy(p, sample + (h >> 8) % sample_pages * PAGE, PAGE);
	}
	memcpy(p, &hd, sizeof(hd));
	hd.sum = page_sum(p);
	memcpy(p + offsetof(struct hdr, sum), &hd.sum, sizeof(hd.sum));
}

/* A shared page read back: its version, or a failure. */
static uint32_t check_shared_page(const uint8_t *p, uint64_t index, const char *what)
{
	struct hdr hd;
	uint8_t copy[PAGE];

	memcpy(&hd, p, sizeof(hd));
	if (hd.magic != MAGIC || hd.owner != SHARED_OWNER || hd.index != index)
		fail("%s: shared page %llu has a bad header (magic %#x owner %#x index %llu)", what,
		     (unsigned long long)index, hd.magic, hd.owner, (unsigned long long)hd.index);
	memcpy(copy, p, PAGE);
	memset(copy + offsetof(struct hdr, sum), 0, sizeof(hd.sum));
	if (page_sum(copy) != hd.sum)
		fail("%s: shared page %llu version %#x: checksum mismatch (a torn or mixed page)",
		     what, (unsigned long long)index, hd.version);
	gen_page(copy, SHARED_OWNER, index, hd.version, 1);
	if (memcmp(copy, p, PAGE))
		fail("%s: shared page %llu version %#x differs from what that version holds", what,
		     (unsigned long long)index, hd.version);
	return hd.version;
}

static void compare_page(const uint8_t *have, const uint8_t *want, uint32_t owner, uint64_t index,
			 uint32_t version, const char *what)
{
	if (!memcmp(have, want, PAGE))
		return;
	for (size_t i = 0; i < PAGE; i++) {
		if (have[i] != want[i])
			fail("%s: owner %#x page %llu version %u: byte %zu is %#04x, expected "
			     "%#04x",
			     what, owner, (unsigned long long)index, version, i, have[i], want[i]);
	}
}

/* -------------------------------------------------------------------------------- */
/* The own owner                                                                    */
/* -------------------------------------------------------------------------------- */

/* Drops the shadow's units over [index, index + pages); returns how many. */
static uint64_t shadow_drop(struct worker *w, uint64_t index, uint64_t pages)
{
	uint64_t n = 0;

	for (uint64_t p = index; p < index + pages && p < OWN_PAGES;) {
		uint64_t first, len;

		if (!w->present[p]) {
			p++;
			continue;
		}
		len = (uint64_t)1 << w->order[p];
		first = p & ~(len - 1);
		for (uint64_t k = first; k < first + len; k++) {
			if (!w->present[k] || w->order[k] != w->order[p])
				fail("shadow broken at page %llu", (unsigned long long)k);
			w->present[k] = 0;
		}
		n++;
		p = first + len;
	}
	return n;
}

static void own_put(struct worker *w)
{
	const uint64_t r = stress_rand(&w->rng);
	const unsigned pick = (unsigned)(r % 100);
	const size_t len = pick < 40   ? PAGE
			   : pick < 58 ? 4 * PAGE
			   : pick < 97 ? 16 * PAGE
				       : ZF_UNIT_MAX;
	const uint64_t pages = len / PAGE;
	const uint64_t index = (r >> 8) % (OWN_PAGES / pages) * pages;
	const uint32_t version = ++w->version;
	const size_t unit = len < store_unit ? len : store_unit;
	const unsigned order = (unsigned)__builtin_ctz(unit / PAGE);
	int ret;

	for (uint64_t k = 0; k < pages; k++)
		gen_page(w->folio + k * PAGE, w->owner, index + k, version, 0);
	ret = zf_store_put(store, w->owner, index, w->folio, len);
	w->puts++;
	if (ret == -ENOSPC) {
		w->enospc++;
		return;
	}
	if (ret)
		fail("put of %zu bytes at %llu: %s", len, (unsigned long long)index,
		     zf_strerror(ret));
	w->replaced += shadow_drop(w, index, pages);
	for (uint64_t k = 0; k < pages; k++) {
		w->present[index + k] = 1;
		w->ver[index + k] = version;
		w->order[index + k] = (uint8_t)order;
	}
	w->zswpout += pages;
	w->zswpout_units[order] += len / unit;
}

/* Reads page p's unit (whole, or p alone) and compares it with the shadow. */
static void own_get(struct worker *w, uint64_t p, int whole)
{
	uint64_t first = p, len = PAGE;
	int want = -ENOENT, ret;

	if (w->present[p]) {
		const uint64_t upages = (uint64_t)1 << w->order[p];

		first = p & ~(upages - 1);
		want = 0;
		if (whole || upages == 1) {
			len = upages * PAGE;
		} else {
			first = p;
		}
	}
	ret = zf_store_get(store, w->owner, first, w->out, len);
	w->gets++;
	if (ret != want)
		fail("get of %llu bytes at page %llu (shadow: %s, %u pages): %s, expected %s",
		     (unsigned long long)len, (unsigned long long)first,
		     w->present[p] ? "stored" : "absent", 1u << w->order[p], zf_strerror(ret),
		     zf_strerror(want));
	if (ret) {
		w->enoent++;
		return;
	}
	for (uint64_t k = 0; k < len / PAGE; k++) {
		gen_page(w->want, w->owner, first + k, w->ver[first + k], 0);
		compare_page(w->out + k * PAGE, w->want, w->owner, first + k, w->ver[first + k],
			     "own get");
	}
	w->zswpin += len / PAGE;
	if (len == PAGE && w->order[p]) {
		w->partial_loads++;
		w->swpin_fallback[w->order[p]]++;
	} else {
		w->swpin_units[w->order[p]]++;
	}
}

static void own_invalidate(struct worker *w)
{
	const uint64_t r = stress_rand(&w->rng);
	const uint64_t index = r % OWN_PAGES, pages = 1 + (r >> 32) % 80;
	const uint64_t want = shadow_drop(w, index, pages);
	const long ret = zf_store_invalidate(store, w->owner, index, pages);

	if (ret < 0 || (uint64_t)ret != want)
		fail("invalidate(%llu, %llu pages) dropped %ld units, the shadow had %llu",
		     (unsigned long long)index, (unsigned long long)pages, ret,
		     (unsigned long long)want);
	w->invalidated += want;
	w->invalidates++;
}

static void own_unit_size(struct worker *w, uint64_t p)
{
	uint64_t first = UINT64_MAX;
	const long size = zf_store_unit_size(store, w->owner, p, &first);

	if (!w->present[p]) {
		if (size != -ENOENT)
			fail("unit_size(%llu) of an absent page: %ld", (unsigned long long)p, size);
		return;
	}
	if (size != (long)PAGE << w->order[p] || first != (p & ~(((uint64_t)1 << w->order[p]) - 1)))
		fail("unit_size(%llu): %ld at %llu, the shadow has %u pages", (unsigned long long)p,
		     size, (unsigned long long)first, 1u << w->order[p]);
}

/* -------------------------------------------------------------------------------- */
/* The shared owner                                                                 */
/* -------------------------------------------------------------------------------- */

static uint32_t shared_unit(void)
{
	return store_unit < SHARED_FOLIO ? store_unit : SHARED_FOLIO;
}

static void shared_put(struct worker *w)
{
	const uint64_t pages = SHARED_FOLIO / PAGE;
	const uint64_t index = stress_rand(&w->rng) % (SHARED_PAGES / pages) * pages;
	const uint32_t version = w->id << 24 | (++w->version & 0xffffff);
	const unsigned order = (unsigned)__builtin_ctz(shared_unit() / PAGE);
	int ret;

	for (uint64_t k = 0; k < pages; k++)
		gen_page(w->folio + k * PAGE, SHARED_OWNER, index + k, version, 1);
	ret = zf_store_put(store, SHARED_OWNER, index, w->folio, SHARED_FOLIO);
	w->puts++;
	if (ret == -ENOSPC) {
		w->enospc++;
		return;
	}
	if (ret)
		fail("shared put at %llu: %s", (unsigned long long)index, zf_strerror(ret));
	w->zswpout += pages;
	w->zswpout_units[order] += SHARED_FOLIO / shared_unit();
	w->shared_put_units += SHARED_FOLIO / shared_unit();
}

static void shared_get(struct worker *w)
{
	const uint64_t r = stress_rand(&w->rng);
	const uint64_t upages = shared_unit() / PAGE;
	/* 0: a page, 1: a unit, 2: a folio as it was put (zf_store_get_folio). */
	const int how = (int)(r % 3);
	const uint64_t apages = how == 2 ? SHARED_FOLIO / PAGE : how ? upages : 1;
	const uint64_t index = (r >> 8) % (SHARED_PAGES / apages) * apages;
	const size_t len = apages * PAGE;
	const int ret = how == 2 ? zf_store_get_folio(store, SHARED_OWNER, index, w->out, len)
				 : zf_store_get(store, SHARED_OWNER, index, w->out, len);
	uint32_t version = 0;

	w->gets++;
	if (ret == -ENOENT) {
		w->enoent++;
		return;
	}
	if (ret)
		fail("shared get of %zu bytes at %llu: %s", len, (unsigned long long)index,
		     zf_strerror(ret));
	for (uint64_t k = 0; k < len / PAGE; k++) {
		const uint32_t v = check_shared_page(w->out + k * PAGE, index + k, "shared get");

		/* A unit is one version; a folio of several units may mix them. */
		if (k % upages && v != version)
			fail("shared get of %zu bytes at %llu: page %llu is version %#x, the "
			     "page before %#x (a unit is stored whole)",
			     len, (unsigned long long)index, (unsigned long long)k, v, version);
		version = v;
	}
	w->shared_gets_found++;
	w->zswpin += len / PAGE;
	if (len == PAGE && upages > 1) {
		w->partial_loads++;
		w->swpin_fallback[__builtin_ctz(upages)]++;
	} else {
		w->swpin_units[__builtin_ctz(upages)] += len / PAGE / upages;
	}
}

static void shared_invalidate(struct worker *w)
{
	const uint64_t r = stress_rand(&w->rng);
	const uint64_t pages = SHARED_FOLIO / PAGE;
	const uint64_t index = r % (SHARED_PAGES / pages) * pages, n = 1 + (r >> 32) % 3;
	const long ret = zf_store_invalidate(store, SHARED_OWNER, index, n * pages);

	if (ret < 0 || (uint64_t)ret > n * pages)
		fail("shared invalidate(%llu, %llu pages): %ld", (unsigned long long)index,
		     (unsigned long long)(n * pages), ret);
	w->invalidates++;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	for (unsigned long i = 0; i < iters; i++) {
		const uint64_t r = stress_rand(&w->rng);
		const unsigned what = (unsigned)(r % 100);
		const uint64_t p = (r >> 8) % OWN_PAGES;

		if (what < 28)
			own_put(w);
		else if (what < 55)
			own_get(w, p, (r >> 40) % 2);
		else if (what < 62)
			own_invalidate(w);
		else if (what < 65)
			own_unit_size(w, p);
		else if (what < 75)
			shared_put(w);
		else if (what < 93)
			shared_get(w);
		else
			shared_invalidate(w);
	}
	atomic_fetch_add(&workers_done, 1);
	return NULL;
}

/* -------------------------------------------------------------------------------- */
/* Snapshots                                                                        */
/* -------------------------------------------------------------------------------- */

#define MONOTONIC(X)                                                                               \
	X(zswpout)                                                                                 \
	X(zswpin)                                                                                  \
	X(written_back_total)                                                                      \
	X(reject_compress_poor)                                                                    \
	X(reject_compress_fail)                                                                    \
	X(reject_alloc_fail)                                                                       \
	X(reject_pool_full)                                                                        \
	X(pool_limit_hit)                                                                          \
	X(decompress_fail)                                                                         \
	X(partial_loads)                                                                           \
	X(invalidates)                                                                             \
	X(bd_reads)                                                                                \
	X(bd_writes)                                                                               \
	X(bd_read_errors)                                                                          \
	X(bd_write_errors)                                                                         \
	X(mem_used_max)                                                                            \
	X(pages_compacted)

#define U(x) ((unsigned long long)(x))

/* What holds of any snapshot, however the store changes meanwhile. */
static void check_snapshot(const zf_store_stats *st, const zf_store_stats *last)
{
	uint64_t out = 0, in = 0, fallback = 0;

	if (st->stored_pages > (uint64_t)1 << 40)
		fail("snapshot: stored_pages %llu (below zero?)", U(st->stored_pages));
	if (st->same_filled_pages > st->stored_pages ||
	    st->stored_incompressible_pages > st->stored_pages ||
	    st->written_back_pages > st->stored_pages ||
	    st->same_filled_pages + st->stored_incompressible_pages > st->stored_pages ||
	    st->same_filled_pages + st->written_back_pages > st->stored_pages)
		fail("snapshot: stored %llu, same-filled %llu, incompressible %llu, written back "
		     "%llu",
		     U(st->stored_pages), U(st->same_filled_pages),
		     U(st->stored_incompressible_pages), U(st->written_back_pages));
	if (st->orig_data_size != st->stored_pages * PAGE)
		fail("snapshot: orig_data_size %llu, stored_pages %llu", U(st->orig_data_size),
		     U(st->stored_pages));
	if (st->compr_data_size > (st->stored_pages - st->same_filled_pages) * PAGE)
		fail("snapshot: compr_data_size %llu for %llu pages not same-filled",
		     U(st->compr_data_size), U(st->stored_pages - st->same_filled_pages));
	if (st->written_back_total < st->written_back_pages)
		fail("snapshot: written_back_total %llu < written_back_pages %llu",
		     U(st->written_back_total), U(st->written_back_pages));
	if (st->pool_total_size != st->mem_used_total || st->mem_used_total % PAGE)
		fail("snapshot: pool_total_size %llu, mem_used_total %llu", U(st->pool_total_size),
		     U(st->mem_used_total));
	/* A folio's counters move together. */
	for (unsigned o = 0; o < ZF_STORE_ORDERS; o++) {
		out += st->zswpout_units[o] << o;
		in += st->swpin_units[o] << o;
		fallback += st->swpin_fallback[o];
		if (st->zswpout_units[o] < last->zswpout_units[o] ||
		    st->swpin_units[o] < last->swpin_units[o] ||
		    st->swpin_fallback[o] < last->swpin_fallback[o])
			fail("snapshot: a per-size counter of order %u fell", o);
	}
	if (out != st->zswpout)
		fail("snapshot: zswpout %llu, the per-size counters make %llu pages",
		     U(st->zswpout), U(out));
	if (fallback != st->partial_loads || in + st->partial_loads != st->zswpin)
		fail("snapshot: zswpin %llu, whole units %llu pages, partial loads %llu, fallbacks "
		     "%llu",
		     U(st->zswpin), U(in), U(st->partial_loads), U(fallback));
	if (st->decompress_fail || st->bd_read_errors || st->bd_write_errors ||
	    st->reject_compress_fail || st->reject_alloc_fail || st->reject_compress_poor)
		fail("snapshot: decompress_fail %llu, bd errors %llu/%llu, rejects %llu/%llu/%llu",
		     U(st->decompress_fail), U(st->bd_read_errors), U(st->bd_write_errors),
		     U(st->reject_compress_fail), U(st->reject_alloc_fail),
		     U(st->reject_compress_poor));
#define MONO(f)                                                                                    \
	if (st->f < last->f)                                                                       \
		fail("snapshot: %s fell from %llu to %llu", #f, U(last->f), U(st->f));
	MONOTONIC(MONO)
#undef MONO
}

/* The value of line name in the stats text (which must have it). */
static uint64_t text_value(const char *text, const char *name)
{
	const size_t n = strlen(name);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (!strncmp(p, name, n) && p[n] == ' ')
			return strtoull(p + n + 1, NULL, 10);
	}
	fail("stats text has no line %s", name);
}

static void *stats_main(void *arg)
{
	zf_store_stats last;
	char text[4096];

	(void)arg;
	memset(&last, 0, sizeof(last));
	while (atomic_load(&workers_done) < (int)nthreads) {
		zf_store_stats st;

		zf_store_get_stats(store, &st, sizeof(st));
		check_snapshot(&st, &last);
		last = st;
		stats_reads++;
		if (stats_reads % 16 == 0) {
			const size_t len = zf_store_stats_text(store, text, sizeof(text));

			if (len >= sizeof(text) || strlen(text) != len)
				fail("stats text: %zu bytes", len);
			if (text_value(text, "zswpout") < last.zswpout ||
			    text_value(text, "invalidates") < last.invalidates ||
			    text_value(text, "orig_data_size") !=
				    text_value(text, "stored_pages") * PAGE)
				fail("stats text disagrees with the snapshot before it:\n%s", text);
		}
		if (stats_reads % 64 == 0) {
			const long r = zf_store_writeback(store, 256u << 10);

			if (r < 0)
				fail("writeback: %s", zf_strerror((int)r));
			stats_writebacks++;
		}
		if (stats_reads % 256 == 0) {
			if (zf_store_compact(store) < 0)
				fail("compact failed");
			stats_compactions++;
		}
		sched_yield();
	}
	return NULL;
}

/* -------------------------------------------------------------------------------- */
/* The end                                                                          */
/* -------------------------------------------------------------------------------- */

struct expect {
	zf_codec_ctx *ctx;
	uint8_t *cbuf;
	uint64_t stored_pages, same_pages, raw_pages, compr, units;
};

/* Counts a unit of len bytes at data as the store keeps it (incompressible_pct 100). */
static void expect_unit(struct expect *e, const uint8_t *data, size_t len)
{
	int r;

	e->stored_pages += len / PAGE;
	e->units++;
	if (zf_same_filled(data, len, NULL)) {
		e->same_pages += len / PAGE;
		return;
	}
	r = zf_codec_compress(e->ctx, data, len, e->cbuf, len - 1);
	if (r == -E2BIG) {
		e->raw_pages += len / PAGE;
		e->compr += len;
	} else if (r > 0) {
		e->compr += (uint64_t)r;
	} else {
		fail("compress: %s", zf_strerror(r));
	}
}

static void check_end(struct worker *ws)
{
	struct worker sum;
	struct expect e;
	zf_store_stats st;
	const zf_codec *codec;
	uint8_t *buf = malloc(ZF_UNIT_MAX);
	uint64_t shared_units = 0;

	memset(&sum, 0, sizeof(sum));
	memset(&e, 0, sizeof(e));
	e.cbuf = malloc(ZF_UNIT_MAX);
	if (!buf || !e.cbuf || zf_codec_find(test_codec_name(), &codec) ||
	    zf_codec_ctx_create(codec, &e.ctx))
		fail("out of memory");
	for (unsigned t = 0; t < nthreads; t++) {
		struct worker *w = &ws[t];

		/* Every own page, whole and alone. */
		for (uint64_t p = 0; p < OWN_PAGES; p++) {
			own_unit_size(w, p);
			own_get(w, p, 0);
			if (w->present[p] && (p & (((uint64_t)1 << w->order[p]) - 1)) == 0) {
				own_get(w, p, 1);
				expect_unit(&e, w->out, (size_t)PAGE << w->order[p]);
			}
		}
		sum.zswpout += w->zswpout;
		sum.zswpin += w->zswpin;
		sum.partial_loads += w->partial_loads;
		sum.enospc += w->enospc;
		sum.invalidated += w->invalidated;
		sum.replaced += w->replaced;
		sum.shared_put_units += w->shared_put_units;
		for (unsigned o = 0; o < ZF_STORE_ORDERS; o++) {
			sum.zswpout_units[o] += w->zswpout_units[o];
			sum.swpin_units[o] += w->swpin_units[o];
			sum.swpin_fallback[o] += w->swpin_fallback[o];
		}
	}
	/* The shared owner's units, as they are now. */
	for (uint64_t p = 0; p < SHARED_PAGES; p += shared_unit() / PAGE) {
		const int r = zf_store_get(store, SHARED_OWNER, p, buf, shared_unit());

		if (r == -ENOENT)
			continue;
		if (r)
			fail("shared get at %llu: %s", (unsigned long long)p, zf_strerror(r));
		for (uint64_t k = 0; k < shared_unit() / PAGE; k++)
			check_shared_page(buf + k * PAGE, p + k, "at the end");
		expect_unit(&e, buf, shared_unit());
		shared_units++;
		sum.zswpin += shared_unit() / PAGE;
		sum.swpin_units[__builtin_ctz(shared_unit() / PAGE)]++;
	}

	zf_store_get_stats(store, &st, sizeof(st));
	printf("store_stress: %s: %llu pages stored (%llu same-filled, %llu incompressible, "
	       "%llu written back), pool %llu KiB (max %llu), %llu pages ever written back, "
	       "%llu limit hits, %llu puts refused\n",
	       phase, U(st.stored_pages), U(st.same_filled_pages),
	       U(st.stored_incompressible_pages), U(st.written_back_pages),
	       U(st.mem_used_total >> 10), U(st.mem_used_max >> 10), U(st.written_back_total),
	       U(st.pool_limit_hit), U(st.reject_pool_full));
#define EXACT(name, have, want)                                                                    \
	if ((have) != (want))                                                                      \
		fail("at the end: %s is %llu, expected %llu", name, U(have), U(want));
	EXACT("zswpout", st.zswpout, sum.zswpout);
	EXACT("zswpin", st.zswpin, sum.zswpin);
	EXACT("partial_loads", st.partial_loads, sum.partial_loads);
	EXACT("reject_pool_full", st.reject_pool_full, sum.enospc);
	for (unsigned o = 0; o < ZF_STORE_ORDERS; o++) {
		EXACT("zswpout_units[o]", st.zswpout_units[o], sum.zswpout_units[o]);
		EXACT("swpin_units[o]", st.swpin_units[o], sum.swpin_units[o]);
		EXACT("swpin_fallback[o]", st.swpin_fallback[o], sum.swpin_fallback[o]);
	}
	EXACT("stored_pages", st.stored_pages, e.stored_pages);
	EXACT("orig_data_size", st.orig_data_size, e.stored_pages * PAGE);
	EXACT("same_filled_pages", st.same_filled_pages, e.same_pages);
	EXACT("stored_incompressible_pages", st.stored_incompressible_pages, e.raw_pages);
	EXACT("compr_data_size", st.compr_data_size, e.compr);
	/*
	 * Every unit that left the table was counted: the own owners' exactly (their
	 * invalidations and replacements), the shared owner's (invalidated or replaced) as
	 * the units its puts made less those there now.
	 */
	EXACT("invalidates", st.invalidates,
	      sum.invalidated + sum.replaced + sum.shared_put_units - shared_units);
	if (st.written_back_pages > st.stored_pages - st.same_filled_pages)
		fail("at the end: %llu pages written back", U(st.written_back_pages));
	if (st.pool_limit_hit && !st.written_back_total)
		fail("at the end: the pool was full %llu times and nothing was written back",
		     U(st.pool_limit_hit));

	/* Everything goes: nothing is left, and the compacted pool is empty. */
	for (unsigned t = 0; t < nthreads; t++) {
		const long n = zf_store_invalidate(store, ws[t].owner, 0, OWN_PAGES);

		if (n < 0)
			fail("invalidate: %ld", n);
		memset(ws[t].present, 0, sizeof(ws[t].present));
		for (uint64_t p = 0; p < OWN_PAGES; p += 97)
			own_get(&ws[t], p, 0);
	}
	if (zf_store_invalidate(store, SHARED_OWNER, 0, SHARED_PAGES) != (long)shared_units)
		fail("the shared owner's units changed at the end");
	zf_store_get_stats(store, &st, sizeof(st));
	if (st.stored_pages || st.same_filled_pages || st.stored_incompressible_pages ||
	    st.written_back_pages || st.orig_data_size || st.compr_data_size)
		fail("all invalidated: stored %llu, same-filled %llu, incompressible %llu, written "
		     "back %llu, orig %llu, compr %llu",
		     U(st.stored_pages), U(st.same_filled_pages), U(st.stored_incompressible_pages),
		     U(st.written_back_pages), U(st.orig_data_size), U(st.compr_data_size));
	if (zf_store_compact(store) < 0)
		fail("compact failed");
	zf_store_get_stats(store, &st, sizeof(st));
	if (st.mem_used_total)
		fail("all invalidated and compacted: the pool still uses %llu bytes",
		     U(st.mem_used_total));
	zf_codec_ctx_destroy(e.ctx);
	free(e.cbuf);
	free(buf);
}

/* One store: the workers and the stats thread, then the checks. */
static void run(uint32_t unit, const char *backing_dir)
{
	struct worker *ws = calloc(nthreads, sizeof(*ws));
	pthread_t stats_thread;
	struct timespec t0, t1;
	zf_store_options o;
	uint64_t puts = 0, gets = 0, enoent = 0, invalidates = 0, found = 0, enospc = 0;
	int ret;

	if (!ws)
		fail("out of memory");
	zf_store_options_init(&o);
	o.codec = test_codec_name(); /* check_end() finds stored lengths with it */
	o.unit = unit;
	o.engines = nengines;
	o.max_pool_bytes = pool_bytes;
	o.when_full = ZF_STORE_WRITEBACK;
	o.backing_path = backing_dir;
	ret = zf_store_create(&o, &store);
	if (ret)
		fail("store_create: %s", zf_strerror(ret));
	store_unit = unit ? unit : PAGE;
	atomic_store(&workers_done, 0);
	for (unsigned t = 0; t < nthreads; t++) {
		ws[t].id = t;
		ws[t].owner = t + 1;
		ws[t].rng = seed ^ (t + 1) * 0xd1b54a32d192ed03ull ^ unit;
		ws[t].folio = malloc(ZF_UNIT_MAX);
		ws[t].out = malloc(ZF_UNIT_MAX);
		ws[t].want = malloc(PAGE);
		if (!ws[t].folio || !ws[t].out || !ws[t].want)
			fail("out of memory");
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned t = 0; t < nthreads; t++) {
		if (pthread_create(&ws[t].thread, NULL, worker_main, &ws[t]))
			fail("pthread_create");
	}
	if (pthread_create(&stats_thread, NULL, stats_main, NULL))
		fail("pthread_create");
	for (unsigned t = 0; t < nthreads; t++)
		pthread_join(ws[t].thread, NULL);
	pthread_join(stats_thread, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	for (unsigned t = 0; t < nthreads; t++) {
		puts += ws[t].puts;
		gets += ws[t].gets;
		enoent += ws[t].enoent;
		invalidates += ws[t].invalidates;
		found += ws[t].shared_gets_found;
		enospc += ws[t].enospc;
	}
	printf("store_stress: %s: %.1f s: %llu puts (%llu refused), %llu gets (%llu -ENOENT, "
	       "%llu shared found), %llu invalidations; %llu snapshots, %llu writebacks, %llu "
	       "compactions\n",
	       phase, (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
	       U(puts), U(enospc), U(gets), U(enoent), U(found), U(invalidates), U(stats_reads),
	       U(stats_writebacks), U(stats_compactions));
	check_end(ws);
	zf_store_destroy(store);
	store = NULL;
	for (unsigned t = 0; t < nthreads; t++) {
		free(ws[t].folio);
		free(ws[t].out);
		free(ws[t].want);
	}
	free(ws);
}

int main(int argc, char **argv)
{
	static const uint32_t units[] = { 64u << 10, 0 };
	const char *base = getenv("TMPDIR");
	zf_image *img = NULL;
	struct timespec t0;

	clock_gettime(CLOCK_REALTIME, &t0);
	nthreads = (unsigned)arg_or_env(argc, argv, 1, "ZF_THREADS", DEFAULT_THREADS);
	iters = (unsigned long)arg_or_env(argc, argv, 2, "ZF_ITER", DEFAULT_ITER);
	seed = arg_or_env(argc, argv, 3, "ZF_SEED",
			  (unsigned long long)t0.tv_nsec ^ (unsigned long long)t0.tv_sec << 20 ^
				  (unsigned long long)getpid() << 40);
	nengines = (unsigned)arg_or_env(0, argv, 1, "ZF_ENGINES", DEFAULT_ENGINES);
	pool_bytes = arg_or_env(0, argv, 1, "ZF_POOL_KB", DEFAULT_POOL_KB) << 10;
	if (nthreads < 1 || nthreads > 200 || nengines > ZF_ENGINES_MAX) {
		fprintf(stderr, "usage: %s [THREADS (1..200) [ITER [SEED]]]\n", argv[0]);
		return 1;
	}
	printf("store_stress: seed %#llx (ZF_SEED=%#llx to repeat), %u threads x %lu ops, %u "
	       "engines, pool limit %llu KiB\n",
	       (unsigned long long)seed, (unsigned long long)seed, nthreads, iters, nengines,
	       U(pool_bytes >> 10));
	fflush(stdout);
	if (stress_open_sample(&img, &sample, &sample_pages))
		printf("store_stress: no sample image: text-like pages instead\n");
	snprintf(dir, sizeof(dir), "%s/zf-store-stress-XXXXXX",
		 base && strlen(base) < 40 ? base : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	for (unsigned i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		phase = units[i] ? "unit 64k" : "split";
		run(units[i], dir);
	}
	if (rmdir(dir))
		fail("the backing directory %s is not empty", dir);
	zf_image_close(img);
	printf("store_stress: passed\n");
	return 0;
}
