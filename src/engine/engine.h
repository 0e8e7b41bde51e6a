/*
 * engine.h - the engine module's internals shared with its unit test.
 *
 * A job budget that holds the engine threads, so that a test can queue work and let the
 * engines take it job by job (queue order is then observable without timing), and the
 * number of codec contexts made (per-thread context reuse); the job runner itself, for
 * the store's puts too small to hand to the engines; and the flush that lets the store's
 * completions copy a unit a job later. See engine.c for the design.
 */
#ifndef ZF_ENGINE_H
#define ZF_ENGINE_H

#include <stdbool.h>

#include "../common/common.h"

/*
 * Lets the engine threads take at most budget more jobs between them (< 0: no limit, the
 * default; 0 holds them: queued jobs then run only in their waiters). A budget that is
 * not 0 wakes every sleeping engine.
 */
void engine_set_budget(zf_engines *engines, long budget);

/* What is left of the budget (< 0: no limit). */
long engine_budget(zf_engines *engines);

/* Codec contexts made so far, by the engine threads and by the batches' waiters. */
uint64_t engine_contexts_created(zf_engines *engines);

/*
 * Runs a valid job (codec, buffers and op checked) with ctx, a context for its codec,
 * in the calling thread, as an engine runs it: status, the checksum when asked, then its
 * completion. Returns the status it ends with. For callers that decide a batch is too small to hand over.
 */
int engine_job_run(zf_codec_ctx *ctx, zf_job *job);

/*
 * For the store's puts, which copy a unit into the pool a job later (write behind): with
 * a flush set, every thread that runs jobs of b calls it before they count as finished
 * (an engine after each run of jobs it claimed, a waiter after each job), and the output
 * of a ZF_JOB_ENGINE_DST job stays where its completion found it until the same thread
 * has run its next job (the thread's buffer has two halves, used in turn).
 */
void engine_batch_set_flush(zf_batch *b, void (*flush)(void));
/* Sets or clears the batch's ZF_BATCH_NO_HELP for its next submit (none in flight). */
void engine_batch_set_help(zf_batch *b, bool help);

/*
 * In a child after fork(), with no batch in flight at the fork (the caller made sure):
 * the engines' lock made anew and their threads started again (threads do not survive
 * fork()), once per process. 0, or pthread_create()'s error (negative); the engines that
 * started run.
 */
int engine_fork_child(zf_engines *engines);

#endif /* ZF_ENGINE_H */
