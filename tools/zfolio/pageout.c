/*
 * pageout.c - "zfolio pageout": the Linux large-folio swap experiment, on zfolio and on
 * the running kernel, side by side.
 *
 * The Linux work on large-folio swap-in and multi-page compression measured 100 MiB of
 * anonymous memory captured from a real device: 100 times, madvise(MADV_PAGEOUT) of the
 * whole range (timed), then a read of every page (timed). This command runs that loop
 * (--repeat times, 10 by default) for each combination of backend, unit, codec, swap-in
 * mode, fault-service mode, engines and readahead asked for, on one image,
 * prints each run (median, min and max per iteration, MB/s, compressed size, pool
 * memory, the counters) and, when there are several, a side-by-side table in the form
 * of the published one, with the ratios between backends and the 4K -> 64K gains beside
 * the published gains. The backends are in pageout_zfolio.c and pageout_kernel.c.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pageout.h"

#define CHECK_PAGES 16

static const struct cli_command pageout_cmd = {
	.name = "pageout",
	.about = "The large-folio swap experiment of the Linux work (100 MiB of memory captured from a\n"
		 "real device; madvise(MADV_PAGEOUT) of all of it, then a read of every page, and that\n"
		 "100 times over), here --repeat times, on zfolio's userfaultfd region and on the\n"
		 "running kernel's own zram, one after the other on the same data, with a\n"
		 "side-by-side table at the end.\n",
	.notes = "zfolio compresses each unit as one object and swaps it in whole on the first touch\n"
		 "(--swapin whole); the kernel gets folios of the unit's size (mTHP; 4k: none) and\n"
		 "chooses its swap-in for itself, so it runs only 'whole'. --codec: zfolio's codecs\n"
		 "(lz4, zstd:1, lzo ...); the kernel: zram's algorithms, at their default level (lz4,\n"
		 "lzo-rle, lzo ...); a name a backend lacks is skipped there. --mode, --engines and\n"
		 "--readahead are zfolio's (the kernel does no swap readahead on zram either).\n"
		 "\n"
		 "Per run: swap-out and swap-in ms per iteration (median, min, max over the timed\n"
		 "iterations), MB/s (10^6 bytes per second, of the median), the data swapped out, its\n"
		 "compressed size and the pool's memory after the last swap-out (zfolio: the store's\n"
		 "pool, including the pages it keeps for reuse; kernel: zram's mm_stat), swap-in faults\n"
		 "per iteration and a swap-in fault's time as the program sees it (zfolio: and how much\n"
		 "of it the region's service takes, reading from the store and placing). Counters:\n"
		 "zfolio's region, or the kernel's per-size mTHP stats, pswpin/pswpout and zram's\n"
		 "mm_stat, over the timed iterations. A kernel run whose folios did not go out or come\n"
		 "back at the unit's size is flagged DEGRADED. --json: one object per run, then one\n"
		 "per comparison of the side-by-side table.\n"
		 "\n"
		 "Exit status: 0, 1 when a byte came back wrong or a run failed, 2 bad usage, 77 a\n"
		 "backend cannot run here (no userfaultfd; kernel: not root, no zram, swap active).\n",
	.uses = {
		{ .opt = OPT_IMAGE, .def = "sample", .max_values = 1 },
		{ .opt = OPT_SIZE, .def = "100m", .min = 64 << 10 },
		{ .opt = OPT_REPEAT, .def = "10" },
		{ .opt = OPT_UNIT, .def = "4k,64k" },
		{ .opt = OPT_CODEC, .def = "lz4" },
		{ .opt = OPT_BACKEND, .def = "zfolio" },
		{ .opt = OPT_SWAPIN, .def = "whole" },
		{ .opt = OPT_FRAME, .def = "none" },
		{ .opt = OPT_MODE, .def = "thread" },
		{ .opt = OPT_ENGINES, .def_help = "the number of CPUs, at most 4" },
		{ .opt = OPT_READAHEAD, .def = "0" },
		{ .opt = OPT_VERIFY },
		{ .opt = OPT_ALLOW_SWAP },
		{ .opt = OPT_JSON },
	},
};

/* Published (Linux large-folio swap-in and multi-page compression, a phone, 100 MiB x
 * 100, ms in all): lz4 and zstd, 4K and 64K. */
