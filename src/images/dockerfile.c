/*
 * Dockerfile → recipe. Each RUN and COPY becomes one recipe run step: a
 * /bin/sh script that the build VM runs as root, carrying the ENV/ARG
 * values, WORKDIR and USER in force at that line, so the step's text is
 * all its cache key needs (images/template_steps.c). COPY reads the
 * context from DOCKERFILE_CONTEXT_DIR, which the build VM mounts as a
 * tmpfs: the context never lands in the image or in the step cache.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/paths.h"
#include "common/util.h"
#include "images/dockerfile.h"
#include "images/recipe.h"

struct df {
	json_t	*recipe;
	json_t	*run;		/* array of step scripts */
	json_t	*env;		/* ENV: persisted in the template */
	json_t	*args;		/* ARG: build time only */
	char	*workdir;	/* absolute, "/" by default */
	char	*user;		/* NULL: root */
	char	*entry;		/* ENTRYPOINT as a shell command */
	int	 entry_exec;	/* ENTRYPOINT was the exec (JSON) form */
	char	*cmd;		/* CMD as a shell command */
	int	 from;
	int	 uses_context;
	int	 line;
	char	**cause;
};

static int
df_fail(struct df *d, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	xvasprintf(&msg, fmt, ap);
	va_end(ap);
	cause_set(d->cause, "line %d: %s", d->line, msg);
	free(msg);
	return -1;
}

/* 'text' for /bin/sh, single quotes closed around each embedded quote. */
static char *
sh_quote(const char *s)
{
	size_t n = 3, i, o = 0;
	char *q;

	for (i = 0; s[i] != '\0'; i++)
		n += s[i] == '\'' ? 4 : 1;
	q = xmalloc(n);
	q[o++] = '\'';
	for (i = 0; s[i] != '\0'; i++) {
		if (s[i] == '\'') {
			memcpy(q + o, "'\\''", 4);
			o += 4;
		} else
			q[o++] = s[i];
	}
	q[o++] = '\'';
	q[o] = '\0';
	return q;
}

static void
str_append(char **buf, const char *fmt, ...)
{
	va_list ap;
	char *add, *n;

	va_start(ap, fmt);
	xvasprintf(&add, fmt, ap);
	va_end(ap);
	xasprintf(&n, "%s%s", *buf != NULL ? *buf : "", add);
	free(*buf);
	free(add);
	*buf = n;
}

static const char *
df_var(struct df *d, const char *name)
{
	json_t *v = json_object_get(d->env, name);

	if (v == NULL)
		v = json_object_get(d->args, name);
	return v != NULL ? json_string_value(v) : NULL;
}

