/* The API replica's routing: which worker serves a request (see front_cluster.h). */
#include <sys/socket.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/util.h>

#include "common/digest.h"
#include "common/json_time.h"
#include "common/log.h"
#include "common/util.h"
#include "config/config.h"
#include "db/store.h"
#include "e2b/e2b_parse.h"
#include "front/front_cluster.h"
#include "front/front_place.h"
#include "front/front_proxy.h"
#include "http/http_client.h"
#include "http/http_parse.h"
#include "http/http_proxy.h"
#include "http/http_server.h"
#include "http/http_tls.h"

struct front_cluster {
	struct event_base	*base;
	const struct config	*cfg;
	struct store		*st;
	struct http_tls_client	*tls;		/* mTLS to the workers (role worker wanted) */
	struct store_worker	*workers;	/* by name, refreshed each FRONT_WORKERS_REFRESH_MS */
	size_t			 nworkers;
	int64_t			 refreshed_ms;
	struct place_holds	 holds;		/* memory of creates sent, not yet in a heartbeat */
};

struct front_cluster *
front_cluster_new(struct event_base *base, const struct config *cfg, char **cause)
{
	struct front_cluster *fc = xcalloc(1, sizeof(*fc));

	fc->base = base;
	fc->cfg = cfg;
	if (cfg->store_url == NULL || strncmp(cfg->store_url, "sqlite:", 7) == 0) {
		cause_set(cause, "role api: an API replica reads the workers from the shared "
		    "PostgreSQL store; set store = postgresql://...");
		free(fc);
		return NULL;
	}
	if (cfg->cluster_ca == NULL || cfg->cluster_cert == NULL || cfg->cluster_key == NULL) {
		cause_set(cause, "role api: the workers are reached over mutual TLS: set cluster_ca, "
		    "cluster_cert and cluster_key (airlock cluster cert --role api)");
		free(fc);
		return NULL;
	}
	/* Read now: the replica drops its privileges right after. */
	if ((fc->tls = http_tls_client_new(cfg->cluster_cert, cfg->cluster_key, cfg->cluster_ca,
	    "worker", cause)) == NULL) {
		free(fc);
		return NULL;
	}
	if ((fc->st = store_open(cfg->store_url, cause)) == NULL) {
		http_tls_client_free(fc->tls);
		free(fc);
		return NULL;
	}
	return fc;
}

static void
workers_clear(struct front_cluster *fc)
{
	size_t i;

	for (i = 0; i < fc->nworkers; i++)
		store_worker_clear(&fc->workers[i]);
	free(fc->workers);
	fc->workers = NULL;
	fc->nworkers = 0;
}

void
front_cluster_free(struct front_cluster *fc)
{
	if (fc == NULL)
		return;
	workers_clear(fc);
	store_close(fc->st);
	http_tls_client_free(fc->tls);
	free(fc);
}

/* The workers as the store has them, at most FRONT_WORKERS_REFRESH_MS old. */
static void
workers_refresh(struct front_cluster *fc)
{
	struct store_worker *w;
	char *cause = NULL;
	size_t n;

	if (store_now_ms() - fc->refreshed_ms < FRONT_WORKERS_REFRESH_MS)
		return;
	if (store_worker_list(fc->st, &w, &n, &cause) == -1) {
		log_warnx("front: workers: %s", cause);
		free(cause);
		return;		/* serve from the last list meanwhile */
	}
	workers_clear(fc);
	fc->workers = w;
	fc->nworkers = n;
	fc->refreshed_ms = store_now_ms();
}

static int
worker_live(const struct store_worker *w)
{
	return front_worker_live(w, store_now_ms());
}

static const struct store_worker *
worker_named(struct front_cluster *fc, const char *name)
{
	size_t i;

	for (i = 0; i < fc->nworkers; i++)
		if (strcmp(fc->workers[i].name, name) == 0)
			return &fc->workers[i];
	return NULL;
}

/* Any live worker, the same one each time (the first by name): for calls any worker serves. */
static const struct store_worker *
worker_any(struct front_cluster *fc)
{
	size_t i;

	for (i = 0; i < fc->nworkers; i++)
		if (worker_live(&fc->workers[i]))
			return &fc->workers[i];
	return NULL;
}

/* An mTLS connection to a worker's address ("IP:PORT"); NULL if it cannot even start. */
static struct bufferevent *
worker_connect(struct front_cluster *fc, const struct store_worker *w)
{
	struct bufferevent *bev;
	char *cause = NULL;

	if ((bev = http_tls_client_connect(fc->tls, fc->base, w->addr, &cause)) == NULL) {
		log_warnx("front: worker %s at %s: %s", w->name, w->addr, cause);
		free(cause);
	}
	return bev;
}

static void
proxy_to(struct front_cluster *fc, struct http_req *req, const struct store_worker *w,
    const char *proto)
{
	struct bufferevent *up;

	if (w == NULL) {
		http_req_add_header(req, "Retry-After", "5");
		front_reply_error(req, 503, "unavailable", "no sandbox worker is available; try again");
		return;
	}
	if ((up = worker_connect(fc, w)) == NULL) {
		front_reply_error(req, 503, "unavailable", "the sandbox worker is not available");
		return;
	}
	front_proxy(req, up, proto);
}

static int req_sandbox_any(struct front_cluster *, struct http_req *, char[STORE_ID_MAX]);
static int front_key(struct front_cluster *, struct http_req *, struct store_key *);

