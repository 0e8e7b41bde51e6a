/*
 * stress.h - what the stress tests (and region_test) share: whether a sanitizer is on
 * (sanitized.h: they shorten their default runs under one), their parameters
 * from argv or the environment, a PRNG and a hash of three numbers, and the sample image
 * they fill memory from.
 */
#ifndef ZF_STRESS_H
#define ZF_STRESS_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zfolio.h"
#include "image.h" /* the sample image (tools/zfolio) */
#include "sanitized.h"

/* argv[i] if there is one, else the environment variable env, else def. */
static inline unsigned long long arg_or_env(int argc, char **argv, int i, const char *env,
					    unsigned long long def)
{
	const char *v = argc > i ? argv[i] : getenv(env);

	return v && *v ? strtoull(v, NULL, 0) : def;
}

/* The next number of a splitmix64 sequence: a fast seeded PRNG, one state per thread. */
static inline uint64_t stress_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A well-mixed number from three: which content a (page, version, seed) gets. */
static inline uint64_t stress_mix(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t s = a * 0xd1b54a32d192ed03ull ^ b * 0x9e3779b97f4a7c15ull ^ c;

	return stress_rand(&s);
}

/*
 * The sample image (sample.bin.zst) whose pages the tests write, so that compression is
 * real: from $ZF_TEST_DATA, else the build's ZF_TEST_DATA, else data/ of the source tree
 * this file is in. Returns 0 and its bytes and whole pages, or an error (the caller then
 * makes pages of its own).
 */
static inline int stress_open_sample(zf_image **img, const uint8_t **data, size_t *pages)
{
	const char *dir = getenv("ZF_TEST_DATA");
	char path[4096];
	int ret;

#ifdef ZF_TEST_DATA
	if (!dir || !*dir)
		dir = ZF_TEST_DATA;
#endif
	if (dir && *dir) {
		snprintf(path, sizeof(path), "%s/sample.bin.zst", dir);
	} else {
		const char *end = strstr(__FILE__, "tests/stress/");

		if (!end)
			return -ENOENT;
		snprintf(path, sizeof(path), "%.*sdata/sample.bin.zst", (int)(end - __FILE__),
			 __FILE__);
	}
	ret = zf_image_open(path, 0, img);
	if (ret)
		return ret;
	*data = zf_image_data(*img);
	*pages = zf_image_size(*img) / ZF_PAGE_SIZE;
	return 0;
}

#endif /* ZF_STRESS_H */
