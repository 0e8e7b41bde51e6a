/*
 * test_store.c - the store (zfolio's zswap), against its contract in include/zfolio.h and
 * the top comment of src/store/store.c.
 *
 * Most tests drive a store and a shadow model of it side by side (struct model): the
 * model keeps the bytes every page of one owner must hold, the units the store must have
 * made (where, what size, same-filled / raw / compressed / written back, their stored
 * length, the order they were stored in) and every counter the store must show. The
 * stored length of a unit is found the way the store finds it: zf_same_filled(), then the
 * store's codec into a buffer of incompressible_pct % of the unit, less one byte. After
 * every step the counters must be EXACT (zf_store_get_stats and the zf_store_stats_text
 * lines, parsed), and every get compares every byte (and that nothing past len was
 * written).
 *
 * Covered: puts of 4 KiB, 16 KiB, 64 KiB and 2 MiB folios in split mode and in unit
 * modes 16k, 64k and 2m (a folio smaller than the unit is one unit of its own size; a
 * larger one is cut), of sample-image data (data/sample.bin.zst; text pages in a build
 * without zstd, which cannot read it) and synthetic pages
 * (zero, same-filled with an 8-byte value, random from a fixed seed, text, half text);
 * same-filled pages (no pool memory); incompressible units (kept raw, or -E2BIG with
 * reject_incompressible: nothing stored, the keys keep their old content: a folio is
 * stored whole or not at all); incompressible_pct; gets of whole units and of single
 * pages (partial loads, swpin_fallback); replacement of keys by a new put, also by a
 * folio of another size (the units over it go whole); invalidation (then, compacted, the
 * pool has no page left); owners kept apart; writeback in LRU order and reads from the
 * backing file; a backing file too small; a backing file truncated behind the store's
 * back (-EIO, bd_read_errors, the entry kept for a retry); a corrupted backing file
 * (-EBADMSG, decompress_fail, the other units fine, the unit good again once the bytes
 * are restored); a corrupted pool object under a folio get, wherever it lies in the
 * folio (the same, and no pin left on the pool); the pool limit with its accept threshold
 * (reject policy: -ENOSPC, pool_limit_hit, reject_pool_full, hysteresis, with and without
 * zf_store_compact; writeback policy: puts go on, units go to the backing file, every
 * byte reads back);
 * verify; other codecs and incompressible_pct; 2 engines giving the same counters and
 * bytes as none; puts in flight (zf_store_put_start/finish: several at once, the same
 * keys twice, a refused one beside others); bad arguments (and two stores on one backing
 * file). The full filesystem (I/O errors on writeback) is tests/system/store_enospc_test.c;
 * concurrency is tests/stress/store_stress.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "zfolio.h"
#include "image.h"
#include "testutil.h"
#include "codec_pick.h"
#include "../../src/backing/backing.h"
#include "../../src/store/store.h"

#define PAGE ZF_PAGE_SIZE
#define K16 (16u << 10)
#define K64 (64u << 10)
#define M2 ZF_UNIT_MAX
#define OWNER 7u
#define MODEL_PAGES 2048u /* 8 MiB of keys: four 2 MiB folios */
#define CANARY 0x5a
#define CANARY_BYTES 64u
/*
 * The pool keeps the pages of up to zf_pool_options.warm_pages_max (default 512: 2 MiB)
 * empty zspages for reuse, counted in mem_used_total; the store makes its pool with the
 * defaults. So "the pool is empty" reads: at most this much in mem_used_total.
 */
#define POOL_WARM_MAX ((uint64_t)512 * PAGE)

/* The sample image, loaded once for the whole group (or pages that stand in for it). */
#define STANDIN_PAGES 2048u
static zf_image *sample_img;
static const uint8_t *sample;
static size_t sample_pages;
static char tmpdir[64];

/* -------------------------------------------------------------------------------- */
/* Data                                                                             */
/* -------------------------------------------------------------------------------- */

enum data {
	D_SAMPLE, /* consecutive pages of the sample image */
	D_ZERO,
	D_SAME, /* every word 0x0123456789abcdef */
	D_SAME_SEED, /* every word one value made from the seed */
	D_SAME_PAGES, /* each page same-filled, with its own value */
	D_RANDOM, /* incompressible */
	D_TEXT,
	D_HALF, /* each page half text, half random */
	D_MIXED, /* pages in turn: zero, sample, same-filled, random, sample, text */
};

static void fill_page_kind(uint8_t *p, unsigned kind, uint64_t seed)
{
	switch (kind) {
	case 0:
		memset(p, 0, PAGE);
		break;
	case 2:
		fill_pattern(p, PAGE, PAT_SAME, seed);
		break;
	case 3:
		fill_random(p, PAGE, seed);
		break;
	case 5:
		fill_text(p, PAGE, seed);
		break;
	default:
		memcpy(p, sample + (seed % sample_pages) * PAGE, PAGE);
		break;
	}
}

static void make_data(uint8_t *buf, size_t len, enum data d, uint64_t seed)
{
	const size_t pages = len / PAGE;

	switch (d) {
	case D_SAMPLE:
		for (size_t i = 0; i < pages; i++)
			memcpy(buf + i * PAGE, sample + ((seed + i) % sample_pages) * PAGE, PAGE);
		break;
	case D_ZERO:
		memset(buf, 0, len);
		break;
	case D_SAME:
		fill_pattern(buf, len, PAT_SAME, seed);
		break;
	case D_SAME_SEED:
	case D_SAME_PAGES:
		for (size_t i = 0; i < len / 8; i++) {
			const uint64_t v = (seed + (d == D_SAME_PAGES ? i * 8 / PAGE : 0)) *
					   0x9e3779b97f4a7c15ull;

			memcpy(buf + i * 8, &v, 8);
		}
		break;
	case D_RANDOM:
		fill_random(buf, len, seed);
		break;
	case D_TEXT:
		fill_text(buf, len, seed);
		break;
	case D_HALF:
		for (size_t i = 0; i < pages; i++)
			fill_pattern(buf + i * PAGE, PAGE, PAT_HALF, seed + i);
		break;
	case D_MIXED:
		for (size_t i = 0; i < pages; i++)
			fill_page_kind(buf + i * PAGE, (unsigned)(i % 6), seed + i);
		break;
	}
}

/* -------------------------------------------------------------------------------- */
/* Counters                                                                         */
/* -------------------------------------------------------------------------------- */

/* The counters the store keeps itself (the pool's are checked apart). */
#define STORE_COUNTERS(X)                                                                          \
	X(zswpout)                                                                                 \
	X(zswpin)                                                                                  \
	X(stored_pages)                                                                            \
	X(same_filled_pages)                                                                       \
	X(stored_incompressible_pages)                                                             \
	X(written_back_pages)                                                                      \
	X(written_back_total)                                                                      \
	X(orig_data_size)                                                                          \
	X(compr_data_size)                                                                         \
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
	X(bd_write_errors)
#define POOL_COUNTERS(X)                                                                           \
	X(pool_total_size)                                                                         \
	X(mem_used_total)                                                                          \
	X(mem_used_max)                                                                            \
	X(pages_compacted)                                                                         \
	X(warm_pages)                                                                              \
	X(meta_bytes)

static const char *const order_names[ZF_STORE_ORDERS] = { "4k",	  "8k",	  "16k",  "32k", "64k",
							  "128k", "256k", "512k", "1m",	 "2m" };

static zf_store_stats stats_of(zf_store *s)
{
	zf_store_stats st;

	memset(&st, 0xff, sizeof(st));
	zf_store_get_stats(s, &st, sizeof(st));
	return st;
}

/* Fails naming the counter, so that a report says which one moved. */
static void expect_counter(const char *name, uint64_t have, uint64_t want)
{
	if (have != want) {
		print_error("counter %s is %llu, expected %llu\n", name, (unsigned long long)have,
			    (unsigned long long)want);
		fail();
	}
}

/* Every store counter of st equals want's. */
static void expect_counters(const zf_store_stats *st, const zf_store_stats *want)
{
#define CMP(f) expect_counter(#f, st->f, want->f);
	STORE_COUNTERS(CMP)
#undef CMP
	for (unsigned o = 0; o < ZF_STORE_ORDERS; o++) {
		char name[40];

		snprintf(name, sizeof(name), "zswpout_%s", order_names[o]);
		expect_counter(name, st->zswpout_units[o], want->zswpout_units[o]);
		snprintf(name, sizeof(name), "swpin_%s", order_names[o]);
		expect_counter(name, st->swpin_units[o], want->swpin_units[o]);
		snprintf(name, sizeof(name), "swpin_fallback_%s", order_names[o]);
		expect_counter(name, st->swpin_fallback[o], want->swpin_fallback[o]);
	}
}

/* The value of line name in text, or -1 if it is not there; fails on a duplicate line. */
static long long text_value(const char *text, const char *name)
{
	const size_t n = strlen(name);
	long long v = -1;

	for (const char *p = text; *p;) {
		const char *eol = strchr(p, '\n');

		assert_non_null(eol); /* every line ends */
		if ((size_t)(eol - p) > n && !strncmp(p, name, n) && p[n] == ' ') {
			char *end;

			assert_int_equal(v, -1);
			v = strtoll(p + n + 1, &end, 10);
			assert_ptr_equal(end, eol);
		}
		p = eol + 1;
	}
	return v;
}

/*
 * zf_store_stats_text(): every counter has its line with the value of st (taken just
 * before, with nothing in between), per-size lines exactly for the sizes with a non-zero
 * counter, nothing else; the length and truncation follow snprintf.
 */
