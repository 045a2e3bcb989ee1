/*
 * Events: every lifecycle change is appended to the store (so history
 * survives restarts) and pushed to live SSE subscribers. A subscriber first
 * gets the stored events after its cursor, then live ones.
 */
#include <sys/queue.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/api_events.h"
#include "common/log.h"
#include "common/util.h"

#define EVENTS_REPLAY_MAX	1000

struct api_sub {
	struct api_call		*call;
	char			 sandbox[STORE_ID_MAX];	/* "" = every sandbox */
	char			 project[STORE_ID_MAX];
	int64_t			 last_seq;
	TAILQ_ENTRY(api_sub)	 entry;
};

struct api_sub_list {
	TAILQ_HEAD(, api_sub)	 subs;
};

struct api_sub_list *
api_subs_new(void)
{
	struct api_sub_list *l = xcalloc(1, sizeof(*l));

	TAILQ_INIT(&l->subs);
	return l;
}

static void
sub_free(struct api_sub_list *l, struct api_sub *s)
{
	TAILQ_REMOVE(&l->subs, s, entry);
	api_call_done(s->call);
	free(s);
}

void
api_subs_free(struct api_sub_list *l)
{
	struct api_sub *s;

	while ((s = TAILQ_FIRST(&l->subs)) != NULL) {
		http_reply_end(s->call->req);
		sub_free(l, s);
	}
	free(l);
}

static json_t *
event_json(int64_t seq, int64_t at, const char *sandbox, const char *type, json_t *data)
{
	return json_pack("{s:I,s:o,s:s,s:s,s:O}", "seq", (json_int_t)seq, "at", json_time_ms(at),
	    "sandbox", sandbox, "type", type, "data", data ? data : json_null());
}

void
api_event(struct api *api, const char *sandbox, const char *project, const char *type,
    json_t *data)
{
	struct api_sub *s, *next;
	char *cause = NULL;
	int64_t seq, at = store_now_ms();

	json_incref(data);
	seq = store_event_append(api->store, sandbox, project, type, data, &cause);
	if (seq < 0) {
		log_warnx("event %s %s: %s", sandbox, type, cause);
		free(cause);
		json_decref(data);
		return;
	}
	for (s = TAILQ_FIRST(&api->subs->subs); s != NULL; s = next) {
		next = TAILQ_NEXT(s, entry);
		if (strcmp(s->project, project) != 0 ||
		    (s->sandbox[0] != '\0' && strcmp(s->sandbox, sandbox) != 0) || seq <= s->last_seq)
			continue;
		s->last_seq = seq;
		http_sse_event(s->call->req, type, event_json(seq, at, sandbox, type, data));
	}
	json_decref(data);
}

static void
sub_closed(struct http_req *req, void *arg)
{
	struct api_sub *s = arg;

	sub_free(s->call->api->subs, s);
}

void
api_events_stream(struct api_call *c)
{
	struct store_event *ev = NULL;
	struct api_sub *s;
	char *cause = NULL;
	long long after = api_query_int(c, "after", 0);
	size_t n = 0, i;
	const char *sandbox = c->params[0];

	if (sandbox != NULL) {
		struct store_sandbox sb;
		int rc = store_sandbox_get(c->api->store, sandbox, &sb, &cause);
		if (rc == 1 && strcmp(sb.project, c->key.project) != 0)
			rc = 0;
		if (rc == 1)
			store_sandbox_clear(&sb);
		/* Deleted sandboxes keep their history: allow it when events exist. */
		if (rc == 0 && store_event_list(c->api->store, sandbox, 0, 1, &ev, &n, NULL) == 0 &&
		    n > 0 && strcmp(ev[0].project, c->key.project) == 0)
			rc = 1;
		for (i = 0; i < n; i++)
			store_event_clear(&ev[i]);
		free(ev);
		ev = NULL;
		if (rc != 1) {
			if (rc == -1)
				api_error(c, 500, "internal", "%s", cause);
			else
				api_error(c, 404, "not_found", "sandbox \"%s\" not found", sandbox);
			free(cause);
			return;
		}
	}
	s = xcalloc(1, sizeof(*s));
	s->call = c;
	snprintf(s->sandbox, sizeof(s->sandbox), "%s", sandbox ? sandbox : "");
	snprintf(s->project, sizeof(s->project), "%s", c->key.project);
	s->last_seq = after;
	http_sse_start(c->req);
	/* Replay what the store has after the cursor, page by page. */
	for (;;) {
		n = 0;
		if (store_event_list(c->api->store, sandbox, s->last_seq, 500, &ev, &n, &cause) == -1) {
			log_warnx("events replay: %s", cause);
			free(cause);
			break;
		}
		for (i = 0; i < n; i++) {
			if (strcmp(ev[i].project, s->project) == 0)
				http_sse_event(c->req, ev[i].type, event_json(ev[i].seq, ev[i].at,
				    ev[i].sandbox, ev[i].type, ev[i].data));
			s->last_seq = ev[i].seq;
			store_event_clear(&ev[i]);
		}
		free(ev);
		if (n < 500)
			break;
	}
	TAILQ_INSERT_TAIL(&c->api->subs->subs, s, entry);
	http_req_on_close(c->req, sub_closed, s);
}
