/*
 * bench_region.c - "zfolio bench region": what a zf_region's fault service costs the
 * program, and how fast it swaps a memory image out and back in.
 *
 * For each configuration (image, codec, unit, fault-service mode, readahead, swap-in
 * mode) it makes a region with a store of its own, fills it with the image (cut or tiled
 * to --size), then runs an untimed round and --repeat timed ones. A round:
 *
 *   1. zf_region_pageout() of the whole region, timed: the swap-out.
 *   2. A pass over the region in address order reading one byte of every 4 KiB page,
 *      timed as a whole: the swap-in (MB/s = size / pass time). The read of each unit's
 *      first page is timed on its own (clock_gettime around it): that is one fault as the
 *      program sees it - the trap, the wakeup of a service thread or the SIGBUS delivery,
 *      the decompression and placement, the return - or, when readahead brought the unit
 *      in ahead of the pass, the cost of reading resident memory.
 *   3. A check: every byte read in the pass is compared with the image, and a few whole
 *      pages at random; after the last round, every byte of the region. A mismatch exits 1.
 *
 * Beside the program's view, the region's own counters over the timed rounds: pgmajfault
 * (faults served from the store: against the number of first touches, how many readahead
 * saved), the service-latency histogram (from the fault reaching zfolio to its resolving
 * ioctl, without the trap and wakeup around it), readahead hits; and the store's ratio
 * after the last swap-out.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli.h"

#define CHECK_PAGES 16 /* whole pages compared at random after each round */

static const struct cli_command bench_region_cmd = {
	.name = "bench region",
	.about = "Swaps a memory image out of a zf_region and back in through userfaultfd, for each\n"
		 "combination of the lists: the swap-out time, the swap-in time and MB/s, and the\n"
		 "latency of each fault as the program sees it. Needs userfaultfd (root, or access to\n"
		 "/dev/userfaultfd); exits 77 without it.\n",
	.notes = "A round: zf_region_pageout() of the whole region (timed: swapout), then one byte of\n"
		 "every 4 KiB page read in address order (timed: swapin; MB/s = size / that time, MB =\n"
		 "10^6 bytes), every byte read compared with the image, and 16 whole pages. After the\n"
		 "last round every byte is compared; a mismatch exits 1. swapout and swapin ms are\n"
		 "medians over the rounds.\n"
		 "\n"
		 "fault p50/p99: the read of each unit's first page in the pass, timed on its own, over\n"
		 "all timed rounds: the fault as the program sees it (trap, wakeup or signal, service,\n"
		 "return). With readahead, a unit already brought in costs only a memory read: faulted\n"
		 "is the share of first touches (of pages, with per-page) that faulted, pgmajfault over\n"
		 "the timed rounds against units x rounds (pages x rounds with per-page).\n"
		 "service p50/p99: the region's own histogram over the timed rounds (the fault reaching\n"
		 "zfolio to its resolving ioctl: in thread mode after the wakeup), bucket upper bounds.\n"
		 "ratio = orig_data_size / compr_data_size of the store after the last swap-out.\n"
		 "\n"
		 "--json adds: swapout_mbps, fault_max_us, service_p999_us, touches (units x rounds,\n"
		 "pages x rounds with per-page: faulted = pgmajfault / touches), the region's counters\n"
		 "over the timed rounds (pgmajfault, swpout, swpin, swap_ra, swap_ra_hit, fault_waits,\n"
		 "copy_eexist, copy_eagain, reject), evicted_min (the fewest units one swap-out evicted:\n"
		 "below size / unit, some stayed resident, and a note says so on stderr), the store's\n"
		 "orig_data_size and compr_data_size, and counters: zf_region_stats_text() at the end.\n",
	.uses = {
		{ .opt = OPT_IMAGE, .def = "sample" },
		{ .opt = OPT_SIZE, .def = "64m" },
		{ .opt = OPT_UNIT, .def = "4k,64k" },
		{ .opt = OPT_CODEC, .def = "lz4" },
		{ .opt = OPT_MODE, .def = "thread,sigbus" },
		{ .opt = OPT_READAHEAD, .def = "0" },
		{ .opt = OPT_SWAPIN, .def = "whole" },
		{ .opt = OPT_FRAME, .def = "none" },
		{ .opt = OPT_ENGINES, .def = "0" },
		{ .opt = OPT_REPEAT, .def = "5" },
		{ .opt = OPT_JSON },
	},
};

