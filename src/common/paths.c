/* Resolving the data and cache directories, and name validation. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/paths.h"
#include "common/util.h"

const char *
paths_data_dir(void)
{
	const char *d = getenv("AIRLOCK_DATA_DIR");

	return d != NULL && *d != '\0' ? d : AIRLOCK_DEFAULT_DATA_DIR;
}

const char *
paths_cache_dir(void)
{
	const char *d = getenv("AIRLOCK_CACHE_DIR");

	return d != NULL && *d != '\0' ? d : AIRLOCK_DEFAULT_CACHE_DIR;
}

static char *
paths_join(const char *root, const char *fmt, va_list ap)
{
	char *rel, *out;

	xvasprintf(&rel, fmt, ap);
	xasprintf(&out, "%s/%s", root, rel);
	free(rel);
	return out;
}

char *
paths_data(const char *fmt, ...)
{
	va_list ap;
	char *p;

	va_start(ap, fmt);
	p = paths_join(paths_data_dir(), fmt, ap);
	va_end(ap);
	return p;
}

char *
paths_cache(const char *fmt, ...)
{
	va_list ap;
	char *p;

	va_start(ap, fmt);
	p = paths_join(paths_cache_dir(), fmt, ap);
	va_end(ap);
	return p;
}

int
paths_valid_name(const char *name)
{
	size_t i, len = strlen(name);

	if (len == 0 || len > AIRLOCK_NAME_MAX)
		return 0;
	for (i = 0; i < len; i++) {
		char c = name[i];
		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
			continue;
		if (i > 0 && (c == '.' || c == '_' || c == '-'))
			continue;
		return 0;
	}
	return 1;
}
