/*
 * model_explore.h - an explicit-state model checker for small models written in C: every
 * interleaving of the model's threads, every choice they make, each state visited once.
 *
 * A model is a fixed-size state (plain bytes, compared and hashed as such: no pointers,
 * no padding) and a step function: mx_step(s, t, c) runs thread t's next atomic step with
 * choice c (a store that may refuse, a retry that may give up) and says whether it was
 * enabled. A step that finds an invariant broken reports a violation. A state in which no
 * step is enabled is an end: the model's end check says whether it is a proper one (every
 * thread done) or a deadlock. A path that comes back to a state on the search stack is a
 * cycle: the model's waits are written as blocking steps, so a cycle is a livelock.
 *
 * The search is depth first, with the visited states kept as 64-bit hashes (hash
 * compaction, as spin's -DHC: two states would have to share a hash for one to be missed;
 * with n states the chance is about n * n / 2^63, 5e-6 at seven million). A violation is
 * reported with the path
 * that leads to it, shortened by dropping every step the violation does not need, and
 * replayed with the model's own description of each step.
 */
#ifndef ZF_MODEL_EXPLORE_H
#define ZF_MODEL_EXPLORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum mx_outcome {
	MX_DISABLED = -1, /* the step cannot run in this state */
	MX_OK = 0,
	MX_VIOLATION = 1, /* it ran and broke an invariant: mx_violate() said which */
};

struct mx_model {
	size_t state_size;
	unsigned threads;
	unsigned choices; /* the most choices any step has */
	const char *const *thread_names;
	/* Thread t's next step with choice c, in place on s: an mx_outcome. */
	int (*step)(void *s, unsigned t, unsigned c);
	/* A state where no step is enabled: MX_OK if every thread is done, else MX_VIOLATION. */
	int (*end_check)(const void *s);
	/* Prints what matters of a state, for a report. */
	void (*show)(const void *s, FILE *f);
};

struct mx_stats {
	uint64_t states, transitions;
	uint64_t skipped; /* violations of other kinds than mx_only_kind, not reported */
	unsigned max_depth;
};

/*
 * Explores every state reachable from init[0..ninit) (each state_size bytes). Returns
 * 0, or 1 after printing the first violation found to out, with its path. Counts add up
 * in *st across calls; the visited states are kept across calls too (mx_reset() clears).
 */
int mx_explore(const struct mx_model *m, const void *init, size_t ninit, struct mx_stats *st,
	       FILE *out);
void mx_reset(void);

/* Limits: at most max_states states (0: none), and a path at most max_depth steps. */
extern uint64_t mx_max_states;
extern unsigned mx_max_depth;
/*
 * Set: only violations of this kind are reported; a step that breaks another invariant
 * ends its path there (counted in mx_stats.skipped), and the search goes on.
 */
extern const char *mx_only_kind;

/*
 * For the model's steps. mx_violate() names the invariant broken and says how (printf
 * style); it returns MX_VIOLATION. mx_say() describes the step being run; it costs
 * nothing but while a path is replayed for a report (mx_tracing).
 */
int mx_violate(const char *kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mx_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
extern int mx_tracing;
/* The kind of the last violation (the invariant's name), for a test that expects one. */
const char *mx_violation_kind(void);

#endif /* ZF_MODEL_EXPLORE_H */
