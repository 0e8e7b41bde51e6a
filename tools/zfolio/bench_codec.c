/*
 * bench_codec.c - "zfolio bench codec": the codec x unit-size matrix on memory images.
 *
 * For each image, unit size and codec, the image is cut into units (the last one may be
 * shorter) and every unit is compressed on its own, single-threaded, the way zram and
 * zswap compress a page or, with multi-page compression, a whole large folio:
 *
 *  - a unit that is one repeated 64-bit value is same-filled: it costs nothing (zram
 *    keeps the value) and is neither compressed nor timed; its pages are reported apart;
 *  - a unit whose compressed form is not smaller than the unit is incompressible: it is
 *    kept raw and costs its full size, as zram's huge class and zswap's raw pages do;
 *  - ratio = image bytes / (compressed bytes + raw bytes), over the whole image.
 *
 * Timing follows zstd's benchfn: one untimed warm-up pass (which also faults in the
 * buffers and checks the round trip of every unit, naming the first bad unit and byte),
 * then --repeat timed passes over the whole image, reporting the median (and the best).
 * Compression MB/s counts the bytes handed to the compressor (all units but the
 * same-filled ones); decompression MB/s the bytes of the units that were compressed.
 * MB is 10^6 bytes.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cli.h"

struct codec_result {
	const char *image, *codec;
	uint64_t unit, orig_bytes, compr_bytes, pages, same_filled_pages;
	uint64_t units, compressed_units, incompressible_units;
	uint64_t comp_bytes_in, decomp_bytes_out;
	double comp_s_median, comp_s_best, decomp_s_median, decomp_s_best;
	int repeat;
};

enum out_format { OUT_TABLE, OUT_JSON, OUT_CSV };

static const struct cli_command bench_codec_cmd = {
	.name = "bench codec",
	.about = "Compresses every unit of each memory image on its own, single-threaded, with each\n"
		 "codec and unit size, checks the round trip of every unit, and reports the ratio,\n"
		 "same-filled pages, incompressible units and compression/decompression speed.\n",
	.notes = "ratio = image bytes / stored bytes, where same-filled units (one repeated 64-bit\n"
		 "value) cost nothing and units that do not compress below their size are stored raw.\n"
		 "MB/s: median of the repeats, MB = 10^6 bytes of uncompressed data.\n",
	.uses = {
		{ .opt = OPT_IMAGE, .def = "sample" },
		{ .opt = OPT_CODEC, .def = "lz4,zstd:1,deflate:1,lzo" },
		{ .opt = OPT_UNIT, .def = "4k,64k" },
		{ .opt = OPT_REPEAT, .def = "5" },
		{ .opt = OPT_JSON },
		{ .opt = OPT_CSV },
	},
};

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* The per-unit layout of one image at one unit size, shared by all codecs. */
struct unit_plan {
	uint64_t unit, n_units, same_filled_pages;
	uint8_t *same; /* same[i]: unit i is same-filled */
	int32_t *clen; /* compressed length, or -1 for a raw unit */
};

static void plan_units(const zf_image *img, uint64_t unit, struct unit_plan *p)
{
	const uint8_t *data = zf_image_data(img);
	const uint64_t size = zf_image_size(img);

	p->unit = unit;
	p->n_units = (size + unit - 1) / unit;
	p->same_filled_pages = 0;
	p->same = calloc(p->n_units, 1);
	p->clen = calloc(p->n_units, sizeof(*p->clen));
	if (!p->same || !p->clen)
		cli_die(1, "out of memory");
	for (uint64_t i = 0; i < p->n_units; i++) {
		const uint64_t len = min_u64(unit, size - i * unit);

		if (zf_same_filled(data + i * unit, len, NULL)) {
			p->same[i] = 1;
			p->same_filled_pages += len / ZF_PAGE_SIZE;
		}
	}
}

static void free_plan(struct unit_plan *p)
{
	free(p->same);
	free(p->clen);
}

