/*
 * bench_store.c - "zfolio bench store": the store's throughput, ratio and get latency on
 * memory images, beside the bare codec doing the same work.
 *
 * For each configuration (image, codec, layout, folio size, engines) it puts every
 * folio of the image into a fresh zf_store and gets every folio back (zf_store_get_folio;
 * --get unit: a zf_store_get() per unit), verifying every byte, and reports put and get
 * MB/s (median of --repeat passes), the ratio, the pool's memory and the store's
 * counters. In the same run, a bare loop over the codec
 * (zf_codec_compress / zf_codec_decompress on the same units, same-filled units skipped
 * as the store skips them) gives the ceiling the store's own work can approach: the
 * store's overhead is the difference. The two take turns every PAIR_CHUNK of the image
 * (paired_pass()), and the reported fraction is the median of the passes' ratios:
 * measured apart, the two had this VM's hiccups and drift between them.
 *
 * Get latency: --gets single-unit gets at random places, each timed, on the idle store,
 * then again while another thread keeps putting 2 MiB folios into the same store (its
 * engines busy), three times over: the medians of the rounds' p50 and p99. A get
 * decompresses in its own thread, so it should not queue behind the compressions (the
 * lesson of the Linux IAA batching series).
 *
 * With engines, the ceiling of a parallel put is what the machine gives two bare codec
 * loops compressing disjoint halves of the image at once, against one loop: on a 2-vCPU
 * VM it has been 1.5-1.95x, not 2x. The put speed-up over the engines=0 configuration of the
 * same run is reported beside it. --inflight N puts with zf_store_put_start/finish, N
 * folios in flight, so that the engines do not wait for the putting thread between
 * folios (the engines=0 store of the speed-up always puts one at a time).
 */
#define ZF_ADVANCED /* zf_store_put_start/finish for --inflight */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cli.h"
#include "packed.h"

#define BUSY_FOLIO ((size_t)2 << 20)
#define BUSY_SLOTS 4u /* the busy putter cycles over this many 2 MiB keys */
#define INFLIGHT_MAX 16u /* as --inflight's maximum in cli.c */
#define LATENCY_ROUNDS 3 /* idle and busy latency rounds, alternated */
#define PAIR_CHUNK ((uint64_t)4 << 20) /* store and bare loop take turns by this much */

static const struct cli_command bench_store_cmd = {
	.name = "bench store",
	.about = "Puts every folio of a memory image into a zf_store and gets every folio back (each\n"
		 "byte checked), for each combination of the lists; beside it, a bare loop over the\n"
		 "codec on the same units, and the get latency with the store idle and while another\n"
		 "thread puts 2 MiB folios.\n",
	.notes = "The image is cut to whole 2 MiB, so that every folio size sees the same bytes.\n"
		 "unit = the smaller of the folio and the layout's unit (split: 4k). put/get MB/s: image\n"
		 "bytes over the median pass, MB = 10^6 bytes; bare = the codec alone on the same units\n"
		 "(compressing into a buffer in the cache, decompressing units packed as in the pool),\n"
		 "the store and the bare loop taking turns every 4 MiB of a pass (puts in flight: a\n"
		 "whole pass each); of = the median of the passes' ratios (JSON: each pass's too).\n"
		 "ratio = orig_data_size / compr_data_size (same-filled units cost nothing). With\n"
		 "engines > 0, each timed pass is followed by a pass through an engines=0 store and a\n"
		 "ceiling sample: speedup = the median of the engines=0 time over this one, ceiling =\n"
		 "the median of one bare compression loop's time over that of two loops compressing\n"
		 "disjoint halves at once; the same for gets (JSON get_speedup, get_ceiling_speedup:\n"
		 "the engines decompress the units of a folio of 256 KiB or more, the getting thread\n"
		 "helping). The JSON names the layout \"mode\", as it always has.\n",
	.uses = {
		{ .opt = OPT_IMAGE, .def = "sample" },
		{ .opt = OPT_CODEC, .def = "lz4" },
		{ .opt = OPT_LAYOUT, .def = "split,unit:64k" },
		{ .opt = OPT_FOLIO, .def = "64k" },
		{ .opt = OPT_ENGINES, .def = "0" },
		{ .opt = OPT_INFLIGHT, .def = "1" },
		{ .opt = OPT_GET, .def = "folio" },
		{ .opt = OPT_REPEAT, .def = "3" },
		{ .opt = OPT_GETS, .def = "5000" },
		{ .opt = OPT_JSON },
	},
};