/* $NAME and ${NAME} from ENV and ARG (unset: empty); \$ is a literal $. */
static char *
df_expand(struct df *d, const char *s)
{
	char *out = xstrdup(""), name[128];
	const char *v;
	size_t n;

	while (*s != '\0') {
		if (s[0] == '\\' && s[1] == '$') {
			str_append(&out, "$");
			s += 2;
			continue;
		}
		if (*s != '$') {
			str_append(&out, "%c", *s++);
			continue;
		}
		s++;
		if (*s == '{') {
			const char *end = strchr(s, '}');
			n = end != NULL ? (size_t)(end - s - 1) : 0;
			if (end == NULL || n == 0 || n >= sizeof(name) || strspn(s + 1,
			    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != n) {
				free(out);
				df_fail(d, "bad variable reference (only ${NAME} and $NAME are "
				    "supported)");
				return NULL;
			}
			memcpy(name, s + 1, n);
			s = end + 1;
		} else {
			n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_");
			if (n == 0) {
				str_append(&out, "$");
				continue;
			}
			if (n >= sizeof(name))
				n = sizeof(name) - 1;
			memcpy(name, s, n);
			s += n;
		}
		name[n] = '\0';
		if ((v = df_var(d, name)) != NULL)
			str_append(&out, "%s", v);
	}
	return out;
}

/* The JSON (exec) form: an array of strings, or NULL when rest is not one. */
static json_t *
df_exec_form(const char *rest)
{
	json_t *a, *v;
	size_t i;

	if (rest[0] != '[')
		return NULL;
	if ((a = json_loads(rest, JSON_DECODE_ANY, NULL)) == NULL || !json_is_array(a) ||
	    json_array_size(a) == 0) {
		json_decref(a);
		return NULL;
	}
	json_array_foreach(a, i, v) {
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* An exec-form array as one shell command (each word quoted). */
static char *
df_join_quoted(json_t *a)
{
	char *out = NULL, *q;
	json_t *v;
	size_t i;

	json_array_foreach(a, i, v) {
		q = sh_quote(json_string_value(v));
		str_append(&out, "%s%s", i ? " " : "", q);
		free(q);
	}
	return out;
}

/* Absolute guest path for p relative to WORKDIR, normalized; NULL if it has . or .. */
static char *
df_guest_path(struct df *d, const char *p)
{
	char *abs, *norm;
	size_t n;

	while (p[0] == '.' && p[1] == '/')
		p += 2;
	if (strcmp(p, ".") == 0 || p[0] == '\0')
		return xstrdup(d->workdir);
	if (p[0] == '/')
		abs = xstrdup(p);
	else
		xasprintf(&abs, "%s/%s", strcmp(d->workdir, "/") == 0 ? "" : d->workdir, p);
	/* A trailing slash only says "a directory" (COPY): not part of the path. */
	while ((n = strlen(abs)) > 1 && abs[n - 1] == '/')
		abs[n - 1] = '\0';
	norm = recipe_guest_path(abs);
	free(abs);
	return norm;
}

/* The prelude every step runs: ENV and ARG values, then the WORKDIR. */
static char *
df_prelude(struct df *d)
{
	const char *k;
	char *out = NULL, *q;
	json_t *v;

	json_object_foreach(d->args, k, v) {
		if (json_object_get(d->env, k) != NULL)
			continue;
		q = sh_quote(json_string_value(v));
		str_append(&out, "export %s=%s\n", k, q);
		free(q);
	}
	json_object_foreach(d->env, k, v) {
		q = sh_quote(json_string_value(v));
		str_append(&out, "export %s=%s\n", k, q);
		free(q);
	}
	q = sh_quote(d->workdir);
	str_append(&out, "mkdir -p %s && cd %s || exit 1\n", q, q);
	free(q);
	return out;
}

static int
df_from(struct df *d, const char *rest)
{
	char *img, *tag;

	if (d->from)
		return df_fail(d, "a second FROM: multi-stage builds are not supported");
	d->from = 1;
	if (rest[0] == '-')
		return df_fail(d, "FROM options (%s) are not supported", rest);
	if (strchr(rest, ' ') != NULL || strchr(rest, '\t') != NULL)
		return df_fail(d, "FROM takes one image (\"FROM x AS y\", multi-stage, is not "
		    "supported)");
	if ((img = df_expand(d, rest)) == NULL)
		return -1;
	tag = strchr(img, ':');
	if (tag != NULL)
		*tag++ = '\0';
	if (strcmp(img, "debian") == 0) {
		if (tag == NULL || *tag == '\0' || strcmp(tag, "latest") == 0) {
			free(img);
			return df_fail(d, "FROM debian needs a suite: debian:<suite>, e.g. "
			    "debian:bookworm");
		}
		json_object_set_new(d->recipe, "from", json_pack("{s:s,s:s}", "distro", "debian", "suite", tag));
	} else if (paths_valid_name(img) && (tag == NULL || strcmp(tag, "latest") == 0)) {
		json_object_set_new(d->recipe, "template", json_string(img));
	} else {
		df_fail(d, "FROM %s%s%s: must be an airlock template name or debian:<suite> (other "
		    "images: airlock template import)", img, tag ? ":" : "", tag ? tag : "");
		free(img);
		return -1;
	}
	free(img);
	return 0;
}

/* ENV k=v k2="v 2" or the legacy ENV k v. */
static int
df_env(struct df *d, const char *rest, json_t *into, int is_arg)
{
	const char *p = rest;
	char *key, *val, *x;
	size_t n;

	if (!is_arg && strchr(rest, '=') == NULL) {
		/* Legacy form: the first word is the key, the rest of the line its value. */
		n = strcspn(p, " \t");
		if (p[n] == '\0')
			return df_fail(d, "ENV needs a value: ENV NAME=value");
		key = xstrndup(p, n);
		p += n + strspn(p + n, " \t");
		if ((val = df_expand(d, p)) == NULL) {
			free(key);
			return -1;
		}
		goto set;
	}
	while (*p != '\0') {
		n = strcspn(p, "= \t");
		key = xstrndup(p, n);
		p += n;
		val = NULL;
		if (*p == '=') {
			char *raw = NULL;
			p++;
			if (*p == '"' || *p == '\'') {
				char qc = *p++;
				const char *end = strchr(p, qc);
				if (end == NULL) {
					free(key);
					return df_fail(d, "unterminated quote in %s", is_arg ? "ARG" :
					    "ENV");
				}
				raw = xstrndup(p, (size_t)(end - p));
				p = end + 1;
			} else {
				n = strcspn(p, " \t");
				raw = xstrndup(p, n);
				p += n;
			}
			val = df_expand(d, raw);
			free(raw);
			if (val == NULL) {
				free(key);
				return -1;
			}
		} else if (!is_arg) {
			free(key);
			return df_fail(d, "ENV needs NAME=value pairs");
		}
set:
		if (!recipe_valid_env_key(key)) {
			df_fail(d, "%s: \"%s\" is not a valid variable name", is_arg ? "ARG" : "ENV",
			    key);
			free(key);
			free(val);
			return -1;
		}
		if (val != NULL && strchr(val, '\n') != NULL) {
			free(key);
			free(val);
			return df_fail(d, "values cannot hold newlines");
		}
		/* An ARG without default keeps an earlier value (or is empty). */
		if (val == NULL && (x = (char *)df_var(d, key)) != NULL)
			val = xstrdup(x);
		json_object_set_new(into, key, json_string(val != NULL ? val : ""));
		free(key);
		free(val);
		p += strspn(p, " \t");
		if (!is_arg && strchr(rest, '=') == NULL)
			break;
	}
	return 0;
}

static void
df_add_step(struct df *d, char *script)
{
	json_array_append_new(d->run, json_string(script));
	free(script);
}

static int
df_run(struct df *d, const char *rest)
{
	json_t *a = df_exec_form(rest);
	char *s = df_prelude(d), *cmd, *u;

	if (rest[0] == '-') {
		json_decref(a);
		free(s);
		return df_fail(d, "RUN options (%.*s) are not supported", (int)strcspn(rest, " "),
		    rest);
	}
	cmd = a != NULL ? df_join_quoted(a) : NULL;
	json_decref(a);
	if (d->user != NULL) {
		u = sh_quote(d->user);
		if (cmd != NULL)
			str_append(&s, "exec runuser -u %s -- %s\n", u, cmd);
		else {
			char *q = sh_quote(rest);
			str_append(&s, "exec runuser -u %s -- /bin/sh -c %s\n", u, q);
			free(q);
		}
		free(u);
	} else if (cmd != NULL)
		str_append(&s, "exec %s\n", cmd);
	else
		str_append(&s, "%s\n", rest);
	free(cmd);
	df_add_step(d, s);
	return 0;
}

/* A context path: relative, inside the context, no globs. Normalized, or NULL. */
static char *
df_context_path(struct df *d, const char *src, const char *what)
{
	char *abs, *norm;

	if (strpbrk(src, "*?[") != NULL) {
		df_fail(d, "%s %s: wildcards are not supported (name the files)", what, src);
		return NULL;
	}
	if (strstr(src, "://") != NULL) {
		df_fail(d, "%s %s: remote sources are not supported (RUN curl ... instead)",
		    what, src);
		return NULL;
	}
	while (src[0] == '.' && src[1] == '/')
		src += 2;
	if (strcmp(src, ".") == 0 || src[0] == '\0')
		return xstrdup("");
	xasprintf(&abs, "/%s", src);
	norm = recipe_guest_path(abs);
	free(abs);
	if (norm == NULL) {
		df_fail(d, "%s %s: sources must stay inside the build context (no . or ..)", what,
		    src);
		return NULL;
	}
	return norm;
}

static int
df_copy(struct df *d, const char *rest, const char *what)
{
	json_t *a = NULL, *v;
	char *chown = NULL, *line, *s, *dst = NULL, *qd, **words = NULL, *save, *w;
	size_t nw = 0, i, n;
	int into_dir, rc = -1;

	while (strncmp(rest, "--", 2) == 0) {
		n = strcspn(rest, " \t");
		if (strncmp(rest, "--chown=", 8) == 0 && n > 8) {
			free(chown);
			chown = xstrndup(rest + 8, n - 8);
		} else {
			df_fail(d, "%s option %.*s is not supported (only --chown)", what, (int)n,
			    rest);
			goto out;
		}
		rest += n + strspn(rest + n, " \t");
	}
	if ((a = df_exec_form(rest)) != NULL) {
		json_array_foreach(a, i, v) {
			words = xreallocarray(words, nw + 1, sizeof(*words));
			if ((words[nw] = df_expand(d, json_string_value(v))) == NULL)
				goto out;
			nw++;
		}
	} else {
		line = xstrdup(rest);
		for (w = strtok_r(line, " \t", &save); w != NULL; w = strtok_r(NULL, " \t", &save)) {
			words = xreallocarray(words, nw + 1, sizeof(*words));
			if ((words[nw] = df_expand(d, w)) == NULL) {
				free(line);
				goto out;
			}
			nw++;
		}
		free(line);
	}
	if (nw < 2) {
		df_fail(d, "%s needs a source and a destination", what);
		goto out;
	}
	if (chown != NULL) {
		char *c = df_expand(d, chown);
		if (c == NULL)
			goto out;
		free(chown);
		chown = c;
		if (strspn(chown, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-")
		    != strlen(chown) || chown[0] == '\0' || chown[0] == '-') {
			df_fail(d, "%s --chown=%s: must be user[:group]", what, chown);
			goto out;
		}
	}
	n = strlen(words[nw - 1]);
	into_dir = nw > 2 || (n > 0 && words[nw - 1][n - 1] == '/');
	if ((dst = df_guest_path(d, words[nw - 1])) == NULL) {
		df_fail(d, "%s destination %s: must be a path without . or ..", what,
		    words[nw - 1]);
		goto out;
	}
	qd = sh_quote(dst);
	s = df_prelude(d);
	str_append(&s, "set -e\n");
	if (into_dir)
		str_append(&s, "mkdir -p %s\n", qd);
	for (i = 0; i + 1 < nw; i++) {
		char *src, *qs;
		size_t sl = strlen(words[i]);
		if (strcmp(what, "ADD") == 0 && sl > 4 && (strstr(words[i], ".tar") != NULL ||
		    strcmp(words[i] + sl - 4, ".tgz") == 0)) {
			df_fail(d, "ADD %s: archives are not unpacked here (COPY it and RUN tar)",
			    words[i]);
			free(qd);
			free(s);
			goto out;
		}
		if ((src = df_context_path(d, words[i], what)) == NULL) {
			free(qd);
			free(s);
			goto out;
		}
		xasprintf(&w, "%s%s", DOCKERFILE_CONTEXT_DIR, src);
		qs = sh_quote(w);
		free(w);
		str_append(&s, "s=%s\n[ -e \"$s\" ] || { echo %s' is not in the build context' >&2; "
		    "exit 1; }\n", qs, qs);
		if (into_dir || src[0] == '\0')
			str_append(&s, "if [ -d \"$s\" ]; then mkdir -p %s; cp -a \"$s/.\" %s/; "
			    "else cp -a \"$s\" %s/; fi\n", qd, qd, qd);
		else
			str_append(&s, "if [ -d \"$s\" ]; then mkdir -p %s; cp -a \"$s/.\" %s/; "
			    "else mkdir -p \"$(dirname %s)\"; cp -a \"$s\" %s; fi\n", qd, qd, qd, qd);
		free(qs);
		free(src);
	}
	if (chown != NULL) {
		char *qc = sh_quote(chown);
		str_append(&s, "chown -R %s %s\n", qc, qd);
		free(qc);
	}
	free(qd);
	d->uses_context = 1;
	df_add_step(d, s);
	rc = 0;
out:
	for (i = 0; i < nw; i++)
		free(words[i]);
	free(words);
	free(dst);
	free(chown);
	json_decref(a);
	return rc;
}

/* CMD / ENTRYPOINT: the exec form quoted word by word, the shell form as written. */
static int
df_start(struct df *d, const char *rest, int entry)
{
	json_t *a = df_exec_form(rest);
	char *s = a != NULL ? df_join_quoted(a) : xstrdup(rest);

	json_decref(a);
	if (*s == '\0') {
		free(s);
		return df_fail(d, "%s needs a command", entry ? "ENTRYPOINT" : "CMD");
	}
	if (entry) {
		free(d->entry);
		d->entry = s;
		d->entry_exec = a != NULL;
	} else {
		free(d->cmd);
		d->cmd = s;
	}
	return 0;
}

static int
df_instruction(struct df *d, const char *kw, const char *rest)
{
	char *x;
	int rc;

	if (strcasecmp(kw, "ARG") == 0)
		return *rest == '\0' ? df_fail(d, "ARG needs a name") :
		    df_env(d, rest, d->args, 1);
	if (strcasecmp(kw, "FROM") == 0)
		return df_from(d, rest);
	if (!d->from)
		return df_fail(d, "%s before FROM (only ARG may come first)", kw);
	if (strcasecmp(kw, "RUN") == 0)
		return *rest == '\0' ? df_fail(d, "RUN needs a command") : df_run(d, rest);
	if (strcasecmp(kw, "COPY") == 0)
		return df_copy(d, rest, "COPY");
	if (strcasecmp(kw, "ADD") == 0)
		return df_copy(d, rest, "ADD");
	if (strcasecmp(kw, "ENV") == 0)
		return *rest == '\0' ? df_fail(d, "ENV needs NAME=value") :
		    df_env(d, rest, d->env, 0);
	if (strcasecmp(kw, "WORKDIR") == 0) {
		if ((x = df_expand(d, rest)) == NULL)
			return -1;
		rc = 0;
		char *p = *x != '\0' ? df_guest_path(d, x) : NULL;
		if (p == NULL)
			rc = df_fail(d, "WORKDIR %s: must be a path without . or ..", x);
		else {
			free(d->workdir);
			d->workdir = p;
		}
		free(x);
		return rc;
	}
	if (strcasecmp(kw, "USER") == 0) {
		if ((x = df_expand(d, rest)) == NULL)
			return -1;
		if (*x == '\0' || strspn(x, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		    "0123456789_.:-") != strlen(x) || x[0] == '-' || strlen(x) > 64) {
			free(x);
			return df_fail(d, "USER: must be a user name or uid");
		}
		free(d->user);
		d->user = strcmp(x, "root") == 0 || strcmp(x, "0") == 0 ? NULL : xstrdup(x);
		free(x);
		return 0;
	}
	if (strcasecmp(kw, "CMD") == 0)
		return df_start(d, rest, 0);
	if (strcasecmp(kw, "ENTRYPOINT") == 0)
		return df_start(d, rest, 1);
	return df_fail(d, "%s is not supported (supported: FROM RUN COPY ADD ENV ARG WORKDIR USER "
	    "CMD ENTRYPOINT)", kw);
}

/* The final CMD/ENTRYPOINT as a start command, run as the final USER. */
static void
df_finish(struct df *d)
{
	char *start = NULL, *q, *u;

	if (d->entry != NULL && d->entry_exec && d->cmd != NULL)
		xasprintf(&start, "%s %s", d->entry, d->cmd);
	else if (d->entry != NULL)
		start = xstrdup(d->entry);
	else if (d->cmd != NULL)
		start = xstrdup(d->cmd);
	if (start != NULL && d->user != NULL) {
		q = sh_quote(start);
		u = sh_quote(d->user);
		free(start);
		xasprintf(&start, "runuser -u %s -- /bin/sh -c %s", u, q);
		free(q);
		free(u);
	}
	if (start != NULL)
		json_object_set_new(d->recipe, "start", json_string(start));
	free(start);
	if (strcmp(d->workdir, "/") != 0)
		json_object_set_new(d->recipe, "workdir", json_string(d->workdir));
	if (json_object_size(d->env) > 0)
		json_object_set(d->recipe, "env", d->env);
	if (json_array_size(d->run) > 0)
		json_object_set(d->recipe, "run", d->run);
}

json_t *
dockerfile_to_recipe(const char *text, size_t len, int *uses_context, char **cause)
{
	struct df d;
	const char *p = text, *end = text + len, *nl;
	char *logical = NULL, *kw, *rest;
	size_t n;
	int start_line = 0, lineno = 0, nlines = 0, rc = 0;
	json_t *out = NULL;

	memset(&d, 0, sizeof(d));
	d.cause = cause;
	if (len > DOCKERFILE_MAX) {
		cause_set(cause, "Dockerfile: larger than %d bytes", DOCKERFILE_MAX);
		return NULL;
	}
	if (memchr(text, '\0', len) != NULL) {
		cause_set(cause, "Dockerfile: holds a NUL byte");
		return NULL;
	}
	d.recipe = json_object();
	d.run = json_array();
	d.env = json_object();
	d.args = json_object();
	d.workdir = xstrdup("/");
	while (rc == 0 && p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		n = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);
		char *raw = xstrndup(p, n), *t = raw;
		p += n + (nl != NULL);
		lineno++;
		if (++nlines > DOCKERFILE_LINES_MAX) {
			d.line = lineno;
			rc = df_fail(&d, "more than %d lines", DOCKERFILE_LINES_MAX);
			free(raw);
			break;
		}
		n = strlen(t);
		if (n > 0 && t[n - 1] == '\r')
			t[--n] = '\0';
		t += strspn(t, " \t");
		/* Comments (and parser directives) are whole lines, also inside continuations. */
		if (*t == '#' || (*t == '\0' && logical == NULL)) {
			free(raw);
			continue;
		}
		if (logical == NULL)
			start_line = lineno;
		n = strlen(t);
		int cont = n > 0 && t[n - 1] == '\\';
		if (cont)
			t[--n] = '\0';
		str_append(&logical, "%s%s", logical != NULL && *logical != '\0' ? " " : "", t);
		free(raw);
		if (cont && p < end)
			continue;
		d.line = start_line;
		n = strlen(logical);
		while (n > 0 && (logical[n - 1] == ' ' || logical[n - 1] == '\t'))
			logical[--n] = '\0';
		if (*logical != '\0') {
			kw = logical;
			n = strcspn(kw, " \t");
			rest = kw + n + strspn(kw + n, " \t");
			kw[n] = '\0';
			rc = df_instruction(&d, kw, rest);
		}
		free(logical);
		logical = NULL;
	}
	free(logical);
	if (rc == 0 && !d.from) {
		d.line = lineno;
		rc = df_fail(&d, "no FROM");
	}
	if (rc == 0) {
		df_finish(&d);
		out = json_incref(d.recipe);
		if (uses_context != NULL)
			*uses_context = d.uses_context;
	}
	json_decref(d.recipe);
	json_decref(d.run);
	json_decref(d.env);
	json_decref(d.args);
	free(d.workdir);
	free(d.user);
	free(d.entry);
	free(d.cmd);
	return out;
}
