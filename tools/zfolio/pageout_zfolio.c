/*
 * pageout_zfolio.c - the zfolio backend of "zfolio pageout": the experiment's loop on a
 * zf_region.
 *
 * A region of the job's size with the configuration's unit, frame, codec, engines,
 * fault-service mode, readahead and swap-in mode, on a store of its own, filled with the
 * image. Each
 * iteration: zf_region_pageout() of the whole region (timed), then a read of one byte of
 * every 4 KiB page (timed). The region's counters over the timed iterations give the
 * faults per iteration and where a swap-in fault's time goes.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pageout.h"

static zf_region *new_region(const struct pageout_job *job, const struct pageout_config *c)
{
	zf_region_options o;

	zf_region_options_init(&o);
	o.unit = (uint32_t)c->unit;
	o.codec = c->codec;
	o.engines = c->engines;
	o.fault_mode = c->mode;
	o.readahead = c->readahead;
	o.swapin = c->swapin;
	o.frame = (uint32_t)c->frame;
	return cli_region_create(&o, job->size);
}

/* Exits 77 or 2 now, before any output, when the configuration cannot run. */
void pageout_zfolio_check(const struct pageout_job *job, const struct pageout_config *c)
{
	struct pageout_job one = *job;

	one.size = c->frame ? c->frame : c->unit;
	zf_region_destroy(new_region(&one, c));
}

void pageout_zfolio(const struct pageout_job *job, struct pageout_result *res)
{
	const struct pageout_config *c = &res->cfg;
	const uint64_t place = c->frame ? c->frame : c->unit; /* evicted and placed whole */
	zf_region_stats st0, st1;
	zf_store_stats sst;
	zf_region *r;
	uint8_t *base;
	char ub[16];

	cli_format_unit(c->unit, ub, sizeof(ub));
	cli_progress("zfolio %s %s: fill", c->codec, ub);
	r = new_region(job, c);
	base = zf_region_base(r);
	memcpy(base, job->data, job->size);

	for (int k = -1; k < job->iterations; k++) {
		uint64_t t0, t1;
		long evicted;

		cli_progress("zfolio %s %s: iteration %d of %d%s", c->codec, ub, k < 0 ? 0 : k + 1,
			     job->iterations, k < 0 ? " (warm-up)" : "");
		if (k == 0)
			zf_region_get_stats(r, &st0, sizeof(st0));
		t0 = cli_now_ns();
		evicted = zf_region_pageout(r, base, job->size);
		t1 = cli_now_ns();
		if (evicted < 0)
			cli_die(1, "zf_region_pageout: %s", zf_strerror((int)evicted));
		if ((uint64_t)evicted * place < job->size)
			fprintf(stderr,
				"zfolio: note: zfolio %s %s: a pageout of the whole region evicted "
				"%ld of %llu %s (the store refused some, or they were busy)\n",
				c->codec, ub, evicted, (unsigned long long)(job->size / place),
				c->frame ? "frames" : "units");
		zf_store_get_stats(zf_region_store(r), &sst, sizeof(sst));
		if (k >= 0)
			res->out_ms[k] = (double)(t1 - t0) / 1e6;

		pageout_swapin(job, res, base, k);
	}
	zf_region_get_stats(r, &st1, sizeof(st1));

	res->orig_bytes = sst.orig_data_size;
	res->compr_bytes = sst.compr_data_size;
	res->mem_used_bytes = sst.mem_used_total;
	res->meta_bytes = st1.meta_bytes + sst.meta_bytes;
	res->staging_max_bytes = st1.staging_max;
	res->has_meta = 1;
	res->faults = (st1.pgmajfault - st0.pgmajfault) / (uint64_t)job->iterations;
	if (st1.pgmajfault > st0.pgmajfault) {
		const double n = (double)(st1.pgmajfault - st0.pgmajfault) * 1e3;

		res->split_service_us = (double)(st1.fault_ns - st0.fault_ns) / n;
		res->split_load_us = (double)(st1.swapin_load_ns - st0.swapin_load_ns) / n;
		res->split_place_us = (double)(st1.swapin_place_ns - st0.swapin_place_ns) / n;
	}
	free(res->counters);
	res->counters = cli_region_stats_text(r);
	zf_region_destroy(r);
}
