/*
 * QMP client: handshake, commands, errors and close against a real QEMU
 * (-S, no kernel: ready in ~22 ms), and timeouts, events, late replies and
 * protocol errors against a scripted fake server.
 */
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/util.h"
#include "vm/vm_qmp.h"
#include "t.h"

extern char **environ;

static struct event_base *base;
static char dir[] = "/tmp/airlock-qmp-XXXXXX";

struct result {
	int	 ready_called, ready_ok;
	char	*ready_err;
	int	 replies;
	char	*last_ret, *last_err;
	int	 events;
	char	*last_event;
	int	 closed;
	char	*closed_why;
	int	 free_in_cb;
};

static void
on_ready(struct qmp *q, const char *error, void *arg)
{
	struct result *r = arg;

	r->ready_called++;
	r->ready_ok = error == NULL;
	free(r->ready_err);
	r->ready_err = error ? xstrdup(error) : NULL;
	event_base_loopbreak(base);
}

static void
on_event(struct qmp *q, const char *ev, json_t *data, void *arg)
{
	struct result *r = arg;

	r->events++;
	free(r->last_event);
	r->last_event = xstrdup(ev);
}

static void
on_closed(struct qmp *q, const char *why, void *arg)
{
	struct result *r = arg;

	r->closed++;
	free(r->closed_why);
	r->closed_why = xstrdup(why);
	event_base_loopbreak(base);
}

static void
on_reply(struct qmp *q, json_t *ret, const char *error, void *arg)
{
	struct result *r = arg;

	r->replies++;
	free(r->last_ret);
	free(r->last_err);
	r->last_ret = ret ? json_dumps(ret, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	r->last_err = error ? xstrdup(error) : NULL;
	if (r->free_in_cb)
		qmp_free(q);
	event_base_loopbreak(base);
}

static void
loop_deadline(evutil_socket_t fd, short ev, void *arg)
{
	event_base_loopbreak(base);
}

/* Run until a callback breaks the loop or ms pass (own timer: no stale loopexit). */
static void
run_loop(int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	struct event *t = evtimer_new(base, loop_deadline, NULL);

	evtimer_add(t, &tv);
	event_base_dispatch(base);
	event_free(t);
}

static void
result_clear(struct result *r)
{
	free(r->ready_err);
	free(r->last_ret);
	free(r->last_err);
	free(r->last_event);
	free(r->closed_why);
	memset(r, 0, sizeof(*r));
}

static pid_t
spawn_qemu(const char *sock)
{
	char *qmparg;
	pid_t pid;
	int rc;

	xasprintf(&qmparg, "unix:%s,server=on,wait=off", sock);
	char *av[] = { "qemu-system-x86_64", "-M", "microvm", "-accel", "tcg", "-S",
	    "-m", "128", "-nodefaults", "-no-user-config", "-display", "none",
	    "-qmp", qmparg, NULL };
	rc = posix_spawnp(&pid, av[0], NULL, NULL, av, environ);
	free(qmparg);
	CHECK(rc == 0);
	return rc == 0 ? pid : -1;
}

static void
test_real_qemu(void)
{
	struct qmp_callbacks cb = { on_ready, on_event, on_closed, NULL };
	struct result r;
	struct qmp *q;
	char *sock, *cause = NULL;
	pid_t pid;
	int status;

	memset(&r, 0, sizeof(r));
	cb.arg = &r;
	xasprintf(&sock, "%s/real.sock", dir);
	pid = spawn_qemu(sock);
	q = qmp_connect(base, sock, 10000, &cb, &cause);
	CHECK(q != NULL);
	run_loop(15000);
	CHECK(r.ready_called == 1 && r.ready_ok);
	CHECK(qmp_is_ready(q));

	CHECK(qmp_command(q, "query-status", NULL, 5000, on_reply, &r, &cause) == 0);
	run_loop(5000);
	CHECK(r.replies == 1 && r.last_ret != NULL && strstr(r.last_ret, "prelaunch") != NULL);

	CHECK(qmp_command(q, "no-such-command", NULL, 5000, on_reply, &r, &cause) == 0);
	run_loop(5000);
	CHECK(r.replies == 2 && r.last_ret == NULL);
	CHECK_CAUSE(r.last_err, "CommandNotFound");

	/* Two commands in flight are matched by id. */
	CHECK(qmp_command(q, "query-version", NULL, 5000, on_reply, &r, &cause) == 0);
	CHECK(qmp_command(q, "query-name", NULL, 5000, on_reply, &r, &cause) == 0);
	run_loop(5000);
	if (r.replies < 4)
		run_loop(5000);
	CHECK(r.replies == 4);

	/* quit: the reply, then the socket closes and closed() fires once. */
	CHECK(qmp_command(q, "quit", NULL, 5000, on_reply, &r, &cause) == 0);
	run_loop(5000);
	if (r.closed == 0)
		run_loop(5000);
	CHECK(r.closed == 1);
	CHECK(!qmp_is_ready(q));
	CHECK(qmp_command(q, "query-status", NULL, 5000, on_reply, &r, &cause) == -1);
	CHECK_CAUSE(cause, "not ready");
	free(cause);
	cause = NULL;
	qmp_free(q);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status));
	free(sock);
	result_clear(&r);
}