/* One pass of compression over the image; fills plan->clen. Returns seconds. */
static double compress_pass(zf_codec_ctx *ctx, const zf_image *img, struct unit_plan *p,
			    uint8_t *slots)
{
	const uint8_t *data = zf_image_data(img);
	const uint64_t size = zf_image_size(img), unit = p->unit;
	const double t0 = cli_now();

	for (uint64_t i = 0; i < p->n_units; i++) {
		const uint64_t len = min_u64(unit, size - i * unit);
		int n;

		if (p->same[i])
			continue;
		/* Smaller than the unit, or it is stored raw. */
		n = zf_codec_compress(ctx, data + i * unit, len, slots + i * unit, len - 1);
		if (n == -E2BIG)
			n = -1;
		else if (n < 0)
			cli_die(1, "%s: compressing unit %llu: %s",
				zf_codec_name(zf_codec_ctx_codec(ctx)), (unsigned long long)i,
				zf_strerror(n));
		p->clen[i] = n;
	}
	return cli_now() - t0;
}

/* One pass of decompression of every compressed unit into out. Returns seconds. */
static double decompress_pass(zf_codec_ctx *ctx, const zf_image *img, const struct unit_plan *p,
			      const uint8_t *slots, uint8_t *out)
{
	const uint64_t size = zf_image_size(img), unit = p->unit;
	const double t0 = cli_now();

	for (uint64_t i = 0; i < p->n_units; i++) {
		const uint64_t len = min_u64(unit, size - i * unit);
		int n;

		if (p->same[i] || p->clen[i] < 0)
			continue;
		n = zf_codec_decompress(ctx, slots + i * unit, (size_t)p->clen[i], out + i * unit,
					len);
		if (n < 0)
			cli_die(1, "%s: unit %llu (offset %llu) does not decompress: %s",
				zf_codec_name(zf_codec_ctx_codec(ctx)), (unsigned long long)i,
				(unsigned long long)(i * unit), zf_strerror(n));
	}
	return cli_now() - t0;
}

/* Checks every compressed unit's round trip; dies naming the first bad unit and byte. */
static void verify_round_trip(const zf_codec *codec, const zf_image *img, const struct unit_plan *p,
			      const uint8_t *out)
{
	const uint8_t *data = zf_image_data(img);
	const uint64_t size = zf_image_size(img), unit = p->unit;

	for (uint64_t i = 0; i < p->n_units; i++) {
		const uint64_t len = min_u64(unit, size - i * unit);
		const uint8_t *a = data + i * unit, *b = out + i * unit;

		if (p->same[i] || p->clen[i] < 0 || !memcmp(a, b, len))
			continue;
		for (uint64_t j = 0; j < len; j++) {
			if (a[j] != b[j])
				cli_die(1,
					"%s: %s: round trip mismatch in unit %llu at byte %llu "
					"(image offset %llu): 0x%02x != 0x%02x",
					zf_codec_name(codec), zf_image_name(img),
					(unsigned long long)i, (unsigned long long)j,
					(unsigned long long)(i * unit + j), b[j], a[j]);
		}
	}
}

static void run_case(const zf_image *img, const zf_codec *codec, struct unit_plan *p, int repeat,
		     uint8_t *slots, uint8_t *out, struct codec_result *r)
{
	const uint64_t size = zf_image_size(img);
	double *tc = calloc((size_t)repeat, sizeof(double));
	double *td = calloc((size_t)repeat, sizeof(double));
	char unit_name[16];
	zf_codec_ctx *ctx;
	int ret;

	if (!tc || !td)
		cli_die(1, "out of memory");
	ret = zf_codec_ctx_create(codec, &ctx);
	if (ret < 0)
		cli_die(1, "%s: %s", zf_codec_name(codec), zf_strerror(ret));

	memset(r, 0, sizeof(*r));
	r->image = zf_image_name(img);
	r->codec = zf_codec_name(codec);
	r->unit = p->unit;
	r->orig_bytes = size;
	r->pages = size / ZF_PAGE_SIZE;
	r->same_filled_pages = p->same_filled_pages;
	r->units = p->n_units;
	r->repeat = repeat;

	cli_format_unit(p->unit, unit_name, sizeof(unit_name));
	cli_progress("%s %s %s: warm-up and round-trip check", r->image, r->codec, unit_name);
	compress_pass(ctx, img, p, slots);
	decompress_pass(ctx, img, p, slots, out);
	verify_round_trip(codec, img, p, out);

	for (uint64_t i = 0; i < p->n_units; i++) {
		const uint64_t len = min_u64(p->unit, size - i * p->unit);

		if (p->same[i])
			continue;
		r->comp_bytes_in += len;
		if (p->clen[i] < 0) {
			r->incompressible_units++;
			r->compr_bytes += len;
		} else {
			r->compressed_units++;
			r->compr_bytes += (uint64_t)p->clen[i];
			r->decomp_bytes_out += len;
		}
	}

	for (int k = 0; k < repeat; k++) {
		cli_progress("%s %s %s: pass %d/%d", r->image, r->codec, unit_name, k + 1, repeat);
		tc[k] = compress_pass(ctx, img, p, slots);
		td[k] = decompress_pass(ctx, img, p, slots, out);
	}
	r->comp_s_median = cli_median(tc, repeat);
	r->comp_s_best = tc[0]; /* cli_median() sorted the times */
	r->decomp_s_median = cli_median(td, repeat);
	r->decomp_s_best = td[0];
	zf_codec_ctx_destroy(ctx);
	free(tc);
	free(td);
}