struct config {
	const char *layout_name; /* --layout's value */
	uint32_t layout_unit; /* 0: split */
	uint64_t folio;
	unsigned engines;
	unsigned inflight;
	int get_units; /* --get unit: a zf_store_get() per unit, not per folio */
};

struct result {
	struct config cfg;
	const char *image;
	const zf_codec *codec;
	uint64_t unit, bytes;
	double put_mbps, get_mbps, bare_put_mbps, bare_get_mbps;
	double put_of_bare, get_of_bare; /* medians of the paired passes' ratios */
	double *put_of_pass, *get_of_pass; /* the ratios, pass by pass (malloc()ed) */
	int passes;
	double p50, p99, busy_p50, busy_p99;
	double speedup, ceiling; /* NAN when not measured */
	double get_speedup, get_ceiling; /* the same for gets */
	uint64_t busy_puts;
	zf_store_stats st; /* after the last put and get pass */
	char counters[4096]; /* the same, as zf_store_stats_text() */
};

/* -------------------------------------------------------------------------------- */
/* The bare codec                                                                   */
/* -------------------------------------------------------------------------------- */

struct bare_job {
	const zf_codec *codec;
	const uint8_t *data;
	uint64_t unit, first, end; /* units [first, end) */
	uint8_t *scratch; /* unit bytes: where the timed loop compresses to */
	uint8_t *out; /* the compressed units, packed (bare_open()): unit i's at out + place[i] */
	const uint64_t *place;
	const int32_t *clen; /* their sizes: 0 same-filled, -1 did not compress */
	double seconds;
	zf_codec_ctx *ctx; /* NULL: one made for the call */
};

/* The job's codec context, or a new one (which the caller destroys). */
static zf_codec_ctx *bare_ctx(const struct bare_job *j)
{
	zf_codec_ctx *ctx = j->ctx;

	if (!ctx && zf_codec_ctx_create(j->codec, &ctx))
		cli_die(1, "out of memory");
	return ctx;
}

/*
 * Compresses units [first, end), same-filled ones skipped, into the job's scratch buffer,
 * which stays in the cache: the codec's own speed, without the cost of keeping its output
 * (the store pays that, and it counts as the store's). Each unit must come out as it did
 * in bare_open(), whose packed copy the decompression reads.
 */
static void *bare_compress(void *arg)
{
	struct bare_job *j = arg;
	zf_codec_ctx *ctx = bare_ctx(j);
	const double t0 = cli_now();

	for (uint64_t i = j->first; i < j->end; i++) {
		const uint8_t *src = j->data + i * j->unit;
		int clen;

		if (zf_same_filled(src, j->unit, NULL))
			continue;
		clen = zf_codec_compress(ctx, src, j->unit, j->scratch, j->unit - 1);
		if ((clen > 0 ? clen : -1) != j->clen[i])
			cli_die(1, "bare compression of unit %llu: %d bytes, %d in the first pass",
				(unsigned long long)i, clen, (int)j->clen[i]);
	}
	j->seconds = cli_now() - t0;
	if (ctx != j->ctx)
		zf_codec_ctx_destroy(ctx);
	return NULL;
}

/* Decompresses the packed units (raw units copied, as the store does). */
static double bare_decompress(const struct bare_job *j, uint8_t *dst)
{
	zf_codec_ctx *ctx = bare_ctx(j);
	const double t0 = cli_now();
	double s;

	for (uint64_t i = j->first; i < j->end; i++) {
		uint8_t *d = dst + i * j->unit;

		if (j->clen[i] == 0)
			continue;
		if (j->clen[i] < 0)
			memcpy(d, j->data + i * j->unit, j->unit);
		else if (zf_codec_decompress(ctx, j->out + j->place[i], (size_t)j->clen[i], d,
					     j->unit) != (int)j->unit)
			cli_die(1, "bare decompression of unit %llu failed", (unsigned long long)i);
	}
	s = cli_now() - t0;
	if (ctx != j->ctx)
		zf_codec_ctx_destroy(ctx);
	return s;
}

/* The bare codec's passes over the image at one unit size, paired with the store's. */
struct bare {
	struct bare_job all;
	uint8_t *back, *scratch2; /* scratch2: the ceiling's second loop's */
	uint64_t bytes, out_bytes;
};

/*
 * A first, untimed compression of every unit keeps what it makes packed, in image order
 * (packed.h). The bare loop first kept each unit at the start of a unit-sized slot of its
 * own, and compressed into it: lz4 then decompressed 4 KiB units 1.13-1.17x slower on the
 * AMD VM (1.04-1.05x on the Intel one) than from packed units, and compressed them
 * 1.03-1.05x slower than into a buffer in the cache (bench/results/store.md, fifteenth
 * measurement): a baseline slowed down by its layout, which made the store look that much
 * closer to the codec.
 */
