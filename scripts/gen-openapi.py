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
      "rate": ref("Rate")}},
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
      "network": ref("Network")}},
  "Sandbox": {"type": "object", "properties": {
      "id": {"type": "string"}, "state": {"type": "string", "enum": ["creating", "running", "paused",
      "suspending", "suspended", "resuming", "deleting", "failed"]}, "template": {"type": "string"},
      "vcpus": {"type": "integer"}, "memory_mb": {"type": "integer"}, "env": strmap, "metadata": strmap,
      "network": ref("Network"), "timeout_s": {"type": "integer"}, "idle_timeout_s": {"type": "integer"},
      "auto_pause": {"type": "boolean"}, "created_at": {"type": "string", "format": "date-time"},
      "updated_at": {"type": "string", "format": "date-time"},
      "expires_at": {"type": "string", "format": "date-time", "nullable": True},
      "last_active_at": {"type": "string", "format": "date-time"},
      "health": {"allOf": [ref("Health")], "nullable": True,
          "description": "a condition of state running; null in every other state"},
      "error": {"type": "string", "nullable": True, "description": "the last failure; for a "
          "guest that died (panic, poweroff, halt, agent unhealthy past the grace) the cause, then "
          "'; console tail:\\n' and the last 4 KiB of its serial console, bytes that are not UTF-8 "
          "and control characters written as \\xNN, a backslash as \\\\"},
      "disk_mb": {"type": "integer", "nullable": True, "description":
          "disk size in MiB (the guest's block device, which bounds what it can write on the host); "
          "null while no disk exists yet"}}},
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
                    "post": op("Build a template; the recipe is checked whole first (400), then SSE progress",
                               sse("progress"), req=body(obj({"name": {"type": "string"}, "recipe": {"type": "object",
                               "description": "a recipe (docs/templates.md), without files"}}, ["name", "recipe"])))},
  "/v1/templates/{name}": {"delete": op("Delete a template", ok(204), [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}])},
  "/v1/keys": {"get": op("List API keys", ok(200, {"type": "object"})),
               "post": op("Create an API key", ok(201, ref("Key")), req=body(obj({"name": {"type": "string"},
                   "project": {"type": "string"}, "role": {"type": "string", "enum": ["user", "admin"]}}, ["name"])))},
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
