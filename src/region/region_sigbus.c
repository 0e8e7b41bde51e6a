/*
 * region_sigbus.c - SIGBUS mode (ZF_FAULT_SIGBUS): the faulting thread serves its own
 * fault, in a SIGBUS handler, with UFFD_FEATURE_SIGBUS (no wakeup of another thread).
 *
 * A service thread still reads the descriptor, for the events. The signal handler takes
 * no lock that code outside zfolio can hold and allocates nothing: it takes a
 * preallocated fault context (codec context, buffers) from a lock-free set. It does
 * free() the store entry of a unit it brought in; that is safe because the signal is
 * synchronous, raised by an access to region memory, and no code that holds the malloc
 * lock touches memory outside the heap (and zfolio itself never touches region memory
 * under a lock; the region tests run TSan with report_signal_unsafe=0 for it).
 *
 * The handler finds the region of the faulting address in a fixed registry (a region
 * registers when it starts, unregisters when destroyed, and waits for handlers still
 * inside it), serves the fault with region_serve(), and waits on the unit's state word
 * (futex) where a service thread would leave the fault unanswered. A fault that cannot
 * be served goes to the program's SIGBUS disposition (its handler, or the default that
 * kills the process); an address outside every region too, unless it is memory moved
 * out of a region by mremap() (served as plain memory) or a region being destroyed
 * (moved_memory()).
 *
 * docs/region.md: "SIGBUS mode", "fork"; failure modes, row 6.
 */
#include <signal.h>
#include <string.h>
#include <ucontext.h>

#include "region_internal.h"

#define RG_MAX_REGIONS 64 /* regions a SIGBUS handler can find */

static _Atomic(zf_region *) registry[RG_MAX_REGIONS];
/*
 * Signal handlers inside registry[i]'s region. Counted per slot, in static memory, and
 * raised before the slot is read: region_sigbus_unregister() empties the slot, then waits
 * for the count to fall to 0, and only then may the region be freed.
 */
static _Atomic int registry_active[RG_MAX_REGIONS];
/* Regions region_sigbus_unregister() took out: a SIGBUS raised before may find no region. */
static atomic_uint registry_gone;
/*
 * Regions taken out whose descriptor is still open: memory moved out of them faults until
 * it is closed (region_sigbus_closed()); such a fault waits.
 */
static atomic_uint registry_closing;
/*
 * The program's SIGBUS disposition, which the handler chains to: two copies, the one in
 * use named by prev_at, so that zf_sigbus_action() can replace it while a handler reads
 * it (it writes the other, then switches). Written under sigbus_lock.
 */
static struct sigaction prev_sigbus[2];
static atomic_int prev_at;
static pthread_mutex_t sigbus_lock = PTHREAD_MUTEX_INITIALIZER;
static int sigbus_installed;

static struct fault_ctx *sig_ctx_get(zf_region *r, int *slot)
{
	for (;;) {
		uint32_t free_mask = atomic_load_explicit(&r->sig_free, memory_order_acquire);

		while (free_mask) {
			const int i = __builtin_ctz(free_mask);

			if (atomic_compare_exchange_weak_explicit(
				    &r->sig_free, &free_mask, free_mask & ~(1u << i),
				    memory_order_acq_rel, memory_order_acquire)) {
				*slot = i;
				return &r->sig_ctx[i];
			}
		}
		sched_yield();
	}
}

/*
 * Has the region's service thread log a fault that cannot be served (the program's log
 * hook cannot be called from a signal handler: it may take a lock the interrupted thread
 * holds), and waits until it has, or a second.
 */