/* A sandbox id as the workers make them (lowercase letters and digits); else not one. */
static int
id_ok(const char *id)
{
	size_t n = strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789");

	return n > 0 && n < STORE_ID_MAX && id[n] == '\0';
}

/*
 * The sandbox a request is about, from its path, E2b-Sandbox-Id or Host; 0
 * if none, or not an id a worker makes (any worker answers that one, with
 * the 400 or 404 its API gives).
 */
static int
req_sandbox(struct front_cluster *fc, struct http_req *req, char id[STORE_ID_MAX])
{
	return req_sandbox_any(fc, req, id) && id_ok(id);
}

/* The sandbox whose envd access token is token: 1 with its id, else 0. */
static int
sandbox_by_token(struct front_cluster *fc, const char *token, char id[STORE_ID_MAX])
{
	struct store_sandbox rec;
	char *cause = NULL;
	int rc;

	if ((rc = store_sandbox_by_token(fc->st, token, &rec, &cause)) == -1) {
		log_warnx("front: sandbox by token: %s", cause);
		free(cause);
	}
	if (rc != 1)
		return 0;	/* any worker answers the 404 (or the store's trouble) */
	snprintf(id, STORE_ID_MAX, "%s", rec.id);
	store_sandbox_clear(&rec);
	return 1;
}

static int
req_sandbox_any(struct front_cluster *fc, struct http_req *req, char id[STORE_ID_MAX])
{
	static const char *const prefixes[] = { "/v1/sandboxes/", "/v2/sandboxes/", "/sandboxes/",
	    NULL };
	const char *path = http_req_path(req), *h, *const *p;
	char hid[E2B_TOKEN_ID_MAX + 1];
	unsigned port;
	size_t n;

	for (p = prefixes; *p != NULL; p++) {
		if (strncmp(path, *p, strlen(*p)) != 0)
			continue;
		path += strlen(*p);
		n = strcspn(path, "/");
		if (n == 0 || n >= STORE_ID_MAX)
			return 0;
		memcpy(id, path, n);
		id[n] = '\0';
		return 1;
	}
	if ((h = http_req_header(req, "e2b-sandbox-id")) != NULL && *h != '\0' &&
	    strlen(h) < STORE_ID_MAX) {
		snprintf(id, STORE_ID_MAX, "%s", h);
		return 1;
	}
	if (e2b_host_parse(http_req_header(req, "host"), fc->cfg->e2b_domain, &port, hid) ==
	    E2B_HOST_SANDBOX) {
		snprintf(id, STORE_ID_MAX, "%s", hid);
		return 1;
	}
	/* envd's own paths with only X-Access-Token (the Python SDK after connect). */
	if (e2b_classify(http_req_path(req), NULL) == E2B_WAY_ENVD &&
	    (h = http_req_header(req, "x-access-token")) != NULL && *h != '\0')
		return sandbox_by_token(fc, h, id);
	return 0;
}

/* --- creates: placed, and moved on when a worker refuses ------------------ */

#define PLACE_TRIES	3
#define PLACE_ANSWER_MAX	(1024 * 1024)

struct place {
	struct front_cluster	*fc;
	struct http_req		*req;
	char			**hdrs;
	char			 names[PLACE_TRIES][STORE_ID_MAX];
	size_t			 n, at;		/* candidates, the one being tried */
	uint64_t		 mb;		/* the create's memory, held on the worker tried */
	struct http_creq	*cr;
	int			 status;
	char			*ctype;
	struct http_head	*head;		/* the answer's headers (copied) */
	struct evbuffer		*answer;
	int			 started;	/* the body is in: a try runs until its done */
};

static void
place_free(struct place *pl)
{
	if (pl->cr != NULL)
		http_creq_cancel(pl->cr);
	front_headers_free(pl->hdrs);
	free(pl->ctype);
	if (pl->head != NULL) {
		http_head_free(pl->head);
		free(pl->head);
	}
	evbuffer_free(pl->answer);
	http_req_on_close(pl->req, NULL, NULL);
	http_req_unref(pl->req);
	free(pl);
}

static void place_try(struct place *pl);

static void
place_head(struct http_creq *cr, int status, const char *ctype, void *arg)
{
	struct place *pl = arg;
	const struct http_head *h = http_creq_response_head(cr);
	size_t i;

	pl->status = status;
	free(pl->ctype);
	pl->ctype = *ctype != '\0' ? xstrdup(ctype) : NULL;
	if (pl->head != NULL) {
		http_head_free(pl->head);
		free(pl->head);
	}
	/* Keep the end-to-end headers to pass on (a copy: h lives for this call only). */
	pl->head = xcalloc(1, sizeof(*pl->head));
	pl->head->headers = xcalloc(h->nheaders + 1, sizeof(*pl->head->headers));
	for (i = 0; i < h->nheaders; i++) {
		if (http_hop_header(h->headers[i].name) ||
		    strcasecmp(h->headers[i].name, "content-type") == 0 ||
		    strcasecmp(h->headers[i].name, "server") == 0)
			continue;
		pl->head->headers[pl->head->nheaders].name = xstrdup(h->headers[i].name);
		pl->head->headers[pl->head->nheaders++].value = xstrdup(h->headers[i].value);
	}
	evbuffer_drain(pl->answer, evbuffer_get_length(pl->answer));
}

static void
place_data(struct http_creq *cr, const char *data, size_t n, void *arg)
{
	struct place *pl = arg;

	if (evbuffer_get_length(pl->answer) + n <= PLACE_ANSWER_MAX)
		evbuffer_add(pl->answer, data, n);
}