static void bare_open(struct bare *b, const zf_codec *codec, const uint8_t *data, uint64_t bytes,
		      uint64_t unit)
{
	const uint64_t n = bytes / unit;
	uint64_t *place = calloc(n, sizeof(*place));
	int32_t *clen = calloc(n, sizeof(*clen));
	size_t end = 0;

	*b = (struct bare){ { codec, data, unit, 0, n, cli_map_buffer(unit), NULL, place, clen, 0,
			      NULL },
			    cli_map_buffer(bytes),
			    cli_map_buffer(unit),
			    bytes,
			    packed_bytes(n, unit) };
	if (!place || !clen || zf_codec_ctx_create(codec, &b->all.ctx))
		cli_die(1, "out of memory");
	b->all.out = cli_map_buffer(b->out_bytes);
	for (uint64_t i = 0; i < n; i++) {
		const uint8_t *src = data + i * unit;
		int ret;

		if (zf_same_filled(src, unit, NULL))
			continue;
		ret = zf_codec_compress(b->all.ctx, src, unit, b->all.scratch, unit - 1);
		clen[i] = ret > 0 ? ret : -1;
		if (ret <= 0)
			continue;
		place[i] = packed_place(end);
		memcpy(b->all.out + place[i], b->all.scratch, (size_t)ret);
		end = packed_end(place[i], (size_t)ret);
	}
}

/* The bare loop over the image's bytes [from, end): compression, or decompression. */
static double bare_put(struct bare *b, uint64_t from, uint64_t end)
{
	b->all.first = from / b->all.unit;
	b->all.end = end / b->all.unit;
	bare_compress(&b->all);
	return b->all.seconds;
}

static double bare_get(struct bare *b, uint64_t from, uint64_t end)
{
	b->all.first = from / b->all.unit;
	b->all.end = end / b->all.unit;
	return bare_decompress(&b->all, b->back);
}

static void bare_close(struct bare *b)
{
	zf_codec_ctx_destroy(b->all.ctx);
	munmap(b->all.scratch, b->all.unit);
	free((void *)b->all.clen);
	free((void *)b->all.place);
	munmap(b->all.out, b->out_bytes);
	munmap(b->back, b->bytes);
	munmap(b->scratch2, b->all.unit);
}

/*
 * One sample of the machine's ceiling for a parallel put: one bare compression loop over
 * the image, against two threads compressing its halves at the same time.
 */
static double ceiling_sample(const struct bare *b)
{
	struct bare_job all = b->all, half[2];
	const uint64_t n = b->bytes / all.unit;
	pthread_t th;

	all.first = 0;
	all.end = n;
	all.ctx = NULL;
	half[0] = half[1] = all;
	half[1].scratch = b->scratch2; /* each loop its own, as each engine has */

	bare_compress(&all);
	half[0].end = half[1].first = n / 2;
	if (pthread_create(&th, NULL, bare_compress, &half[1]))
		cli_die(1, "cannot start a thread");
	bare_compress(&half[0]);
	pthread_join(th, NULL);
	/* Each loop did half the work: the pair's rate over one loop's. */
	return all.seconds / fmax(half[0].seconds, half[1].seconds);
}

/* A bare decompression loop on a thread of its own (get_ceiling_sample()). */
struct bare_get {
	struct bare_job job;
	uint8_t *dst;
	double seconds;
};

static void *bare_get_main(void *arg)
{
	struct bare_get *g = arg;

	g->seconds = bare_decompress(&g->job, g->dst);
	return NULL;
}

/* The same for a parallel get: one bare decompression loop against two, over halves. */
static double get_ceiling_sample(const struct bare *b)
{
	struct bare_get all = { b->all, b->back, 0 }, half[2];
	const uint64_t n = b->bytes / all.job.unit;
	pthread_t th;

	all.job.first = 0;
	all.job.end = n;
	all.job.ctx = NULL;
	half[0] = half[1] = all;
	bare_get_main(&all);
	half[0].job.end = half[1].job.first = n / 2;
	if (pthread_create(&th, NULL, bare_get_main, &half[1]))
		cli_die(1, "cannot start a thread");
	bare_get_main(&half[0]);
	pthread_join(th, NULL);
	return all.seconds / fmax(half[0].seconds, half[1].seconds);
}

