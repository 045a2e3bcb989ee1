/*
 * POST /init: what makes a restored or pooled guest its own machine. Every
 * clone of one snapshot wakes with the same memory: the same CRNG state,
 * hostname, machine-id and a wall clock as old as the snapshot. The host
 * sends, and this applies in this order (the clock first, so nothing
 * that runs afterwards stamps the snapshot's time):
 *   timestamp   CLOCK_REALTIME (ns; RFC 3339 as envd, or an integer)
 *   entropy     credited with RNDADDENTROPY, then RNDRESEEDCRNG: without
 *               the reseed the kernel keeps serving from the CRNG key it
 *               had in the snapshot until its next scheduled reseed (up
 *               to 60 s), so clones' first getrandom() would be equal
 *   hostname    sethostname, /etc/hostname, a 127.0.1.1 line in /etc/hosts
 *   machineId   /etc/machine-id (and /var/lib/dbus/machine-id when it is
 *               a file of its own)
 *   accessToken, envVars, sandboxId (AIRLOCK_SANDBOX_ID, E2B_SANDBOX_ID)
 * The agent keeps no random state of its own to reseed: it calls
 * getrandom() each time it needs bytes. The template has no DNS cache to
 * flush (no nscd, systemd-resolved or dnsmasq; glibc's stub resolver keeps
 * nothing between lookups): answers are cached by the island's gateway on
 * the host, which is per sandbox.
 * Only PID 1 touches the clock, the RNG and the system files: the
 * host-run test agent applies the token and env alone.
 * The whole body is validated before anything is applied; a bad field is
 * a 400 naming it, a failed step a 500 naming the step.
 */
#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/random.h>

#include <event2/event.h>

#include "guest/agent/agent.h"
#include "common/base64.h"
#include "http/http_server.h"
#include "guest/agent/agent_init.h"
#include "guest/agent/agent_start.h"
#include "guest/agent/agent_volumes.h"

#ifndef RNDRESEEDCRNG
#define RNDRESEEDCRNG	_IO('R', 0x07)	/* Linux 4.17 */
#endif

#define INIT_HOSTS_MAX	(64 * 1024)	/* larger /etc/hosts: not ours to rewrite */
#define INIT_HOSTS_ADDR	"127.0.1.1"	/* Debian's line for the own hostname */

static int
fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int
fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

int
init_valid_hostname(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > INIT_MAX_HOSTNAME || s[0] == '-' || s[n - 1] == '-')
		return 0;
	for (i = 0; i < n; i++)
		if (!isascii((unsigned char)s[i]) ||
		    !(isalnum((unsigned char)s[i]) || s[i] == '-'))
			return 0;
	return 1;
}

static int
digits(const char **p, int n, int *out)
{
	int v = 0;

	while (n-- > 0) {
		if (**p < '0' || **p > '9')
			return -1;
		v = v * 10 + (*(*p)++ - '0');
	}
	*out = v;
	return 0;
}

static int
expect(const char **p, char c)
{
	if (**p != c && !(isalpha((unsigned char)c) && **p == tolower((unsigned char)c)))
		return -1;
	(*p)++;
	return 0;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian; Howard Hinnant's formula). */
static long long
days_from_civil(int y, int m, int d)
{
	long long era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static int
parse_rfc3339(const char *s, struct timespec *ts)
{
	static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	const char *p = s;
	int y, mo, d, h, mi, sec, oh = 0, om = 0, sign = 0, nd = 0;
	long ns = 0;
	long long t;

	if (digits(&p, 4, &y) || expect(&p, '-') || digits(&p, 2, &mo) || expect(&p, '-') ||
	    digits(&p, 2, &d) || expect(&p, 'T') || digits(&p, 2, &h) || expect(&p, ':') ||
	    digits(&p, 2, &mi) || expect(&p, ':') || digits(&p, 2, &sec))
		return -1;
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9') {
			if (++nd > 9)
				return -1;
			ns = ns * 10 + (*p++ - '0');
		}
		if (nd == 0)
			return -1;
		while (nd++ < 9)
			ns *= 10;
	}
	if (*p == 'Z' || *p == 'z')
		p++;
	else if (*p == '+' || *p == '-') {
		sign = *p++ == '-' ? -1 : 1;
		if (digits(&p, 2, &oh) || expect(&p, ':') || digits(&p, 2, &om) || oh > 23 ||
		    om > 59)
			return -1;
	} else
		return -1;
	if (*p != '\0' || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] ||
	    (mo == 2 && d == 29 && !(y % 4 == 0 && (y % 100 != 0 || y % 400 == 0))) ||
	    h > 23 || mi > 59 || sec > 60)
		return -1;
	if (sec == 60)	/* a leap second: the clock cannot show it; use the next */
		sec = 59, ns = 999999999;
	t = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
	t -= sign * (oh * 3600 + om * 60);
	ts->tv_sec = (time_t)t;
	ts->tv_nsec = ns;
	return 0;
}