struct config {
	uint64_t unit;
	uint64_t frame; /* 0: none */
	unsigned engines;
	enum zf_fault_mode mode;
	const char *mode_name;
	unsigned readahead;
	enum zf_swapin_mode swapin;
	const char *swapin_name;
};

struct result {
	struct config cfg;
	const char *image;
	uint64_t image_size;
	const zf_codec *codec;
	uint64_t size;
	int repeat;
	double swapout_ms, swapin_ms; /* medians */
	double fault_p50_us, fault_p99_us, fault_max_us; /* first touches of units */
	double service_p50_us, service_p99_us, service_p999_us; /* the region's histogram */
	uint64_t touches; /* first touches of units (pages with per-page) over timed rounds */
	uint64_t evicted_min; /* least units one zf_region_pageout() evicted */
	zf_region_stats d; /* counters over the timed rounds (differences) */
	zf_store_stats sst; /* the store after the last swap-out */
	char *counters; /* zf_region_stats_text() at the end, malloc()ed */
};

/* The byte of page i read in round k (-1: the untimed one). */
static inline size_t touch_offset(uint64_t i, int k)
{
	return cli_touch_offset(i, (uint32_t)(k + 1));
}

/*
 * The upper bound, in ns, of bucket i of zf_region_stats.fault_lat: two buckets per
 * power of two, bucket 2b + h holding [2^b + h 2^(b-1), 2^b + (h+1) 2^(b-1)) (zfolio.h).
 */
static double lat_bucket_ns(int i)
{
	if (i < 2)
		return 2;
	return exp2(i / 2) + (double)(i % 2 + 1) * exp2(i / 2 - 1);
}

/* The num/den quantile of histogram h (nearest rank, bucket upper bounds), in ns. */
static double hist_quantile_ns(const uint64_t *h, uint64_t num, uint64_t den)
{
	uint64_t total = 0, seen = 0;

	for (int i = 0; i < ZF_REGION_LAT_BUCKETS; i++)
		total += h[i];
	if (total == 0)
		return NAN;
	for (int i = 0; i < ZF_REGION_LAT_BUCKETS; i++) {
		seen += h[i];
		if (seen * den >= total * num)
			return lat_bucket_ns(i);
	}
	return lat_bucket_ns(ZF_REGION_LAT_BUCKETS - 1);
}

/* a - b for the counters the report uses (a taken after b). */
static void stats_diff(const zf_region_stats *a, const zf_region_stats *b, zf_region_stats *d)
{
	*d = *a;
#define ZF_DIFF(f) d->f = a->f - b->f
	ZF_DIFF(swpout);
	ZF_DIFF(swpin);
	ZF_DIFF(pgmajfault);
	ZF_DIFF(pgfault_zero);
	ZF_DIFF(wp_faults);
	ZF_DIFF(fault_waits);
	ZF_DIFF(limit_waits);
	ZF_DIFF(evict_pageout);
	ZF_DIFF(evict_reclaim);
	ZF_DIFF(reject);
	ZF_DIFF(swap_ra);
	ZF_DIFF(swap_ra_hit);
	ZF_DIFF(copy_eagain);
	ZF_DIFF(copy_eexist);
	ZF_DIFF(fault_fail);
#undef ZF_DIFF
	for (int i = 0; i < ZF_STORE_ORDERS; i++) {
		d->swpout_units[i] = a->swpout_units[i] - b->swpout_units[i];
		d->swpin_units[i] = a->swpin_units[i] - b->swpin_units[i];
		d->swpin_fallback[i] = a->swpin_fallback[i] - b->swpin_fallback[i];
	}
	for (int i = 0; i < ZF_REGION_LAT_BUCKETS; i++)
		d->fault_lat[i] = a->fault_lat[i] - b->fault_lat[i];
}