static void
place_done(struct http_creq *cr, const char *error, void *arg)
{
	struct place *pl = arg;
	size_t i;

	pl->cr = NULL;
	/*
	 * Refused before it did anything (no answer: the worker is gone; 503:
	 * full, draining, not ready): the next candidate. Any other answer,
	 * success or the caller's mistake, is the answer.
	 */
	if (error != NULL || pl->status == 0 || pl->status == 503) {
		place_unhold(&pl->fc->holds, pl->names[pl->at], pl->mb);
		log_warnx("front: create on worker %s: %s; %s", pl->names[pl->at],
		    error != NULL ? error : "503", pl->at + 1 < pl->n ? "next worker" : "no more");
		if (++pl->at < pl->n) {
			place_try(pl);
			return;
		}
		if (pl->status == 503 && error == NULL)
			goto answer;	/* the last worker's own refusal says why */
		http_req_add_header(pl->req, "Retry-After", "5");
		front_reply_error(pl->req, 503, "unavailable", "no sandbox worker took the create; "
		    "try again");
		place_free(pl);
		return;
	}
answer:
	for (i = 0; pl->head != NULL && i < pl->head->nheaders; i++)
		http_req_add_header(pl->req, pl->head->headers[i].name, pl->head->headers[i].value);
	http_reply(pl->req, pl->status, pl->ctype, evbuffer_pullup(pl->answer, -1),
	    evbuffer_get_length(pl->answer));
	place_free(pl);
}

/* The create, whole (its body is buffered), to candidate pl->at. */
static void
place_try(struct place *pl)
{
	static const struct http_client_cb cbs = { place_head, place_data, place_done, NULL };
	const struct store_worker *w = worker_named(pl->fc, pl->names[pl->at]);
	struct http_creq_spec spec;
	struct bufferevent *bev;
	size_t len;

	pl->status = 0;
	if (w == NULL || (bev = worker_connect(pl->fc, w)) == NULL) {
		place_done(NULL, "cannot connect", pl);
		return;
	}
	memset(&spec, 0, sizeof(spec));
	spec.method = http_req_method(pl->req);
	spec.target = http_req_head(pl->req)->target;
	spec.host = http_req_header(pl->req, "host") ? http_req_header(pl->req, "host") :
	    "localhost";
	spec.headers = (const char *const *)pl->hdrs;
	spec.peer = "the sandbox worker";
	spec.body = http_req_body(pl->req, &len);
	spec.body_len = (ssize_t)len;
	place_hold(&pl->fc->holds, w->name, pl->mb, store_now_ms());
	pl->cr = http_client_start(bev, &spec, &cbs, pl);
}

/*
 * The client left. Before its body was in, nothing was sent: done. After,
 * the worker may be making the sandbox: the tries go on, the answer is
 * dropped (the sandbox is listed, and its idle and lifetime timeouts apply).
 */
static void
place_gone(struct http_req *req, void *arg)
{
	struct place *pl = arg;

	if (!pl->started)
		place_free(pl);
}

/*
 * The template a create names (airlock's "template", or E2B's "templateID"
 * as name, name:tag or ns/name:tag) as airlock's name, into out; "" if
 * none or not valid (the worker refuses that one itself).
 */
static void
create_template(json_t *body, char out[STORE_ID_MAX])
{
	const char *t = json_string_value(json_object_get(body, "template"));
	char name[E2B_NAME_MAX + 1], *cause = NULL;

	out[0] = '\0';
	if (t != NULL) {
		if (strlen(t) < STORE_ID_MAX)
			snprintf(out, STORE_ID_MAX, "%s", t);
		return;
	}
	t = json_string_value(json_object_get(body, "templateID"));
	if (t != NULL && e2b_template_parse(t, name, &cause) == 0 && strlen(name) < STORE_ID_MAX)
		snprintf(out, STORE_ID_MAX, "%s", name);
	free(cause);
}

enum owned { OWNED_SNAPSHOT, OWNED_VOLUME };

/*
 * The worker whose data dir holds project's named snapshot or volume
 * `name` (calls that need its files go there): 1 with it in worker; 0 if
 * there is no such thing or it has no worker (a worker answers those); -1
 * if the store did not answer.
 */
static int
owner_worker(struct front_cluster *fc, const char *project, enum owned kind, const char *name,
    char worker[STORE_ID_MAX])
{
	struct store_snap sn;
	struct store_volume v;
	char *cause = NULL;
	int rc;

	worker[0] = '\0';
	if (name == NULL || name[0] == '\0')
		return 0;
	if (kind == OWNED_SNAPSHOT) {
		if ((rc = store_snap_get(fc->st, project, name, &sn, &cause)) == 1) {
			snprintf(worker, STORE_ID_MAX, "%s", sn.worker);
			store_snap_clear(&sn);
		}
	} else if ((rc = store_volume_get(fc->st, project, name, &v, &cause)) == 1)
		snprintf(worker, STORE_ID_MAX, "%s", v.worker);
	if (rc == -1) {
		log_warnx("front: %s %s: %s", kind == OWNED_SNAPSHOT ? "snapshot" : "volume", name,
		    cause);
		free(cause);
		return -1;
	}
	return rc == 1 && worker[0] != '\0';
}

/*
 * A live, up worker that must serve a call about a snapshot or volume it
 * holds; NULL after a 503 that says why not.
 */