static double ratio_of(const struct codec_result *r)
{
	return r->compr_bytes ? (double)r->orig_bytes / (double)r->compr_bytes : INFINITY;
}

static double incompressible_pct(const struct codec_result *r)
{
	return r->units ? 100.0 * (double)r->incompressible_units / (double)r->units : 0;
}

static void print_json(const struct codec_result *r)
{
	char unit_name[16];

	printf("{\"bench\":\"codec\",\"image\":");
	cli_json_string(stdout, r->image);
	printf(",\"codec\":");
	cli_json_string(stdout, r->codec);
	printf(",\"unit\":%llu,\"unit_name\":\"%s\",\"orig_bytes\":%llu,\"compr_bytes\":%llu,"
	       "\"ratio\":%.4f,\"pages\":%llu,\"same_filled_pages\":%llu,\"units\":%llu,"
	       "\"incompressible_units\":%llu,\"incompressible_pct\":%.3f,"
	       "\"comp_mbps\":%.1f,\"decomp_mbps\":%.1f,\"comp_mbps_best\":%.1f,"
	       "\"decomp_mbps_best\":%.1f,\"repeat\":%d}\n",
	       (unsigned long long)r->unit, cli_format_unit(r->unit, unit_name, sizeof(unit_name)),
	       (unsigned long long)r->orig_bytes, (unsigned long long)r->compr_bytes, ratio_of(r),
	       (unsigned long long)r->pages, (unsigned long long)r->same_filled_pages,
	       (unsigned long long)r->units, (unsigned long long)r->incompressible_units,
	       incompressible_pct(r), cli_mbps(r->comp_bytes_in, r->comp_s_median),
	       cli_mbps(r->decomp_bytes_out, r->decomp_s_median),
	       cli_mbps(r->comp_bytes_in, r->comp_s_best),
	       cli_mbps(r->decomp_bytes_out, r->decomp_s_best), r->repeat);
}

static const char csv_header[] =
	"bench,image,codec,unit,orig_bytes,compr_bytes,ratio,pages,same_filled_pages,units,"
	"incompressible_units,incompressible_pct,comp_mbps,decomp_mbps,comp_mbps_best,"
	"decomp_mbps_best,repeat\n";

static void print_csv(const struct codec_result *r)
{
	printf("codec,%s,%s,%llu,%llu,%llu,%.4f,%llu,%llu,%llu,%llu,%.3f,%.1f,%.1f,%.1f,%.1f,%d\n",
	       r->image, r->codec, (unsigned long long)r->unit, (unsigned long long)r->orig_bytes,
	       (unsigned long long)r->compr_bytes, ratio_of(r), (unsigned long long)r->pages,
	       (unsigned long long)r->same_filled_pages, (unsigned long long)r->units,
	       (unsigned long long)r->incompressible_units, incompressible_pct(r),
	       cli_mbps(r->comp_bytes_in, r->comp_s_median),
	       cli_mbps(r->decomp_bytes_out, r->decomp_s_median),
	       cli_mbps(r->comp_bytes_in, r->comp_s_best),
	       cli_mbps(r->decomp_bytes_out, r->decomp_s_best), r->repeat);
}

