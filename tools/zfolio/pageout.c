/*
 * pageout.c - "zfolio pageout": the Linux large-folio swap experiment, on zfolio and on
 * the running kernel, side by side.
 *
 * The Linux work on large-folio swap-in and multi-page compression measured 100 MiB of
 * anonymous memory captured from a real device: 100 times, madvise(MADV_PAGEOUT) of the
 * whole range (timed), then a read of every page (timed). This command runs that loop
 * for each combination of backend, unit, codec and swap-in mode asked for, on one image,
 * prints each run (median, min and max per iteration, MB/s, compressed size, pool
 * memory, the counters) and, when there are several, a side-by-side table in the form
 * of the published one, with the ratios between backends and the 4K -> 64K gains beside
 * the published gains. The backends are in pageout_zfolio.c and pageout_kernel.c.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pageout.h"

#define MAX_LIST 8
#define MAX_CFGS (MAX_LIST * MAX_LIST * 2 * 2 * 2)
#define CHECK_PAGES 16

static const char pageout_usage[] =
	"usage: zfolio pageout [--image FILE] [--size SIZE] [--iterations N] [--unit LIST]\n"
	"                      [--codec LIST] [--backend LIST] [--swapin LIST] [--mode LIST]\n"
	"                      [--engines N] [--readahead N] [--verify] [--allow-swap] [--json]\n"
	"\n"
	"The large-folio swap experiment of the Linux work (100 MiB of memory captured from a\n"
	"real device; madvise(MADV_PAGEOUT) of all of it, then a read of every page, 100\n"
	"times), on zfolio's userfaultfd region and on the running kernel's own zram, one\n"
	"after the other on the same data, with a side-by-side table at the end.\n"
	"\n"
	"  --image FILE      a memory image (raw or .zst). Default: the built-in sample\n"
	"  --size SIZE       bytes of memory, filled with the image cut or tiled to it\n"
	"                    (rounded up to the largest unit). Default 100m\n"
	"  --iterations N    timed iterations, after an untimed warm-up one (default 10)\n"
	"  --unit LIST       units, powers of two 4k..2m (default 4k,64k). zfolio compresses\n"
	"                    each unit as one object and swaps it in whole on the first\n"
	"                    touch; the kernel gets folios of that size (mTHP; 4k: none)\n"
	"  --codec LIST      compressors (default lz4). zfolio: its codecs (lz4, zstd:1, lzo\n"
	"                    ...); the kernel: zram's algorithms, at their default level\n"
	"                    (lz4, lzo-rle, lzo ...). A name a backend lacks is skipped there\n"
	"  --backend LIST    zfolio, kernel (default zfolio). kernel needs root: it sets up\n"
	"                    zram as swap with the codec, enables only the mTHP size of the\n"
	"                    unit, and puts every setting back afterwards (also on an error\n"
	"                    or SIGINT). It never enables zswap\n"
	"  --swapin LIST     zfolio: whole (default; a fault brings its whole unit in) or\n"
	"                    per-page (a fault places only its page, decompressing the unit\n"
	"                    each time, as the kernel does when it cannot swap a large folio\n"
	"                    in). The kernel chooses for itself: kernel runs only 'whole'\n"
	"  --mode LIST       zfolio fault service: thread (default) or sigbus (see 'zfolio\n"
	"                    bench region --help')\n"
	"  --engines N       zfolio compression threads for the swap-out (default: the\n"
	"                    number of CPUs, at most 4; 0: the caller compresses)\n"
	"  --readahead N     zfolio readahead window in units (default 0: the kernel does no\n"
	"                    swap readahead on zram either)\n"
	"  --verify          compare every byte after every iteration (default: the byte read\n"
	"                    of every page, and 16 whole pages at random)\n"
	"  --allow-swap      kernel: run although another swap device is active\n"
	"  --json            one JSON object per run, then one for the side-by-side table\n"
	"\n"
	"Per run: swap-out and swap-in ms per iteration (median, min, max over the timed\n"
	"iterations), MB/s (10^6 bytes per second, of the median), the data swapped out, its\n"
	"compressed size and the pool's memory after the last swap-out (zfolio: the store's\n"
	"pool, including the pages it keeps for reuse; kernel: zram's mm_stat), swap-in faults\n"
	"per iteration and a swap-in fault's time as the program sees it (zfolio: and how much\n"
	"of it the region's service takes, reading from the store and placing). Counters:\n"
	"zfolio's region, or the kernel's per-size mTHP stats, pswpin/pswpout and zram's\n"
	"mm_stat, over the timed iterations. A kernel run whose folios did not go out or come\n"
	"back at the unit's size is flagged DEGRADED.\n"
	"\n"
	"Exit status: 0, 1 when a byte came back wrong or a run failed, 2 bad usage, 77 a\n"
	"backend cannot run here (no userfaultfd; kernel: not root, no zram, swap active).\n";

/* Published (Linux large-folio swap-in and multi-page compression, a phone, 100 MiB x
 * 100, ms in all): lz4 and zstd, 4K and 64K. */
