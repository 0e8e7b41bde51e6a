/*
 * region_order.c - where each event read goes in the order in which the program changed
 * its memory layout (the queue's qseq, region_events.c).
 *
 * The kernel changes the layout first and sends a call's events after, each once the one
 * before is read, with no lock held between: the order in which events are read is the
 * order in which threads got to send them, not always the order of their changes. Events
 * are still handled in the order read, but a page placed where its memory is now
 * (region_follow()) takes only the events whose change came after the one it starts
 * from, in the order of their changes. Two ways the orders differ, both when another
 * thread changes the layout in between:
 *
 * Late UNMAPs. An mremap() that moves memory sends its REMAP, then an UNMAP of the range
 * it left (and, shrinking, one of the part it cut off). Meanwhile another thread may map
 * memory where this one left and move region memory there: its REMAP is read before the
 * late UNMAP, which would seem to unmap what it moved in (the soak test: zeros at the away
 * address). An UNMAP is taken for a late one when it is the range a REMAP read before
 * left, or else starts where that range ends, while that REMAP's own UNMAP has not come
 * (r->tails; a move with MREMAP_DONTUNMAP sends none, and its record goes when RG_TAILS
 * newer ones push it out): it gets its REMAP's place.
 *
 * Early events. A thread changes the layout and is preempted before its first event is
 * sent (or its mremap() sends the UNMAP of its destination first and is preempted once
 * that is read); another thread maps memory where it left, moves region memory there,
 * and that REMAP is read first. The later-read event then seemed to move or unmap the
 * memory that came after it (the soak test: zeros at the away address, the data moved
 * on with the memory that had left). Such a REMAP lands on memory that, as the events
 * read say, is still registered with us, which cannot be: a move onto memory of ours
 * unmaps it first, with an UNMAP sent before the REMAP. So some event not read yet took
 * that memory away before. The region keeps where its memory is as the events read say
 * (r->spans: the region itself, and what moved out of it), marks the part a REMAP lands
 * on stale, and gives the event read later that takes a stale part away (a REMAP from it,
 * an UNMAP of it) a place just before that REMAP's. An event changes only the spans
 * older than itself: the early one leaves the memory that came after it alone.
 *
 * What is left (docs/region.md, "The order of events"): a chain of such races, where a
 * third thread moves on, before the early event is read, the memory that landed on the
 * stale part; a record lost to memory (spans not kept: events keep the order they were
 * read in).
 *
 * Places are RG_SEQ_STEP apart, so that early events fit in between. All of this runs
 * in the service thread that read the event, under read_lock (exclusive).
 *
 * region_follow() walks the queue in the order of these places, from a given one: where
 * a page of data must go now. tests/model/order_sim.c checks both against a simulated
 * kernel.
 */
#include <stdlib.h>
#include <string.h>

#include "region_internal.h"

int region_order_init(zf_region *r)
{
	r->spans = malloc(4 * sizeof(r->spans[0]));
	if (!r->spans)
		return -ENOMEM;
	r->cap_spans = 4;
	r->spans[0] =
		(struct rg_span){ .a = (uintptr_t)r->base, .b = (uintptr_t)r->base + r->size };
	r->nspans = 1;
	return 0;
}

void region_order_fini(zf_region *r)
{
	free(r->spans);
	r->spans = NULL;
	r->nspans = r->cap_spans = 0;
}

/*
 * Appends span s; 0, or -1 when there is no memory for it: then every span is dropped,
 * the record of where our memory is lost (no early events found from then on, events
 * keep the order read; the region warns once).
 */
static int span_add(zf_region *r, struct rg_span s)
{
	if (r->nspans == r->cap_spans) {
		const unsigned cap = r->cap_spans ? 2 * r->cap_spans : 4;
		struct rg_span *n = realloc(r->spans, cap * sizeof(*n));

		if (!n) {
			if (!r->spans_lost)
				common_log(ZF_LOG_WARN, "region: no memory to keep the order of "
							"the program's mremap() and munmap()");
			r->spans_lost = 1;
			r->nspans = 0;
			return -1;
		}
		r->spans = n;
		r->cap_spans = cap;
	}
	r->spans[r->nspans++] = s;
	return 0;
}

/*
 * Splits span i so that its part in [a, b) is a span of its own, at i; the parts outside
 * are appended. Returns 0, or -1 (every span dropped, span_add()).
 */
static int span_isolate(zf_region *r, unsigned i, uintptr_t a, uintptr_t b)
{
	const struct rg_span s = r->spans[i];

	if (s.a < a) {
		struct rg_span left = s;

		left.b = a;
		r->spans[i].a = a;
		if (span_add(r, left))
			return -1;
	}
	if (s.b > b) {
		struct rg_span right = s;

		right.a = b;
		r->spans[i].b = b;
		if (span_add(r, right))
			return -1;
	}
	return 0;
}

/* Memory in [a, b) taken away by the event at place seq: spans older than it go. */
static void spans_remove(zf_region *r, uintptr_t a, uintptr_t b, uint64_t seq)
{
	for (unsigned i = 0; i < r->nspans;) {
		const struct rg_span *s = &r->spans[i];

		if (s->a >= b || s->b <= a || s->seq >= seq) {
			i++;
			continue;
		}
		if (span_isolate(r, i, a, b))
			return;
		r->spans[i] = r->spans[--r->nspans]; /* the one moved here is looked at next */
	}
}

