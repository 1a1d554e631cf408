"""Everything the proxy does with its upstream, on the cold path: fetch, back off, back up, report usage.

    upstream.py      the aiohttp client: conditional features fetch, register, usage, bootstrap document
    documents.py     what counts as a features document (for the fetch, the store, edge's offline files)
    poller.py        the refresh loop with backoff; keeps the last good snapshot on any failure
    stream.py        Unleash's event stream (`/api/client/streaming`) in place of polling, falling back to it
    backup.py        the last good payload on disk (or a custom storage provider) for restarts
    publication.py   how the instance's one sync hands each document to every worker (a file, renamed)
    usage.py         usage counts (named lookups + frontend SDK usage) as a worker counts them
    spool.py         how workers hand their usage counts to the instance's one usage sender
    usage_sender.py  the instance's usage sent upstream every interval
    service.py       wires them together for one proxy instance

Nothing here imports the proxy's routes: the proxy hands in callbacks (install a payload, is it ready).
"""
