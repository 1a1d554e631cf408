"""`flagproxy demo`: a flag server on a fresh SQLite file with sample flags, and a proxy in front of it.

It prints the URLs (the proxy's status page too), the keys and four curl commands that show
evaluation, then runs until Ctrl-C (or SIGTERM), when it stops both processes and removes the temporary
database. It exits 0 only when both stopped cleanly. Both parts run as child processes exactly as
`flagproxy server` and `flagproxy proxy` would, so what the demo shows is what a deployment does.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

START_TIMEOUT = 30.0


@dataclass(frozen=True)
class DemoKeys:
    admin_token: str
    client_token: str
    client_key: str

    @classmethod
    def generate(cls) -> DemoKeys:
        return cls(
            admin_token=f"*:*.{secrets.token_hex(16)}",
            client_token=f"*:development.{secrets.token_hex(16)}",
            client_key=f"demo-{secrets.token_hex(8)}",
        )


def admin_call(base_url: str, token: str, method: str, path: str, body: Any = None) -> Any:
    """One admin API request; raises RuntimeError with the server's error record on failure."""
    data = None if body is None else orjson.dumps(body)
    request = urllib.request.Request(base_url + path, data=data, method=method)
    request.add_header("Authorization", token)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            text = answer.read()
    except urllib.error.HTTPError as error:
        raise RuntimeError(f"{method} {path}: {error.code} {error.read().decode(errors='replace')}") from None
    return orjson.loads(text) if text else None


def seed(base_url: str, admin_token: str) -> list[str]:
    """Create the sample flags; return their names. Every flag but payments-kill-switch is on in
    `development`; welcome-banner is on for any context, the empty one too."""
    call: Callable[..., Any] = lambda method, path, body=None: admin_call(  # noqa: E731
        base_url, admin_token, method, path, body
    )
    features = "/api/admin/projects/default/features"

    def strategy(flag: str, body: dict[str, Any]) -> None:
        call("POST", f"{features}/{flag}/environments/development/strategies", body)

    def create(flag: str, description: str, flag_type: str = "release") -> None:
        call("POST", features, {"name": flag, "description": description, "type": flag_type})

    beta = call(
        "POST",
        "/api/admin/segments",
        {
            "name": "beta-users",
            "description": "people who asked for early access",
            "constraints": [{"contextName": "userId", "operator": "IN", "values": ["alice", "bob"]}],
        },
    )

    create("new-checkout", "the new checkout for half of all users (gradual rollout by userId)")
    strategy(
        "new-checkout",
        {"name": "flexibleRollout", "parameters": {"rollout": "50", "stickiness": "userId"}},
    )
    create("beta-banner", "shown to the beta-users segment only")
    strategy("beta-banner", {"name": "default", "segments": [beta["id"]]})
    create("dark-mode", "three themes with payloads, split by userId", "experiment")
    strategy(
        "dark-mode",
        {
            "name": "flexibleRollout",
            "parameters": {"rollout": "100", "stickiness": "userId"},
            "variants": [
                {
                    "name": "dark",
                    "weightType": "variable",
                    "stickiness": "userId",
                    "payload": {"type": "json", "value": '{"background": "#111", "text": "#eee"}'},
                },
                {
                    "name": "light",
                    "weightType": "variable",
                    "stickiness": "userId",
                    "payload": {"type": "string", "value": "light"},
                },
                {"name": "contrast", "weight": 100, "weightType": "fix", "stickiness": "userId"},
            ],
        },
    )
    create("premium-search", "for the premium plan in Norway and Sweden, app version 2 and later")
    strategy(
        "premium-search",
        {
            "name": "default",
            "constraints": [
                {"contextName": "plan", "operator": "IN", "values": ["premium"]},
                {"contextName": "country", "operator": "IN", "values": ["NO", "SE"]},
                {"contextName": "version", "operator": "SEMVER_GTE", "value": "2.0.0"},
            ],
        },
    )
    create("checkout-upsell", "depends on new-checkout: only where the new checkout is on")
    strategy("checkout-upsell", {"name": "default"})
    call("POST", f"{features}/checkout-upsell/dependencies", {"feature": "new-checkout", "enabled": True})
    create("payments-kill-switch", "an operational off switch, currently off", "kill-switch")
    strategy("payments-kill-switch", {"name": "default"})
    # On for every context, the empty one included, so the very first request shows a flag.
    create("welcome-banner", "on for everyone: the first request, with no context at all, shows it")
    strategy("welcome-banner", {"name": "default"})

    names = [
        "welcome-banner",
        "new-checkout",
        "beta-banner",
        "dark-mode",
        "premium-search",
        "checkout-upsell",
    ]
    for flag in names:
        call("POST", f"{features}/{flag}/environments/development/on")
    return [*names, "payments-kill-switch"]


