/*
 * model_explore.c - the explicit-state search of model_explore.h: depth first over every
 * enabled step of every thread, visited states as 64-bit hashes, a flag on the states of
 * the current path to tell a cycle from a join, and the report of a violation: its path,
 * shortened, then replayed with each step's description.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "model_explore.h"

uint64_t mx_max_states;
const char *mx_only_kind;
unsigned mx_max_depth = 4096;
int mx_tracing;

static const char *viol_kind;
static char viol_msg[512];
static char say_buf[512];

int mx_violate(const char *kind, const char *fmt, ...)
{
	va_list ap;

	viol_kind = kind;
	va_start(ap, fmt);
	vsnprintf(viol_msg, sizeof(viol_msg), fmt, ap);
	va_end(ap);
	return MX_VIOLATION;
}

void mx_say(const char *fmt, ...)
{
	const size_t used = strlen(say_buf);
	va_list ap;

	if (!mx_tracing || used + 2 >= sizeof(say_buf))
		return;
	if (used)
		strcat(say_buf, "; ");
	va_start(ap, fmt);
	vsnprintf(say_buf + strlen(say_buf), sizeof(say_buf) - strlen(say_buf), fmt, ap);
	va_end(ap);
}

const char *mx_violation_kind(void)
{
	return viol_kind;
}

/* ---------------------------------------------------------------------------------- */
/* Visited states: open addressing over 64-bit keys; bit 0 marks a state on the path.  */
/* ---------------------------------------------------------------------------------- */

#define ON_PATH 1ull

static uint64_t *tab;
static size_t tab_mask, tab_used;

