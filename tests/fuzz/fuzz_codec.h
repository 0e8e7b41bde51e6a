/*
 * fuzz_codec.h - the input format of the codec fuzz targets, shared by fuzz_codec.c and
 * the seed generator make_seeds.c so that the two cannot drift apart.
 *
 * An input is one header byte and a body:
 *
 *   byte 0, bit 0   the job: FUZZ_JOB_DECOMPRESS (0) or FUZZ_JOB_ROUND_TRIP (1)
 *   byte 0, 1..7    the level slot: (byte0 >> 1) % nlevels picks a level from the codec's
 *                   table below (decompression does not depend on the level, but the slot
 *                   still picks which context decodes)
 *
 *   decompress:     bytes 1..3 little-endian L, the expected length is L % ZF_UNIT_MAX + 1
 *                   (so 1..2 MiB whatever the bytes); bytes 4.. are the compressed stream
 *   round trip:     bytes 1.. are the data to compress (at most ZF_UNIT_MAX of them)
 *
 * The level tables cover each codec's whole range sparsely: both ends, the default and a
 * few points between, so that libFuzzer mutating byte 0 reaches every strategy of the
 * compressor (zstd fast/greedy/lazy/btopt/btultra, lz4hc's three match finders, libdeflate's
 * greedy/lazy/near-optimal parsers, igzip's four levels) without making the fuzzer keep a
 * context per possible level.
 */
#ifndef ZF_FUZZ_CODEC_H
#define ZF_FUZZ_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "zfolio.h"

enum fuzz_job { FUZZ_JOB_DECOMPRESS = 0, FUZZ_JOB_ROUND_TRIP = 1 };

/* Bytes before the compressed stream in a decompress input. */
#define FUZZ_DECOMPRESS_HEADER 4u

#define FUZZ_MAX_LEVELS 16

struct fuzz_codec_levels {
	const char *algorithm;
	int has_level; /* 0: the codec name takes no ":L" (lzo) */
	int default_slot; /* where levels[] has the codec's default level */
	int nlevels;
	int levels[FUZZ_MAX_LEVELS];
};

static const struct fuzz_codec_levels fuzz_codec_table[] = {
	/* lz4 "levels" are accelerations: 1 (default) .. 65537 (LZ4_ACCELERATION_MAX) */
	{ "lz4", 1, 0, 8, { 1, 2, 3, 8, 17, 100, 1000, 65537 } },
	{ "lz4hc", 1, 8, 12, { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 } },
	{ "zstd", 1, 6, 13, { -131072, -100, -5, -1, 1, 2, 3, 4, 6, 9, 15, 19, 22 } },
	{ "deflate", 1, 6, 13, { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 } },
	{ "isal", 1, 1, 4, { 0, 1, 2, 3 } },
	{ "lzo", 0, 0, 1, { 0 } },
};

/* The level table of an algorithm, or NULL when the fuzz targets do not know it. */
static inline const struct fuzz_codec_levels *fuzz_codec_levels(const char *algorithm)
{
	for (size_t i = 0; i < sizeof(fuzz_codec_table) / sizeof(fuzz_codec_table[0]); i++) {
		if (strcmp(fuzz_codec_table[i].algorithm, algorithm) == 0)
			return &fuzz_codec_table[i];
	}
	return NULL;
}

/* The header byte that selects job and slot (slot < nlevels, so slot * 2 + 1 < 256). */
static inline uint8_t fuzz_header_byte(enum fuzz_job job, int slot)
{
	return (uint8_t)((unsigned)slot << 1 | (unsigned)job);
}

/* The three length bytes of a decompress input that make the target expect len bytes. */
static inline void fuzz_put_length(uint8_t *p, size_t len)
{
	const uint32_t l = (uint32_t)(len - 1);

	p[0] = (uint8_t)l;
	p[1] = (uint8_t)(l >> 8);
	p[2] = (uint8_t)(l >> 16);
}

static inline size_t fuzz_get_length(const uint8_t *p)
{
	const uint32_t l = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;

	return l % ZF_UNIT_MAX + 1;
}

#endif /* ZF_FUZZ_CODEC_H */
