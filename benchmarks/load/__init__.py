"""HTTP load benchmark: flagproxy, a fixed-body Sanic baseline and (optionally) the Node Unleash Proxy,
driven by wrk on loopback, with ratios to the baseline of the same run.

    python -m benchmarks.load                 # 200 flags, proxy 2 workers, wrk -t2 -c50, every scenario
    python -m benchmarks.load --smoke         # what CI runs: 50 flags, 1 s a scenario, fails on any error

Modules, one job each: `scenarios` (what is sent), `wrk` (Lua script + one wrk run), `processes`
(subprocesses that cannot hang the run, RSS), `upstream` and `baseline` (the two helper servers),
`targets` (starting each service), `node` (npm install of @unleash/proxy), `probe` (check a target
before loading it, find the typical answer), `runner` (the run), `report` (tables and JSON).
"""
