/*
 * region_test_basic.c - the case "basic": fill, zf_region_pageout() of the whole region,
 * every byte back; the counters exact (swpout, swpin by unit, pgmajfault, evicted_units,
 * resident_bytes, the store's stored/same-filled pages), per-page swap-in
 * (swpin_fallback), never-written memory reads zero (pgfault_zero), writes after a
 * swap-in go out on the next eviction, partly resident units, read(2)/write(2) on evicted
 * memory (works in thread mode, EFAULT in SIGBUS mode, as the header says), the stats
 * text, bad options (-EINVAL), the address hint.
 *
 * With frames (ZF_TEST_FRAME=2m) the counters are the frame's (the store's stay its
 * unit's: same-filled pages are counted by the store's unit), and never-written frames
 * that map the huge zero page from the start read zeros with no fault and stay empty.
 *
 * In thread mode a service thread counts a fault just after it woke the faulting thread:
 * the checks of fault counters first wait for the faults they expect to be counted.
 */
#include <stdlib.h>
#include <unistd.h>

#include "region_harness.h"

/* The units basic writes: all but every eighth (from the sixth) and the last. */
static int basic_written(size_t u, size_t nunits)
{
	return u % 8 != 6 && u != nunits - 1;
}

/* A system call on a page of evicted memory: the page in thread mode, EFAULT in SIGBUS mode. */
static void expect_syscall(const struct rg *g, ssize_t n, const char *what)
{
	if (g->mode == ZF_FAULT_THREAD)
		CHECK(n == PAGE, "thread mode: %s evicted memory gave %lld (%s)", what,
		      (long long)n, n < 0 ? strerror(errno) : "short");
	else
		CHECK(n < 0 && errno == EFAULT,
		      "SIGBUS mode: %s evicted memory gave %lld (%s), the header says EFAULT", what,
		      (long long)n, n < 0 ? strerror(errno) : "bytes");
}

/*
 * read(2) and write(2) on evicted memory: they work in thread mode, EFAULT in SIGBUS mode.
 * Units 0 and 1, resident, are evicted and come back in (by the system call or by the
 * check after it): a unit of major faults each.
 */
static void basic_syscalls(struct rg *g)
{
	uint8_t buf[PAGE], back[PAGE];
	int pfd[2];
	ssize_t n;

	CHECK(pipe(pfd) == 0, "pipe: %s", strerror(errno));
	/* write(2) from an evicted unit. */
	touch_read(g->base);
	PAGEOUT(g, 0, 1, 1);
	n = write(pfd[1], g->base, PAGE);
	expect_syscall(g, n, "write(2) from");
	if (g->mode == ZF_FAULT_THREAD) {
		CHECK(read(pfd[0], back, PAGE) == PAGE, "read back from the pipe");
		CHECK(!memcmp(back, g->want, PAGE),
		      "thread mode: write(2) from evicted memory sent other bytes than it holds");
	}
	VERIFY_UNITS(g, 0, 1, "unit 0 after write(2) from it");

	/* read(2) into an evicted unit: the kernel writes to it. */
	touch_read(g->base + g->unit);
	PAGEOUT(g, 1, 2, 1);
	gen_page(buf, g->upages, 9, g->upages);
	CHECK(write(pfd[1], buf, PAGE) == PAGE, "write to the pipe");
	n = read(pfd[0], g->base + g->unit, PAGE);
	expect_syscall(g, n, "read(2) into");
	if (g->mode == ZF_FAULT_THREAD)
		memcpy(g->want + g->unit, buf, PAGE);
	VERIFY_UNITS(g, 1, 2, "unit 1 after read(2) into it");
	close(pfd[0]);
	close(pfd[1]);
}

/*
 * zf_region_stats_text(): snprintf-like, and its swpout and pgmajfault lines say what the
 * struct says (the counters only grow: the text's lie between a snapshot taken before it
 * and one after).
 */