static void check_text(zf_store *s, const zf_store_stats *st)
{
	char text[4096], small[12];
	size_t len = zf_store_stats_text(s, text, sizeof(text)), lines = 0;

	assert_true(len < sizeof(text));
	assert_int_equal(strlen(text), len);
#define LINE(f)                                                                                    \
	do {                                                                                       \
		const long long v = text_value(text, #f);                                          \
                                                                                                   \
		if (v < 0 || (unsigned long long)v != st->f) {                                     \
			print_error("stats text line %s is %lld, stats say %llu\n", #f, v,         \
				    (unsigned long long)st->f);                                    \
			fail();                                                                    \
		}                                                                                  \
		lines++;                                                                           \
	} while (0);
	STORE_COUNTERS(LINE)
	POOL_COUNTERS(LINE)
#undef LINE
	for (unsigned o = 0; o < ZF_STORE_ORDERS; o++) {
		const int seen =
			st->zswpout_units[o] || st->swpin_units[o] || st->swpin_fallback[o];
		const uint64_t v[3] = { st->zswpout_units[o], st->swpin_units[o],
					st->swpin_fallback[o] };
		static const char *const prefix[3] = { "zswpout_", "swpin_", "swpin_fallback_" };

		for (int k = 0; k < 3; k++) {
			char name[40];
			long long have;

			snprintf(name, sizeof(name), "%s%s", prefix[k], order_names[o]);
			have = text_value(text, name);
			if (!seen) {
				assert_int_equal(have, -1);
				continue;
			}
			assert_true(have >= 0);
			assert_int_equal((uint64_t)have, v[k]);
			lines++;
		}
	}
	/* No other line. */
	for (const char *p = text; *p; p = strchr(p, '\n') + 1)
		lines--;
	assert_int_equal(lines, 0);

	assert_int_equal(zf_store_stats_text(s, NULL, 0), len);
	memset(small, CANARY, sizeof(small));
	assert_int_equal(zf_store_stats_text(s, small, 8), len);
	assert_int_equal(small[7], '\0');
	assert_memory_equal(small, text, 7);
	assert_int_equal((uint8_t)small[8], CANARY);
}

/* -------------------------------------------------------------------------------- */
/* The model                                                                        */
/* -------------------------------------------------------------------------------- */

enum kind { K_NONE = 0, K_SAME, K_RAW, K_COMP };

struct shadow {
	uint8_t present, order, kind, wb;
	uint32_t clen;
	uint64_t seq; /* the order units were stored in: the LRU's */
};

struct model {
	zf_store *s;
	zf_store_options o;
	char backing[128];
	uint32_t unit; /* PAGE in split mode */
	unsigned unit_order;
	zf_codec_ctx *ctx;
	uint8_t *data; /* what each page of OWNER holds (valid where a unit is) */
	uint8_t *buf; /* a get's destination: ZF_UNIT_MAX + CANARY_BYTES */
	uint8_t *cbuf, *src;
	struct shadow *u; /* by first page */
	uint64_t seq;
	int may_be_full; /* a put may be refused with -ENOSPC (a limit the model cannot see) */
	/* Folio gets through this reader (its engines decompress), when not NULL. */
	struct store_reader *reader;
	zf_store_stats want;
};

/* Options for a store: unit (0 = split), engines; the rest defaults, but for the codec. */
static zf_store_options opts(uint32_t unit, unsigned engines)
{
	zf_store_options o;

	zf_store_options_init(&o);
	o.codec = test_codec_name(); /* lz4, the default, if the build has it */
	o.unit = unit;
	o.engines = engines;
	return o;
}

static void model_open(struct model *m, const zf_store_options *o)
{
	memset(m, 0, sizeof(*m));
	m->o = *o;
	if (o->backing_path) {
		assert_true(strlen(o->backing_path) < sizeof(m->backing));
		strcpy(m->backing, o->backing_path);
		m->o.backing_path = m->backing;
	}
	m->unit = o->unit ? o->unit : PAGE;
	m->unit_order = (unsigned)__builtin_ctz(m->unit / PAGE);
	assert_int_equal(zf_store_create(&m->o, &m->s), 0);
	{
		const zf_codec *c = NULL;

		assert_int_equal(zf_codec_find(o->codec, &c), 0);
		assert_int_equal(zf_codec_ctx_create(c, &m->ctx), 0);
	}
	m->data = calloc(MODEL_PAGES, PAGE);
	m->buf = malloc(M2 + CANARY_BYTES);
	m->cbuf = malloc(M2);
	m->src = malloc(M2);
	m->u = calloc(MODEL_PAGES, sizeof(*m->u));
	assert_true(m->data && m->buf && m->cbuf && m->src && m->u);
	memset(&m->want, 0, sizeof(m->want));
}

static void model_close(struct model *m)
{
	store_reader_destroy(m->reader);
	zf_store_destroy(m->s);
	zf_codec_ctx_destroy(m->ctx);
	free(m->data);
	free(m->buf);
	free(m->cbuf);
	free(m->src);
	free(m->u);
}

static unsigned order_of(uint32_t bytes)
{
	return (unsigned)__builtin_ctz(bytes / PAGE);
}

/* The unit that holds page p (and its first page), as the store looks it up. */
static struct shadow *model_find(struct model *m, uint64_t p, uint64_t *first)
{
	assert_true(p < MODEL_PAGES);
	for (int o = (int)m->unit_order; o >= 0; o--) {
		const uint64_t f = p & ~(((uint64_t)1 << o) - 1);

		if (m->u[f].present && m->u[f].order == o) {
			if (first)
				*first = f;
			return &m->u[f];
		}
	}
	return NULL;
}

/* What a unit adds to (sign 1) or takes from (-1) the counters while it is stored. */
static void model_count(struct model *m, const struct shadow *u, int sign)
{
	const uint64_t pages = (uint64_t)1 << u->order;
	zf_store_stats *w = &m->want;

	w->stored_pages += sign * pages;
	w->orig_data_size += sign * pages * PAGE;
	w->compr_data_size += sign * (uint64_t)u->clen;
	if (u->kind == K_SAME)
		w->same_filled_pages += sign * pages;
	if (u->kind == K_RAW)
		w->stored_incompressible_pages += sign * pages;
	if (u->wb)
		w->written_back_pages += sign * pages;
}

/* Drops (apply) or counts the units over pages [index, index + pages); returns how many. */
static long model_drop(struct model *m, uint64_t index, uint64_t pages, int apply)
{
	long n = 0;

	for (uint64_t p = index; p < index + pages;) {
		uint64_t first;
		struct shadow *u = model_find(m, p, &first);

		if (!u) {
			p++;
			continue;
		}
		p = first + ((uint64_t)1 << u->order);
		n++;
		if (apply) {
			model_count(m, u, -1);
			m->want.invalidates++;
			memset(u, 0, sizeof(*u));
		}
	}
	return n;
}

/* How the store will keep a unit: same-filled, raw, or compressed to *clen bytes. */
static enum kind classify(struct model *m, const uint8_t *unit_src, uint32_t unit, uint32_t *clen)
{
	const uint32_t threshold = (uint32_t)((uint64_t)unit * m->o.incompressible_pct / 100);
	uint64_t v;
	int r;

	if (zf_same_filled(unit_src, unit, &v)) {
		*clen = 0;
		return K_SAME;
	}
	*clen = unit;
	if (threshold <= 1)
		return K_RAW;
	r = zf_codec_compress(m->ctx, unit_src, unit, m->cbuf, threshold - 1);
	if (r == -E2BIG)
		return K_RAW;
	assert_true(r > 0);
	*clen = (uint32_t)r;
	return K_COMP;
}

/*
 * The model's side of a put of len bytes at src as the folio at index of OWNER, whose
 * result from the store is ret (of zf_store_put, or of zf_store_put_finish: src still
 * holds the folio): checks ret and applies the put. Returns ret.
 */
static int model_put_result(struct model *m, uint64_t index, const uint8_t *src, size_t len,
			    int ret)
{
	const uint32_t unit = (uint32_t)(len < m->unit ? len : m->unit);
	const unsigned n = (unsigned)(len / unit), order = order_of(unit);
	uint8_t kinds[M2 / PAGE];
	uint32_t clens[M2 / PAGE];
	int want = 0;

	assert_true(index + len / PAGE <= MODEL_PAGES);
	for (unsigned i = 0; i < n; i++) {
		kinds[i] = (uint8_t)classify(m, src + (size_t)i * unit, unit, &clens[i]);
		if (kinds[i] == K_RAW && m->o.reject_incompressible) {
			want = -E2BIG;
			break;
		}
	}
	if (m->may_be_full) {
		/* Refused or not, the put found the pool at its limit at most once. */
		const uint64_t hits = stats_of(m->s).pool_limit_hit;

		assert_true(hits - m->want.pool_limit_hit <= 1);
		m->want.pool_limit_hit = hits;
		if (ret == -ENOSPC) {
			m->want.reject_pool_full++;
			return ret;
		}
	}
	assert_int_equal(ret, want);
	if (ret) {
		m->want.reject_compress_poor++; /* the folio is refused at its first such unit */
		return ret;
	}
	model_drop(m, index, len / PAGE, 1);
	for (unsigned i = 0; i < n; i++) {
		struct shadow *u = &m->u[index + (uint64_t)i * (unit / PAGE)];

		*u = (struct shadow){ .present = 1,
				      .order = (uint8_t)order,
				      .kind = kinds[i],
				      .clen = clens[i],
				      .seq = ++m->seq };
		model_count(m, u, 1);
	}
	memcpy(m->data + index * PAGE, src, len);
	m->want.zswpout += len / PAGE;
	m->want.zswpout_units[order] += n;
	return 0;
}

/* Puts len bytes at src as the folio at index of OWNER; returns the store's result. */
static int model_put(struct model *m, uint64_t index, const uint8_t *src, size_t len)
{
	return model_put_result(m, index, src, len, zf_store_put(m->s, OWNER, index, src, len));
}

/* A put of freshly made data. */
static int model_put_data(struct model *m, uint64_t index, size_t len, enum data d, uint64_t seed)
{
	make_data(m->src, len, d, seed);
	return model_put(m, index, m->src, len);
}

/*
 * Gets into m->buf, canaries after it (folio: with zf_store_get_folio): the return must be
 * want, nothing past len written, and on success the bytes must be the pages'.
 */
static int model_call_get(struct model *m, int folio, uint64_t index, size_t len, int want)
{
	int ret;

	memset(m->buf, CANARY, (len < M2 ? len : M2) + CANARY_BYTES);
	if (folio && m->reader)
		ret = store_get_folio_with(m->s, m->reader, OWNER, index, m->buf, len);
	else if (folio)
		ret = zf_store_get_folio(m->s, OWNER, index, m->buf, len);
	else
		ret = zf_store_get(m->s, OWNER, index, m->buf, len);
	assert_int_equal(ret, want);
	for (unsigned i = 0; i < CANARY_BYTES && len <= M2; i++)
		assert_int_equal(m->buf[len + i], CANARY);
	if (!ret)
		assert_memory_equal(m->buf, m->data + index * PAGE, len);
	return ret;
}

/*
 * Gets len bytes at index of OWNER, predicting the result from the model; on success
 * every byte must be the model's and nothing past len may be written. Returns the result.
 */
static int model_get(struct model *m, uint64_t index, size_t len)
{
	uint64_t first = 0;
	const struct shadow *u = model_find(m, index, &first);
	int want = -ENOENT, partial = 0, ret;

	if (u) {
		const size_t unit = (size_t)PAGE << u->order;

		partial = len == PAGE && unit > PAGE;
		want = !partial && (len != unit || index != first) ? -EINVAL : 0;
	}
	ret = model_call_get(m, 0, index, len, want);
	if (ret)
		return ret;
	m->want.zswpin += len / PAGE;
	if (partial) {
		m->want.partial_loads++;
		m->want.swpin_fallback[u->order]++;
	} else {
		m->want.swpin_units[u->order]++;
	}
	m->want.bd_reads += u->wb;
	return 0;
}

/*
 * A folio get: every unit in [index, index + len) whole, in place, or an error at the
 * first page (in order) whose unit is missing or reaches outside the folio. A failed
 * one counts nothing but its failure (no test fails one after a written-back unit).
 */
static int model_get_folio(struct model *m, uint64_t index, size_t len)
{
	const uint64_t pages = len / PAGE;
	uint64_t units[ZF_STORE_ORDERS] = { 0 }, wb = 0;
	int want = 0, ret;

	if (len < PAGE || len > M2 || (len & (len - 1)) || (index & (pages - 1)))
		want = -EINVAL;
	for (uint64_t p = index; !want && p < index + pages;) {
		uint64_t first = 0;
		const struct shadow *u = model_find(m, p, &first);

		if (!u) {
			want = -ENOENT;
		} else if (first != p || p + (1u << u->order) > index + pages) {
			want = -EINVAL;
		} else {
			units[u->order]++;
			wb += u->wb;
			p += 1u << u->order;
		}
	}
	assert_true(!want || !wb);
	ret = model_call_get(m, 1, index, len, want);
	if (ret)
		return ret;
	m->want.zswpin += pages;
	for (unsigned o = 0; o < ZF_STORE_ORDERS; o++)
		m->want.swpin_units[o] += units[o];
	m->want.bd_reads += wb;
	return 0;
}

/* Gets every unit whole, and every page of it alone. */
static void model_get_all(struct model *m)
{
	for (uint64_t p = 0; p < MODEL_PAGES; p++) {
		const struct shadow *u = &m->u[p];

		if (!u->present)
			continue;
		model_get(m, p, (size_t)PAGE << u->order);
		for (uint64_t k = 0; u->order && k < (1u << u->order); k++)
			model_get(m, p + k, PAGE);
	}
}

static long model_invalidate(struct model *m, uint64_t index, uint64_t pages)
{
	const long want = model_drop(m, index, pages, 0);
	long ret;

	ret = zf_store_invalidate(m->s, OWNER, index, pages);

	assert_int_equal(ret, want);
	model_drop(m, index, pages, 1);
	return ret;
}

/* The bytes the pool must at least hold, and whether it holds anything at all. */
static uint64_t model_pool_bytes(const struct model *m, int *any)
{
	uint64_t bytes = 0;

	*any = 0;
	for (uint64_t p = 0; p < MODEL_PAGES; p++) {
		const struct shadow *u = &m->u[p];

		if (u->present && !u->wb && u->kind != K_SAME) {
			bytes += u->clen;
			*any = 1;
		}
	}
	return bytes;
}

/* The store's counters are the model's, its text says the same, the pool is sane. */
static void model_check(struct model *m)
{
	const zf_store_stats st = stats_of(m->s);
	int any;
	const uint64_t pool_bytes = model_pool_bytes(m, &any);

	expect_counters(&st, &m->want);
	assert_int_equal(st.pool_total_size, st.mem_used_total);
	assert_true(st.mem_used_max >= st.mem_used_total);
	assert_int_equal(st.mem_used_total % PAGE, 0);
	assert_true(st.mem_used_total >= pool_bytes);
	if (!any)
		assert_true(st.mem_used_total <= POOL_WARM_MAX);
	else
		assert_true(st.mem_used_total > 0);
	check_text(m->s, &st);
}

static int by_seq(const void *a, const void *b)
{
	const struct shadow *x = *(struct shadow *const *)a, *y = *(struct shadow *const *)b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * zf_store_writeback(bytes), checked against its contract: the units written back are
 * the oldest in the pool (a prefix of the order they were stored in), holding at least
 * bytes of compressed data unless every one went; the return is their pages. Which went
 * is found by reading each pool unit back (bd_reads moves for those in the file).
 */
static long model_writeback_full(struct model *m, uint64_t bytes, int backing_full)
{
	struct shadow **lru = calloc(MODEL_PAGES, sizeof(*lru));
	uint64_t pages = 0, moved = 0;
	unsigned n = 0, written = 0;
	long ret;

	assert_non_null(lru);
	for (uint64_t p = 0; p < MODEL_PAGES; p++) {
		if (m->u[p].present && !m->u[p].wb && m->u[p].kind != K_SAME)
			lru[n++] = &m->u[p];
	}
	qsort(lru, n, sizeof(*lru), by_seq);
	ret = zf_store_writeback(m->s, bytes);
	if (backing_full && ret == -ENOSPC)
		ret = 0; /* see test_writeback_backing_full */
	assert_true(ret >= 0);
	if (backing_full) {
		/* A unit the file has no room for counts too; how many depends on batching. */
		m->want.bd_write_errors = stats_of(m->s).bd_write_errors;
	}
	for (unsigned i = 0; i < n; i++) {
		const uint64_t first = (uint64_t)(lru[i] - m->u);
		const uint64_t reads = stats_of(m->s).bd_reads;
		int wb;

		assert_int_equal(
			zf_store_get(m->s, OWNER, first, m->buf, (size_t)PAGE << lru[i]->order), 0);
		assert_memory_equal(m->buf, m->data + first * PAGE, (size_t)PAGE << lru[i]->order);
		m->want.zswpin += 1u << lru[i]->order;
		m->want.swpin_units[lru[i]->order]++;
		wb = stats_of(m->s).bd_reads != reads;
		if (wb) {
			/* Oldest first: nothing younger went while an older one stayed. */
			assert_int_equal(written, i);
			written++;
			lru[i]->wb = 1;
			pages += 1u << lru[i]->order;
			moved += lru[i]->clen;
			m->want.bd_reads++;
			m->want.bd_writes++;
			m->want.written_back_pages += 1u << lru[i]->order;
			m->want.written_back_total += 1u << lru[i]->order;
		}
	}
	assert_int_equal((uint64_t)ret, pages);
	if (written < n && !backing_full)
		assert_true(moved >= bytes);
	free(lru);
	return ret;
}

static long model_writeback(struct model *m, uint64_t bytes)
{
	return model_writeback_full(m, bytes, 0);
}

/* -------------------------------------------------------------------------------- */
/* Setup                                                                            */
/* -------------------------------------------------------------------------------- */

static int group_setup(void **state)
{
	const char *base = getenv("TMPDIR");

	(void)state;
	if (ZF_IMAGE_ZSTD) {
		if (zf_image_open(ZF_TEST_DATA "/sample.bin.zst", 0, &sample_img))
			return -1;
		sample = zf_image_data(sample_img);
		sample_pages = zf_image_size(sample_img) / PAGE;
	} else {
		/*
		 * The sample is a .zst file, which a build without zstd cannot read: text
		 * pages stand in for it. They compress, less well than the sample (lz4:
		 * 1.6x, the sample 2.7x), and every case checks the store against the model
		 * whatever the data is.
		 */
		uint8_t *standin = malloc(STANDIN_PAGES * PAGE);

		if (!standin)
			return -1;
		for (size_t i = 0; i < STANDIN_PAGES; i++)
			fill_text(standin + i * PAGE, PAGE, 0x5a3913 + i);
		print_message("this build has no zstd to read the sample image: text pages "
			      "stand in for it\n");
		sample = standin;
		sample_pages = STANDIN_PAGES;
	}
	snprintf(tmpdir, sizeof(tmpdir), "%s/zf-store-XXXXXX",
		 base && strlen(base) < 40 ? base : "/tmp");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	if (sample_img)
		zf_image_close(sample_img);
	else
		free((void *)sample);
	return rmdir(tmpdir); /* fails, and so fails the run, if a test left a file behind */
}

/* -------------------------------------------------------------------------------- */
/* Scripted sequences                                                               */
/* -------------------------------------------------------------------------------- */

/*
 * One sequence of puts, gets, replacements and invalidations over every folio size and
 * kind of data, checked step by step. Ends with everything invalidated and the pool
 * empty; leaves the store open for the caller to compare.
 */
static void script(struct model *m)
{
	/* 4 KiB folios: sample, zero, same-filled, random, text, half. */
	model_put_data(m, 0, PAGE, D_SAMPLE, 11);
	model_put_data(m, 1, PAGE, D_ZERO, 0);
	model_put_data(m, 2, PAGE, D_SAME, 0);
	model_put_data(m, 3, PAGE, D_RANDOM, 3);
	model_put_data(m, 4, PAGE, D_TEXT, 4);
	model_put_data(m, 5, PAGE, D_HALF, 5);
	model_check(m);

	/* 16 KiB and 64 KiB folios: sample, mixed pages, all same-filled, random. */
	model_put_data(m, 8, K16, D_SAMPLE, 100);
	model_put_data(m, 16, K64, D_SAMPLE, 200);
	model_put_data(m, 32, K64, D_MIXED, 300);
	model_put_data(m, 48, K64, D_SAME_SEED, 42);
	model_put_data(m, 64, K64, D_SAME_PAGES, 43);
	model_put_data(m, 80, K64, D_RANDOM, 44);
	model_put_data(m, 96, K16, D_ZERO, 0);
	model_check(m);

	/* 2 MiB folios: sample, mixed. */
	model_put_data(m, 512, M2, D_SAMPLE, 1000);
	model_check(m);
	model_put_data(m, 1024, M2, D_MIXED, 2000);
	model_check(m);

	/* Everything reads back, whole and page by page. */
	model_get_all(m);
	model_check(m);

	/* Folio gets: of the folios put, of several folios at once, and bad ones. */
	model_get_folio(m, 0, 4 * PAGE); /* four 4 KiB folios */
	model_get_folio(m, 8, K16);
	model_get_folio(m, 16, K64);
	model_get_folio(m, 0, 32 * PAGE); /* pages 6 and 7 missing: -ENOENT */
	model_get_folio(m, 32, 2 * K64); /* two 64 KiB folios */
	model_get_folio(m, 16, K16); /* inside a 64 KiB unit: -EINVAL in unit:64k+ */
	model_get_folio(m, 512, M2);
	model_get_folio(m, 1024, M2);
	model_get_folio(m, 512, 2 * M2); /* over 2 MiB: -EINVAL */
	model_get_folio(m, 17, K16); /* not aligned */
	model_get_folio(m, 0, 3 * PAGE); /* not a power of two */
	model_get_folio(m, 200, K64); /* nothing there */
	model_check(m);

	/* Bad gets: missing pages, sizes that are not the unit's, a unit's later page. */
	model_get(m, 6, PAGE);
	model_get(m, 200, K64);
	model_get(m, 16, K16);
	model_get(m, 17, K64);
	model_get(m, 512, 2 * PAGE);
	model_get(m, 513, M2);
	model_get(m, 512, M2);
	model_get(m, 528, K64);
	model_get(m, 1, K64);
	model_check(m);

	/* Replacement: the same keys, new content, same sizes. */
	model_put_data(m, 16, K64, D_TEXT, 201);
	model_put_data(m, 0, PAGE, D_RANDOM, 12);
	model_put_data(m, 512, M2, D_SAMPLE, 3000);
	model_check(m);
	model_get_all(m);
	model_check(m);

	/* Replacement by other sizes: a 4 KiB folio inside a unit drops the whole unit; a
	 * larger folio over small units drops them all. */
	model_put_data(m, 20, PAGE, D_SAMPLE, 400);
	model_put_data(m, 32, K16, D_SAMPLE, 500);
	model_put_data(m, 0, K64, D_SAMPLE, 600);
	model_put_data(m, 1024, K64, D_TEXT, 700);
	model_put_data(m, 1536, M2, D_HALF, 800);
	model_check(m);
	model_get_all(m);
	model_check(m);

	/* Invalidation: a page, a range across units, ranges with holes, then all. */
	model_invalidate(m, 5, 1);
	model_invalidate(m, 18, 20);
	model_invalidate(m, 1030, 3);
	model_invalidate(m, 200, 50); /* nothing there */
	model_check(m);
	model_get_all(m);
	model_invalidate(m, 0, MODEL_PAGES);
	model_check(m);
	assert_int_equal(m->want.stored_pages, 0);
	assert_true(stats_of(m->s).mem_used_total <= POOL_WARM_MAX);
	/* Nothing stored: what the pool holds is its warm pages, kept for reuse. */
	assert_int_equal(stats_of(m->s).mem_used_total, stats_of(m->s).warm_pages * PAGE);
	assert_int_equal(model_invalidate(m, 0, MODEL_PAGES), 0);
	/* Compacted, the empty pool gives every page back, counted in pages_compacted. */
	{
		const zf_store_stats before = stats_of(m->s);
		const long given = zf_store_compact(m->s);
		const zf_store_stats after = stats_of(m->s);

		assert_true(given >= 0);
		assert_int_equal(after.mem_used_total, 0);
		assert_int_equal(after.pages_compacted, before.pages_compacted + (uint64_t)given);
		assert_int_equal(before.mem_used_total, (uint64_t)given * PAGE);
		assert_int_equal(after.mem_used_max, before.mem_used_max);
		model_check(m);
	}
	model_get(m, 512, M2);
}

static void run_script(const zf_store_options *o, zf_store_stats *out)
{
	struct model m;

	model_open(&m, o);
	script(&m);
	if (out)
		*out = stats_of(m.s);
	model_close(&m);
}

/* The same script with no engine and with 2 engines: the same counters, all of them. */
static void script_both_engines(uint32_t unit)
{
	zf_store_options o = opts(unit, 0);
	zf_store_stats a, b;

	run_script(&o, &a);
	o.engines = 2;
	run_script(&o, &b);
	expect_counters(&b, &a);
#define CMP(f) expect_counter(#f, b.f, a.f);
	POOL_COUNTERS(CMP)
#undef CMP
}

static void test_split(void **state)
{
	(void)state;
	script_both_engines(0);
}

static void test_unit_16k(void **state)
{
	(void)state;
	script_both_engines(K16);
}

static void test_unit_64k(void **state)
{
	(void)state;
	script_both_engines(K64);
}

static void test_unit_2m(void **state)
{
	(void)state;
	script_both_engines(M2);
}

/* verify decompresses every unit after compressing it: same outcome, same counters. */
static void test_verify(void **state)
{
	zf_store_options o = opts(K64, 0);
	zf_store_stats a, b;

	(void)state;
	run_script(&o, &a);
	o.verify = 1;
	run_script(&o, &b);
	expect_counters(&b, &a);
	o.engines = 2;
	run_script(&o, &b);
	expect_counters(&b, &a);
}

/*
 * Other codecs (the test's state names one; without it in this build the test skips, and
 * says why): the model finds the stored lengths with the same codec.
 */
static void test_codec(void **state)
{
	const char *name = *state;
	zf_store_options o = opts(K16, 2);
	const zf_codec *c;

	if (zf_codec_find(name, &c)) {
		print_message("codec %s is not in this build: skipped\n", name);
		skip();
	}
	o.codec = name;
	run_script(&o, NULL);
}
#define CODEC_TEST(codec)                                                                          \
	{                                                                                          \
		"test_codec " codec, test_codec, NULL, NULL, (void *)(codec)                       \
	}

/* The incompressible threshold at 50 % and at 0 %, against the model. */
static void test_thresholds(void **state)
{
	zf_store_options o = opts(K16, 2);

	(void)state;
	/* Half-compressible pages count as incompressible at 50 %; at 0 % everything does. */
	o.incompressible_pct = 50;
	run_script(&o, NULL);
	o.incompressible_pct = 0;
	run_script(&o, NULL);
}

/* -------------------------------------------------------------------------------- */
/* Unit sizes                                                                       */
/* -------------------------------------------------------------------------------- */

/* The sizes the header promises: min(folio, unit), one entry per unit, keyed by its first page. */
static void test_unit_sizes(void **state)
{
	static const struct {
		uint32_t unit, folio, want_unit;
	} cases[] = {
		{ 0, PAGE, PAGE }, { 0, K64, PAGE },  { 0, M2, PAGE },	  { K16, PAGE, PAGE },
		{ K16, K16, K16 }, { K16, K64, K16 }, { K16, M2, K16 },	  { K64, PAGE, PAGE },
		{ K64, K16, K16 }, { K64, K64, K64 }, { K64, M2, K64 },	  { M2, PAGE, PAGE },
		{ M2, K64, K64 },  { M2, M2, M2 },    { 8192, M2, 8192 },
	};

	(void)state;
	for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const zf_store_options o = opts(cases[c].unit, c % 2 ? 2 : 0);
		const unsigned n = cases[c].folio / cases[c].want_unit;
		const unsigned order = order_of(cases[c].want_unit);
		const uint64_t index = 2 * (M2 / PAGE);
		struct model m;
		zf_store_stats st;

		model_open(&m, &o);
		model_put_data(&m, index, cases[c].folio, D_SAMPLE, c * 977);
		st = stats_of(m.s);
		assert_int_equal(st.zswpout_units[order], n);
		assert_int_equal(st.zswpout, cases[c].folio / PAGE);
		for (uint64_t p = index; p < index + cases[c].folio / PAGE; p++) {
			uint64_t first = UINT64_MAX;

			assert_int_equal(zf_store_unit_size(m.s, OWNER, p, &first),
					 cases[c].want_unit);
			assert_int_equal(first, p & ~(uint64_t)(cases[c].want_unit / PAGE - 1));
		}
		assert_int_equal(zf_store_unit_size(m.s, OWNER, index - 1, NULL), -ENOENT);
		assert_int_equal(
			zf_store_unit_size(m.s, OWNER, index + cases[c].folio / PAGE, NULL),
			-ENOENT);
		assert_int_equal(zf_store_unit_size(m.s, OWNER + 1, index, NULL), -ENOENT);
		model_get_all(&m);
		model_check(&m);
		model_close(&m);
	}
}

/* Keys of different owners never meet. */
static void test_owners(void **state)
{
	zf_store_options o = opts(K64, 0);
	uint8_t *a = malloc(K64), *b = malloc(K64), *out = malloc(K64);
	zf_store *s = NULL;
	zf_store_stats st;

	(void)state;
	assert_true(a && b && out);
	assert_int_equal(zf_store_create(&o, &s), 0);
	make_data(a, K64, D_SAMPLE, 1);
	make_data(b, K64, D_SAMPLE, 2);
	for (uint32_t owner = 0; owner < 64; owner++)
		assert_int_equal(zf_store_put(s, owner, 16, owner % 2 ? b : a, K64), 0);
	assert_int_equal(zf_store_put(s, UINT32_MAX, 16, b, K64), 0);
	for (uint32_t owner = 0; owner < 64; owner++) {
		assert_int_equal(zf_store_get(s, owner, 16, out, K64), 0);
		assert_memory_equal(out, owner % 2 ? b : a, K64);
	}
	assert_int_equal(zf_store_get(s, UINT32_MAX, 20, out, PAGE), 0);
	assert_memory_equal(out, b + 4 * PAGE, PAGE);
	assert_int_equal(zf_store_invalidate(s, 3, 0, 1024), 1);
	assert_int_equal(zf_store_get(s, 3, 16, out, K64), -ENOENT);
	assert_int_equal(zf_store_get(s, 5, 16, out, K64), 0);
	assert_memory_equal(out, b, K64);
	st = stats_of(s);
	assert_int_equal(st.stored_pages, 64 * 16);
	assert_int_equal(st.zswpout_units[4], 65);
	assert_int_equal(st.invalidates, 1);
	zf_store_destroy(s);
	free(a);
	free(b);
	free(out);
}

/* -------------------------------------------------------------------------------- */
/* Same-filled and incompressible units                                             */
/* -------------------------------------------------------------------------------- */

/* Same-filled units of every size: counted, no pool memory, exact bytes back. */
static void test_same_filled(void **state)
{
	static const uint32_t units[] = { 0, K16, K64, M2 };

	(void)state;
	for (unsigned i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		const zf_store_options o = opts(units[i], i % 2);
		struct model m;
		zf_store_stats st;

		model_open(&m, &o);
		model_put_data(&m, 0, PAGE, D_ZERO, 0);
		model_put_data(&m, 1, PAGE, D_SAME, 0);
		model_put_data(&m, 2, PAGE, D_SAME_SEED, 1);
		model_put_data(&m, 16, K64, D_ZERO, 0);
		model_put_data(&m, 32, K64, D_SAME_SEED, 0xfeedULL);
		model_put_data(&m, 512, M2, D_SAME, 0);
		model_put_data(&m, 1024, M2, D_ZERO, 0);
		model_check(&m);
		st = stats_of(m.s);
		assert_int_equal(st.same_filled_pages, 3 + 2 * 16 + 2 * 512);
		assert_int_equal(st.stored_pages, st.same_filled_pages);
		assert_int_equal(st.compr_data_size, 0);
		assert_int_equal(st.mem_used_total, 0);
		assert_int_equal(st.mem_used_max, 0);
		model_get_all(&m);

		/* Pages each same-filled with its own value: a unit of several is not. */
		model_put_data(&m, 64, K64, D_SAME_PAGES, 9);
		model_check(&m);
		st = stats_of(m.s);
		if (!units[i]) {
			assert_int_equal(st.same_filled_pages, 3 + 3 * 16 + 2 * 512);
			assert_int_equal(st.mem_used_total, 0);
		} else {
			assert_int_equal(st.same_filled_pages, 3 + 2 * 16 + 2 * 512);
			assert_true(st.mem_used_total > 0);
		}
		model_get_all(&m);
		model_invalidate(&m, 0, MODEL_PAGES);
		model_check(&m);
		model_close(&m);
	}
}

/* Incompressible units are kept raw: their whole size in compr_data_size and in the pool. */
static void test_incompressible(void **state)
{
	static const uint32_t units[] = { 0, K16, K64, M2 };

	(void)state;
	for (unsigned i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		const zf_store_options o = opts(units[i], i % 2 ? 0 : 2);
		struct model m;
		zf_store_stats st;

		model_open(&m, &o);
		model_put_data(&m, 0, PAGE, D_RANDOM, 1);
		model_put_data(&m, 16, K64, D_RANDOM, 2);
		model_put_data(&m, 512, M2, D_RANDOM, 3);
		model_check(&m);
		st = stats_of(m.s);
		assert_int_equal(st.stored_incompressible_pages, 1 + 16 + 512);
		assert_int_equal(st.compr_data_size, (1 + 16 + 512) * PAGE);
		/* A raw unit fills a zspage of its own, with no header. */
		assert_int_equal(st.mem_used_total, (1 + 16 + 512) * PAGE);
		model_get_all(&m);
		model_invalidate(&m, 0, MODEL_PAGES);
		model_check(&m);
		model_close(&m);
	}
}

/*
 * reject_incompressible: a folio with one incompressible unit is refused whole (-E2BIG,
 * reject_compress_poor), nothing of it is stored and its keys keep their old content.
 */
static void test_reject_incompressible(void **state)
{
	static const uint32_t units[] = { 0, K64 };

	(void)state;
	for (unsigned i = 0; i < 2 * sizeof(units) / sizeof(units[0]); i++) {
		zf_store_options o = opts(units[i / 2], (i % 2) * 2);
		struct model m;
		zf_store_stats before, st;

		o.reject_incompressible = 1;
		model_open(&m, &o);
		model_put_data(&m, 0, K64, D_SAMPLE, 1);
		model_put_data(&m, 512, M2, D_SAMPLE, 2);
		model_put_data(&m, 64, PAGE, D_ZERO, 0);
		model_check(&m);
		before = stats_of(m.s);

		/* Random data where sample was: refused, the old bytes stay. */
		assert_int_equal(model_put_data(&m, 0, K64, D_RANDOM, 3), -E2BIG);
		assert_int_equal(model_put_data(&m, 0, PAGE, D_RANDOM, 4), -E2BIG);
		/* A 2 MiB folio with its last 64 KiB random: refused whole. */
		make_data(m.src, M2, D_SAMPLE, 5);
		fill_random(m.src + M2 - K64, K64, 6);
		assert_int_equal(model_put(&m, 512, m.src, M2), -E2BIG);
		/* Over fresh keys, units stored before the random ones are dropped again. */
		make_data(m.src, M2, D_RANDOM, 7);
		make_data(m.src, M2 / 2, D_SAMPLE, 8);
		assert_int_equal(model_put(&m, 1024, m.src, M2), -E2BIG);
		model_check(&m);
		st = stats_of(m.s);
		assert_int_equal(st.reject_compress_poor, 4);
		assert_int_equal(st.stored_incompressible_pages, 0);
		assert_int_equal(st.stored_pages, before.stored_pages);
		assert_int_equal(st.compr_data_size, before.compr_data_size);
		/* What the refused puts allocated went back (to the pool's warm pages). */
		assert_true(st.mem_used_total <= before.mem_used_total + POOL_WARM_MAX);
		assert_int_equal(st.zswpout, before.zswpout);
		assert_int_equal(st.invalidates, 0);
		assert_int_equal(zf_store_unit_size(m.s, OWNER, 1024, NULL), -ENOENT);
		model_get_all(&m);
		model_check(&m);
		model_close(&m);
	}
}

/*
 * Puts in flight (zf_store_put_start/finish), with and without engines: four 2 MiB
 * folios started at once and finished in order leave what the same puts one after
 * another leave; two puts of the same keys take effect in the order they finish; a
 * refused put in flight takes nothing of the others, and its keys keep what they had.
 */
static void test_put_pipelined(void **state)
{
	static const uint32_t units[] = { 0, K64 };

	(void)state;
	for (unsigned i = 0; i < 2 * sizeof(units) / sizeof(units[0]); i++) {
		zf_store_options o = opts(units[i / 2], (i % 2) * 2);
		zf_store_pending *p[4];
		uint8_t *src[4];
		struct model m;

		o.reject_incompressible = 1;
		model_open(&m, &o);
		for (unsigned k = 0; k < 4; k++) {
			src[k] = malloc(M2);
			assert_non_null(src[k]);
			make_data(src[k], M2, D_SAMPLE, k + 1);
		}
		for (unsigned k = 0; k < 4; k++)
			assert_int_equal(zf_store_put_start(m.s, OWNER, k * 512, src[k], M2, &p[k]),
					 0);
		for (unsigned k = 0; k < 4; k++)
			model_put_result(&m, k * 512, src[k], M2, zf_store_put_finish(p[k]));
		model_check(&m);
		model_get_all(&m);

		/* The same keys twice in flight: the put finished last holds them. */
		make_data(src[0], M2, D_SAMPLE, 11);
		make_data(src[1], M2, D_SAMPLE, 12);
		assert_int_equal(zf_store_put_start(m.s, OWNER, 0, src[0], M2, &p[0]), 0);
		assert_int_equal(zf_store_put_start(m.s, OWNER, 0, src[1], M2, &p[1]), 0);
		model_put_result(&m, 0, src[1], M2, zf_store_put_finish(p[1]));
		model_put_result(&m, 0, src[0], M2, zf_store_put_finish(p[0]));
		model_check(&m);
		model_get_all(&m);

		/* A folio with its last 64 KiB random is refused; the one beside it is not. */
		make_data(src[2], M2, D_SAMPLE, 13);
		fill_random(src[2] + M2 - K64, K64, 14);
		make_data(src[3], M2, D_SAMPLE, 15);
		assert_int_equal(zf_store_put_start(m.s, OWNER, 512, src[2], M2, &p[2]), 0);
		assert_int_equal(zf_store_put_start(m.s, OWNER, 1024, src[3], M2, &p[3]), 0);
		assert_int_equal(model_put_result(&m, 512, src[2], M2, zf_store_put_finish(p[2])),
				 -E2BIG);
		assert_int_equal(model_put_result(&m, 1024, src[3], M2, zf_store_put_finish(p[3])),
				 0);
		model_check(&m);
		model_get_all(&m);

		/* Refused at the start: no put in flight. */
		p[0] = (zf_store_pending *)src[0];
		assert_int_equal(zf_store_put_start(m.s, OWNER, 1, src[0], K64, &p[0]), -EINVAL);
		assert_null(p[0]);
		assert_int_equal(zf_store_put_start(m.s, OWNER, 0, src[0], K64, NULL), -EINVAL);
		assert_int_equal(zf_store_put_start(NULL, OWNER, 0, src[0], K64, &p[0]), -EINVAL);
		assert_null(p[0]);
		assert_int_equal(zf_store_put_finish(NULL), -EINVAL);
		model_check(&m);
		for (unsigned k = 0; k < 4; k++)
			free(src[k]);
		model_close(&m);
	}
}

/* -------------------------------------------------------------------------------- */
/* Writeback                                                                        */
/* -------------------------------------------------------------------------------- */

static zf_store_options wb_opts(uint32_t unit, unsigned engines)
{
	zf_store_options o = opts(unit, engines);

	o.backing_path = tmpdir;
	return o;
}

/* Writeback in LRU order, reads from the backing file, then invalidation and reuse. */
static void test_writeback(void **state)
{
	static const uint32_t units[] = { 0, K64, M2 };

	(void)state;
	for (unsigned i = 0; i < 2 * sizeof(units) / sizeof(units[0]); i++) {
		const zf_store_options o = wb_opts(units[i / 2], (i % 2) * 2);
		struct model m;
		zf_store_stats st;

		model_open(&m, &o);
		/* The oldest unit: writeback(1) takes it, and never a same-filled unit. */
		model_put_data(&m, 1, PAGE, D_ZERO, 0);
		model_put_data(&m, 16, K64, D_SAMPLE, 1);
		assert_true(model_writeback(&m, 1) >= 1);
		model_check(&m);
		if (units[i / 2])
			assert_int_equal(m.want.written_back_pages, 16);

		model_put_data(&m, 0, PAGE, D_SAMPLE, 2);
		model_put_data(&m, 2, PAGE, D_RANDOM, 3);
		model_put_data(&m, 32, K64, D_MIXED, 4);
		model_put_data(&m, 48, K64, D_RANDOM, 5);
		model_put_data(&m, 512, M2, D_SAMPLE, 6);
		model_put_data(&m, 1024, M2, D_MIXED, 7);
		model_check(&m);
		model_writeback(&m, 1);
		model_check(&m);
		model_writeback(&m, 100000);
		model_check(&m);
		/* Everything else. */
		model_writeback(&m, UINT64_MAX);
		model_check(&m);
		st = stats_of(m.s);
		assert_int_equal(st.written_back_pages, st.stored_pages - st.same_filled_pages);
		assert_true(st.mem_used_total <= POOL_WARM_MAX); /* the pool holds nothing */
		assert_int_equal(zf_store_writeback(m.s, UINT64_MAX), 0); /* nothing left */

		/* Reads from the file: whole units and single pages, and whole folios. */
		model_get_all(&m);
		model_get_folio(&m, 0, 2 * PAGE);
		model_get_folio(&m, 16, K64);
		model_get_folio(&m, 32, 2 * K64);
		model_get_folio(&m, 1024, M2);
		model_check(&m);

		/* Replace a written-back unit, invalidate another, write back the newcomer. */
		model_put_data(&m, 16, K64, D_TEXT, 8);
		model_invalidate(&m, 512, 8);
		model_check(&m);
		model_writeback(&m, UINT64_MAX);
		model_get_all(&m);
		model_check(&m);
		model_invalidate(&m, 0, MODEL_PAGES);
		model_check(&m);
		st = stats_of(m.s);
		assert_int_equal(st.written_back_pages, 0);
		assert_true(st.written_back_total > 0);
		/* The slots are free again: a second round fits as well. */
		model_put_data(&m, 512, M2, D_SAMPLE, 9);
		model_writeback(&m, UINT64_MAX);
		model_get_all(&m);
		model_check(&m);
		model_close(&m);
	}
}

/*
 * A backing file with room for a few units: writeback stops early, the units that did not
 * fit stay in the pool (and are written later, once there is room), nothing is lost.
 */
static void test_writeback_backing_full(void **state)
{
	zf_store_options o = wb_opts(0, 0);
	struct model m;
	zf_store_stats st;
	long r;

	(void)state;
	o.backing_bytes = 16 * PAGE;
	model_open(&m, &o);
	for (unsigned i = 0; i < 40; i++)
		model_put_data(&m, i, PAGE, D_RANDOM, i); /* raw: one 4 KiB slot each */
	r = model_writeback_full(&m, UINT64_MAX, 1);
	assert_int_equal(r, 16);
	model_check(&m);
	st = stats_of(m.s);
	assert_int_equal(st.written_back_pages, 16);
	assert_int_equal(st.stored_incompressible_pages, 40);
	assert_true(st.mem_used_total >= 24 * PAGE);
	assert_true(st.mem_used_total <= 24 * PAGE + POOL_WARM_MAX);
	/*
	 * Nothing more fits. The header says writeback returns the pages written (>= 0) or
	 * -ENODEV; store_writeback.c returns the error (-ENOSPC) when not one page could be
	 * written.
	 */
	r = zf_store_writeback(m.s, UINT64_MAX);
	assert_true(r == 0 || r == -ENOSPC);
	model_get_all(&m);

	/* Free slots by invalidating written-back units: the oldest of the rest go. */
	model_invalidate(&m, 0, 8);
	model_writeback_full(&m, UINT64_MAX, 1);
	model_check(&m);
	assert_int_equal(stats_of(m.s).written_back_pages, 16);
	model_get_all(&m);
	model_invalidate(&m, 0, MODEL_PAGES);
	model_check(&m);
	model_close(&m);
}

/*
 * A corrupted object is reported, never returned: the backing file (a named file, so that
 * the test can reach it) gets a byte flipped under a written-back unit; its gets fail with
 * -EBADMSG and count decompress_fail, the other units still read back, and with the byte
 * restored the unit reads back again (the entry stayed).
 */
static void test_writeback_backing_full_counted(void **state)
{
	zf_store_options o = wb_opts(0, 0);
	struct model m;

	(void)state;
	o.backing_bytes = 4 * PAGE;
	model_open(&m, &o);
	for (unsigned i = 0; i < 8; i++)
		model_put_data(&m, i, PAGE, D_RANDOM, i);
	assert_int_equal(model_writeback_full(&m, UINT64_MAX, 1), 4);
	model_get_all(&m);
	model_check(&m);
	assert_true(stats_of(m.s).bd_write_errors > 0);
	model_close(&m);
}

/*
 * A backing file that cannot be read (truncated behind the store's back): the get fails
 * with -EIO, counts bd_read_errors (not decompress_fail, not a read), and the entry stays:
 * with the bytes back in place the same get works.
 */
static void test_backing_read_error(void **state)
{
	char path[128];
	zf_store_options o = opts(K64, 0);
	struct model m;
	uint8_t *saved;
	uint32_t clen;
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "%s/backing.read", tmpdir);
	o.backing_path = path;
	model_open(&m, &o);
	model_put_data(&m, 0, K64, D_SAMPLE, 55);
	model_put_data(&m, 16, K64, D_ZERO, 0);
	clen = m.u[0].clen;
	assert_int_equal(model_writeback(&m, UINT64_MAX), 16);
	model_check(&m);
	saved = malloc(clen);
	assert_non_null(saved);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, saved, clen, 0), clen);
	assert_int_equal(ftruncate(fd, 0), 0);

	assert_int_equal(zf_store_get(m.s, OWNER, 0, m.buf, K64), -EIO);
	assert_int_equal(zf_store_get(m.s, OWNER, 5, m.buf, PAGE), -EIO);
	m.want.bd_read_errors += 2;
	model_check(&m);
	model_get(&m, 16, K64); /* same-filled: no file involved */
	assert_int_equal(zf_store_unit_size(m.s, OWNER, 3, NULL), K64);

	assert_int_equal(pwrite(fd, saved, clen, 0), clen);
	model_get(&m, 0, K64);
	model_get(&m, 5, PAGE);
	model_check(&m);
	close(fd);
	free(saved);
	model_close(&m);
	assert_int_equal(access(path, F_OK), -1);
}

