/*
 * error.c - version, error strings and the logging hook (errors to stderr by default).
 *
 * Error codes are plain negative errno values, so that zf_strerror() can defer to the
 * C library's text and only name the meanings zfolio gives some of them (E2BIG for
 * "did not compress", EBADMSG for corrupt data).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define ZF_STR_(x) #x
#define ZF_STR(x) ZF_STR_(x)

unsigned zf_version_number(void)
{
	return ZF_VERSION_NUMBER;
}

const char *zf_version_string(void)
{
	return ZF_STR(ZF_VERSION_MAJOR) "." ZF_STR(ZF_VERSION_MINOR) "." ZF_STR(ZF_VERSION_PATCH);
}

const char *zf_strerror(int err)
{
	switch (-err) {
	case 0:
		return "success";
	case E2BIG:
		return "data did not compress below the limit (E2BIG)";
	case EBADMSG:
		return "corrupt data (EBADMSG)";
	case ENOSPC:
		return "pool or device full (ENOSPC)";
	case EFBIG:
		return "too large (EFBIG)";
	default:
		break;
	}
	if (err >= 0)
		return "not an error code";
	/* strerror() may use a shared buffer for unknown values; the known ones are static. */
	return strerror(-err);
}

static zf_log_fn *log_fn;
static void *log_arg;

void zf_set_log_fn(zf_log_fn *fn, void *arg)
{
	log_fn = fn;
	log_arg = arg;
}

/*
 * Without a sink, errors go to stderr and the rest nowhere: an error is what comes before
 * a fail-closed abort (the region, the backing file's ring), and a process must not die
 * without a word. One write(2) of the whole line: no stdio lock on the way to an abort,
 * and lines from two threads do not interleave.
 */
static void log_default(enum zf_log_level level, const char *line)
{
	char out[sizeof("zfolio: ") + 512];
	int len;

	if (level != ZF_LOG_ERROR)
		return;
	len = snprintf(out, sizeof(out), "zfolio: %s\n", line);
	if (len > 0) {
		ssize_t ignored = write(STDERR_FILENO, out, ZF_MIN((size_t)len, sizeof(out) - 1));

		(void)ignored;
	}
}

void common_log(enum zf_log_level level, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (!log_fn && level != ZF_LOG_ERROR)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (log_fn)
		log_fn(level, line, log_arg);
	else
		log_default(level, line);
}
