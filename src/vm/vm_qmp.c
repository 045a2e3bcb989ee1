/* QMP over a unix socket on libevent: handshake, id-matched commands, events. */
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/ref.h"
#include "common/util.h"
#include "vm/vm_qmp.h"

enum qmp_state { QMP_CONNECTING, QMP_GREETING, QMP_NEGOTIATING, QMP_READY, QMP_DEAD };

struct qmp_cmd {
	TAILQ_ENTRY(qmp_cmd)	 qc_entry;
	long long		 qc_id;
	char			*qc_name;
	struct event		*qc_timer;
	qmp_reply_cb		 qc_cb;
	void			*qc_arg;
	struct qmp		*qc_qmp;
};
TAILQ_HEAD(qmp_cmds, qmp_cmd);

struct qmp {
	struct event_base	*q_base;
	char			*q_path;
	enum qmp_state		 q_state;
	struct bufferevent	*q_bev;
	struct event		*q_retry;	/* connect retry, then handshake deadline */
	struct timeval		 q_deadline;
	struct qmp_callbacks	 q_cb;
	struct qmp_cmds		 q_pending;
	size_t			 q_npending;
	long long		 q_next_id;
	int			 q_check_uid;
	uid_t			 q_peer_uid;
	struct ref		 q_ref;		/* common/ref.h: frames in callbacks hold one */
};

static void qmp_read_cb(struct bufferevent *, void *);
static void qmp_error_cb(struct bufferevent *, short, void *);
static void qmp_fail(struct qmp *, const char *);
static void qmp_release(void *);

/* Drop a frame's reference (ref_get on entry from the loop); 1: q is gone. */
static int
qmp_put(struct qmp *q)
{
	return ref_put(&q->q_ref, qmp_release, q);
}

int
qmp_parse_line(const char *line, size_t len, struct qmp_msg *msg, char **cause)
{
	json_error_t jerr;
	json_t *root, *v;

	memset(msg, 0, sizeof(*msg));
	msg->id = -1;
	root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		cause_set(cause, "bad JSON at %d: %s", jerr.position, jerr.text);
		return -1;
	}
	if (!json_is_object(root)) {
		cause_set(cause, "message is not an object");
		json_decref(root);
		return -1;
	}
	msg->root = root;
	if ((v = json_object_get(root, "id")) != NULL && json_is_integer(v))
		msg->id = json_integer_value(v);
	if (json_object_get(root, "QMP") != NULL) {
		msg->type = QMP_MSG_GREETING;
		return 0;
	}
	if ((v = json_object_get(root, "return")) != NULL) {
		msg->type = QMP_MSG_RETURN;
		msg->ret = v;
		return 0;
	}
	if ((v = json_object_get(root, "error")) != NULL) {
		json_t *c = json_object_get(v, "class"), *d = json_object_get(v, "desc");

		msg->type = QMP_MSG_ERROR;
		msg->err_class = json_is_string(c) ? json_string_value(c) : "GenericError";
		msg->err_desc = json_is_string(d) ? json_string_value(d) : "(no description)";
		return 0;
	}
	if ((v = json_object_get(root, "event")) != NULL && json_is_string(v)) {
		msg->type = QMP_MSG_EVENT;
		msg->event = json_string_value(v);
		msg->data = json_object_get(root, "data");
		return 0;
	}
	cause_set(cause, "message is neither greeting, return, error nor event");
	qmp_msg_clear(msg);
	return -1;
}

void
qmp_msg_clear(struct qmp_msg *msg)
{
	if (msg->root != NULL)
		json_decref(msg->root);
	memset(msg, 0, sizeof(*msg));
	msg->id = -1;
}

static void
qmp_cmd_free(struct qmp_cmd *c)
{
	if (c->qc_timer != NULL)
		event_free(c->qc_timer);
	free(c->qc_name);
	free(c);
}

/* Remove c from the queue and run its callback once. The caller holds a reference. */
static void
qmp_cmd_finish(struct qmp *q, struct qmp_cmd *c, json_t *ret, const char *error)
{
	TAILQ_REMOVE(&q->q_pending, c, qc_entry);
	q->q_npending--;
	c->qc_cb(q, ret, error, c->qc_arg);
	qmp_cmd_free(c);
}

static void
qmp_cmd_timeout(evutil_socket_t fd, short ev, void *arg)
{
	struct qmp_cmd *c = arg;
	struct qmp *q = c->qc_qmp;
	char *why;

	/* A late reply for this id is dropped: it is no longer in the queue. */
	xasprintf(&why, "timeout waiting for %s", c->qc_name);
	ref_get(&q->q_ref);
	qmp_cmd_finish(q, c, NULL, why);
	qmp_put(q);
	free(why);
}