static const struct {
	const char *codec;
	double out4k, in4k, out64k, in64k;
} published[] = {
	{ "lz4", 90540, 45274, 55667, 22942 },
	{ "zstd", 186585, 85035, 118533, 46558 },
};

/* The byte of page i read in iteration k: a different place in each page and iteration. */
static inline size_t touch_offset(uint64_t i, int k)
{
	return (size_t)(((uint32_t)i * 2654435761u + (uint32_t)(k + 2) * 40503u) >> 20);
}

static int touch(const struct pageout_job *job, const volatile uint8_t *mem, int iteration)
{
	const uint64_t pages = job->size / ZF_PAGE_SIZE;
	uint8_t diff = 0;

	for (uint64_t i = 0; i < pages; i++) {
		const size_t off = i * ZF_PAGE_SIZE + touch_offset(i, iteration);

		diff |= mem[off] ^ job->data[off];
	}
	return diff != 0;
}

static const char *backend_name(enum pageout_backend b)
{
	return b == BACKEND_KERNEL ? "kernel" : "zfolio";
}

static void mismatch(const struct pageout_job *job, const struct pageout_config *c,
		     const uint8_t *mem, uint64_t off, uint64_t len, int iteration)
{
	char ub[16], it[48];

	for (const uint64_t end = off + len; off < end && mem[off] == job->data[off]; off++)
		;
	if (iteration < 0)
		snprintf(it, sizeof(it), "the warm-up iteration");
	else
		snprintf(it, sizeof(it), "iteration %d of %d", iteration + 1, job->iterations);
	cli_die(1, "%s, %s, unit %s, %s: byte %llu (page %llu) came back wrong in %s", job->image,
		backend_name(c->backend), cli_format_unit(c->unit, ub, sizeof(ub)), c->codec,
		(unsigned long long)off, (unsigned long long)(off / ZF_PAGE_SIZE), it);
}

static void check(const struct pageout_job *job, const struct pageout_config *c, const uint8_t *mem,
		  int iteration, int diff)
{
	const uint64_t pages = job->size / ZF_PAGE_SIZE;
	uint64_t x = 0x9e3779b97f4a7c15ull ^ (uint64_t)(iteration + 2);

	if (diff) {
		for (uint64_t i = 0; i < pages; i++) {
			const uint64_t off = i * ZF_PAGE_SIZE + touch_offset(i, iteration);

			if (mem[off] != job->data[off])
				mismatch(job, c, mem, off, 1, iteration);
		}
	}
	if (job->verify) {
		if (memcmp(mem, job->data, job->size))
			mismatch(job, c, mem, 0, job->size, iteration);
		return;
	}
	for (int j = 0; j < CHECK_PAGES; j++) {
		uint64_t off;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		off = x % pages * ZF_PAGE_SIZE;
		if (memcmp(mem + off, job->data + off, ZF_PAGE_SIZE))
			mismatch(job, c, mem, off, ZF_PAGE_SIZE, iteration);
	}
}

