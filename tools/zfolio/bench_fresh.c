/*
 * bench_fresh.c - "zfolio bench fresh": what a program's first touch of memory costs in a
 * zf_region, against plain anonymous memory with the same huge-page setting, measured
 * side by side in one run.
 *
 * Every program spends its days touching memory for the first time (malloc'd buffers,
 * a growing heap; usemem does nothing else), so a region whose fresh memory is slower
 * than plain memory slows every program down before anything is swapped. Two passes,
 * each over fresh memory of --size bytes:
 *   write  a memcpy of the image into it (the first write of every page)
 *   read   a read of one byte of every 4 KiB page (never written: zeros)
 * For each round, in turn (the order rotating from round to round, so that a slow
 * moment of the shared machine falls on every case alike): plain memory with 4 KiB pages
 * (MADV_NOHUGEPAGE), plain memory with huge pages (MADV_HUGEPAGE, 2 MiB-aligned), and a
 * region for each --frame and --mode (frames: placed as huge pages; none: 4 KiB units).
 * A region is compared with the plain memory of its page size: frames with huge pages,
 * none with 4 KiB pages. Mapping and unmapping are not timed.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cli.h"

#define HUGE_ALIGN (2u << 20)

static const struct cli_command bench_fresh_cmd = {
	.name = "bench fresh",
	.about = "The first touch of fresh memory, in a zf_region and in plain anonymous memory with\n"
		 "the same page size, side by side in one run: a memcpy of the image into it\n"
		 "(write), and a read of one byte of every page of never-written memory (read).\n"
		 "Needs userfaultfd (root, or access to /dev/userfaultfd); exits 77 without it.\n",
	.notes = "Cases, in turn in every round (the order rotating): plain/4k (MADV_NOHUGEPAGE),\n"
		 "plain/thp (MADV_HUGEPAGE), and a region per --frame and --mode (64 KiB units, lz4).\n"
		 "ms are medians over the rounds; vs plain: the region's median over that of plain\n"
		 "memory of its page size (frames: thp; none: 4k), < 1.25 is the target. Every byte\n"
		 "written is compared after each write pass, every byte read must be zero; a\n"
		 "mismatch exits 1. The kernel's THP setting applies (enabled=never: no huge pages\n"
		 "anywhere, and plain/thp is plain/4k). --json: one object per case.\n",
	.uses = {
		{ .opt = OPT_IMAGE, .def = "sample", .max_values = 1 },
		{ .opt = OPT_SIZE, .def = "100m" },
		{ .opt = OPT_FRAME, .def = "none,2m" },
		{ .opt = OPT_MODE, .def = "thread,sigbus" },
		{ .opt = OPT_REPEAT, .def = "10" },
		{ .opt = OPT_JSON },
	},
};

enum { PLAIN_4K, PLAIN_THP, REGION };

struct fresh_case {
	int kind;
	uint64_t frame; /* region: 0 or 2 MiB */
	enum zf_fault_mode mode;
	const char *mode_name;
	char name[32];
	double *w, *r; /* ms per round */
	double w_med, r_med;
	zf_region_stats st; /* region: the write pass's counters, last round */
};

