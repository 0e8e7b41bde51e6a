/* Description: "zfolio capture" on a live child process with known memory: every
 * patterned page is in the image, untouched address space is not, zero and same-filled
 * pages are counted (--json: one line in the shape of the other commands' JSON), .zst
 * output round-trips, --max keeps evenly spaced 2 MiB runs, a missing PID is a usage
 * error, and a failed capture leaves no file and no stopped process behind.
 *
 * The child maps NPAT pages of distinct pseudo-random content (word 0 is cookie + index,
 * so a page is found in the image by its first word and verified whole), NZERO zero
 * pages and NSAME same-filled pages, all written, plus one mapping of GAP_PAGES + 2
 * pages of which only the first and last are written: in the default capture (present
 * pages only) the last must follow the first directly.
 *
 * Captures are compared byte for byte, so the child's memory must not change while it
 * sleeps: THP is disabled (no huge page fills the gap, khugepaged collapses nothing),
 * and the child is this program re-executed with glibc's rseq registration off, because
 * the kernel rewrites the rseq area (cpu_id) in the TLS whenever the process resumes on
 * another CPU, as it does after SIGSTOP/SIGCONT.
 *
 * Usage: capture_test PATH_TO_ZFOLIO. Returns 0 pass, 1 fail, 77 skip (no access to
 * /proc/PID/mem of a child: ptrace restrictions, a sandbox). Run as
 * "capture_test --target FD COOKIE" it is that child.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zfolio.h"
#include "image.h"
#include "../stress/stress.h" /* SANITIZED, stress_rand() */

#define PS 4096u
#define NPAT 1024u
#define NZERO 16u
#define NSAME 16u
#define GAP_PAGES 4096u
/* Pattern indexes of the two written pages of the gap mapping. */
#define GAP_FIRST NPAT
#define GAP_LAST (NPAT + 1)
#define SAME_VALUE(i) (0x5a5a5a5a00000000ull | (i))

enum { PASS = 0, FAIL = 1, SKIP = 77 };

static const char *zfolio;
static char dir[256];
static uint64_t cookie;
static pid_t target = -1;
static int failures;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	va_list ap;

	fputs("FAIL: ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
	failures++;
}

/* splitmix64 of x: stress_rand() of a sequence at x. */
static uint64_t splitmix64(uint64_t x)
{
	return stress_rand(&x);
}

static void fill_pattern(uint64_t *p, unsigned i)
{
	p[0] = cookie + i;
	for (unsigned j = 1; j < PS / 8; j++)
		p[j] = splitmix64(cookie ^ ((uint64_t)i << 32) ^ j);
}

/* The pattern index of the page, or -1 when it is not one of ours. */
static int pattern_index(const uint64_t *p)
{
	const uint64_t i = p[0] - cookie;

	if (i > GAP_LAST)
		return -1;
	for (unsigned j = 1; j < PS / 8; j++) {
		if (p[j] != splitmix64(cookie ^ (i << 32) ^ j))
			return -1;
	}
	return (int)i;
}

