/* RFC 3339 timestamps for API objects and events; untrusted text as JSON strings. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/json_time.h"
#include "common/util.h"

json_t *
json_time_ms(int64_t ms)
{
	char buf[40];
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (ms == 0)
		return json_null();
	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	return json_sprintf("%s.%03dZ", buf, (int)(ms % 1000));
}

json_t *
json_text(const char *s)
{
	json_t *j = json_string(s != NULL ? s : "");
	char *esc;

	if (j != NULL)
		return j;
	esc = utf8_escape(s, strlen(s), 0);
	j = json_string(esc);
	free(esc);
	return j;
}
