/*
 * internal.c - which threads are zfolio's own while they read a region's memory.
 *
 * An eviction reads the units it stores (in the evicting thread, or on the store's
 * engines). If the program dropped one of those pages meanwhile (madvise), the read
 * faults; the region must then answer it at once with zeros - waiting would wait for the
 * eviction the reader is part of - while a fault of the program's own threads on the
 * same unit waits. So engine threads mark themselves for their whole life and an
 * evicting thread for the time it evicts; faults are told apart by thread id (a
 * fault-service thread reads it from the fault message) or by the thread-local mark (a
 * SIGBUS handler runs in the faulting thread).
 *
 * And internal_thread_create(): zfolio's threads block every signal, so that the
 * program's signals are delivered to the program's threads.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"

#define INTERNAL_MAX 256

static _Atomic int32_t internal_tids[INTERNAL_MAX];
static __thread int internal_slot = -1;

void internal_thread_enter(void)
{
	const int32_t tid = (int32_t)syscall(SYS_gettid);

	if (internal_slot >= 0)
		return;
	for (int i = 0; i < INTERNAL_MAX; i++) {
		int32_t none = 0;

		if (atomic_compare_exchange_strong(&internal_tids[i], &none, tid)) {
			internal_slot = i;
			return;
		}
	}
}

void internal_thread_leave(void)
{
	if (internal_slot < 0)
		return;
	atomic_store(&internal_tids[internal_slot], 0);
	internal_slot = -1;
}

int internal_thread_is_me(void)
{
	return internal_slot >= 0;
}

int internal_thread_is(int32_t tid)
{
	for (int i = 0; i < INTERNAL_MAX; i++)
		if (atomic_load_explicit(&internal_tids[i], memory_order_relaxed) == tid)
			return 1;
	return 0;
}

void internal_unblock_sync(sigset_t *set)
{
	static const int sync_signals[] = { SIGBUS, SIGSEGV, SIGFPE, SIGILL, SIGTRAP, SIGSYS };

	for (size_t i = 0; i < sizeof(sync_signals) / sizeof(sync_signals[0]); i++)
		sigdelset(set, sync_signals[i]);
}

int internal_thread_create(pthread_t *thread, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int ret;

	/*
	 * The new thread inherits the mask: every asynchronous signal blocked, so that the
	 * program's process-directed signals go to its own threads (UFFD-PITFALLS row 6).
	 * Not the synchronous ones: an engine or an evictor reading region memory in SIGBUS
	 * mode takes its fault as a SIGBUS, and a blocked one kills the process.
	 */
	sigfillset(&all);
	internal_unblock_sync(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(thread, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ret;
}