static void
qmp_release(void *arg)
{
	struct qmp *q = arg;

	free(q->q_path);
	free(q);
}

void
qmp_free(struct qmp *q)
{
	struct qmp_cmd *c;

	if (q == NULL || ref_kill(&q->q_ref))
		return;
	q->q_state = QMP_DEAD;
	if (q->q_bev != NULL) {
		bufferevent_free(q->q_bev);
		q->q_bev = NULL;
	}
	if (q->q_retry != NULL) {
		event_free(q->q_retry);
		q->q_retry = NULL;
	}
	while ((c = TAILQ_FIRST(&q->q_pending)) != NULL) {
		TAILQ_REMOVE(&q->q_pending, c, qc_entry);
		qmp_cmd_free(c);
	}
	q->q_npending = 0;
	/* Inside a callback the caller's frames still use q: the last of them frees it. */
	qmp_put(q);
}

/*
 * Fail everything and tell the owner once: ready() before READY, closed()
 * after. The caller holds a reference; q may be dead on return.
 */
static void
qmp_fail(struct qmp *q, const char *why)
{
	enum qmp_state was = q->q_state;
	struct qmp_cmd *c;

	if (was == QMP_DEAD)
		return;
	q->q_state = QMP_DEAD;
	if (q->q_bev != NULL)
		bufferevent_disable(q->q_bev, EV_READ | EV_WRITE);
	if (q->q_retry != NULL)
		event_del(q->q_retry);
	while (!ref_dead(&q->q_ref) && (c = TAILQ_FIRST(&q->q_pending)) != NULL)
		qmp_cmd_finish(q, c, NULL, why);
	if (!ref_dead(&q->q_ref)) {
		if (was == QMP_READY) {
			if (q->q_cb.closed != NULL)
				q->q_cb.closed(q, why, q->q_cb.arg);
		} else if (q->q_cb.ready != NULL)
			q->q_cb.ready(q, why, q->q_cb.arg);
	}
}

static int
qmp_send(struct qmp *q, const char *cmd, json_t *args, long long id)
{
	json_t *o = json_object();
	char *s;
	int rc;

	json_object_set_new(o, "execute", json_string(cmd));
	if (args != NULL)
		json_object_set_new(o, "arguments", args);
	json_object_set_new(o, "id", json_integer(id));
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (s == NULL)
		return -1;
	rc = bufferevent_write(q->q_bev, s, strlen(s));
	if (rc == 0)
		rc = bufferevent_write(q->q_bev, "\n", 1);
	free(s);
	return rc;
}

static void
qmp_caps_reply(struct qmp *q, json_t *ret, const char *error, void *arg)
{
	char *why;

	if (error != NULL) {
		xasprintf(&why, "qmp_capabilities: %s", error);
		qmp_fail(q, why);
		free(why);
		return;
	}
	q->q_state = QMP_READY;
	event_del(q->q_retry);
	if (q->q_cb.ready != NULL)
		q->q_cb.ready(q, NULL, q->q_cb.arg);
}

static void
qmp_dispatch(struct qmp *q, struct qmp_msg *m)
{
	struct qmp_cmd *c;
	char *why;

	switch (m->type) {
	case QMP_MSG_GREETING:
		if (q->q_state != QMP_GREETING) {
			qmp_fail(q, "unexpected second greeting");
			return;
		}
		q->q_state = QMP_NEGOTIATING;
		/* Bypass qmp_command: the handshake has no caller-visible id. */
		c = xcalloc(1, sizeof(*c));
		c->qc_id = q->q_next_id++;
		c->qc_name = xstrdup("qmp_capabilities");
		c->qc_cb = qmp_caps_reply;
		c->qc_qmp = q;
		TAILQ_INSERT_TAIL(&q->q_pending, c, qc_entry);
		q->q_npending++;
		if (qmp_send(q, "qmp_capabilities", NULL, c->qc_id) == -1)
			qmp_fail(q, "cannot queue qmp_capabilities");
		return;
	case QMP_MSG_EVENT:
		if (q->q_state == QMP_READY && q->q_cb.event != NULL)
			q->q_cb.event(q, m->event, m->data, q->q_cb.arg);
		return;
	case QMP_MSG_RETURN:
	case QMP_MSG_ERROR:
		TAILQ_FOREACH(c, &q->q_pending, qc_entry) {
			if (c->qc_id == m->id)
				break;
		}
		if (c == NULL)
			return;	/* reply to a command that already timed out */
		if (m->type == QMP_MSG_RETURN)
			qmp_cmd_finish(q, c, m->ret, NULL);
		else {
			xasprintf(&why, "%s: %s", m->err_class, m->err_desc);
			qmp_cmd_finish(q, c, NULL, why);
			free(why);
		}
		return;
	}
}

