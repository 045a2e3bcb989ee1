#!/usr/bin/env python3
"""Write docs/api/openapi.json: the OpenAPI 3 description of docs/api.md.
Run after changing the API; the daemon embeds the file at build time."""
import json, os, sys

def ref(name): return {"$ref": f"#/components/schemas/{name}"}
def body(schema, required=True): return {"required": required, "content": {"application/json": {"schema": schema}}}
# A request object: the server refuses any other field (and null for any of these).
def obj(props, required=()):
    o = {"type": "object", "additionalProperties": False, "properties": props}
    if required: o["required"] = list(required)
    return o
def intq(name, lo, hi, default=None):
    s = {"type": "integer", "minimum": lo, "maximum": hi}
    if default is not None: s["default"] = default
    return {"name": name, "in": "query", "schema": s}
def ok(status, schema=None, ctype="application/json", desc="OK"):
    r = {"description": desc}
    if schema is not None:
        r["content"] = {ctype: {"schema": schema}}
    return {str(status): r, "default": {"description": "error", "content": {"application/json": {"schema": ref("Error")}}}}
def sse(desc): return ok(200, {"type": "string"}, "text/event-stream", desc)
idp = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
pidp = {"name": "pid", "in": "path", "required": True, "schema": {"type": "integer"}}
pathq = {"name": "path", "in": "query", "required": True,
         "schema": {"type": "string", "minLength": 1, "maxLength": 4096}}
afterq = intq("after", 0, 9223372036854775807, 0)
nobody = body(obj({}), required=False)   # pause, resume, suspend: no fields (yet)
def op(summary, responses, params=None, req=None):
    o = {"summary": summary, "responses": responses}
    if params: o["parameters"] = params
    if req: o["requestBody"] = req
    return o

