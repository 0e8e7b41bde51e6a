/*
 * test_common.c - src/common's registry of zfolio's own threads and its log hook.
 *
 * The registry (internal.c): a registration that cannot be made is an error, never a
 * silent miss (malloc made to fail: -ENOMEM from internal_thread_enter(), ENOMEM from a
 * registered thread's creation, and nothing registered); more threads than the old
 * fixed table of 256, registered at creation or by internal_thread_enter(), are each
 * recognised by id while they live and forgotten after; the calling thread's mark.
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
 * malloc is wrapped (-Wl,--wrap=malloc) so that a test can make the library's fail.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "zfolio.h"
#include "../../src/common/common.h"
#include "../../src/common/options.h"

#define NTHREADS 300 /* more than the fixed table of 256 that internal.c had */

static atomic_bool malloc_fails;

void *__real_malloc(size_t size);
void *__wrap_malloc(size_t size);

void *__wrap_malloc(size_t size)
{
	if (atomic_load(&malloc_fails))
		return NULL;
	return __real_malloc(size);
}

static int32_t my_tid(void)
{
	return (int32_t)syscall(SYS_gettid);
}

/* Threads that report their id and mark, then wait until the main thread lets them go. */
struct crowd {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned started;
	int go;
	int enter; /* each thread registers itself (internal_thread_enter()) */
	int32_t tid[NTHREADS];
	int is_me[NTHREADS];
	int enter_ret[NTHREADS];
};

struct member {
	struct crowd *c;
	unsigned i;
};

static void *member_main(void *arg)
{
	const struct member *m = arg;
	struct crowd *c = m->c;
	const unsigned i = m->i;

	c->tid[i] = my_tid();
	if (c->enter)
		c->enter_ret[i] = internal_thread_enter();
	c->is_me[i] = internal_thread_is_me();
	pthread_mutex_lock(&c->lock);
	c->started++;
	pthread_cond_broadcast(&c->cond);
	while (!c->go)
		pthread_cond_wait(&c->cond, &c->lock);
	pthread_mutex_unlock(&c->lock);
	if (c->enter && !c->enter_ret[i])
		internal_thread_leave();
	return NULL;
}

/* Starts NTHREADS members, checks each is recognised while all live, then lets them go. */
static void crowd_run(int enter)
{
	static struct crowd c;
	static struct member m[NTHREADS];
	static pthread_t t[NTHREADS];

	memset(&c, 0, sizeof(c));
	pthread_mutex_init(&c.lock, NULL);
	pthread_cond_init(&c.cond, NULL);
	c.enter = enter;
	for (unsigned i = 0; i < NTHREADS; i++) {
		m[i] = (struct member){ &c, i };
		if (enter)
			assert_int_equal(pthread_create(&t[i], NULL, member_main, &m[i]), 0);
		else
			assert_int_equal(
				internal_thread_create_registered(&t[i], member_main, &m[i]), 0);
	}
	pthread_mutex_lock(&c.lock);
	while (c.started < NTHREADS)
		pthread_cond_wait(&c.cond, &c.lock);
	pthread_mutex_unlock(&c.lock);

	for (unsigned i = 0; i < NTHREADS; i++) {
		assert_int_equal(c.enter_ret[i], 0);
		assert_true(c.is_me[i]);
		assert_true(internal_thread_is(c.tid[i]));
	}
	assert_false(internal_thread_is_me());
	assert_false(internal_thread_is(my_tid()));

	pthread_mutex_lock(&c.lock);
	c.go = 1;
	pthread_cond_broadcast(&c.cond);
	pthread_mutex_unlock(&c.lock);
	for (unsigned i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	/* Gone: no thread of this process has those ids any more. */
	for (unsigned i = 0; i < NTHREADS; i++)
		assert_false(internal_thread_is(c.tid[i]));
	pthread_cond_destroy(&c.cond);
	pthread_mutex_destroy(&c.lock);
}

static void *never_run(void *arg)
{
	*(int *)arg = 1;
	return NULL;
}

/* First in the group: the registry is empty, so a registration has to allocate. */
static void test_registration_without_memory(void **state)
{
	pthread_t t;
	int ran = 0, ret;

	(void)state;
	atomic_store(&malloc_fails, true);
	ret = internal_thread_enter();
	atomic_store(&malloc_fails, false);
	assert_int_equal(ret, -ENOMEM);
	assert_false(internal_thread_is_me());
	assert_false(internal_thread_is(my_tid()));

	atomic_store(&malloc_fails, true);
	ret = internal_thread_create_registered(&t, never_run, &ran);
	atomic_store(&malloc_fails, false);
	assert_int_equal(ret, ENOMEM);
	assert_int_equal(ran, 0);
}

static void test_enter_leave(void **state)
{
	(void)state;
	assert_int_equal(internal_thread_enter(), 0);
	assert_true(internal_thread_is_me());
	assert_true(internal_thread_is(my_tid()));
	assert_int_equal(internal_thread_enter(), 0); /* already: nothing more */
	internal_thread_leave();
	assert_false(internal_thread_is_me());
	assert_false(internal_thread_is(my_tid()));
	internal_thread_leave(); /* not registered: nothing */
	assert_false(internal_thread_is(my_tid()));
}

static void test_many_registered_threads(void **state)
{
	(void)state;
	crowd_run(0);
	crowd_run(0); /* the nodes given back are taken again */
}

static void test_many_entered_threads(void **state)
{
	(void)state;
	crowd_run(1);
}

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_registration_without_memory),
		cmocka_unit_test(test_enter_leave),
		cmocka_unit_test(test_many_registered_threads),
		cmocka_unit_test(test_many_entered_threads),
		cmocka_unit_test(test_options_sizes),
		cmocka_unit_test(test_stats_copy_out),
		cmocka_unit_test(test_log_default_stderr),
		cmocka_unit_test(test_log_sink),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