/*
 * Injected I/O errors (store_inject_backing_error): a failed writeback leaves the unit in
 * the pool, counted in bd_write_errors, and the next writeback takes it; a failed read
 * returns -EIO, counted in bd_read_errors, and the entry stays for a retry.
 */
static void test_injected_io_errors(void **state)
{
	zf_store_options o = wb_opts(K64, 0);
	zf_store_stats st;
	uint8_t *src = malloc(K64), *back = malloc(K64);
	zf_store *s;

	(void)state;
	assert_non_null(src);
	assert_non_null(back);
	assert_int_equal(zf_store_create(&o, &s), 0);
	make_data(src, K64, D_SAMPLE, 5);
	assert_int_equal(zf_store_put(s, OWNER, 0, src, K64), 0);
	assert_int_equal(store_inject_backing_error(s, BACKING_WRITE, 0, -EIO), 0);
	assert_int_equal(zf_store_writeback(s, UINT64_MAX), -EIO);
	st = stats_of(s);
	assert_int_equal(st.bd_write_errors, 1);
	assert_int_equal(st.written_back_pages, 0);
	assert_int_equal(zf_store_get(s, OWNER, 0, back, K64), 0);
	assert_memory_equal(back, src, K64);
	assert_int_equal(zf_store_writeback(s, UINT64_MAX), 16);
	assert_int_equal(stats_of(s).written_back_pages, 16);

	assert_int_equal(store_inject_backing_error(s, BACKING_READ, 0, -EIO), 0);
	assert_int_equal(zf_store_get(s, OWNER, 0, back, K64), -EIO);
	st = stats_of(s);
	assert_int_equal(st.bd_read_errors, 1);
	assert_int_equal(st.decompress_fail, 0);
	assert_int_equal(st.stored_pages, 16);
	assert_int_equal(zf_store_get(s, OWNER, 3, back, PAGE), 0);
	assert_memory_equal(back, src + 3 * PAGE, PAGE);
	assert_int_equal(zf_store_get(s, OWNER, 0, back, K64), 0);
	assert_memory_equal(back, src, K64);
	st = stats_of(s);
	assert_int_equal(st.bd_reads, 2);
	assert_int_equal(st.partial_loads, 1);
	zf_store_destroy(s);

	o = opts(0, 0);
	assert_int_equal(zf_store_create(&o, &s), 0);
	assert_int_equal(store_inject_backing_error(s, BACKING_READ, 0, -EIO), -ENODEV);
	zf_store_destroy(s);
	free(src);
	free(back);
}