void pageout_swapin(const struct pageout_job *job, struct pageout_result *res,
		    const volatile uint8_t *mem, int k)
{
	const uint64_t t0 = cli_now_ns();
	const int diff = touch(job, mem, k);
	const uint64_t t1 = cli_now_ns();

	if (k >= 0)
		res->in_ms[k] = (double)(t1 - t0) / 1e6;
	check(job, &res->cfg, (const uint8_t *)mem, k, diff);
}

void pageout_counter(char **text, const char *name, uint64_t value)
{
	const size_t old = *text ? strlen(*text) : 0;
	char line[128];
	const int n = snprintf(line, sizeof(line), "%s %llu\n", name, (unsigned long long)value);
	char *grown = realloc(*text, old + (size_t)n + 1);

	if (!grown)
		cli_die(1, "out of memory");
	memcpy(grown + old, line, (size_t)n + 1);
	*text = grown;
}

static void summarise(struct pageout_result *res, int n)
{
	res->out_med = cli_median(res->out_ms, n);
	res->out_min = res->out_ms[0];
	res->out_max = res->out_ms[n - 1];
	res->in_med = cli_median(res->in_ms, n);
	res->in_min = res->in_ms[0];
	res->in_max = res->in_ms[n - 1];
	res->split_fault_us = res->faults ? res->in_med * 1e3 / (double)res->faults : NAN;
}

/* -------------------------------------------------------------------------------- */
/* Output                                                                           */
/* -------------------------------------------------------------------------------- */

static double div_or_nan(double a, double b)
{
	return b > 0 ? a / b : NAN;
}

/* The run's label in the table: backend, and the zfolio options that are not default. */
static const char *label(const struct pageout_config *c, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s%s%s", backend_name(c->backend),
		 c->backend == BACKEND_ZFOLIO && c->mode == ZF_FAULT_SIGBUS ? "/sigbus" : "",
		 c->swapin == ZF_SWAPIN_PER_PAGE ? "/per-page" : "");
	return buf;
}

static void print_json(const struct pageout_job *job, const struct pageout_result *r)
{
	const struct pageout_config *c = &r->cfg;
	char ub[16];

	printf("{\"bench\":\"pageout\",\"backend\":\"%s\",\"image\":", backend_name(c->backend));
	cli_json_string(stdout, job->image);
	cli_json_u64("size", job->size);
	cli_json_u64("unit", c->unit);
	printf(",\"unit_name\":\"%s\",\"codec\":", cli_format_unit(c->unit, ub, sizeof(ub)));
	cli_json_string(stdout, c->codec);
	printf(",\"swapin_mode\":\"%s\"", c->swapin == ZF_SWAPIN_PER_PAGE ? "per-page" : "whole");
	if (c->backend == BACKEND_ZFOLIO)
		printf(",\"fault_mode\":\"%s\",\"engines\":%u,\"readahead\":%u", c->mode_name,
		       c->engines, c->readahead);
	printf(",\"iterations\":%d", job->iterations);
	cli_json_num("swapout_ms_median", r->out_med, 2);
	cli_json_num("swapout_ms_min", r->out_min, 2);
	cli_json_num("swapout_ms_max", r->out_max, 2);
	cli_json_num("swapin_ms_median", r->in_med, 2);
	cli_json_num("swapin_ms_min", r->in_min, 2);
	cli_json_num("swapin_ms_max", r->in_max, 2);
	cli_json_num("swapout_mbps", cli_mbps(job->size, r->out_med / 1e3), 1);
	cli_json_num("swapin_mbps", cli_mbps(job->size, r->in_med / 1e3), 1);
	cli_json_u64("orig_bytes", r->orig_bytes);
	cli_json_u64("compr_bytes", r->compr_bytes);
	cli_json_u64("mem_used_bytes", r->mem_used_bytes);
	cli_json_num("ratio", div_or_nan((double)r->orig_bytes, (double)r->compr_bytes), 4);
	cli_json_u64("faults", r->faults);
	cli_json_num("fault_us", r->split_fault_us, 2);
	cli_json_num("service_us", r->split_service_us, 2);
	cli_json_num("load_us", r->split_load_us, 2);
	cli_json_num("place_us", r->split_place_us, 2);
	printf(",\"degraded\":%s", r->degraded ? "true" : "false");
	cli_json_counters(r->counters);
	printf("}\n");
}

