/*
 * The CLI's HTTP client for airlockd, on libcurl. Blocking calls: the CLI
 * runs one operation at a time, and the few that multiplex (exec -i: the
 * event stream, stdin and SIGWINCH) poll the connection's fd themselves.
 *
 * Configuration: AIRLOCK_URL (default http://127.0.0.1:7070; https:// is
 * verified against AIRLOCK_CA_FILE, else for a daemon on this host the
 * airlock CA in the data dir, else the system store), and the key
 * from AIRLOCK_API_KEY, else $AIRLOCK_DATA_DIR/admin.key when the daemon is
 * on this host (loopback), so root on the host needs no setup and the admin
 * key never goes to a remote daemon by accident. The daemon's answers are untrusted input: heads, bodies
 * kept in memory and event streams are all bounded.
 */
#ifndef AIRLOCK_CLI_HTTP_H
#define AIRLOCK_CLI_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define CLI_HTTP_DEFAULT_URL		"http://127.0.0.1:7070"
#define CLI_HTTP_CONNECT_TIMEOUT_MS	5000
/* Per read or write; generous because a create waits for a VM to boot. */
#define CLI_HTTP_TIMEOUT_MS		(10 * 60 * 1000)
#define CLI_HTTP_STREAM_TIMEOUT_MS	(60 * 1000)	/* SSE: 4 missed heartbeats */
#define CLI_HTTP_JSON_MAX		(64 * 1024 * 1024)	/* one JSON answer in memory */
#define CLI_HTTP_ERROR_MAX		(64 * 1024)
#define CLI_HTTP_BUF			(64 * 1024)
#define CLI_HTTP_KEY_MAX		512

struct cli_api;
struct cli_conn;

/*
 * Body sink: payload bytes as they arrive. Return -1 (with *cause set) to
 * abort the transfer.
 */
typedef int (*cli_http_sink)(void *arg, const char *data, size_t n, char **cause);
/* Upload progress: bytes sent so far. */
typedef void (*cli_http_progress)(void *arg, uint64_t sent);

/* Read the environment. NULL with a cause on a bad AIRLOCK_URL. */
struct cli_api *cli_api_new(char **cause);
void cli_api_free(struct cli_api *api);
const char *cli_api_url(const struct cli_api *api);
/* Whether a key was found (the admin key file is used only for a local daemon). */
int cli_api_has_key(const struct cli_api *api);
/* Whether AIRLOCK_URL names this host (a loopback address or localhost). */
int cli_api_local(const struct cli_api *api);

/*
 * One JSON request on the API's own keep-alive connection. body may be NULL.
 * Returns the decoded answer (an empty object for 204), or NULL with a cause
 * ready to print: the API's error message, or why the daemon could not be
 * reached. *status (may be NULL) gets the HTTP status, 0 if none.
 */
json_t *cli_api_json(struct cli_api *api, const char *method, const char *path, json_t *body,
    int *status, char **cause);

/* A separate connection, for streams that run beside other requests. */
struct cli_conn *cli_conn_new(struct cli_api *api);
void cli_conn_free(struct cli_conn *c);
/* The API's default connection (the one cli_api_json uses). */
struct cli_conn *cli_api_conn(struct cli_api *api);

/*
 * Send a request and read the response head. The body is body/len, or, when
 * upload_fd >= 0, the bytes read from upload_fd until EOF, sent chunked.
 * Returns the status; -1 with a cause. For status >= 300 the error body has
 * already been read and turned into the cause (so callers just print it)
 * and -1 is returned with *status set.
 */
int cli_conn_request(struct cli_conn *c, const char *method, const char *path,
    const char *content_type, const void *body, size_t len, int upload_fd,
    cli_http_progress progress, void *parg, int *status, char **cause);
/*
 * Read the response body into sink. wait = 0: process buffered bytes and at
 * most one read that is known not to block (after poll said readable);
 * wait = 1: block (up to the timeout) until something arrives.
 * Returns 1 when the body is complete, 0 when more is to come, -1 on error.
 */
int cli_conn_body(struct cli_conn *c, cli_http_sink sink, void *arg, int wait, char **cause);
/* The rest of the body as JSON (bounded; an empty body is {}). */
json_t *cli_conn_json(struct cli_conn *c, char **cause);
/* Loop cli_conn_body until the end. */
int cli_conn_body_all(struct cli_conn *c, cli_http_sink sink, void *arg, char **cause);
/* The socket, for poll(); -1 when not connected. */
int cli_conn_fd(const struct cli_conn *c);
/* Bytes already read and not yet handed to a sink (poll will not report them). */
size_t cli_conn_buffered(const struct cli_conn *c);
void cli_conn_set_timeout(struct cli_conn *c, int timeout_ms);

/* Percent-encode a query value, keeping '/' (malloc'd). */
char *cli_http_escape(const char *s);
/* Percent-encode one path segment: '/' and '.' too (malloc'd). */
char *cli_http_escape_segment(const char *s);

#endif
