/*
 * page.c - page classification shared by the codec benchmarks, the store and capture.
 *
 * A same-filled page is one 64-bit value repeated (zram's definition: it stores the
 * value instead of compressing). The check compares whole words and stops at the first
 * difference, so a typical non-uniform page costs a few loads.
 */
#include <string.h>

#include "common.h"

int zf_same_filled(const void *buf, size_t len, uint64_t *value)
{
	const uint64_t *w = buf;
	const size_t n = len / sizeof(uint64_t);
	uint64_t v;

	if (n == 0)
		return 0;
	v = w[0];
	/* Cheap early out on the last word: most pages differ there already. */
	if (w[n - 1] != v)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if (w[i] != v)
			return 0;
	}
	if (value)
		*value = v;
	return 1;
}