/* What the region places and evicts whole: the frame, or the unit. */
static uint64_t place_size(const struct config *c)
{
	return c->frame ? c->frame : c->unit;
}

/* "64k", or with frames "64k/2m": the unit, and the frame it is placed in. */
static const char *unit_label(const struct config *c, char *buf, size_t len)
{
	char fb[16];
	size_t n;

	cli_format_unit(c->unit, buf, len);
	n = strlen(buf);
	if (c->frame && n + 1 < len)
		snprintf(buf + n, len - n, "/%s", cli_format_unit(c->frame, fb, sizeof(fb)));
	return buf;
}

static void init_options(const zf_codec *codec, const struct config *c, zf_region_options *o)
{
	zf_region_options_init(o);
	o->unit = (uint32_t)c->unit;
	o->codec = zf_codec_name(codec);
	o->fault_mode = c->mode;
	o->readahead = c->readahead;
	o->swapin = c->swapin;
	o->frame = (uint32_t)c->frame;
	o->engines = c->engines;
}

static zf_region *new_region(const zf_codec *codec, const struct config *c, uint64_t size)
{
	zf_region_options o;

	init_options(codec, c, &o);
	return cli_region_create(&o, size);
}

/* Dies naming the first byte of region that differs from data in [off, off + len). */
static void mismatch(const char *image, const struct config *c, const uint8_t *region,
		     const uint8_t *data, uint64_t off, uint64_t len, int k, int repeat)
{
	char ub[32], rb[32];

	for (uint64_t end = off + len; off < end && region[off] == data[off]; off++)
		;
	cli_die(1,
		"%s, unit %s, mode %s, readahead %u, swapin %s: byte %llu (page %llu) came back "
		"wrong in %s",
		image, unit_label(c, ub, sizeof(ub)), c->mode_name, c->readahead, c->swapin_name,
		(unsigned long long)off, (unsigned long long)(off / ZF_PAGE_SIZE),
		k < 0 ? "the untimed round"
		      : (snprintf(rb, sizeof(rb), "round %d of %d", k + 1, repeat), rb));
}

static void run_config(const char *image, uint64_t image_size, const zf_codec *codec,
		       const uint8_t *data, uint64_t size, const struct config *c, int repeat,
		       struct result *res)
{
	const uint64_t pages = size / ZF_PAGE_SIZE, ppu = place_size(c) / ZF_PAGE_SIZE,
		       units = size / place_size(c);
	double *tout = calloc(2 * (size_t)repeat, sizeof(double)), *tin, *lat;
	uint8_t *expect = malloc(pages);
	zf_region_stats st0, st1;
	uint64_t nlat = 0, x = 0x9e3779b97f4a7c15ull;
	zf_region *r;
	uint8_t *base;
	char ub[32];

	memset(res, 0, sizeof(*res));
	res->cfg = *c;
	res->image = image;
	res->image_size = image_size;
	res->codec = codec;
	res->size = size;
	res->repeat = repeat;
	res->evicted_min = UINT64_MAX;
	lat = malloc((size_t)(units * (uint64_t)repeat) * sizeof(*lat));
	if (!lat || !expect || !tout)
		cli_die(1, "out of memory");
	tin = tout + repeat;
	unit_label(c, ub, sizeof(ub));

	cli_progress("%s %s %s %s ra %u %s: fill", image, zf_codec_name(codec), ub, c->mode_name,
		     c->readahead, c->swapin_name);
	r = new_region(codec, c, size);
	base = zf_region_base(r);
	if (zf_region_size(r) != size)
		cli_die(1, "zf_region_size: %zu bytes, asked for %llu", zf_region_size(r),
			(unsigned long long)size);
	memcpy(base, data, size);