int
init_parse_time(json_t *v, struct timespec *ts)
{
	long long n;

	if (json_is_integer(v)) {
		n = json_integer_value(v);
		if (n < 0)
			return -1;
		/* The unit by magnitude: any date in range has a distinct one. */
		if (n >= 100000000000000000ll) {		/* ns */
			ts->tv_sec = (time_t)(n / 1000000000);
			ts->tv_nsec = n % 1000000000;
		} else if (n >= 100000000000000ll) {	/* µs */
			ts->tv_sec = (time_t)(n / 1000000);
			ts->tv_nsec = (n % 1000000) * 1000;
		} else if (n >= 100000000000ll) {	/* ms */
			ts->tv_sec = (time_t)(n / 1000);
			ts->tv_nsec = (n % 1000) * 1000000;
		} else {
			ts->tv_sec = (time_t)n;
			ts->tv_nsec = 0;
		}
	} else if (!json_is_string(v) || parse_rfc3339(json_string_value(v), ts) == -1)
		return -1;
	if (ts->tv_sec < INIT_MIN_TIME || ts->tv_sec >= INIT_MAX_TIME)
		return -1;
	return 0;
}

/* A string field of at most max bytes; 1 present, 0 absent, -1 bad (err set). */
static int
str_field(json_t *root, const char *camel, const char *snake, size_t max, const char **out,
    char *err, size_t errlen)
{
	json_t *v = jget(root, camel, snake);

	if (v == NULL)
		return 0;
	if (!json_is_string(v))
		return fail(err, errlen, "%s: must be a string", camel);
	if (json_string_length(v) > max)
		return fail(err, errlen, "%s: longer than %zu bytes", camel, max);
	*out = json_string_value(v);
	return 1;
}

static int
parse_env(json_t *env, char *err, size_t errlen)
{
	const char *key, *p;
	json_t *v;

	if (!json_is_object(env))
		return fail(err, errlen, "envVars: must be an object of strings");
	if (json_object_size(env) > AGENT_MAX_ENV)
		return fail(err, errlen, "envVars: more than %d variables", AGENT_MAX_ENV);
	json_object_foreach(env, key, v) {
		if (*key == '\0')
			return fail(err, errlen, "envVars: an empty name");
		for (p = key; *p != '\0'; p++)
			if (*p == '=' || (unsigned char)*p < 0x20 || *p == 0x7f)
				return fail(err, errlen, "envVars: name \"%.64s\" has '=' or a "
				    "control character", key);
		if (!json_is_string(v))
			return fail(err, errlen, "envVars.%.64s: must be a string", key);
	}
	return 0;
}

