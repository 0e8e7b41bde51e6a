/*
 * internal.c - how zfolio makes its threads: with the program's signals blocked.
 *
 * A process-directed signal goes to any thread that does not block it; the program
 * expects it in one of its own threads, not in an engine or a service thread that knows
 * nothing of its handlers' needs and whose poll() and read() it would interrupt. So
 * every zfolio thread blocks the asynchronous signals, from its creation. Not the
 * synchronous ones (SIGBUS, SIGSEGV, ...): those are raised in the thread that caused
 * them and cannot go elsewhere. An engine reads the program's buffers (a batch's jobs, a
 * folio being put), which may lie in a SIGBUS-mode region: its fault there comes as a
 * SIGBUS that the region's handler serves in that thread. Blocked, the kernel would kill
 * the process instead.
 *
 * Each zfolio thread also says it is one (common_internal): the preload runtime
 * (src/run) puts a program's allocations in regions, and keeps zfolio's own, made in
 * these threads, with the C library's malloc, where no eviction can reach them.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "common.h"

_Thread_local int common_internal __attribute__((tls_model("initial-exec")));

struct start {
	void *(*fn)(void *);
	void *arg;
};

static void *internal_start(void *p)
{
	struct start s = *(struct start *)p;

	free(p);
	common_internal = 1;
	return s.fn(s.arg);
}

void internal_unblock_sync(sigset_t *set)
{
	static const int sync_signals[] = { SIGBUS, SIGSEGV, SIGFPE, SIGILL, SIGTRAP, SIGSYS };

	for (size_t i = 0; i < ZF_ARRAY_SIZE(sync_signals); i++)
		sigdelset(set, sync_signals[i]);
}

int internal_thread_create(pthread_t *thread, void *(*fn)(void *), void *arg)
{
	struct start *s;
	sigset_t all, old;
	int ret;

	common_internal++; /* the start block: the C library's */
	s = malloc(sizeof(*s));
	common_internal--;
	if (!s)
		return ENOMEM;
	*s = (struct start){ fn, arg };
	/* The new thread inherits the mask (docs/region.md, failure modes, row 6). */
	sigfillset(&all);
	internal_unblock_sync(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(thread, NULL, internal_start, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret)
		free(s);
	return ret;
}