	/* Round -1 is untimed: the store's pool and the region's structures warm up. */
	for (int k = -1; k < repeat; k++) {
		volatile const uint8_t *v = base;
		uint64_t t0, t1, diff = 0;
		long evicted;

		cli_progress("%s %s %s %s ra %u %s: round %d of %d%s", image, zf_codec_name(codec),
			     ub, c->mode_name, c->readahead, c->swapin_name, k < 0 ? 0 : k + 1,
			     repeat, k < 0 ? " (untimed)" : "");
		for (uint64_t i = 0; i < pages; i++)
			expect[i] = data[i * ZF_PAGE_SIZE + touch_offset(i, k)];
		if (k == 0)
			zf_region_get_stats(r, &st0, sizeof(st0));

		t0 = cli_now_ns();
		evicted = zf_region_pageout(r, base, size);
		t1 = cli_now_ns();
		if (evicted < 0)
			cli_die(1, "zf_region_pageout: %s", zf_strerror((int)evicted));
		if ((uint64_t)evicted < res->evicted_min)
			res->evicted_min = (uint64_t)evicted;
		zf_store_get_stats(zf_region_store(r), &res->sst, sizeof(res->sst));
		if (k >= 0)
			tout[k] = (double)(t1 - t0) / 1e6;

		t0 = cli_now_ns();
		for (uint64_t u = 0, i = 0; u < units; u++) {
			const uint64_t f0 = cli_now_ns();
			const uint8_t b = v[i * ZF_PAGE_SIZE + touch_offset(i, k)];
			const uint64_t f1 = cli_now_ns();

			if (k >= 0)
				lat[nlat++] = (double)(f1 - f0) / 1e3;
			diff |= b ^ expect[i];
			for (i++; i < (u + 1) * ppu; i++)
				diff |= v[i * ZF_PAGE_SIZE + touch_offset(i, k)] ^ expect[i];
		}
		t1 = cli_now_ns();
		if (k >= 0)
			tin[k] = (double)(t1 - t0) / 1e6;

		if (diff) {
			for (uint64_t i = 0; i < pages; i++) {
				const uint64_t off = i * ZF_PAGE_SIZE + touch_offset(i, k);

				if (base[off] != data[off])
					mismatch(image, c, base, data, off, 1, k, repeat);
			}
			mismatch(image, c, base, data, 0, size, k, repeat);
		}
		for (int j = 0; j < CHECK_PAGES; j++) {
			const uint64_t off = cli_xorshift(&x) % pages * ZF_PAGE_SIZE;

			if (memcmp(base + off, data + off, ZF_PAGE_SIZE))
				mismatch(image, c, base, data, off, ZF_PAGE_SIZE, k, repeat);
		}
	}
	zf_region_get_stats(r, &st1, sizeof(st1));
	if (memcmp(base, data, size))
		mismatch(image, c, base, data, 0, size, repeat - 1, repeat);

	stats_diff(&st1, &st0, &res->d);
	/*
	 * A unit the store refused, or one still in a transition (a fault or readahead
	 * finishing), stays resident: the figures then cover fewer faults.
	 */
	if (res->evicted_min < units)
		fprintf(stderr,
			"zfolio: note: %s, unit %s, mode %s: a zf_region_pageout() of the whole "
			"region evicted only %llu of %llu units (%llu refused by the store over "
			"the timed rounds; the others were busy)\n",
			image, ub, c->mode_name, (unsigned long long)res->evicted_min,
			(unsigned long long)units, (unsigned long long)res->d.reject);
	res->touches = (c->swapin == ZF_SWAPIN_PER_PAGE ? pages : units) * (uint64_t)repeat;
	res->swapout_ms = cli_median(tout, repeat);
	res->swapin_ms = cli_median(tin, repeat);
	res->fault_p50_us = cli_percentile(lat, (int)nlat, 50);
	res->fault_p99_us = cli_percentile(lat, (int)nlat, 99);
	res->fault_max_us = lat[nlat - 1]; /* sorted by cli_percentile() */
	/* Over the timed rounds only (the histogram's difference), not the fill's faults. */
	res->service_p50_us = hist_quantile_ns(res->d.fault_lat, 50, 100) / 1e3;
	res->service_p99_us = hist_quantile_ns(res->d.fault_lat, 99, 100) / 1e3;
	res->service_p999_us = hist_quantile_ns(res->d.fault_lat, 999, 1000) / 1e3;

	res->counters = cli_region_stats_text(r);

	zf_region_destroy(r);
	free(lat);
	free(expect);
	free(tout);
}