static void test_checksum_mismatch(void **state)
{
	char path[128];
	zf_store_options o;
	struct model m;
	zf_store_stats st;
	uint32_t clen;
	uint8_t byte, bad;
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "%s/backing.file", tmpdir);
	o = opts(K64, 0);
	o.backing_path = path;
	model_open(&m, &o);
	model_put_data(&m, 0, K64, D_SAMPLE, 77);
	clen = m.u[0].clen;
	assert_int_equal(m.u[0].kind, K_COMP);
	assert_int_equal(model_writeback(&m, UINT64_MAX), 16);
	model_put_data(&m, 16, K64, D_SAMPLE, 78);
	model_put_data(&m, 32, K64, D_SAMPLE, 79);
	model_writeback(&m, 1); /* at least unit 16 goes to the file too */
	model_check(&m);

	/* The first unit written back is at the start of the file. */
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &byte, 1, clen / 2), 1);
	bad = (uint8_t)~byte;
	assert_int_equal(pwrite(fd, &bad, 1, clen / 2), 1);

	memset(m.buf, CANARY, K64);
	assert_int_equal(zf_store_get(m.s, OWNER, 0, m.buf, K64), -EBADMSG);
	assert_int_equal(zf_store_get(m.s, OWNER, 3, m.buf, PAGE), -EBADMSG);
	m.want.decompress_fail += 2;
	m.want.bd_reads += 2; /* the reads themselves worked */
	model_check(&m);
	st = stats_of(m.s);
	assert_int_equal(st.decompress_fail, 2);
	assert_int_equal(st.bd_read_errors, 0);
	assert_int_equal(st.zswpin, m.want.zswpin); /* a failed get reads nothing in */
	/* The other units are fine. */
	model_get(&m, 16, K64);
	model_get(&m, 32, K64);
	model_get(&m, 40, PAGE);
	/* Restored, the unit reads back: the entry was kept. */
	assert_int_equal(pwrite(fd, &byte, 1, clen / 2), 1);
	model_get(&m, 0, K64);
	model_get(&m, 15, PAGE);
	model_check(&m);
	close(fd);
	model_invalidate(&m, 0, MODEL_PAGES);
	model_check(&m);
	model_close(&m);
	/* The store created the file, so it is gone with the store. */
	assert_int_equal(access(path, F_OK), -1);
}

