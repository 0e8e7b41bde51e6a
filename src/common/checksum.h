/*
 * checksum.h - the XXH3 that every stored unit carries and every get checks.
 *
 * libxxhash's XXH3_64bits() is built for the baseline x86-64 (SSE2), and its run-time
 * dispatch (XXH3_64bits_dispatch) picks AVX-512 where the CPU has it, which on this
 * Intel VM slows the decompression around it more than the hash gains (python, lz4,
 * 4 KiB units, bench/get_floor: a get with its checksum at 0.90-0.93 of the bare
 * decompression with the SSE2 hash, 0.85-0.87 with the dispatch's AVX-512, 0.94-0.95
 * with AVX2). So on x86-64 the same XXH3 comes from xxhash.h compiled inline with AVX2
 * (checksum_avx2.c), chosen once at load time when the CPU has AVX2; the hash value is
 * the same whichever computes it.
 */
#ifndef ZF_CHECKSUM_H
#define ZF_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

#include <xxhash.h>

/* With src/CMakeLists.txt, which builds checksum_avx2.c for x86-64. */
#if defined(__x86_64__)
#define ZF_CHECKSUM_AVX2 1
extern int checksum_use_avx2; /* set before main() (checksum.c) */
uint64_t checksum_avx2(const void *data, size_t len);
#endif

static inline uint64_t zf_checksum(const void *data, size_t len)
{
#ifdef ZF_CHECKSUM_AVX2
	if (__builtin_expect(checksum_use_avx2, 1))
		return checksum_avx2(data, len);
#endif
	return (uint64_t)XXH3_64bits(data, len);
}

#endif /* ZF_CHECKSUM_H */