static void print_run(const struct pageout_job *job, const struct pageout_result *r)
{
	const struct pageout_config *c = &r->cfg;
	char ub[16], lb[48], *text = strdup(r->counters ? r->counters : ""), *line, *save = NULL;
	int col = 0;

	if (!text)
		cli_die(1, "out of memory");
	printf("%s%s, unit %s, %s", label(c, lb, sizeof(lb)), r->degraded ? " (DEGRADED)" : "",
	       cli_format_unit(c->unit, ub, sizeof(ub)), c->codec);
	if (c->backend == BACKEND_ZFOLIO)
		printf(", %u engine%s%s", c->engines, c->engines == 1 ? "" : "s",
		       c->readahead ? ", readahead" : "");
	printf(": %s, %.1f MiB, %d iterations\n", job->image, (double)job->size / 1048576.0,
	       job->iterations);
	printf("  swap-out  ms median %9.1f  min %9.1f  max %9.1f  %8.1f MB/s\n", r->out_med,
	       r->out_min, r->out_max, cli_mbps(job->size, r->out_med / 1e3));
	printf("  swap-in   ms median %9.1f  min %9.1f  max %9.1f  %8.1f MB/s\n", r->in_med,
	       r->in_min, r->in_max, cli_mbps(job->size, r->in_med / 1e3));
	printf("  stored %.1f MiB as %.1f MiB (ratio %.3f), pool %.1f MiB\n",
	       (double)r->orig_bytes / 1048576.0, (double)r->compr_bytes / 1048576.0,
	       div_or_nan((double)r->orig_bytes, (double)r->compr_bytes),
	       (double)r->mem_used_bytes / 1048576.0);
	printf("  swap-in faults per iteration %llu", (unsigned long long)r->faults);
	if (isfinite(r->split_fault_us))
		printf(", %.1f us each as the program sees it", r->split_fault_us);
	if (isfinite(r->split_service_us))
		printf(" = service %.1f (store read %.1f, placing %.1f, other %.1f) + round trip "
		       "%.1f",
		       r->split_service_us, r->split_load_us, r->split_place_us,
		       r->split_service_us - r->split_load_us - r->split_place_us,
		       r->split_fault_us - r->split_service_us);
	printf("\n  counters:");
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		const int len = (int)strlen(line);

		if (col + len > 88) {
			printf("\n           ");
			col = 0;
		}
		printf(" %s", line);
		col += len + 1;
	}
	printf("\n\n");
	free(text);
}

/* The run of label l, codec c and unit u, or NULL. */
static const struct pageout_result *find(const struct pageout_result *res, int n, const char *l,
					 const char *c, uint64_t u)
{
	for (int i = 0; i < n; i++) {
		char lb[48];

		if (!strcmp(label(&res[i].cfg, lb, sizeof(lb)), l) &&
		    !strcmp(res[i].cfg.codec, c) && res[i].cfg.unit == u)
			return &res[i];
	}
	return NULL;
}

/*
 * The side-by-side table: a row per (codec, unit), a column group per label (backend and
 * options), ratios of the other labels' times to the first's (>1: the first is faster),
 * then each label's 4k -> 64k gain beside the published one.
 */