def wait_until_up(url: str, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the {what} exited with status {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the {what} did not come up within {START_TIMEOUT:.0f}s ({url})")


def stop(process: subprocess.Popen[bytes] | None) -> int | None:
    """SIGTERM, then SIGKILL after 15 s; the exit status (None when it never started)."""
    if process is None:
        return None
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
    return process.returncode


def _parser() -> argparse.ArgumentParser:
    from flagproxy.http.command_line import OneLineParser

    parser = OneLineParser(prog="flagproxy demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="address both listen on (default 127.0.0.1)")
    parser.add_argument("--server-port", type=int, default=4242, help="flag server port (default 4242)")
    parser.add_argument("--proxy-port", type=int, default=3000, help="proxy port (default 3000)")
    parser.add_argument(
        "--refresh-interval", type=int, default=1000, help="proxy refresh interval, ms (default 1000)"
    )
    parser.add_argument("--database", help="SQLite file to use (default: a fresh temporary file)")
    return parser


def invite_link(base_url: str, admin_token: str) -> str:
    """A fresh invite link (a week long): whoever opens it signs up as a Viewer."""
    expires = (dt.datetime.now(dt.UTC) + dt.timedelta(days=7)).strftime("%Y-%m-%dT%H:%M:%SZ")
    created = admin_call(
        base_url, admin_token, "POST", "/api/admin/invite-link/tokens", {"name": "demo", "expiresAt": expires}
    )
    return str(created["url"])


def console_login(base_url: str, admin_token: str) -> tuple[str, str]:
    """An Admin who can sign in to the web console: (username, password), new on every run (a database
    given with --database may hold the one of an earlier run)."""
    username = f"admin-{secrets.token_hex(2)}"
    password = f"Demo-{secrets.token_hex(6)}-7!"  # upper, lower, digit and special: the strength rule
    admin_call(
        base_url,
        admin_token,
        "POST",
        "/api/admin/user-admin",
        {"email": f"{username}@example.com", "username": username, "password": password, "rootRole": 1},
    )
    return username, password


def _instructions(
    server: str,
    proxy: str,
    keys: DemoKeys,
    flags: list[str],
    database: str,
    invite: str,
    login: tuple[str, str],
) -> str:
    return f"""
flagproxy demo is running.

  flag server   {server}      (admin API, client API, docs at {server}/docs/openapi)
  console       {server}/console
  login         {login[0]}   (an Admin of the console)
  password      {login[1]}
  proxy         {proxy}/proxy
  status page   {proxy}/proxy/status#key={keys.client_key}   (open it in a browser)
  database      {database}

  admin token   {keys.admin_token}
  invite link   {invite}   (open it in a browser to sign up as a Viewer)
  client token  {keys.client_token}   (what the proxy reads the server with)
  proxy key     {keys.client_key}

  sample flags  {", ".join(flags)}

Try:

  curl -H 'Authorization: {keys.client_key}' {proxy}/proxy

  curl -H 'Authorization: {keys.client_key}' '{proxy}/proxy?userId=alice'

  curl -H 'Authorization: {keys.client_key}' -H 'Content-Type: application/json' \\
       -d '{{"context": {{"userId": "carol", "properties": {{"plan": "premium", "country": "NO", \
"version": "2.1.0"}}}}}}' {proxy}/proxy

  curl -H 'Authorization: {keys.admin_token}' -X POST \\
       {server}/api/admin/projects/default/features/payments-kill-switch/environments/development/on

(the last one turns a flag on; the proxy shows it within one refresh interval). Ctrl-C stops both.
"""


def _ports_taken(host: str, ports: dict[str, int]) -> list[str]:
    """One line per port that cannot be listened on (another program has it: Unleash itself listens on
    4242), naming the flag that picks another; checked before anything starts, so no request of the demo
    reaches whatever answers there."""
    from flagproxy.http.serving import cannot_listen

    problems = []
    for flag, port in ports.items():
        problem = cannot_listen(host, port, "--host", flag)
        if problem and problem.startswith(flag):
            problems.append(f"{problem} (another program has it; {flag} chooses another port)")
        elif problem and problem not in problems:  # the address itself: once
            problems.append(problem)
    return problems


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.server_port == args.proxy_port:
        print("flagproxy demo: --server-port and --proxy-port must differ", file=sys.stderr)
        return 2
    taken = _ports_taken(args.host, {"--server-port": args.server_port, "--proxy-port": args.proxy_port})
    if taken:
        for problem in taken:
            print(f"flagproxy demo: {problem}", file=sys.stderr)
        return 2
    keys = DemoKeys.generate()
    workdir = None
    if args.database:
        database = args.database
        shown_database = database
    else:
        workdir = tempfile.mkdtemp(prefix="flagproxy-demo-")
        database = str(Path(workdir) / "flags.db")
        shown_database = f"{database} (a fresh file, removed on exit)"
    server_url = f"http://{args.host}:{args.server_port}"
    proxy_url = f"http://{args.host}:{args.proxy_port}"
    stopping = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    server = proxy = None
    env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "PORT")}
    status = 1
    try:
        server = subprocess.Popen(
            [sys.executable, "-m", "flagproxy", "server", "--host", args.host,
             "--port", str(args.server_port), "--database", database],
            env={**env, "INIT_ADMIN_API_TOKENS": keys.admin_token,
                 "INIT_CLIENT_API_TOKENS": keys.client_token},
            start_new_session=True,  # Ctrl-C reaches the demo only; it stops the children in order
        )  # fmt: skip
        wait_until_up(f"{server_url}/health", server, "flag server")
        flags = seed(server_url, keys.admin_token)
        proxy = subprocess.Popen(
            [sys.executable, "-m", "flagproxy", "proxy", "--host", args.host, "--port", str(args.proxy_port),
             "--service-url", f"{server_url}/api", "--service-api-token", keys.client_token,
             "--client-keys", keys.client_key, "--refresh-interval", str(args.refresh_interval),
             "--metrics-interval", "10000", "--service-app-name", "flagproxy-demo", "--enable-all-endpoint"],
            # With a fresh database, a backup left by an earlier demo would serve its flags until the
            # first fetch: the proxy keeps its backup in this run's folder.
            env={**env, "TMPDIR": workdir} if workdir else env,
            start_new_session=True,
        )  # fmt: skip
        wait_until_up(f"{proxy_url}/proxy/health", proxy, "proxy")
        invite = invite_link(server_url, keys.admin_token)
        login = console_login(server_url, keys.admin_token)
        print(_instructions(server_url, proxy_url, keys, flags, shown_database, invite, login), flush=True)
        while not stopping:
            if server.poll() is not None or proxy.poll() is not None:
                print("flagproxy demo: a child process exited; stopping", file=sys.stderr)
                return 1
            time.sleep(0.2)
        print("flagproxy demo: stopping", flush=True)
        status = 0
    except RuntimeError as exc:
        print(f"flagproxy demo: {exc}", file=sys.stderr)
    finally:
        for what, child in (("proxy", proxy), ("flag server", server)):
            code = stop(child)
            if status == 0 and code != 0:
                print(f"flagproxy demo: the {what} did not stop cleanly (status {code})", file=sys.stderr)
                status = 1
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    return status
