"""The OpenAPI 3.1 description of the server, written by hand (``GET /openapi.json``).

Written rather than generated: the routes check their bodies field by field (:mod:`.limits`), and
a description kept next to them is checked against the routes by the tests (every route is
described, every described path is served).
"""

from __future__ import annotations

from typing import Any

from .limits import Limits

__all__ = ["openapi"]

_ID = {"oneOf": [{"type": "string"}, {"type": "integer"}], "description": "a document id, as the artifact knows it"}
_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {
    "type": "object", "required": ["status", "message"],
    "properties": {"status": {"type": "integer"}, "field": {"type": ["string", "null"],
                                                             "description": "the request field at fault"},
                   "message": {"type": "string"}}}}}


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict) -> dict:
    return {"content": {"application/json": {"schema": schema}}}


def _op(summary: str, body: str | None, answer: str, *, write: bool = False) -> dict:
    op: dict[str, Any] = {"summary": summary, "responses": {
        "200": {"description": "the answer", **_json(_ref(answer))},
        "4XX": {"description": "a bad request: one JSON error naming the field", **_json(_ref("Error"))}}}
    if body is not None:
        op["requestBody"] = {"required": True, **_json(_ref(body))}
    if write:
        op["security"] = [{"bearer": []}]
    return op


def _schemas(limits: Limits) -> dict:
    hit_in = {"type": "object", "required": ["id"], "additionalProperties": False, "properties": {
        "id": _ID, "score": {"type": ["number", "null"]},
        "vector": {"type": "array", "items": {"type": "number"}, "maxItems": limits.max_vector_dim},
        "text": {"type": "string", "maxLength": limits.max_text_chars}}}
    hit_out = {"type": "object", "properties": {
        "id": _ID, "score": {"type": ["number", "null"]}, "cluster_id": {"type": ["integer", "null"]},
        "omitted": {"type": "integer"}, "omitted_ids": {"type": "array", "items": _ID}}}
    doc = {"type": "object", "additionalProperties": False, "properties": {
        "id": _ID, "text": {"type": "string", "maxLength": limits.max_text_chars},
        "vector": {"type": "array", "items": {"type": "number"}}}}
    match = {"type": "object", "properties": {
        "id": _ID, "cluster": {"type": ["integer", "null"]}, "joined": {"type": "boolean"},
        "representative": {"oneOf": [_ID, {"type": "null"}]}, "similarity": {"type": "number"},
        "matched": {"type": "array", "items": {"type": "object", "properties": {"id": _ID,
                                                                               "similarity": {"type": "number"}}}}}}
    member = {"type": "object", "properties": {
        "id": _ID, "is_representative": {"type": "boolean"}, "similarity": {"type": ["number", "null"]},
        "stages": {"type": "array", "items": {"type": "string"}}}}
    return {
        "Error": _ERROR,
        "DiversifyRequest": {"type": "object", "required": ["hits"], "additionalProperties": False, "properties": {
            "hits": {"type": "array", "items": hit_in, "maxItems": limits.max_hits},
            "k": {"type": "integer", "minimum": 1, "maximum": limits.max_k, "default": 10},
            "max_per_cluster": {"type": "integer", "minimum": 1, "default": 1},
            "unknown": {"enum": ["own", "drop"], "default": "own"},
            "fold_threshold": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 1},
            "fold_text_threshold": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 1}}},
        "DiversifyAnswer": {"type": "object", "properties": {
            "hits": {"type": "array", "items": hit_out}, "short": {"type": "boolean"},
            "omitted": {"type": "integer"}, "dropped": {"type": "integer"}, "considered": {"type": "integer"},
            "generation": {"type": "integer"}}},
        "ClustersRequest": {"type": "object", "required": ["ids"], "properties": {
            "ids": {"type": "array", "items": _ID, "maxItems": limits.max_ids}}},
        "ClustersAnswer": {"type": "object", "properties": {
            "cluster_ids": {"type": "array", "items": {"type": ["integer", "null"]}},
            "generation": {"type": "integer"}}},
        "Cluster": {"type": "object", "properties": {
            "cluster_id": {"type": "integer"}, "size": {"type": "integer"}, "representative": _ID,
            "similarity_stored": {"type": "boolean"}, "members": {"type": "array", "items": member},
            "more": {"type": "integer"}, "generation": {"type": "integer"}}},
        "Documents": {"type": "object", "required": ["documents"], "properties": {
            "documents": {"type": "array", "items": doc, "minItems": 1, "maxItems": limits.max_docs}}},
        "Matches": {"type": "object", "properties": {"matches": {"type": "array", "items": match}}},
        "Ids": {"type": "object", "required": ["ids"], "properties": {
            "ids": {"type": "array", "items": _ID, "maxItems": limits.max_ids}}},
        "Deleted": {"type": "object", "properties": {
            "deleted": {"type": "integer"}, "missing": {"type": "array", "items": _ID},
            "reassigned": {"type": "integer"}}},
        "Health": {"type": "object", "properties": {
            "status": {"const": "ok"}, "source": {"enum": ["artifact", "index"]}, "generation": {"type": "integer"},
            "fingerprint": {"type": "string"}}},
    }


def openapi(limits: Limits, version: str) -> dict:
    """The OpenAPI document of a server with these limits."""
    cluster = _op("one cluster: representative, members, similarity, stages", None, "Cluster")
    cluster["parameters"] = [
        {"name": "cluster_id", "in": "path", "required": True, "schema": {"type": "integer"}},
        {"name": "limit", "in": "query", "required": False,
         "schema": {"type": "integer", "minimum": 0, "maximum": limits.max_members}}]
    return {
        "openapi": "3.1.0",
        "info": {"title": "diversify serve", "version": version,
                 "description": "Fold near-duplicates out of retrieval results (docs/serve.md)."},
        "paths": {
            "/v1/diversify": {"post": _op("at most max_per_cluster hits per cluster, up to k (diversify.select)",
                                          "DiversifyRequest", "DiversifyAnswer")},
            "/v1/clusters": {"post": _op("the cluster id of each id (null: unknown)", "ClustersRequest",
                                         "ClustersAnswer")},
            "/v1/clusters/{cluster_id}": {"get": cluster},
            "/v1/index/add": {"post": _op("add documents to the live index", "Documents", "Matches", write=True)},
            "/v1/index/query": {"post": _op("near-duplicates of documents in the live index (nothing written)",
                                            "Documents", "Matches")},
            "/v1/index/delete": {"post": _op("delete documents from the live index", "Ids", "Deleted", write=True)},
            "/healthz": {"get": _op("the server answers", None, "Health")},
            "/metrics": {"get": {"summary": "Prometheus text: requests, latency, folded, reloads, errors",
                                 "responses": {"200": {"description": "metrics",
                                                       "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
        },
        "components": {"schemas": _schemas(limits),
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }
