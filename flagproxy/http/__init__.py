"""The HTTP layer the proxy, edge and the server share: the Sanic app's configuration and error answers,
request context, CORS, trusted proxies and the remote address, ETags, the 200/304 answer, fixed answers
and errors, request bodies, logging, Prometheus request series, the delta API's wire format, HTTPS (served
and upstream), the command line's shared options, the toggle routes' short way through Sanic
(hot_routes.py) and the Sanic worker machinery. Nothing here knows which product it serves
(tests/test_import_rules.py)."""