/* -------------------------------------------------------------------------------- */
/* The store                                                                        */
/* -------------------------------------------------------------------------------- */

static zf_store *new_store(const zf_codec *codec, const struct config *c)
{
	zf_store_options o;
	zf_store *s;
	int ret;

	zf_store_options_init(&o);
	o.codec = zf_codec_name(codec);
	o.unit = c->layout_unit;
	o.engines = c->engines;
	ret = zf_store_create(&o, &s);
	if (ret)
		cli_die(1, "zf_store_create: %s", zf_strerror(ret));
	return s;
}

static void put_check(int ret, uint64_t off)
{
	if (ret)
		cli_die(1, "put of the folio at %llu: %s", (unsigned long long)off,
			zf_strerror(ret));
}

/*
 * Puts every folio of data's bytes [from, end), with up to inflight puts started and not
 * finished.
 */
static double put_range(zf_store *s, const uint8_t *data, uint64_t from, uint64_t end,
			uint64_t folio, unsigned inflight)
{
	zf_store_pending *p[INFLIGHT_MAX];
	const double t0 = cli_now();
	uint64_t off, done = from;

	for (off = from; off < end; off += folio) {
		if (inflight <= 1) {
			put_check(zf_store_put(s, 1, off / ZF_PAGE_SIZE, data + off, folio), off);
			continue;
		}
		if (off - done == inflight * folio) {
			put_check(zf_store_put_finish(p[done / folio % inflight]), done);
			done += folio;
		}
		put_check(zf_store_put_start(s, 1, off / ZF_PAGE_SIZE, data + off, folio,
					     &p[off / folio % inflight]),
			  off);
	}
	for (; inflight > 1 && done < end; done += folio)
		put_check(zf_store_put_finish(p[done / folio % inflight]), done);
	return cli_now() - t0;
}

static double put_all(zf_store *s, const uint8_t *data, uint64_t bytes, uint64_t folio,
		      unsigned inflight)
{
	return put_range(s, data, 0, bytes, folio, inflight);
}

/*
 * Gets the folios of bytes [from, end) back into dst at the same offsets (or, with
 * units, every unit: step is the unit's size).
 */
static double get_range(zf_store *s, uint8_t *dst, uint64_t from, uint64_t end, uint64_t step,
			int units)
{
	const double t0 = cli_now();

	for (uint64_t off = from; off < end; off += step) {
		const int ret =
			units ? zf_store_get(s, 1, off / ZF_PAGE_SIZE, dst + off, step)
			      : zf_store_get_folio(s, 1, off / ZF_PAGE_SIZE, dst + off, step);

		if (ret)
			cli_die(1, "get of the %s at %llu: %s", units ? "unit" : "folio",
				(unsigned long long)off, zf_strerror(ret));
	}
	return cli_now() - t0;
}

/* gets timed single-unit gets at random units; their p50 and p99 in microseconds. */
static void get_latency(zf_store *s, const uint8_t *data, uint64_t bytes, uint64_t unit, int gets,
			double *p50, double *p99)
{
	double *us = malloc((size_t)gets * sizeof(*us));
	uint8_t *buf = malloc(unit);
	uint64_t x = 0x9e3779b97f4a7c15ull;

	if (!us || !buf)
		cli_die(1, "out of memory");
	for (int k = 0; k < gets; k++) {
		const uint64_t u = cli_xorshift(&x) % (bytes / unit);
		const double t0 = cli_now();
		const int ret = zf_store_get(s, 1, u * unit / ZF_PAGE_SIZE, buf, unit);

		us[k] = (cli_now() - t0) * 1e6;
		if (ret || memcmp(buf, data + u * unit, unit))
			cli_die(1, "get of unit %llu: %s", (unsigned long long)u,
				ret ? zf_strerror(ret) : "wrong bytes");
	}
	*p50 = cli_percentile(us, gets, 50);
	*p99 = cli_percentile(us, gets, 99);
	free(us);
	free(buf);
}

struct busy_putter {
	zf_store *s;
	const uint8_t *data;
	uint64_t bytes;
	atomic_int stop, started;
	uint64_t puts;
};

/* Puts 2 MiB folios of the image under owner 2 until told to stop. */
static void *busy_put(void *arg)
{
	struct busy_putter *b = arg;
	const uint64_t folios = b->bytes / BUSY_FOLIO;

	for (uint64_t k = 0; !atomic_load(&b->stop); k++) {
		const uint64_t slot = k % BUSY_SLOTS;
		const int ret = zf_store_put(b->s, 2, slot * (BUSY_FOLIO / ZF_PAGE_SIZE),
					     b->data + (k % folios) * BUSY_FOLIO, BUSY_FOLIO);

		if (ret)
			cli_die(1, "busy put: %s", zf_strerror(ret));
		b->puts++;
		atomic_store(&b->started, 1);
	}
	return NULL;
}