static const struct {
	const char *codec;
	double out4k, in4k, out64k, in64k;
} published[] = {
	{ "lz4", 90540, 45274, 55667, 22942 },
	{ "zstd", 186585, 85035, 118533, 46558 },
};

/* The byte of page i read in iteration k (-1: the warm-up). */
static inline size_t touch_offset(uint64_t i, int k)
{
	return cli_touch_offset(i, (uint32_t)(k + 2));
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
		const uint64_t off = cli_xorshift(&x) % pages * ZF_PAGE_SIZE;

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

/*
 * The run's label in the table: backend, the zfolio options that are not default, and
 * the engines and readahead when several were asked for.
 */
static const char *label(const struct pageout_job *job, const struct pageout_config *c, char *buf,
			 size_t cap)
{
	const int zfolio = c->backend == BACKEND_ZFOLIO;
	int n = snprintf(buf, cap, "%s%s%s", backend_name(c->backend),
			 zfolio && c->mode == ZF_FAULT_SIGBUS ? "/sigbus" : "",
			 c->swapin == ZF_SWAPIN_PER_PAGE ? "/per-page" : "");

	if (zfolio && job->label_engines)
		n += snprintf(buf + n, cap - (size_t)n, "/e%u", c->engines);
	if (zfolio && job->label_readahead)
		n += snprintf(buf + n, cap - (size_t)n, "/ra%u", c->readahead);
	if (zfolio && job->label_frame)
		snprintf(buf + n, cap - (size_t)n, "/%s", c->frame ? "2m" : "nf");
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
		printf(",\"fault_mode\":\"%s\",\"engines\":%u,\"readahead\":%u,\"frame\":%llu",
		       c->mode_name, c->engines, c->readahead, (unsigned long long)c->frame);
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
	if (r->has_meta) {
		cli_json_u64("meta_bytes", r->meta_bytes);
		cli_json_u64("staging_max_bytes", r->staging_max_bytes);
	}
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
	printf("%s%s, unit %s, %s", label(job, c, lb, sizeof(lb)), r->degraded ? " (DEGRADED)" : "",
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
	printf("  stored %.1f MiB as %.1f MiB (ratio %.3f), pool %.1f MiB",
	       (double)r->orig_bytes / 1048576.0, (double)r->compr_bytes / 1048576.0,
	       div_or_nan((double)r->orig_bytes, (double)r->compr_bytes),
	       (double)r->mem_used_bytes / 1048576.0);
	if (r->has_meta)
		printf(", metadata %.2f MiB, staging at most %.1f MiB",
		       (double)r->meta_bytes / 1048576.0, (double)r->staging_max_bytes / 1048576.0);
	printf("\n");
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
static const struct pageout_result *find(const struct pageout_job *job,
					 const struct pageout_result *res, int n, const char *l,
					 const char *c, uint64_t u)
{
	for (int i = 0; i < n; i++) {
		char lb[48];

		if (!strcmp(label(job, &res[i].cfg, lb, sizeof(lb)), l) &&
		    !strcmp(res[i].cfg.codec, c) && res[i].cfg.unit == u)
			return &res[i];
	}
	return NULL;
}

/*
 * The side-by-side table: a row per (codec, unit), a column group per label (backend and
 * options), ratios of the other labels' times to the first's (>1: the first is faster),
 * then each label's 4k -> 64k gain beside the published one. With json, the ratios only.
 */
static void print_comparisons(const struct pageout_job *job, const struct pageout_result *res,
			      int n, int json, char (*labels)[48], int nl, const char **codecs,
			      int nc, const uint64_t *units, int nu)
{
	if (json) {
		for (int k = 0; k < nc; k++) {
			for (int u = 0; u < nu; u++) {
				const struct pageout_result *first =
					find(job, res, n, labels[0], codecs[k], units[u]);
				char ub[16];

				for (int l = 1; l < nl && first; l++) {
					const struct pageout_result *o =
						find(job, res, n, labels[l], codecs[k], units[u]);

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
				find(job, res, n, labels[0], codecs[k], units[u]);
			char ub[16];

			printf("%-8.8s %5s", codecs[k], cli_format_unit(units[u], ub, sizeof(ub)));
			for (int l = 0; l < nl; l++) {
				const struct pageout_result *o =
					find(job, res, n, labels[l], codecs[k], units[u]);

				if (o)
					printf("  %8.1f %8.1f %6.1f", o->out_med, o->in_med,
					       (double)o->mem_used_bytes / 1048576.0);
				else
					printf("  %8s %8s %6s", "-", "-", "-");
			}
			for (int l = 1; l < nl; l++) {
				const struct pageout_result *o =
					find(job, res, n, labels[l], codecs[k], units[u]);

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
			const struct pageout_result *a = find(job, res, n, labels[l], codecs[k],
							      4096u),
						    *b = find(job, res, n, labels[l], codecs[k],
							      65536u);

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

/* The side-by-side table of the runs' labels, codecs and units, when there are two runs. */
static void print_table(const struct pageout_job *job, const struct pageout_result *res, int n,
			int json)
{
	char(*labels)[48] = calloc((size_t)n, sizeof(*labels)), lb[48];
	const char **codecs = calloc((size_t)n, sizeof(*codecs));
	uint64_t *units = calloc((size_t)n, sizeof(*units));
	int nl = 0, nc = 0, nu = 0;

	if (!labels || !codecs || !units)
		cli_die(1, "out of memory");
	for (int i = 0; i < n; i++) {
		int l, k, u;

		label(job, &res[i].cfg, lb, sizeof(lb));
		for (l = 0; l < nl && strcmp(labels[l], lb); l++)
			;
		if (l == nl)
			snprintf(labels[nl++], sizeof(labels[0]), "%s", lb);
		for (k = 0; k < nc && strcmp(codecs[k], res[i].cfg.codec); k++)
			;
		if (k == nc)
			codecs[nc++] = res[i].cfg.codec;
		for (u = 0; u < nu && units[u] != res[i].cfg.unit; u++)
			;
		if (u == nu)
			units[nu++] = res[i].cfg.unit;
	}
	if (n >= 2)
		print_comparisons(job, res, n, json, labels, nl, codecs, nc, units, nu);
	free(labels);
	free(codecs);
	free(units);
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
static uint8_t *load_data(const zf_image *img, uint64_t size)
{
	uint8_t *data = cli_map_buffer(size);

	cli_tile(data, size, img);
	return data;
}

int cmd_pageout(int argc, char **argv)
{
	const struct cli_args *a = cli_parse(&pageout_cmd, argc, argv);
	const struct cli_value *units = &a->v[OPT_UNIT], *codecs = &a->v[OPT_CODEC],
			       *backends = &a->v[OPT_BACKEND], *swapins = &a->v[OPT_SWAPIN],
			       *modes = &a->v[OPT_MODE], *ra = &a->v[OPT_READAHEAD],
			       *frames = &a->v[OPT_FRAME];
	const char *image_path = a->v[OPT_IMAGE].str[0];
	struct pageout_job job = { .size = a->v[OPT_SIZE].num[0],
				   .iterations = (int)a->v[OPT_REPEAT].num[0],
				   .verify = a->v[OPT_VERIFY].n,
				   .allow_swap = a->v[OPT_ALLOW_SWAP].n };
	const uint64_t default_engine_count = (uint64_t)default_engines();
	const struct cli_value engines_default = { .n = 1, .num = { default_engine_count } };
	const struct cli_value *engines =
		a->v[OPT_ENGINES].n ? &a->v[OPT_ENGINES] : &engines_default;
	struct pageout_config *cfgs;
	struct pageout_result *res;
	uint64_t max_unit = 0;
	int n_cfgs = 0, want_kernel = 0, json = a->v[OPT_JSON].n;
	zf_image *img;

	cfgs = calloc((size_t)(codecs->n * units->n * backends->n * swapins->n * modes->n *
			       engines->n * ra->n * frames->n),
		      sizeof(*cfgs));
	if (!cfgs)
		cli_die(1, "out of memory");
	for (int i = 0; i < units->n; i++)
		max_unit = units->num[i] > max_unit ? units->num[i] : max_unit;
	for (int i = 0; i < frames->n; i++)
		if (!strcmp(frames->str[i], "2m"))
			max_unit = ZF_FRAME_2M > max_unit ? ZF_FRAME_2M : max_unit;
	job.size = (job.size + max_unit - 1) / max_unit * max_unit;
	job.label_engines = engines->n > 1;
	job.label_readahead = ra->n > 1;
	job.label_frame = frames->n > 1 || strcmp(frames->str[0], "none");
	for (int b = 0; b < backends->n; b++)
		want_kernel |= !strcmp(backends->str[b], "kernel");
	cli_check_images(&a->v[OPT_IMAGE]);

	/*
	 * Runs in table order: for each codec and unit, the backends one after the other.
	 * The kernel takes none of zfolio's fault modes, engines or readahead: one run each.
	 */
	for (int k = 0; k < codecs->n; k++) {
		const char *codec = codecs->str[k];
		const zf_codec *zc = NULL;
		const int zfolio_has = zf_codec_find(codec, &zc) == 0,
			  kernel_has = want_kernel && pageout_kernel_has_codec(codec);

		if (!zfolio_has && !kernel_has)
			cli_die(EXIT_USAGE, "--codec %s: neither %s has it (zfolio: %s)", codec,
				want_kernel ? "backend" : "zfolio", zf_codec_algorithms());
		for (int u = 0; u < units->n; u++) {
			for (int b = 0; b < backends->n; b++) {
				const int kernel = !strcmp(backends->str[b], "kernel");

				for (int w = 0; w < swapins->n; w++) {
					const int per_page = !strcmp(swapins->str[w], "per-page");
					char ub[16];

					if (kernel && per_page) {
						fprintf(stderr,
							"zfolio: note: kernel, %s: the kernel "
							"chooses "
							"its swap-in; only 'whole' is run\n",
							codec);
						continue;
					}
					if (kernel ? !kernel_has : !zfolio_has) {
						fprintf(stderr,
							"zfolio: note: %s has no codec %s: skipped "
							"at "
							"%s\n",
							backends->str[b], codec,
							cli_format_unit(units->num[u], ub,
									sizeof(ub)));
						continue;
					}
					for (int m = 0; m < (kernel ? 1 : modes->n); m++) {
						for (int e = 0; e < (kernel ? 1 : engines->n);
						     e++) {
							for (int r = 0;
							     r < (kernel ? 1 : ra->n * frames->n);
							     r++) {
								struct pageout_config *c =
									&cfgs[n_cfgs++];

								c->backend =
									kernel ? BACKEND_KERNEL
									       : BACKEND_ZFOLIO;
								c->unit = units->num[u];
								c->codec = codec;
								c->swapin =
									per_page
										? ZF_SWAPIN_PER_PAGE
										: ZF_SWAPIN_WHOLE;
								c->mode_name = modes->str[m];
								c->mode = strcmp(modes->str[m],
										 "sigbus")
										  ? ZF_FAULT_THREAD
										  : ZF_FAULT_SIGBUS;
								c->engines =
									(unsigned)engines->num[e];
								c->readahead =
									(unsigned)
										ra->num[r % ra->n];
								c->frame =
									!kernel && !strcmp(frames->str
												   [r /
												    ra->n],
											   "2m")
										? ZF_FRAME_2M
										: 0;
							}
						}
					}
				}
			}
		}
	}
	if (n_cfgs <= 0)
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
	free(cfgs);
	munmap((void *)job.data, job.size);
	zf_image_close(img);
	return 0;
}
