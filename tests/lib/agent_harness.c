/* Test harness for the guest agent (see agent_harness.h). Blocking on purpose. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/base64.h"
#include "agent_harness.h"

double
ah_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

pid_t
ah_spawn(char *const argv[], const char *ready, const char *log_path)
{
	int p[2], logfd;
	pid_t pid;
	char buf[4096];
	size_t have = 0;
	ssize_t n;
	struct pollfd pfd;

	if (pipe(p) == -1)
		return -1;
	if ((pid = fork()) == 0) {
		logfd = open(log_path != NULL ? log_path : "/dev/null",
		    O_WRONLY | O_CREAT | O_APPEND, 0644);
		dup2(p[1], 1);
		dup2(logfd, 2);
		close(p[0]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	if (ready == NULL) {
		close(p[0]);
		return pid;
	}
	buf[0] = '\0';
	pfd.fd = p[0];
	pfd.events = POLLIN;
	while (strstr(buf, ready) == NULL) {
		if (poll(&pfd, 1, AH_TIMEOUT_MS) <= 0 || have >= sizeof(buf) - 1)
			goto fail;
		if ((n = read(p[0], buf + have, sizeof(buf) - 1 - have)) <= 0)
			goto fail;
		have += (size_t)n;
		buf[have] = '\0';
	}
	/* Keep the pipe open in a detached reader so the child never gets SIGPIPE. */
	if (fork() == 0) {
		while (read(p[0], buf, sizeof(buf)) > 0)
			;
		_exit(0);
	}
	close(p[0]);
	return pid;
fail:
	close(p[0]);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	fprintf(stderr, "harness: %s did not print \"%s\"\n", argv[0], ready);
	return -1;
}

void
ah_kill(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	for (int i = 0; i < 200; i++) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

int
ah_alive(pid_t pid)
{
	return waitpid(pid, NULL, WNOHANG) == 0;
}

int
ah_unix_connect(const char *path)
{
	struct sockaddr_un sun;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		close(fd);
		return -1;
	}
	return fd;
}