/*
 * One timed pass of the store and of the bare loop over the image, paired: the image is
 * cut into PAIR_CHUNK pieces, and each piece goes through both, one right after the
 * other, the first of the two alternating from piece to piece and from pass to pass; a
 * pass's time is the sum of its pieces'. Whole passes one after the other had this VM's
 * hiccups in one and not in the other: seven passes of the same store's gets took 60.5
 * to 85 ms beside bare passes of 56-70 ms, their ratios 0.77-1.02 (python, lz4, split,
 * 64 KiB folios); taking turns, one run's seven were 0.85-0.86, another's 0.88-0.92. A
 * pipeline of puts in flight (--inflight > 1) would drain at every cut: those passes stay
 * whole. Puts when back is NULL, else gets into back.
 */
static void paired_pass(struct bare *b, zf_store *s, const uint8_t *data, uint8_t *back,
			uint64_t bytes, const struct config *c, uint64_t unit, int k,
			double *bare_s, double *store_s)
{
	const uint64_t chunk = !back && c->inflight > 1 ? bytes : PAIR_CHUNK;

	*bare_s = *store_s = 0;
	for (uint64_t off = 0, i = (uint64_t)k; off < bytes; off += chunk, i++) {
		const uint64_t end = off + chunk < bytes ? off + chunk : bytes;

		for (int turn = 0; turn < 2; turn++) {
			if (turn == (int)(i & 1))
				*bare_s += back ? bare_get(b, off, end) : bare_put(b, off, end);
			else if (back)
				*store_s += get_range(s, back, off, end,
						      c->get_units ? unit : c->folio, c->get_units);
			else
				*store_s += put_range(s, data, off, end, c->folio, c->inflight);
		}
	}
}

static void run_config(const char *image, const zf_codec *codec, const uint8_t *data,
		       uint64_t bytes, const struct config *c, int repeat, int gets, uint8_t *back,
		       struct result *r)
{
	/* Per timed pass: put and get times, the bare loop's, and their ratios. */
	double *tp = calloc(10 * (size_t)repeat, sizeof(double)), *tg, *tc, *td, *put_of, *get_of,
	       *speedup, *ceiling, *get_speedup, *get_ceiling;
	struct bare bare;
	zf_store *s, *s0 = NULL;
	double p50[LATENCY_ROUNDS], p99[LATENCY_ROUNDS];
	double busy_p50[LATENCY_ROUNDS], busy_p99[LATENCY_ROUNDS];
	pthread_t th;
	char fb[16];