static const struct store_worker *
owner_live(struct front_cluster *fc, struct http_req *req, const char *what, const char *name,
    const char *owner, int up)
{
	const struct store_worker *w = worker_named(fc, owner);
	char msg[256];

	if (w != NULL && worker_live(w) && (!up || strcmp(w->state, "up") == 0))
		return w;
	snprintf(msg, sizeof(msg), "%s %s is on worker %s, which is %s; try again later", what,
	    name, owner, w != NULL && worker_live(w) ? w->state : "unreachable");
	http_req_add_header(req, "Retry-After", "5");
	front_reply_error(req, 503, "unavailable", msg);
	return NULL;
}

/*
 * front_place over the workers as this replica sees them: their used
 * memory plus what it holds for creates it sent since their heartbeat.
 * Names, not pointers: a refresh of the workers may come between tries.
 */
static size_t
place_candidates(struct front_cluster *fc, const struct place_want *want,
    const struct store_worker **cand, char names[][STORE_ID_MAX])
{
	struct store_worker *view;
	int64_t now = store_now_ms();
	size_t i, n;

	if (fc->nworkers == 0)
		return 0;
	view = xcalloc(fc->nworkers, sizeof(*view));
	memcpy(view, fc->workers, fc->nworkers * sizeof(*view));	/* shallow: read only */
	for (i = 0; i < fc->nworkers; i++)
		view[i].used_memory_mb += place_held_mb(&fc->holds, view[i].name, now);
	n = front_place(view, fc->nworkers, want, now, cand, PLACE_TRIES);
	for (i = 0; i < n; i++)
		snprintf(names[i], STORE_ID_MAX, "%s", cand[i]->name);
	free(view);
	return n;
}

/*
 * The body is in: where it goes, then the first try. A create from a named
 * snapshot, or one that attaches a volume, goes to the worker that holds
 * it (the snapshot's, when both: that worker refuses a volume it lacks);
 * any other to front_place's candidates. The key is looked up once, for
 * its project; a missing or unknown key is placed anyway (the worker
 * refuses it).
 */
static void
place_body(struct http_req *req, void *arg)
{
	const struct store_worker *cand[PLACE_TRIES];
	struct place *pl = arg;
	struct place_want want = { NULL, 0 };
	struct store_key key;
	char tmpl[STORE_ID_MAX], vol[STORE_ID_MAX], owner[STORE_ID_MAX];
	const char *what = NULL, *name = NULL, *vname;
	json_t *body;
	size_t len;
	const char *raw = http_req_body(req, &len);

	body = json_loadb(raw != NULL ? raw : "", len, 0, NULL);
	create_template(body, tmpl);
	/* Without one, the worker's default: the replica's is the best guess. */
	want.memory_mb = json_integer_value(json_object_get(body, "memory_mb")) > 0 ?
	    (uint64_t)json_integer_value(json_object_get(body, "memory_mb")) :
	    (uint64_t)pl->fc->cfg->default_memory_mb;
	pl->mb = want.memory_mb;
	vname = json_string_value(json_object_get(json_array_get(json_object_get(body, "volumes"),
	    0), "name"));
	snprintf(vol, sizeof(vol), "%s", vname != NULL && strlen(vname) < sizeof(vol) ? vname : "");
	json_decref(body);
	if ((tmpl[0] != '\0' || vol[0] != '\0') && front_key(pl->fc, req, &key) == 1) {
		if (owner_worker(pl->fc, key.project, OWNED_SNAPSHOT, tmpl, owner) == 1)
			what = "snapshot", name = tmpl;
		else if (owner_worker(pl->fc, key.project, OWNED_VOLUME, vol, owner) == 1)
			what = "volume", name = vol;
	}
	if (what != NULL) {
		if ((cand[0] = owner_live(pl->fc, req, what, name, owner, 1)) == NULL) {
			place_free(pl);
			return;
		}
		pl->n = 1;
	} else {
		want.template_name = tmpl[0] != '\0' ? tmpl : NULL;
		pl->n = place_candidates(pl->fc, &want, cand, pl->names);
	}
	if (pl->n == 0) {
		http_req_add_header(req, "Retry-After", "5");
		front_reply_error(req, 503, "unavailable", "no sandbox worker is available; try again");
		place_free(pl);
		return;
	}
	if (what != NULL)
		snprintf(pl->names[0], sizeof(pl->names[0]), "%s", cand[0]->name);
	pl->started = 1;
	place_try(pl);
}

static void
place_create(struct front_cluster *fc, struct http_req *req, const char *proto)
{
	struct place *pl;

	if (worker_any(fc) == NULL) {
		http_req_add_header(req, "Retry-After", "5");
		front_reply_error(req, 503, "unavailable", "no sandbox worker is available; try again");
		return;
	}
	pl = xcalloc(1, sizeof(*pl));
	pl->fc = fc;
	pl->req = req;
	http_req_ref(req);
	pl->answer = evbuffer_new();
	pl->hdrs = front_request_headers(req, proto);
	http_req_on_close(req, place_gone, pl);
	http_req_buffer(req, HTTP_JSON_BODY_MAX, place_body, pl);
}

/* --- fan-out: a list from every live worker, merged ------------------------ */

struct fanout;

struct fanout_part {
	struct fanout		*fo;
	char			 name[STORE_ID_MAX];
	struct http_creq	*cr;
	struct evbuffer		*body;
	int			 status;
	char			*error;
	int			 done;
};

