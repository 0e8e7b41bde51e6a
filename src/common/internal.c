/*
 * internal.c - which threads are zfolio's own while they read a region's memory.
 *
 * An eviction reads the units it stores (in the evicting thread, or on the store's
 * engines). If the program dropped one of those pages meanwhile (madvise), the read
 * faults; the region must then answer it at once with zeros - waiting would wait for the
 * eviction the reader is part of - while a fault of the program's own threads on the
 * same unit waits. So engine threads (and a region's reclaim thread) are registered for
 * their whole life, from their creation, and a thread of the program's that evicts
 * (zf_region_pageout()) for the time it evicts; faults are told apart by thread id (a
 * fault-service thread reads it from the fault message) or by the thread-local mark (a
 * SIGBUS handler runs in the faulting thread).
 *
 * A registration is a node in a list that only grows: a thread takes a free node (tid
 * 0), or allocates one and pushes it, and gives it back (tid 0) when it leaves. Nodes are
 * never freed, so a reader walks the list without a lock and without fear of a node going
 * away; the list is as long as the most threads ever registered at once (the engines,
 * a reclaim thread per region with a limit, the program's threads evicting at once),
 * not as long as a fixed table. internal_thread_is() runs on the fault path, once per
 * fault message: a walk of those few nodes with plain loads, no lock, no allocation -
 * less than the scan of 256 fixed slots it replaces.
 *
 * A registration that cannot be made (no memory for a node) is an error the caller
 * sees: -ENOMEM from internal_thread_enter(), ENOMEM from a registered thread's
 * creation. Running unregistered instead would deadlock: the thread would wait, on a
 * fault, for the eviction it is part of.
 *
 * And internal_thread_create(): zfolio's threads block every signal, so that the
 * program's signals are delivered to the program's threads.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"

#define TID_RESERVED (-1) /* taken by a creator for a thread that has no tid yet */

struct internal_thread {
	_Atomic int32_t tid; /* 0: free */
	struct internal_thread *next; /* set before the node is published, never changed */
	/* A registered thread's start (internal_thread_create_registered()). */
	void *(*fn)(void *);
	void *arg;
};

static _Atomic(struct internal_thread *) internal_head;
static __thread struct internal_thread *internal_me;

/* Takes a node for tid (or TID_RESERVED): a free one, or a new one; NULL without memory. */
static struct internal_thread *node_take(int32_t tid)
{
	struct internal_thread *n = atomic_load_explicit(&internal_head, memory_order_acquire);

	for (; n; n = n->next) {
		int32_t none = 0;

		if (atomic_load_explicit(&n->tid, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong(&n->tid, &none, tid))
			return n;
	}
	n = malloc(sizeof(*n));
	if (!n)
		return NULL;
	atomic_init(&n->tid, tid);
	n->fn = NULL;
	n->arg = NULL;
	n->next = atomic_load_explicit(&internal_head, memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(&internal_head, &n->next, n,
						      memory_order_release, memory_order_relaxed))
		;
	return n;
}

static void node_give_back(struct internal_thread *n)
{
	atomic_store(&n->tid, 0);
}

int internal_thread_enter(void)
{
	if (internal_me)
		return 0;
	internal_me = node_take((int32_t)syscall(SYS_gettid));
	return internal_me ? 0 : -ENOMEM;
}

void internal_thread_leave(void)
{
	if (!internal_me)
		return;
	node_give_back(internal_me);
	internal_me = NULL;
}

int internal_thread_is_me(void)
{
	return internal_me != NULL;
}

int internal_thread_is(int32_t tid)
{
	for (const struct internal_thread *n =
		     atomic_load_explicit(&internal_head, memory_order_acquire);
	     n; n = n->next)
		if (atomic_load_explicit(&n->tid, memory_order_relaxed) == tid)
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
	 * program's process-directed signals go to its own threads (docs/region.md, failure
	 * modes, row 6). Not the synchronous ones: an engine or an evictor reading region
	 * memory in SIGBUS mode takes its fault as a SIGBUS, and a blocked one kills the
	 * process.
	 */
	sigfillset(&all);
	internal_unblock_sync(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(thread, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ret;
}

/* A registered thread: its tid in its node before it runs fn, the node given back after. */
static void *registered_main(void *arg)
{
	struct internal_thread *n = arg;
	void *ret;

	internal_me = n;
	atomic_store(&n->tid, (int32_t)syscall(SYS_gettid));
	ret = n->fn(n->arg);
	internal_me = NULL;
	node_give_back(n);
	return ret;
}

int internal_thread_create_registered(pthread_t *thread, void *(*fn)(void *), void *arg)
{
	struct internal_thread *n = node_take(TID_RESERVED);
	int ret;

	if (!n)
		return ENOMEM;
	n->fn = fn;
	n->arg = arg;
	ret = internal_thread_create(thread, registered_main, n);
	if (ret)
		node_give_back(n);
	return ret;
}