int
init_parse(const void *body, size_t len, struct init_req *r, char *err, size_t errlen)
{
	json_error_t jerr;
	const char *s;
	json_t *v;
	size_t i;
	int rc;

	memset(r, 0, sizeof(*r));
	if (len == 0)
		r->root = json_object();
	else if ((r->root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr)) == NULL)
		return fail(err, errlen, "body: not JSON: %s", jerr.text);
	if (!json_is_object(r->root))
		goto bad_obj;
	if ((r->env = jget(r->root, "envVars", "env_vars")) != NULL &&
	    parse_env(r->env, err, errlen) == -1)
		goto bad;
	if ((rc = str_field(r->root, "accessToken", "access_token", INIT_MAX_TOKEN, &r->token,
	    err, errlen)) == -1)
		goto bad;
	for (s = r->token; rc == 1 && *s != '\0'; s++)
		if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f) {
			fail(err, errlen, "accessToken: only printable ASCII without spaces");
			goto bad;
		}
	if ((v = json_object_get(r->root, "timestamp")) != NULL) {
		if (init_parse_time(v, &r->time) == -1) {
			fail(err, errlen, "timestamp: must be RFC 3339 or an integer of s, ms, "
			    "us or ns since the epoch, between 2020 and 2200");
			goto bad;
		}
		r->has_time = 1;
	}
	if ((rc = str_field(r->root, "entropy", NULL, (INIT_MAX_ENTROPY + 2) / 3 * 4, &s, err,
	    errlen)) == -1)
		goto bad;
	if (rc == 1 && (base64_decode_alloc(s, strlen(s), &r->entropy, &r->entropy_len) == -1 ||
	    r->entropy_len > INIT_MAX_ENTROPY)) {
		fail(err, errlen, "entropy: must be standard base64 of at most %d bytes",
		    INIT_MAX_ENTROPY);
		goto bad;
	}
	if ((rc = str_field(r->root, "hostname", NULL, INIT_MAX_HOSTNAME, &s, err,
	    errlen)) == -1)
		goto bad;
	if (rc == 1) {
		if (!init_valid_hostname(s)) {
			fail(err, errlen, "hostname: must be one RFC 1123 label: 1-%d letters, "
			    "digits and '-', not starting or ending with '-'", INIT_MAX_HOSTNAME);
			goto bad;
		}
		snprintf(r->hostname, sizeof(r->hostname), "%s", s);
	}
	if ((rc = str_field(r->root, "machineId", "machine_id", INIT_MACHINE_ID_LEN, &s, err,
	    errlen)) == -1)
		goto bad;
	if (rc == 1) {
		for (i = 0; s[i] != '\0' && ((s[i] >= '0' && s[i] <= '9') ||
		    (s[i] >= 'a' && s[i] <= 'f')); i++)
			;
		if (i != INIT_MACHINE_ID_LEN || s[i] != '\0' || strspn(s, "0") == i) {
			fail(err, errlen, "machineId: must be %d lowercase hex digits, not all "
			    "zero", INIT_MACHINE_ID_LEN);
			goto bad;
		}
		snprintf(r->machine_id, sizeof(r->machine_id), "%s", s);
	}
	if ((rc = str_field(r->root, "sandboxId", "sandbox_id", INIT_MAX_SANDBOX_ID, &s, err,
	    errlen)) == -1)
		goto bad;
	if (rc == 1) {
		for (i = 0; s[i] != '\0' && (isalnum((unsigned char)s[i]) || s[i] == '-' ||
		    s[i] == '_'); i++)
			;
		if (i == 0 || s[i] != '\0' || !isascii((unsigned char)s[0])) {
			fail(err, errlen, "sandboxId: must be 1-%d letters, digits, '-' or '_'",
			    INIT_MAX_SANDBOX_ID);
			goto bad;
		}
		snprintf(r->sandbox_id, sizeof(r->sandbox_id), "%s", s);
	}
	r->volumes = json_object_get(r->root, "volumes");
	if (volumes_parse(r->volumes, err, errlen) == -1)
		goto bad;
	return 0;
bad_obj:
	fail(err, errlen, "body: must be a JSON object");
bad:
	init_req_free(r);
	return -1;
}

void
init_req_free(struct init_req *r)
{
	if (r->entropy != NULL) {
		explicit_bzero(r->entropy, r->entropy_len);
		free(r->entropy);
	}
	json_decref(r->root);
	memset(r, 0, sizeof(*r));
}

/* ---- applying it (PID 1) ---- */

/*
 * Make path hold exactly data. An existing regular file is overwritten in
 * place (pwrite, then ftruncate to the new length); a missing one is
 * created with O_EXCL. Not a new file renamed over the old one, nor
 * O_TRUNC: ext4 (auto_da_alloc, the default) answers both by starting
 * writeback of the new data at once, so every such step waited for the
 * guest disk: 3-5 ms each at the median and up to 145 ms on a loaded host
 * (measured in a pooled guest), three of them on every claim's /init,
 * against 0.3 ms in place. The price is that a reader racing the write
 * could see a mix of old and new bytes; /init runs before the sandbox
 * serves any request of its owner (a pool claim, a restore), so the
 * readers are at most processes of the guest frozen in a snapshot.
 * O_NOFOLLOW|O_NONBLOCK and the S_ISREG check: whatever root in the guest
 * left at the path (a symlink, a FIFO, a directory) fails the step
 * instead of blocking the agent or writing elsewhere.
 */
