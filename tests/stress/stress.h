/*
 * stress.h - what the stress tests share: whether a sanitizer is on (they shorten their
 * default runs under one), their parameters from argv or the environment, and a PRNG.
 */
#ifndef ZF_STRESS_H
#define ZF_STRESS_H

#include <stdint.h>
#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
	__has_feature(memory_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* argv[i] if there is one, else the environment variable env, else def. */
static inline unsigned long long arg_or_env(int argc, char **argv, int i, const char *env,
					    unsigned long long def)
{
	const char *v = argc > i ? argv[i] : getenv(env);

	return v && *v ? strtoull(v, NULL, 0) : def;
}

/* The next number of a splitmix64 sequence: a fast seeded PRNG, one state per thread. */
static inline uint64_t stress_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#endif /* ZF_STRESS_H */
