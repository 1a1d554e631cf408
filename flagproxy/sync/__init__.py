"""Everything the proxy does with its upstream, on the cold path: fetch, back off, back up, report usage.

    upstream.py  the aiohttp client: conditional features fetch, register, metrics, bootstrap document
    documents.py what counts as a features document (asked by the fetch, the store and edge's offline files)
    poller.py    the refresh loop with backoff; keeps the last good snapshot on any failure
    metrics.py   usage counts (named lookups + frontend SDK metrics) and the flush loop
    backup.py    the last good payload on disk (or a custom storage provider) for restarts
    service.py   wires them together for one proxy process

Nothing here imports the proxy's routes: the proxy hands in callbacks (install a payload, is it ready).
"""
