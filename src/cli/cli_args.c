/*
 * Argument helpers shared by the commands: pure functions, unit-tested in
 * tests/unit/test_cli.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/util.h"

int
cli_args_kv(const char *s, char **key, char **val, char **cause)
{
	const char *eq = strchr(s, '=');

	*key = *val = NULL;
	if (eq == NULL || eq == s) {
		cause_set(cause, "\"%s\": expected KEY=VALUE", s);
		return -1;
	}
	*key = xstrndup(s, (size_t)(eq - s));
	*val = xstrdup(eq + 1);
	return 0;
}

int
cli_args_remote(const char *arg, char **id, char **path)
{
	const char *colon = strchr(arg, ':'), *p;

	*id = *path = NULL;
	/*
	 * Only a plain id before the first colon makes it remote, so
	 * "./a:b" and "/tmp/a:b" stay local paths.
	 */
	if (colon == NULL || colon == arg)
		return 0;
	for (p = arg; p < colon; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.'))
			return 0;
	*id = xstrndup(arg, (size_t)(colon - arg));
	*path = xstrdup(colon + 1);
	return 1;
}

int
cli_args_num(const char *s, long long min, long long max, long long *out, const char *what,
    char **cause)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno != 0 || v < min || v > max) {
		cause_set(cause, "%s: \"%s\" is not a number from %lld to %lld", what, s, min, max);
		return -1;
	}
	*out = v;
	return 0;
}