static void basic_text(struct rg *g)
{
	const zf_region_stats st = rst(g->r);
	const size_t need = zf_region_stats_text(g->r, NULL, 0), cap = need + 64;
	zf_region_stats after;
	char tiny[8], *buf, *line;
	unsigned long long v;
	size_t len;

	CHECK(need > 0 && need < MiB(1), "zf_region_stats_text(NULL, 0) = %llu", U(need));
	buf = malloc(cap);
	CHECK(buf, "out of memory");
	len = zf_region_stats_text(g->r, buf, cap);
	CHECK(len >= need && len < cap && strlen(buf) == len,
	      "stats text: %llu bytes needed, then %llu returned, %llu written", U(need), U(len),
	      U(strlen(buf)));
	CHECK(zf_region_stats_text(g->r, tiny, sizeof(tiny)) >= len && strlen(tiny) == 7,
	      "stats text into 8 bytes: not truncated and NUL-terminated like snprintf");
	after = rst(g->r);
	line = strncmp(buf, "swpout ", 7) ? strstr(buf, "\nswpout ") : buf - 1;
	CHECK(line && sscanf(line + 8, "%llu", &v) == 1 && v >= st.swpout && v <= after.swpout,
	      "stats text has no \"swpout %llu\" line:\n%s", U(st.swpout), buf);
	line = strstr(buf, "pgmajfault ");
	CHECK(line && sscanf(line + 11, "%llu", &v) == 1 && v >= st.pgmajfault &&
		      v <= after.pgmajfault,
	      "stats text has no \"pgmajfault %llu\" line:\n%s", U(st.pgmajfault), buf);
	free(buf);
}

/*
 * The region's major faults must reach want (each counted by then: thread mode counts
 * just after the wakeup) and stay there.
 */
static zf_region_stats expect_majfaults(struct rg *g, uint64_t want, const char *what)
{
	zf_region_stats st;

	WAIT_UNTIL((st = rst(g->r)).pgmajfault >= want, WAIT_MS);
	CHECK(st.pgmajfault == want, "%s: pgmajfault %llu, want %llu", what, U(st.pgmajfault),
	      U(want));
	return st;
}