/* The target: writes its known pages, reports their address, then waits to be killed. */
static void __attribute__((noreturn)) child_main(int ready_fd)
{
	const size_t main_len = (size_t)(NPAT + NZERO + NSAME) * PS;
	const size_t gap_len = (size_t)(GAP_PAGES + 2) * PS;
	uint8_t *p, *gap;
	uintptr_t addr;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
	p = mmap(NULL, main_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	gap = mmap(NULL, gap_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED || gap == MAP_FAILED)
		_exit(1);
	madvise(p, main_len, MADV_NOHUGEPAGE);
	madvise(gap, gap_len, MADV_NOHUGEPAGE);
	for (unsigned i = 0; i < NPAT; i++)
		fill_pattern((uint64_t *)(void *)(p + (size_t)i * PS), i);
	/* Written, so present: a zero page that was only read would map the zero page. */
	memset(p + (size_t)NPAT * PS, 0, (size_t)NZERO * PS);
	for (unsigned i = 0; i < NSAME; i++) {
		uint64_t *w = (uint64_t *)(void *)(p + (size_t)(NPAT + NZERO + i) * PS);

		for (unsigned j = 0; j < PS / 8; j++)
			w[j] = SAME_VALUE(i);
	}
	fill_pattern((uint64_t *)(void *)gap, GAP_FIRST);
	fill_pattern((uint64_t *)(void *)(gap + (size_t)(GAP_PAGES + 1) * PS), GAP_LAST);
	addr = (uintptr_t)p;
	if (write(ready_fd, &addr, sizeof(addr)) != sizeof(addr))
		_exit(1);
	for (;;)
		pause();
}

/* The state letter of /proc/PID/stat ('S', 'T', ...), or 0. */
static char proc_state(pid_t pid)
{
	char path[64], buf[512];
	const char *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return 0;
	return p[2];
}

static void read_file(const char *path, char *buf, size_t len)
{
	const int fd = open(path, O_RDONLY);
	ssize_t n = fd < 0 ? 0 : read(fd, buf, len - 1);

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
}

struct result {
	int status; /* exit code, or 128 + signal */
	char out[4096], err[4096];
};

/*
 * Runs zfolio with args (NULL-terminated, without argv[0]); fsize_limit non-zero sets
 * RLIMIT_FSIZE (with SIGXFSZ ignored, so writes fail with EFBIG instead of killing it).
 */
static void run(struct result *r, rlim_t fsize_limit, const char *const *args)
{
	char out_path[300], err_path[300];
	const char *argv[32];
	int status, n = 0;
	pid_t pid;

	argv[n++] = zfolio;
	while (*args && n < 31)
		argv[n++] = *args++;
	argv[n] = NULL;
	snprintf(out_path, sizeof(out_path), "%s/stdout", dir);
	snprintf(err_path, sizeof(err_path), "%s/stderr", dir);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		const int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		const int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
			_exit(126);
		if (fsize_limit) {
			const struct rlimit rl = { fsize_limit, fsize_limit };

			signal(SIGXFSZ, SIG_IGN);
			setrlimit(RLIMIT_FSIZE, &rl);
		}
		execv(zfolio, (char *const *)argv);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid) {
		r->status = -1;
	} else {
		r->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	}
	read_file(out_path, r->out, sizeof(r->out));
	read_file(err_path, r->err, sizeof(r->err));
	unlink(out_path);
	unlink(err_path);
}

/* The value of "name": N in a flat JSON object, or UINT64_MAX when missing. */
static uint64_t json_u64(const char *json, const char *name)
{
	char key[64];
	const char *p;

	snprintf(key, sizeof(key), "\"%s\":", name);
	p = strstr(json, key);
	return p ? strtoull(p + strlen(key), NULL, 10) : UINT64_MAX;
}

static void image_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

/* Runs one capture of the target into dir/name; returns 0 or the skip/fail code. */
static int capture(struct result *r, const char *name, const char *opt1, const char *opt2)
{
	char path[300], pid[16];
	const char *args[10] = { "capture", pid, "-o", path, "--json", "--stop" };
	int n = 6;

	snprintf(pid, sizeof(pid), "%d", (int)target);
	image_path(path, sizeof(path), name);
	if (opt1)
		args[n++] = opt1;
	if (opt2)
		args[n++] = opt2;
	args[n] = NULL;
	run(r, 0, args);
	if (r->status == SKIP) {
		printf("SKIP: zfolio capture has no access to the child: %s", r->err);
		return SKIP;
	}
	if (r->status != 0) {
		fail("capture %s %s -> exit %d: %s", opt1 ? opt1 : "", opt2 ? opt2 : "", r->status,
		     r->err);
		return FAIL;
	}
	if (proc_state(target) == 'T')
		fail("capture %s: the target was left stopped", name);
	return 0;
}

static zf_image *open_image(const char *name)
{
	char path[300];
	zf_image *img = NULL;
	int ret;

	image_path(path, sizeof(path), name);
	ret = zf_image_open(path, 0, &img);
	if (ret < 0) {
		fail("zf_image_open(%s): %s", path, zf_strerror(ret));
		return NULL;
	}
	return img;
}

static int count_entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			n++;
	}
	closedir(d);
	return n;
}

