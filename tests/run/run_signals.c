/*
 * run_signals.c - a program with SIGBUS and SIGSEGV handlers of its own, for the runtime's
 * tests (run_test.sh signals): under zfolio in SIGBUS mode its handlers must not replace
 * zfolio's (its heap's faults go on being served) and must still get its own signals.
 *
 * Installs its handlers (sigaction() for SIGBUS, signal() for SIGSEGV), fills MIB
 * mebibytes of heap, raises a real SIGBUS (a file mapping past the file's end) and a real
 * SIGSEGV (a PROT_NONE page), each caught by its handler, reads its heap back, and prints
 * "ok" and a checksum of the heap, which must be the same with and without zfolio.
 * usage: run_signals [MIB]
 */
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static sigjmp_buf back;
static volatile sig_atomic_t caught;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	(void)si;
	(void)uc;
	caught = sig;
	siglongjmp(back, 1);
}

static void on_sigsegv(int sig)
{
	caught = sig;
	siglongjmp(back, 1);
}

static uint64_t heap_sum(char **blk, size_t n)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < 4096; j += 64)
			sum = sum * 31 + (unsigned char)blk[i][j];
	return sum;
}

static int fail(const char *what)
{
	printf("FAIL %s\n", what);
	return 1;
}

int main(int argc, char **argv)
{
	const size_t n = (argc > 1 ? strtoul(argv[1], NULL, 0) : 64) * 256;
	struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO }, old;
	char **blk = malloc(n * sizeof(*blk));
	char path[] = "/tmp/run_signals.XXXXXX";
	volatile char *p;
	uint64_t before;
	int fd;

	if (!blk)
		return fail("malloc");
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, NULL) || signal(SIGSEGV, on_sigsegv) == SIG_ERR)
		return fail("installing the handlers");
	if (sigaction(SIGBUS, NULL, &old) || old.sa_sigaction != on_sigbus)
		return fail("sigaction(SIGBUS) does not answer with the handler set");
	for (size_t i = 0; i < n; i++) {
		blk[i] = malloc(4096);
		if (!blk[i])
			return fail("malloc");
		memset(blk[i], (int)(i * 7 % 251), 4096);
		blk[i][i % 4096] = (char)i;
	}
	before = heap_sum(blk, n);

	/* A real SIGBUS: the second page of a mapping of a one-page file. */
	fd = mkstemp(path);
	if (fd < 0 || ftruncate(fd, 4096))
		return fail("a file");
	unlink(path);
	p = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return fail("mmap of the file");
	if (!sigsetjmp(back, 1))
		(void)p[4096];
	if (caught != SIGBUS)
		return fail("the program's SIGBUS handler did not run");

	/* A real SIGSEGV: a page without access. */
	caught = 0;
	p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return fail("mmap");
	if (!sigsetjmp(back, 1))
		(void)p[0];
	if (caught != SIGSEGV)
		return fail("the program's SIGSEGV handler did not run");

	if (heap_sum(blk, n) != before)
		return fail("the heap changed");
	printf("ok %016llx\n", (unsigned long long)before);
	return 0;
}
