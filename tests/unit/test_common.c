/*
 * test_common.c - src/common's log hook and its options and stats conventions.
 *
 * The log hook (error.c): without a sink, an error goes to stderr as one line prefixed
 * "zfolio: ", and a warning nowhere; with a sink, the sink gets both and stderr nothing;
 * zf_set_log_fn(NULL) restores the default.
 *
 * Options and stats structs (options.c): a struct of a size the options had in a
 * release is taken, with defaults for the fields it lacks; any other smaller size is
 * refused, never read in part; a larger one is taken while its unknown tail is zero
 * (-E2BIG once it is not); stats go out in the caller's size, zero-filled past ours.
 *
 * zfolio's threads (internal.c): a thread made by internal_thread_create() blocks the
 * asynchronous signals and none of the synchronous ones, whatever the creator's mask,
 * and the creator's mask is left as it was.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include <cmocka.h>

#include "zfolio.h"
#include "../../src/common/common.h"
#include "../../src/common/options.h"

/* Runs fn with stderr sent to a pipe; returns what was written there. */
static char *capture_stderr(void (*fn)(void))
{
	static char out[1024];
	int p[2], saved;
	ssize_t got, len = 0;

	assert_int_equal(pipe(p), 0);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_true(dup2(p[1], STDERR_FILENO) >= 0);
	fn();
	fflush(stderr);
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	close(p[1]);
	while ((got = read(p[0], out + len, sizeof(out) - 1 - (size_t)len)) > 0)
		len += got;
	close(p[0]);
	out[len] = '\0';
	return out;
}

static void log_two(void)
{
	common_log(ZF_LOG_WARN, "a warning %d", 1);
	common_log(ZF_LOG_ERROR, "an error %d", 2);
}

struct logged {
	int n;
	enum zf_log_level level[2];
	char msg[2][64];
};

static void sink(enum zf_log_level level, const char *msg, void *arg)
{
	struct logged *l = arg;

	if (l->n < 2) {
		l->level[l->n] = level;
		snprintf(l->msg[l->n], sizeof(l->msg[0]), "%s", msg);
	}
	l->n++;
}

/* An options struct that grew: v1 had a and b, v2 (this library's) added c. */
struct opts_v2 {
	size_t struct_size;
	uint32_t a, b;
	uint64_t c;
};
static const size_t opts_sizes[] = { offsetof(struct opts_v2, c), sizeof(struct opts_v2) };

static int load(struct opts_v2 *dst, const void *src)
{
	*dst = (struct opts_v2){ .struct_size = sizeof(*dst), .a = 1, .b = 2, .c = 3 };
	return options_load(dst, sizeof(*dst), src, opts_sizes, 2);
}

static void test_options_sizes(void **state)
{
	struct {
		struct opts_v2 o;
		uint64_t newer;
	} big = { .o = { sizeof(big), 7, 8, 9 }, .newer = 0 };
	struct opts_v2 o, in = { sizeof(in), 4, 5, 6 };

	(void)state;
	assert_int_equal(load(&o, NULL), 0); /* defaults */
	assert_true(o.a == 1 && o.b == 2 && o.c == 3 && o.struct_size == sizeof(o));
	assert_int_equal(load(&o, &in), 0);
	assert_true(o.a == 4 && o.b == 5 && o.c == 6);
	/* A v1 caller: c keeps its default. */
	in.struct_size = offsetof(struct opts_v2, c);
	assert_int_equal(load(&o, &in), 0);
	assert_true(o.a == 4 && o.b == 5 && o.c == 3 && o.struct_size == sizeof(o));
	/* Sizes the struct never had: nothing taken. */
	for (size_t bad = 0; bad < sizeof(in); bad++) {
		if (bad == offsetof(struct opts_v2, c))
			continue;
		in.struct_size = bad;
		assert_int_equal(load(&o, &in), -EINVAL);
		assert_true(o.a == 1 && o.b == 2 && o.c == 3);
	}
	/* A v3 caller whose new option is left alone, then set. */
	assert_int_equal(load(&o, &big), 0);
	assert_true(o.a == 7 && o.b == 8 && o.c == 9 && o.struct_size == sizeof(o));
	big.newer = 1;
	assert_int_equal(load(&o, &big), -E2BIG);
	/* A garbage size is refused before anything past the struct is read. */
	in.struct_size = SIZE_MAX;
	assert_int_equal(load(&o, &in), -EINVAL);
	in.struct_size = 4097;
	assert_int_equal(load(&o, &in), -EINVAL);
}