/*
 * A folio get whose unit at some place fails its check: -EBADMSG, decompress_fail once,
 * nothing read in, and no pin left on the pool, wherever the unit lies (first or last of
 * a group of pins, in the first or a later batch of lookups); with the byte restored the
 * folio reads back whole. Split mode and 16 KiB units, 2 MiB and 64 KiB folios; in the
 * calling thread, or (engines) through a reader whose gets decompress on two engines.
 */
static void folio_get_corrupt(unsigned engines)
{
	static const uint32_t units[] = { 0, K16 };
	static const unsigned at[] = { 0, 3, 4, 9, 63, 64, 200, 511 };

	for (unsigned u = 0; u < 2; u++) {
		zf_store_options o = opts(units[u], engines);
		struct model m;

		model_open(&m, &o);
		if (engines)
			assert_int_equal(store_reader_create(m.s, &m.reader), 0);
		model_put_data(&m, 0, K64, D_SAMPLE, 21);
		model_put_data(&m, 512, M2, D_SAMPLE, 22);
		for (unsigned i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
			const uint64_t base = at[i] < 16 ? 0 : 512, len = base ? M2 : K64;
			const uint64_t end = base + len / PAGE;
			uint64_t p = base + at[i];

			/* The compressed unit nearest to there (store_corrupt needs one). */
			while (p < end && m.u[p].kind != K_COMP)
				p++;
			while (p == end || m.u[p].kind != K_COMP)
				assert_true(p-- > base);
			assert_int_equal(store_corrupt(m.s, OWNER, p), 0);
			memset(m.buf, CANARY, len);
			assert_int_equal(m.reader
						 ? store_get_folio_with(m.s, m.reader, OWNER, base,
									m.buf, len)
						 : zf_store_get_folio(m.s, OWNER, base, m.buf, len),
					 -EBADMSG);
			m.want.decompress_fail++;
			model_check(&m);
			assert_int_equal(store_pool_pins(m.s), 0);
			assert_int_equal(store_corrupt(m.s, OWNER, p), 0); /* flipped back */
			model_get_folio(&m, base, len);
			assert_int_equal(store_pool_pins(m.s), 0);
		}
		model_check(&m);
		model_close(&m);
	}
}