/* -------------------------------------------------------------------------------- */
/* Output                                                                           */
/* -------------------------------------------------------------------------------- */

static double ratio(const struct result *r)
{
	return r->sst.compr_data_size
		       ? (double)r->sst.orig_data_size / (double)r->sst.compr_data_size
		       : NAN;
}

static double faulted(const struct result *r)
{
	return r->touches ? (double)r->d.pgmajfault / (double)r->touches : NAN;
}

static void print_json(const struct result *r)
{
	char ub[32];

	printf("{\"bench\":\"region\",\"image\":");
	cli_json_string(stdout, r->image);
	cli_json_u64("image_size", r->image_size);
	printf(",\"codec\":\"%s\"", zf_codec_name(r->codec));
	cli_json_u64("unit", r->cfg.unit);
	cli_json_u64("frame", r->cfg.frame);
	printf(",\"engines\":%u", r->cfg.engines);
	printf(",\"unit_name\":\"%s\",\"mode\":\"%s\"", unit_label(&r->cfg, ub, sizeof(ub)),
	       r->cfg.mode_name);
	printf(",\"readahead\":%u,\"swapin\":\"%s\"", r->cfg.readahead, r->cfg.swapin_name);
	cli_json_u64("size", r->size);
	printf(",\"repeat\":%d", r->repeat);
	cli_json_num("swapout_ms", r->swapout_ms, 2);
	cli_json_num("swapout_mbps", cli_mbps(r->size, r->swapout_ms / 1e3), 1);
	cli_json_num("swapin_ms", r->swapin_ms, 2);
	cli_json_num("swapin_mbps", cli_mbps(r->size, r->swapin_ms / 1e3), 1);
	cli_json_num("fault_p50_us", r->fault_p50_us, 2);
	cli_json_num("fault_p99_us", r->fault_p99_us, 2);
	cli_json_num("fault_max_us", r->fault_max_us, 2);
	cli_json_num("service_p50_us", r->service_p50_us, 2);
	cli_json_num("service_p99_us", r->service_p99_us, 2);
	cli_json_num("service_p999_us", r->service_p999_us, 2);
	cli_json_u64("touches", r->touches);
	cli_json_u64("pgmajfault", r->d.pgmajfault);
	cli_json_num("faulted", faulted(r), 4);
	cli_json_u64("swpout", r->d.swpout);
	cli_json_u64("swpin", r->d.swpin);
	cli_json_u64("swap_ra", r->d.swap_ra);
	cli_json_u64("swap_ra_hit", r->d.swap_ra_hit);
	cli_json_u64("fault_waits", r->d.fault_waits);
	cli_json_u64("copy_eexist", r->d.copy_eexist);
	cli_json_u64("copy_eagain", r->d.copy_eagain);
	cli_json_u64("reject", r->d.reject);
	cli_json_u64("evicted_min", r->evicted_min);
	cli_json_num("ratio", ratio(r), 4);
	cli_json_u64("orig_data_size", r->sst.orig_data_size);
	cli_json_u64("compr_data_size", r->sst.compr_data_size);
	/* The region's counters since it was made, as zf_region_stats_text() names them. */
	cli_json_counters(r->counters);
	printf("}\n");
}

static void print_header(void)
{
	printf("%-14s %-7s %7s %3s %-6s %4s %-8s  %8s %8s %8s  %9s %8s %7s  %8s %8s  %6s\n",
	       "image", "codec", "unit", "eng", "mode", "ra", "swapin", "out ms", "in ms",
	       "in MB/s", "fault p50", "p99", "faulted", "svc p50", "p99", "ratio");
}

static void print_row(const struct result *r)
{
	char ub[32];

	printf("%-14.14s %-7s %7s %3u %-6s %4u %-8s  %8.1f %8.1f %8.1f  %9.2f %8.2f %6.1f%%  %8.2f "
	       "%8.2f  %6.3f\n",
	       r->image, zf_codec_name(r->codec), unit_label(&r->cfg, ub, sizeof(ub)),
	       r->cfg.engines, r->cfg.mode_name, r->cfg.readahead, r->cfg.swapin_name,
	       r->swapout_ms, r->swapin_ms, cli_mbps(r->size, r->swapin_ms / 1e3), r->fault_p50_us,
	       r->fault_p99_us, 100 * faulted(r), r->service_p50_us, r->service_p99_us, ratio(r));
}

