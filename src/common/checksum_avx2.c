/*
 * checksum_avx2.c - XXH3_64bits() from xxhash.h, compiled inline with -mavx2 (see
 * checksum.h for why not libxxhash's own build or its dispatch). Called only when
 * checksum.c found AVX2 on the CPU.
 */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "checksum.h"

uint64_t checksum_avx2(const void *data, size_t len)
{
	return (uint64_t)XXH3_64bits(data, len);
}
