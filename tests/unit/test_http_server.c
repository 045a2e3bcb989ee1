/*
 * HTTP server over real sockets: keep-alive, pipelining, buffered and
 * streamed bodies, limits, malformed input, SSE and client disconnects.
 * The server runs on the main thread's event loop; a client thread speaks
 * raw HTTP with blocking sockets.
 *
 * Connection limits run against a second server on the same loop with short
 * times and small caps: head and body deadlines that bytes do not extend,
 * keep-alive idle (shorter under pressure), the per-address cap, and
 * shedding near the total cap. Clients bind 127.x.y.z to be many addresses.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "http/http_server.h"
#include "common/util.h"
#include "t.h"

static struct event_base *base;
static struct http_server *srv, *lsrv;
static int port, lport;
static uint64_t streamed;
static volatile int sse_closed, owned_abandoned;

struct sse_state {
	struct http_req	*req;
	struct event	*ev;
	int		 n;
};

static void
sse_closed_cb(struct http_req *req, void *arg)
{
	struct sse_state *st = arg;

	sse_closed = 1;
	event_free(st->ev);
	http_req_unref(st->req);
	free(st);
}

static void
sse_tick(evutil_socket_t fd, short ev, void *arg)
{
	struct sse_state *st = arg;
	struct timeval tv = { 0, 20000 };

	http_sse_event(st->req, "tick", json_pack("{s:i}", "n", st->n));
	if (++st->n == 3 && strcmp(http_req_path(st->req), "/sse") == 0) {
		http_reply_end(st->req);
		event_free(st->ev);
		http_req_unref(st->req);
		free(st);
		return;
	}
	event_add(st->ev, &tv);
}

static void
on_buffered(struct http_req *req, void *arg)
{
	size_t len;
	const char *body = http_req_body(req, &len);

	http_reply_json(req, 200, json_pack("{s:i,s:s#}", "len", (json_int_t)len, "head",
	    body, len < 8 ? len : 8));
}

/* A handler holding req while its body buffers, as the API's calls do. */
static void
on_owned(struct http_req *req, void *arg)
{
	http_req_on_close(req, NULL, NULL);
	on_buffered(req, arg);
	http_req_unref(req);
}

static void
owned_gone(struct http_req *req, void *arg)
{
	owned_abandoned++;
	http_req_unref(req);
}

static void
on_stream_body(struct http_req *req, const char *data, size_t n, void *arg)
{
	streamed += n;
}

static void
on_stream_end(struct http_req *req, void *arg)
{
	http_reply_json(req, 201, json_pack("{s:I}", "bytes", (json_int_t)streamed));
}

static void
router(struct http_req *req, void *arg)
{
	const char *p = http_req_path(req);

	if (strcmp(p, "/hello") == 0)
		http_reply(req, 200, "text/plain", "hi", 2);
	else if (strcmp(p, "/echo") == 0)
		http_req_buffer(req, 1024, on_buffered, NULL);
	else if (strcmp(p, "/owned") == 0) {
		http_req_ref(req);
		http_req_on_close(req, owned_gone, NULL);
		http_req_buffer(req, 1024, on_owned, NULL);
	} else if (strcmp(p, "/upload") == 0) {
		streamed = 0;
		http_req_stream(req, 0, on_stream_body, on_stream_end, NULL);
	} else if (strcmp(p, "/sse") == 0 || strcmp(p, "/sse-forever") == 0) {
		struct sse_state *st = xcalloc(1, sizeof(*st));
		struct timeval tv = { 0, 20000 };
		st->req = req;
		http_req_ref(req);
		http_req_on_close(req, sse_closed_cb, st);
		st->ev = evtimer_new(base, sse_tick, st);
		http_sse_start(req);
		event_add(st->ev, &tv);
	} else if (strcmp(p, "/twice") == 0) {
		/* A buggy handler: every reply after the first must be dropped. */
		http_reply(req, 200, "text/plain", "one", 3);
		http_reply_error(req, 500, "internal", "two");
		http_reply_start(req, 201, "text/plain");
		http_reply_chunk(req, "three", 5);
		http_reply_end(req);
	} else if (strcmp(p, "/abort") == 0) {
		/* A stream that fails midway (the envd proxy's guest died): cut, not short. */
		http_reply_start(req, 200, "application/octet-stream");
		http_reply_chunk(req, "part", 4);
		http_reply_abort(req);
	} else if (strcmp(p, "/twice-stream") == 0) {
		http_reply_start(req, 200, "text/plain");
		http_reply_chunk(req, "one", 3);
		http_reply(req, 500, "text/plain", "two", 3);
		http_reply_end(req);
	} else if (strcmp(p, "/notjson") == 0)
		/* json_pack refuses a non-UTF-8 string: NULL reaches the reply. */
		http_reply_json(req, 200, json_pack("{s:s}", "m", "\xff"));
	else if (strcmp(p, "/stop") == 0) {
		http_reply(req, 204, NULL, NULL, 0);
		event_base_loopexit(base, NULL);
	} else
		http_reply_error(req, 404, "not_found", "no route %s", p);
}

