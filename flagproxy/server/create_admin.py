"""`flagproxy server create-admin`: a console Admin made from the command line on the server's machine, at
any time (the first one, or another when nobody can sign in). The password is read from the terminal or
standard input, never from the command line, where `ps` would show it."""

from __future__ import annotations

import argparse
import getpass
import os
import sys

from flagproxy.http.command_line import OneLineParser
from flagproxy.server import first_admin
from flagproxy.server.settings import ServerSettings, SettingsError, add_database_options
from flagproxy.server.startup import open_and_prepare


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="flagproxy server create-admin",
        description="Create an Admin of the web console and the admin API in the server's database (the "
        "same --database/--database-url or DATABASE_PATH/DATABASE_URL as `flagproxy server`), migrating "
        "a new database first. The password is asked for twice on a terminal, or read from the first line "
        "of standard input (`printf '%%s\\n' \"$PASSWORD\" | flagproxy server create-admin --username "
        "admin`); it must have at least 10 characters with an uppercase and a lowercase letter, a digit "
        "and a special character.",
    )
    parser.add_argument("--username", help="the name to sign in with")
    parser.add_argument(
        "--email",
        help=f"the email (also a sign-in name; default <username>@{first_admin.PLACEHOLDER_DOMAIN})",
    )
    parser.add_argument("--name", help="the display name")
    add_database_options(parser)
    return parser


def _read_password() -> str:
    if sys.stdin.isatty():
        first = getpass.getpass("Password: ")
        if getpass.getpass("Again: ") != first:
            raise first_admin.AdminRefused("the two passwords differ")
        return first
    return sys.stdin.readline().rstrip("\r\n")


def main(argv: list[str]) -> int:
    """`flagproxy server create-admin`: 0 when made, 2 with one line when refused."""
    prog = "flagproxy server create-admin"
    parser = _parser()
    try:
        settings = ServerSettings.load(os.environ, argv, parser)
    except SettingsError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    if not args.username and not args.email:
        print(f"{prog}: give --username or --email (see --help)", file=sys.stderr)
        return 2
    try:
        password = _read_password()
        database = open_and_prepare(settings)
    except (first_admin.AdminRefused, SettingsError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    try:
        with database.transaction() as tx:
            user_id = first_admin.insert_admin(
                tx,
                username=args.username,
                email=args.email,
                name=args.name,
                password=password,
                made_by="flagproxy server create-admin",
            )
    except first_admin.AdminRefused as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    finally:
        database.close()
    login = args.username or args.email
    print(f"created Admin {login!r} (user id {user_id}); sign in at /console with it and the password")
    return 0