strmap = {"type": "object", "additionalProperties": {"type": "string"}}
schemas = {
  "Quota": obj({"project": {"type": "string"},
                "quota": {"nullable": True, "type": "object", "properties": {
                    "max_sandboxes": {"type": "integer"}, "max_vcpus": {"type": "integer"},
                    "max_memory_mb": {"type": "integer"}, "updated_at": {"type": "string"}}},
                "usage": obj({"sandboxes": {"type": "integer"}, "vcpus": {"type": "integer"},
                              "memory_mb": {"type": "integer"}})}),
  "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "object",
      "required": ["code", "message"], "properties": {"code": {"type": "string"}, "message": {"type": "string"},
      "field": {"type": "string", "description": "the body field, query parameter or path parameter the error is about, when there is one"}}}}},
  "Rate": {"type": "object", "additionalProperties": False, "properties": {
      "rps": {"type": "number", "minimum": 0}, "bps": {"type": "number", "minimum": 0}}},
  "Rule": {"oneOf": [
      {"type": "string", "description": "host, *.domain, host:port or cidr:port"},
      {"type": "object", "additionalProperties": False, "properties": {
          "host": {"type": "string"}, "cidr": {"type": "string"},
          "port": {"type": "integer", "minimum": 1, "maximum": 65535},
          "methods": {"type": "array", "items": {"type": "string"}},
          "paths": {"type": "array", "items": {"type": "string"}},
          "rate": ref("Rate")}}]},
  "Network": {"type": "object", "additionalProperties": False, "properties": {
      "mode": {"type": "string", "enum": ["none", "allowlist", "full"]},
      "allow": {"type": "array", "items": ref("Rule"), "maxItems": 256},
      "rate": ref("Rate"),
      "headers": {"type": "array", "maxItems": 256, "description": "headers the egress gateway "
          "sets on every HTTP(S) request to host; values are shown as \"[redacted]\" in answers",
          "items": ref("HeaderSet")}}},
  "HeaderSet": {"type": "object", "additionalProperties": False, "required": ["host", "set"],
      "properties": {"host": {"type": "string", "description": "a name or *.domain"},
          "set": {"type": "object", "minProperties": 1, "maxProperties": 64,
              "additionalProperties": {"type": "string", "maxLength": 8192}}}},
  "NewSandbox": {"type": "object", "additionalProperties": False, "properties": {
      "template": {"type": "string", "default": "base"},
      "vcpus": {"type": "integer", "minimum": 1, "maximum": 16, "default": 2},
      "memory_mb": {"type": "integer", "minimum": 128, "maximum": 65536, "default": 512},
      "env": strmap, "metadata": strmap,
      "timeout_s": {"type": "integer", "minimum": 0, "maximum": 2592000, "default": 0},
      "idle_timeout_s": {"type": "integer", "minimum": 0, "maximum": 2592000, "default": 21600},
      "auto_pause": {"type": "boolean", "default": False},
      "disk_mb": {"type": "integer", "minimum": 1, "maximum": 16777216, "description":
          "disk size in MiB: the guest's block device; default and minimum the template image's size, "
          "maximum the operator's max_disk_mb (400 naming disk_mb otherwise)"},
      "network": ref("Network"),
      "snapshot": {"type": "string", "description": "a named snapshot (its name or id) to start "
          "from instead of a template: its memory, processes, disk, shape and network are the "
          "defaults (vcpus/memory_mb must match it, disk_mb is refused, network must keep its NIC "
          "or its absence); env is added to the snapshot's. A template name that names no template "
          "but a snapshot does the same. Not with template (400)"},

      "volumes": {"type": "array", "maxItems": 8, "description": "volumes to mount (docs/volumes.md): one "
          "read-write sandbox per volume or many read-only (409 otherwise); every create tier mounts "
          "them (pool, spare, base and snapshot creates up to 2 read-write and 1 read-only, in the "
          "volume slots; more boot cold, and a snapshot's sandbox takes no more: 400)",
          "items": {"type": "object", "required": ["name", "path"], "properties": {
              "name": {"type": "string"}, "path": {"type": "string", "description":
                  "absolute, normalized, not / or a system directory"},
              "read_only": {"type": "boolean", "default": False}}}}}},
  "Volume": {"type": "object", "properties": {
      "name": {"type": "string"}, "project": {"type": "string"}, "size_mb": {"type": "integer"},
      "created_at": {"type": "string", "format": "date-time"},
      "last_used_at": {"type": "string", "format": "date-time", "nullable": True},
      "attached": {"type": "integer", "description": "sandboxes holding it now"},
      "allocated_bytes": {"type": "integer"},
      "worker": {"type": "string", "description": "in a cluster: the worker whose data dir holds it"}}},
  "Sandbox": {"type": "object", "properties": {
      "id": {"type": "string"}, "state": {"type": "string", "enum": ["creating", "running", "paused",
      "suspending", "suspended", "resuming", "deleting", "failed"]}, "template": {"type": "string"},
      "vcpus": {"type": "integer"}, "memory_mb": {"type": "integer"}, "env": strmap, "metadata": strmap,
      "network": ref("Network"), "timeout_s": {"type": "integer"}, "idle_timeout_s": {"type": "integer"},
      "auto_pause": {"type": "boolean"},
      "auto_resume": {"type": "boolean", "description": "E2B's autoResume (docs/e2b.md): envd "
          "traffic resumes it when paused or suspended; set only through the E2B API"},
      "created_at": {"type": "string", "format": "date-time"},
      "updated_at": {"type": "string", "format": "date-time"},
      "expires_at": {"type": "string", "format": "date-time", "nullable": True, "description":
          "timeout_s counts running time only: while paused or suspended, when it would end if "
          "resumed now (it does not expire while stopped)"},
      "last_active_at": {"type": "string", "format": "date-time"},
      "health": {"allOf": [ref("Health")], "nullable": True,
          "description": "a condition of state running; null in every other state"},
      "error": {"type": "string", "nullable": True, "description": "the last failure; for a "
          "guest that died (panic, poweroff, halt, agent unhealthy past the grace) the cause, then "
          "'; console tail:\\n' and the last 4 KiB of its serial console, bytes that are not UTF-8 "
          "and control characters written as \\xNN, a backslash as \\\\"},
      "disk_mb": {"type": "integer", "nullable": True, "description":
          "disk size in MiB (the guest's block device, which bounds what it can write on the host); "
          "null while no disk exists yet"},
      "tier": {"type": "string", "nullable": True, "enum": ["pool", "spare", "base", "boot", "fork", "snapshot", None],
          "description": "how the create was served: a warm pool member, a spare VMM restored from the "
          "shape's base snapshot, a restore of that base in a new VMM, a cold boot "
          "(docs/architecture.md \"Create tiers\"), a fork's capture or "
          "a named snapshot; null after a daemon restart"},
      "origin": {"type": "string", "nullable": True, "description": "fork:SOURCE_ID for a fork's "
          "child, snapshot:SNAPSHOT_ID for a sandbox made from a named snapshot, else null"}}},
  "Fork": {"type": "object", "properties": {
      "source": {"type": "string"},
      "paused_ms": {"type": "number", "description": "how long the source was stopped while its "
          "device state, RAM file and disk were captured"},
      "capture_ms": {"type": "number", "description": "the fork's start to its capture committed "
          "(includes waiting for an operation already running on the source)"},
      "sandboxes": {"type": "array", "items": ref("Sandbox"), "description": "the children that run"},
      "errors": {"type": "array", "description": "children that failed (the reply is that error "
          "instead when none runs)", "items": {"type": "object", "properties": {
          "index": {"type": "integer"}, "status": {"type": "integer"}, "message": {"type": "string"}}}}}},
  "Snapshot": {"type": "object", "properties": {
      "id": {"type": "string"}, "name": {"type": "string"}, "source": {"type": "string"},
      "template": {"type": "string"}, "vcpus": {"type": "integer"}, "memory_mb": {"type": "integer"},
      "env": strmap, "network": ref("Network"), "created_at": {"type": "string", "format": "date-time"},
      "paused_ms": {"type": "number", "description": "create only: how long the source was stopped"},
      "worker": {"type": "string", "description": "in a cluster: the worker whose data dir holds it"}}},
  "Pools": {"type": "object", "properties": {
      "pools": {"type": "array", "items": ref("Pool")},
      "refills_max": {"type": "integer", "description": "fills and base builds at once (pool_refills)"},
      "memory_budget_mb": {"type": "integer", "description": "what members' guest RAM and spares' "
          "PSS together may take (pool_memory_mb)"},
      "memory_used_mb": {"type": "integer", "description": "members' guest RAM (ready and filling) "
          "plus the spares' measured PSS (an estimate for those spawning)"},
      "creates": {"type": "object", "description": "creates served per tier since start",
          "properties": {t: {"type": "integer"} for t in ("pool", "spare", "base", "boot")}},
      "tier_fallbacks": {"type": "integer", "description": "spare claims and base restores that "
          "failed over to the next tier (a tier_fallback event each)"}}},
  "Pool": {"type": "object", "properties": {
      "template": {"type": "string"}, "key": {"type": "string", "description": "TEMPLATE-Vc-Mm-nic|nonic: the shape, and the base's directory name"},
      "vcpus": {"type": "integer"}, "memory_mb": {"type": "integer"}, "nic": {"type": "boolean"},
      "size": {"type": "integer", "description": "target number of ready members"},
      "ready": {"type": "integer"}, "filling": {"type": "integer"},
      "members": {"type": "array", "description": "the ready members (admin keys only)",
          "items": obj({"id": {"type": "string"}, "pid": {"type": "integer"}})},
      "base": {"type": "object", "properties": {
          "state": {"type": "string", "enum": ["none", "building", "ready", "failed"]},
          "error": {"type": "string", "nullable": True},
          "built_at": {"type": "string", "format": "date-time", "nullable": True},
          "build_ms": {"type": "number"}, "rejected": {"type": "integer", "description": "bases removed as stale or broken"}}},
      **{k: {"type": "integer"} for k in ("hits", "misses", "claim_failures", "fills", "fill_failures", "discards", "pss_bytes")},
      "fill_ms_avg": {"type": "number"}, "claim_ms_avg": {"type": "number", "description":
          "claim start to /init answered (cont + /init; excludes the API and the store writes)"},
      "claim_cont_ms_avg": {"type": "number"}, "claim_init_ms_avg": {"type": "number"},
      "claimed": {"type": "integer", "description": "claims that completed (the averages' count)"},
      "claim_steps_ms_avg": {"type": "object", "description": "mean ms of each step of a "
          "completed claim, in order: save (row written, op started), attach (the owner's "
          "policy on the island), cont (QMP cont answered), init_send (/init built and "
          "queued), init (/init answered), finish (row saved, event, create answered)",
          "properties": {k: {"type": "number"} for k in ("save", "attach", "cont", "init_send", "init", "finish")}},
      "spares": {"type": "object", "description": "spare VMMs: jailed QEMUs waiting with -incoming "
          "defer for this pool's base, the create tier after the pool (pool_spares)", "properties": {
          "target": {"type": "integer"}, "ready": {"type": "integer", "description": "spares waiting"},
          "spawning": {"type": "integer"},
          "members": {"type": "array", "description": "the waiting spares (admin keys only)",
              "items": obj({"id": {"type": "string"}, "pid": {"type": "integer"}})},
          **{k: {"type": "integer"} for k in ("hits", "misses", "claim_failures", "spawns",
                                              "spawn_failures", "discards", "claimed")},
          "pss_bytes": {"type": "integer", "description": "PSS of the waiting spares (counted in "
              "the pool memory budget)"},
          "spawn_ms_avg": {"type": "number"},
          "claim_ms_avg": {"type": "number", "description": "claim start to /init answered"},
          "claim_steps_ms_avg": {"type": "object", "description": "as the pool's claim steps; "
              "cont is the restore into the spare (getfd, migrate-incoming, cont) and init_send "
              "includes the agent's first connection",
              "properties": {k: {"type": "number"} for k in ("save", "attach", "cont", "init_send", "init", "finish")}}}}}},
  "Health": {"type": "object", "description": "the guest agent as airlockd's probes see it: "
      "unhealthy while it does not answer; after unhealthy_grace_s the sandbox is failed or "
      "restarted from its snapshot (on_unhealthy)", "properties": {
      "status": {"type": "string", "enum": ["healthy", "unhealthy"]},
      "reason": {"type": "string", "nullable": True, "description": "why it is unhealthy "
          "(e.g. the guest agent did not answer a channel ping within 5 s); null when healthy"},
      "since": {"type": "string", "format": "date-time", "description": "when this status began"}}},
  "PatchSandbox": {"type": "object", "additionalProperties": False, "properties": {
      "timeout_s": {"type": "integer"}, "idle_timeout_s": {"type": "integer"},
      "auto_pause": {"type": "boolean"}, "metadata": strmap, "network": ref("Network")}},
  "Exec": {"type": "object", "additionalProperties": False, "required": ["cmd"], "properties": {
      "cmd": {"type": "array", "items": {"type": "string"}, "minItems": 1}, "env": strmap,
      "cwd": {"type": "string"}, "user": {"type": "string", "enum": ["user", "root"]},
      "stdin": {"type": "boolean"}, "timeout_s": {"type": "integer"},
      "pty": obj({"cols": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 80},
                  "rows": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 24}})}},
  "Entry": {"type": "object", "properties": {"name": {"type": "string"}, "path": {"type": "string"},
      "type": {"type": "string", "enum": ["file", "dir", "symlink"]}, "size": {"type": "integer"},
      "mode": {"type": "integer"}, "mtime": {"type": "string"}}},
  "Key": {"type": "object", "properties": {"id": {"type": "string"}, "name": {"type": "string"},
      "project": {"type": "string"}, "role": {"type": "string"}, "prefix": {"type": "string"},
      "key": {"type": "string", "description": "only in the create answer"}}},
  "AuditRecord": {"type": "object", "description": "one gateway decision; fields absent when not applicable",
      "properties": {"time": {"type": "string", "format": "date-time"}, "sandbox": {"type": "string"},
      "kind": {"type": "string", "enum": ["dns", "tls", "http", "l4"]}, "qname": {"type": "string"},
      "qtype": {"type": "string"}, "sni": {"type": "string"}, "host": {"type": "string"},
      "method": {"type": "string"}, "path": {"type": "string"}, "ip": {"type": "string"},
      "port": {"type": "integer"}, "dst": {"type": "string"}, "rule": {"type": "string"},
      "decision": {"type": "string", "enum": ["allow", "deny"]}, "reason": {"type": "string"},
      "bytes_up": {"type": "integer"}, "bytes_down": {"type": "integer"}, "status": {"type": "integer"},
      "credential": {"type": "string", "description": "name of an injected credential, never its value"}}},
  "PutSecret": {"type": "object", "additionalProperties": False, "required": ["value", "hosts"], "properties": {
      "value": {"type": "string", "minLength": 1, "maxLength": 65536, "writeOnly": True,
                "description": "never returned; no CR or LF"},
      "hosts": {"type": "array", "minItems": 1, "maxItems": 64, "items": {"type": "string"},
                "description": "host patterns the value may be sent to: name or *.domain"},
      "header": {"type": "string", "default": "Authorization"},
      "format": {"type": "string", "default": "Bearer {value}", "description": "must contain {value}"},
      "scope": {"type": "string", "enum": ["global", "project", "sandbox"], "default": "project"},
      "sandbox": {"type": "string", "description": "the sandbox, with scope sandbox"}}},
  "Secret": {"type": "object", "description": "metadata only: the value is write-only", "properties": {
      "name": {"type": "string"}, "scope": {"type": "string", "enum": ["global", "project", "sandbox"]},
      "scope_id": {"type": "string", "nullable": True}, "hosts": {"type": "array", "items": {"type": "string"}},
      "header": {"type": "string"}, "format": {"type": "string"},
      "created_at": {"type": "string", "format": "date-time"},
      "updated_at": {"type": "string", "format": "date-time"}}},
}
sb = "/v1/sandboxes/{id}"
namep = {"name": "name", "in": "path", "required": True,
         "schema": {"type": "string", "pattern": "^[A-Z_][A-Z0-9_]{0,63}$"}}