static void
qmp_read_cb(struct bufferevent *bev, void *arg)
{
	struct qmp *q = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct qmp_msg m;
	char *line, *cause = NULL, *why;
	size_t len;

	ref_get(&q->q_ref);
	while (!ref_dead(&q->q_ref) && q->q_state != QMP_DEAD &&
	    (line = evbuffer_readln(in, &len, EVBUFFER_EOL_CRLF)) != NULL) {
		if (len == 0) {
			free(line);
			continue;
		}
		if (qmp_parse_line(line, len, &m, &cause) == -1) {
			xasprintf(&why, "protocol error: %s", cause);
			free(cause);
			cause = NULL;
			free(line);
			qmp_fail(q, why);
			free(why);
			break;
		}
		free(line);
		qmp_dispatch(q, &m);
		qmp_msg_clear(&m);
	}
	/* An untrusted QEMU must not make us buffer without bound. */
	if (!ref_dead(&q->q_ref) && q->q_state != QMP_DEAD && evbuffer_get_length(in) > QMP_LINE_MAX)
		qmp_fail(q, "protocol error: line longer than QMP_LINE_MAX");
	qmp_put(q);
}

static void
qmp_error_cb(struct bufferevent *bev, short what, void *arg)
{
	struct qmp *q = arg;
	char *why;

	if (what & BEV_EVENT_EOF)
		why = xstrdup("connection closed");
	else
		xasprintf(&why, "connection error: %s", strerror(errno));
	ref_get(&q->q_ref);
	qmp_fail(q, why);
	qmp_put(q);
	free(why);
}

static int
timeval_passed(const struct timeval *deadline)
{
	struct timeval now;

	evutil_gettimeofday(&now, NULL);
	return evutil_timercmp(&now, deadline, >=);
}

/* Try once; 0 connected, -1 retry later, -2 fatal (cause set). */
static int
qmp_try_connect(struct qmp *q, char **cause)
{
	struct sockaddr_un sun;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(q->q_path) >= sizeof(sun.sun_path)) {
		cause_set(cause, "QMP socket path too long: %s", q->q_path);
		return -2;
	}
	strcpy(sun.sun_path, q->q_path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1) {
		cause_set(cause, "socket: %s", strerror(errno));
		return -2;
	}
	/* Blocking connect on a unix socket completes or fails at once. */
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		int e = errno;

		close(fd);
		if (e == ENOENT || e == ECONNREFUSED || e == EAGAIN)
			return -1;
		cause_set(cause, "connect %s: %s", q->q_path, strerror(e));
		return -2;
	}
	if (q->q_check_uid) {
		struct ucred cr;
		socklen_t len = sizeof(cr);

		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == -1 ||
		    cr.uid != q->q_peer_uid) {
			cause_set(cause, "QMP socket %s is served by uid %ld, expected %ld",
			    q->q_path, len == sizeof(cr) ? (long)cr.uid : -1L, (long)q->q_peer_uid);
			close(fd);
			return -2;
		}
	}
	evutil_make_socket_nonblocking(fd);
	q->q_bev = bufferevent_socket_new(q->q_base, fd, BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(q->q_bev, qmp_read_cb, NULL, qmp_error_cb, q);
	bufferevent_enable(q->q_bev, EV_READ | EV_WRITE);
	q->q_state = QMP_GREETING;
	return 0;
}

/* Retry connecting until the deadline, then guard the handshake. */
static void
qmp_retry_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct qmp *q = arg;
	struct timeval tv = { 0, QMP_CONNECT_RETRY_MS * 1000 };
	char *cause = NULL, *why;
	int rc;

	if (q->q_state != QMP_CONNECTING) {
		ref_get(&q->q_ref);
		qmp_fail(q, "timeout during QMP handshake");
		qmp_put(q);
		return;
	}
	rc = qmp_try_connect(q, &cause);
	if (rc == 0) {
		struct timeval now, left;

		evutil_gettimeofday(&now, NULL);
		evutil_timersub(&q->q_deadline, &now, &left);
		if (left.tv_sec < 0)
			left.tv_sec = left.tv_usec = 0;
		evtimer_add(q->q_retry, &left);
		return;
	}
	if (rc == -1 && !timeval_passed(&q->q_deadline)) {
		evtimer_add(q->q_retry, &tv);
		return;
	}
	if (rc == -1)
		xasprintf(&why, "QMP socket %s did not accept connections in time", q->q_path);
	else
		why = cause;
	ref_get(&q->q_ref);
	qmp_fail(q, why);
	qmp_put(q);
	free(why);
}