	memset(r, 0, sizeof(*r));
	r->put_of_pass = malloc(2 * (size_t)repeat * sizeof(double));
	if (!tp || !r->put_of_pass)
		cli_die(1, "out of memory");
	r->get_of_pass = r->put_of_pass + repeat;
	tg = tp + repeat;
	tc = tg + repeat;
	td = tc + repeat;
	put_of = td + repeat;
	get_of = put_of + repeat;
	speedup = get_of + repeat;
	ceiling = speedup + repeat;
	get_speedup = ceiling + repeat;
	get_ceiling = get_speedup + repeat;
	r->cfg = *c;
	r->image = image;
	r->codec = codec;
	r->unit = c->layout_unit ? (c->folio < c->layout_unit ? c->folio : c->layout_unit)
				 : ZF_PAGE_SIZE;
	r->bytes = bytes;
	cli_progress("%s %s %s folio %s engines %u: bare codec", image, zf_codec_name(codec),
		     c->layout_name, cli_format_unit(c->folio, fb, sizeof(fb)), c->engines);
	bare_open(&bare, codec, data, bytes, r->unit);
	/*
	 * A first pass fills the store; the timed ones put over it (each put replacing the
	 * unit it finds), so the pool's pages are in memory already, as the bare loop's
	 * output buffer is: both measure the work, not the page faults of fresh memory.
	 *
	 * With engines, each pass also puts through an engines=0 store and takes a sample of
	 * the two-loop ceiling, back to back with the pass, so that the speed-up and the
	 * ceiling are ratios of times measured together (this VM's speed drifts by a quarter
	 * within a minute).
	 */
	s = new_store(codec, c);
	if (c->engines) {
		struct config c0 = *c;

		c0.engines = 0;
		s0 = new_store(codec, &c0);
		put_all(s0, data, bytes, c->folio, 1);
	}
	for (int k = -1; k < repeat; k++) {
		cli_progress("%s %s %s folio %s engines %u: pass %d of %d", image,
			     zf_codec_name(codec), c->layout_name, fb, c->engines, k + 1, repeat);
		if (k < 0)
			tp[0] = put_all(s, data, bytes, c->folio, c->inflight);
		else
			paired_pass(&bare, s, data, NULL, bytes, c, r->unit, k, &tc[k], &tp[k]);
		if (c->engines && k >= 0) {
			speedup[k] = put_all(s0, data, bytes, c->folio, 1) / tp[k];
			/* The bare loop's units, as it compresses them. */
			ceiling[k] = ceiling_sample(&bare);
		}
		memset(back, 0, bytes);
		if (k < 0)
			tg[0] = get_range(s, back, 0, bytes, c->get_units ? r->unit : c->folio,
					  c->get_units);
		else
			paired_pass(&bare, s, data, back, bytes, c, r->unit, k, &td[k], &tg[k]);
		if (k >= 0) {
			put_of[k] = tc[k] / tp[k];
			get_of[k] = td[k] / tg[k];
		}
		if (memcmp(back, data, bytes)) {
			uint64_t off = 0;

			while (back[off] == data[off])
				off++;
			cli_die(1, "%s: byte %llu (page %llu) came back wrong", image,
				(unsigned long long)off, (unsigned long long)(off / ZF_PAGE_SIZE));
		}
		if (c->engines && k >= 0) {
			/* Gets: the engines=0 store's time over this one's, and their ceiling. */
			get_speedup[k] =
				get_range(s0, back, 0, bytes, c->get_units ? r->unit : c->folio,
					  c->get_units) /
				tg[k];
			get_ceiling[k] = get_ceiling_sample(&bare);
		}
	}
	r->put_mbps = (double)bytes / 1e6 / cli_median(tp, repeat);
	r->get_mbps = (double)bytes / 1e6 / cli_median(tg, repeat);
	r->bare_put_mbps = (double)bytes / 1e6 / cli_median(tc, repeat);
	r->bare_get_mbps = (double)bytes / 1e6 / cli_median(td, repeat);
	r->passes = repeat;
	memcpy(r->put_of_pass, put_of, (size_t)repeat * sizeof(*put_of));
	memcpy(r->get_of_pass, get_of, (size_t)repeat * sizeof(*get_of));
	r->put_of_bare = cli_median(put_of, repeat);
	r->get_of_bare = cli_median(get_of, repeat);
	bare_close(&bare);
	r->speedup = r->ceiling = r->get_speedup = r->get_ceiling = NAN;
	if (c->engines) {
		r->speedup = cli_median(speedup, repeat);
		r->ceiling = cli_median(ceiling, repeat);
		r->get_speedup = cli_median(get_speedup, repeat);
		r->get_ceiling = cli_median(get_ceiling, repeat);
		zf_store_destroy(s0);
	}
	free(tp);
	zf_store_get_stats(s, &r->st, sizeof(r->st));
	zf_store_stats_text(s, r->counters, sizeof(r->counters));

	cli_progress("%s %s %s folio %s engines %u: get latency", image, zf_codec_name(codec),
		     c->layout_name, fb, c->engines);
	/*
	 * The busy putter's keys are stored once first, so that its puts replace units, as
	 * the timed passes' do: its first puts took fresh pool pages, and the gets beside them
	 * had a p99 of 10-12 us against 3-4 us later (redis, lz4, 4 KiB units). Then idle and
	 * busy gets, LATENCY_ROUNDS times, and the medians of the rounds' percentiles: one
	 * hiccup of the VM in 5000 gets moved a p99 by 10x.
	 */
	for (uint64_t k = 0; bytes >= BUSY_FOLIO && k < BUSY_SLOTS; k++)
		put_check(zf_store_put(s, 2, k * (BUSY_FOLIO / ZF_PAGE_SIZE),
				       data + k % (bytes / BUSY_FOLIO) * BUSY_FOLIO, BUSY_FOLIO),
			  k * BUSY_FOLIO);
	for (int k = 0; k < LATENCY_ROUNDS; k++) {
		struct busy_putter busy = { .s = s, .data = data, .bytes = bytes };

		get_latency(s, data, bytes, r->unit, gets, &p50[k], &p99[k]);
		if (bytes < BUSY_FOLIO)
			continue;
		if (pthread_create(&th, NULL, busy_put, &busy))
			cli_die(1, "cannot start a thread");
		while (!atomic_load(&busy.started))
			;
		get_latency(s, data, bytes, r->unit, gets, &busy_p50[k], &busy_p99[k]);
		atomic_store(&busy.stop, 1);
		pthread_join(th, NULL);
		r->busy_puts += busy.puts;
	}
	r->p50 = cli_median(p50, LATENCY_ROUNDS);
	r->p99 = cli_median(p99, LATENCY_ROUNDS);
	r->busy_p50 = r->busy_p99 = NAN;
	if (bytes >= BUSY_FOLIO) {
		r->busy_p50 = cli_median(busy_p50, LATENCY_ROUNDS);
		r->busy_p99 = cli_median(busy_p99, LATENCY_ROUNDS);
	}
	zf_store_destroy(s);
}

