"""The HTTP layer the proxy, edge and the server share: request context, CORS, trusted proxies, ETags,
answers and errors, request bodies, logging, the response cache, Prometheus request series and the Sanic
worker machinery. Nothing here knows which product it serves."""
