/*
 * run_fork.c - fork() under the runtime (run_test.sh "fork"): the parent fills MIB
 * mebibytes of heap (more than the limit: most of it evicted), forks children that each
 * check every byte, write their own pattern over part of it, check again and exit with
 * what they found; meanwhile the parent writes its own and checks it after each child.
 * Then a child that forks a grandchild, and one that execs a shell command. Prints "ok"
 * and exits 0, or says what differed and exits 1. usage: run_fork [MIB]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static uint8_t *heap;
static size_t len;

static uint8_t pat(unsigned ver, size_t i)
{
	const uint64_t x = (ver * 0x9e3779b97f4a7c15ull) ^ ((i / 64) * 0xbf58476d1ce4e5b9ull);

	return (uint8_t)(i % 64 ? (x >> 37) & 0x3f : x >> 11);
}

static void fill(size_t from, size_t to, unsigned ver)
{
	for (size_t i = from; i < to; i++)
		heap[i] = pat(ver, i);
}

/* The first byte of [from, to) that is not version ver, or to. */
static size_t check(size_t from, size_t to, unsigned ver)
{
	for (size_t i = from; i < to; i++)
		if (heap[i] != pat(ver, i))
			return i;
	return to;
}

static int child(unsigned seen, unsigned own)
{
	if (check(0, len, seen) != len)
		return 2;
	fill(0, len / 3, own);
	if (check(0, len / 3, own) != len / 3 || check(len / 3, len, seen) != len)
		return 3;
	return 0;
}

static int wait_ok(pid_t pid, const char *what)
{
	int st;

	if (pid < 0 || waitpid(pid, &st, 0) != pid) {
		perror(what);
		return 0;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "run_fork: %s: status %#x\n", what, st);
		return 0;
	}
	return 1;
}

int main(int argc, char **argv)
{
	const size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 128;
	int ok = 1;

	len = mib << 20;
	heap = malloc(len);
	if (!heap)
		return 1;
	fill(0, len, 1);
	for (unsigned k = 0; k < 4 && ok; k++) {
		pid_t pid = fork();

		if (!pid)
			_exit(child(1 + k, 100 + k));
		/* The parent's own writes while the child lives. */
		fill(len / 2, len, 2 + k);
		ok &= wait_ok(pid, "a child");
		if (check(0, len / 2, 1 + k) != len / 2 || check(len / 2, len, 2 + k) != len) {
			fprintf(stderr, "run_fork: the parent's bytes changed\n");
			ok = 0;
		}
		fill(0, len / 2, 2 + k);
	}
	if (ok) {
		pid_t pid = fork();

		if (!pid) {
			pid_t g = fork();

			if (!g)
				_exit(child(5, 200));
			_exit(wait_ok(g, "a grandchild") && check(0, len, 5) == len ? 0 : 4);
		}
		ok &= wait_ok(pid, "a child with a grandchild");
		pid = fork();
		if (!pid) {
			execl("/bin/sh", "sh", "-c", "exit 0", (char *)NULL);
			_exit(5);
		}
		ok &= wait_ok(pid, "a child that execs");
		ok &= check(0, len, 5) == len;
	}
	printf(ok ? "ok\n" : "FAILED\n");
	return ok ? 0 : 1;
}
