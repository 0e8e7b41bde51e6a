/*
 * run_signal.c - the program's sigaction() and signal() for SIGBUS, interposed.
 *
 * In SIGBUS mode (ZFOLIO_MODE=sigbus) zfolio serves the program's faults in a SIGBUS
 * handler of its own, which must stay installed: a program that sets its own (Redis does,
 * for its crash report; so do JVMs and Python's faulthandler) would otherwise take the
 * next fault in its heap for a crash. Its SIGBUS disposition goes to zf_sigbus_action()
 * instead, which makes it the one zfolio's handler chains to for faults outside every
 * region, and answers with the one it had set. Before zfolio's handler is installed, and
 * in thread mode, that is the kernel's sigaction() itself. Every other signal, and
 * zfolio's own calls (common_internal), go straight to the C library.
 */
#include <signal.h>
#include <string.h>

#include "run_internal.h"

/* The C library's: its exported names past ours. */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *oldact);
/* signal()'s old name, which <signal.h> declares only for some standards. */
sighandler_t bsd_signal(int sig, sighandler_t handler);

RUN_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *oldact)
{
	int ret;

	if (sig != SIGBUS || common_internal)
		return __sigaction(sig, act, oldact);
	ret = zf_sigbus_action(act, oldact);
	if (ret) {
		errno = -ret;
		return -1;
	}
	return 0;
}

/* signal()'s BSD semantics, as the C library's: the handler stays, calls restart. */
static sighandler_t set_handler(int sig, sighandler_t handler)
{
	struct sigaction act = { .sa_handler = handler, .sa_flags = SA_RESTART }, old;

	sigemptyset(&act.sa_mask);
	sigaddset(&act.sa_mask, sig);
	if (sigaction(sig, &act, &old))
		return SIG_ERR;
	return old.sa_handler;
}

RUN_EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
	return set_handler(sig, handler);
}

RUN_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler)
{
	return set_handler(sig, handler);
}
