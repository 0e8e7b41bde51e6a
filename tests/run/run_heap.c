/*
 * run_heap.c - a plain glibc-malloc C program for the runtime's tests (run_test.sh):
 * allocates MIB mebibytes in blocks of 4-6 KiB with compressible contents, frees a
 * third, reads the rest back, and prints one checksum, which a run under zfolio must
 * print the same. usage: run_heap [MIB [hold]]; with hold, it prints "held" once the
 * blocks are made and then reads them over and over until it is killed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	const size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 256;
	const size_t n = mib * 1024 * 1024 / 4096;
	char **blk = malloc(n * sizeof(*blk));
	uint64_t x = 88172645463325252ull, sum = 0;

	if (!blk)
		return 1;
	for (size_t i = 0; i < n; i++) {
		blk[i] = malloc(4000 + (i % 7) * 300);
		if (!blk[i])
			return 1;
		for (size_t j = 0; j < 4000; j += 8) {
			uint64_t v;

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			v = j % 64 ? (x & 0xff) * 0x0101010101010101ull : x;
			memcpy(blk[i] + j, &v, 8);
		}
	}
	if (argc > 2 && !strcmp(argv[2], "hold")) {
		printf("held\n");
		fflush(stdout);
		for (;;)
			for (size_t i = 0; i < n; i++)
				sum += (unsigned char)blk[i][i % 4000];
	}
	for (size_t i = 0; i < n; i += 3) {
		free(blk[i]);
		blk[i] = NULL;
	}
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; blk[i] && j < 4000; j++)
			sum = sum * 31 + (unsigned char)blk[i][j];
		free(blk[i]);
	}
	free(blk);
	printf("%016llx\n", (unsigned long long)sum);
	return 0;
}