static void test_folio_get_corrupt(void **state)
{
	(void)state;
	folio_get_corrupt(0);
}

static void test_folio_get_corrupt_engines(void **state)
{
	(void)state;
	folio_get_corrupt(2);
}

/*
 * Folio gets whose engines decompress, through a reader (what a region with frames does)
 * and through zf_store_get_folio() (2 MiB folios): every kind of unit (compressed, raw,
 * same-filled, zero, written back) comes back in place, in split mode, 16 KiB, 64 KiB and
 * 2 MiB units, with two engines and one, and the counters are a serial get's; the 2 MiB
 * folios of several units ran jobs on the engines.
 */
static void test_folio_get_engines(void **state)
{
	static const uint32_t units[] = { 0, K16, K64, M2 };
	static const enum data kinds[][3] = { { D_MIXED, D_SAMPLE, D_RANDOM },
					      { D_ZERO, D_HALF, D_SAME_PAGES } };

	(void)state;
	for (unsigned e = 1; e <= 2; e++) {
		for (unsigned u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
			/* Through a reader (the region's way), then zf_store_get_folio(). */
			for (int reader = 1; reader >= 0; reader--) {
				zf_store_options o = wb_opts(units[u], e);
				zf_engines_stats before, after;
				struct model m;

				model_open(&m, &o);
				if (reader)
					assert_int_equal(store_reader_create(m.s, &m.reader), 0);
				for (unsigned k = 0; k < 3; k++)
					model_put_data(&m, 512 * k, M2, kinds[e - 1][k], 40 + k);
				model_put_data(&m, 512 * 3, K64, D_MIXED, 50);
				/* Some of it written back: read from the file, in the same get. */
				assert_true(model_writeback(&m, 256 * 1024) > 0);
				assert_int_equal(store_engines_stats(m.s, &before), 0);
				for (unsigned k = 0; k < 3; k++)
					model_get_folio(&m, 512 * k, M2);
				assert_int_equal(store_engines_stats(m.s, &after), 0);
				/* A 2 MiB folio of several compressed units went on the engines. */
				if (units[u] < M2)
					assert_true(after.jobs > before.jobs);
				model_get_folio(&m, 512 * 3, K64);
				model_get_folio(&m, 512 * 3 + 16, K64); /* nothing there: -ENOENT */
				assert_int_equal(store_pool_pins(m.s), 0);
				model_check(&m);
				model_close(&m);
			}
		}
	}
}

/* -------------------------------------------------------------------------------- */
/* The pool limit                                                                   */
/* -------------------------------------------------------------------------------- */

/* Invalidates a unit of the limit tests, compacting after it when asked to. */
static void limit_drop(struct model *m, uint64_t index, int compact)
{
	model_invalidate(m, index, 1);
	if (compact)
		assert_true(zf_store_compact(m->s) >= 0);
}

