/*
 * codec_baseline.c - the bare loop that "zfolio bench codec" is checked against.
 *
 * It cuts an image into units exactly as the benchmark does (same-filled units skipped,
 * a unit that does not compress below its size kept raw) and calls liblz4 and libzstd
 * directly, with the parameters zfolio's backends use (LZ4_compress_fast_extState with
 * acceleration 1; zstd frames without content size, checksum or dictionary id), with
 * no zfolio code in the timed loops. zfolio is used only to load the image.
 * If zfolio's codec layer or benchmark harness cost time or changed the output, the
 * two programs' figures would part.
 *
 * usage: codec_baseline IMAGE lz4|zstd:1 UNIT_BYTES REPEAT
 * prints one JSON line with ratio, comp_mbps and decomp_mbps (medians, MB = 10^6 B).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <lz4.h>
#include <zstd.h>

#include "bench_time.h"
#include "zfolio.h"
#include "image.h"

int main(int argc, char **argv)
{
	const char *codec;
	size_t unit, size, n_units;
	const uint8_t *data;
	uint8_t *slots, *out, *same;
	int32_t *clen;
	int repeat, is_lz4;
	void *lz4_state;
	ZSTD_CCtx *cctx;
	ZSTD_DCtx *dctx;
	zf_image *img;
	double *tc, *td;
	uint64_t in_bytes = 0, out_bytes = 0, stored = 0;

	if (argc != 5) {
		fprintf(stderr, "usage: %s IMAGE lz4|zstd:1 UNIT_BYTES REPEAT\n", argv[0]);
		return 2;
	}
	codec = argv[2];
	unit = strtoul(argv[3], NULL, 10);
	repeat = atoi(argv[4]);
	is_lz4 = !strcmp(codec, "lz4");
	if ((!is_lz4 && strcmp(codec, "zstd:1")) || unit < 4096 || unit > ZF_UNIT_MAX ||
	    repeat < 1) {
		fprintf(stderr, "codec_baseline: bad arguments\n");
		return 2;
	}
	if (zf_image_open(argv[1], 0, &img) < 0) {
		fprintf(stderr, "codec_baseline: cannot open %s\n", argv[1]);
		return 1;
	}
	data = zf_image_data(img);
	size = zf_image_size(img);
	n_units = (size + unit - 1) / unit;
	slots = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	out = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	same = calloc(n_units, 1);
	clen = calloc(n_units, sizeof(*clen));
	tc = calloc((size_t)repeat + 1, sizeof(double));
	td = calloc((size_t)repeat + 1, sizeof(double));
	lz4_state = malloc((size_t)LZ4_sizeofState());
	cctx = ZSTD_createCCtx();
	dctx = ZSTD_createDCtx();
	if (slots == MAP_FAILED || out == MAP_FAILED || !same || !clen || !tc || !td ||
	    !lz4_state || !cctx || !dctx)
		return 1;
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 0);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_dictIDFlag, 0);

	for (size_t i = 0; i < n_units; i++) {
		const size_t len = unit < size - i * unit ? unit : size - i * unit;

		same[i] = (uint8_t)zf_same_filled(data + i * unit, len, NULL);
	}

	/* Pass 0 is the warm-up, as in zfolio bench codec. */
	for (int k = 0; k <= repeat; k++) {
		double t0 = now();

		for (size_t i = 0; i < n_units; i++) {
			const size_t len = unit < size - i * unit ? unit : size - i * unit;
			const char *src = (const char *)data + i * unit;
			char *dst = (char *)slots + i * unit;
			int n;

			if (same[i])
				continue;
			if (is_lz4) {
				n = LZ4_compress_fast_extState(lz4_state, src, dst, (int)len,
							       (int)len - 1, 1);
				n = n > 0 ? n : -1;
			} else {
				const size_t r = ZSTD_compress2(cctx, dst, len - 1, src, len);

				n = ZSTD_isError(r) ? -1 : (int)r;
			}
			clen[i] = n;
		}
		tc[k] = now() - t0;
		t0 = now();
		for (size_t i = 0; i < n_units; i++) {
			const size_t len = unit < size - i * unit ? unit : size - i * unit;
			const char *src = (const char *)slots + i * unit;
			char *dst = (char *)out + i * unit;
			size_t r;

			if (same[i] || clen[i] < 0)
				continue;
			if (is_lz4)
				r = (size_t)LZ4_decompress_safe(src, dst, clen[i], (int)len);
			else
				r = ZSTD_decompressDCtx(dctx, dst, len, src, (size_t)clen[i]);
			if (r != len) {
				fprintf(stderr, "codec_baseline: unit %zu does not round-trip\n",
					i);
				return 1;
			}
		}
		td[k] = now() - t0;
	}
	for (size_t i = 0; i < n_units; i++) {
		const size_t len = unit < size - i * unit ? unit : size - i * unit;

		if (same[i])
			continue;
		in_bytes += len;
		if (clen[i] < 0) {
			stored += len;
		} else {
			stored += (uint64_t)clen[i];
			out_bytes += len;
			if (memcmp(out + i * unit, data + i * unit, len)) {
				fprintf(stderr, "codec_baseline: unit %zu differs\n", i);
				return 1;
			}
		}
	}
	printf("{\"bench\":\"codec_baseline\",\"image\":\"%s\",\"codec\":\"%s\",\"unit\":%zu,"
	       "\"compr_bytes\":%llu,\"ratio\":%.4f,\"comp_mbps\":%.1f,\"decomp_mbps\":%.1f,"
	       "\"repeat\":%d}\n",
	       zf_image_name(img), is_lz4 ? "lz4:1" : "zstd:1", unit, (unsigned long long)stored,
	       (double)size / (double)stored, (double)in_bytes / 1e6 / median(tc + 1, repeat),
	       (double)out_bytes / 1e6 / median(td + 1, repeat), repeat);
	zf_image_close(img);
	return 0;
}