static int
replace_file(const char *path, const char *data, mode_t mode, char *err, size_t errlen)
{
	size_t len = strlen(data);
	struct stat st;
	int fd;

	fd = open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd == -1 && errno == ENOENT)
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
		    mode);
	if (fd == -1)
		return fail(err, errlen, "open %s: %s", path, strerror(errno));
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		close(fd);
		return fail(err, errlen, "%s: not a regular file", path);
	}
	if (pwrite(fd, data, len, 0) != (ssize_t)len || ftruncate(fd, (off_t)len) == -1 ||
	    fchmod(fd, mode) == -1) {
		fail(err, errlen, "write %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* A regular file of at most max bytes, NUL-terminated; NULL (and *len 0) otherwise. */
static char *
read_small(const char *path, size_t max, size_t *len)
{
	struct stat st;
	char *buf;
	ssize_t n;
	int fd;

	*len = 0;
	if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) == -1)
		return NULL;
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) || (size_t)st.st_size > max ||
	    (buf = malloc((size_t)st.st_size + 1)) == NULL) {
		close(fd);
		return NULL;
	}
	n = read(fd, buf, (size_t)st.st_size);
	close(fd);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	*len = (size_t)n;
	return buf;
}

/* /etc/hosts with our 127.0.1.1 line replaced (other lines kept as they are). */
static int
set_hosts(const char *name, char *err, size_t errlen)
{
	char *old, *out, *line, *next;
	size_t len, o = 0, al = strlen(INIT_HOSTS_ADDR);
	int rc;

	old = read_small("/etc/hosts", INIT_HOSTS_MAX, &len);
	if ((out = malloc(len + strlen(name) + 32)) == NULL)
		abort();
	for (line = old; line != NULL && *line != '\0'; line = next) {
		next = strchr(line, '\n');
		next = next != NULL ? next + 1 : line + strlen(line);
		if (strncmp(line, INIT_HOSTS_ADDR, al) == 0 && (line[al] == ' ' || line[al] == '\t'))
			continue;
		memcpy(out + o, line, (size_t)(next - line));
		o += (size_t)(next - line);
		if (next[-1] != '\n')
			out[o++] = '\n';
	}
	o += (size_t)sprintf(out + o, "%s\t%s\n", INIT_HOSTS_ADDR, name);
	out[o] = '\0';
	rc = replace_file("/etc/hosts", out, 0644, err, errlen);
	free(old);
	free(out);
	return rc;
}

static int
apply_system(const struct init_req *r, char *err, size_t errlen)
{
	struct {
		int	entropy_count;
		int	buf_size;
		uint8_t	buf[INIT_MAX_ENTROPY];
	} rnd;
	int fd, rc = 0;

	if (r->has_time && clock_settime(CLOCK_REALTIME, &r->time) == -1)
		return fail(err, errlen, "timestamp: clock_settime: %s", strerror(errno));
	if ((fd = open("/dev/random", O_WRONLY | O_CLOEXEC)) == -1)
		return fail(err, errlen, "entropy: open /dev/random: %s", strerror(errno));
	if (r->entropy_len > 0) {
		/* Credited: the host's bytes are as good as its own getrandom(). */
		rnd.entropy_count = (int)r->entropy_len * 8;
		rnd.buf_size = (int)r->entropy_len;
		memcpy(rnd.buf, r->entropy, r->entropy_len);
		if (ioctl(fd, RNDADDENTROPY, &rnd) == -1)
			rc = fail(err, errlen, "entropy: RNDADDENTROPY: %s", strerror(errno));
		explicit_bzero(&rnd, sizeof(rnd));
	}
	/* The CRNG takes a new key from the input pool now, not at its next reseed. */
	if (rc == 0 && ioctl(fd, RNDRESEEDCRNG) == -1)
		rc = fail(err, errlen, "entropy: RNDRESEEDCRNG: %s", strerror(errno));
	close(fd);
	if (rc == -1)
		return -1;
	if (r->hostname[0] != '\0' && sethostname(r->hostname, strlen(r->hostname)) == -1)
		return fail(err, errlen, "hostname: sethostname: %s", strerror(errno));
	return 0;
}

/*
 * The identity's files, written after /init has answered (see
 * init_files_flush): /etc/hostname, the 127.0.1.1 line of /etc/hosts,
 * /etc/machine-id (and dbus's copy when it is a file of its own).
 */
