/*
 * common.h - what every module of libzfolio shares: error-return macros, branch hints,
 * internal visibility, the logging hook, and the making of zfolio's threads.
 *
 * Error handling follows zstd and the kernel: functions return 0/positive or -errno;
 * RETURN_IF() and TRY() keep the early exits short, and longer unwinding uses
 * "goto out". Diagnostics go through common_log(), to the sink the program installs
 * with zf_set_log_fn(); without one, ZF_LOG_ERROR lines go to stderr and the rest
 * nowhere.
 */
#ifndef ZF_COMMON_H
#define ZF_COMMON_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#ifndef ZF_ADVANCED
#define ZF_ADVANCED /* the library implements the whole API */
#endif
#include "zfolio.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define ZF_MUST_CHECK __attribute__((warn_unused_result))
#define ZF_PRINTF(f, a) __attribute__((format(printf, f, a)))

#define ZF_MIN(a, b) ((a) < (b) ? (a) : (b))
#define ZF_MAX(a, b) ((a) > (b) ? (a) : (b))
#define ZF_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Returns err from the calling function when cond holds. */
#define RETURN_IF(cond, err)                                                                       \
	do {                                                                                       \
		if (unlikely(cond))                                                                \
			return (err);                                                              \
	} while (0)

/* Evaluates an int expression and returns it from the calling function when negative. */
#define TRY(expr)                                                                                  \
	do {                                                                                       \
		int try_ret_ = (expr);                                                             \
		if (unlikely(try_ret_ < 0))                                                        \
			return try_ret_;                                                           \
	} while (0)

/* Sends one formatted line to the program's log sink (without one: errors to stderr). */
void common_log(enum zf_log_level level, const char *fmt, ...) ZF_PRINTF(2, 3);

/*
 * pthread_create() of a zfolio thread, with every asynchronous signal blocked in it;
 * 0 or pthread_create()'s error number (positive).
 */
int internal_thread_create(pthread_t *thread, void *(*fn)(void *), void *arg);
/* Takes the synchronous signals (SIGBUS, SIGSEGV, ...) out of set. */
void internal_unblock_sync(sigset_t *set);
/*
 * Nonzero while the calling thread runs zfolio's own code: always in zfolio's threads,
 * and in a program's thread inside a SIGBUS-mode fault and inside the preload runtime's
 * calls into the library (src/run). The runtime keeps such a thread's allocations with
 * the C library, out of regions. Initial-exec: read with no call into the loader, whose
 * dynamic TLS lookup reads a table the C library allocated with malloc(), which under the
 * runtime may be region memory; a SIGBUS-mode fault there would recurse.
 */
extern _Thread_local int common_internal __attribute__((tls_model("initial-exec")));

#endif /* ZF_COMMON_H */