struct fanout {
	struct http_req		*req;
	struct fanout_part	*parts;
	size_t			 nparts, pending;
	int			 e2b;		/* E2B's lists: arrays, not {"sandboxes": ...} */
	int			 gone;
	char			*hdrs[HTTP_HEADERS_MAX + 1];
};

static void
fanout_free(struct fanout *fo)
{
	size_t i;

	for (i = 0; i < fo->nparts; i++) {
		if (fo->parts[i].cr != NULL)
			http_creq_cancel(fo->parts[i].cr);
		if (fo->parts[i].body != NULL)
			evbuffer_free(fo->parts[i].body);
		free(fo->parts[i].error);
	}
	for (i = 0; fo->hdrs[i] != NULL; i++)
		free(fo->hdrs[i]);
	free(fo->parts);
	http_req_on_close(fo->req, NULL, NULL);
	http_req_unref(fo->req);
	free(fo);
}

static int
cmp_id(const void *a, const void *b)
{
	const char *x = json_string_value(json_object_get(*(json_t *const *)a, "id"));
	const char *y = json_string_value(json_object_get(*(json_t *const *)b, "id"));

	return strcmp(x ? x : "", y ? y : "");
}

/* Every worker answered: one answer, as one worker would give it. */
static void
fanout_finish(struct fanout *fo)
{
	json_t *merged = json_array(), *j, *arr, *e, **all;
	const char *lim = NULL;
	struct http_query q;
	size_t i, k, n = 0;
	int more = 0;
	long limit = 100;
	char *cause = NULL;

	for (i = 0; i < fo->nparts; i++) {
		struct fanout_part *pt = &fo->parts[i];
		if (pt->error != NULL || pt->status != 200) {
			/* A worker's refusal (a bad key, a bad filter) is every worker's: pass it on. */
			if (pt->error == NULL && evbuffer_get_length(pt->body) > 0) {
				http_reply(fo->req, pt->status, "application/json",
				    evbuffer_pullup(pt->body, -1), evbuffer_get_length(pt->body));
			} else {
				http_req_add_header(fo->req, "Retry-After", "5");
				front_reply_error(fo->req, 503, "unavailable", "a sandbox worker did "
				    "not answer the list; try again");
			}
			json_decref(merged);
			return;
		}
		j = json_loadb((const char *)evbuffer_pullup(pt->body, -1),
		    evbuffer_get_length(pt->body), 0, NULL);
		arr = fo->e2b ? j : json_object_get(j, "sandboxes");
		if (!fo->e2b && json_is_string(json_object_get(j, "next")))
			more = 1;
		json_array_foreach(arr, k, e)
			json_array_append(merged, e);
		json_decref(j);
	}
	if (fo->e2b) {
		http_reply_json(fo->req, 200, merged);
		return;
	}
	/* airlock's list: ordered by id, cut at its limit with the cursor of the last. */
	memset(&q, 0, sizeof(q));
	if (http_req_query(fo->req) != NULL && http_query_parse(http_req_query(fo->req), &q,
	    &cause) == 0 && (lim = http_query_value(&q, "limit")) != NULL)
		limit = strtol(lim, NULL, 10);
	http_query_free(&q);
	free(cause);
	if (limit < 1 || limit > 1000)
		limit = 100;
	n = json_array_size(merged);
	all = xcalloc(n + 1, sizeof(*all));
	for (i = 0; i < n; i++)
		all[i] = json_array_get(merged, i);
	qsort(all, n, sizeof(*all), cmp_id);
	arr = json_array();
	for (i = 0; i < n && i < (size_t)limit; i++)
		json_array_append(arr, all[i]);
	if (n > (size_t)limit)
		more = 1;
	http_reply_json(fo->req, 200, json_pack("{s:o,s:o}", "sandboxes", arr, "next",
	    more && json_array_size(arr) > 0 ? json_incref(json_object_get(
	    json_array_get(arr, json_array_size(arr) - 1), "id")) : json_null()));
	free(all);
	json_decref(merged);
}

static void
part_head(struct http_creq *cr, int status, const char *ctype, void *arg)
{
	((struct fanout_part *)arg)->status = status;
}

static void
part_data(struct http_creq *cr, const char *data, size_t n, void *arg)
{
	struct fanout_part *pt = arg;

	if (evbuffer_get_length(pt->body) + n > FRONT_FANOUT_BODY_MAX) {
		if (pt->error == NULL)
			pt->error = xstrdup("answer too large");
		return;
	}
	evbuffer_add(pt->body, data, n);
}

static void
part_done(struct http_creq *cr, const char *error, void *arg)
{
	struct fanout_part *pt = arg;
	struct fanout *fo = pt->fo;

	pt->cr = NULL;
	pt->done = 1;
	if (error != NULL && pt->error == NULL) {
		log_warnx("front: list from worker %s: %s", pt->name, error);
		pt->error = xstrdup(error);
	}
	if (--fo->pending > 0)
		return;
	if (!fo->gone)
		fanout_finish(fo);
	fanout_free(fo);
}

static void
fanout_gone(struct http_req *req, void *arg)
{
	struct fanout *fo = arg;
	size_t i;

	fo->gone = 1;
	for (i = 0; i < fo->nparts; i++)
		if (fo->parts[i].cr != NULL) {
			http_creq_cancel(fo->parts[i].cr);
			fo->parts[i].cr = NULL;
			fo->pending--;
		}
	if (fo->pending == 0)
		fanout_free(fo);
}

/* A list has no body: anything sent is dropped; the answer waits for the workers. */
static void
fanout_body(struct http_req *req, const char *data, size_t n, void *arg)
{
}

