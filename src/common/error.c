/*
 * error.c - version, error strings and the logging hook.
 *
 * Error codes are plain negative errno values, so that zf_strerror() can defer to the
 * C library's text and only name the meanings zfolio gives some of them (E2BIG for
 * "did not compress", EBADMSG for corrupt data).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

void common_log(enum zf_log_level level, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (!log_fn)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	log_fn(level, line, log_arg);
}