/*
 * Reject policy with raw 64 KiB units (16 pool pages each, exactly, and nothing else in
 * the pool), limit 1 MiB, accept threshold 90 %: 16 units fill the pool; then every put
 * is refused (pool_limit_hit counts each put that finds the pool at the limit,
 * reject_pool_full every refusal), also with 15 units (under the limit, above 90 % of it);
 * with 14 units puts are accepted again, until the limit. compact: the test compacts the
 * pool after each invalidation (zf_store_compact), else it leaves it to the store.
 */
static void limit_reject(int compact)
{
	zf_store_options o = opts(K64, 0);
	struct model m;
	zf_store_stats st;
	uint64_t index = 0;

	o.max_pool_bytes = 1u << 20;
	model_open(&m, &o);
	for (unsigned i = 0; i < 16; i++, index += 16) {
		assert_int_equal(model_put_data(&m, index, K64, D_RANDOM, i), 0);
		assert_int_equal(stats_of(m.s).mem_used_total, (i + 1) * K64);
	}
	model_check(&m);

	/* Full: refused, whatever the data, and the keys keep what they had. */
	make_data(m.src, K64, D_RANDOM, 100);
	assert_int_equal(zf_store_put(m.s, OWNER, index, m.src, K64), -ENOSPC);
	assert_int_equal(zf_store_put(m.s, OWNER, 0, m.src, K64), -ENOSPC);
	make_data(m.src, PAGE, D_ZERO, 0);
	assert_int_equal(zf_store_put(m.s, OWNER, index, m.src, PAGE), -ENOSPC);
	m.want.pool_limit_hit += 3;
	m.want.reject_pool_full += 3;
	model_check(&m);
	model_get(&m, 0, K64);
	assert_int_equal(zf_store_unit_size(m.s, OWNER, index, NULL), -ENOENT);

	/* 15 units: under the limit, above the threshold: still refused, no limit hit. */
	limit_drop(&m, 0, compact);
	if (compact)
		assert_int_equal(stats_of(m.s).mem_used_total, 15 * K64);
	make_data(m.src, K64, D_SAMPLE, 101);
	assert_int_equal(zf_store_put(m.s, OWNER, 0, m.src, K64), -ENOSPC);
	m.want.reject_pool_full++;
	model_check(&m);

	/* 14 units: under 90 %: accepted, and again until the limit. */
	limit_drop(&m, 16, compact);
	assert_int_equal(model_put_data(&m, 0, K64, D_RANDOM, 200), 0);
	assert_int_equal(model_put_data(&m, 16, K64, D_RANDOM, 201), 0);
	assert_int_equal(stats_of(m.s).mem_used_total, 16 * K64);
	model_check(&m);
	assert_int_equal(zf_store_put(m.s, OWNER, index, m.src, K64), -ENOSPC);
	m.want.pool_limit_hit++;
	m.want.reject_pool_full++;
	/* Same-filled units need no pool memory, but a full store takes nothing. */
	limit_drop(&m, 0, compact);
	make_data(m.src, K64, D_ZERO, 0);
	assert_int_equal(zf_store_put(m.s, OWNER, index, m.src, K64), -ENOSPC);
	m.want.reject_pool_full++;
	model_check(&m);
	st = stats_of(m.s);
	assert_int_equal(st.pool_limit_hit, 4);
	assert_int_equal(st.reject_pool_full, 6);
	model_get_all(&m);
	model_invalidate(&m, 0, MODEL_PAGES);
	if (compact)
		assert_true(zf_store_compact(m.s) > 0);
	model_check(&m);
	/* Empty: accepted. */
	assert_int_equal(model_put_data(&m, 0, K64, D_SAMPLE, 300), 0);
	model_check(&m);
	model_close(&m);
}

static void test_limit_reject(void **state)
{
	(void)state;
	limit_reject(1);
}

static void test_limit_reject_no_compact(void **state)
{
	(void)state;
	limit_reject(0);
}

/*
 * Reject policy with compressible sample data (objects share zspages): puts go in while
 * the pool is under the limit and are refused from the put that finds it at the limit;
 * invalidating whole folios, oldest first, frees zspages: puts stay refused until the
 * pool is under the threshold, and are accepted from there. compact: the test compacts
 * (before each put once the pool is at the limit, and after each invalidation) and knows
 * the pool's size at each put; else the store is on its own, and all the test can ask
 * is that it refuses from some point, accepts again once enough is invalidated, and
 * counts what it did.
 */
static void limit_reject_sample(int compact)
{
	const uint64_t max = 1u << 20;
	zf_store_options o = opts(0, 2);
	struct model m;
	uint64_t index = 0, used;
	unsigned puts = 0;
	int accepted = 0;

	o.max_pool_bytes = max;
	model_open(&m, &o);
	m.may_be_full = !compact;
	for (;; index += 16) {
		assert_true(index + 16 <= MODEL_PAGES);
		make_data(m.src, K64, D_SAMPLE, index);
		if (!compact) {
			if (model_put(&m, index, m.src, K64) == -ENOSPC)
				break;
			puts++;
			continue;
		}
		used = stats_of(m.s).mem_used_total;
		if (used >= max) {
			/* Packed tight, so that one folio less is not 10 % less. */
			assert_true(zf_store_compact(m.s) >= 0);
			used = stats_of(m.s).mem_used_total;
		}
		if (used >= max)
			break;
		assert_int_equal(model_put(&m, index, m.src, K64), 0);
		puts++;
	}
	assert_true(puts > 4);
	if (compact) {
		assert_int_equal(zf_store_put(m.s, OWNER, index, m.src, K64), -ENOSPC);
		m.want.pool_limit_hit++;
		m.want.reject_pool_full++;
	}
	model_check(&m);

	for (uint64_t k = 0; k < index && !accepted; k += 16) {
		model_invalidate(&m, k, 16);
		if (!compact) {
			accepted = model_put(&m, index, m.src, K64) == 0;
		} else {
			assert_true(zf_store_compact(m.s) >= 0);
			used = stats_of(m.s).mem_used_total;
			accepted = used <= max / 10 * 9;
			if (accepted) {
				assert_int_equal(model_put(&m, index, m.src, K64), 0);
			} else {
				assert_int_equal(zf_store_put(m.s, OWNER, index, m.src, K64),
						 -ENOSPC);
				m.want.pool_limit_hit += used >= max;
				m.want.reject_pool_full++;
			}
		}
		if (accepted)
			print_message("pool under the threshold after %llu of %u folios dropped\n",
				      (unsigned long long)(k / 16 + 1), puts);
		model_check(&m);
	}
	assert_true(accepted);
	model_get_all(&m);
	model_invalidate(&m, 0, MODEL_PAGES);
	model_check(&m);
	model_close(&m);
}

static void test_limit_reject_sample(void **state)
{
	(void)state;
	limit_reject_sample(1);
}

static void test_limit_reject_sample_no_compact(void **state)
{
	(void)state;
	limit_reject_sample(0);
}

/*
 * Writeback policy: with a 1 MiB limit, 4 MiB of incompressible and sample folios all go
 * in; the oldest units go to the backing file, the pool stays near the limit, every byte
 * reads back (from the pool or the file), and nothing is refused.
 */
static void test_limit_writeback(void **state)
{
	const uint64_t max = 1u << 20;
	const uint32_t units[] = { 0, K64 };

	(void)state;
	for (unsigned i = 0; i < 4; i++) {
		zf_store_options o = wb_opts(units[i / 2], (i % 2) * 2);
		struct model m;
		zf_store_stats st;
		uint64_t wb_before = 0;

		o.max_pool_bytes = max;
		o.when_full = ZF_STORE_WRITEBACK;
		model_open(&m, &o);
		for (unsigned k = 0; k < 64; k++) {
			uint64_t used = stats_of(m.s).mem_used_total;

			make_data(m.src, K64, k % 2 ? D_RANDOM : D_SAMPLE, k);
			assert_int_equal(zf_store_put(m.s, OWNER, k * 16, m.src, K64), 0);
			memcpy(m.data + k * 16 * PAGE, m.src, K64);
			st = stats_of(m.s);
			assert_int_equal(st.reject_pool_full, 0);
			assert_int_equal(st.stored_pages, (k + 1) * 16);
			assert_int_equal(st.orig_data_size, (k + 1) * K64);
			assert_true(st.written_back_pages <= st.stored_pages);
			assert_int_equal(st.written_back_total, st.written_back_pages);
			assert_int_equal(st.bd_write_errors, 0);
			if (used >= max) {
				/* The put that found the pool full wrote back first. */
				assert_true(st.written_back_pages > wb_before);
				assert_true(st.mem_used_total <= max + K64);
			}
			wb_before = st.written_back_pages;
		}
		st = stats_of(m.s);
		assert_true(st.pool_limit_hit > 0);
		assert_true(st.written_back_pages > 0);
		assert_true(st.bd_writes > 0);
		assert_int_equal(st.zswpout, 64 * 16);
		assert_true(st.mem_used_max <= max + K64);
		for (unsigned k = 0; k < 64; k++) {
			memset(m.buf, 0, K64);
			if (units[i / 2]) {
				assert_int_equal(zf_store_get(m.s, OWNER, k * 16, m.buf, K64), 0);
			} else {
				for (unsigned p = 0; p < 16; p++)
					assert_int_equal(zf_store_get(m.s, OWNER, k * 16 + p,
								      m.buf + p * PAGE, PAGE),
							 0);
			}
			assert_memory_equal(m.buf, m.data + k * 16 * PAGE, K64);
		}
		st = stats_of(m.s);
		assert_true(st.bd_reads > 0);
		assert_int_equal(st.decompress_fail + st.bd_read_errors, 0);
		assert_int_equal(zf_store_invalidate(m.s, OWNER, 0, MODEL_PAGES),
				 units[i / 2] ? 64 : 64 * 16);
		st = stats_of(m.s);
		assert_int_equal(st.stored_pages + st.written_back_pages + st.compr_data_size +
					 st.stored_incompressible_pages,
				 0);
		assert_true(st.mem_used_total <= POOL_WARM_MAX);
		model_close(&m);
	}
}

/* -------------------------------------------------------------------------------- */
/* Bad arguments                                                                    */
/* -------------------------------------------------------------------------------- */

/*
 * A thread that puts one folio at a time helps the engines compress, even as many
 * engines as CPUs, which a thread with puts in flight leaves alone (store_put.c): of 64
 * puts of 2 MiB folios of 64 KiB units, jobs run by the putting thread. Waiting instead,
 * it runs none (jobs_by_waiters 0); helping, it claims a job microseconds after the
 * submit, while an engine takes about a hundred to compress one.
 */
static void test_sync_put_helps(void **state)
{
	const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	zf_store_options o = opts(K64, cpus > 2 ? (unsigned)cpus : 2);
	uint8_t *buf = malloc(M2);
	zf_engines_stats es;
	zf_store *s;

	(void)state;
	assert_non_null(buf);
	make_data(buf, M2, D_SAMPLE, 5);
	assert_int_equal(zf_store_create(&o, &s), 0);
	for (uint64_t i = 0; i < 64; i++)
		assert_int_equal(zf_store_put(s, 1, i * (M2 / PAGE), buf, M2), 0);
	assert_int_equal(store_engines_stats(s, &es), 0);
	assert_int_equal(es.jobs, 64 * (M2 / K64));
	assert_true(es.jobs_by_waiters > 0);
	assert_int_equal(es.jobs_by_engines + es.jobs_by_waiters, es.jobs);
	zf_store_destroy(s);
	free(buf);
}