static void
fanout_body_end(struct http_req *req, void *arg)
{
}

static void
fanout(struct front_cluster *fc, struct http_req *req, const char *proto)
{
	static const struct http_client_cb cbs = { part_head, part_data, part_done, NULL };
	const struct http_head *h = http_req_head(req);
	struct http_creq_spec spec;
	struct bufferevent *bev;
	struct fanout *fo;
	size_t i, nh = 0;

	fo = xcalloc(1, sizeof(*fo));
	fo->req = req;
	http_req_ref(req);
	fo->e2b = strncmp(http_req_path(req), "/v1/", 4) != 0;
	for (i = 0; i < h->nheaders && nh < HTTP_HEADERS_MAX - 1; i++) {
		const char *name = h->headers[i].name;
		if (strcasecmp(name, "authorization") == 0 || strcasecmp(name, "x-api-key") == 0 ||
		    strncasecmp(name, "e2b-", 4) == 0 || strcasecmp(name, "accept") == 0)
			xasprintf(&fo->hdrs[nh++], "%s: %s", name, h->headers[i].value);
	}
	xasprintf(&fo->hdrs[nh++], "X-Forwarded-Proto: %s", proto);
	fo->parts = xcalloc(fc->nworkers + 1, sizeof(*fo->parts));
	memset(&spec, 0, sizeof(spec));
	spec.method = "GET";
	spec.target = h->target;
	spec.host = http_req_header(req, "host") ? http_req_header(req, "host") : "localhost";
	spec.headers = (const char *const *)fo->hdrs;
	spec.peer = "the sandbox worker";
	for (i = 0; i < fc->nworkers; i++) {
		struct fanout_part *pt;
		if (!worker_live(&fc->workers[i]))
			continue;
		pt = &fo->parts[fo->nparts++];
		pt->fo = fo;
		snprintf(pt->name, sizeof(pt->name), "%s", fc->workers[i].name);
		pt->body = evbuffer_new();
		fo->pending++;
		if ((bev = worker_connect(fc, &fc->workers[i])) == NULL) {
			pt->error = xstrdup("cannot connect");
			pt->done = 1;
			fo->pending--;
			continue;
		}
		pt->cr = http_client_start(bev, &spec, &cbs, pt);
	}
	if (fo->nparts == 0) {
		http_req_add_header(req, "Retry-After", "5");
		front_reply_error(req, 503, "unavailable", "no sandbox worker is available; try again");
		fanout_free(fo);
		return;
	}
	if (fo->pending == 0) {
		fanout_finish(fo);
		fanout_free(fo);
		return;
	}
	http_req_on_close(req, fanout_gone, fo);
	http_req_stream(req, 0, fanout_body, fanout_body_end, fo);
}

/*
 * The key a request carries (Authorization: Bearer, or E2B's X-API-KEY):
 * 1 found, 0 none or unknown, -1 the store did not answer.
 */
static int
front_key(struct front_cluster *fc, struct http_req *req, struct store_key *key)
{
	const char *h = http_req_header(req, "authorization"), *k = NULL;
	char hash[65], *cause = NULL;
	int rc;

	if (h != NULL && strncasecmp(h, "Bearer ", 7) == 0 && h[7] != '\0')
		k = h + 7;
	else if ((h = http_req_header(req, "x-api-key")) != NULL && *h != '\0')
		k = h;
	if (k == NULL)
		return 0;
	sha256_hex(k, strlen(k), hash);
	if ((rc = store_key_find(fc->st, hash, key, &cause)) == -1) {
		log_warnx("front: key lookup: %s", cause);
		free(cause);
	}
	return rc;
}

/*
 * The caller's API key, for what the replica answers itself (the workers
 * check keys on everything they serve): 0 with *key filled, or -1 when it
 * answered 401/503.
 */
static int
front_auth(struct front_cluster *fc, struct http_req *req, struct store_key *key)
{
	const char *h = http_req_header(req, "authorization");
	int rc;

	if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0 || h[7] == '\0') {
		front_reply_error(req, 401, "unauthorized", "missing API key: send "
		    "Authorization: Bearer <key>");
		return -1;
	}
	if ((rc = front_key(fc, req, key)) == 1)
		return 0;
	front_reply_error(req, rc == -1 ? 503 : 401, rc == -1 ? "unavailable" : "unauthorized",
	    rc == -1 ? "the store did not answer" : "unknown API key");
	return -1;
}

/* --- GET /v1/workers --------------------------------------------------------- */

static json_t *
worker_json(const struct store_worker *w)
{
	return json_pack("{s:s,s:s,s:s,s:b,s:O,s:O,s:O,s:{s:i,s:I},s:{s:i,s:I,s:i,s:i},s:I,"
	    "s:o,s:o}",
	    "name", w->name, "addr", w->addr, "state", w->state, "live", worker_live(w),
	    "labels", w->labels, "abi", w->abi, "templates", w->templates,
	    "capacity", "vcpus", (int)w->vcpus, "memory_mb", (json_int_t)w->memory_mb,
	    "used", "vcpus", (int)w->used_vcpus, "memory_mb", (json_int_t)w->used_memory_mb,
	    "sandboxes", (int)w->sandboxes, "pool_ready", (int)w->pool_ready,
	    "epoch", (json_int_t)w->epoch, "started_at", json_time_ms(w->started_at),
	    "heartbeat_at", json_time_ms(w->heartbeat_at));
}