int bench_region(int argc, char **argv)
{
	const struct cli_args *a = cli_parse(&bench_region_cmd, argc, argv);
	const struct cli_value *images = &a->v[OPT_IMAGE], *units = &a->v[OPT_UNIT],
			       *codec_names = &a->v[OPT_CODEC], *modes = &a->v[OPT_MODE],
			       *ra = &a->v[OPT_READAHEAD], *swapins = &a->v[OPT_SWAPIN],
			       *frames = &a->v[OPT_FRAME], *engines = &a->v[OPT_ENGINES];
	const int repeat = (int)a->v[OPT_REPEAT].num[0], json = a->v[OPT_JSON].n;
	const zf_codec *codecs[CLI_VALUES_MAX];
	struct config *cfgs =
		calloc((size_t)(units->n * modes->n * ra->n * swapins->n * frames->n * engines->n),
		       sizeof(*cfgs));
	uint64_t size = a->v[OPT_SIZE].num[0], max_unit = 0;
	int n_cfgs = 0;
	uint8_t *data;

	if (!cfgs)
		cli_die(1, "out of memory");
	for (int i = 0; i < codec_names->n; i++)
		codecs[i] = cli_find_codec(codec_names->str[i]);
	for (int ui = 0; ui < units->n; ui++) {
		for (int mi = 0; mi < modes->n; mi++) {
			for (int ai = 0; ai < ra->n; ai++) {
				for (int wi = 0; wi < swapins->n; wi++) {
					for (int fi = 0; fi < frames->n * engines->n; fi++) {
						struct config *c = &cfgs[n_cfgs++];

						c->unit = units->num[ui];
						c->frame =
							strcmp(frames->str[fi / engines->n], "2m")
								? 0
								: ZF_FRAME_2M;
						c->engines =
							(unsigned)engines->num[fi % engines->n];
						c->mode_name = modes->str[mi];
						c->mode = strcmp(c->mode_name, "sigbus")
								  ? ZF_FAULT_THREAD
								  : ZF_FAULT_SIGBUS;
						c->readahead = (unsigned)ra->num[ai];
						c->swapin_name = swapins->str[wi];
						c->swapin = strcmp(c->swapin_name, "per-page")
								    ? ZF_SWAPIN_WHOLE
								    : ZF_SWAPIN_PER_PAGE;
						if (place_size(c) > max_unit)
							max_unit = place_size(c);
					}
				}
			}
		}
	}
	/* Every unit sees the same bytes. */
	size = (size + max_unit - 1) / max_unit * max_unit;
	/* A missing image is bad input even where userfaultfd is unavailable. */
	cli_check_images(images);

	/*
	 * Every configuration once on a one-unit region first, so that a missing userfaultfd
	 * or a refused option stops the run before any output.
	 */
	for (int ci = 0; ci < codec_names->n; ci++) {
		for (int i = 0; i < n_cfgs; i++)
			zf_region_destroy(new_region(codecs[ci], &cfgs[i], place_size(&cfgs[i])));
	}

	data = cli_map_buffer(size);
	if (!json)
		print_header();
	for (int ii = 0; ii < images->n; ii++) {
		zf_image *img = cli_open_image(images->str[ii]);
		const char *name = zf_image_name(img);

		cli_tile(data, size, img);
		for (int ci = 0; ci < codec_names->n; ci++) {
			for (int i = 0; i < n_cfgs; i++) {
				struct result r;

				run_config(name, zf_image_size(img), codecs[ci], data, size,
					   &cfgs[i], repeat, &r);
				cli_progress_done();
				if (json)
					print_json(&r);
				else
					print_row(&r);
				fflush(stdout);
				free(r.counters);
			}
		}
		zf_image_close(img);
	}
	munmap(data, size);
	free(cfgs);
	return 0;
}