/* The default capture: every known page there, the gap not, the counts right. */
static int test_default(zf_image **raw_out)
{
	static long first_at[GAP_LAST + 1];
	struct result r;
	zf_image *img;
	const uint8_t *data;
	size_t pages;
	uint64_t zero = 0, same = 0, known_same = 0, v;
	unsigned found = 0;
	int ret;

	ret = capture(&r, "default.bin", NULL, NULL);
	if (ret)
		return ret;
	img = open_image("default.bin");
	if (!img)
		return FAIL;
	data = zf_image_data(img);
	pages = zf_image_size(img) / PS;
	printf("default capture: %zu pages; %s", pages, r.out);
	for (unsigned i = 0; i <= GAP_LAST; i++)
		first_at[i] = -1;
	for (size_t i = 0; i < pages; i++) {
		const uint8_t *p = data + i * PS;
		const int k = pattern_index((const uint64_t *)(const void *)p);

		if (k >= 0 && first_at[k] < 0) {
			first_at[k] = (long)i;
			found++;
		}
		if (zf_same_filled(p, PS, &v)) {
			if (v)
				same++;
			else
				zero++;
			if (v >= SAME_VALUE(0) && v < SAME_VALUE(NSAME))
				known_same++;
		}
	}
	if (found != GAP_LAST + 1)
		fail("%u of %u patterned pages found in the image", found, GAP_LAST + 1);
	if (first_at[GAP_FIRST] >= 0 && first_at[GAP_LAST] != first_at[GAP_FIRST] + 1)
		fail("untouched pages dumped: the gap's last page at %ld, its first at %ld",
		     first_at[GAP_LAST], first_at[GAP_FIRST]);
	if (known_same < NSAME)
		fail("%" PRIu64 " of the %u same-filled pages found", known_same, NSAME);
	if (json_u64(r.out, "pages") != pages || json_u64(r.out, "bytes") != pages * PS)
		fail("--json pages/bytes do not match the image (%zu pages)", pages);
	if (json_u64(r.out, "zero_pages") != zero || zero < NZERO)
		fail("zero_pages %" PRIu64 ", image has %" PRIu64 ", child wrote %u",
		     json_u64(r.out, "zero_pages"), zero, NZERO);
	if (json_u64(r.out, "same_filled_pages") != same || same < NSAME)
		fail("same_filled_pages %" PRIu64 ", image has %" PRIu64 ", child wrote %u",
		     json_u64(r.out, "same_filled_pages"), same, NSAME);
	if (json_u64(r.out, "eligible_pages") != pages || json_u64(r.out, "unreadable_pages"))
		fail("eligible_pages %" PRIu64 " / unreadable_pages %" PRIu64 " (want %zu / 0)",
		     json_u64(r.out, "eligible_pages"), json_u64(r.out, "unreadable_pages"), pages);
	if (json_u64(r.out, "mappings") == UINT64_MAX || json_u64(r.out, "pid") != (uint64_t)target)
		fail("--json lacks mappings or pid: %s", r.out);
	/* The shape of the other commands' JSON: one line, "bench" first, no spaces. */
	if (strncmp(r.out, "{\"bench\":\"capture\",\"pid\":", 25) || strstr(r.out, "\": ") ||
	    strstr(r.out, ", \"") || strchr(r.out, '\n') != r.out + strlen(r.out) - 1)
		fail("--json is not one line of {\"bench\":\"capture\",\"pid\":...}: %s", r.out);
	*raw_out = img;
	return 0;
}

static size_t first_difference(const void *a, const void *b, size_t len)
{
	const uint8_t *x = a, *y = b;
	size_t i = 0;

	while (i < len && x[i] == y[i])
		i++;
	return i;
}

/* .zst output: compressed on disk, the same pages once read back. */
static int test_zst(const zf_image *raw)
{
	static const uint8_t magic[4] = { 0x28, 0xb5, 0x2f, 0xfd };
	uint8_t head[4] = { 0 };
	char path[300];
	struct result r;
	struct stat st;
	zf_image *img;
	int fd, ret;

	ret = capture(&r, "img.zst", "--level", "3");
	if (ret)
		return ret;
	image_path(path, sizeof(path), "img.zst");
	fd = open(path, O_RDONLY);
	if (fd < 0 || read(fd, head, 4) != 4 || memcmp(head, magic, 4) != 0 || fstat(fd, &st))
		fail("%s is not a zstd file", path);
	else if ((size_t)st.st_size >= zf_image_size(raw) ||
		 json_u64(r.out, "file_bytes") != (uint64_t)st.st_size)
		fail("%s: %lld bytes for %zu raw (file_bytes %" PRIu64 ")", path,
		     (long long)st.st_size, zf_image_size(raw), json_u64(r.out, "file_bytes"));
	if (fd >= 0)
		close(fd);
	img = open_image("img.zst");
	if (!img)
		return FAIL;
	/* The child sleeps with THP off: its memory, and so the image, must not change. */
	if (zf_image_size(img) != zf_image_size(raw))
		fail(".zst image has %zu bytes, the raw one %zu", zf_image_size(img),
		     zf_image_size(raw));
	else if (memcmp(zf_image_data(img), zf_image_data(raw), zf_image_size(raw)) != 0)
		fail(".zst image differs from the raw one at byte %zu",
		     first_difference(zf_image_data(img), zf_image_data(raw), zf_image_size(raw)));
	zf_image_close(img);
	return 0;
}

