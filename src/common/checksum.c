/*
 * checksum.c - which XXH3 a unit's checksum comes from (see checksum.h): the AVX2 build
 * when the CPU has AVX2, decided once before main(). Compiled for the baseline CPU, as
 * everything but checksum_avx2.c is: this is what runs before we know.
 */
#include "checksum.h"

#ifdef ZF_CHECKSUM_AVX2
int checksum_use_avx2;

__attribute__((constructor)) static void checksum_choose(void)
{
	__builtin_cpu_init(); /* a constructor may run before libgcc's own */
	checksum_use_avx2 = __builtin_cpu_supports("avx2") != 0;
}
#endif