/* -------------------------------------------------------------------------------- */
/* Output                                                                           */
/* -------------------------------------------------------------------------------- */

static void print_json(const struct result *r)
{
	const zf_store_stats *st = &r->st;
	char fb[16], ub[16];

	printf("{\"bench\":\"store\",\"image\":");
	cli_json_string(stdout, r->image);
	printf(",\"codec\":\"%s\",\"mode\":\"%s\",\"folio\":\"%s\",\"unit\":\"%s\",\"engines\":%u",
	       zf_codec_name(r->codec), r->cfg.layout_name,
	       cli_format_unit(r->cfg.folio, fb, sizeof(fb)),
	       cli_format_unit(r->unit, ub, sizeof(ub)), r->cfg.engines);
	printf(",\"inflight\":%u,\"get\":\"%s\",\"bytes\":%llu", r->cfg.inflight,
	       r->cfg.get_units ? "unit" : "folio", (unsigned long long)r->bytes);
	cli_json_num("put_mbps", r->put_mbps, 1);
	cli_json_num("get_mbps", r->get_mbps, 1);
	cli_json_num("bare_put_mbps", r->bare_put_mbps, 1);
	cli_json_num("bare_get_mbps", r->bare_get_mbps, 1);
	cli_json_num("put_of_bare", r->put_of_bare, 3);
	cli_json_num("get_of_bare", r->get_of_bare, 3);
	for (int w = 0; w < 2; w++) {
		const double *v = w ? r->get_of_pass : r->put_of_pass;

		printf(",\"%s_of_bare_passes\":[", w ? "get" : "put");
		for (int k = 0; k < r->passes; k++)
			printf("%s%.3f", k ? "," : "", v[k]);
		printf("]");
	}
	cli_json_num("ratio", (double)st->orig_data_size / (double)st->compr_data_size, 4);
	printf(",\"mem_used_total\":%llu", (unsigned long long)st->mem_used_total);
	cli_json_num("get_p50_us", r->p50, 2);
	cli_json_num("get_p99_us", r->p99, 2);
	cli_json_num("get_busy_p50_us", r->busy_p50, 2);
	cli_json_num("get_busy_p99_us", r->busy_p99, 2);
	cli_json_num("busy_p99_over_idle", r->busy_p99 / r->p99, 2);
	printf(",\"busy_puts\":%llu", (unsigned long long)r->busy_puts);
	if (r->cfg.engines) {
		cli_json_num("ceiling_speedup", r->ceiling, 3);
		cli_json_num("put_speedup", r->speedup, 3);
		cli_json_num("speedup_of_ceiling", r->speedup / r->ceiling, 3);
		cli_json_num("get_ceiling_speedup", r->get_ceiling, 3);
		cli_json_num("get_speedup", r->get_speedup, 3);
		cli_json_num("get_speedup_of_ceiling", r->get_speedup / r->get_ceiling, 3);
	}
	/* The counters, as zf_store_stats_text() names them. */
	cli_json_counters(r->counters);
	printf("}\n");
}

static void print_header(void)
{
	printf("%-14s %-7s %-10s %5s %3s %5s  %8s %8s %6s  %8s %8s %6s  %6s %9s  %7s %7s  %7s "
	       "%7s  %7s %7s  %7s %7s\n",
	       "image", "codec", "layout", "folio", "eng", "unit", "put MB/s", "bare", "of",
	       "get MB/s", "bare", "of", "ratio", "mem", "get p50", "p99", "busy50", "p99",
	       "speedup", "ceiling", "get x", "ceiling");
}

