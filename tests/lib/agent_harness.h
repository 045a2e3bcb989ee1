/*
 * Test harness for the guest agent, shared by the host-run test, the
 * in-VM test and bench/: start the agent (host mode) and airlock-agentctl
 * forwarders, speak blocking HTTP/1.1 to a forwarded unix socket, and run
 * Connect server streams into a struct.
 */
#ifndef AIRLOCK_AGENT_HARNESS_H
#define AIRLOCK_AGENT_HARNESS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define AH_TIMEOUT_MS	120000	/* per blocking read; only a hang reaches it */

struct hresp {
	int	 status;
	char	*head;		/* status line and headers, NUL-terminated */
	char	*body;		/* NUL-terminated for convenience */
	size_t	 len;
};

/* Spawn argv with stdout to a pipe; wait until a stdout line contains ready (if set). */
pid_t ah_spawn(char *const argv[], const char *ready, const char *log_path);
void ah_kill(pid_t pid);
int ah_alive(pid_t pid);

int ah_unix_connect(const char *path);
/* Write everything (blocking). */
int ah_write_all(int fd, const void *buf, size_t len);
/* Send a request with a Content-Length body (body may be NULL). */
int ah_send(int fd, const char *method, const char *target, const char *headers,
    const void *body, size_t len);
/* Send a body with Transfer-Encoding: chunked in 7-byte chunks, as a streaming client would. */
int ah_send_chunked(int fd, const char *target, const char *ctype, const char *body, size_t len);
/* Read one response (Content-Length, chunked, or until EOF). */
int ah_read_response(int fd, struct hresp *r);
/* Read only the head; then ah_read_chunk reads one chunk (0 at the end). */
int ah_read_head(int fd, struct hresp *r);
ssize_t ah_read_chunk(int fd, char **out);
/* Connect, request, read, close. */
int ah_request(const char *sock, const char *method, const char *target, const char *headers,
    const void *body, size_t len, struct hresp *r);
void ah_resp_free(struct hresp *r);
const char *ah_header(const struct hresp *r, const char *name);

/* The result of one Connect server stream (Process.Start / Connect). */
struct ah_run {
	int	 http_status;
	int	 pid;
	int	 start_first;	/* the first message was {"event":{"start":...}} */
	char	*out, *err, *pty;
	size_t	 outlen, errlen, ptylen;
	int	 ended;		/* an end event came */
	int	 exit_code;
	int	 exited;
	char	 status[64];
	char	 error[256];	/* end event error */
	int	 end_stream;	/* the 0x02 envelope came, last */
	char	 stream_error[256]; /* code from the end-stream, "" if none */
	int	 keepalives;
	int	 messages;
};
/* Frame a JSON message as one Connect envelope (malloc'd). */
char *ah_envelope(const char *json, size_t *len);
/* Parse a whole streamed body of envelopes into run. -1 on bad framing. */
int ah_parse_stream(const char *body, size_t len, struct ah_run *run);
/* Read the remaining chunks of a stream on fd into run (after the caller read some). */
int ah_read_response_rest(int fd, struct ah_run *run);
/* Start a process over sock and wait for its whole stream. */
int ah_exec(const char *sock, const char *request_json, const char *headers, struct ah_run *run);
void ah_run_free(struct ah_run *run);
/* Unary Connect call; returns the HTTP status, body in r. */
int ah_rpc(const char *sock, const char *method, const char *json, const char *headers,
    struct hresp *r);
double ah_now_ms(void);

/* One thread of a concurrency test: exec jobs run "echo job IDX" over sock
 * and are ok when exactly that came back with exit 0; a test's own jobs
 * (an upload) use t, ok and ms the same way. */
struct ah_job {
	pthread_t	 t;
	const char	*sock;
	int		 idx, ok;
	double		 ms;
};
/* Run n exec jobs at once and wait for all; the number that were ok, with
 * the sum and maximum of their times in ms. */
int ah_exec_jobs(const char *sock, struct ah_job *jobs, int n, double *sum, double *maxms);

#endif
