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
 */
#include <pthread.h>
#include <signal.h>

#include "common.h"

void internal_unblock_sync(sigset_t *set)
{
	static const int sync_signals[] = { SIGBUS, SIGSEGV, SIGFPE, SIGILL, SIGTRAP, SIGSYS };

	for (size_t i = 0; i < ZF_ARRAY_SIZE(sync_signals); i++)
		sigdelset(set, sync_signals[i]);
}

int internal_thread_create(pthread_t *thread, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int ret;

	/* The new thread inherits the mask (docs/region.md, failure modes, row 6). */
	sigfillset(&all);
	internal_unblock_sync(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(thread, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ret;
}