static void tell_failure(zf_region *r, uint8_t *addr)
{
	const uint32_t seq = atomic_fetch_add(&r->fail_asked, 1) + 1;
	const uint64_t one = 1;

	atomic_store(&r->fail_addr, (uintptr_t)addr);
	if (write(r->log_fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
		return;
	for (int i = 0; i < 1000; i++) {
		const uint32_t told = atomic_load(&r->fail_told);
		struct timespec ts = { 0, 1000000 };

		if ((int32_t)(told - seq) >= 0)
			return;
		syscall(SYS_futex, (uint32_t *)&r->fail_told, FUTEX_WAIT_PRIVATE, told, &ts, NULL,
			0);
	}
}

/* The program's own SIGBUS handling (or the default: the signal kills the process). */
static void sigbus_chain(int sig, siginfo_t *si, void *uc)
{
	const struct sigaction prev =
		prev_sigbus[atomic_load_explicit(&prev_at, memory_order_acquire)];

	if (prev.sa_flags & SA_SIGINFO) {
		prev.sa_sigaction(sig, si, uc);
	} else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
		prev.sa_handler(sig);
	} else {
		/* Back to the default; returning re-runs the access, which then kills us. */
		struct sigaction dfl = { .sa_handler = SIG_DFL };

		sigemptyset(&dfl.sa_mask);
		common_internal++; /* the kernel's, not a preload runtime's (zf_sigbus_action()) */
		sigaction(SIGBUS, &dfl, NULL);
		common_internal--;
	}
}

/*
 * Serves a fault in memory the program moved out of region r with mremap() (it stays
 * registered with r's descriptor, region_events.c): as plain memory, once the REMAP
 * events read have put the evicted data there. Returns 1 (served: retry the access), 0
 * (not r's memory).
 */
static int serve_moved(zf_region *r, uint8_t *page)
{
	for (;;) {
		struct uffdio_move probe = { .dst = (uintptr_t)page,
					     .src = (uintptr_t)r->probe,
					     .len = RG_PAGE,
					     .mode = UFFDIO_MOVE_MODE_ALLOW_SRC_HOLES |
						     UFFDIO_MOVE_MODE_DONTWAKE };
		int ret;

		if (atomic_load_explicit(&r->dying, memory_order_acquire))
			return 1; /* its memory is unregistered soon: retried until then */
		if (atomic_load_explicit(&r->remaps_pending, memory_order_acquire)) {
			sched_yield();
			continue;
		}
		/*
		 * Registered with r's descriptor? Moving a hole there says (the kernel checks
		 * the destination's registration first) and moves nothing. A copy would not:
		 * it fills memory registered with any descriptor, the program's own too.
		 */
		ret = uffd_range(r, UFFDIO_MOVE, &probe);
		if (ret == -EAGAIN) {
			sched_yield();
			continue;
		}
		if (ret == -EEXIST) {
			/* A page there (placed meanwhile, or a write to a protected one). */
			(void)protect(r, page, RG_PAGE, 0);
			return 1;
		}
		if (ret)
			return 0;
		ret = region_zero_fill(r, page, RG_PAGE);
		if (ret == -EEXIST) /* there: a write to a write-protected page */
			ret = protect(r, page, RG_PAGE, 0);
		if (ret != -EAGAIN)
			return 1;
		sched_yield();
	}
}

/*
 * A SIGBUS at an address outside every region: memory moved out of one (serve_moved()),
 * or a region zf_region_destroy() took out of the registry after the fault was raised
 * (the access succeeds, or faults as plain memory, once retried: retried once per page
 * and region destroyed). Returns 1 when the access may be retried, 0: not ours.
 */
static int moved_memory(uint8_t *addr)
{
	static __thread uintptr_t retried_page;
	static __thread unsigned retried_gone;
	uint8_t *page = (uint8_t *)((uintptr_t)addr & ~(uintptr_t)(RG_PAGE - 1));
	const unsigned gone = atomic_load_explicit(&registry_gone, memory_order_acquire);

	for (int i = 0; i < RG_MAX_REGIONS; i++) {
		zf_region *r;
		int served = 0;

		if (!atomic_load_explicit(&registry[i], memory_order_relaxed))
			continue;
		atomic_fetch_add_explicit(&registry_active[i], 1, memory_order_seq_cst);
		r = atomic_load_explicit(&registry[i], memory_order_seq_cst);
		/* (remaps_pending: maybe the first REMAP, being read) */
		if (r && (atomic_load(&r->remapped) || atomic_load(&r->remaps_pending)))
			served = serve_moved(r, page);
		atomic_fetch_sub_explicit(&registry_active[i], 1, memory_order_release);
		if (served)
			return 1;
	}
	if (atomic_load_explicit(&registry_closing, memory_order_acquire)) {
		sched_yield();
		return 1;
	}
	if (gone && (retried_page != (uintptr_t)page || retried_gone != gone)) {
		retried_page = (uintptr_t)page;
		retried_gone = gone;
		return 1;
	}
	return 0;
}

/*
 * Whether the faulting access was a write: 1, 0, or -1 where the signal does not say.
 * On x86-64 the page fault's error code comes with the signal (bit 1: a write).
 */
static int fault_write(const void *uc)
{
#if defined(__x86_64__) && defined(REG_ERR)
	return (((const ucontext_t *)uc)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
	(void)uc;
	return -1;
#endif
}

static void sigbus_handler(int sig, siginfo_t *si, void *uc)
{
	const int saved_errno = errno;
	uint8_t *addr = si->si_addr;
	int in_region = 0; /* a region's, which failed: no waiting for moved memory */

	common_internal++; /* the store's free() of the unit's entry: the C library's */
	if (si->si_code == BUS_ADRERR) {
		for (int i = 0; i < RG_MAX_REGIONS; i++) {
			zf_region *r;
			enum serve_result res;
			struct fault_ctx *c;
			uint64_t t0;
			int slot;

			if (!atomic_load_explicit(&registry[i], memory_order_relaxed))
				continue;
			atomic_fetch_add_explicit(&registry_active[i], 1, memory_order_seq_cst);
			r = atomic_load_explicit(&registry[i], memory_order_seq_cst);
			if (!r || addr < r->base || addr >= r->base + r->size) {
				atomic_fetch_sub_explicit(&registry_active[i], 1,
							  memory_order_release);
				continue;
			}
			in_region = 1;
			t0 = now_ns();
			c = sig_ctx_get(r, &slot);
			for (;;) {
				uint64_t u = (uint64_t)(addr - r->base) >> (r->order + 12);
				uint32_t seen;

				fork_gate_enter(r);
				res = region_serve(r, c, addr, -1, fault_write(uc));
				fork_gate_leave(r);
				if (res == SERVED || res == FAILED || res == GONE)
					break;
				if (atomic_load_explicit(&r->dying, memory_order_acquire)) {
					res = GONE; /* unregistered: the access will not fault here */
					break;
				}
				if (res == WAIT && !unit_wait_mark(r, u, &seen)) {
					futex_wait(&r->state[u], seen);
				} else if (res == NOROOM) {
					/* Reclaim bumps resident_seq; the timeout covers a lost race. */
					uint32_t seq = atomic_load(&r->resident_seq);
					struct timespec ts = { 0, 1000000 };

					if (!room_for_one(r))
						syscall(SYS_futex, (uint32_t *)&r->resident_seq,
							FUTEX_WAIT_PRIVATE, seq, &ts, NULL, 0);
				} else if (res == RETRY) {
					sched_yield();
				}
			}
			atomic_fetch_or_explicit(&r->sig_free, 1u << slot, memory_order_release);
			if (res == SERVED)
				lat_record(r, t0);
			if (res == FAILED)
				tell_failure(r, addr);
			atomic_fetch_sub_explicit(&registry_active[i], 1, memory_order_release);
			if (res == FAILED)
				break;
			common_internal--;
			errno = saved_errno;
			return;
		}
	}
	if (si->si_code == BUS_ADRERR && !in_region && moved_memory(addr)) {
		common_internal--;
		errno = saved_errno;
		return;
	}
	common_internal--; /* the program's handler is the program's */
	sigbus_chain(sig, si, uc);
	errno = saved_errno;
}

/*
 * In a child after fork() only the regions made with ZF_FORK_COPY exist (the others'
 * memory is MADV_DONTFORK, and region_fork.c makes the copies regions again): forget the
 * others, or a region the child makes at the same address would be served with its
 * parent's descriptor. Called by region_fork.c's child handler, before it makes the
 * copies.
 */
void region_sigbus_fork_child(void)
{
	pthread_mutex_init(&sigbus_lock, NULL);
	for (int i = 0; i < RG_MAX_REGIONS; i++) {
		zf_region *r = atomic_load_explicit(&registry[i], memory_order_relaxed);

		if (r && r->o.fork != ZF_FORK_COPY)
			atomic_store_explicit(&registry[i], NULL, memory_order_relaxed);
		atomic_store_explicit(&registry_active[i], 0, memory_order_relaxed);
	}
}

int region_sigbus_register(zf_region *r)
{
	int ret = -EBUSY;

	pthread_mutex_lock(&sigbus_lock);
	if (!sigbus_installed) {
		struct sigaction sa = { .sa_sigaction = sigbus_handler,
					.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART };

		sigemptyset(&sa.sa_mask);
		common_internal++; /* the kernel's sigaction(), as in zf_sigbus_action() */
		ret = sigaction(SIGBUS, &sa, &prev_sigbus[atomic_load(&prev_at)]) ? -errno : -EBUSY;
		common_internal--;
		if (ret != -EBUSY)
			goto out;
		sigbus_installed = 1;
	}
	for (int i = 0; i < RG_MAX_REGIONS; i++) {
		if (!atomic_load(&registry[i])) {
			r->slot = i;
			atomic_store_explicit(&registry[i], r, memory_order_release);
			ret = 0;
			break;
		}
	}
out:
	pthread_mutex_unlock(&sigbus_lock);
	return ret;
}

void region_sigbus_unregister(zf_region *r)
{
	if (r->slot < 0)
		return;
	pthread_mutex_lock(&sigbus_lock);
	atomic_store_explicit(&registry[r->slot], NULL, memory_order_seq_cst);
	pthread_mutex_unlock(&sigbus_lock);
	atomic_fetch_add_explicit(&registry_closing, 1, memory_order_release);
	atomic_fetch_add_explicit(&registry_gone, 1, memory_order_release);
	while (atomic_load_explicit(&registry_active[r->slot], memory_order_seq_cst))
		sched_yield();
	r->slot = -1;
	r->was_registered = 1;
}

void region_sigbus_closed(zf_region *r)
{
	if (!r->was_registered)
		return;
	atomic_fetch_sub_explicit(&registry_closing, 1, memory_order_release);
	r->was_registered = 0;
}

int zf_sigbus_action(const struct sigaction *act, struct sigaction *oldact)
{
	int ret = 0;

	pthread_mutex_lock(&sigbus_lock);
	if (!sigbus_installed) {
		/* The kernel's sigaction(), past a runtime's that routes SIGBUS here. */
		common_internal++;
		ret = sigaction(SIGBUS, act, oldact) ? -errno : 0;
		common_internal--;
	} else {
		const int at = atomic_load(&prev_at);

		if (oldact)
			*oldact = prev_sigbus[at];
		if (act) {
			prev_sigbus[!at] = *act;
			atomic_store_explicit(&prev_at, !at, memory_order_release);
		}
	}
	pthread_mutex_unlock(&sigbus_lock);
	return ret;
}
