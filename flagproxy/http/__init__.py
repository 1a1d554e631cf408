"""The HTTP layer the proxy, edge and the server share: the Sanic app's configuration and error answers,
request context, CORS, trusted proxies and the remote address, ETags, the 200/304 answer, fixed answers
and errors, request bodies, logging, Prometheus request series and the Sanic worker
machinery. Nothing here knows which product it serves (tests/test_import_rules.py)."""
