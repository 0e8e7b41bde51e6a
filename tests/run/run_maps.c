/*
 * run_maps.c - what a program may do with anonymous mappings, checked byte by byte: run
 * plain and under libzfolio-run.so (run_test.sh), where each of these meets the
 * runtime's arena (src/run/run_map.c):
 *
 *   munmap      part of a mapping unmapped: the rest intact; a new mapping reads zeros
 *   remap       mremap(): shrink, grow (in place or moved, MREMAP_MAYMOVE), and to a
 *               given address (MREMAP_FIXED): the bytes follow, the new part reads zeros
 *   fixed       MAP_FIXED anonymous memory over part of a mapping: zeros there, the rest
 *               intact; MAP_FIXED_NOREPLACE over it: EEXIST
 *   file        a file mapped MAP_FIXED over part of a mapping: the file's bytes there;
 *               anonymous memory mapped over that again: zeros; unmapped, and later
 *               mappings still read zeros and keep what they get
 *   advise      MADV_DONTNEED reads zeros; MADV_PAGEOUT, MADV_COLD, MADV_WILLNEED keep
 *               the bytes; MAP_POPULATE; PROT_NONE then mprotect() to read-write
 *   threads     threads allocating, writing, checking and freeing blocks of up to 300
 *               KiB at once (malloc, calloc, realloc, posix_memalign, aligned_alloc),
 *               some 20 MiB in all, under the limit of run_test.sh; what the loader
 *               and the C library allocate (a thread's TLS table, strdup()) is not in
 *               the runtime's arena
 *   pageout     a mapping larger than ZFOLIO_LIMIT written, then read back in order and
 *               checked (the runtime evicts and brings units back meanwhile)
 *
 * usage: run_maps [case...] (no case: all). Exits 0, or 1 with the failed check on stderr.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define KiB(x) ((size_t)(x) << 10)
#define MiB(x) ((size_t)(x) << 20)

#ifndef MADV_COLD
#define MADV_COLD 20
#endif
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

static const char *phase = "";

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL run_maps [%s] line %d: ", phase, __LINE__);          \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static uint8_t *map(size_t len)
{
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CHECK(p != MAP_FAILED, "mmap %zu: %s", len, strerror(errno));
	return p;
}

/* The byte at offset i of a fill seeded with seed. */
static uint8_t pat(uint64_t seed, size_t i)
{
	uint64_t x = (seed + i / 64) * 0x9e3779b97f4a7c15ull;

	return (uint8_t)((x >> 29) ^ (i & 63 ? 0 : x)); /* compressible, not same-filled */
}

static void fill(uint8_t *p, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pat(seed, i);
}

/* Whether p[0, len) holds the fill seeded with seed from offset off on. */
static void expect(const uint8_t *p, size_t len, uint64_t seed, size_t off, const char *what)
{
	for (size_t i = 0; i < len; i++)
		CHECK(p[i] == pat(seed, off + i), "%s: byte %zu is %u, want %u", what, i, p[i],
		      pat(seed, off + i));
}

static void expect_zero(const uint8_t *p, size_t len, const char *what)
{
	for (size_t i = 0; i < len; i++)
		CHECK(!p[i], "%s: byte %zu is %u, want 0", what, i, p[i]);
}

static void case_munmap(void)
{
	uint8_t *p = map(MiB(4)), *q;

	phase = "munmap";
	fill(p, MiB(4), 1);
	CHECK(!munmap(p + MiB(1), KiB(256)), "munmap the middle: %s", strerror(errno));
	expect(p, MiB(1), 1, 0, "before the hole");
	expect(p + MiB(1) + KiB(256), MiB(3) - KiB(256), 1, MiB(1) + KiB(256), "after the hole");
	CHECK(!munmap(p, MiB(1)) && !munmap(p + MiB(1) + KiB(256), MiB(3) - KiB(256)),
	      "munmap the rest: %s", strerror(errno));
	for (int i = 0; i < 8; i++) {
		q = map(MiB(2));
		expect_zero(q, MiB(2), "a new mapping");
		fill(q, MiB(2), 10 + i);
		CHECK(!munmap(q, MiB(2)), "munmap: %s", strerror(errno));
	}
	/* Unmapping what is not mapped, and bad arguments, as the kernel answers them. */
	CHECK(munmap(p + 1, KiB(4)) == -1 && errno == EINVAL, "munmap unaligned: want EINVAL");
	CHECK(!munmap(p, MiB(4)), "munmap of nothing mapped: %s", strerror(errno));
}