static void
workers_list(struct front_cluster *fc, struct http_req *req)
{
	struct store_key key;
	json_t *arr;
	size_t i;

	if (front_auth(fc, req, &key) == -1)
		return;
	if (strcmp(key.role, "admin") != 0) {
		front_reply_error(req, 403, "forbidden", "this needs an admin key");
		return;
	}
	arr = json_array();
	for (i = 0; i < fc->nworkers; i++)
		json_array_append_new(arr, worker_json(&fc->workers[i]));
	http_reply_json(req, 200, json_pack("{s:o}", "workers", arr));
}

/*
 * GET /metrics on a replica: the cluster as the store sees it, per worker
 * (live, capacity, use, heartbeat age). A worker's own metrics (its
 * sandboxes, pools, gateway) are on its health_listen.
 */
static void
cluster_metrics(struct front_cluster *fc, struct http_req *req)
{
	static const struct {
		const char *name, *help;
	} g[] = {
		{ "airlock_worker_live", "1 while the worker's heartbeat is younger than 10 s" },
		{ "airlock_worker_draining", "1 while the worker takes no new sandboxes" },
		{ "airlock_worker_capacity_vcpus", "CPUs of the worker's host" },
		{ "airlock_worker_capacity_memory_mb", "RAM of the worker's host" },
		{ "airlock_worker_used_vcpus", "vCPUs of its VMs, pool members included" },
		{ "airlock_worker_used_memory_mb", "guest memory of its VMs, pool members included" },
		{ "airlock_worker_sandboxes", "its sandboxes" },
		{ "airlock_worker_pool_ready", "its warm pool members ready to claim" },
		{ "airlock_worker_heartbeat_age_seconds", "since its last heartbeat" },
	};
	struct evbuffer *out = evbuffer_new();
	const struct store_worker *w;
	size_t i, k;
	double v;

	for (k = 0; k < sizeof(g) / sizeof(g[0]); k++) {
		evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s gauge\n", g[k].name, g[k].help,
		    g[k].name);
		for (i = 0; i < fc->nworkers; i++) {
			w = &fc->workers[i];
			switch (k) {
			case 0: v = worker_live(w); break;
			case 1: v = strcmp(w->state, "draining") == 0; break;
			case 2: v = w->vcpus; break;
			case 3: v = (double)w->memory_mb; break;
			case 4: v = w->used_vcpus; break;
			case 5: v = (double)w->used_memory_mb; break;
			case 6: v = w->sandboxes; break;
			case 7: v = w->pool_ready; break;
			default: v = (double)(store_now_ms() - w->heartbeat_at) / 1000.0; break;
			}
			/* Worker names are checked at start (A-Z a-z 0-9 . _ -): nothing to escape. */
			evbuffer_add_printf(out, "%s{worker=\"%s\"} %.17g\n", g[k].name, w->name, v);
		}
	}
	evbuffer_add_printf(out, "# HELP airlock_workers_refreshed_age_seconds since the replica "
	    "last read the workers from the store\n# TYPE airlock_workers_refreshed_age_seconds "
	    "gauge\nairlock_workers_refreshed_age_seconds %.3f\n",
	    (double)(store_now_ms() - fc->refreshed_ms) / 1000.0);
	http_reply(req, 200, "text/plain; version=0.0.4", (const char *)evbuffer_pullup(out, -1),
	    evbuffer_get_length(out));
	evbuffer_free(out);
}

/* Probes: /healthz (the replica serves), /readyz (the store answers and a worker is live). */
static void
probes(struct front_cluster *fc, struct http_req *req, const char *path)
{
	int ready = worker_any(fc) != NULL && store_now_ms() - fc->refreshed_ms <
	    FRONT_WORKER_STALE_MS;

	if (strcmp(path, "/healthz") == 0)
		http_reply_json(req, 200, json_pack("{s:s,s:s}", "status", "ok", "role", "api"));
	else
		http_reply_json(req, ready ? 200 : 503, json_pack("{s:s,s:i}", "status",
		    ready ? "ready" : "no live worker or no store", "workers", (int)fc->nworkers));
}

/*
 * GET /v1/sandboxes/{id} of a sandbox whose worker is not live: reads still
 * work, from the store, for the key's own project (the worker would have
 * checked it): state "unreachable", the worker, what the row holds. Not
 * its env or network (the worker renders those with their secrets
 * redacted), nor anything live (health, disk use).
 */
static void
unreachable_get(struct front_cluster *fc, struct http_req *req, const struct store_sandbox *r)
{
	struct store_key key;
	char why[160];

	if (front_auth(fc, req, &key) == -1)
		return;
	/* Another project's sandbox is not found, as the worker would say. */
	if (strcmp(key.project, r->project) != 0) {
		front_reply_error(req, 404, "not_found", "no such sandbox");
		return;
	}
	snprintf(why, sizeof(why), "worker %s is unreachable (was %s)", r->worker, r->state);
	http_reply_json(req, 200, json_pack("{s:s,s:s,s:s,s:s,s:i,s:i,s:O,s:o,s:o,s:s,s:{s:s,s:s}}",
	    "id", r->id, "state", "unreachable", "worker", r->worker, "template", r->template_name,
	    "vcpus", (int)r->vcpus, "memory_mb", (int)r->memory_mb, "metadata", r->metadata,
	    "created_at", json_time_ms(r->created_at), "updated_at", json_time_ms(r->updated_at),
	    "error", why, "health", "status", "unknown", "reason", why));
}

/* --- routing ----------------------------------------------------------------- */