static uint64_t hash_state(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n;

	for (size_t i = 0; i < n; i += 8) {
		uint64_t w = 0;

		memcpy(&w, b + i, n - i < 8 ? n - i : 8);
		h ^= w;
		h *= 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return (h | 2) & ~ON_PATH; /* never 0 (empty), bit 0 free for the flag */
}

static uint64_t *slot_of(uint64_t key)
{
	size_t i = (size_t)(key >> 7) & tab_mask;

	while (tab[i] && (tab[i] & ~ON_PATH) != key)
		i = (i + 1) & tab_mask;
	return &tab[i];
}

static int tab_grow(void)
{
	uint64_t *old = tab;
	const size_t old_size = tab ? tab_mask + 1 : 0;
	const size_t size = old_size ? old_size * 2 : (size_t)1 << 20;

	tab = calloc(size, sizeof(*tab));
	if (!tab) {
		tab = old;
		return -1;
	}
	tab_mask = size - 1;
	for (size_t i = 0; i < old_size; i++)
		if (old[i])
			*slot_of(old[i] & ~ON_PATH) = old[i];
	free(old);
	return 0;
}

void mx_reset(void)
{
	free(tab);
	tab = NULL;
	tab_mask = tab_used = 0;
}

/* ---------------------------------------------------------------------------------- */
/* Reports                                                                            */
/* ---------------------------------------------------------------------------------- */

struct move {
	uint16_t t, c;
};

/* The end of a path that shows a violation: a step that broke an invariant, or an end. */
enum { AT_STEP, AT_END, AT_CYCLE };

static int any_enabled(const struct mx_model *m, const void *s, void *scratch)
{
	for (unsigned t = 0; t < m->threads; t++)
		for (unsigned c = 0; c < m->choices; c++) {
			memcpy(scratch, s, m->state_size);
			if (m->step(scratch, t, c) != MX_DISABLED)
				return 1;
		}
	return 0;
}

/*
 * Runs path[0..n) from init into s. Returns how many of its steps show the violation kind
 * the same way (a step breaks it: the steps up to that one; or the path ends in a bad
 * end, or, for a cycle, just runs: n), or 0 if they do not.
 */
static size_t replay(const struct mx_model *m, const void *init, const struct move *path, size_t n,
		     int how, const char *kind, void *s, void *scratch, FILE *out)
{
	memcpy(s, init, m->state_size);
	for (size_t i = 0; i < n; i++) {
		int r;

		say_buf[0] = 0;
		r = m->step(s, path[i].t, path[i].c);
		if (out)
			fprintf(out, "  %3zu %-8s %s%s%s\n", i + 1, m->thread_names[path[i].t],
				say_buf, r == MX_VIOLATION && say_buf[0] ? " -> " : "",
				r == MX_VIOLATION ? viol_msg : "");
		if (r == MX_DISABLED)
			return 0;
		if (r == MX_VIOLATION)
			return how == AT_STEP && !strcmp(viol_kind, kind) ? i + 1 : 0;
	}
	if (how == AT_CYCLE)
		return n;
	if (how != AT_END || any_enabled(m, s, scratch))
		return 0;
	return m->end_check(s) == MX_VIOLATION && !strcmp(viol_kind, kind) ? n : 0;
}

/*
 * Drops every run of steps the violation does not need: runs of 16 steps, then 8, down to
 * one, again while that helps. A path that shows the violation sooner is cut there.
 */
static size_t shorten(const struct mx_model *m, const void *init, struct move *path, size_t n,
		      int how, const char *kind, void *s, void *scratch)
{
	struct move *try = malloc(n * sizeof(*path));
	int again = 1;

	if (!try)
		return n;
	while (again) {
		again = 0;
		for (size_t len = 16; len; len /= 2)
			for (size_t i = 0; i + len <= n;) {
				size_t got;

				memcpy(try, path, i * sizeof(*path));
				memcpy(try + i, path + i + len, (n - i - len) * sizeof(*path));
				got = replay(m, init, try, n - len, how, kind, s, scratch, NULL);
				if (!got) {
					i++;
					continue;
				}
				memcpy(path, try, got * sizeof(*path));
				n = got;
				again = 1;
			}
	}
	free(try);
	return n;
}

static void report(const struct mx_model *m, const void *init, struct move *path, size_t n, int how,
		   size_t cycle_at, FILE *out)
{
	char kind[64], msg[sizeof(viol_msg)];
	void *s = malloc(m->state_size), *scratch = malloc(m->state_size);
	size_t full = n;

	if (!s || !scratch) {
		fprintf(out, "violation: %s: %s (no memory for the path)\n", viol_kind, viol_msg);
		free(s);
		free(scratch);
		return;
	}
	snprintf(kind, sizeof(kind), "%s", viol_kind);
	snprintf(msg, sizeof(msg), "%s", viol_msg);
	if (how != AT_CYCLE)
		n = shorten(m, init, path, n, how, kind, s, scratch);
	fprintf(out, "violation: %s: %s\n", kind, msg);
	if (how == AT_CYCLE)
		fprintf(out, "path (%zu steps; from step %zu on it repeats):\n", n, cycle_at + 1);
	else
		fprintf(out, "path (%zu steps, shortened from %zu):\n", n, full);
	mx_tracing = 1;
	if (replay(m, init, path, n, how, kind, s, scratch, out) != n)
		fprintf(out, "  (the replay did not end the same way: a bug of the checker)\n");
	mx_tracing = 0;
	if (how == AT_CYCLE)
		mx_violate(kind, "%s", msg);
	if (how != AT_STEP)
		fprintf(out, "  -> %s: %s\n", viol_kind, viol_msg);
	fprintf(out, "state at the end:\n");
	m->show(s, out);
	free(s);
	free(scratch);
}

/* ---------------------------------------------------------------------------------- */
/* The search                                                                         */
/* ---------------------------------------------------------------------------------- */

struct frame {
	uint64_t key;
	struct move next; /* the next step to try; the one taken, below the top */
	int enabled;
};

/* Whether the violation just found is one the search reports (mx_only_kind); else skipped. */
static int wanted(struct mx_stats *st)
{
	if (!mx_only_kind || !strcmp(mx_only_kind, viol_kind))
		return 1;
	st->skipped++;
	return 0;
}

/* A step back to a state on the path: a cycle, which no thread leaves. */
static int cycle_wanted(struct mx_stats *st)
{
	mx_violate("livelock", "a cycle of steps that can repeat forever, no thread done");
	return wanted(st);
}

/* Marks key visited (and on the path); 1 if it is new, 0 if seen, -1 without memory. */
static int visit(uint64_t key)
{
	uint64_t *slot;

	if ((tab_used + 1) * 2 > (tab ? tab_mask + 1 : 0) && tab_grow())
		return -1;
	slot = slot_of(key);
	if (*slot)
		return 0;
	*slot = key | ON_PATH;
	tab_used++;
	return 1;
}

static int search(const struct mx_model *m, const void *init, struct mx_stats *st, FILE *out)
{
	const size_t sz = m->state_size;
	const unsigned depth_max = mx_max_depth;
	struct frame *fr = calloc(depth_max + 1, sizeof(*fr));
	struct move *path = calloc(depth_max + 1, sizeof(*path));
	uint8_t *states = malloc((depth_max + 1) * sz), *next = malloc(sz);
	int ret = 0;
	unsigned d = 0;

	if (!fr || !path || !states || !next) {
		ret = -1;
		goto out;
	}
	memcpy(states, init, sz);
	fr[0].key = hash_state(init, sz);
	switch (visit(fr[0].key)) {
	case -1:
		ret = -1;
		goto out;
	case 0:
		goto out; /* explored from another initial state */
	}
	st->states++;
	for (;;) {
		struct frame *f = &fr[d];
		int r, fresh;
		uint64_t key;

		if (f->next.t >= m->threads) {
			/* Every step tried: an end, if none was enabled. */
			if (!f->enabled && m->end_check(states + d * sz) == MX_VIOLATION &&
			    wanted(st)) {
				for (unsigned i = 0; i < d; i++)
					path[i] = fr[i].next;
				report(m, init, path, d, AT_END, 0, out);
				ret = 1;
				goto out;
			}
			*slot_of(f->key) &= ~ON_PATH;
			if (!d)
				break;
			d--;
			/* The step taken from the frame below: go on with the one after it. */
			if (++fr[d].next.c == m->choices) {
				fr[d].next.c = 0;
				fr[d].next.t++;
			}
			continue;
		}
		memcpy(next, states + d * sz, sz);
		r = m->step(next, f->next.t, f->next.c);
		if (r == MX_DISABLED) {
			if (++f->next.c == m->choices) {
				f->next.c = 0;
				f->next.t++;
			}
			continue;
		}
		f->enabled = 1;
		st->transitions++;
		if (r == MX_VIOLATION && !wanted(st)) {
			if (++f->next.c == m->choices) {
				f->next.c = 0;
				f->next.t++;
			}
			continue;
		}
		if (r == MX_VIOLATION) {
			for (unsigned i = 0; i <= d; i++)
				path[i] = fr[i].next;
			report(m, init, path, d + 1, AT_STEP, 0, out);
			ret = 1;
			goto out;
		}
		key = hash_state(next, sz);
		fresh = visit(key);
		if (fresh < 0) {
			ret = -1;
			goto out;
		}
		if (!fresh) {
			if ((*slot_of(key) & ON_PATH) && cycle_wanted(st)) {
				unsigned at = 0;

				while (fr[at].key != key)
					at++;
				for (unsigned i = 0; i <= d; i++)
					path[i] = fr[i].next;
				report(m, init, path, d + 1, AT_CYCLE, at, out);
				ret = 1;
				goto out;
			}
			if (++f->next.c == m->choices) {
				f->next.c = 0;
				f->next.t++;
			}
			continue;
		}
		st->states++;
		if (mx_max_states && st->states > mx_max_states) {
			fprintf(out, "model: more than %llu states: stopped\n",
				(unsigned long long)mx_max_states);
			ret = -1;
			goto out;
		}
		if (d + 1 >= depth_max) {
			fprintf(out, "model: a path longer than %u steps: stopped\n", depth_max);
			ret = -1;
			goto out;
		}
		d++;
		if (d > st->max_depth)
			st->max_depth = d;
		memcpy(states + d * sz, next, sz);
		fr[d] = (struct frame){ .key = key };
	}
out:
	/* Leave no state flagged on the path for the next search. */
	if (tab)
		for (unsigned i = 0; i <= d && fr; i++)
			if (fr[i].key)
				*slot_of(fr[i].key) &= ~ON_PATH;
	free(fr);
	free(path);
	free(states);
	free(next);
	return ret;
}

int mx_explore(const struct mx_model *m, const void *init, size_t ninit, struct mx_stats *st,
	       FILE *out)
{
	for (size_t i = 0; i < ninit; i++) {
		const int ret = search(m, (const uint8_t *)init + i * m->state_size, st, out);

		if (ret)
			return ret;
	}
	return 0;
}
