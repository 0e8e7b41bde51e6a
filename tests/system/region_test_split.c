/*
 * region_test_split.c - units that span two of the program's mappings: it mprotect()ed
 * part of a unit (PROT_READ), which splits the mapping there. The kernel refuses a
 * UFFDIO_COPY, UFFDIO_ZEROPAGE or UFFDIO_MOVE across a mapping's end as a range, so
 * each must go piece by piece:
 *
 *  split  an evicted unit read back when a page of it is read-only (a swap-in placed
 *         as one range was refused, taken for "gone", and the fault came back forever:
 *         the soak test's hang), a write into an evicted unit part of which is
 *         read-only, a never-written unit with a read-only page read (zeros), a pageout
 *         of split units (the kernel refuses to move a read-only page into our staging:
 *         they stay resident, whole), and the same units evicted once the protection is
 *         undone (a pageout whose units all went back left their pages in staging, and
 *         every later move of those units was refused); and a clean unit whose
 *         eviction is refused after some of its pages moved out, then written there.
 */
#include <string.h>
#include <sys/mman.h>

#include "region_harness.h"

static void protect_range(uint8_t *p, size_t len, int prot)
{
	CHECK(!mprotect(p, len, prot), "mprotect: %s", strerror(errno));
}

static int split(const struct cfg *c)
{
	const size_t n = 8;
	const zf_region_options o = ropts(c->mode, c->unit);
	const size_t unit = rg_place_unit(&o), mid = unit / 2, pg = (unit / PAGE / 2) * PAGE;
	size_t zl;
	struct rg g;
	long ret;

	rg_open(&g, &o, n * c->unit, store_make(c->unit, 0));
	rg_fill(&g, 0, n - 1, 2); /* unit n - 1 never written */
	PAGEOUT(&g, 0, n - 1, n - 1);

	set_phase("read an evicted unit with one read-only page");
	protect_range(g.base + 1 * g.unit + pg, PAGE, PROT_READ);
	VERIFY_UNITS(&g, 1, 2, "an evicted unit with a read-only page");

	set_phase("write into an evicted unit whose first half is read-only");
	protect_range(g.base + 2 * g.unit, mid, PROT_READ);
	gen_page(g.want + 2 * g.unit + mid, 2 * g.upages + g.upages / 2, 3, g.upages);
	memcpy(g.base + 2 * g.unit + mid, g.want + 2 * g.unit + mid, PAGE);
	VERIFY_UNITS(&g, 2, 3, "an evicted unit written past its read-only half");

	set_phase("read a never-written unit with one read-only page");
	protect_range(g.base + (n - 1) * g.unit + pg, PAGE, PROT_READ);
	VERIFY_UNITS(&g, n - 1, n, "a never-written unit with a read-only page");

	set_phase("page out units with read-only parts");
	ret = zf_region_pageout(g.r, g.base, g.size);
	CHECK(ret >= 0 && ret <= (long)n, "pageout: %ld", ret);
	VERIFY_UNITS(&g, 0, n, "after a pageout of split units");

	set_phase("page them out once they are read-write again");
	protect_range(g.base, g.size, PROT_READ | PROT_WRITE);
	ret = zf_region_pageout(g.r, g.base, g.size);
	CHECK(ret >= 0, "pageout: %ld", ret);
	/*
	 * But a never-written frame that maps the huge zero page (frames): read, it stays
	 * empty, and keeps the zero page (no memory); a pageout has nothing to take there.
	 */
	zl = n - 1 < g.zero_mapped;
	CHECK(units_in_memory(&g, 0, n - zl) == 0, "%llu units still in memory after a pageout",
	      U(units_in_memory(&g, 0, n - zl)));
	CHECK(!zl || memory_pages(g.base + (n - 1) * g.unit, g.unit) == 0,
	      "the never-written frame, read, holds %llu pages of memory",
	      U(memory_pages(g.base + (n - 1) * g.unit, g.unit)));
	VERIFY_UNITS(&g, 0, n, "after a pageout of the whole region");
	rg_close(&g);
	return PASS;
}

/*
 * A clean unit (keep_clean: its pages write-protected, the store keeps its copy) whose
 * eviction is refused after some of its pages moved out: those went back without the
 * protection, the unit stayed clean, a write to them was not seen, and the next
 * eviction kept the stale copy (a lost write).
 */
static int split_clean(const struct cfg *c)
{
	const size_t n = 4;
	zf_region_options o = ropts(c->mode, c->unit);
	const size_t pg = (c->unit / PAGE / 2) * PAGE;
	uint8_t *u1;
	struct rg g;
	long ret;

	o.keep_clean = 1;
	rg_open(&g, &o, n * c->unit, store_make(c->unit, 0));
	rg_fill(&g, 0, n, 2);
	PAGEOUT(&g, 0, n, n);
	u1 = g.base + g.unit;
	VERIFY_UNITS(&g, 1, 2, "a clean unit read back");

	set_phase("an eviction of the clean unit refused after its first pages moved");
	protect_range(u1 + pg, PAGE, PROT_READ);
	ret = zf_region_pageout(g.r, u1, g.unit);
	CHECK(ret == 0, "pageout of a unit with a read-only page: %ld", ret);
	protect_range(u1 + pg, PAGE, PROT_READ | PROT_WRITE);

	set_phase("a write to a page that went back, then a pageout");
	gen_page(g.want + g.unit, g.upages, 3, g.upages);
	memcpy(u1, g.want + g.unit, PAGE);
	PAGEOUT(&g, 1, 2, 1);
	VERIFY_UNITS(&g, 0, n, "the clean unit written after its eviction was refused");
	rg_close(&g);
	return PASS;
}

int case_split(void)
{
	static const uint32_t units[] = { KiB(16), KiB(64), MiB(2) };

	each_config("split", split, units, 3, 0, 30);
	each_config("split clean", split_clean, units, 3, 0, 30);
	return failures ? FAIL : PASS;
}