/*
 * Calls about one named snapshot or volume, to the worker that holds its
 * files: DELETE /v1/snapshots/{name}, E2B's DELETE /templates/{name:tag},
 * GET and DELETE /v1/volumes/{name}. 1 if sent or answered; 0 if not such
 * a call, or the key's project has no such thing (any worker answers it).
 */
static int
owned_route(struct front_cluster *fc, struct http_req *req, const char *proto)
{
	const char *path = http_req_path(req), *method = http_req_method(req), *p;
	const struct store_worker *w;
	char name[STORE_ID_MAX], owner[STORE_ID_MAX];
	struct store_key key;
	enum owned kind;
	size_t n;

	if (strcmp(method, "DELETE") == 0 && strncmp(path, "/v1/snapshots/", 14) == 0)
		p = path + 14, kind = OWNED_SNAPSHOT;
	else if (strcmp(method, "DELETE") == 0 && strncmp(path, "/templates/", 11) == 0)
		p = path + 11, kind = OWNED_SNAPSHOT;
	else if ((strcmp(method, "DELETE") == 0 || strcmp(method, "GET") == 0) &&
	    strncmp(path, "/v1/volumes/", 12) == 0)
		p = path + 12, kind = OWNED_VOLUME;
	else
		return 0;
	n = strcspn(p, "/:%");	/* E2B's ":default" tag, raw or %3A */
	if (n == 0 || n >= sizeof(name) || strchr(p + n, '/') != NULL)
		return 0;
	memcpy(name, p, n);
	name[n] = '\0';
	if (front_key(fc, req, &key) != 1 || owner_worker(fc, key.project, kind, name, owner) != 1)
		return 0;
	if ((w = owner_live(fc, req, kind == OWNED_SNAPSHOT ? "snapshot" : "volume", name, owner,
	    0)) != NULL)
		proxy_to(fc, req, w, proto);
	return 1;
}

static int
is_list_path(const char *path)
{
	return strcmp(path, "/v1/sandboxes") == 0 || strcmp(path, "/sandboxes") == 0 ||
	    strcmp(path, "/v2/sandboxes") == 0;
}

void
front_cluster_route(struct front_cluster *fc, struct http_req *req, const char *proto)
{
	const char *method = http_req_method(req), *path = http_req_path(req);
	struct store_sandbox rec;
	const struct store_worker *w;
	char id[STORE_ID_MAX], *cause = NULL;
	int rc;

	workers_refresh(fc);
	if (strcmp(path, "/healthz") == 0 || strcmp(path, "/readyz") == 0) {
		probes(fc, req, path);
		return;
	}
	if (strcmp(path, "/v1/workers") == 0 && strcmp(method, "GET") == 0) {
		workers_list(fc, req);
		return;
	}
	if (strcmp(path, "/metrics") == 0 && strcmp(method, "GET") == 0) {
		cluster_metrics(fc, req);
		return;
	}
	/* /v1/workers/{name}/...: that worker's own (it checks the key and the name). */
	if (strncmp(path, "/v1/workers/", 12) == 0) {
		char name[STORE_ID_MAX];
		size_t n = strcspn(path + 12, "/");
		w = NULL;
		if (n > 0 && n < sizeof(name)) {
			memcpy(name, path + 12, n);
			name[n] = '\0';
			w = worker_named(fc, name);
		}
		if (w == NULL || !worker_live(w)) {
			front_reply_error(req, w == NULL ? 404 : 503, w == NULL ? "not_found" :
			    "unavailable", w == NULL ? "no such worker" : "that worker is not live");
			return;
		}
		proxy_to(fc, req, w, proto);
		return;
	}
	/* A volume is placed as a sandbox is (it takes the worker's disk, not memory). */
	if ((is_list_path(path) || strcmp(path, "/v1/volumes") == 0) && strcmp(method, "POST") == 0) {
		place_create(fc, req, proto);
		return;
	}
	if (is_list_path(path) && strcmp(method, "GET") == 0) {
		fanout(fc, req, proto);
		return;
	}
	if (owned_route(fc, req, proto))
		return;
	if (!req_sandbox(fc, req, id)) {
		proxy_to(fc, req, worker_any(fc), proto);
		return;
	}
	if ((rc = store_sandbox_get(fc->st, id, &rec, &cause)) == -1) {
		log_warnx("front: sandbox %s: %s", id, cause);
		free(cause);
		http_req_add_header(req, "Retry-After", "2");
		front_reply_error(req, 503, "unavailable", "the store did not answer; try again");
		return;
	}
	if (rc == 0) {
		/* Unknown here: any worker answers the 404 in the caller's own shape. */
		proxy_to(fc, req, worker_any(fc), proto);
		return;
	}
	w = worker_named(fc, rec.worker);
	if ((w == NULL || !worker_live(w)) && strcmp(method, "GET") == 0 &&
	    strncmp(path, "/v1/sandboxes/", 14) == 0 && strchr(path + 14, '/') == NULL) {
		unreachable_get(fc, req, &rec);
		store_sandbox_clear(&rec);
		return;
	}
	store_sandbox_clear(&rec);
	if (w == NULL || !worker_live(w)) {
		char msg[256];
		snprintf(msg, sizeof(msg), "sandbox %s is on worker %s, which is unreachable; "
		    "try again", id, w != NULL ? w->name : "(gone)");
		http_req_add_header(req, "Retry-After", "5");
		front_reply_error(req, 503, "unavailable", msg);
		return;
	}
	proxy_to(fc, req, w, proto);
}