struct qmp *
qmp_connect(struct event_base *base, const char *path, int timeout_ms,
    const struct qmp_callbacks *cb, char **cause)
{
	struct timeval now, tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	struct timeval zero = { 0, 0 };
	struct qmp *q;

	if (timeout_ms <= 0) {
		cause_set(cause, "qmp_connect: timeout must be positive");
		return NULL;
	}
	q = xcalloc(1, sizeof(*q));
	q->q_base = base;
	q->q_path = xstrdup(path);
	q->q_state = QMP_CONNECTING;
	q->q_cb = *cb;
	q->q_next_id = 1;
	ref_init(&q->q_ref);
	TAILQ_INIT(&q->q_pending);
	evutil_gettimeofday(&now, NULL);
	evutil_timeradd(&now, &tv, &q->q_deadline);
	q->q_retry = evtimer_new(base, qmp_retry_cb, q);
	/* First attempt from the loop, so ready() never runs inside qmp_connect. */
	evtimer_add(q->q_retry, &zero);
	return q;
}

int
qmp_command(struct qmp *q, const char *cmd, json_t *args, int timeout_ms,
    qmp_reply_cb cb, void *arg, char **cause)
{
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	struct qmp_cmd *c;

	if (q->q_state != QMP_READY) {
		cause_set(cause, "%s: QMP connection not ready", cmd);
		json_decref(args);
		return -1;
	}
	if (q->q_npending >= QMP_PENDING_MAX) {
		cause_set(cause, "%s: too many QMP commands in flight", cmd);
		json_decref(args);
		return -1;
	}
	c = xcalloc(1, sizeof(*c));
	c->qc_id = q->q_next_id++;
	c->qc_name = xstrdup(cmd);
	c->qc_cb = cb;
	c->qc_arg = arg;
	c->qc_qmp = q;
	if (qmp_send(q, cmd, args, c->qc_id) == -1) {
		cause_set(cause, "%s: cannot queue command", cmd);
		qmp_cmd_free(c);
		return -1;
	}
	c->qc_timer = evtimer_new(q->q_base, qmp_cmd_timeout, c);
	evtimer_add(c->qc_timer, &tv);
	TAILQ_INSERT_TAIL(&q->q_pending, c, qc_entry);
	q->q_npending++;
	return 0;
}

int
qmp_command_fd(struct qmp *q, const char *cmd, json_t *args, int fd, int timeout_ms,
    qmp_reply_cb cb, void *arg, char **cause)
{
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int))]; } cm;
	struct msghdr mh;
	struct iovec iov;
	struct cmsghdr *c;
	struct qmp_cmd *qc;
	json_t *o;
	char *s, *line;
	ssize_t n;

	if (q->q_state != QMP_READY) {
		cause_set(cause, "%s: QMP connection not ready", cmd);
		json_decref(args);
		return -1;
	}
	if (evbuffer_get_length(bufferevent_get_output(q->q_bev)) != 0) {
		cause_set(cause, "%s: earlier QMP output still queued", cmd);
		json_decref(args);
		return -1;
	}
	qc = xcalloc(1, sizeof(*qc));
	qc->qc_id = q->q_next_id++;
	qc->qc_name = xstrdup(cmd);
	qc->qc_cb = cb;
	qc->qc_arg = arg;
	qc->qc_qmp = q;
	o = json_object();
	json_object_set_new(o, "execute", json_string(cmd));
	if (args != NULL)
		json_object_set_new(o, "arguments", args);
	json_object_set_new(o, "id", json_integer(qc->qc_id));
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	xasprintf(&line, "%s\n", s);
	free(s);
	memset(&mh, 0, sizeof(mh));
	memset(&cm, 0, sizeof(cm));
	iov.iov_base = line;
	iov.iov_len = strlen(line);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.buf;
	mh.msg_controllen = sizeof(cm.buf);
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	do {
		n = sendmsg(bufferevent_getfd(q->q_bev), &mh, MSG_NOSIGNAL);
	} while (n == -1 && errno == EINTR);
	if (n == -1) {
		cause_set(cause, "%s: sendmsg: %s", cmd, strerror(errno));
		free(line);
		qmp_cmd_free(qc);
		return -1;
	}
	/* The fd went with the first byte; any rest is ordinary output. */
	if ((size_t)n < iov.iov_len)
		bufferevent_write(q->q_bev, line + n, iov.iov_len - (size_t)n);
	free(line);
	qc->qc_timer = evtimer_new(q->q_base, qmp_cmd_timeout, qc);
	evtimer_add(qc->qc_timer, &tv);
	TAILQ_INSERT_TAIL(&q->q_pending, qc, qc_entry);
	q->q_npending++;
	return 0;
}

void
qmp_expect_peer_uid(struct qmp *q, uid_t uid)
{
	q->q_check_uid = 1;
	q->q_peer_uid = uid;
}

int
qmp_is_ready(const struct qmp *q)
{
	return q->q_state == QMP_READY;
}
