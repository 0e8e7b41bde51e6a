/*
 * sanitized.h - whether this build runs under a sanitizer (TSan in particular), and how
 * far the tests' deadlines stretch there: a slow build is not a hang. What the stress,
 * soak, region and frames tests share of it; tests/CMakeLists.txt stretches CTest's
 * timeouts by the same factor.
 */
#ifndef ZF_TEST_SANITIZED_H
#define ZF_TEST_SANITIZED_H

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

#if defined(__SANITIZE_THREAD__)
#define ZF_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ZF_TSAN 1
#endif
#endif

/*
 * Deadlines stretch under a sanitizer, never shrink. (Loops of attempts may run fewer
 * rounds there; what they wait for may not get less time.)
 */
#ifdef ZF_TSAN
#define DEADLINE_SCALE 8u
#elif SANITIZED
#define DEADLINE_SCALE 4u
#else
#define DEADLINE_SCALE 1u
#endif
#define DEADLINE_MS(ms) (DEADLINE_SCALE * (unsigned)(ms))
#define DEADLINE_S(s) (DEADLINE_SCALE * (unsigned)(s))

#endif /* ZF_TEST_SANITIZED_H */