static struct {
	int	pending;
	char	hostname[INIT_MAX_HOSTNAME + 1];
	char	machine_id[INIT_MACHINE_ID_LEN + 1];
} init_files;
static struct event *init_files_ev;

static int
apply_files(const char *hostname, const char *machine_id, char *err, size_t errlen)
{
	char line[INIT_MAX_HOSTNAME + 2];
	struct stat st;

	if (hostname[0] != '\0') {
		snprintf(line, sizeof(line), "%s\n", hostname);
		if (replace_file("/etc/hostname", line, 0644, err, errlen) == -1 ||
		    set_hosts(hostname, err, errlen) == -1)
			return -1;
	}
	if (machine_id[0] != '\0') {
		char id[INIT_MACHINE_ID_LEN + 2];

		snprintf(id, sizeof(id), "%s\n", machine_id);
		if (replace_file("/etc/machine-id", id, 0444, err, errlen) == -1)
			return -1;
		/* Often a symlink to /etc/machine-id: then it is already right. */
		if (lstat("/var/lib/dbus/machine-id", &st) == 0 && S_ISREG(st.st_mode) &&
		    replace_file("/var/lib/dbus/machine-id", id, 0444, err, errlen) == -1)
			return -1;
	}
	return 0;
}

void
init_files_flush(void)
{
	char err[256];

	if (!init_files.pending)
		return;
	init_files.pending = 0;
	if (init_files_ev != NULL)
		evtimer_del(init_files_ev);
	/* /init has answered: a failure here (root replaced a file with a FIFO) is logged. */
	if (apply_files(init_files.hostname, init_files.machine_id, err, sizeof(err)) == -1)
		alog("init: %s", err);
}

static void
init_files_cb(evutil_socket_t fd, short what, void *arg)
{
	init_files_flush();
}

static void
reply_error(struct http_req *req, int status, const char *msg)
{
	json_t *j = json_pack("{s:i, s:s}", "code", status, "message", msg);
	char *s = json_dumps(j, JSON_COMPACT);

	json_decref(j);
	http_reply(req, status, "application/json", s, s != NULL ? strlen(s) : 0);
	free(s);
}

void
init_end(struct http_req *req, void *arg)
{
	size_t bodylen;
	const char *body = http_req_body(req, &bodylen);
	struct init_req r;
	const char *key;
	char err[256];
	json_t *v;

	if (init_parse(body, bodylen, &r, err,
	    sizeof(err)) == -1) {
		reply_error(req, 400, err);
		return;
	}
	if (ag.ag_pid1 && (apply_system(&r, err, sizeof(err)) == -1 ||
	    (r.volumes != NULL && volumes_mount(r.volumes, err, sizeof(err)) == -1))) {
		alog("init: %s", err);
		init_req_free(&r);
		reply_error(req, 500, err);
		return;
	}
	if (r.token != NULL) {
		free(ag.ag_token);
		ag.ag_token = *r.token != '\0' ? strdup(r.token) : NULL;
	}
	json_object_foreach(r.env, key, v)
		env_set(&ag.ag_env, &ag.ag_nenv, key, json_string_value(v));
	if (r.sandbox_id[0] != '\0') {
		env_set(&ag.ag_env, &ag.ag_nenv, "AIRLOCK_SANDBOX_ID", r.sandbox_id);
		env_set(&ag.ag_env, &ag.ag_nenv, "E2B_SANDBOX_ID", r.sandbox_id);
	}
	if (ag.ag_pid1 && (r.hostname[0] != '\0' || r.machine_id[0] != '\0')) {
		struct timeval tv = { 0, INIT_FILES_DELAY_MS * 1000 };

		init_files_flush();	/* an earlier /init's, if still due */
		snprintf(init_files.hostname, sizeof(init_files.hostname), "%s", r.hostname);
		snprintf(init_files.machine_id, sizeof(init_files.machine_id), "%s", r.machine_id);
		init_files.pending = 1;
		if (init_files_ev == NULL)
			init_files_ev = evtimer_new(ag.ag_base, init_files_cb, NULL);
		evtimer_add(init_files_ev, &tv);
	}
	init_req_free(&r);
	start_write_env();
	/* 204 now, or once the template's start command is ready (agent_start.c). */
	start_init_reply(req);
}
