/* Minimal unit-test harness: each test binary runs its cases and exits non-zero on failure. */
#ifndef AIRLOCK_T_H
#define AIRLOCK_T_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_failed, t_checks;

#define CHECK(cond) do {						\
	t_checks++;							\
	if (!(cond)) {							\
		t_failed++;						\
		fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
	}								\
} while (0)

#define CHECK_STR(a, b) do {						\
	const char *t_a = (a), *t_b = (b);				\
	t_checks++;							\
	if (t_a == NULL || t_b == NULL || strcmp(t_a, t_b) != 0) {	\
		t_failed++;						\
		fprintf(stderr, "%s:%d: \"%s\" != \"%s\"\n", __FILE__, __LINE__, \
		    t_a ? t_a : "(null)", t_b ? t_b : "(null)");	\
	}								\
} while (0)

/* cause must contain needle. */
#define CHECK_CAUSE(cause, needle) do {					\
	t_checks++;							\
	if ((cause) == NULL || strstr((cause), (needle)) == NULL) {	\
		t_failed++;						\
		fprintf(stderr, "%s:%d: cause \"%s\" lacks \"%s\"\n", __FILE__, __LINE__, \
		    (cause) ? (cause) : "(null)", (needle));		\
	}								\
} while (0)

#define T_RUN(fn) do { fprintf(stderr, "-- %s\n", #fn); fn(); } while (0)

static inline int
t_done(void)
{
	fprintf(stderr, "%d checks, %d failed\n", t_checks, t_failed);
	return t_failed == 0 ? 0 : 1;
}

#endif
