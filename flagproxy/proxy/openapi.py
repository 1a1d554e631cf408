"""The OpenAPI 3.0.3 description of the proxy (GET /docs/openapi.json when enableOAS), built once.

Written by hand from the routes rather than generated per request: it is a constant of the settings
(base path, key header name), and keeps sanic-ext's request machinery off the proxy.
"""

from __future__ import annotations

from typing import Any

from flagproxy import __version__

_STR = {"type": "string"}
_CONTEXT_QUERY = [
    {"name": name, "in": "query", "required": False, "schema": _STR}
    for name in ("appName", "environment", "userId", "sessionId", "remoteAddress", "currentTime")
] + [
    {
        "name": "properties",
        "in": "query",
        "required": False,
        "style": "deepObject",
        "explode": True,
        "schema": {"type": "object", "additionalProperties": _STR},
        "description": "properties[name]=value",
    }
]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _text(description: str, media: str = "text/html") -> dict[str, Any]:
    return {"description": description, "content": {media: {"schema": _STR}}}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref("errorSchema")}}}


_COMMON = {
    "400": _error("The request is invalid (validation or JSON syntax)."),
    "401": _text("The client key is missing or wrong.", "text/plain"),
    "503": _text("The proxy has not synchronised with its upstream yet."),
}
_BODY_ERRORS = {
    "413": _error("The body is larger than 100 kB."),
    "415": _error("The body is not application/json (UTF-8)."),
}


def _toggles_ok() -> dict[str, Any]:
    return {
        "description": "The evaluated toggles.",
        "headers": {"ETag": {"schema": _STR}, "Cache-control": {"schema": _STR}},
        "content": {"application/json": {"schema": _ref("featuresSchema")}},
    }