static void print_table(const struct pageout_job *job, const struct pageout_result *res, int n,
			int json)
{
	char labels[MAX_LIST][48], lb[48];
	const char *codecs[MAX_LIST];
	uint64_t units[MAX_LIST];
	int nl = 0, nc = 0, nu = 0;

	for (int i = 0; i < n; i++) {
		int l, k, u;

		label(&res[i].cfg, lb, sizeof(lb));
		for (l = 0; l < nl && strcmp(labels[l], lb); l++)
			;
		if (l == nl && nl < MAX_LIST)
			snprintf(labels[nl++], sizeof(labels[0]), "%s", lb);
		for (k = 0; k < nc && strcmp(codecs[k], res[i].cfg.codec); k++)
			;
		if (k == nc && nc < MAX_LIST)
			codecs[nc++] = res[i].cfg.codec;
		for (u = 0; u < nu && units[u] != res[i].cfg.unit; u++)
			;
		if (u == nu && nu < MAX_LIST)
			units[nu++] = res[i].cfg.unit;
	}
	if (n < 2)
		return;

	if (json) {
		for (int k = 0; k < nc; k++) {
			for (int u = 0; u < nu; u++) {
				const struct pageout_result *first =
					find(res, n, labels[0], codecs[k], units[u]);
				char ub[16];

				for (int l = 1; l < nl && first; l++) {
					const struct pageout_result *o =
						find(res, n, labels[l], codecs[k], units[u]);

					if (!o)
						continue;
					printf("{\"bench\":\"pageout-compare\",\"image\":");
					cli_json_string(stdout, job->image);
					printf(",\"codec\":");
					cli_json_string(stdout, codecs[k]);
					printf(",\"unit_name\":\"%s\",\"a\":\"%s\",\"b\":\"%s\"",
					       cli_format_unit(units[u], ub, sizeof(ub)), labels[0],
					       labels[l]);
					cli_json_num("swapout_speedup",
						     div_or_nan(o->out_med, first->out_med), 3);
					cli_json_num("swapin_speedup",
						     div_or_nan(o->in_med, first->in_med), 3);
					cli_json_num("pool_ratio",
						     div_or_nan((double)first->mem_used_bytes,
								(double)o->mem_used_bytes),
						     3);
					printf("}\n");
				}
			}
		}
		return;
	}

	printf("side by side: %s, %.1f MiB, median ms per iteration (swap-out / swap-in), pool "
	       "MiB\n",
	       job->image, (double)job->size / 1048576.0);
	printf("%-8s %5s", "codec", "unit");
	for (int l = 0; l < nl; l++)
		printf("  %24s", labels[l]);
	for (int l = 1; l < nl; l++)
		printf("  %18.18s", labels[l]);
	printf("\n%-8s %5s", "", "");
	for (int l = 0; l < nl; l++)
		printf("  %8s %8s %6s", "out", "in", "pool");
	for (int l = 1; l < nl; l++)
		printf("  %18s", "its time / first's");
	printf("\n");
	for (int k = 0; k < nc; k++) {
		for (int u = 0; u < nu; u++) {
			const struct pageout_result *first =
				find(res, n, labels[0], codecs[k], units[u]);
			char ub[16];

			printf("%-8.8s %5s", codecs[k], cli_format_unit(units[u], ub, sizeof(ub)));
			for (int l = 0; l < nl; l++) {
				const struct pageout_result *o =
					find(res, n, labels[l], codecs[k], units[u]);

				if (o)
					printf("  %8.1f %8.1f %6.1f", o->out_med, o->in_med,
					       (double)o->mem_used_bytes / 1048576.0);
				else
					printf("  %8s %8s %6s", "-", "-", "-");
			}
			for (int l = 1; l < nl; l++) {
				const struct pageout_result *o =
					find(res, n, labels[l], codecs[k], units[u]);

				if (o && first)
					printf("  %7.2fx / %6.2fx", o->out_med / first->out_med,
					       o->in_med / first->in_med);
				else
					printf("  %18s", "-");
			}
			printf("\n");
		}
		/* The 4k -> 64k gains, beside the published ones. */
		printf("%-8.8s %5s", codecs[k], "gain");
		for (int l = 0; l < nl; l++) {
			const struct pageout_result *a = find(res, n, labels[l], codecs[k], 4096u),
						    *b = find(res, n, labels[l], codecs[k], 65536u);

			if (a && b)
				printf("  %7.2fx %7.2fx %6s", a->out_med / b->out_med,
				       a->in_med / b->in_med, "");
			else
				printf("  %8s %8s %6s", "-", "-", "");
		}
		for (size_t p = 0; p < sizeof(published) / sizeof(published[0]); p++) {
			const size_t len = strlen(published[p].codec);

			if (!strncmp(codecs[k], published[p].codec, len) &&
			    (codecs[k][len] == '\0' || codecs[k][len] == ':'))
				printf("  published %.2fx / %.2fx (4K %.0f / %.0f ms, 64K %.0f / "
				       "%.0f ms, 100 rounds on a phone)",
				       published[p].out4k / published[p].out64k,
				       published[p].in4k / published[p].in64k, published[p].out4k,
				       published[p].in4k, published[p].out64k, published[p].in64k);
		}
		printf("\n");
	}
	printf("gain: 4k time / 64k time (swap-out, swap-in); >1: 64k is faster.\n");
}

