/*
 * pageout.h - "zfolio pageout", the large-folio swap experiment: what its two backends
 * share with the command that runs them and prints the tables.
 *
 * A backend takes memory filled with an image and runs the loop the Linux large-folio
 * work measured: swap the whole range out (timed), read one byte of every 4 KiB page
 * (timed: every page comes back in), an untimed warm-up iteration first. The zfolio
 * backend (pageout_zfolio.c) does it on a zf_region, the kernel backend
 * (pageout_kernel.c) on ordinary memory with madvise(MADV_PAGEOUT) and the kernel's own
 * zram as swap.
 */
#ifndef ZF_PAGEOUT_H
#define ZF_PAGEOUT_H

#include <stdint.h>

#include "cli.h"

enum pageout_backend { BACKEND_ZFOLIO, BACKEND_KERNEL };

struct pageout_config {
	enum pageout_backend backend;
	uint64_t unit;
	const char *codec; /* zfolio: a codec name; kernel: an algorithm of zram */
	enum zf_swapin_mode swapin;
	/* zfolio only */
	unsigned engines, readahead;
	uint64_t frame; /* 0: none */
	enum zf_fault_mode mode;
	const char *mode_name;
};

/* What every run shares: the data, its size, the loop. */
struct pageout_job {
	const char *image; /* its name, for messages */
	const uint8_t *data; /* size bytes: the image cut or tiled */
	uint64_t size;
	int iterations; /* timed ones, after one untimed (--repeat) */
	int verify; /* compare every byte after every iteration */
	int allow_swap; /* kernel: run beside swap devices already active */
	int label_engines, label_readahead; /* several were asked for: name them in labels */
	int label_frame; /* frames were asked for: name the frame in labels */
};

struct pageout_result {
	struct pageout_config cfg;
	double *out_ms, *in_ms; /* per timed iteration (pageout.c sorts them afterwards) */
	double out_med, out_min, out_max, in_med, in_min, in_max;
	/* After the last swap-out: data swapped out, its compressed size, pool memory. */
	uint64_t orig_bytes, compr_bytes, mem_used_bytes;
	/*
	 * zfolio's memory beside the pool (meta: the region's and the store's bookkeeping;
	 * staging_max: the most held at once outside the region's units), after the run;
	 * has_meta 0 for the kernel, whose figures for these are not exposed.
	 */
	uint64_t meta_bytes, staging_max_bytes;
	int has_meta;
	uint64_t faults; /* swap-in faults per iteration (median over the timed ones) */
	/*
	 * A swap-in fault's time, us (NAN when not measured): as the program sees it (the
	 * median touch pass over the faults; set by pageout.c); zfolio: the region's service
	 * time, and of it reading from the store and placing.
	 */
	double split_fault_us, split_service_us, split_load_us, split_place_us;
	int degraded; /* kernel: the pages did not go out or come back at the unit's size */
	char *counters; /* "name value" lines, malloc()ed */
};

/* Each fills res (res->cfg set by the caller); exits with a message on failure. */
void pageout_zfolio(const struct pageout_job *job, struct pageout_result *res);
void pageout_kernel(const struct pageout_job *job, struct pageout_result *res);

/*
 * Checks, before anything is changed or any output made, that the kernel backend can run
 * job's configurations cfgs[0..n): root, zram, the algorithms, the unit sizes, no swap
 * active (unless allowed), zswap off. Exits 77 (a missing feature or privilege) or 2 (a
 * refused option) with a message.
 */
void pageout_kernel_check(const struct pageout_job *job, const struct pageout_config *cfgs, int n);
/* Whether zram here has algorithm name (a zfolio codec name: "lz4", "zstd:3", ...). */
int pageout_kernel_has_codec(const char *name);

/* Exits 77 or 2, before any output, when the zfolio backend cannot run configuration c. */
void pageout_zfolio_check(const struct pageout_job *job, const struct pageout_config *c);

/* Helpers the backends share (pageout.c). */
/*
 * Iteration k's swap-in (k < 0: the untimed warm-up): a read of one byte of every 4 KiB
 * page of mem in address order, timed into res->in_ms[k]; then, untimed, a check of the
 * bytes read, 16 whole pages at random or with job->verify every byte. Dies naming the
 * first wrong byte.
 */
void pageout_swapin(const struct pageout_job *job, struct pageout_result *res,
		    const volatile uint8_t *mem, int k);
/* Appends a "name value" line to *text (malloc()ed, grown). */
void pageout_counter(char **text, const char *name, uint64_t value);

#endif /* ZF_PAGEOUT_H */
