/*
 * fuzz_replay.c - runs a libFuzzer target over saved inputs without libFuzzer, so that the
 * corpora in tests/fuzz/corpus/ are regression tests in every build (gcc, no sanitizer,
 * valgrind), like lz4's standaloneengine.c.
 *
 *   fuzz_replay_<target> PATH...
 *
 * Each PATH is a file (run as one input) or a directory (every regular file directly in
 * it, in name order so that a run is repeatable; dot files are skipped). Each input is
 * read into a heap buffer of exactly its size, so that a sanitized build catches the
 * target reading past it, and handed to LLVMFuzzerTestOneInput(); a bug in the target
 * aborts or crashes, with the input's name printed just before. Exits 0 after running at
 * least one input from every PATH, 1 when a PATH is missing, unreadable or holds no input
 * (an empty corpus would make the test pass without testing anything).
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	uint8_t *buf = NULL;
	struct stat st;
	size_t size;
	FILE *f;
	int ret = -1;

	f = fopen(path, "rb");
	if (!f || fstat(fileno(f), &st) != 0) {
		fprintf(stderr, "fuzz_replay: %s: %s\n", path, strerror(errno));
		goto out;
	}
	size = (size_t)st.st_size;
	/* malloc(0) may return NULL: keep one byte so that NULL always means failure. */
	buf = malloc(size ? size : 1);
	if (!buf) {
		fprintf(stderr, "fuzz_replay: %s: out of memory for %zu bytes\n", path, size);
		goto out;
	}
	if (fread(buf, 1, size, f) != size) {
		fprintf(stderr, "fuzz_replay: %s: short read\n", path);
		goto out;
	}
	fprintf(stderr, "fuzz_replay: %s (%zu bytes)\n", path, size);
	LLVMFuzzerTestOneInput(buf, size);
	ret = 0;
out:
	free(buf);
	if (f)
		fclose(f);
	return ret;
}

static int is_input(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

static int cmp_names(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/* Runs every regular file in dir; returns how many, or -1 on an error. */
static long run_dir(const char *dir)
{
	struct dirent **names;
	long count = 0;
	int n;

	n = scandir(dir, &names, is_input, cmp_names);
	if (n < 0) {
		fprintf(stderr, "fuzz_replay: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		const size_t len = strlen(dir) + strlen(names[i]->d_name) + 2;
		char *path = malloc(len);
		struct stat st;

		if (!path) {
			count = -1;
			break;
		}
		snprintf(path, len, "%s/%s", dir, names[i]->d_name);
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			if (run_file(path) != 0)
				count = -1;
			else if (count >= 0)
				count++;
		}
		free(path);
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return count;
}

int main(int argc, char **argv)
{
	long total = 0;
	int status = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
		return 1;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;
		long n;

		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "fuzz_replay: %s: %s\n", argv[i], strerror(errno));
			status = 1;
			continue;
		}
		if (S_ISDIR(st.st_mode))
			n = run_dir(argv[i]);
		else
			n = run_file(argv[i]) == 0 ? 1 : -1;
		if (n == 0)
			fprintf(stderr, "fuzz_replay: %s: no inputs\n", argv[i]);
		if (n <= 0)
			status = 1;
		else
			total += n;
	}
	printf("fuzz_replay: %ld inputs ran%s\n", total, status ? ", with errors" : "");
	return status;
}