int
ah_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t n;

	while (len > 0) {
		if ((n = send(fd, p, len, MSG_NOSIGNAL)) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int
ah_send(int fd, const char *method, const char *target, const char *headers, const void *body,
    size_t len)
{
	char head[8192];
	int n;

	n = snprintf(head, sizeof(head), "%s %s HTTP/1.1\r\nHost: agent\r\n%s%sContent-Length: %zu\r\n\r\n",
	    method, target, headers != NULL ? headers : "",
	    headers != NULL && *headers != '\0' && headers[strlen(headers) - 1] != '\n' ? "\r\n" : "",
	    len);
	if (n < 0 || (size_t)n >= sizeof(head))
		return -1;
	if (ah_write_all(fd, head, (size_t)n) == -1)
		return -1;
	return len > 0 ? ah_write_all(fd, body, len) : 0;
}

int
ah_send_chunked(int fd, const char *target, const char *ctype, const char *body, size_t len)
{
	char head[1024], sz[32];
	size_t off = 0, n;

	snprintf(head, sizeof(head), "POST %s HTTP/1.1\r\nHost: agent\r\nContent-Type: %s\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n", target, ctype);
	if (ah_write_all(fd, head, strlen(head)) == -1)
		return -1;
	while (off < len) {
		n = len - off > 7 ? 7 : len - off;
		snprintf(sz, sizeof(sz), "%zx\r\n", n);
		if (ah_write_all(fd, sz, strlen(sz)) == -1 || ah_write_all(fd, body + off, n) == -1 ||
		    ah_write_all(fd, "\r\n", 2) == -1)
			return -1;
		off += n;
	}
	return ah_write_all(fd, "0\r\n\r\n", 5);
}

/* Buffered reader state per fd would be nicer; responses here are read whole. */
static int
rd(int fd, char *buf, size_t len)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	ssize_t n;

	if (poll(&pfd, 1, AH_TIMEOUT_MS) <= 0)
		return -1;
	n = read(fd, buf, len);
	return (int)n;
}

static int
read_exact(int fd, char *buf, size_t len)
{
	int n;

	while (len > 0) {
		if ((n = rd(fd, buf, len)) <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Read a CRLF line byte by byte (heads and chunk sizes are small). */
static int
read_line(int fd, char *buf, size_t len)
{
	size_t i = 0;
	char c;

	while (i + 1 < len) {
		if (rd(fd, &c, 1) != 1)
			return -1;
		buf[i++] = c;
		if (i >= 2 && buf[i - 2] == '\r' && buf[i - 1] == '\n') {
			buf[i - 2] = '\0';
			return (int)(i - 2);
		}
	}
	return -1;
}

int
ah_read_head(int fd, struct hresp *r)
{
	char line[8192];
	size_t cap = 16384, used = 0;
	int n;

	memset(r, 0, sizeof(*r));
	r->head = calloc(1, cap);
	do {
		if ((n = read_line(fd, line, sizeof(line))) < 0)
			return -1;
		if (used == 0 && sscanf(line, "HTTP/1.%*d %d", &r->status) != 1)
			return -1;
		if (r->status == 100 && n == 0) {
			used = 0;	/* 100 Continue: the real head follows */
			r->status = 0;
			continue;
		}
		if (used + (size_t)n + 2 < cap) {
			memcpy(r->head + used, line, (size_t)n);
			used += (size_t)n;
			r->head[used++] = '\n';
		}
	} while (n > 0 || r->status == 0);
	return 0;
}

const char *
ah_header(const struct hresp *r, const char *name)
{
	static char val[1024];
	const char *p = r->head;
	size_t nl = strlen(name);

	while (p != NULL && *p != '\0') {
		if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			p += nl + 1;
			while (*p == ' ')
				p++;
			snprintf(val, sizeof(val), "%.*s", (int)strcspn(p, "\n"), p);
			return val;
		}
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return NULL;
}

ssize_t
ah_read_chunk(int fd, char **out)
{
	char line[64];
	unsigned long len;

	*out = NULL;
	if (read_line(fd, line, sizeof(line)) < 0)
		return -1;
	len = strtoul(line, NULL, 16);
	if (len == 0) {
		read_line(fd, line, sizeof(line));
		return 0;
	}
	*out = malloc(len + 1);
	if (read_exact(fd, *out, len) == -1 || read_line(fd, line, sizeof(line)) != 0) {
		free(*out);
		*out = NULL;
		return -1;
	}
	(*out)[len] = '\0';
	return (ssize_t)len;
}

int
ah_read_response(int fd, struct hresp *r)
{
	const char *cl, *te;
	char *chunk, *nb;
	ssize_t n;
	size_t len;
	int k;

	if (ah_read_head(fd, r) == -1)
		return -1;
	cl = ah_header(r, "Content-Length");
	len = cl != NULL ? strtoul(cl, NULL, 10) : 0;
	te = ah_header(r, "Transfer-Encoding");
	if (te != NULL && strcasecmp(te, "chunked") == 0) {
		r->body = calloc(1, 1);
		while ((n = ah_read_chunk(fd, &chunk)) > 0) {
			nb = realloc(r->body, r->len + (size_t)n + 1);
			r->body = nb;
			memcpy(r->body + r->len, chunk, (size_t)n);
			r->len += (size_t)n;
			r->body[r->len] = '\0';
			free(chunk);
		}
		return n == 0 ? 0 : -1;
	}
	if (cl == NULL && r->status != 204 && r->status != 304) {
		/* Until EOF. */
		size_t cap = 65536;

		r->body = malloc(cap + 1);
		while ((k = rd(fd, r->body + r->len, cap - r->len)) > 0) {
			r->len += (size_t)k;
			if (r->len == cap) {
				cap *= 2;
				r->body = realloc(r->body, cap + 1);
			}
		}
		r->body[r->len] = '\0';
		return 0;
	}
	r->body = malloc(len + 1);
	if (len > 0 && read_exact(fd, r->body, len) == -1)
		return -1;
	r->body[len] = '\0';
	r->len = len;
	return 0;
}

void
ah_resp_free(struct hresp *r)
{
	free(r->head);
	free(r->body);
	memset(r, 0, sizeof(*r));
}

int
ah_request(const char *sock, const char *method, const char *target, const char *headers,
    const void *body, size_t len, struct hresp *r)
{
	int fd, rc;

	memset(r, 0, sizeof(*r));
	if ((fd = ah_unix_connect(sock)) == -1)
		return -1;
	rc = ah_send(fd, method, target, headers, body, len);
	if (rc == 0)
		rc = ah_read_response(fd, r);
	close(fd);
	return rc;
}

char *
ah_envelope(const char *json, size_t *len)
{
	size_t n = strlen(json);
	char *e = malloc(n + 5);

	e[0] = 0;
	e[1] = (char)(n >> 24);
	e[2] = (char)(n >> 16);
	e[3] = (char)(n >> 8);
	e[4] = (char)n;
	memcpy(e + 5, json, n);
	*len = n + 5;
	return e;
}

/* Decode a base64 output event onto buf (a bad one is dropped whole: the check fails on it). */
static void
b64_append(const char *s, char **buf, size_t *len)
{
	size_t n = 0;

	*buf = realloc(*buf, *len + BASE64_DECODED_MAX(strlen(s)) + 1);
	if (base64_decode(s, strlen(s), (uint8_t *)*buf + *len, &n) == 0)
		*len += n;
	(*buf)[*len] = '\0';
}

int
ah_parse_stream(const char *body, size_t len, struct ah_run *run)
{
	const unsigned char *p = (const unsigned char *)body;
	size_t off = 0, n;
	json_t *j, *ev, *v, *d;
	int flags;

	while (off + 5 <= len) {
		flags = p[off];
		n = (size_t)p[off + 1] << 24 | (size_t)p[off + 2] << 16 | (size_t)p[off + 3] << 8 |
		    p[off + 4];
		if (off + 5 + n > len)
			return -1;
		if (run->end_stream)
			return -1;	/* nothing may follow the end-stream */
		j = json_loadb(body + off + 5, n, 0, NULL);
		off += 5 + n;
		if (j == NULL)
			return -1;
		if (flags & 2) {
			run->end_stream = 1;
			if ((v = json_object_get(j, "error")) != NULL)
				snprintf(run->stream_error, sizeof(run->stream_error), "%s",
				    json_string_value(json_object_get(v, "code")));
			json_decref(j);
			continue;
		}
		run->messages++;
		ev = json_object_get(j, "event");
		if ((v = json_object_get(ev, "start")) != NULL) {
			if (run->messages == 1)
				run->start_first = 1;
			run->pid = (int)json_integer_value(json_object_get(v, "pid"));
		} else if ((d = json_object_get(ev, "data")) != NULL) {
			if ((v = json_object_get(d, "stdout")) != NULL)
				b64_append(json_string_value(v), &run->out, &run->outlen);
			if ((v = json_object_get(d, "stderr")) != NULL)
				b64_append(json_string_value(v), &run->err, &run->errlen);
			if ((v = json_object_get(d, "pty")) != NULL)
				b64_append(json_string_value(v), &run->pty, &run->ptylen);
		} else if ((v = json_object_get(ev, "end")) != NULL) {
			run->ended = 1;
			run->exit_code = (int)json_integer_value(json_object_get(v, "exitCode"));
			run->exited = json_is_true(json_object_get(v, "exited"));
			snprintf(run->status, sizeof(run->status), "%s",
			    json_string_value(json_object_get(v, "status")) ?: "");
			snprintf(run->error, sizeof(run->error), "%s",
			    json_string_value(json_object_get(v, "error")) ?: "");
		} else if (json_object_get(ev, "keepalive") != NULL)
			run->keepalives++;
		json_decref(j);
	}
	return off == len ? 0 : -1;
}

int
ah_exec(const char *sock, const char *request_json, const char *headers, struct ah_run *run)
{
	char hdrs[2048];
	struct hresp r;
	size_t len;
	char *env = ah_envelope(request_json, &len);
	int rc;

	memset(run, 0, sizeof(*run));
	run->out = calloc(1, 1);
	run->err = calloc(1, 1);
	run->pty = calloc(1, 1);
	snprintf(hdrs, sizeof(hdrs), "Content-Type: application/connect+json\r\n"
	    "Connect-Protocol-Version: 1\r\n%s", headers != NULL ? headers : "");
	rc = ah_request(sock, "POST", "/process.Process/Start", hdrs, env, len, &r);
	free(env);
	if (rc == -1) {
		ah_resp_free(&r);
		return -1;
	}
	run->http_status = r.status;
	rc = ah_parse_stream(r.body, r.len, run);
	ah_resp_free(&r);
	return rc;
}

int
ah_read_response_rest(int fd, struct ah_run *run)
{
	char *chunk, *all = NULL;
	size_t len = 0;
	ssize_t n;
	int rc;

	memset(run, 0, sizeof(*run));
	run->out = calloc(1, 1);
	run->err = calloc(1, 1);
	run->pty = calloc(1, 1);
	while ((n = ah_read_chunk(fd, &chunk)) > 0) {
		all = realloc(all, len + (size_t)n);
		memcpy(all + len, chunk, (size_t)n);
		len += (size_t)n;
		free(chunk);
	}
	rc = n == 0 ? ah_parse_stream(all, len, run) : -1;
	free(all);
	return rc;
}

void
ah_run_free(struct ah_run *run)
{
	free(run->out);
	free(run->err);
	free(run->pty);
	memset(run, 0, sizeof(*run));
}

int
ah_rpc(const char *sock, const char *method, const char *json, const char *headers,
    struct hresp *r)
{
	char path[256], hdrs[2048];

	snprintf(path, sizeof(path), "/%s", method);
	snprintf(hdrs, sizeof(hdrs), "Content-Type: application/json\r\nConnect-Protocol-Version: 1\r\n%s",
	    headers != NULL ? headers : "");
	if (ah_request(sock, "POST", path, hdrs, json, strlen(json), r) == -1)
		return -1;
	return r->status;
}

static void *
exec_job(void *arg)
{
	struct ah_job *j = arg;
	struct ah_run run;
	char want[32], req[160];
	double t0 = ah_now_ms();

	snprintf(want, sizeof(want), "job %d\n", j->idx);
	snprintf(req, sizeof(req), "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"echo job %d\"]}}",
	    j->idx);
	j->ok = ah_exec(j->sock, req, NULL, &run) == 0 && run.ended && run.exit_code == 0 &&
	    strcmp(run.out, want) == 0 && run.end_stream;
	j->ms = ah_now_ms() - t0;
	ah_run_free(&run);
	return NULL;
}

int
ah_exec_jobs(const char *sock, struct ah_job *jobs, int n, double *sum, double *maxms)
{
	int i, ok = 0;

	*sum = *maxms = 0;
	for (i = 0; i < n; i++) {
		memset(&jobs[i], 0, sizeof(jobs[i]));
		jobs[i].sock = sock;
		jobs[i].idx = i;
		pthread_create(&jobs[i].t, NULL, exec_job, &jobs[i]);
	}
	for (i = 0; i < n; i++) {
		pthread_join(jobs[i].t, NULL);
		ok += jobs[i].ok;
		*sum += jobs[i].ms;
		if (jobs[i].ms > *maxms)
			*maxms = jobs[i].ms;
	}
	return ok;
}
