/*
 * group.c - one residency limit for the regions of several processes: the shared
 * segment, its slots, and the arithmetic of who evicts what.
 *
 * The segment is a memfd, sealed at its size, mapped shared by every process of the
 * group (a child of fork() inherits the mapping; another program opens it by a path,
 * /proc/PID/fd/N of the process that made it). All of it is atomics: no lock is ever
 * held across processes, so a member killed anywhere leaves nothing locked. What a dead
 * member held is counted in its slot, and given back when anyone finds it dead
 * (group_reap(): its pid gone or a zombie, or its program replaced by exec, told by the
 * kernel's per-exec random bytes, AT_RANDOM).
 *
 * Reclaim: every member's reclaim thread waits on one futex word (shared, not private:
 * it is woken from other processes). When the group holds more than its limit, each
 * evicts its share of the excess, in proportion to its resident bytes (group_share()),
 * and kicks the word when it evicted something, so that members with faults waiting
 * for room look again. Counters: a reader bumps a request number and kicks; each member
 * copies its counters into its slot under a sequence count (group_publish()).
 *
 * docs/run.md, "One limit for the run", has the policy and its fairness measured.
 */
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../common/options.h"
#include "group.h"

#define GROUP_MAGIC 0x70756f72676f667aull /* "zfogroup" */
#define GROUP_VERSION 1
#define GROUP_SLOTS 256
#define GROUP_BATCH_DEFAULT ((uint64_t)2 << 20)
#define REAP_EVERY_NS 5000000ull /* dead members looked for at most every 5 ms */

#define RS_WORDS (sizeof(zf_region_stats) / sizeof(uint64_t))
#define SS_WORDS (sizeof(zf_store_stats) / sizeof(uint64_t))

struct group_slot {
	_Atomic int32_t pid; /* 0: free; -1: being taken or let go */
	_Atomic uint32_t answered; /* the last request for counters answered */
	_Atomic uint64_t image; /* the program's AT_RANDOM bytes: an exec changes them */
	_Atomic uint64_t resident; /* bytes */
	_Atomic uint32_t seq; /* odd while the counters below are written */
	_Atomic uint64_t published_ns; /* CLOCK_MONOTONIC, 0: never */
	_Atomic uint64_t rs[RS_WORDS];
	_Atomic uint64_t ss[SS_WORDS];
};

struct group_seg {
	uint64_t magic;
	uint32_t version, nslots;
	uint32_t slot_size, rs_size, ss_size;
	uint32_t creator;
	uint64_t limit, batch;
	_Atomic uint64_t resident, resident_max;
	_Atomic uint32_t wake; /* futex: the members' reclaim threads */
	_Atomic uint32_t stat_req; /* requests for counters */
	_Atomic uint32_t reclaiming; /* members in a reclaim batch now */
	_Atomic uint64_t reclaimed; /* bytes evicted by reclaim */
	_Atomic uint64_t members, members_max, joined, reaped;
	_Atomic uint64_t last_reap_ns;
	struct group_slot slots[GROUP_SLOTS];
};