/* --max: at most max bytes, runs of 512 pages starting at eligible page i * E / K. */
static int test_max(const zf_image *raw)
{
	static const struct {
		const char *max;
		size_t pages;
	} cases[] = { { "100k", 25 }, { "2m", 512 }, { "3m", 512 }, { "4m", 1024 } };
	const size_t e = zf_image_size(raw) / PS;
	const uint8_t *all = zf_image_data(raw);

	if (e <= 1024) {
		fail("the child has only %zu eligible pages; the --max cases need more", e);
		return FAIL;
	}
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const size_t k = cases[c].pages < 512 ? 1 : cases[c].pages / 512;
		const size_t chunk = cases[c].pages / k;
		char name[32];
		struct result r;
		zf_image *img;
		int ret;

		snprintf(name, sizeof(name), "max%s.bin", cases[c].max);
		ret = capture(&r, name, "--max", cases[c].max);
		if (ret)
			return ret;
		img = open_image(name);
		if (!img)
			return FAIL;
		if (zf_image_size(img) != cases[c].pages * PS) {
			fail("--max %s: %zu bytes, want %zu", cases[c].max, zf_image_size(img),
			     cases[c].pages * PS);
		} else {
			for (size_t i = 0; i < k; i++) {
				const size_t s = i * (e / k) + i * (e % k) / k;

				if (memcmp((const uint8_t *)zf_image_data(img) + i * chunk * PS,
					   all + s * PS, chunk * PS) != 0)
					fail("--max %s: run %zu is not eligible pages %zu..%zu",
					     cases[c].max, i, s, s + chunk - 1);
			}
		}
		zf_image_close(img);
	}
	return 0;
}

/* Bad PIDs are usage errors (exit 2) with a message, and write nothing. */
static void test_bad_pid(void)
{
	char path[300], pid[16];
	const char *args[] = { "capture", pid, "-o", path, NULL };
	struct result r;
	pid_t gone = fork();

	if (gone == 0)
		_exit(0);
	waitpid(gone, NULL, 0);
	snprintf(pid, sizeof(pid), "%d", (int)gone);
	image_path(path, sizeof(path), "nopid.bin");
	run(&r, 0, args);
	if (r.status != 2 || !strstr(r.err, "no such process"))
		fail("capture of exited pid %d: exit %d, stderr '%s'", (int)gone, r.status, r.err);
	snprintf(pid, sizeof(pid), "12x");
	run(&r, 0, args);
	if (r.status != 2 || !strstr(r.err, "invalid PID"))
		fail("capture of pid '12x': exit %d, stderr '%s'", r.status, r.err);
	if (access(path, F_OK) == 0)
		fail("%s exists after a failed capture", path);
}

/* A write error (RLIMIT_FSIZE) fails the capture; no file, no stopped process remain. */
static void test_write_error(const char *name)
{
	char sub[300], path[400], pid[16];
	/* Level 1: the first 2 MiB of random pages already exceeds the limit. */
	const char *args[] = { "capture", pid, "-o", path, "--stop", NULL, NULL, NULL };
	struct result r;
	int n;

	snprintf(sub, sizeof(sub), "%s/fail", dir);
	mkdir(sub, 0700);
	snprintf(path, sizeof(path), "%s/%s", sub, name);
	snprintf(pid, sizeof(pid), "%d", (int)target);
	if (strstr(name, ".zst")) {
		args[5] = "--level";
		args[6] = "1";
	}
	run(&r, (rlim_t)64 * 1024, args);
	if (r.status != 1 || !strstr(r.err, "write failed"))
		fail("capture to %s over RLIMIT_FSIZE: exit %d, stderr '%s'", name, r.status,
		     r.err);
	n = count_entries(sub);
	if (n != 0)
		fail("%d files left in %s after a failed capture", n, sub);
	if (proc_state(target) == 'T')
		fail("the target was left stopped after a failed capture");
	rmdir(sub);
}