static void basic_one(enum zf_fault_mode mode, uint32_t unit, enum zf_swapin_mode swapin,
		      size_t size, int own_store)
{
	zf_region_options o = ropts(mode, unit);
	const int per_page = swapin == ZF_SWAPIN_PER_PAGE;
	uint64_t w = 0, sf = 0, zm = 0, zf = 0, zl, res, zero0, maj, faults_per_unit;
	zf_region_stats st;
	zf_store_stats ss;
	struct rg g;
	long n;

	o.swapin = swapin;
	set_phase("basic %s %s%s%s", mode_name(mode), unit_name(unit), per_page ? " per-page" : "",
		  own_store ? " own-store" : "");
	/* The store's unit (stats unit) is the one asked for; the region's may be a frame. */
	rg_open(&g, &o, size - 100, own_store ? store_make(unit, 0) : NULL);
	size = rg_size_for(&o, size);
	CHECK(g.size == size, "zf_region_size() %llu, want %llu", U(g.size), U(size));
	CHECK(g.nunits >= 3 && !(g.nunits & (g.nunits - 1)),
	      "basic needs 3 units or more, a power of two (%llu)", U(g.nunits));
	faults_per_unit = per_page ? g.upages : 1; /* a unit read back whole */
	st = rst(g.r);
	CHECK(st.size == size && st.unit == unit && st.frame == rg_frame(&o),
	      "stats size %llu unit %llu frame %llu", U(st.size), U(st.unit), U(st.frame));
	CHECK(st.resident_bytes == 0 && st.swpout == 0 && st.swpin == 0 && st.evicted_units == 0 &&
		      st.pgfault_zero == 0,
	      "a fresh region has counters: resident %llu swpout %llu zero %llu",
	      U(st.resident_bytes), U(st.swpout), U(st.pgfault_zero));
	/* With frames, never-written ones may map the huge zero page: no memory. */
	CHECK(present_pages(g.base, g.size) == g.zero_mapped * g.upages,
	      "a fresh region has %llu pages in memory (%llu frames map the huge zero page)",
	      U(present_pages(g.base, g.size)), U(g.zero_mapped));
	/*
	 * The units never written: zm of them map the huge zero page (they stay empty when
	 * read), zf others read as zeros by a fault each, besides the last one (read first).
	 */
	for (size_t u = 0; u < g.nunits; u++) {
		if (basic_written(u, g.nunits))
			continue;
		if (u < g.zero_mapped)
			zm++;
		else if (u != g.nunits - 1)
			zf++;
	}
	zl = g.nunits - 1 >= g.zero_mapped;

	/* Never-written memory reads zeros: one unit zero-filled (or none, mapping zeros). */
	for (size_t i = 0; i < 64; i++)
		CHECK(g.base[g.size - 1 - i * 61] == 0, "never-written byte is not zero");
	WAIT_UNTIL((st = rst(g.r)).pgfault_zero >= zl, WAIT_MS);
	CHECK(st.pgfault_zero >= zl && (zl || st.pgfault_zero == 0) && st.swpin == 0 &&
		      st.pgmajfault == 0,
	      "reading never-written memory%s: pgfault_zero %llu swpin %llu pgmajfault %llu",
	      zl ? "" : " (the huge zero page)", U(st.pgfault_zero), U(st.swpin), U(st.pgmajfault));

	/*
	 * Fill, from the top down: in order, a frame's first write would open the next ones
	 * ahead (fresh_ahead, frames_test "ahead"), resident and unwritten. The store tells
	 * same-filled units of its own (parts of a frame).
	 */
	for (size_t u = g.nunits; u-- > 0;) {
		if (!basic_written(u, g.nunits))
			continue;
		rg_fill(&g, u, u + 1, 1);
		w++;
		for (size_t off = u * g.unit; off < (u + 1) * g.unit; off += g.sunit)
			if (zf_same_filled(g.want + off, g.sunit, NULL))
				sf += g.sunit / PAGE;
	}
	res = w + zl; /* the units resident: written, and the one read if it faulted */
	WAIT_UNTIL((st = rst(g.r)).pgfault_zero >= res, WAIT_MS);
	CHECK(st.resident_bytes == res * g.unit,
	      "after writing %llu units and reading one: resident_bytes %llu, want %llu", U(w),
	      U(st.resident_bytes), U(res * g.unit));
	CHECK(st.pgfault_zero >= res && st.pgfault_zero <= res * g.upages,
	      "pgfault_zero %llu after first touches of %llu units", U(st.pgfault_zero), U(res));
	CHECK(st.swpout == 0 && st.swpin == 0 && st.pgmajfault == 0 && st.evicted_units == 0,
	      "swpout %llu swpin %llu before any pageout", U(st.swpout), U(st.swpin));
	zero0 = st.pgfault_zero;

	/* Page the whole region out. */
	n = zf_region_pageout(g.r, g.base, g.size);
	CHECK(n == (long)res, "zf_region_pageout(whole) = %ld, %llu units were resident", n,
	      U(res));
	st = rst(g.r);
	CHECK(st.swpout == res * g.upages && st.swpout_units[g.order] == res &&
		      st.evict_pageout == res && st.evicted_units == res &&
		      st.resident_bytes == 0 && st.reject == 0 && st.evict_reclaim == 0,
	      "after pageout of %llu units: swpout %llu swpout_units %llu evict_pageout %llu "
	      "evicted_units %llu resident_bytes %llu reject %llu",
	      U(res), U(st.swpout), U(st.swpout_units[g.order]), U(st.evict_pageout),
	      U(st.evicted_units), U(st.resident_bytes), U(st.reject));
	ss = sst(g.store);
	CHECK(ss.stored_pages == res * g.upages, "the store holds %llu pages, %llu were paged out",
	      U(ss.stored_pages), U(res * g.upages));
	CHECK(ss.orig_data_size == res * g.unit && ss.compr_data_size < ss.orig_data_size / 2,
	      "store: orig %llu compr %llu (real data compresses 2x or better)",
	      U(ss.orig_data_size), U(ss.compr_data_size));
	if (own_store) {
		/* The never-written unit that was read is a zero unit: same-filled too. */
		CHECK(ss.zswpout == res * g.upages && ss.same_filled_pages == sf + zl * g.upages,
		      "store: zswpout %llu same_filled %llu, want %llu and %llu", U(ss.zswpout),
		      U(ss.same_filled_pages), U(res * g.upages), U(sf + zl * g.upages));
	}
	CHECK(present_pages(g.base, g.size) == zm * g.upages,
	      "%llu pages still in memory after pageout (%llu units map the huge zero page)",
	      U(present_pages(g.base, g.size)), U(zm));
	n = zf_region_pageout(g.r, g.base, g.size);
	CHECK(n == 0, "a second pageout evicted %ld units", n);

	/*
	 * Read back, units in a scattered order, each first touched in its middle: the
	 * res evicted units are major faults (each of their pages, per page), the
	 * never-written ones zero-filled (but those that map the huge zero page: no fault).
	 */
	for (size_t i = 0; i < g.nunits; i++) {
		const size_t u = (i * 5 + 3) & (g.nunits - 1);

		touch_read(g.base + u * g.unit + g.upages / 2 * PAGE + 123);
		VERIFY_UNITS(&g, u, u + 1, "read back after pageout");
	}
	maj = res * faults_per_unit;
	WAIT_UNTIL((st = rst(g.r)).pgmajfault >= maj && st.pgfault_zero >= zero0 + zf &&
			   lat_sum(&st) >= st.pgmajfault,
		   WAIT_MS);
	if (!per_page) {
		CHECK(st.swpin == res * g.upages && st.swpin_units[g.order] == res &&
			      st.pgmajfault == res && st.swpin_fallback[g.order] == 0,
		      "whole swap-in of %llu units: swpin %llu swpin_units %llu pgmajfault %llu "
		      "swpin_fallback %llu",
		      U(res), U(st.swpin), U(st.swpin_units[g.order]), U(st.pgmajfault),
		      U(st.swpin_fallback[g.order]));
		CHECK(st.evicted_units == 0 && st.resident_bytes == g.size - zm * g.unit,
		      "after touching every unit: evicted_units %llu resident_bytes %llu (%llu "
		      "units map the huge zero page)",
		      U(st.evicted_units), U(st.resident_bytes), U(zm));
		ss = sst(g.store);
		CHECK(ss.stored_pages == 0,
		      "the store still holds %llu pages after every unit came back (keep_clean is "
		      "off)",
		      U(ss.stored_pages));
	} else {
		CHECK(st.swpin == res * g.upages && st.swpin_fallback[g.order] == res * g.upages &&
			      st.pgmajfault == res * g.upages && st.swpin_units[g.order] == 0,
		      "per-page swap-in of %llu pages: swpin %llu swpin_fallback %llu pgmajfault "
		      "%llu swpin_units %llu",
		      U(res * g.upages), U(st.swpin), U(st.swpin_fallback[g.order]),
		      U(st.pgmajfault), U(st.swpin_units[g.order]));
	}
	CHECK(st.pgfault_zero >= zero0 + zf && (zf || st.pgfault_zero == zero0),
	      "pgfault_zero %llu: reading %llu never-written units should add to %llu (%llu "
	      "more map the huge zero page)",
	      U(st.pgfault_zero), U(zf), U(zero0), U(zm));
	CHECK(st.fault_fail == 0, "fault_fail %llu", U(st.fault_fail));
	CHECK(lat_sum(&st) >= st.pgmajfault && st.fault_p50_ns > 0 &&
		      st.fault_p50_ns <= st.fault_p99_ns && st.fault_p99_ns <= st.fault_p999_ns,
	      "latency: %llu in the histogram for %llu major faults, p50 %llu p99 %llu p999 %llu",
	      U(lat_sum(&st)), U(st.pgmajfault), U(st.fault_p50_ns), U(st.fault_p99_ns),
	      U(st.fault_p999_ns));

	/* Writes after a swap-in go out with the next eviction. */
	for (size_t u = 0; u < g.nunits; u++) {
		const size_t off = u * g.unit + u % g.upages * PAGE + (u * 13) % (PAGE - 1);

		g.want[off] ^= 0x5a;
		g.base[off] = g.want[off];
	}
	PAGEOUT(&g, 0, g.nunits, g.nunits);
	VERIFY(&g, 0, g.size, "after writes, pageout and read back");
	maj += g.nunits * faults_per_unit;
	expect_majfaults(&g, maj, "every unit read back");

	/*
	 * Partly resident units (per-page mode) and writes into them: one fault each, and a
	 * unit partly swapped in is evicted too (the pages it lacks from its stored copy).
	 */
	PAGEOUT(&g, 0, g.nunits, g.nunits);
	{
		const size_t p1 = g.upages > 1 ? 1 : 0, p2 = g.upages > 2 ? 2 : 0;

		touch_read(g.base + p1 * PAGE);
		g.want[g.unit + p2 * PAGE + 7] ^= 0xff;
		g.base[g.unit + p2 * PAGE + 7] = g.want[g.unit + p2 * PAGE + 7];
		g.want[2 * g.unit + 9] ^= 0xff;
		g.base[2 * g.unit + 9] = g.want[2 * g.unit + 9];
		PAGEOUT(&g, 0, g.nunits, 3);
		VERIFY(&g, 0, g.size, "after touching three evicted units and evicting them again");
		maj += 3 + g.nunits * faults_per_unit;
	}

	basic_syscalls(&g);
	maj += 2 * faults_per_unit;
	expect_majfaults(&g, maj, "units 0 and 1 read through read(2) and write(2)");
	basic_text(&g);
	printf("ok   basic %s %s%s%s (%llu units)\n", mode_name(mode), unit_name(unit),
	       per_page ? " per-page" : "", rg_frame(&o) ? " in 2m frames" : "", U(g.nunits));
	rg_close(&g);
}