/* -------------------------------------------------------------------------------- */
/* The command                                                                      */
/* -------------------------------------------------------------------------------- */

static int default_engines(void)
{
	const long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > 4 ? 4 : (int)n;
}

/* The image cut or tiled to size bytes, in a buffer of its own. */
static uint8_t *load_data(zf_image *img, uint64_t size)
{
	uint8_t *data = cli_map_buffer(size);
	const uint8_t *src = zf_image_data(img);
	const uint64_t n = zf_image_size(img);

	for (uint64_t off = 0; off < size; off += n)
		memcpy(data + off, src, size - off < n ? size - off : n);
	return data;
}

int cmd_pageout(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "image", required_argument, NULL, 'i' },
		{ "size", required_argument, NULL, 's' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "unit", required_argument, NULL, 'u' },
		{ "codec", required_argument, NULL, 'c' },
		{ "backend", required_argument, NULL, 'b' },
		{ "swapin", required_argument, NULL, 'w' },
		{ "mode", required_argument, NULL, 'm' },
		{ "engines", required_argument, NULL, 'e' },
		{ "readahead", required_argument, NULL, 'a' },
		{ "verify", no_argument, NULL, 'V' },
		{ "allow-swap", no_argument, NULL, 'A' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char default_units[] = "4k,64k", default_codecs[] = "lz4", default_backends[] = "zfolio",
	     default_swapin[] = "whole", default_modes[] = "thread";
	char *unit_arg = default_units, *codec_arg = default_codecs,
	     *backend_arg = default_backends, *swapin_arg = default_swapin,
	     *mode_arg = default_modes;
	char *codec_names[MAX_LIST], *backend_names[MAX_LIST], *swapin_names[MAX_LIST],
		*mode_names[MAX_LIST];
	const char *image_path = NULL;
	struct pageout_config cfgs[MAX_CFGS];
	struct pageout_result *res;
	struct pageout_job job = { .size = 100ull << 20, .iterations = 10 };
	uint64_t units[MAX_LIST], max_unit = 0, v, engines = (uint64_t)default_engines(),
				  readahead = 0;
	int n_units, n_codecs, n_backends, n_swapin, n_modes, n_cfgs = 0, opt, json = 0,
							      want_kernel = 0;
	zf_image *img;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'i':
			if (image_path)
				cli_die(EXIT_USAGE, "--image: one image per run");
			image_path = optarg;
			break;
		case 's':
			if (cli_parse_size(optarg, &job.size) < 0 || job.size < (64u << 10) ||
			    job.size > (64ull << 30))
				cli_die(EXIT_USAGE,
					"--size: expected a size from 64k to 64g, got '%s'",
					optarg);
			break;
		case 'n':
			if (cli_parse_uint(optarg, 1, 1000, &v) < 0)
				cli_die(EXIT_USAGE,
					"--iterations: expected a count from 1 to 1000, got '%s'",
					optarg);
			job.iterations = (int)v;
			break;
		case 'u':
			unit_arg = optarg;
			break;
		case 'c':
			codec_arg = optarg;
			break;
		case 'b':
			backend_arg = optarg;
			break;
		case 'w':
			swapin_arg = optarg;
			break;
		case 'm':
			mode_arg = optarg;
			break;
		case 'e':
			if (cli_parse_uint(optarg, 0, 64, &engines) < 0)
				cli_die(EXIT_USAGE, "--engines: expected 0 to 64, got '%s'",
					optarg);
			break;
		case 'a':
			if (cli_parse_uint(optarg, 0, 4096, &readahead) < 0)
				cli_die(EXIT_USAGE,
					"--readahead: expected 0 to 4096 units, got '%s'", optarg);
			break;
		case 'V':
			job.verify = 1;
			break;
		case 'A':
			job.allow_swap = 1;
			break;
		case 'j':
			json = 1;
			break;
		case 'h':
			fputs(pageout_usage, stdout);
			return 0;
		default:
			fputs(pageout_usage, stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc)
		cli_die(EXIT_USAGE, "unexpected argument '%s' (the image is given with --image)",
			argv[optind]);
	n_units = cli_parse_units(unit_arg, units, MAX_LIST);
	n_codecs = cli_split_list(codec_arg, codec_names, MAX_LIST);
	n_backends = cli_split_list(backend_arg, backend_names, 2);
	n_swapin = cli_split_list(swapin_arg, swapin_names, 2);
	n_modes = cli_split_list(mode_arg, mode_names, 2);
	if (n_codecs < 0 || n_backends < 0 || n_swapin < 0 || n_modes < 0)
		cli_die(EXIT_USAGE,
			"--codec (at most %d), --backend, --swapin, --mode (at most 2 "
			"each): comma-separated lists",
			MAX_LIST);
	for (int i = 0; i < n_units; i++)
		max_unit = units[i] > max_unit ? units[i] : max_unit;
	job.size = (job.size + max_unit - 1) / max_unit * max_unit;
	for (int b = 0; b < n_backends; b++) {
		if (strcmp(backend_names[b], "zfolio") && strcmp(backend_names[b], "kernel"))
			cli_die(EXIT_USAGE, "--backend: expected zfolio or kernel, got '%s'",
				backend_names[b]);
		want_kernel |= !strcmp(backend_names[b], "kernel");
	}
	for (int i = 0; i < n_swapin; i++) {
		if (strcmp(swapin_names[i], "whole") && strcmp(swapin_names[i], "per-page"))
			cli_die(EXIT_USAGE, "--swapin: expected whole or per-page, got '%s'",
				swapin_names[i]);
	}
	for (int i = 0; i < n_modes; i++) {
		if (strcmp(mode_names[i], "thread") && strcmp(mode_names[i], "sigbus"))
			cli_die(EXIT_USAGE, "--mode: expected thread or sigbus, got '%s'",
				mode_names[i]);
	}
	if (image_path && strcmp(image_path, "sample") && access(image_path, R_OK))
		cli_die(EXIT_USAGE, "%s: %s", image_path, strerror(errno));

	/* Runs in table order: for each codec and unit, the backends one after the other. */
	for (int k = 0; k < n_codecs; k++) {
		const zf_codec *zc = NULL;
		const int zfolio_has = zf_codec_find(codec_names[k], &zc) == 0,
			  kernel_has = want_kernel && pageout_kernel_has_codec(codec_names[k]);

		if (!zfolio_has && !kernel_has)
			cli_die(EXIT_USAGE, "--codec %s: neither %s has it (zfolio: %s)",
				codec_names[k], want_kernel ? "backend" : "zfolio",
				zf_codec_algorithms());
		for (int u = 0; u < n_units; u++) {
			for (int b = 0; b < n_backends; b++) {
				const int kernel = !strcmp(backend_names[b], "kernel");

				for (int w = 0; w < n_swapin; w++) {
					const int per_page = !strcmp(swapin_names[w], "per-page");

					for (int m = 0; m < (kernel ? 1 : n_modes); m++) {
						struct pageout_config *c = &cfgs[n_cfgs];
						char ub[16];

						if (kernel && per_page) {
							fprintf(stderr,
								"zfolio: note: kernel, %s: the "
								"kernel "
								"chooses its swap-in; only 'whole' "
								"is "
								"run\n",
								codec_names[k]);
							continue;
						}
						if (kernel ? !kernel_has : !zfolio_has) {
							fprintf(stderr,
								"zfolio: note: %s has no codec %s: "
								"skipped at %s\n",
								backend_names[b], codec_names[k],
								cli_format_unit(units[u], ub,
										sizeof(ub)));
							continue;
						}
						memset(c, 0, sizeof(*c));
						c->backend =
							kernel ? BACKEND_KERNEL : BACKEND_ZFOLIO;
						c->unit = units[u];
						c->codec = codec_names[k];
						c->swapin = per_page ? ZF_SWAPIN_PER_PAGE
								     : ZF_SWAPIN_WHOLE;
						c->mode_name = mode_names[m];
						c->mode = strcmp(mode_names[m], "sigbus")
								  ? ZF_FAULT_THREAD
								  : ZF_FAULT_SIGBUS;
						c->engines = (unsigned)engines;
						c->readahead = (unsigned)readahead;
						n_cfgs++;
					}
				}
			}
		}
	}
	if (n_cfgs == 0)
		cli_die(EXIT_USAGE, "nothing to run");

	/* Before any output or change: can every run go? */
	for (int i = 0; i < n_cfgs; i++) {
		if (cfgs[i].backend == BACKEND_KERNEL) {
			pageout_kernel_check(&job, cfgs, n_cfgs);
			break;
		}
	}
	for (int i = 0; i < n_cfgs; i++) {
		if (cfgs[i].backend == BACKEND_ZFOLIO)
			pageout_zfolio_check(&job, &cfgs[i]);
	}

	img = cli_open_image(image_path);
	job.image = zf_image_name(img);
	job.data = load_data(img, job.size);
	res = calloc((size_t)n_cfgs, sizeof(*res));
	if (!res)
		cli_die(1, "out of memory");
	for (int i = 0; i < n_cfgs; i++) {
		struct pageout_result *r = &res[i];

		r->cfg = cfgs[i];
		r->out_ms = calloc((size_t)job.iterations, sizeof(double));
		r->in_ms = calloc((size_t)job.iterations, sizeof(double));
		if (!r->out_ms || !r->in_ms)
			cli_die(1, "out of memory");
		r->split_service_us = r->split_load_us = r->split_place_us = NAN;
		if (cfgs[i].backend == BACKEND_KERNEL)
			pageout_kernel(&job, r);
		else
			pageout_zfolio(&job, r);
		summarise(r, job.iterations);
		cli_progress_done();
		if (json)
			print_json(&job, r);
		else
			print_run(&job, r);
		fflush(stdout);
	}
	print_table(&job, res, n_cfgs, json);
	for (int i = 0; i < n_cfgs; i++) {
		free(res[i].out_ms);
		free(res[i].in_ms);
		free(res[i].counters);
	}
	free(res);
	munmap((void *)job.data, job.size);
	zf_image_close(img);
	return 0;
}
