"""`flagproxy edge`: a drop-in for Unleash Edge on flagproxy's engine (docs/edge.md).

One instance serves several environments and project sets; SDKs present real Unleash tokens, which are
validated against the upstream (`POST /edge/validate`) and cached. Routes read per-environment snapshot
stores (flagproxy/instance/store.py) and never call the upstream themselves, except to validate a token
that has not been seen yet.
"""
