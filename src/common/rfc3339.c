/* RFC 3339 timestamps parsed to unix milliseconds (see rfc3339.h). */
#include <string.h>
#include <time.h>

#include "common/rfc3339.h"

int
rfc3339_parse_ms(const char *s, int64_t *ms)
{
	int64_t frac = 0, scale = 100, off = 0;
	const char *p;
	struct tm tm;
	time_t t;

	memset(&tm, 0, sizeof tm);
	/* strptime takes "1-1-1T1:1:1": the full-width date and time are 19 bytes. */
	if (strlen(s) < 20 || strspn(s, "0123456789") != 4 ||
	    (p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)) == NULL || p - s != 19)
		return -1;
	if (*p == '.') {
		if (*++p < '0' || *p > '9')
			return -1;
		for (; *p >= '0' && *p <= '9'; p++, scale /= 10)
			frac += (*p - '0') * scale;
	}
	if (*p == 'Z' || *p == 'z')
		p++;
	else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':' &&
	    strspn(p + 1, "0123456789") == 2 && strspn(p + 4, "0123456789") == 2) {
		off = ((p[1] - '0') * 10 + (p[2] - '0')) * 3600 + ((p[4] - '0') * 10 + (p[5] - '0')) * 60;
		if (*p == '-')
			off = -off;
		p += 6;
	} else
		return -1;
	if (*p != '\0' || (t = timegm(&tm)) == (time_t)-1)
		return -1;
	*ms = ((int64_t)t - off) * 1000 + frac;
	return 0;
}