/* Bad options and ranges: -EINVAL. */
static void basic_invalid(void)
{
	static const uint32_t bad_units[] = { 2048, 3 * PAGE, 4u << 20, 12345 };
	zf_region_options o;
	zf_region *r = NULL;
	struct rg g;
	int ret;

	set_phase("basic invalid");
	o = ropts(ZF_FAULT_THREAD, KiB(64));
	rg_open(&g, &o, MiB(1), NULL); /* skips here without userfaultfd */
	for (size_t i = 0; i < sizeof(bad_units) / sizeof(bad_units[0]); i++) {
		o = ropts(ZF_FAULT_THREAD, bad_units[i]);
		ret = zf_region_create(NULL, MiB(1), &o, &r);
		CHECK(ret == -EINVAL, "unit %u: %s, want -EINVAL", bad_units[i], zf_strerror(ret));
	}
	o = ropts((enum zf_fault_mode)7, KiB(64));
	ret = zf_region_create(NULL, MiB(1), &o, &r);
	CHECK(ret == -EINVAL, "fault_mode 7: %s", zf_strerror(ret));
	o = ropts(ZF_FAULT_THREAD, KiB(64));
	o.swapin = (enum zf_swapin_mode)7;
	ret = zf_region_create(NULL, MiB(1), &o, &r);
	CHECK(ret == -EINVAL, "swapin 7: %s", zf_strerror(ret));
	/* Frames: 2 MiB or none, and neither with clean copies nor with per-page swap-in. */
	for (int i = 0; i < 4; i++) {
		o = ropts(ZF_FAULT_THREAD, KiB(64));
		o.frame = i == 0 ? 4u << 20 : i == 1 ? KiB(64) : ZF_FRAME_2M;
		o.keep_clean = i == 2;
		o.swapin = i == 3 ? ZF_SWAPIN_PER_PAGE : ZF_SWAPIN_WHOLE;
		ret = zf_region_create(NULL, MiB(4), &o, &r);
		CHECK(ret == -EINVAL, "frame %u%s: %s, want -EINVAL", o.frame,
		      i == 2   ? " with keep_clean"
		      : i == 3 ? " with per-page swap-in"
			       : "",
		      zf_strerror(ret));
	}
	CHECK(zf_region_pageout(g.r, g.base + g.size, PAGE) == -EINVAL, "pageout past the end");
	CHECK(zf_region_pageout(g.r, g.base - PAGE, PAGE) == -EINVAL, "pageout before the start");
	CHECK(zf_region_pageout(g.r, g.base + g.size - PAGE, 2 * PAGE) == -EINVAL,
	      "pageout across the end");
	CHECK(zf_region_advise(g.r, g.base, PAGE, 99) == -EINVAL, "advice 99");
	CHECK(zf_region_advise(g.r, g.base, PAGE, 0) == -EINVAL, "advice 0");
	CHECK(zf_region_advise(g.r, g.base + g.size, PAGE, ZF_ADV_COLD) == -EINVAL,
	      "advise past the end");
	rg_close(&g);
	zf_region_destroy(NULL);
	printf("ok   basic invalid options and ranges\n");
}