/* Fresh memory for a plain case: 2 MiB-aligned, with its page size. */
static uint8_t *plain_map(size_t size, int huge, uint8_t **map, size_t *map_len)
{
	uint8_t *p;

	*map_len = size + HUGE_ALIGN;
	*map = mmap(NULL, *map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (*map == MAP_FAILED)
		cli_die(1, "mmap: out of memory");
	p = (uint8_t *)(((uintptr_t)*map + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1));
	(void)madvise(p, size, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	return p;
}

static zf_region *region_new(const struct fresh_case *c, size_t size)
{
	zf_region_options o;

	zf_region_options_init(&o);
	o.frame = (uint32_t)c->frame;
	o.fault_mode = c->mode;
	return cli_region_create(&o, size);
}

/* One pass of case c over fresh memory: the write (data) or the read; ms. */
static double pass(struct fresh_case *c, const uint8_t *data, size_t size, int write)
{
	uint8_t *p, *map = NULL;
	size_t map_len = 0;
	zf_region *r = NULL;
	uint64_t t0, t1, sum = 0;

	if (c->kind == REGION) {
		r = region_new(c, size);
		p = zf_region_base(r);
	} else {
		p = plain_map(size, c->kind == PLAIN_THP, &map, &map_len);
	}
	t0 = cli_now_ns();
	if (write) {
		memcpy(p, data, size);
	} else {
		for (size_t off = 0; off < size; off += ZF_PAGE_SIZE)
			sum += ((volatile const uint8_t *)p)[off];
	}
	t1 = cli_now_ns();
	if (write && memcmp(p, data, size))
		cli_die(1, "%s: the bytes written do not read back", c->name);
	if (!write && sum)
		cli_die(1, "%s: never-written memory does not read as zeros", c->name);
	if (r) {
		if (write)
			zf_region_get_stats(r, &c->st, sizeof(c->st));
		zf_region_destroy(r);
	} else {
		munmap(map, map_len);
	}
	return (double)(t1 - t0) / 1e6;
}

/* The plain case a region is compared with. */
static const struct fresh_case *baseline(const struct fresh_case *cases, const struct fresh_case *c)
{
	return &cases[c->frame ? PLAIN_THP : PLAIN_4K];
}

static void print_json(const struct fresh_case *cases, const struct fresh_case *c, size_t size,
		       int repeat)
{
	const struct fresh_case *b = baseline(cases, c);

	printf("{\"bench\":\"fresh\",\"case\":\"%s\"", c->name);
	cli_json_u64("size", size);
	printf(",\"repeat\":%d", repeat);
	cli_json_num("write_ms", c->w_med, 3);
	cli_json_num("read_ms", c->r_med, 3);
	if (c->kind == REGION) {
		printf(",\"mode\":\"%s\"", c->mode_name);
		cli_json_u64("frame", c->frame);
		printf(",\"baseline\":\"%s\"", b->name);
		cli_json_num("write_vs_plain", c->w_med / b->w_med, 3);
		cli_json_num("read_vs_plain", c->r_med / b->r_med, 3);
		cli_json_u64("pgfault_zero", c->st.pgfault_zero);
		cli_json_u64("thp_fault_alloc", c->st.thp_fault_alloc);
		cli_json_u64("fresh_ahead", c->st.fresh_ahead);
		cli_json_u64("fresh_filled", c->st.fresh_filled);
		cli_json_u64("frame_split", c->st.frame_split);
		cli_json_u64("frame_fallback", c->st.frame_fallback);
	}
	printf("}\n");
}

int bench_fresh(int argc, char **argv)
{
	const struct cli_args *a = cli_parse(&bench_fresh_cmd, argc, argv);
	const struct cli_value *frames = &a->v[OPT_FRAME], *modes = &a->v[OPT_MODE];
	const int repeat = (int)a->v[OPT_REPEAT].num[0], json = a->v[OPT_JSON].n;
	const size_t size = (a->v[OPT_SIZE].num[0] + HUGE_ALIGN - 1) / HUGE_ALIGN * HUGE_ALIGN;
	const int n = 2 + frames->n * modes->n;
	struct fresh_case *cases = calloc((size_t)n, sizeof(*cases));
	uint8_t *data;
	zf_image *img;

	if (!cases)
		cli_die(1, "out of memory");
	cli_check_images(&a->v[OPT_IMAGE]);
	cases[PLAIN_4K] = (struct fresh_case){ .kind = PLAIN_4K, .name = "plain/4k" };
	cases[PLAIN_THP] = (struct fresh_case){ .kind = PLAIN_THP, .name = "plain/thp" };
	for (int f = 0, i = 2; f < frames->n; f++) {
		for (int m = 0; m < modes->n; m++, i++) {
			struct fresh_case *c = &cases[i];

			c->kind = REGION;
			c->frame = strcmp(frames->str[f], "2m") ? 0 : ZF_FRAME_2M;
			c->mode_name = modes->str[m];
			c->mode =
				strcmp(c->mode_name, "sigbus") ? ZF_FAULT_THREAD : ZF_FAULT_SIGBUS;
			snprintf(c->name, sizeof(c->name), "region/%s/%s", c->frame ? "2m" : "none",
				 c->mode_name);
			/* A missing userfaultfd stops the run before any output. */
			zf_region_destroy(region_new(c, HUGE_ALIGN));
		}
	}
	for (int i = 0; i < n; i++) {
		cases[i].w = calloc((size_t)repeat, sizeof(double));
		cases[i].r = calloc((size_t)repeat, sizeof(double));
		if (!cases[i].w || !cases[i].r)
			cli_die(1, "out of memory");
	}
	data = cli_map_buffer(size);
	img = cli_open_image(a->v[OPT_IMAGE].str[0]);
	cli_tile(data, size, img);

	/* Round -1 is untimed: the page allocator and the caches warm up. */
	for (int k = -1; k < repeat; k++) {
		for (int j = 0; j < n; j++) {
			struct fresh_case *c = &cases[(j + (k < 0 ? 0 : k)) % n];
			double w, r;

			cli_progress("fresh: round %d of %d%s, %s", k < 0 ? 0 : k + 1, repeat,
				     k < 0 ? " (untimed)" : "", c->name);
			w = pass(c, data, size, 1);
			r = pass(c, data, size, 0);
			if (k >= 0) {
				c->w[k] = w;
				c->r[k] = r;
			}
		}
	}
	cli_progress_done();
	for (int i = 0; i < n; i++) {
		cases[i].w_med = cli_median(cases[i].w, repeat);
		cases[i].r_med = cli_median(cases[i].r, repeat);
	}
	if (!json)
		printf("first touch of %.1f MiB (%s), medians of %d rounds, ms\n"
		       "%-20s %9s %9s  %-10s %8s %8s\n",
		       (double)size / (1 << 20), zf_image_name(img), repeat, "case", "write",
		       "read", "vs", "write", "read");
	for (int i = 0; i < n; i++) {
		const struct fresh_case *c = &cases[i], *b = baseline(cases, c);

		if (json)
			print_json(cases, c, size, repeat);
		else if (c->kind == REGION)
			printf("%-20s %9.2f %9.2f  %-10s %7.2fx %7.2fx\n", c->name, c->w_med,
			       c->r_med, b->name, c->w_med / b->w_med, c->r_med / b->r_med);
		else
			printf("%-20s %9.2f %9.2f\n", c->name, c->w_med, c->r_med);
	}
	for (int i = 0; i < n; i++) {
		free(cases[i].w);
		free(cases[i].r);
	}
	free(cases);
	zf_image_close(img);
	munmap(data, size);
	return 0;
}