static void case_remap(void)
{
	uint8_t *p = map(MiB(4)), *q, *dst;

	phase = "remap";
	fill(p, MiB(4), 2);
	q = mremap(p, MiB(4), MiB(2), 0);
	CHECK(q == p, "shrink: %p, want %p (%s)", (void *)q, (void *)p, strerror(errno));
	expect(q, MiB(2), 2, 0, "shrunk");
	q = mremap(p, MiB(2), MiB(8), MREMAP_MAYMOVE);
	CHECK(q != MAP_FAILED, "grow: %s", strerror(errno));
	expect(q, MiB(2), 2, 0, "grown");
	expect_zero(q + MiB(2), MiB(6), "grown, the new part");
	fill(q + MiB(2), MiB(6), 3);
	/* To an address of our choosing: a range we mapped and unmapped. */
	dst = map(MiB(16));
	CHECK(!munmap(dst, MiB(16)), "munmap: %s", strerror(errno));
	p = mremap(q, MiB(8), MiB(8), MREMAP_MAYMOVE | MREMAP_FIXED, dst + MiB(4));
	CHECK(p == dst + MiB(4), "MREMAP_FIXED: %p, want %p (%s)", (void *)p,
	      (void *)(dst + MiB(4)), strerror(errno));
	expect(p, MiB(2), 2, 0, "moved, first part");
	expect(p + MiB(2), MiB(6), 3, 0, "moved, second part");
	/* Growing in place only: it works or says ENOMEM, and the bytes stay either way. */
	q = mremap(p, MiB(8), MiB(9), 0);
	CHECK(q == p || (q == MAP_FAILED && errno == ENOMEM), "grow in place: %s", strerror(errno));
	expect(p, MiB(2), 2, 0, "after growing in place");
	CHECK(!munmap(p, q == p ? MiB(9) : MiB(8)), "munmap: %s", strerror(errno));
	CHECK(mremap(p + 1, KiB(4), KiB(8), MREMAP_MAYMOVE) == MAP_FAILED && errno == EINVAL,
	      "mremap unaligned: want EINVAL");
}

