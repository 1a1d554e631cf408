"""The first console Admin of a real server, made without the API (nobody can sign in to call it yet).

Two ways, both documented in docs/server.md:

- at start, from UNLEASH_DEFAULT_ADMIN_USERNAME and UNLEASH_DEFAULT_ADMIN_PASSWORD (Unleash's variables):
  only while no user exists, as Unleash does, so the same variables can stay set on every start and
  every instance;
- `flagproxy server create-admin` (flagproxy/server/create_admin.py), at any time.

The password goes through the API's strength rule and argon2 hashing; it is never logged nor echoed.
"""

from __future__ import annotations

import logging
import re

from flagproxy.server.identity import passwords
from flagproxy.server.identity.bodies import EMAIL
from flagproxy.server.identity.permissions import ADMIN_ROLE
from flagproxy.server.settings import ServerSettings, SettingsError
from flagproxy.server.storage import events, people
from flagproxy.server.storage.database import Database, Tx

log = logging.getLogger("flagproxy.server")

# A user needs an email; an Admin made from a username alone gets one under the reserved .invalid domain
# (RFC 2606: no mail can ever reach it), to be changed in the console.
PLACEHOLDER_DOMAIN = "flagproxy.invalid"


class AdminRefused(ValueError):
    """Why the admin cannot be made (weak password, name taken, bad email); never holds the password."""


def placeholder_email(username: str) -> str:
    return f"{re.sub(r'[^A-Za-z0-9._+-]', '-', username)}@{PLACEHOLDER_DOMAIN}"


def insert_admin(
    tx: Tx, *, username: str | None, email: str | None, name: str | None, password: str, made_by: str
) -> int:
    """Store a new Admin; the user's id. Raises AdminRefused, naming the rule that failed."""
    problem = passwords.weakness(password)
    if problem:
        raise AdminRefused(f"the password {problem}")
    if email is not None and not re.match(EMAIL, email):
        raise AdminRefused(f"{email!r} is not an email address")
    if email is None and username is None:
        raise AdminRefused("give a username or an email to sign in with")
    email = email or placeholder_email(str(username))
    clash = people.taken(tx, None, username) or people.taken(tx, email, None)
    if clash:
        raise AdminRefused(f"a user with that {clash} already exists")
    user_id = people.insert_user(
        tx,
        name=name,
        email=email,
        username=username,
        password_hash=passwords.hash_password(password),
        root_role=ADMIN_ROLE,
    )
    events.record(tx, "user-created", made_by, {"id": user_id, "email": email, "rootRole": ADMIN_ROLE})
    return user_id


def create_default_admin(database: Database, settings: ServerSettings) -> bool:
    """The Admin of UNLEASH_DEFAULT_ADMIN_USERNAME/PASSWORD when no user exists yet; whether it was made.
    A password the rule refuses stops the start (SettingsError)."""
    username, password = settings.default_admin_username, settings.default_admin_password
    if not username or not password:
        return False
    with database.transaction() as tx:
        if not people.no_users_yet(tx):
            return False
        try:
            insert_admin(
                tx,
                username=None if "@" in username else username,
                email=username if "@" in username else None,
                name=None,
                password=password,
                made_by="UNLEASH_DEFAULT_ADMIN_USERNAME",
            )
        except AdminRefused as exc:
            variable = "PASSWORD" if str(exc).startswith("the password") else "USERNAME"
            raise SettingsError(f"UNLEASH_DEFAULT_ADMIN_{variable}: {exc}") from None
    log.info("created the first Admin %r (UNLEASH_DEFAULT_ADMIN_USERNAME)", username)
    return True