def build_openapi(base_path: str, key_header: str) -> dict[str, Any]:
    lookup_body = {"content": {"application/json": {"schema": _ref("lookupTogglesSchema")}}}
    all_disabled = {"501": _text("enableAllEndpoint is off.")}
    proxy_tag, server_tag, ops_tag = ["Proxy client"], ["Server-side client"], ["Operational"]
    secured: list[dict[str, list[str]]] = [{"apiKey": []}]
    paths: dict[str, Any] = {
        "/proxy": {
            "get": {
                "tags": proxy_tag,
                "summary": "Retrieve enabled feature toggles for the provided context.",
                "parameters": _CONTEXT_QUERY,
                "security": secured,
                "responses": {"200": _toggles_ok(), "304": {"description": "Not modified."}, **_COMMON},
            },
            "post": {
                "tags": proxy_tag,
                "summary": "Evaluate specific toggles (or all enabled ones) against the provided context.",
                "requestBody": lookup_body,
                "security": secured,
                "responses": {"200": _toggles_ok(), **_COMMON, **_BODY_ERRORS},
            },
        },
        "/proxy/all": {
            "get": {
                "tags": proxy_tag,
                "summary": "Retrieve all feature toggles, enabled or not, for the provided context.",
                "parameters": _CONTEXT_QUERY,
                "security": secured,
                "responses": {"200": _toggles_ok(), **_COMMON, **all_disabled},
            },
            "post": {
                "tags": proxy_tag,
                "summary": "Evaluate some or all toggles against the provided context.",
                "requestBody": lookup_body,
                "security": secured,
                "responses": {"200": _toggles_ok(), **_COMMON, **_BODY_ERRORS, **all_disabled},
            },
        },
        "/proxy/client/features": {
            "get": {
                "tags": server_tag,
                "summary": "The proxy's feature configuration, for server-side SDKs and other proxies "
                "(expServerSideSdkConfig tokens).",
                "security": secured,
                "responses": {
                    "200": {
                        "description": "Client API features document (version 2, with segments).",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    "304": {"description": "Not modified."},
                    **_COMMON,
                },
            }
        },
        "/proxy/client/metrics": {
            "post": {
                "tags": [*ops_tag, *server_tag],
                "summary": "Send usage metrics; they are merged into what the proxy sends upstream.",
                "requestBody": {"content": {"application/json": {"schema": _ref("registerMetricsSchema")}}},
                "security": secured,
                "responses": {"200": _text("Accepted.", "text/plain"), **_COMMON, **_BODY_ERRORS},
            }
        },
        "/proxy/client/register": {
            "post": {
                "tags": [*ops_tag, *server_tag],
                "summary": "Register a client SDK.",
                "requestBody": {"content": {"application/json": {"schema": _ref("registerClientSchema")}}},
                "security": secured,
                "responses": {"200": _text("Accepted.", "text/plain"), **_COMMON, **_BODY_ERRORS},
            }
        },
        "/proxy/health": {
            "get": {
                "tags": ops_tag,
                "summary": "Check whether the proxy is ready to serve requests yet.",
                "responses": {"200": _text("`ok`"), "503": _COMMON["503"]},
            }
        },
        "/proxy/internal-backstage/prometheus": {
            "get": {
                "tags": ops_tag,
                "summary": "Prometheus metrics of the proxy.",
                "responses": {"200": _text("Prometheus text format.", "text/plain"), "503": _COMMON["503"]},
            }
        },
    }
    paths["/proxy/all/client/metrics"] = paths["/proxy/client/metrics"]
    return {
        "openapi": "3.0.3",
        "info": {"title": "Unleash Proxy API (flagproxy)", "version": __version__},
        "servers": [{"url": base_path}] if base_path else [],
        "tags": [
            {
                "name": "Proxy client",
                "description": "Feature toggle endpoints intended to be consumed by proxy clients.",
            },
            {
                "name": "Server-side client",
                "description": "Feature toggle endpoints related to and intended to be consumed by "
                "server-side clients and other proxies.",
            },
            {"name": "Operational", "description": "Endpoints related to operating the Unleash proxy."},
        ],
        "security": secured,
        "paths": paths,
        "components": {
            "securitySchemes": {"apiKey": {"type": "apiKey", "in": "header", "name": key_header}},
            "schemas": _SCHEMAS,
        },
    }


_VARIANT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "enabled"],
    "properties": {
        "name": _STR,
        "enabled": {"type": "boolean"},
        "feature_enabled": {"type": "boolean"},
        "featureEnabled": {"type": "boolean"},
        "payload": {
            "type": "object",
            "additionalProperties": False,
            "required": ["type", "value"],
            "properties": {
                "type": {"type": "string", "enum": ["string", "json", "csv", "number"]},
                "value": _STR,
            },
        },
    },
}
_COUNT = {"type": "integer", "minimum": 0}
_SCHEMAS: dict[str, Any] = {
    "errorSchema": {
        "type": "object",
        "properties": {"error": _STR, "validation": {"type": "array", "items": {"type": "object"}}},
    },
    "variantSchema": _VARIANT,
    "featureSchema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["name", "enabled"],
        "properties": {
            "name": _STR,
            "enabled": {"type": "boolean"},
            "impressionData": {"type": "boolean"},
            "variant": _ref("variantSchema"),
        },
    },
    "featuresSchema": {
        "type": "object",
        "required": ["toggles"],
        "properties": {"toggles": {"type": "array", "items": _ref("featureSchema")}},
    },
    "unleashContextSchema": {
        "type": "object",
        "properties": {
            "appName": _STR,
            "environment": _STR,
            "userId": _STR,
            "sessionId": _STR,
            "remoteAddress": _STR,
            "currentTime": _STR,
            "properties": {"type": "object", "additionalProperties": _STR},
        },
        "additionalProperties": _STR,
    },
    "lookupTogglesSchema": {
        "type": "object",
        "properties": {"context": _ref("unleashContextSchema"), "toggles": {"type": "array", "items": _STR}},
    },
    "registerMetricsSchema": {
        "type": "object",
        "required": ["appName", "instanceId", "bucket"],
        "properties": {
            "appName": _STR,
            "instanceId": _STR,
            "environment": _STR,
            "bucket": {
                "type": "object",
                "required": ["start", "stop", "toggles"],
                "properties": {
                    "start": {"type": "string", "format": "date-time"},
                    "stop": {"type": "string", "format": "date-time"},
                    "toggles": {
                        "type": "object",
                        "additionalProperties": {
                            "type": "object",
                            "properties": {
                                "yes": _COUNT,
                                "no": _COUNT,
                                "variants": {"type": "object", "additionalProperties": _COUNT},
                            },
                        },
                    },
                },
            },
        },
    },
    "registerClientSchema": {
        "type": "object",
        "required": ["appName", "interval", "started", "strategies"],
        "properties": {
            "appName": _STR,
            "instanceId": _STR,
            "sdkVersion": _STR,
            "environment": _STR,
            "interval": {"type": "number"},
            "started": {"oneOf": [{"type": "string", "format": "date-time"}, {"type": "number"}]},
            "strategies": {"type": "array", "items": _STR},
        },
    },
}
