/*
 * op_report.h - how the op-stream interpreters (zpool_ops.c, store_ops.c, backing_ops.c)
 * end a failed check: the message after their own context line, the input written to
 * the file that the environment variable dump_env names (to keep it as a regress-* seed),
 * then abort() so that libFuzzer and the replay see a crash.
 */
#ifndef ZF_FUZZ_OP_REPORT_H
#define ZF_FUZZ_OP_REPORT_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((noreturn, format(printf, 5, 0))) static inline void
op_report_end(const char *who, const char *dump_env, const void *data, size_t size, const char *fmt,
	      va_list ap)
{
	const char *dump = getenv(dump_env);

	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	if (dump && data) {
		FILE *f = fopen(dump, "wb");

		if (f && fwrite(data, 1, size, f) == size && fclose(f) == 0)
			fprintf(stderr, "%s: input written to %s\n", who, dump);
		else
			fprintf(stderr, "%s: could not write the input to %s\n", who, dump);
	}
	abort();
}

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond))                                                                       \
			fail(__VA_ARGS__);                                                         \
	} while (0)

#endif /* ZF_FUZZ_OP_REPORT_H */