/*
 * Memory moved to [a, b) by the REMAP at place seq: what was there as far as we know is
 * stale (taken away first by an event not read yet), and [a, b) is ours.
 */
static void spans_land(zf_region *r, uintptr_t a, uintptr_t b, uint64_t seq)
{
	for (unsigned i = 0; i < r->nspans; i++) {
		const struct rg_span *s = &r->spans[i];

		if (s->a >= b || s->b <= a || s->seq >= seq || s->stale)
			continue;
		if (span_isolate(r, i, a, b))
			return;
		r->spans[i].stale = seq;
		r->spans[i].early = seq - RG_SEQ_STEP;
	}
	(void)span_add(r, (struct rg_span){ .a = a, .b = b, .seq = seq });
}

/*
 * The place of an event read now that takes [a, b) away: just before the REMAP that
 * landed on a stale part of it (an early event), else after every event read.
 */
static uint64_t place_of_removal(zf_region *r, uintptr_t a, uintptr_t b)
{
	struct rg_span *first = NULL;

	for (unsigned i = 0; i < r->nspans; i++) {
		struct rg_span *s = &r->spans[i];

		if (s->stale && s->a < b && s->b > a && (!first || s->stale < first->stale))
			first = s;
	}
	if (!first)
		return r->seq_next += RG_SEQ_STEP;
	if (first->early + 1 < first->stale)
		first->early++;
	return first->early;
}

/* A REMAP read at place seq: its UNMAPs may come late. */
static void tail_add(zf_region *r, uintptr_t from, uintptr_t len, uint64_t seq)
{
	if (r->ntails == RG_TAILS)
		memmove(r->tails, r->tails + 1, --r->ntails * sizeof(r->tails[0]));
	r->tails[r->ntails].from = from;
	r->tails[r->ntails].len = len;
	r->tails[r->ntails++].seq = seq;
}

/*
 * The place of the REMAP whose late UNMAP [a, b) is, or 0 (see the top). The range a
 * REMAP left first, then the part cut off after one: a neighbour's own UNMAP starts
 * where another move's source ends whenever mmap() handed out neighbours.
 */
static uint64_t tail_of(zf_region *r, uintptr_t a, uintptr_t b)
{
	for (unsigned t = r->ntails; t-- > 0;) {
		const uint64_t seq = r->tails[t].seq;

		if (a != r->tails[t].from || b != r->tails[t].from + r->tails[t].len)
			continue;
		/* The range it left: the last event of that call. */
		memmove(r->tails + t, r->tails + t + 1, (--r->ntails - t) * sizeof(r->tails[0]));
		return seq;
	}
	for (unsigned t = r->ntails; t-- > 0;)
		if (a == r->tails[t].from + r->tails[t].len)
			return r->tails[t].seq; /* the part a shrinking move cut off */
	return 0;
}

uint64_t region_event_seq(zf_region *r, const struct uffd_msg *m)
{
	uint64_t seq;

	switch (m->event) {
	case UFFD_EVENT_REMAP: {
		const uintptr_t from = m->arg.remap.from, to = m->arg.remap.to;
		const uintptr_t len = m->arg.remap.len;

		seq = place_of_removal(r, from, from + len);
		spans_remove(r, from, from + len, seq);
		spans_land(r, to, to + len, seq);
		tail_add(r, from, len, seq);
		return seq;
	}
	case UFFD_EVENT_UNMAP:
		seq = tail_of(r, m->arg.remove.start, m->arg.remove.end);
		if (!seq)
			seq = place_of_removal(r, m->arg.remove.start, m->arg.remove.end);
		spans_remove(r, m->arg.remove.start, m->arg.remove.end, seq);
		return seq;
	default:
		return r->seq_next += RG_SEQ_STEP;
	}
}

void region_event_range(const struct uffd_msg *m, uintptr_t *a, uintptr_t *b)
{
	if (m->event == UFFD_EVENT_REMAP) {
		*a = m->arg.remap.from;
		*b = *a + m->arg.remap.len;
	} else {
		*a = m->arg.remove.start;
		*b = m->arg.remove.end;
	}
}

uintptr_t region_follow(zf_region *r, int i, uintptr_t addr, int *dropped)
{
	const uint64_t since = i >= 0 ? r->qseq[i] : r->seq_handled;
	uint16_t order[RG_QUEUE];
	unsigned n = 0;

	/*
	 * The changes after the one we start from, in the order they happened: the queue's
	 * order (read order) with early events moved back to their places. Insertion: the
	 * queue is in order but for a few.
	 */
	for (unsigned k = (unsigned)(i + 1); k < r->nqueue; k++) {
		unsigned j = n;

		if (r->qseq[k] <= since)
			continue; /* a change before the one we start from, read late (see the top) */
		n++;
		for (; j > 0 && r->qseq[order[j - 1]] > r->qseq[k]; j--)
			order[j] = order[j - 1];
		order[j] = (uint16_t)k;
	}
	*dropped = 0;
	for (unsigned o = 0; o < n; o++) {
		const struct uffd_msg *m = &r->queue[order[o]];
		uintptr_t a, b;

		region_event_range(m, &a, &b);
		if (addr < a || addr >= b)
			continue;
		if (m->event == UFFD_EVENT_REMAP)
			addr = m->arg.remap.to + (addr - a);
		else if (m->event == UFFD_EVENT_UNMAP)
			return 0;
		else
			*dropped = 1;
	}
	return addr;
}
