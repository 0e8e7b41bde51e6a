/*
 * first_touch.c - what a machine charges for mapping memory and touching it the first
 * time, which bounds any swap-in, the kernel's or zfolio's.
 *
 * On 100 MiB of anonymous memory (4 KiB pages, no THP), three runs of each, ms:
 *   fault    a read of each page of fresh memory: one page fault each (zero page)
 *   populate MADV_POPULATE_WRITE (the kernel maps every page), then a first read of each
 *            page by the program, then a second one
 *   other    populate, then a first read by another thread, then one by this thread
 *   copy     pages placed by UFFDIO_COPY in 64 KiB pieces (as a zfolio swap-in does),
 *            then a first read (needs userfaultfd: root)
 *   swapin   with swap active: MADV_PAGEOUT, then the pages swapped in by the kernel
 *            without a user access, MADV_POPULATE_READ (clean page-table entries) or
 *            MADV_POPULATE_WRITE (dirty ones), then a first read
 * On bare metal a first read of a mapped page costs nothing; on a VM that shadows the
 * guest's page tables it is a hypervisor exit per page (bench/results/pageout.md).
 *
 * usage: first_touch [MiB]
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

#define PAGE 4096u

static size_t size;
static volatile unsigned sink;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double read_pages(const volatile uint8_t *p)
{
	const double t0 = now_ms();
	unsigned s = 0;

	for (size_t off = 0; off < size; off += PAGE)
		s += p[off + 8];
	sink += s;
	return now_ms() - t0;
}

static void *reader_main(void *arg)
{
	*(double *)arg = read_pages(*(volatile uint8_t **)arg);
	return NULL;
}

static uint8_t *map(void)
{
	uint8_t *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	madvise(p, size, MADV_NOHUGEPAGE);
	return p;
}

static void populate(uint8_t *p, int advice)
{
	if (madvise(p, size, advice)) {
		perror("madvise(MADV_POPULATE_*)");
		exit(1);
	}
}

/* Pages placed with UFFDIO_COPY in 64 KiB pieces; -1 without userfaultfd. */
static double copy_then_read(double *copy_ms)
{
	const int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	struct uffdio_api api = { .api = UFFD_API };
	uint8_t *p = map(), *src = map();
	double t0, ms;

	if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api)) {
		munmap(p, size);
		munmap(src, size);
		return -1;
	}
	struct uffdio_register reg = { .range = { (uintptr_t)p, size },
				       .mode = UFFDIO_REGISTER_MODE_MISSING };
	if (ioctl(uffd, UFFDIO_REGISTER, &reg)) {
		perror("UFFDIO_REGISTER");
		exit(1);
	}
	memset(src, 1, size);
	t0 = now_ms();
	for (size_t off = 0; off < size; off += 65536) {
		struct uffdio_copy c = { .dst = (uintptr_t)(p + off),
					 .src = (uintptr_t)(src + off),
					 .len = 65536 };

		if (ioctl(uffd, UFFDIO_COPY, &c)) {
			perror("UFFDIO_COPY");
			exit(1);
		}
	}
	*copy_ms = now_ms() - t0;
	ms = read_pages(p);
	close(uffd);
	munmap(p, size);
	munmap(src, size);
	return ms;
}

static int swap_active(void)
{
	FILE *f = fopen("/proc/swaps", "r");
	char line[256];
	int lines = 0;

	while (f && fgets(line, sizeof(line), f))
		lines++;
	if (f)
		fclose(f);
	return lines > 1;
}

int main(int argc, char **argv)
{
	size = (argc > 1 ? strtoul(argv[1], NULL, 10) : 100) << 20;
	printf("%zu MiB, %zu pages\n", size >> 20, size / PAGE);
	for (int run = 0; run < 3; run++) {
		uint8_t *p = map();
		double a, b, c, other[2];
		pthread_t t;

		a = read_pages(p);
		munmap(p, size);
		printf("fault:    a first read of fresh memory   %7.1f ms\n", a);

		p = map();
		c = now_ms();
		populate(p, MADV_POPULATE_WRITE);
		c = now_ms() - c;
		a = read_pages(p);
		b = read_pages(p);
		munmap(p, size);
		printf("populate: %6.1f ms, then first read %7.1f ms, second %5.1f ms\n", c, a, b);

		p = map();
		populate(p, MADV_POPULATE_WRITE);
		memcpy(other, &p, sizeof(p));
		pthread_create(&t, NULL, reader_main, other);
		pthread_join(t, NULL);
		a = read_pages(p);
		munmap(p, size);
		printf("other:    first read by another thread %7.1f ms, then this one %5.1f ms\n",
		       other[0], a);

		a = copy_then_read(&c);
		if (a >= 0)
			printf("copy:     UFFDIO_COPY %6.1f ms, then first read %7.1f ms\n", c, a);
		else
			printf("copy:     skipped (no userfaultfd: %s)\n", strerror(errno));

		if (!swap_active()) {
			printf("swapin:   skipped (no swap active)\n");
			continue;
		}
		p = map();
		memset(p, 3, size);
		for (size_t off = 0; off < size; off += PAGE)
			p[off] = (uint8_t)(off >> 12);
		for (int w = 0; w < 2; w++) {
			if (madvise(p, size, MADV_PAGEOUT)) {
				perror("madvise(MADV_PAGEOUT)");
				exit(1);
			}
			c = now_ms();
			populate(p, w ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
			c = now_ms() - c;
			a = read_pages(p);
			printf("swapin:   MADV_POPULATE_%s %6.1f ms, then first read %7.1f ms\n",
			       w ? "WRITE" : "READ ", c, a);
		}
		munmap(p, size);
	}
	return 0;
}