static void print_table_header(const zf_image *img)
{
	printf("image %s: %zu MiB, %zu pages\n", zf_image_name(img), zf_image_size(img) >> 20,
	       zf_image_size(img) / ZF_PAGE_SIZE);
	printf("%-12s %5s %7s %13s %9s %10s %12s\n", "codec", "unit", "ratio", "same-filled",
	       "incompr", "comp MB/s", "decomp MB/s");
}

static void print_table_row(const struct codec_result *r)
{
	char unit_name[16];

	printf("%-12s %5s %7.3f %13llu %8.2f%% %10.0f %12.0f\n", r->codec,
	       cli_format_unit(r->unit, unit_name, sizeof(unit_name)), ratio_of(r),
	       (unsigned long long)r->same_filled_pages, incompressible_pct(r),
	       cli_mbps(r->comp_bytes_in, r->comp_s_median),
	       cli_mbps(r->decomp_bytes_out, r->decomp_s_median));
}

static int bench_codec(int argc, char **argv)
{
	const struct cli_args *a = cli_parse(&bench_codec_cmd, argc, argv);
	const struct cli_value *images = &a->v[OPT_IMAGE], *units = &a->v[OPT_UNIT],
			       *codec_names = &a->v[OPT_CODEC];
	const int repeat = (int)a->v[OPT_REPEAT].num[0];
	const zf_codec *codecs[CLI_VALUES_MAX];
	enum out_format fmt = OUT_TABLE;

	if (a->v[OPT_JSON].n && a->v[OPT_CSV].n)
		cli_die(EXIT_USAGE, "--json or --csv, not both");
	if (a->v[OPT_JSON].n)
		fmt = OUT_JSON;
	if (a->v[OPT_CSV].n)
		fmt = OUT_CSV;
	for (int i = 0; i < codec_names->n; i++)
		codecs[i] = cli_find_codec(codec_names->str[i]);

	if (fmt == OUT_CSV)
		fputs(csv_header, stdout);
	for (int ii = 0; ii < images->n; ii++) {
		zf_image *img = cli_open_image(images->str[ii]);
		const size_t size = zf_image_size(img);
		uint8_t *slots = cli_map_buffer(size), *out = cli_map_buffer(size);

		if (fmt == OUT_TABLE)
			print_table_header(img);
		for (int ui = 0; ui < units->n; ui++) {
			struct unit_plan plan;

			plan_units(img, units->num[ui], &plan);
			for (int ci = 0; ci < codec_names->n; ci++) {
				struct codec_result r;

				run_case(img, codecs[ci], &plan, repeat, slots, out, &r);
				cli_progress_done();
				if (fmt == OUT_JSON)
					print_json(&r);
				else if (fmt == OUT_CSV)
					print_csv(&r);
				else
					print_table_row(&r);
				fflush(stdout);
			}
			free_plan(&plan);
		}
		if (fmt == OUT_TABLE)
			printf("\n");
		munmap(slots, size);
		munmap(out, size);
		zf_image_close(img);
	}
	return 0;
}

static const char bench_usage[] =
	"usage: zfolio bench <benchmark> [options]\n"
	"\n"
	"benchmarks:\n"
	"  codec   codec x unit-size matrix on memory images\n"
	"  zpool   zf_pool memory against glibc malloc and mimalloc\n"
	"  store   zf_store put/get throughput, ratio and get latency\n"
	"  region  userfaultfd fault service: latency and swap-in MB/s\n"
	"  fresh   first touch of fresh memory: a region against plain memory\n"
	"\n"
	"Run 'zfolio bench <benchmark> --help' for its options.\n";

int cmd_bench(int argc, char **argv)
{
	if (argc < 2) {
		fputs(bench_usage, stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(bench_usage, stdout);
		return 0;
	}
	if (!strcmp(argv[1], "codec"))
		return bench_codec(argc - 1, argv + 1);
	if (!strcmp(argv[1], "zpool"))
		return bench_zpool(argc - 1, argv + 1);
	if (!strcmp(argv[1], "store"))
		return bench_store(argc - 1, argv + 1);
	if (!strcmp(argv[1], "region"))
		return bench_region(argc - 1, argv + 1);
	if (!strcmp(argv[1], "fresh"))
		return bench_fresh(argc - 1, argv + 1);
	fprintf(stderr, "zfolio: unknown benchmark '%s'\n\n%s", argv[1], bench_usage);
	return EXIT_USAGE;
}