/*
 * meta_bytes: the table's entries and buckets and the pool's bookkeeping. Each unit held
 * adds at least an entry; invalidating them all takes the entries back (the buckets the
 * table grew stay).
 */
static void test_meta_bytes(void **state)
{
	zf_store_options o = opts(K64, 0);
	uint8_t *buf = malloc(M2);
	const uint64_t units = 64 * (M2 / K64);
	zf_store_stats empty, full, after;
	zf_store *s;

	(void)state;
	assert_non_null(buf);
	make_data(buf, M2, D_SAMPLE, 7);
	assert_int_equal(zf_store_create(&o, &s), 0);
	empty = stats_of(s);
	assert_true(empty.meta_bytes > 0); /* the buckets */
	for (uint64_t i = 0; i < 64; i++)
		assert_int_equal(zf_store_put(s, 1, i * (M2 / PAGE), buf, M2), 0);
	full = stats_of(s);
	assert_true(full.meta_bytes >= empty.meta_bytes + units * 64);
	zf_store_invalidate(s, 1, 0, 64 * (M2 / PAGE));
	after = stats_of(s);
	assert_true(after.meta_bytes < full.meta_bytes - units * 64 + 1);
	zf_store_destroy(s);
	free(buf);
}

static void test_bad_args(void **state)
{
	zf_store_options o;
	zf_store *s = NULL;
	zf_store_stats st;
	uint8_t *buf = calloc(1, 2 * M2);
	char path[128];

	(void)state;
	assert_non_null(buf);
	zf_store_destroy(NULL);

	/* create */
	assert_int_equal(zf_store_create(NULL, NULL), -EINVAL);
	o = opts(0, 0);
	assert_int_equal(zf_store_create(&o, NULL), -EINVAL);
	{
		static const uint32_t bad_units[] = { PAGE, 3 * PAGE, 12288, 2 * M2, 1, 6000 };

		for (unsigned i = 0; i < sizeof(bad_units) / sizeof(bad_units[0]); i++) {
			o = opts(bad_units[i], 0);
			assert_int_equal(zf_store_create(&o, &s), -EINVAL);
		}
	}
	o = opts(0, ZF_ENGINES_MAX + 1);
	assert_int_equal(zf_store_create(&o, &s), -EINVAL);
	o = opts(0, 0);
	o.accept_threshold_pct = 101;
	assert_int_equal(zf_store_create(&o, &s), -EINVAL);
	o = opts(0, 0);
	o.incompressible_pct = 101;
	assert_int_equal(zf_store_create(&o, &s), -EINVAL);
	o = opts(0, 0);
	o.codec = NULL;
	assert_int_equal(zf_store_create(&o, &s), -EINVAL);
	o = opts(0, 0);
	o.codec = "no-such-codec";
	assert_int_equal(zf_store_create(&o, &s), -ENOENT);
	o = opts(0, 0);
	o.codec = "none:3"; /* none has no level */
	assert_int_equal(zf_store_create(&o, &s), -EINVAL);
	o = opts(0, 0);
	o.when_full = (enum zf_store_when_full)2;
	assert_int_equal(zf_store_create(&o, &s), -EINVAL);
	o = opts(0, 0);
	o.struct_size = 0;
	assert_int_equal(zf_store_create(&o, &s), -EINVAL);
	/* A larger struct, from a newer header: fine while what this library does not know is
	 * zero, -E2BIG once it is set. */
	{
		struct {
			zf_store_options o;
			uint64_t newer;
		} big = { .o = opts(0, 0), .newer = 0 };

		big.o.struct_size = sizeof(big);
		assert_int_equal(zf_store_create(&big.o, &s), 0);
		zf_store_destroy(s);
		big.newer = 1;
		assert_int_equal(zf_store_create(&big.o, &s), -E2BIG);
	}
	o = opts(0, 0);
	snprintf(path, sizeof(path), "%s/no/such/dir", tmpdir);
	o.backing_path = path;
	assert_int_equal(zf_store_create(&o, &s), -ENOENT);
	/* Two stores on one backing file: the second is refused. */
	{
		zf_store *first = NULL;

		o = opts(0, 0);
		snprintf(path, sizeof(path), "%s/busy.file", tmpdir);
		o.backing_path = path;
		assert_int_equal(zf_store_create(&o, &first), 0);
		assert_int_equal(zf_store_create(&o, &s), -EBUSY);
		zf_store_destroy(first);
		assert_int_equal(access(path, F_OK), -1);
	}
	/* A size the struct never had (it cuts the options short): refused, not half read. */
	o = opts(0, 0);
	o.struct_size = offsetof(zf_store_options, engines);
	assert_int_equal(zf_store_create(&o, &s), -EINVAL);
	/* No options: the defaults, whose codec, lz4, a build without it refuses as missing. */
	if (strcmp(test_codec_name(), "lz4")) {
		print_message("codec lz4 is not in this build: the default options are refused\n");
		assert_int_equal(zf_store_create(NULL, &s), -ENOTSUP);
	} else {
		assert_int_equal(zf_store_create(NULL, &s), 0);
		zf_store_destroy(s);
	}

	o = opts(K64, 0);
	s = NULL;
	assert_int_equal(zf_store_create(&o, &s), 0);
	make_data(buf, M2, D_SAMPLE, 1);

	/* put: lengths, alignment, NULLs */
	{
		static const size_t bad_lens[] = { 0,	  1,	  4095,	  4097,	    3 * PAGE,
						   12288, 100000, 2 * M2, M2 + PAGE };

		for (unsigned i = 0; i < sizeof(bad_lens) / sizeof(bad_lens[0]); i++)
			assert_int_equal(zf_store_put(s, OWNER, 0, buf, bad_lens[i]), -EINVAL);
	}
	assert_int_equal(zf_store_put(s, OWNER, 1, buf, 2 * PAGE), -EINVAL);
	assert_int_equal(zf_store_put(s, OWNER, 8, buf, K64), -EINVAL);
	assert_int_equal(zf_store_put(s, OWNER, 256, buf, M2), -EINVAL);
	assert_int_equal(zf_store_put(s, OWNER, 0, NULL, PAGE), -EINVAL);
	assert_int_equal(zf_store_put(NULL, OWNER, 0, buf, PAGE), -EINVAL);

	/* get, unit_size, invalidate of nothing */
	assert_int_equal(zf_store_get(s, OWNER, 0, buf, PAGE), -ENOENT);
	assert_int_equal(zf_store_get(s, OWNER, 0, buf, K64), -ENOENT);
	assert_int_equal(zf_store_get(NULL, OWNER, 0, buf, PAGE), -EINVAL);
	assert_int_equal(zf_store_unit_size(s, OWNER, 0, NULL), -ENOENT);
	assert_int_equal(zf_store_unit_size(NULL, OWNER, 0, NULL), -EINVAL);
	assert_int_equal(zf_store_invalidate(s, OWNER, 0, 1024), 0);
	assert_int_equal(zf_store_invalidate(s, OWNER, 0, 0), 0);
	assert_int_equal(zf_store_invalidate(NULL, OWNER, 0, 1), -EINVAL);

	/* a stored 64 KiB unit: only 4096 at any of its pages or 64 KiB at its first */
	assert_int_equal(zf_store_put(s, OWNER, 16, buf, K64), 0);
	assert_int_equal(zf_store_get(s, OWNER, 16, NULL, K64), -EINVAL);
	assert_int_equal(zf_store_get(s, OWNER, 16, buf + M2, 0), -EINVAL);
	assert_int_equal(zf_store_get(s, OWNER, 16, buf + M2, 2 * PAGE), -EINVAL);
	assert_int_equal(zf_store_get(s, OWNER, 16, buf + M2, K16), -EINVAL);
	assert_int_equal(zf_store_get(s, OWNER, 16, buf + M2, 2 * K64), -EINVAL);
	assert_int_equal(zf_store_get(s, OWNER, 16, buf + M2, M2), -EINVAL);
	assert_int_equal(zf_store_get(s, OWNER, 17, buf + M2, K64), -EINVAL);
	assert_int_equal(zf_store_get(s, OWNER, 16, buf + M2, 5000), -EINVAL);
	assert_int_equal(zf_store_get(s, OWNER, 32, buf + M2, PAGE), -ENOENT);
	assert_int_equal(zf_store_get(s, OWNER, 31, buf + M2, PAGE), 0);
	assert_memory_equal(buf + M2, buf + 15 * PAGE, PAGE);

	/* no backing: writeback has nowhere to go */
	assert_int_equal(zf_store_writeback(s, UINT64_MAX), -ENODEV);
	assert_int_equal(zf_store_writeback(NULL, 1), -EINVAL);

	/* Nothing a refused call did was counted. */
	st = stats_of(s);
	assert_int_equal(st.zswpout, 16);
	assert_int_equal(st.zswpin, 1);
	assert_int_equal(st.stored_pages, 16);
	assert_int_equal(st.partial_loads, 1);
	assert_int_equal(st.swpin_fallback[4], 1);
	assert_int_equal(st.swpin_units[4], 0);
	assert_int_equal(st.invalidates + st.decompress_fail + st.reject_alloc_fail +
				 st.reject_compress_fail + st.reject_compress_poor +
				 st.reject_pool_full + st.pool_limit_hit + st.bd_reads +
				 st.bd_writes,
			 0);
	zf_store_destroy(s);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_unit_sizes),
		cmocka_unit_test(test_owners),
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_unit_16k),
		cmocka_unit_test(test_unit_64k),
		cmocka_unit_test(test_unit_2m),
		cmocka_unit_test(test_verify),
		CODEC_TEST("zstd:1"),
		CODEC_TEST("lzo"),
		CODEC_TEST("deflate:6"),
		CODEC_TEST("none"),
		cmocka_unit_test(test_thresholds),
		cmocka_unit_test(test_same_filled),
		cmocka_unit_test(test_incompressible),
		cmocka_unit_test(test_reject_incompressible),
		cmocka_unit_test(test_put_pipelined),
		cmocka_unit_test(test_writeback),
		cmocka_unit_test(test_writeback_backing_full),
		cmocka_unit_test(test_writeback_backing_full_counted),
		cmocka_unit_test(test_backing_read_error),
		cmocka_unit_test(test_checksum_mismatch),
		cmocka_unit_test(test_folio_get_corrupt),
		cmocka_unit_test(test_folio_get_corrupt_engines),
		cmocka_unit_test(test_folio_get_engines),
		cmocka_unit_test(test_injected_io_errors),
		cmocka_unit_test(test_limit_reject),
		cmocka_unit_test(test_limit_reject_no_compact),
		cmocka_unit_test(test_limit_reject_sample),
		cmocka_unit_test(test_limit_reject_sample_no_compact),
		cmocka_unit_test(test_limit_writeback),
		cmocka_unit_test(test_sync_put_helps),
		cmocka_unit_test(test_meta_bytes),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