static void print_row(const struct result *r)
{
	char fb[16], ub[16], mb[32];

	snprintf(mb, sizeof(mb), "%.1fM", (double)r->st.mem_used_total / 1048576.0);
	printf("%-14.14s %-7s %-10s %5s %3u %5s  %8.1f %8.1f %6.3f  %8.1f %8.1f %6.3f  %6.3f %9s  "
	       "%7.1f %7.1f  %7.1f %7.1f  %7.3f %7.3f  %7.3f %7.3f\n",
	       r->image, zf_codec_name(r->codec), r->cfg.layout_name,
	       cli_format_unit(r->cfg.folio, fb, sizeof(fb)), r->cfg.engines,
	       cli_format_unit(r->unit, ub, sizeof(ub)), r->put_mbps, r->bare_put_mbps,
	       r->put_of_bare, r->get_mbps, r->bare_get_mbps, r->get_of_bare,
	       (double)r->st.orig_data_size / (double)r->st.compr_data_size, mb, r->p50, r->p99,
	       r->busy_p50, r->busy_p99, r->speedup, r->ceiling, r->get_speedup, r->get_ceiling);
}

/* Parses "split" or "unit:SIZE" (--layout) into a config's layout. */
static void parse_layout(char *name, struct config *c)
{
	uint64_t unit;

	c->layout_name = name;
	if (!strcmp(name, "split")) {
		c->layout_unit = 0;
		return;
	}
	if (strncmp(name, "unit:", 5) || cli_parse_size(name + 5, &unit) || unit < 8192 ||
	    unit > ZF_UNIT_MAX || (unit & (unit - 1)))
		cli_die(EXIT_USAGE,
			"--layout: expected split or unit:SIZE (a power of two, 8k..2m), "
			"got '%s'",
			name);
	c->layout_unit = (uint32_t)unit;
}

int bench_store(int argc, char **argv)
{
	const struct cli_args *a = cli_parse(&bench_store_cmd, argc, argv);
	const struct cli_value *images = &a->v[OPT_IMAGE], *codecs = &a->v[OPT_CODEC],
			       *layouts = &a->v[OPT_LAYOUT], *folios = &a->v[OPT_FOLIO],
			       *engines = &a->v[OPT_ENGINES];
	const int repeat = (int)a->v[OPT_REPEAT].num[0], gets = (int)a->v[OPT_GETS].num[0],
		  json = a->v[OPT_JSON].n;
	struct config *cfgs = calloc((size_t)(layouts->n * folios->n * engines->n), sizeof(*cfgs));
	int n_cfgs = 0;

	if (!cfgs)
		cli_die(1, "out of memory");
	/*
	 * Every value checked before any output; the configurations in table order. The
	 * table names a row by its image, codec, layout, folio and engines, so --inflight
	 * and --get, which say how every row is run, take one value.
	 */
	for (int ci = 0; ci < codecs->n; ci++)
		cli_find_codec(codecs->str[ci]);
	for (int li = 0; li < layouts->n; li++) {
		for (int fi = 0; fi < folios->n; fi++) {
			for (int ei = 0; ei < engines->n; ei++) {
				struct config *c = &cfgs[n_cfgs++];

				parse_layout(layouts->str[li], c);
				c->folio = folios->num[fi];
				c->engines = (unsigned)engines->num[ei];
				c->inflight = (unsigned)a->v[OPT_INFLIGHT].num[0];
				c->get_units = !strcmp(a->v[OPT_GET].str[0], "unit");
			}
		}
	}

	if (!json)
		print_header();
	for (int ii = 0; ii < images->n; ii++) {
		zf_image *img = cli_open_image(images->str[ii]);
		const char *name = zf_image_name(img);
		/* Whole 2 MiB folios only, so that every folio size sees the same bytes. */
		const uint64_t bytes = zf_image_size(img) / ZF_UNIT_MAX * ZF_UNIT_MAX;
		uint8_t *back;

		if (bytes == 0)
			cli_die(EXIT_USAGE, "%s: smaller than one 2 MiB folio", name);
		back = cli_map_buffer(bytes);
		for (int ci = 0; ci < codecs->n; ci++) {
			const zf_codec *codec = cli_find_codec(codecs->str[ci]);

			for (int i = 0; i < n_cfgs; i++) {
				struct result r;

				run_config(name, codec, zf_image_data(img), bytes, &cfgs[i], repeat,
					   gets, back, &r);
				cli_progress_done();
				if (json)
					print_json(&r);
				else
					print_row(&r);
				fflush(stdout);
				free(r.put_of_pass);
			}
		}
		munmap(back, bytes);
		zf_image_close(img);
	}
	free(cfgs);
	return 0;
}
