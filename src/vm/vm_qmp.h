/*
 * Asynchronous QMP client: one connection struct per QEMU, a bufferevent on
 * the unix socket, the greeting + qmp_capabilities handshake, an id-matched
 * queue of commands each with its own deadline, and events.
 *
 * Lifetime: the owner creates it with qmp_connect() and ends it with
 * qmp_free(). Callbacks may call qmp_free() on the connection they were
 * called for; the memory is released off their stack.
 */
#ifndef AIRLOCK_VM_QMP_H
#define AIRLOCK_VM_QMP_H

#include <stddef.h>
#include <sys/types.h>

#include <event2/event.h>
#include <jansson.h>

#define QMP_LINE_MAX		(1024 * 1024)	/* one JSON message; QEMU's are far smaller */
#define QMP_CONNECT_RETRY_MS	3		/* socket appears a few ms after spawn */
#define QMP_PENDING_MAX		64

struct qmp;

/*
 * A parsed QMP line. Pure function of the bytes (fuzzed): the pointers
 * borrow from msg->root, freed by qmp_msg_clear().
 */
enum qmp_msg_type { QMP_MSG_GREETING, QMP_MSG_RETURN, QMP_MSG_ERROR, QMP_MSG_EVENT };

struct qmp_msg {
	enum qmp_msg_type	 type;
	json_t			*root;
	long long		 id;		/* -1 when the message has no numeric id */
	json_t			*ret;		/* RETURN: the "return" value */
	const char		*err_class;	/* ERROR */
	const char		*err_desc;	/* ERROR */
	const char		*event;		/* EVENT: name */
	json_t			*data;		/* EVENT: "data" or NULL */
};

int qmp_parse_line(const char *line, size_t len, struct qmp_msg *msg, char **cause);
void qmp_msg_clear(struct qmp_msg *msg);

/* ret is borrowed (NULL on failure, then error says why). */
typedef void (*qmp_reply_cb)(struct qmp *, json_t *ret, const char *error, void *arg);
/* Called once: error NULL when capabilities were negotiated. */
typedef void (*qmp_ready_cb)(struct qmp *, const char *error, void *arg);
typedef void (*qmp_event_cb)(struct qmp *, const char *event, json_t *data, void *arg);
/* The socket closed or broke after it was ready; pending commands already failed. */
typedef void (*qmp_closed_cb)(struct qmp *, const char *reason, void *arg);

struct qmp_callbacks {
	qmp_ready_cb	 ready;
	qmp_event_cb	 event;
	qmp_closed_cb	 closed;
	void		*arg;
};

/*
 * Connect to path, retrying while QEMU has not created the socket yet, and
 * negotiate capabilities; all within timeout_ms. Failures after this returns
 * are reported through cb->ready.
 */
struct qmp *qmp_connect(struct event_base *base, const char *path, int timeout_ms,
    const struct qmp_callbacks *cb, char **cause);

/*
 * Queue a command; args is stolen (may be NULL). The reply callback runs
 * exactly once: with the return value, a QMP error, "timeout" after
 * timeout_ms, or "connection closed". Returns -1 (callback not called)
 * when the connection is not usable or the queue is full.
 */
int qmp_command(struct qmp *q, const char *cmd, json_t *args, int timeout_ms,
    qmp_reply_cb cb, void *arg, char **cause);

/*
 * Like qmp_command, and pass fd along (SCM_RIGHTS) for commands such as
 * getfd. Fails when earlier output is still queued, since the fd must ride
 * on this command's bytes. fd stays ours.
 */
int qmp_command_fd(struct qmp *q, const char *cmd, json_t *args, int fd, int timeout_ms,
    qmp_reply_cb cb, void *arg, char **cause);

/*
 * Require the socket's listener (SO_PEERCRED) to run as uid: a compromised
 * VMM could replace its socket with a symlink to someone else's. Set right
 * after qmp_connect (the first connect attempt runs from the loop).
 */
void qmp_expect_peer_uid(struct qmp *q, uid_t uid);

int qmp_is_ready(const struct qmp *q);
/* Stop all I/O and free. Pending reply callbacks are not called. */
void qmp_free(struct qmp *q);

#endif