static void case_fixed(void)
{
	uint8_t *p = map(MiB(4)), *q;

	phase = "fixed";
	fill(p, MiB(4), 4);
	q = mmap(p + MiB(1), MiB(1), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	CHECK(q == p + MiB(1), "MAP_FIXED: %s", strerror(errno));
	expect(p, MiB(1), 4, 0, "before the fixed mapping");
	expect_zero(p + MiB(1), MiB(1), "the fixed mapping");
	expect(p + MiB(2), MiB(2), 4, MiB(2), "after the fixed mapping");
	q = mmap(p + MiB(2), MiB(1), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	CHECK(q == MAP_FAILED && errno == EEXIST, "MAP_FIXED_NOREPLACE over a mapping: %p (%s)",
	      (void *)q, strerror(errno));
	expect(p + MiB(2), MiB(2), 4, MiB(2), "after MAP_FIXED_NOREPLACE");
	CHECK(!munmap(p, MiB(4)), "munmap: %s", strerror(errno));
}

static void case_file(void)
{
	uint8_t *p = map(MiB(4)), *q;
	char path[] = "/tmp/run_maps.XXXXXX";
	uint8_t page[4096];
	int fd = mkstemp(path);

	phase = "file";
	CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
	unlink(path);
	memset(page, 0xab, sizeof(page));
	for (int i = 0; i < 64; i++)
		CHECK(write(fd, page, sizeof(page)) == (ssize_t)sizeof(page), "write");
	fill(p, MiB(4), 5);
	q = mmap(p + MiB(1), KiB(256), PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
	CHECK(q == p + MiB(1), "a file MAP_FIXED: %s", strerror(errno));
	for (size_t i = 0; i < KiB(256); i++)
		CHECK(q[i] == 0xab, "the file's byte %zu is %u", i, q[i]);
	expect(p, MiB(1), 5, 0, "before the file");
	expect(p + MiB(1) + KiB(256), MiB(3) - KiB(256), 5, MiB(1) + KiB(256), "after the file");
	/* Anonymous memory over the file again: zeros, not the file. */
	q = mmap(p + MiB(1), KiB(128), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	CHECK(q == p + MiB(1), "anonymous MAP_FIXED over the file: %s", strerror(errno));
	expect_zero(q, KiB(128), "anonymous memory mapped over the file");
	CHECK(!munmap(p, MiB(4)), "munmap: %s", strerror(errno));
	close(fd);
	/* Later mappings: zeros, and they keep what they are given. */
	for (int i = 0; i < 16; i++) {
		uint8_t *r = map(MiB(4));

		expect_zero(r, MiB(4), "a mapping after the file");
		fill(r, MiB(4), 50 + i);
		expect(r, MiB(4), 50 + i, 0, "a mapping after the file, written");
		CHECK(!munmap(r, MiB(4)), "munmap: %s", strerror(errno));
	}
}

static void case_advise(void)
{
	uint8_t *p = map(MiB(8)), *q;

	phase = "advise";
	fill(p, MiB(8), 6);
	CHECK(!madvise(p, MiB(1), MADV_DONTNEED), "MADV_DONTNEED: %s", strerror(errno));
	expect_zero(p, MiB(1), "after MADV_DONTNEED");
	CHECK(!madvise(p + MiB(2), MiB(4), MADV_PAGEOUT) || errno == EINVAL, "MADV_PAGEOUT: %s",
	      strerror(errno));
	CHECK(!madvise(p + MiB(6), MiB(2), MADV_COLD) || errno == EINVAL, "MADV_COLD: %s",
	      strerror(errno));
	CHECK(!madvise(p + MiB(2), MiB(2), MADV_WILLNEED), "MADV_WILLNEED: %s", strerror(errno));
	expect(p + MiB(1), MiB(7), 6, MiB(1), "after PAGEOUT, COLD, WILLNEED");
	CHECK(!munmap(p, MiB(8)), "munmap: %s", strerror(errno));
	q = mmap(NULL, MiB(2), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
		 -1, 0);
	CHECK(q != MAP_FAILED, "MAP_POPULATE: %s", strerror(errno));
	expect_zero(q, MiB(2), "MAP_POPULATE");
	CHECK(!munmap(q, MiB(2)), "munmap: %s", strerror(errno));
	q = mmap(NULL, MiB(2), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(q != MAP_FAILED, "PROT_NONE: %s", strerror(errno));
	CHECK(!mprotect(q, MiB(2), PROT_READ | PROT_WRITE), "mprotect: %s", strerror(errno));
	fill(q, MiB(2), 7);
	expect(q, MiB(2), 7, 0, "PROT_NONE made read-write");
	CHECK(!mprotect(q, MiB(1), PROT_READ), "mprotect read-only: %s", strerror(errno));
	CHECK(!munmap(q, MiB(2)), "munmap: %s", strerror(errno));
	q = map(MiB(2));
	fill(q, MiB(2), 8); /* writable again, whatever its addresses were before */
	CHECK(!munmap(q, MiB(2)), "munmap: %s", strerror(errno));
}

/*
 * Under zfolio run: whether p lies in the runtime's arena (src/run/run.c: 8 TiB on, 16 GiB
 * by default). What the loader and the C library allocate must not (run_heap.c): zfolio's
 * threads touch it, and one faulting on a unit it is evicting would wait for itself.
 */
static int in_arena(const void *p)
{
	const uintptr_t a = (uintptr_t)p, base = (uintptr_t)8 << 40;

	return getenv("ZFOLIO_STATS") && a >= base && a < base + ((uintptr_t)16 << 30);
}

static void *thread_main(void *arg)
{
#if defined(__x86_64__)
	void *dtv;

	/* The thread's TLS table: the loader allocated it. */
	__asm__("mov %%fs:8, %0" : "=r"(dtv));
	CHECK(!in_arena(dtv), "a thread's TLS table %p is in zfolio's arena", dtv);
#endif
	uint64_t x = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
	struct {
		uint8_t *p;
		size_t len;
		uint64_t seed;
	} held[32] = { { 0 } };

	for (int i = 0; i < 10000; i++) {
		const int k = (int)(x % 32);
		size_t len;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (held[k].p) {
			expect(held[k].p, held[k].len, held[k].seed, 0, "a block");
			if (x & 1) {
				const size_t more = held[k].len * 2 + 1;
				uint8_t *r = realloc(held[k].p, more);

				CHECK(r, "realloc %zu", more);
				expect(r, held[k].len, held[k].seed, 0, "a block after realloc");
				free(r);
			} else {
				free(held[k].p);
			}
			held[k].p = NULL;
			continue;
		}
		len = (x >> 8) % (x & 2 ? KiB(4) : KiB(300)) + 1;
		switch ((x >> 20) % 4) {
		case 0:
			held[k].p = malloc(len);
			break;
		case 1:
			held[k].p = calloc(1, len);
			CHECK(held[k].p, "calloc");
			expect_zero(held[k].p, len, "calloc");
			break;
		case 2:
			CHECK(!posix_memalign((void **)&held[k].p, 64, len), "posix_memalign");
			CHECK(!((uintptr_t)held[k].p & 63), "posix_memalign: not aligned");
			break;
		default:
			held[k].p = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
			CHECK(!((uintptr_t)held[k].p & 4095), "aligned_alloc: not aligned");
			break;
		}
		CHECK(held[k].p, "allocation of %zu", len);
		CHECK(malloc_usable_size(held[k].p) >= len, "malloc_usable_size below %zu", len);
		held[k].len = len;
		held[k].seed = x;
		fill(held[k].p, len, x);
	}
	for (int k = 0; k < 32; k++)
		free(held[k].p);
	return NULL;
}

static void case_threads(void)
{
	pthread_t t[4];
	char *dup;

	phase = "threads";
	dup = strdup("the C library's own allocation");
	CHECK(dup && !in_arena(dup), "strdup()'s block %p is in zfolio's arena", (void *)dup);
	free(dup);
	for (uintptr_t i = 0; i < 4; i++)
		CHECK(!pthread_create(&t[i], NULL, thread_main, (void *)(i + 1)), "pthread_create");
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
}

static void case_pageout(void)
{
	const char *limit = getenv("ZFOLIO_LIMIT");
	size_t len = MiB(96);
	uint8_t *p;

	phase = "pageout";
	if (limit && strtoull(limit, NULL, 10) * 3 > len)
		len = (size_t)strtoull(limit, NULL, 10) * 3;
	p = map(len);
	fill(p, len, 9);
	expect(p, len, 9, 0, "written, read back in order");
	for (size_t off = len; off > 0; off -= MiB(1))
		expect(p + off - MiB(1), MiB(1), 9, off - MiB(1), "read back in reverse");
	CHECK(!munmap(p, len), "munmap: %s", strerror(errno));
}

static const struct {
	const char *name;
	void (*fn)(void);
} cases[] = {
	{ "munmap", case_munmap },   { "remap", case_remap },	{ "fixed", case_fixed },
	{ "file", case_file },	     { "advise", case_advise }, { "threads", case_threads },
	{ "pageout", case_pageout },
};

int main(int argc, char **argv)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int want = argc < 2;

		for (int a = 1; a < argc; a++)
			want |= !strcmp(argv[a], cases[i].name);
		if (!want)
			continue;
		cases[i].fn();
		printf("ok   %s\n", cases[i].name);
	}
	return 0;
}