static void
test_no_socket(void)
{
	struct qmp_callbacks cb = { on_ready, on_event, on_closed, NULL };
	struct result r;
	struct qmp *q;
	char *sock, *cause = NULL;

	memset(&r, 0, sizeof(r));
	cb.arg = &r;
	xasprintf(&sock, "%s/nobody.sock", dir);
	q = qmp_connect(base, sock, 100, &cb, &cause);
	run_loop(3000);
	CHECK(r.ready_called == 1 && !r.ready_ok);
	CHECK_CAUSE(r.ready_err, "did not accept connections");
	qmp_free(q);
	free(sock);
	result_clear(&r);
}

/* Fake server: accept one client and play script; each entry is written
 * after reading one line from the client when it starts with '<'. */
static pid_t
fake_server(const char *sock, const char *const *script)
{
	struct sockaddr_un sun;
	int lfd, cfd, i;
	pid_t pid;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	strcpy(sun.sun_path, sock);
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(bind(lfd, (struct sockaddr *)&sun, sizeof(sun)) == 0);
	CHECK(listen(lfd, 1) == 0);
	if ((pid = fork()) != 0) {
		close(lfd);
		return pid;
	}
	cfd = accept(lfd, NULL, NULL);
	for (i = 0; script[i] != NULL; i++) {
		if (script[i][0] == '<') {
			char c;
			while (read(cfd, &c, 1) == 1 && c != '\n')
				;
			continue;
		}
		if (strcmp(script[i], "sleep") == 0) {
			sleep(1);
			continue;
		}
		if (write(cfd, script[i], strlen(script[i])) < 0)
			break;
	}
	sleep(2);
	_exit(0);
}

static void
test_fake_timeout_event(void)
{
	static const char *const script[] = {
		"{\"QMP\": {\"version\": {}, \"capabilities\": []}}\r\n",
		"<", "{\"return\": {}, \"id\": 1}\r\n",
		"{\"event\": \"STOP\", \"timestamp\": {}}\r\n",
		"<",	/* stop: never answered in time */
		"sleep",
		"{\"return\": {}, \"id\": 2}\r\n",	/* late: must be ignored */
		"<", "{\"return\": {\"ok\": 1}, \"id\": 3}\r\n",
		"{\"event\": \"RESUME\"}\r\n",
		NULL
	};
	struct qmp_callbacks cb = { on_ready, on_event, on_closed, NULL };
	struct result r;
	struct qmp *q;
	char *sock, *cause = NULL;
	pid_t pid;

	memset(&r, 0, sizeof(r));
	cb.arg = &r;
	xasprintf(&sock, "%s/fake1.sock", dir);
	pid = fake_server(sock, script);
	q = qmp_connect(base, sock, 5000, &cb, &cause);
	run_loop(5000);
	if (!r.ready_ok) fprintf(stderr, "ready: %s\n", r.ready_err ? r.ready_err : "(not called)");
	CHECK(r.ready_ok);
	CHECK(qmp_command(q, "stop", NULL, 200, on_reply, &r, &cause) == 0);
	run_loop(5000);
	CHECK(r.replies == 1);
	CHECK_CAUSE(r.last_err, "timeout waiting for stop");
	CHECK(r.events == 1 && r.last_event && strcmp(r.last_event, "STOP") == 0);
	CHECK(qmp_command(q, "cont", NULL, 5000, on_reply, &r, &cause) == 0);
	run_loop(5000);
	CHECK(r.replies == 2 && r.last_ret && strstr(r.last_ret, "\"ok\":1") != NULL);
	run_loop(300);
	CHECK(r.events == 2 && strcmp(r.last_event, "RESUME") == 0);
	qmp_free(q);
	waitpid(pid, NULL, 0);
	free(sock);
	result_clear(&r);
}

