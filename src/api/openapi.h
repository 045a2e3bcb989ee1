/* The OpenAPI document (docs/api/openapi.json), embedded at build time. */
#ifndef AIRLOCK_OPENAPI_H
#define AIRLOCK_OPENAPI_H

extern const char openapi_json[];

#endif
