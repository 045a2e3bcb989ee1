// Validate Kubernetes objects against the JSON schemas of kubernetes-models
// (Kubernetes 1.27.1, compiled ajv validators): types, required fields,
// enums. Unknown fields pass here (the schemas allow them): test_schema.py
// checks field names itself. Input on stdin: {"NAME": [object, ...], ...};
// output on stdout: {"NAME": ["KIND/NAME: error", ...], ...}.
// Usage: node validate.mjs NODE_MODULES_PARENT_DIR < objects.json
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const root = process.argv[2];
const models = path.join(root, "node_modules", "kubernetes-models");
const cache = new Map();

// apps/v1 + Deployment -> kubernetes-models/apps/v1/Deployment.js; v1 -> v1/.
async function modelFor(apiVersion, kind) {
	const key = apiVersion + "/" + kind;
	if (!cache.has(key)) {
		const file = path.join(models, ...apiVersion.split("/"), kind + ".js");
		cache.set(key, import(pathToFileURL(file).href)
			.then((m) => m[kind])
			.catch(() => null));
	}
	return cache.get(key);
}

function describe(e) {
	const errs = e.details || e.errors;
	if (Array.isArray(errs) && errs.length)
		return errs.map((d) => `${d.instancePath || "/"} ${d.message || d.keyword}` +
			(d.params && d.params.additionalProperty ? ` (${d.params.additionalProperty})` : "")).join("; ");
	return String(e.message || e).split("\n")[0];
}

const input = JSON.parse(readFileSync(0, "utf8"));
const out = {};
for (const [name, objects] of Object.entries(input)) {
	out[name] = [];
	for (const obj of objects) {
		const id = `${obj.kind}/${obj.metadata && obj.metadata.name}`;
		if (typeof obj.apiVersion !== "string" || typeof obj.kind !== "string") {
			out[name].push(`${id}: no apiVersion or kind`);
			continue;
		}
		const Model = await modelFor(obj.apiVersion, obj.kind);
		if (!Model) {
			out[name].push(`${id}: no schema for ${obj.apiVersion} ${obj.kind}`);
			continue;
		}
		try {
			new Model(obj).validate();
		} catch (e) {
			out[name].push(`${id}: ${describe(e)}`);
		}
	}
}
process.stdout.write(JSON.stringify(out) + "\n");