static void
test_fake_protocol_error(void)
{
	static const char *const script[] = {
		"{\"QMP\": {}}\r\n",
		"<", "{\"return\": {}, \"id\": 1}\r\n",
		"<", "this is not json\r\n",
		NULL
	};
	struct qmp_callbacks cb = { on_ready, on_event, on_closed, NULL };
	struct result r;
	struct qmp *q;
	char *sock, *cause = NULL;
	pid_t pid;

	memset(&r, 0, sizeof(r));
	cb.arg = &r;
	xasprintf(&sock, "%s/fake2.sock", dir);
	pid = fake_server(sock, script);
	q = qmp_connect(base, sock, 5000, &cb, &cause);
	run_loop(5000);
	if (!r.ready_ok) fprintf(stderr, "ready: %s\n", r.ready_err ? r.ready_err : "(not called)");
	CHECK(r.ready_ok);
	/* The pending command fails with the protocol error; closed() follows. */
	CHECK(qmp_command(q, "query-status", NULL, 5000, on_reply, &r, &cause) == 0);
	run_loop(5000);
	CHECK(r.replies == 1);
	CHECK_CAUSE(r.last_err, "protocol error");
	if (r.closed == 0)
		run_loop(1000);
	CHECK(r.closed == 1);
	qmp_free(q);
	waitpid(pid, NULL, 0);
	free(sock);
	result_clear(&r);
}

static void
test_free_in_callback(void)
{
	static const char *const script[] = {
		"{\"QMP\": {}}\r\n",
		"<", "{\"return\": {}, \"id\": 1}\r\n",
		"<", "{\"return\": {}, \"id\": 2}\r\n{\"event\": \"STOP\"}\r\n",
		NULL
	};
	struct qmp_callbacks cb = { on_ready, on_event, on_closed, NULL };
	struct result r;
	struct qmp *q;
	char *sock, *cause = NULL;
	pid_t pid;

	memset(&r, 0, sizeof(r));
	cb.arg = &r;
	xasprintf(&sock, "%s/fake3.sock", dir);
	pid = fake_server(sock, script);
	q = qmp_connect(base, sock, 5000, &cb, &cause);
	run_loop(5000);
	if (!r.ready_ok) fprintf(stderr, "ready: %s\n", r.ready_err ? r.ready_err : "(not called)");
	CHECK(r.ready_ok);
	r.free_in_cb = 1;
	CHECK(qmp_command(q, "stop", NULL, 5000, on_reply, &r, &cause) == 0);
	run_loop(5000);
	run_loop(200);
	/* Freed inside the reply: the event in the same read is not delivered. */
	CHECK(r.replies == 1 && r.events == 0);
	waitpid(pid, NULL, 0);
	free(sock);
	result_clear(&r);
}

static void
test_parse(void)
{
	struct qmp_msg m;
	char *cause = NULL;
	const char *s;

	s = "{\"return\": 5, \"id\": 7}";
	CHECK(qmp_parse_line(s, strlen(s), &m, &cause) == 0);
	CHECK(m.type == QMP_MSG_RETURN && m.id == 7);
	qmp_msg_clear(&m);
	s = "{\"error\": {\"class\": 1}}";
	CHECK(qmp_parse_line(s, strlen(s), &m, &cause) == 0);
	CHECK(m.type == QMP_MSG_ERROR && m.id == -1 && strcmp(m.err_class, "GenericError") == 0);
	qmp_msg_clear(&m);
	s = "[1]";
	CHECK(qmp_parse_line(s, strlen(s), &m, &cause) == -1);
	CHECK_CAUSE(cause, "not an object");
	free(cause);
	cause = NULL;
	s = "{\"id\": 1, \"id\": 2, \"return\": {}}";
	CHECK(qmp_parse_line(s, strlen(s), &m, &cause) == -1);
	free(cause);
	cause = NULL;
	s = "{\"foo\": 1}";
	CHECK(qmp_parse_line(s, strlen(s), &m, &cause) == -1);
	CHECK_CAUSE(cause, "neither");
	free(cause);
}

int
main(void)
{
	int rc;

	signal(SIGPIPE, SIG_IGN);
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	base = event_base_new();
	T_RUN(test_parse);
	T_RUN(test_real_qemu);
	T_RUN(test_no_socket);
	T_RUN(test_fake_timeout_event);
	T_RUN(test_fake_protocol_error);
	T_RUN(test_free_in_callback);
	event_base_free(base);
	rc = t_done();
	remove_tree(dir, NULL);
	return rc;
}
