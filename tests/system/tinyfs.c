/*
 * tinyfs.c - see tinyfs.h.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "tinyfs.h"

char tinyfs_dir[64];
static volatile sig_atomic_t mounted;

void tinyfs_cleanup(void)
{
	if (mounted && umount2(tinyfs_dir, 0) < 0)
		umount2(tinyfs_dir, MNT_DETACH);
	mounted = 0;
	if (tinyfs_dir[0])
		rmdir(tinyfs_dir);
}

static void on_fatal(int sig)
{
	tinyfs_cleanup(); /* umount2 and rmdir are async-signal-safe */
	signal(sig, SIG_DFL);
	raise(sig);
}

int tinyfs_mount(const char *name, unsigned bytes)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGSEGV, SIGBUS, SIGABRT };
	char opts[64];

	if (geteuid() != 0) {
		printf("not root: skipped\n");
		return 77;
	}
	/* A private mount namespace, if we may: the mount dies with the process. */
	if (unshare(CLONE_NEWNS) == 0 && mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		fprintf(stderr, "warning: cannot make mounts private: %s\n", strerror(errno));
	snprintf(tinyfs_dir, sizeof(tinyfs_dir), "/tmp/zf-%s-XXXXXX", name);
	if (!mkdtemp(tinyfs_dir)) {
		perror("mkdtemp");
		tinyfs_dir[0] = '\0';
		return 1;
	}
	for (unsigned i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], on_fatal);
	snprintf(opts, sizeof(opts), "size=%u,mode=0700", bytes);
	if (mount("tmpfs", tinyfs_dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0) {
		printf("mount tmpfs: %s: skipped\n", strerror(errno));
		tinyfs_cleanup();
		return 77;
	}
	mounted = 1;
	return 0;
}

uint64_t tinyfs_free_bytes(void)
{
	struct statvfs sv;

	return statvfs(tinyfs_dir, &sv) == 0 ? (uint64_t)sv.f_bfree * sv.f_frsize : 0;
}