static void test_stats_copy_out(void **state)
{
	const uint64_t ours[3] = { 1, 2, 3 };
	uint64_t theirs[4] = { 9, 9, 9, 9 };

	(void)state;
	assert_int_equal(struct_copy_out(theirs, 2 * sizeof(uint64_t), ours, sizeof(ours)), 0);
	assert_true(theirs[0] == 1 && theirs[1] == 2 && theirs[2] == 9); /* an older caller */
	assert_int_equal(struct_copy_out(theirs, sizeof(theirs), ours, sizeof(ours)), 0);
	assert_true(theirs[2] == 3 && theirs[3] == 0); /* a newer one */
	assert_int_equal(struct_copy_out(theirs, 0, ours, sizeof(ours)), -EINVAL);
	assert_int_equal(struct_copy_out(NULL, sizeof(theirs), ours, sizeof(ours)), -EINVAL);
}

static void test_log_default_stderr(void **state)
{
	(void)state;
	zf_set_log_fn(NULL, NULL);
	assert_string_equal(capture_stderr(log_two), "zfolio: an error 2\n");
}

static void test_log_sink(void **state)
{
	struct logged l = { 0 };

	(void)state;
	zf_set_log_fn(sink, &l);
	assert_string_equal(capture_stderr(log_two), "");
	zf_set_log_fn(NULL, NULL);
	assert_int_equal(l.n, 2);
	assert_int_equal(l.level[0], ZF_LOG_WARN);
	assert_string_equal(l.msg[0], "a warning 1");
	assert_int_equal(l.level[1], ZF_LOG_ERROR);
	assert_string_equal(l.msg[1], "an error 2");
	/* The default again. */
	assert_string_equal(capture_stderr(log_two), "zfolio: an error 2\n");
}

static void *mask_main(void *arg)
{
	pthread_sigmask(SIG_BLOCK, NULL, arg);
	return NULL;
}

/* The mask of a thread internal_thread_create() makes while the creator has mine. */
static void thread_mask(const sigset_t *mine, sigset_t *theirs)
{
	sigset_t old, before, after;
	pthread_t t;

	/* What was set: the kernel and libc keep a few signals out of any mask. */
	assert_int_equal(pthread_sigmask(SIG_SETMASK, mine, &old), 0);
	pthread_sigmask(SIG_BLOCK, NULL, &before);
	assert_int_equal(internal_thread_create(&t, mask_main, theirs), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	pthread_sigmask(SIG_BLOCK, NULL, &after);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	for (int sig = 1; sig <= SIGRTMAX; sig++)
		assert_int_equal(sigismember(&after, sig), sigismember(&before, sig));
}

static void test_thread_signal_mask(void **state)
{
	static const int async[] = { SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGALRM, SIGPROF, SIGCHLD };
	static const int sync[] = { SIGBUS, SIGSEGV, SIGFPE, SIGILL, SIGTRAP, SIGSYS };
	sigset_t none, all, theirs;

	(void)state;
	sigemptyset(&none);
	sigfillset(&all);
	for (int i = 0; i < 2; i++) {
		thread_mask(i ? &all : &none, &theirs);
		for (size_t j = 0; j < ZF_ARRAY_SIZE(async); j++)
			assert_true(sigismember(&theirs, async[j]));
		assert_true(sigismember(&theirs, SIGRTMIN));
		for (size_t j = 0; j < ZF_ARRAY_SIZE(sync); j++)
			assert_false(sigismember(&theirs, sync[j]));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_options_sizes),	   cmocka_unit_test(test_stats_copy_out),
		cmocka_unit_test(test_log_default_stderr), cmocka_unit_test(test_log_sink),
		cmocka_unit_test(test_thread_signal_mask),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