struct zf_group {
	struct group_seg *s;
	int fd;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* This program's identity across exec: the kernel's random bytes for it. */
static uint64_t image_id(void)
{
	const void *p = (const void *)getauxval(AT_RANDOM);
	uint64_t v = 0;

	if (p)
		memcpy(&v, p, sizeof(v));
	return v;
}

static void max_update(_Atomic uint64_t *max, uint64_t now)
{
	uint64_t seen = atomic_load_explicit(max, memory_order_relaxed);

	while (now > seen && !atomic_compare_exchange_weak_explicit(
				     max, &seen, now, memory_order_relaxed, memory_order_relaxed))
		;
}

static void layout(struct group_seg *s)
{
	s->version = GROUP_VERSION;
	s->nslots = GROUP_SLOTS;
	s->slot_size = sizeof(struct group_slot);
	s->rs_size = sizeof(zf_region_stats);
	s->ss_size = sizeof(zf_store_stats);
}

int zf_group_create(uint64_t limit, uint64_t reclaim_batch, zf_group **out)
{
	const uint64_t batch = reclaim_batch ? reclaim_batch : GROUP_BATCH_DEFAULT;
	zf_group *g;
	int fd, ret;

	RETURN_IF(!out, -EINVAL);
	*out = NULL;
	RETURN_IF(reclaim_batch && limit && reclaim_batch > limit / 2, -EINVAL);
	g = calloc(1, sizeof(*g));
	RETURN_IF(!g, -ENOMEM);
	fd = memfd_create("zfolio-group", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, sizeof(struct group_seg)) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		ret = -errno;
		goto fail;
	}
	g->s = mmap(NULL, sizeof(struct group_seg), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (g->s == MAP_FAILED) {
		ret = -errno;
		goto fail;
	}
	layout(g->s);
	g->s->creator = (uint32_t)getpid();
	g->s->limit = limit;
	g->s->batch = limit ? ZF_MIN(batch, limit / 2) : batch;
	atomic_store(&g->s->last_reap_ns, mono_ns());
	/* Other processes open it only later, by a path this process hands them. */
	g->s->magic = GROUP_MAGIC;
	g->fd = fd;
	*out = g;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	free(g);
	return ret;
}

int zf_group_open(const char *path, zf_group **out)
{
	struct group_seg want = { 0 };
	struct stat st;
	zf_group *g;
	int fd, ret = 0;

	RETURN_IF(!out || !path, -EINVAL);
	*out = NULL;
	fd = open(path, O_RDWR | O_CLOEXEC);
	RETURN_IF(fd < 0, -errno);
	g = calloc(1, sizeof(*g));
	if (!g)
		ret = -ENOMEM;
	else if (fstat(fd, &st))
		ret = -errno;
	else if (!S_ISREG(st.st_mode) || (size_t)st.st_size != sizeof(struct group_seg))
		ret = -EINVAL;
	if (!ret) {
		g->s = mmap(NULL, sizeof(struct group_seg), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
			    0);
		ret = g->s == MAP_FAILED ? -errno : 0;
	}
	close(fd);
	if (!ret) {
		layout(&want);
		if (g->s->magic != GROUP_MAGIC || g->s->version != want.version ||
		    g->s->nslots != want.nslots || g->s->slot_size != want.slot_size ||
		    g->s->rs_size != want.rs_size || g->s->ss_size != want.ss_size) {
			munmap(g->s, sizeof(struct group_seg));
			ret = -EINVAL;
		}
	}
	if (ret) {
		free(g);
		return ret;
	}
	g->fd = -1;
	*out = g;
	return 0;
}

int zf_group_fd(const zf_group *g)
{
	return g ? g->fd : -1;
}

void zf_group_close(zf_group *g)
{
	if (!g)
		return;
	munmap(g->s, sizeof(struct group_seg));
	if (g->fd >= 0)
		close(g->fd);
	free(g);
}

static void seg_kick(struct group_seg *s)
{
	atomic_fetch_add_explicit(&s->wake, 1, memory_order_release);
	syscall(SYS_futex, (uint32_t *)&s->wake, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* Lets slot go if it still belongs to pid: its resident bytes leave the group. */
static void slot_free(struct group_seg *s, struct group_slot *sl, int32_t pid, int reaped)
{
	if (!atomic_compare_exchange_strong(&sl->pid, &pid, -1))
		return;
	atomic_fetch_sub(&s->resident, atomic_exchange(&sl->resident, 0));
	atomic_fetch_sub(&s->members, 1);
	if (reaped)
		atomic_fetch_add(&s->reaped, 1);
	atomic_store_explicit(&sl->pid, 0, memory_order_release);
	seg_kick(s); /* room, maybe */
}

/* Whether process pid is gone: no such process, or a zombie (its memory is freed). */
static int pid_gone(int32_t pid)
{
	char path[64], buf[256];
	const char *paren;
	ssize_t n;
	int fd;

	if (kill(pid, 0) && errno == ESRCH)
		return 1;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	paren = strrchr(buf, ')');
	return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

static void reap(struct group_seg *s)
{
	const int32_t self = (int32_t)getpid();
	const uint64_t image = image_id();

	for (unsigned i = 0; i < GROUP_SLOTS; i++) {
		struct group_slot *sl = &s->slots[i];
		const int32_t pid = atomic_load_explicit(&sl->pid, memory_order_acquire);

		if (pid <= 0)
			continue;
		/* This process's slot from before an exec: that program is gone. */
		if (pid == self ? atomic_load(&sl->image) != image : pid_gone(pid))
			slot_free(s, sl, pid, 1);
	}
}

void group_reap(zf_group *g)
{
	const uint64_t now = mono_ns();
	uint64_t last = atomic_load_explicit(&g->s->last_reap_ns, memory_order_relaxed);

	if (now - last < REAP_EVERY_NS ||
	    !atomic_compare_exchange_strong(&g->s->last_reap_ns, &last, now))
		return;
	reap(g->s);
}

int group_join(zf_group *g)
{
	struct group_seg *s = g->s;
	const int32_t self = (int32_t)getpid();

	reap(s);
	for (unsigned i = 0; i < GROUP_SLOTS; i++) {
		struct group_slot *sl = &s->slots[i];
		int32_t free_pid = 0;

		if (!atomic_compare_exchange_strong(&sl->pid, &free_pid, -1))
			continue;
		atomic_store(&sl->image, image_id());
		atomic_store(&sl->resident, 0);
		atomic_store(&sl->published_ns, 0);
		atomic_store(&sl->answered, atomic_load(&s->stat_req));
		max_update(&s->members_max, atomic_fetch_add(&s->members, 1) + 1);
		atomic_fetch_add(&s->joined, 1);
		atomic_store_explicit(&sl->pid, self, memory_order_release);
		return (int)i;
	}
	return -ENOSPC;
}

void group_leave(zf_group *g, int slot)
{
	slot_free(g->s, &g->s->slots[slot], (int32_t)getpid(), 0);
}

int group_reserve(zf_group *g, int slot, uint64_t bytes, int over)
{
	struct group_seg *s = g->s;
	uint64_t cur = atomic_load_explicit(&s->resident, memory_order_acquire);

	do {
		if (s->limit && cur + bytes > s->limit + s->batch && !over)
			return 0;
	} while (!atomic_compare_exchange_weak_explicit(
		&s->resident, &cur, cur + bytes, memory_order_acq_rel, memory_order_acquire));
	atomic_fetch_add_explicit(&s->slots[slot].resident, bytes, memory_order_relaxed);
	max_update(&s->resident_max, cur + bytes);
	return 1;
}

void group_add(zf_group *g, int slot, int64_t bytes)
{
	struct group_seg *s = g->s;
	const uint64_t now =
		atomic_fetch_add_explicit(&s->resident, (uint64_t)bytes, memory_order_acq_rel) +
		(uint64_t)bytes;

	atomic_fetch_add_explicit(&s->slots[slot].resident, (uint64_t)bytes, memory_order_relaxed);
	if (bytes > 0)
		max_update(&s->resident_max, now);
}

int group_room(zf_group *g, uint64_t bytes)
{
	const struct group_seg *s = g->s;

	return !s->limit || atomic_load_explicit(&s->resident, memory_order_acquire) + bytes <=
				    s->limit + s->batch;
}

int group_over(zf_group *g)
{
	return g->s->limit &&
	       atomic_load_explicit(&g->s->resident, memory_order_acquire) > g->s->limit;
}

uint64_t group_share(zf_group *g, int slot)
{
	struct group_seg *s = g->s;
	const uint64_t total = atomic_load(&s->resident);
	const uint64_t mine = atomic_load(&s->slots[slot].resident);

	if (!s->limit || total <= s->limit || !mine)
		return 0;
	/* Each member shrinks by the same fraction: excess * mine / total, rounded up. */
	return (uint64_t)(((unsigned __int128)(total - s->limit) * mine + total - 1) / total);
}

uint64_t group_limit(const zf_group *g)
{
	return g->s->limit;
}

uint64_t group_batch(const zf_group *g)
{
	return g->s->batch;
}

uint32_t group_seq(zf_group *g)
{
	return atomic_load_explicit(&g->s->wake, memory_order_acquire);
}

void group_kick(zf_group *g)
{
	seg_kick(g->s);
}

void group_wait(zf_group *g, uint32_t seq, uint64_t timeout_ns)
{
	struct timespec ts = { (time_t)(timeout_ns / 1000000000ull),
			       (long)(timeout_ns % 1000000000ull) };

	syscall(SYS_futex, (uint32_t *)&g->s->wake, FUTEX_WAIT, seq, &ts, NULL, 0);
}

void group_reclaiming(zf_group *g, int delta)
{
	atomic_fetch_add(&g->s->reclaiming, (uint32_t)delta);
}

void group_reclaimed(zf_group *g, uint64_t bytes)
{
	atomic_fetch_add(&g->s->reclaimed, bytes);
}

int group_busy(zf_group *g, uint64_t *reclaimed)
{
	*reclaimed = atomic_load(&g->s->reclaimed);
	return atomic_load(&g->s->reclaiming) != 0;
}

int group_asked(zf_group *g, int slot)
{
	return atomic_load_explicit(&g->s->slots[slot].answered, memory_order_relaxed) !=
	       atomic_load_explicit(&g->s->stat_req, memory_order_acquire);
}

void group_publish(zf_group *g, int slot, const zf_region_stats *rs, const zf_store_stats *ss)
{
	struct group_slot *sl = &g->s->slots[slot];
	const uint32_t req = atomic_load_explicit(&g->s->stat_req, memory_order_acquire);
	uint64_t w[RS_WORDS > SS_WORDS ? RS_WORDS : SS_WORDS];

	/* Odd first: the stores below cannot pass the increment's acquire half. */
	atomic_fetch_add_explicit(&sl->seq, 1, memory_order_acq_rel);
	memcpy(w, rs, sizeof(*rs));
	for (size_t i = 0; i < RS_WORDS; i++)
		atomic_store_explicit(&sl->rs[i], w[i], memory_order_relaxed);
	memcpy(w, ss, sizeof(*ss));
	for (size_t i = 0; i < SS_WORDS; i++)
		atomic_store_explicit(&sl->ss[i], w[i], memory_order_relaxed);
	atomic_store_explicit(&sl->published_ns, mono_ns(), memory_order_relaxed);
	atomic_fetch_add_explicit(&sl->seq, 1, memory_order_release);
	atomic_store_explicit(&sl->answered, req, memory_order_release);
}

int zf_group_get_stats(zf_group *g, zf_group_stats *stats, size_t size)
{
	zf_group_stats st;
	struct group_seg *s;

	RETURN_IF(!g || !stats, -EINVAL);
	s = g->s;
	st = (zf_group_stats){
		.limit = s->limit,
		.reclaim_batch = s->batch,
		.resident_bytes = atomic_load(&s->resident),
		.resident_max = atomic_load(&s->resident_max),
		.members = atomic_load(&s->members),
		.members_max = atomic_load(&s->members_max),
		.joined = atomic_load(&s->joined),
		.reaped = atomic_load(&s->reaped),
		.reclaimed_bytes = atomic_load(&s->reclaimed),
		.creator = s->creator,
	};
	return struct_copy_out(stats, size, &st, sizeof(st));
}

/* Copies slot's counters, consistent (the sequence count unchanged around the copy): 0, or -1. */
static int slot_read(struct group_slot *sl, zf_group_member *m)
{
	uint64_t w[RS_WORDS > SS_WORDS ? RS_WORDS : SS_WORDS];

	for (int tries = 0; tries < 1000; tries++) {
		const uint32_t seq = atomic_load_explicit(&sl->seq, memory_order_acquire);

		if (seq & 1)
			continue;
		/* Acquire loads: the second look at seq cannot pass them. */
		for (size_t i = 0; i < RS_WORDS; i++)
			w[i] = atomic_load_explicit(&sl->rs[i], memory_order_acquire);
		memcpy(&m->region, w, sizeof(m->region));
		for (size_t i = 0; i < SS_WORDS; i++)
			w[i] = atomic_load_explicit(&sl->ss[i], memory_order_acquire);
		memcpy(&m->store, w, sizeof(m->store));
		if (atomic_load_explicit(&sl->seq, memory_order_relaxed) == seq)
			return 0;
	}
	return -1;
}

int zf_group_members(zf_group *g, zf_group_member *members, unsigned cap, unsigned timeout_ms)
{
	struct group_seg *s;
	uint32_t req;
	uint64_t deadline;
	int n = 0;

	RETURN_IF(!g || (cap && !members), -EINVAL);
	s = g->s;
	reap(s);
	req = atomic_fetch_add(&s->stat_req, 1) + 1;
	group_kick(g);
	deadline = mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	for (;;) {
		int waiting = 0;

		for (unsigned i = 0; i < GROUP_SLOTS; i++) {
			if (atomic_load(&s->slots[i].pid) > 0 &&
			    (int32_t)(atomic_load(&s->slots[i].answered) - req) < 0)
				waiting = 1;
		}
		if (!waiting || mono_ns() >= deadline)
			break;
		usleep(1000);
	}
	for (unsigned i = 0; i < GROUP_SLOTS; i++) {
		struct group_slot *sl = &s->slots[i];
		const int32_t pid = atomic_load(&sl->pid);
		zf_group_member m = { 0 };
		uint64_t at;

		if (pid <= 0)
			continue;
		if ((unsigned)n < cap) {
			m.pid = (uint64_t)pid;
			m.resident_bytes = atomic_load(&sl->resident);
			if (slot_read(sl, &m)) {
				memset(&m.region, 0, sizeof(m.region));
				memset(&m.store, 0, sizeof(m.store));
			}
			at = atomic_load(&sl->published_ns);
			m.age_ns = at ? mono_ns() - at : UINT64_MAX;
			members[n] = m;
		}
		n++;
	}
	return n;
}
