/*
 * main.c - the zfolio command: dispatches to one subcommand per job.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
	"usage: zfolio <command> [options]\n"
	"\n"
	"zfolio reruns the kernel's large-folio compression experiments on memory images,\n"
	"in user space.\n"
	"\n"
	"commands:\n"
	"  pageout       the large-folio swap experiment: swap-out and swap-in times at\n"
	"                4k and 64k units, on zfolio and on the running kernel's zram\n"
	"  bench         codec, zpool, store and region benchmarks ('zfolio bench --help')\n"
	"  capture PID   dump the private anonymous memory of a process as a memory image\n"
	"  run -- PROG   run an unmodified program with its memory in zfolio, under a limit\n"
	"  stat [RUN]    the live counters of the zfolio runs going on\n"
	"  version       print the library version\n"
	"\n"
	"Run 'zfolio <command> --help' for a command's options.\n";

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : 0;
	}
	if (!strcmp(argv[1], "bench"))
		return cmd_bench(argc - 1, argv + 1);
	if (!strcmp(argv[1], "pageout"))
		return cmd_pageout(argc - 1, argv + 1);
	if (!strcmp(argv[1], "capture"))
		return cmd_capture(argc - 1, argv + 1);
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(argv[1], "stat"))
		return cmd_stat(argc - 1, argv + 1);
	if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
		printf("zfolio %s (codecs: %s)\n", zf_version_string(), zf_codec_algorithms());
		return 0;
	}
	fprintf(stderr, "zfolio: unknown command '%s'\n\n%s", argv[1], usage);
	return EXIT_USAGE;
}
