/*
 * get_floor.c - what a store get's checksum costs by itself, beside the bare codec.
 *
 * Every zf_store_get() checks the unit's XXH3 over its stored (compressed) bytes, as
 * issue 4 asks. That check alone bounds the store's get_of_bare (zfolio bench store)
 * from above, whatever the table, the pool and the locks cost: this program measures
 * the bound. It compresses an image's units once with a zfolio codec (same-filled units
 * skipped, a unit that does not compress kept raw, as the store and the bench's bare loop
 * do), then times passes of the bare decompression loop and of the same loop plus the
 * store's checksum (zf_checksum(), src/common/checksum.h) of each compressed unit after
 * it is decompressed (the store's order), alternating which of the two goes first, and
 * reports the median of the paired ratios. The compressed units lie packed (packed.h): in
 * unit-sized slots of their own they slowed the loop by 1.13-1.17x on the AMD VM and made
 * the checksum's share look smaller.
 *
 * usage: get_floor IMAGE CODEC UNIT_BYTES PASSES
 * prints one JSON line: bare_mbps, checked_mbps (medians, MB = 10^6 B of units
 * decompressed) and checked_of_bare (the median ratio of paired passes).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../src/common/checksum.h"
#include "bench_time.h"
#include "packed.h"
#include "zfolio.h"
#include "image.h"

struct units {
	zf_codec_ctx *ctx;
	const uint8_t *data;
	uint8_t *packed, *out; /* compressed units (unit i's at place[i]); decompressed ones */
	size_t *place;
	int32_t *clen; /* 0: same-filled, < 0: kept raw */
	uint64_t *sum; /* XXH3 of each compressed unit */
	size_t unit, n;
};

/* One pass over every stored unit; with check, each one's XXH3 is checked after. */
static double pass(const struct units *u, int check)
{
	const double t0 = now();

	for (size_t i = 0; i < u->n; i++) {
		const uint8_t *src = u->packed + u->place[i];
		uint8_t *dst = u->out + i * u->unit;

		if (u->clen[i] == 0)
			continue;
		if (u->clen[i] < 0) {
			memcpy(dst, u->data + i * u->unit, u->unit);
			if (check && zf_checksum(u->data + i * u->unit, u->unit) != u->sum[i])
				goto bad;
			continue;
		}
		if (zf_codec_decompress(u->ctx, src, (size_t)u->clen[i], dst, u->unit) !=
		    (int)u->unit)
			goto bad;
		if (check && zf_checksum(src, (size_t)u->clen[i]) != u->sum[i])
			goto bad;
	}
	return now() - t0;
bad:
	fprintf(stderr, "get_floor: a unit does not round-trip\n");
	exit(1);
}

int main(int argc, char **argv)
{
	const zf_codec *codec;
	struct units u = { 0 };
	size_t size;
	uint64_t bytes = 0;
	double *tb, *tc, *ratio;
	zf_image *img;
	int passes;

	if (argc != 5) {
		fprintf(stderr, "usage: %s IMAGE CODEC UNIT_BYTES PASSES\n", argv[0]);
		return 2;
	}
	u.unit = strtoul(argv[3], NULL, 10);
	passes = atoi(argv[4]);
	if (zf_codec_find(argv[2], &codec) || u.unit < 4096 || u.unit > ZF_UNIT_MAX ||
	    (u.unit & (u.unit - 1)) || passes < 1) {
		fprintf(stderr, "get_floor: bad arguments (a codec name, a power-of-two unit "
				"from 4096 to 2 MiB, passes >= 1)\n");
		return 2;
	}
	if (zf_image_open(argv[1], 0, &img) < 0) {
		fprintf(stderr, "get_floor: cannot open %s\n", argv[1]);
		return 1;
	}
	u.data = zf_image_data(img);
	size = zf_image_size(img);
	u.n = size / u.unit; /* whole units only, as the store bench puts whole folios */
	u.packed = mmap(NULL, packed_bytes(u.n, u.unit), PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	u.out = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	u.clen = calloc(u.n ? u.n : 1, sizeof(*u.clen));
	u.sum = calloc(u.n ? u.n : 1, sizeof(*u.sum));
	u.place = calloc(u.n ? u.n : 1, sizeof(*u.place));
	tb = calloc((size_t)passes, sizeof(double));
	tc = calloc((size_t)passes, sizeof(double));
	ratio = calloc((size_t)passes, sizeof(double));
	if (u.packed == MAP_FAILED || u.out == MAP_FAILED || !u.clen || !u.sum || !u.place || !tb ||
	    !tc || !ratio || zf_codec_ctx_create(codec, &u.ctx)) {
		fprintf(stderr, "get_floor: out of memory\n");
		return 1;
	}
	for (size_t i = 0, end = 0; i < u.n; i++) {
		const uint8_t *src = u.data + i * u.unit;
		uint8_t *dst = u.packed + packed_place(end);
		int n;

		if (zf_same_filled(src, u.unit, NULL))
			continue;
		n = zf_codec_compress(u.ctx, src, u.unit, dst, u.unit - 1);
		u.clen[i] = n > 0 ? n : -1;
		u.sum[i] = n > 0 ? zf_checksum(dst, (size_t)n) : zf_checksum(src, u.unit);
		if (n > 0) {
			u.place[i] = packed_place(end);
			end = packed_end(u.place[i], (size_t)n);
		}
		bytes += u.unit;
	}
	if (!bytes) {
		fprintf(stderr, "get_floor: %s has no unit to decompress\n", argv[1]);
		return 1;
	}
	pass(&u, 1); /* warm-up: the output pages are touched once, outside the timing */
	for (int k = 0; k < passes; k++) {
		if (k % 2) {
			tc[k] = pass(&u, 1);
			tb[k] = pass(&u, 0);
		} else {
			tb[k] = pass(&u, 0);
			tc[k] = pass(&u, 1);
		}
		ratio[k] = tb[k] / tc[k];
	}
	printf("{\"bench\":\"get_floor\",\"image\":\"%s\",\"codec\":\"%s\",\"unit\":%zu,"
	       "\"passes\":%d,\"units\":%zu,\"bare_mbps\":%.1f,\"checked_mbps\":%.1f,"
	       "\"checked_of_bare\":%.3f}\n",
	       zf_image_name(img), argv[2], u.unit, passes, u.n,
	       (double)bytes / 1e6 / median(tb, passes), (double)bytes / 1e6 / median(tc, passes),
	       median(ratio, passes));
	zf_codec_ctx_destroy(u.ctx);
	zf_image_close(img);
	return 0;
}