/* Whether this process may read a child's memory at all; the capture needs the same. */
static int can_read_child(uintptr_t addr)
{
	char path[64];
	uint64_t word = 0;
	int fd, ok;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)target);
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		printf("SKIP: %s: %s\n", path, strerror(errno));
		return 0;
	}
	ok = pread(fd, &word, sizeof(word), (off_t)addr) == sizeof(word) && word == cookie;
	if (!ok)
		printf("SKIP: cannot read the child's memory through %s\n", path);
	close(fd);
	return ok;
}

static void remove_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		char path[600];

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR");
	zf_image *raw = NULL;
	int ret = PASS, pipefd[2];
	uintptr_t addr = 0;

	if (argc == 4 && !strcmp(argv[1], "--target")) {
		cookie = strtoull(argv[3], NULL, 0);
		child_main(atoi(argv[2]));
	}
	if (argc != 2) {
		fprintf(stderr, "usage: %s PATH_TO_ZFOLIO\n", argv[0]);
		return FAIL;
	}
	zfolio = argv[1];
	if (access(zfolio, X_OK)) {
		fprintf(stderr, "%s: %s\n", zfolio, strerror(errno));
		return FAIL;
	}
	if (access("/proc/self/mem", R_OK) || access("/proc/self/pagemap", R_OK)) {
		printf("SKIP: /proc/self/mem or /proc/self/pagemap not readable\n");
		return SKIP;
	}
	cookie = splitmix64((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32)) & ~0xffffffull;
	printf("cookie %#" PRIx64 "\n", cookie);
	snprintf(dir, sizeof(dir), "%s/zf_capture_test.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return FAIL;
	}
	if (pipe(pipefd)) {
		perror("pipe");
		ret = FAIL;
		goto out;
	}
	fflush(stdout);
	target = fork();
	if (target == 0) {
		char fd_arg[16], cookie_arg[32];

		close(pipefd[0]);
		snprintf(fd_arg, sizeof(fd_arg), "%d", pipefd[1]);
		snprintf(cookie_arg, sizeof(cookie_arg), "%#" PRIx64, cookie);
		setenv("GLIBC_TUNABLES", "glibc.pthread.rseq=0", 1);
		execl("/proc/self/exe", argv[0], "--target", fd_arg, cookie_arg, (char *)NULL);
		_exit(127);
	}
	close(pipefd[1]);
	if (target < 0 || read(pipefd[0], &addr, sizeof(addr)) != sizeof(addr)) {
		fail("the target child did not start");
		close(pipefd[0]);
		ret = FAIL;
		goto out;
	}
	close(pipefd[0]);
	/*
	 * Captures compare byte for byte: wait until the child sleeps in pause(). Between its
	 * write() and there it still runs, and its stack changes (a loaded machine caught it
	 * so: 1 run in 15 saw the .zst image differ from the raw one near the end, the stack).
	 */
	for (int tries = 0; proc_state(target) != 'S'; tries++) {
		if (tries == 5000 * (SANITIZED ? 4 : 1)) {
			fail("the target child did not go to sleep in pause() within %d ms", tries);
			ret = FAIL;
			goto out;
		}
		usleep(1000);
	}
	if (!can_read_child(addr)) {
		ret = SKIP;
		goto out;
	}

	ret = test_default(&raw);
	if (!ret)
		ret = test_zst(raw);
	if (!ret)
		ret = test_max(raw);
	if (!ret) {
		test_bad_pid();
		test_write_error("img.bin");
		test_write_error("img.zst");
	}
	if (ret == PASS && failures)
		ret = FAIL;
out:
	zf_image_close(raw);
	if (target > 0) {
		kill(target, SIGKILL);
		waitpid(target, NULL, 0);
	}
	remove_dir();
	printf("%s\n", ret == PASS ? "PASS" : ret == SKIP ? "SKIP" : "FAIL");
	return ret;
}