scopeq = [{"name": "scope", "in": "query", "schema": {"type": "string", "enum": ["global", "project", "sandbox"]}},
          {"name": "sandbox", "in": "query", "schema": {"type": "string"}}]
paths = {
  "/healthz": {"get": op("Liveness and version", ok(200, {"type": "object"}))},
  "/metrics": {"get": op("Prometheus metrics", ok(200, {"type": "string"}, "text/plain"))},
  "/v1/openapi.json": {"get": op("This document", ok(200, {"type": "object"}))},
  "/v1/sandboxes": {
    "post": op("Create a sandbox", ok(201, ref("Sandbox")), req=body(ref("NewSandbox"))),
    "get": op("List sandboxes", ok(200, {"type": "object", "properties": {"sandboxes": {"type": "array",
        "items": ref("Sandbox")}, "next": {"type": "string", "nullable": True}}}),
        [{"name": "state", "in": "query", "schema": {"type": "string", "description":
          "comma-separated: creating, running, paused, suspending, suspended, resuming, deleting, failed"}},
         {"name": "metadata", "in": "query", "schema": {"type": "string"}},
         intq("limit", 1, 1000, 100), {"name": "after", "in": "query", "schema": {"type": "string"}}])},
  sb: {"get": op("Get a sandbox", ok(200, ref("Sandbox")), [idp]),
       "patch": op("Change timeouts, metadata or the network policy (live)", ok(200, ref("Sandbox")), [idp], body(ref("PatchSandbox"))),
       "delete": op("Delete a sandbox", ok(204), [idp])},
  sb + "/pause": {"post": op("Pause (memory resident)", ok(200, ref("Sandbox")), [idp], nobody)},
  sb + "/resume": {"post": op("Resume from paused or suspended", ok(200, ref("Sandbox")), [idp], nobody)},
  sb + "/suspend": {"post": op("Suspend to disk", ok(200, ref("Sandbox")), [idp], nobody)},
  sb + "/fork": {"post": op("Fork: count sandboxes continuing from this one's memory, processes "
      "and disk at one instant (the source pauses only for the capture); 400 count/network.mode, "
      "409 not running or paused, 429 over max_sandboxes or the host's available memory",
      ok(201, ref("Fork")), [idp], body(obj({
          "count": {"type": "integer", "minimum": 1, "maximum": 16, "default": 1},
          "network": ref("Network"), "metadata": strmap,
          "timeout_s": {"type": "integer", "minimum": 0, "maximum": 2592000,
                        "description": "the children's lifetime; default the source's"}}), required=False))},
  sb + "/snapshots": {"post": op("Save memory and disk as a named snapshot new sandboxes start from "
      "(409 if the name exists in the project)", ok(201, ref("Snapshot")), [idp],
      body(obj({"name": {"type": "string", "maxLength": 63, "pattern": "^[a-z0-9][a-z0-9._-]*$"}}, ["name"])))},
  "/v1/snapshots": {"get": op("List named snapshots", ok(200, {"type": "object", "properties": {
      "snapshots": {"type": "array", "items": ref("Snapshot")}}}),
      [{"name": "source", "in": "query", "schema": {"type": "string"}, "description": "only those of this sandbox"}])},
  "/v1/snapshots/{name}": {"delete": op("Delete a named snapshot (by name or id); 409 while a sandbox "
      "made from it exists", ok(204), [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}])},
  sb + "/exec": {"post": op("Run a command; SSE start/stdout/stderr/exit", sse("exec events"), [idp], body(ref("Exec")))},
  sb + "/processes": {"get": op("List processes", ok(200, {"type": "object"}), [idp])},
  sb + "/processes/{pid}/stream": {"get": op("Reattach to a process", sse("exec events"), [idp, pidp])},
  sb + "/processes/{pid}/stdin": {"post": op("Send stdin (exactly one of data, eof)", ok(204), [idp, pidp],
      body(obj({"data": {"type": "string", "format": "byte"}, "eof": {"type": "boolean"}})))},
  sb + "/processes/{pid}/signal": {"post": op("Send a signal", ok(204), [idp, pidp],
      body(obj({"signal": {"type": "string", "enum": ["SIGKILL", "SIGTERM", "SIGINT", "SIGHUP"]}}, ["signal"])))},
  sb + "/processes/{pid}/resize": {"post": op("Resize the PTY", ok(204), [idp, pidp],
      body(obj({"cols": {"type": "integer", "minimum": 1, "maximum": 1000},
                "rows": {"type": "integer", "minimum": 1, "maximum": 1000}})))},
  sb + "/files": {"get": op("Download a file", ok(200, {"type": "string", "format": "binary"}, "application/octet-stream"), [idp, pathq]),
                  "put": op("Upload a file (streamed)", ok(201, {"type": "object"}), [idp, pathq,
                            {"name": "mode", "in": "query", "schema": {"type": "string", "pattern": "^[0-7]{1,5}$",
                             "description": "octal permission bits, at most 07777"}}],
                            {"required": True, "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}})},
  sb + "/files/list": {"get": op("List a directory", ok(200, {"type": "object"}), [idp, pathq, intq("depth", 1, 64, 1)])},
  sb + "/files/stat": {"get": op("Stat a path", ok(200, ref("Entry")), [idp, pathq])},
  sb + "/files/mkdir": {"post": op("Make a directory", ok(201, ref("Entry")), [idp],
      body(obj({"path": {"type": "string"}}, ["path"])))},
  sb + "/files/move": {"post": op("Move a path", ok(200, ref("Entry")), [idp],
      body(obj({"from": {"type": "string"}, "to": {"type": "string"}}, ["from", "to"])))},
  sb + "/files/remove": {"post": op("Remove a path", ok(204), [idp], body(obj({"path": {"type": "string"},
      "recursive": {"type": "boolean", "default": True,
                    "description": "false: one file or empty directory (a non-empty one is a 409)"}}, ["path"])))},
  sb + "/files/watch": {"get": op("Watch a directory", sse("fs events"), [idp, pathq,
      {"name": "recursive", "in": "query", "schema": {"type": "boolean", "default": False}}])},
  sb + "/events": {"get": op("Lifecycle events of one sandbox", sse("events"), [idp, afterq])},
  sb + "/logs": {"get": op("Serial console, escaped (NUL, ESC, other controls and invalid UTF-8 as \\xNN)",
      ok(200, {"type": "string"}, "text/plain"), [idp, intq("tail", 1, 4194304, 65536)])},
  sb + "/metrics": {"get": op("Resource use", ok(200, {"type": "object"}), [idp])},
  "/v1/events": {"get": op("Lifecycle events of every sandbox", sse("events"), [afterq])},
  "/v1/templates": {"get": op("List templates", ok(200, {"type": "object"})),
                    "post": op("Build a template from a recipe or a Dockerfile (no COPY); checked whole first (400), then SSE "
                               "progress, output (run steps in the build VM), done or error",
                               sse("progress"), req=body(obj({"name": {"type": "string"}, "recipe": {"type": "object",
                               "description": "a recipe (docs/templates.md), without files"},
                               "dockerfile": {"type": "string", "description": "Dockerfile text (instead of recipe)"},
                               "no_cache": {"type": "boolean", "default": False}}, ["name"])))},
  "/v1/templates/{name}": {"delete": op("Delete a template", ok(204), [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}])},
  "/v1/templates/{name}/build": {"post": op("Build a template from a Dockerfile and its context, a plain tar body "
      "(checked whole first: 400 naming a bad entry or Dockerfile line, 413 over template_context_max_mb), then SSE "
      "progress as POST /v1/templates (admin)", sse("progress"),
      [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
       {"name": "dockerfile", "in": "query", "schema": {"type": "string", "default": "Dockerfile"}},
       {"name": "no_cache", "in": "query", "schema": {"type": "boolean", "default": False}}],
      {"required": True, "content": {"application/x-tar": {"schema": {"type": "string", "format": "binary"}}}})},
  "/v1/templates/{name}/image": {"put": op("Import an OCI image (docker save tarball or OCI layout tar, at most template_upload_max_mb: 413); "
      "the image is read and every layer checked first (400 naming the layer and entry), then SSE progress (admin)",
      sse("progress"), [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
      {"required": True, "content": {"application/x-tar": {"schema": {"type": "string", "format": "binary"}}}})},
  "/v1/volumes": {"get": op("List volumes: size, attachments, last use", ok(200, {"type": "object",
                      "properties": {"volumes": {"type": "array", "items": ref("Volume")}}})),
                  "post": op("Create a volume (ext4, sparse; 409 if the name exists)", ok(201, ref("Volume")),
                      req=body(obj({"name": {"type": "string"}, "size_mb": {"type": "integer", "minimum": 16,
                          "default": 1024, "description": "at most max_disk_mb"}}, ["name"])))},
  "/v1/volumes/{name}": {"get": op("A volume", ok(200, ref("Volume")),
                             [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]),
                         "delete": op("Delete a volume and its data (409 while attached)", ok(204),
                             [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}])},
  "/v1/pools": {"get": op("Warm pools, their bases and counters", ok(200, ref("Pools")))},
  "/v1/projects/{project}/quota": {
      "get": op("A project's quota (null: none) and what its live sandboxes hold (admin)",
          ok(200, ref("Quota")), [{"name": "project", "in": "path", "required": True,
                                   "schema": {"type": "string"}}]),
      "put": op("Set a project's quota: live sandboxes, their vCPUs and memory; 0 or absent is "
          "no limit. Creates beyond it answer 429 quota_exceeded (admin)", ok(200, ref("Quota")),
          [{"name": "project", "in": "path", "required": True, "schema": {"type": "string"}}],
          body(obj({"max_sandboxes": {"type": "integer", "minimum": 0, "maximum": 100000},
                    "max_vcpus": {"type": "integer", "minimum": 0, "maximum": 1000000},
                    "max_memory_mb": {"type": "integer", "minimum": 0}}))),
      "delete": op("Remove a project's quota (admin)", ok(204),
          [{"name": "project", "in": "path", "required": True, "schema": {"type": "string"}}])},
  "/v1/workers/{name}/drain": {"post": op("Drain a cluster worker (admin): no new sandboxes there, "
      "every one suspended to disk (docs/cluster.md). An API replica sends it to that worker; "
      "404 in direct mode or for another worker's name",
      ok(202, obj({"worker": {"type": "string"}, "state": {"type": "string", "enum": ["draining"]}})),
      [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
      body(obj({}), required=False))},
  "/v1/pools/{template}": {"put": op("Set a template's pool size (0 drains it), spare VMMs and shape (admin)",
      ok(200, ref("Pools")), [{"name": "template", "in": "path", "required": True, "schema": {"type": "string"}}],
      body(obj({"size": {"type": "integer", "minimum": 0, "maximum": 256},
                "spares": {"type": "integer", "minimum": 0, "maximum": 16, "description":
                    "spare VMMs for this pool (default: pool_spares)"},
                "vcpus": {"type": "integer", "minimum": 1, "maximum": 16},
                "memory_mb": {"type": "integer", "minimum": 128, "maximum": 65536},
                "nic": {"type": "boolean", "default": False, "description": "members with a NIC, for creates whose network mode is not none"}},
               ["size"])))},
  "/v1/keys": {"get": op("List API keys", ok(200, {"type": "object"})),
               "post": op("Create an API key", ok(201, ref("Key")), req=body(obj({"name": {"type": "string"},
                   "project": {"type": "string"}, "role": {"type": "string", "enum": ["user", "admin"]},
                   "format": {"type": "string", "enum": ["airlock", "e2b"],
                              "description": "airlock: al_...; e2b: e2b_ + 40 hex, the form E2B SDKs check (docs/e2b.md)"}}, ["name"])))},
  "/v1/keys/{id}": {"delete": op("Delete an API key", ok(204), [idp])},
  "/v1/audit": {"get": op("Egress gateway decisions, newest first", ok(200, {"type": "object", "properties": {
      "records": {"type": "array", "items": ref("AuditRecord")},
      "truncated": {"type": "boolean", "description": "present when the scan budget ran out; narrow with since/until"}}}),
      [{"name": "sandbox", "in": "query", "schema": {"type": "string"}},
       {"name": "decision", "in": "query", "schema": {"type": "string", "enum": ["allow", "deny"]}},
       {"name": "kind", "in": "query", "schema": {"type": "string", "enum": ["dns", "tls", "http", "l4"]}},
       {"name": "since", "in": "query", "schema": {"type": "string", "format": "date-time"}},
       {"name": "until", "in": "query", "schema": {"type": "string", "format": "date-time"}},
       {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}}])},
  "/v1/secrets": {"get": op("List secrets (metadata only)", ok(200, {"type": "object", "properties": {
      "secrets": {"type": "array", "items": ref("Secret")}}}), scopeq)},
  "/v1/secrets/{name}": {
    "put": op("Create or replace a secret (201 created, 200 replaced)", ok(200, ref("Secret")), [namep],
              body(ref("PutSecret"))),
    "get": op("Get a secret's metadata", ok(200, ref("Secret")), [namep] + scopeq),
    "delete": op("Delete a secret", ok(204), [namep] + scopeq)},
}
# Every call that needs the guest agent answers 503 while it is unhealthy or not connected.
unavailable = {"description": "the guest agent is unhealthy (the message gives the reason) or not "
               "connected", "content": {"application/json": {"schema": ref("Error")}}}
for p, ops in paths.items():
    if p.startswith(sb + "/exec") or p.startswith(sb + "/files") or p.startswith(sb + "/processes"):
        for o in ops.values():
            o["responses"]["503"] = unavailable
# Admission per sandbox (docs/security.md "Admission"): streams beyond the caps answer 429.
too_many = {"description": "the sandbox already holds max_execs_per_sandbox exec calls "
            "(code too_many_execs) or max_streams_per_sandbox streams (too_many_streams); "
            "the message names the limit", "content": {"application/json": {"schema": ref("Error")}}}
for p in (sb + "/exec", sb + "/processes/{pid}/stream", sb + "/files/watch"):
    for o in paths[p].values():
        o["responses"]["429"] = too_many
doc = {"openapi": "3.0.3", "info": {"title": "airlock", "version": "1",
       "description": "Self-hosted microVM sandboxes. See docs/api.md. Input is strict: unknown body "
       "fields, unknown query parameters, null values and malformed query values are a 400 naming them."},
       "servers": [{"url": "http://127.0.0.1:7070"}],
       "components": {"schemas": schemas, "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
       "security": [{"bearer": []}], "paths": paths}
out = os.path.join(os.path.dirname(__file__), "..", "docs", "api", "openapi.json")
with open(out, "w") as f:
    json.dump(doc, f, indent=1, sort_keys=True)
    f.write("\n")
