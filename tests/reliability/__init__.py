"""The reliability campaign (issue 15): real `flagproxy proxy`, `flagproxy edge` and `flagproxy server`
processes on loopback, faulty upstreams, hostile input, a soak under a changing payload, and stops under load.

`python -m tests.reliability` runs it (short, a few minutes; `--long` for the hour-long soak), prints the
figures and rewrites docs/reliability.md with them. See docs/reliability.md for what each part proves.
"""