/*
 * zf_region_options.address: a region goes where it is asked when that range is free,
 * elsewhere when it is not, and works in both places.
 */
static void basic_address(void)
{
	const size_t size = MiB(8);
	uint8_t *probe = mmap(NULL, size + MiB(2), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *hint;
	zf_region_options o;
	zf_region *r = NULL, *r2 = NULL;
	int ret;

	set_phase("basic address");
	CHECK(probe != MAP_FAILED, "mmap: %s", strerror(errno));
	/* A free range: where the probe was, 2 MiB-aligned. */
	hint = (uint8_t *)(((uintptr_t)probe + MiB(2) - 1) & ~(uintptr_t)(MiB(2) - 1));
	munmap(probe, size + MiB(2));
	o = ropts(ZF_FAULT_THREAD, KiB(64));
	o.address = hint;
	ret = zf_region_create(NULL, size, &o, &r);
	CHECK(!ret, "zf_region_create at %p: %s", (void *)hint, zf_strerror(ret));
	CHECK(zf_region_base(r) == hint, "asked for %p, got %p", (void *)hint, zf_region_base(r));
	memset(hint, 0x5a, size);
	CHECK(zf_region_pageout(r, hint, size) > 0, "pageout");
	CHECK(hint[size - 1] == 0x5a && hint[0] == 0x5a, "bytes back");
	/* The same address again: taken, so anywhere else. */
	ret = zf_region_create(NULL, size, &o, &r2);
	CHECK(!ret, "zf_region_create at a taken address: %s", zf_strerror(ret));
	CHECK(zf_region_base(r2) != hint, "two regions at %p", (void *)hint);
	zf_region_destroy(r2);
	zf_region_destroy(r);
	printf("ok   basic address hint\n");
}

int case_basic(void)
{
	static const struct {
		uint32_t unit;
		enum zf_swapin_mode swapin;
		size_t size;
		int own_store;
	} cfgs[] = {
		{ KiB(4), ZF_SWAPIN_WHOLE, MiB(4), 1 },	    { KiB(64), ZF_SWAPIN_WHOLE, MiB(8), 0 },
		{ KiB(64), ZF_SWAPIN_PER_PAGE, MiB(8), 1 }, { MiB(2), ZF_SWAPIN_WHOLE, MiB(16), 1 },
		{ MiB(2), ZF_SWAPIN_PER_PAGE, MiB(8), 0 },
	};

	basic_invalid();
	basic_address();
	for (int m = 0; m < 2; m++)
		for (size_t i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++)
			basic_one(m ? ZF_FAULT_SIGBUS : ZF_FAULT_THREAD, cfgs[i].unit,
				  cfgs[i].swapin, cfgs[i].size, cfgs[i].own_store);
	return PASS;
}