/* A connection to the limits server from source address src (127.0.0.0/8 is all local). */
static int
dial_from(const char *src)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)lport) };
	struct sockaddr_in me = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	inet_pton(AF_INET, src, &me.sin_addr);
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	if (bind(fd, (struct sockaddr *)&me, sizeof(me)) == -1 ||
	    connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1)
		abort();
	return fd;
}

static int
dial(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1)
		abort();
	return fd;
}

static void
send_all(int fd, const char *s, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, s, n);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

/* Read until needle has appeared count times or EOF; returns malloc'd text. */
static char *
read_until(int fd, const char *needle, int count)
{
	size_t cap = 1 << 16, len = 0;
	char *buf = xmalloc(cap + 1);
	struct timeval tv = { 10, 0 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	for (;;) {
		buf[len] = '\0';
		int seen = 0;
		for (const char *p = buf; (p = strstr(p, needle)) != NULL; p++)
			seen++;
		if (seen >= count || len == cap)
			break;
		ssize_t n = read(fd, buf + len, cap - len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	return buf;
}

static int
closed_by_peer(int fd)
{
	char c;
	struct timeval tv = { 10, 0 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	/* Unread request bytes turn the server's close into a reset. */
	ssize_t n = read(fd, &c, 1);
	return n == 0 || (n == -1 && errno == ECONNRESET);
}

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Wait up to max_ms for the server to close fd, writing the next byte of
 * trickle (if any) every every_ms. Returns the ms from t0 to the close, or
 * -1 if fd is still open; what the server said before closing goes to got.
 */
static long
wait_closed(int fd, uint64_t t0, long max_ms, const char *trickle, long every_ms,
    char *got, size_t gotsz)
{
	uint64_t next = now_ms();
	size_t glen = 0;

	got[0] = '\0';
	while ((long)(now_ms() - t0) < max_ms) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		if (trickle != NULL && *trickle != '\0' && now_ms() >= next) {
			if (write(fd, trickle++, 1) != 1)
				return (long)(now_ms() - t0);
			next += (uint64_t)every_ms;
		}
		if (poll(&pfd, 1, 20) == 1) {
			ssize_t n = read(fd, got + glen, gotsz - 1 - glen);
			if (n <= 0)
				return (long)(now_ms() - t0);
			glen += (size_t)n;
			got[glen] = '\0';
		}
	}
	return -1;
}

/* The server closes fd within ms. */
static int
closed_within(int fd, int ms)
{
	char got[4096];

	return wait_closed(fd, now_ms(), ms, NULL, 0, got, sizeof(got)) != -1;
}

/* fd keeps receiving (an SSE stream) for ms and is not closed. */
static int
alive(int fd, int ms)
{
	uint64_t t0 = now_ms();
	char buf[4096];
	size_t total = 0;

	while ((long)(now_ms() - t0) < ms) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		if (poll(&pfd, 1, 20) == 1) {
			ssize_t n = read(fd, buf, sizeof(buf));
			if (n <= 0)
				return 0;
			total += (size_t)n;
		}
	}
	return total > 0;
}

/* fd shows no close (nor anything else) for ms. */
static int
still_open(int fd, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, ms) == 0;
}

/* A refusal: 503, Retry-After, and a body as long as its Content-Length says. */
static void
check_refused(int fd)
{
	char *r = read_until(fd, "}}", 1), *cl, *body;

	CHECK(strstr(r, "503 Service Unavailable") != NULL && strstr(r, "Retry-After: 1") != NULL);
	cl = strstr(r, "Content-Length: ");
	body = strstr(r, "\r\n\r\n");
	CHECK(cl != NULL && body != NULL && strtoul(cl + 16, NULL, 10) == strlen(body + 4));
	CHECK(closed_by_peer(fd));
	free(r);
}

static void
get_hello(int fd)
{
	const char *req = "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n";
	char *r;

	send_all(fd, req, strlen(req));
	r = read_until(fd, "hi", 1);
	CHECK(strstr(r, "200 OK") != NULL);
	free(r);
}

static int
sse_from(const char *src)
{
	int fd = dial_from(src);
	char *r;

	send_all(fd, "GET /sse-forever HTTP/1.1\r\nHost: t\r\n\r\n", 39);
	r = read_until(fd, "event: tick", 1);
	CHECK(strstr(r, "event: tick") != NULL);
	free(r);
	return fd;
}

/* The whole head within head_ms of accept, however steadily bytes trickle. */
static void
limits_head(void)
{
	const char *head = "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n";
	char got[4096];
	uint64_t t0 = now_ms();
	int fd = dial_from("127.0.0.9");
	long ms = wait_closed(fd, t0, 4000, head, 1000, got, sizeof(got));

	fprintf(stderr, "head trickled 1 byte/s: closed after %ld ms (deadline 2000)\n", ms);
	CHECK(ms >= 1800 && ms <= 2700);
	CHECK(strstr(got, "200 OK") == NULL);
	close(fd);

	/* On keep-alive, the next head counts from its first byte, not per byte. */
	fd = dial_from("127.0.0.9");
	get_hello(fd);
	usleep(500000);
	t0 = now_ms();
	ms = wait_closed(fd, t0, 4000, head, 1000, got, sizeof(got));
	fprintf(stderr, "second head trickled 1 byte/s: closed %ld ms after its first byte\n", ms);
	CHECK(ms >= 1800 && ms <= 2700);
	close(fd);
}

/* A body below the minimum rate gets a 408 and the close; one at rate is served. */
static void
limits_body(void)
{
	const char *head = "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n";
	char slow[1001], got[4096], *r;
	uint64_t t0;
	long ms;
	int fd;

	memset(slow, 'z', 1000);
	slow[1000] = '\0';
	fd = dial_from("127.0.0.10");
	send_all(fd, head, strlen(head));
	t0 = now_ms();
	/* 10 bytes/s against 100: 1 s grace plus 10 ms per byte, about 1.1 s. */
	ms = wait_closed(fd, t0, 4000, slow, 100, got, sizeof(got));
	fprintf(stderr, "body at 10 B/s (minimum 100): closed after %ld ms\n", ms);
	CHECK(ms >= 900 && ms <= 2000);
	CHECK(strstr(got, "408 Request Timeout") != NULL && strstr(got, "minimum rate") != NULL);
	close(fd);

	/* 250 bytes/s for 3 s, three times the grace: served. */
	fd = dial_from("127.0.0.10");
	head = "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 750\r\n\r\n";
	send_all(fd, head, strlen(head));
	for (int i = 0; i < 15; i++) {
		send_all(fd, slow, 50);
		usleep(200000);
	}
	r = read_until(fd, "}", 1);
	CHECK(strstr(r, "200 OK") != NULL && strstr(r, "\"len\":750") != NULL);
	free(r);
	close(fd);
}

/* Keep-alive idle: idle_ms, or idle_pressure_ms while half the cap is open. */
static void
limits_idle(void)
{
	char got[256];
	uint64_t t0;
	long ms;
	int fd, others[3];

	fd = dial_from("127.0.0.11");
	get_hello(fd);
	t0 = now_ms();
	ms = wait_closed(fd, t0, 5000, NULL, 0, got, sizeof(got));
	fprintf(stderr, "keep-alive idle alone: closed after %ld ms (idle 3000)\n", ms);
	CHECK(ms >= 2700 && ms <= 3700);
	close(fd);

	for (int i = 0; i < 3; i++) {
		char src[32];
		snprintf(src, sizeof(src), "127.0.0.%d", 12 + i);
		others[i] = dial_from(src);
	}
	fd = dial_from("127.0.0.11");
	get_hello(fd);
	t0 = now_ms();
	ms = wait_closed(fd, t0, 5000, NULL, 0, got, sizeof(got));
	fprintf(stderr, "keep-alive idle with 4 of 8 open: closed after %ld ms (1000)\n", ms);
	CHECK(ms >= 800 && ms <= 1600);
	close(fd);
	for (int i = 0; i < 3; i++)
		close(others[i]);
	usleep(200000);
}

/* Past the per-address cap: the address's idle go first; all busy, refused. */
static void
limits_per_addr(void)
{
	int busy[3], idle[3], fd;

	for (int i = 0; i < 3; i++)
		busy[i] = sse_from("127.0.0.2");
	fd = dial_from("127.0.0.2");
	check_refused(fd);
	close(fd);
	fd = dial_from("127.0.0.3");
	get_hello(fd);
	close(fd);
	for (int i = 0; i < 3; i++)
		close(busy[i]);

	for (int i = 0; i < 3; i++) {
		idle[i] = dial_from("127.0.0.4");
		usleep(50000);
	}
	usleep(400000);
	fd = dial_from("127.0.0.4");
	get_hello(fd);
	CHECK(closed_within(idle[0], 300));
	CHECK(still_open(idle[1], 100) && still_open(idle[2], 100));
	close(fd);
	for (int i = 0; i < 3; i++)
		close(idle[i]);
	usleep(200000);
}

/*
 * At the total cap: a new client that sends its request is served, the
 * oldest connection without a request is shed, one with a request in
 * progress (older still) is not. All in progress: refused.
 */
/*
 * While a request is in progress, bytes pipelined behind it are read only
 * up to HTTP_INPUT_MAX: then the server stops reading and the client's
 * writes stall on the socket's buffers. Without the cap the server swallowed
 * all 64 MB here.
 */
static void
pipelined_bounded(void)
{
	static char junk[65536];
	size_t sent = 0;
	int fd = dial(), fl;
	char *r;

	memset(junk, 'A', sizeof(junk));
	sse_closed = 0;
	send_all(fd, "GET /sse-forever HTTP/1.1\r\nHost: t\r\n\r\n", 39);
	r = read_until(fd, "event: tick", 1);
	CHECK(strstr(r, "event: tick") != NULL);
	free(r);
	fl = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	while (sent < 64u * 1024 * 1024) {
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		ssize_t w;

		/* A second without room: the server has stopped reading. */
		if (poll(&pfd, 1, 1000) != 1)
			break;
		if ((w = write(fd, junk, sizeof(junk))) <= 0)
			break;
		sent += (size_t)w;
	}
	/* Kernel socket buffers on loopback hold a few MB at most. */
	CHECK(sent < 32u * 1024 * 1024);
	/* Not reading does not hide the client leaving: the stream's next write notices. */
	close(fd);
	for (int i = 0; i < 500 && !sse_closed; i++)
		usleep(10000);
	CHECK(sse_closed);
}

static void
limits_shed(void)
{
	int busy, idle[7], all[8], fd;
	char src[32];

	busy = sse_from("127.0.1.1");
	for (int i = 0; i < 7; i++) {
		snprintf(src, sizeof(src), "127.0.1.%d", 2 + i);
		idle[i] = dial_from(src);
		usleep(30000);
	}
	usleep(400000);
	fd = dial_from("127.0.2.1");
	get_hello(fd);
	CHECK(closed_within(idle[0], 300));
	for (int i = 1; i < 7; i++)
		CHECK(still_open(idle[i], i == 1 ? 100 : 0));
	CHECK(alive(busy, 300));
	close(fd);
	close(busy);
	for (int i = 0; i < 7; i++)
		close(idle[i]);
	usleep(200000);

	for (int i = 0; i < 8; i++) {
		snprintf(src, sizeof(src), "127.0.3.%d", 1 + i);
		all[i] = sse_from(src);
	}
	fd = dial_from("127.0.4.1");
	check_refused(fd);
	close(fd);
	for (int i = 0; i < 8; i++)
		close(all[i]);
	usleep(200000);
}

static void *
client(void *arg)
{
	char *r;
	int fd;

	/* Keep-alive + pipelining: three requests in one write, answered in order. */
	fd = dial();
	const char *pipe3 = "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n"
	    "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nabcde"
	    "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n";
	send_all(fd, pipe3, strlen(pipe3));
	r = read_until(fd, "HTTP/1.1 ", 3);
	char *a = strstr(r, "200 OK"), *b = strstr(r, "\"len\":5"), *c = strstr(r, "404 Not Found");
	CHECK(a != NULL && b != NULL && c != NULL && a < b && b < c);
	CHECK(strstr(r, "\"code\":\"not_found\"") != NULL);
	free(r);

	/* An aborted stream: its chunk, no last chunk, and the connection closes. */
	{
		int afd = dial();
		const char *ab = "GET /abort HTTP/1.1\r\nHost: t\r\n\r\n";
		send_all(afd, ab, strlen(ab));
		r = read_until(afd, "part\r\n", 1);
		CHECK(strstr(r, "200 OK") != NULL && strstr(r, "4\r\npart\r\n") != NULL);
		free(r);
		CHECK(closed_by_peer(afd));
		close(afd);
	}

	/* Chunked request body into the buffered handler. */
	const char *chunked = "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n";
	send_all(fd, chunked, strlen(chunked));
	r = read_until(fd, "}", 1);
	CHECK(strstr(r, "\"len\":7") != NULL && strstr(r, "\"head\":\"abcdefg\"") != NULL);
	free(r);

	/* Over the buffered limit: 413, then the connection closes. */
	const char *big = "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n";
	send_all(fd, big, strlen(big));
	char pad[5000];
	memset(pad, 'x', sizeof(pad));
	send_all(fd, pad, sizeof(pad));
	r = read_until(fd, "}}", 1);
	CHECK(strstr(r, "413") != NULL && strstr(r, "too_large") != NULL);
	free(r);
	CHECK(closed_by_peer(fd));
	close(fd);

	/*
	 * A handler holding the request while the body buffers learns when the
	 * body is refused (413, bad framing): it must let go, or req leaks.
	 */
	fd = dial();
	const char *big2 = "POST /owned HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n";
	send_all(fd, big2, strlen(big2));
	send_all(fd, pad, sizeof(pad));
	r = read_until(fd, "}}", 1);
	CHECK(strstr(r, "413") != NULL);
	free(r);
	close(fd);
	fd = dial();
	const char *badchunk = "POST /owned HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "zz\r\nabc\r\n";
	send_all(fd, badchunk, strlen(badchunk));
	r = read_until(fd, "}}", 1);
	CHECK(strstr(r, "400 Bad Request") != NULL);
	free(r);
	close(fd);
	/* ... and when the client leaves mid-body; a complete body is not abandoned. */
	fd = dial();
	const char *half = "POST /owned HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc";
	send_all(fd, half, strlen(half));
	usleep(50000);
	close(fd);
	for (int i = 0; i < 200 && owned_abandoned < 3; i++)
		usleep(10000);
	CHECK(owned_abandoned == 3);
	fd = dial();
	const char *whole = "POST /owned HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc";
	send_all(fd, whole, strlen(whole));
	r = read_until(fd, "}", 1);
	CHECK(strstr(r, "\"len\":3") != NULL);
	free(r);
	close(fd);
	CHECK(owned_abandoned == 3);

	/* Streamed upload of 8 MiB in chunks: counted, never buffered whole. */
	fd = dial();
	const char *up = "PUT /upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
	send_all(fd, up, strlen(up));
	char *chunk = xmalloc(65536 + 16);
	int hl = snprintf(chunk, 16, "10000\r\n");
	memset(chunk + hl, 'y', 65536);
	memcpy(chunk + hl + 65536, "\r\n", 2);
	for (int i = 0; i < 128; i++)
		send_all(fd, chunk, (size_t)hl + 65536 + 2);
	send_all(fd, "0\r\n\r\n", 5);
	free(chunk);
	r = read_until(fd, "}", 1);
	CHECK(strstr(r, "201 Created") != NULL && strstr(r, "\"bytes\":8388608") != NULL);
	free(r);
	close(fd);

	/* One reply per request, however often a handler tries; the next request is intact. */
	fd = dial();
	const char *twice = "GET /twice HTTP/1.1\r\nHost: t\r\n\r\n"
	    "GET /twice-stream HTTP/1.1\r\nHost: t\r\n\r\n"
	    "GET /notjson HTTP/1.1\r\nHost: t\r\n\r\n"
	    "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n";
	send_all(fd, twice, strlen(twice));
	r = read_until(fd, "\r\n\r\nhi", 1);
	{
		int heads = 0;
		for (const char *q = r; (q = strstr(q, "HTTP/1.1 ")) != NULL; q++)
			heads++;
		CHECK(heads == 4);
		CHECK(strstr(r, "Content-Length: 3\r\n\r\none") != NULL);
		CHECK(strstr(r, "two") == NULL && strstr(r, "three") == NULL);
		CHECK(strstr(r, "201") == NULL);
		CHECK(strstr(r, "3\r\none\r\n0\r\n\r\n") != NULL);
		/* Not an empty "{}": the one error shape, with a cause. */
		CHECK(strstr(r, "500 Internal Server Error") != NULL &&
		    strstr(r, "\"code\":\"internal\"") != NULL && strstr(r, "\r\n\r\n{}") == NULL);
		CHECK(strstr(r, "\r\n\r\nhi") != NULL);
	}
	free(r);
	close(fd);

	/* Malformed head: 400 and close. */
	fd = dial();
	send_all(fd, "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 37);
	r = read_until(fd, "}}", 1);
	CHECK(strstr(r, "400 Bad Request") != NULL && strstr(r, "duplicate Host") != NULL);
	free(r);
	CHECK(closed_by_peer(fd));
	close(fd);

	/* Each refusal of the framing layer carries its own code, not "bad_request". */
	{
		static const struct { const char *head, *status, *code; } refusals[] = {
			{ "GET / HTTP/2.0\r\nHost: t\r\n\r\n", "505 HTTP Version Not Supported",
			    "\"code\":\"http_version_not_supported\"" },
			{ "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n",
			    "501 Not Implemented", "\"code\":\"not_implemented\"" },
			{ "POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 200-ok\r\n\r\n",
			    "417 Expectation Failed", "\"code\":\"expectation_failed\"" },
		};
		for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
			fd = dial();
			send_all(fd, refusals[i].head, strlen(refusals[i].head));
			r = read_until(fd, "}}", 1);
			CHECK(strstr(r, refusals[i].status) != NULL && strstr(r, refusals[i].code) != NULL);
			if (strstr(r, refusals[i].code) == NULL)
				fprintf(stderr, "refusal %zu: got \"%s\"\n", i, r);
			free(r);
			close(fd);
		}
		/* 431: more header bytes than HTTP_HEAD_MAX. */
		size_t padlen = HTTP_HEAD_MAX + 64;
		char *huge = xmalloc(padlen + 64);
		int o = snprintf(huge, 64, "GET / HTTP/1.1\r\nHost: t\r\nX-Pad: ");
		memset(huge + o, 'p', padlen);
		fd = dial();
		send_all(fd, huge, (size_t)o + padlen);
		free(huge);
		r = read_until(fd, "}}", 1);
		CHECK(strstr(r, "431 Request Header Fields Too Large") != NULL &&
		    strstr(r, "\"code\":\"headers_too_large\"") != NULL);
		free(r);
		close(fd);
	}

	/* SSE: three events then the end of the chunked stream. */
	fd = dial();
	send_all(fd, "GET /sse HTTP/1.1\r\nHost: t\r\n\r\n", 31);
	r = read_until(fd, "0\r\n\r\n", 1);
	CHECK(strstr(r, "text/event-stream") != NULL);
	CHECK(strstr(r, "event: tick\ndata: {\"n\":2}") != NULL);
	free(r);
	close(fd);

	/* A client leaving an endless SSE stream is noticed. */
	fd = dial();
	send_all(fd, "GET /sse-forever HTTP/1.1\r\nHost: t\r\n\r\n", 39);
	r = read_until(fd, "event: tick", 2);
	free(r);
	close(fd);
	for (int i = 0; i < 200 && !sse_closed; i++)
		usleep(10000);
	CHECK(sse_closed);

	T_RUN(pipelined_bounded);
	T_RUN(limits_head);
	T_RUN(limits_body);
	T_RUN(limits_idle);
	T_RUN(limits_per_addr);
	T_RUN(limits_shed);

	fd = dial();
	send_all(fd, "GET /stop HTTP/1.1\r\nHost: t\r\n\r\n", 32);
	r = read_until(fd, "\r\n\r\n", 1);
	free(r);
	close(fd);
	return NULL;
}

int
main(void)
{
	pthread_t th;
	char *cause = NULL;

	signal(SIGPIPE, SIG_IGN);
	evthread_use_pthreads();
	base = event_base_new();
	srv = http_server_new(base, router, NULL);
	if (http_server_listen(srv, "127.0.0.1", 0, &cause) == -1) {
		fprintf(stderr, "%s\n", cause);
		return 1;
	}
	port = http_server_port(srv);
	CHECK(port > 0);

	/* Short times, small caps: 8 connections, 3 per address. */
	struct http_limits lim = {
		.conns_max = 8, .conns_per_addr = 3, .shed_min_age_ms = 300,
		.head_ms = 2000, .idle_ms = 3000, .idle_pressure_ms = 1000,
		.body_grace_ms = 1000, .body_min_rate = 100, .body_credit_ms = 2000,
	};
	lsrv = http_server_new(base, router, NULL);
	http_server_set_limits(lsrv, &lim);
	if (http_server_listen(lsrv, "127.0.0.1", 0, &cause) == -1) {
		fprintf(stderr, "%s\n", cause);
		return 1;
	}
	lport = http_server_port(lsrv);
	pthread_create(&th, NULL, client, NULL);
	event_base_dispatch(base);
	pthread_join(th, NULL);
	http_server_free(srv);
	http_server_free(lsrv);
	event_base_free(base);
	return t_done();
}
