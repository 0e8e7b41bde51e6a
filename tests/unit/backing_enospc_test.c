/* Description: the backing tier on a really full filesystem. A 256 KiB tmpfs is
 * mounted on a fresh directory and a backing file (O_TMPFILE) with a limit far above
 * that is opened on it; objects of uneven sizes are written in batches until writes
 * fail. Every failed write must say -ENOSPC and be counted, the store's contract must
 * hold (a failed write leaves its slots to the caller, who frees them; nothing written
 * before is harmed), every object written before reads back intact, and closing the
 * backing gives the space back. Run for pread/pwrite and for io_uring (when the kernel
 * allows it).
 *
 * The tmpfs is mounted in a private mount namespace when the kernel lets us make one, so
 * that even a killed test leaves no mount behind; the directory is removed on every
 * exit path, including fatal signals. Returns 0 pass, 1 fail, 77 skip (not root, or no
 * tmpfs mount allowed here).
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "backing/backing.h"
#include "../system/tinyfs.h"

enum { PASS = 0, FAIL = 1, SKIP = 77 };

#define FS_BYTES (256u << 10)
#define MAX_OBJS 256u
#define BATCH 3u
#define OBJ_MIN 3000u
#define OBJ_MAX 20000u

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);            \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			ret = FAIL;                                                                \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)

static uint8_t pattern(unsigned obj, uint32_t i)
{
	return (uint8_t)((obj * 2654435761u + i * 40503u) >> 13);
}

/* Fills the filesystem through one backing in the given mode; returns PASS/FAIL/SKIP. */
static int run(int mode, const char *name)
{
	static uint8_t data[MAX_OBJS][OBJ_MAX], back[OBJ_MAX];
	uint64_t slot[MAX_OBJS], bytes_ok = 0, seed = 12345;
	uint32_t len[MAX_OBJS];
	unsigned nobj = 0, nok = 0, nfail = 0, full_batches = 0;
	int ok[MAX_OBJS];
	const uint64_t free_before = tinyfs_free_bytes();
	struct backing_options o;
	struct backing_stats st;
	struct backing *b = NULL;
	int ret = PASS;

	backing_options_init(&o);
	o.path = tinyfs_dir;
	o.max_bytes = 16 * FS_BYTES; /* far more than the filesystem holds */
	o.io_mode = mode;
	o.queue_depth = 4;
	ret = backing_open(&o, &b);
	if (mode == BACKING_IO_URING && (ret == -ENOSYS || ret == -EPERM)) {
		printf("%s: io_uring unavailable (%s): skipped\n", name, zf_strerror(ret));
		return SKIP;
	}
	CHECK(ret == 0, "backing_open: %s", zf_strerror(ret));

	/* Batches of writes until the filesystem is full, then two more batches. */
	while (full_batches < 2) {
		struct backing_io io[BATCH];
		unsigned first = nobj;
		int failed;

		CHECK(nobj + BATCH <= MAX_OBJS, "the filesystem never filled up");
		for (unsigned k = 0; k < BATCH; k++, nobj++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			len[nobj] = OBJ_MIN + (uint32_t)(seed >> 33) % (OBJ_MAX - OBJ_MIN);
			for (uint32_t i = 0; i < len[nobj]; i++)
				data[nobj][i] = pattern(nobj, i);
			ret = backing_alloc(b, len[nobj], &slot[nobj]);
			CHECK(ret == 0, "backing_alloc: %s", zf_strerror(ret));
			io[k] = (struct backing_io){ slot[nobj], data[nobj], len[nobj],
						     BACKING_WRITE, 1 };
		}
		ret = PASS;
		failed = backing_rw(b, io, BATCH);
		CHECK(failed >= 0 && failed <= (int)BATCH, "backing_rw returned %d", failed);
		for (unsigned k = 0; k < BATCH; k++) {
			const unsigned j = first + k;

			CHECK(io[k].result == 0 || io[k].result == -ENOSPC,
			      "object %u: write failed with %s, not ENOSPC", j,
			      zf_strerror(io[k].result));
			ok[j] = io[k].result == 0;
			if (ok[j]) {
				nok++;
				bytes_ok += len[j];
			} else {
				/* The caller's part of the contract: free the slots, keep the data. */
				nfail++;
				backing_free(b, slot[j], len[j]);
			}
		}
		if (failed)
			full_batches++;
	}
	backing_get_stats(b, &st);
	printf("%s: %u objects (%" PRIu64 " bytes) written, %u writes failed with ENOSPC, "
	       "%" PRIu64 " bytes free left\n",
	       name, nok, bytes_ok, nfail, tinyfs_free_bytes());
	CHECK(nok > 0, "nothing could be written");
	CHECK(bytes_ok <= FS_BYTES, "wrote %" PRIu64 " bytes on a %u-byte filesystem", bytes_ok,
	      FS_BYTES);
	CHECK(st.write_errors == nfail, "write_errors %" PRIu64 ", %u failed", st.write_errors,
	      nfail);
	CHECK(st.writes == nok, "writes %" PRIu64 ", %u succeeded", st.writes, nok);
	CHECK(st.bytes_written == bytes_ok, "bytes_written %" PRIu64 ", expected %" PRIu64,
	      st.bytes_written, bytes_ok);
	CHECK(st.uring == (mode == BACKING_IO_URING), "uring %d", st.uring);

	/* Everything written before the disk filled up is intact, in batches and alone. */
	for (unsigned j = 0; j < nobj; j++) {
		struct backing_io io = { slot[j], back, len[j], BACKING_READ, 1 };

		if (!ok[j])
			continue;
		memset(back, 0, len[j]);
		ret = backing_rw(b, &io, 1);
		CHECK(ret == 0 && io.result == 0, "object %u: read failed: %s", j,
		      zf_strerror(io.result));
		CHECK(memcmp(back, data[j], len[j]) == 0, "object %u (slot %" PRIu64 ") differs", j,
		      slot[j]);
	}
	backing_get_stats(b, &st);
	CHECK(st.reads == nok && st.read_errors == 0, "reads %" PRIu64 ", read_errors %" PRIu64,
	      st.reads, st.read_errors);
	for (unsigned j = 0; j < nobj; j++) {
		if (ok[j])
			backing_free(b, slot[j], len[j]);
	}
	backing_get_stats(b, &st);
	CHECK(st.slots_used == 0, "%" PRIu64 " slots still used", st.slots_used);
	backing_close(b);
	b = NULL;
	CHECK(tinyfs_free_bytes() == free_before,
	      "close gave back %" PRIu64 " of %" PRIu64 " bytes", tinyfs_free_bytes(), free_before);
	ret = PASS;
out:
	backing_close(b);
	return ret;
}

int main(void)
{
	int ret, r;

	ret = tinyfs_mount("enospc", FS_BYTES);
	if (ret)
		return ret;

	ret = run(BACKING_IO_SYNC, "pread/pwrite");
	r = run(BACKING_IO_URING, "io_uring");
	if (r == FAIL)
		ret = FAIL;
	tinyfs_cleanup();
	printf("%s\n", ret == PASS ? "PASS" : "FAIL");
	return ret;
}
