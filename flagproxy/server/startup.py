"""What happens before serving (once in the main process, then again in each worker, where it finds nothing
left to do): open the database, migrate, create INIT tokens and the first admin."""

from __future__ import annotations

import logging

from flagproxy.server.clock import now_iso
from flagproxy.server.delta import log as delta_log
from flagproxy.server.first_admin import create_default_admin
from flagproxy.server.settings import ServerSettings, SettingsError
from flagproxy.server.storage import projects as project_rows
from flagproxy.server.storage import tokens as token_rows
from flagproxy.server.storage.database import Database, DatabaseUnavailable, open_database
from flagproxy.server.storage.migrations import migrate
from flagproxy.server.tokens import ApiToken, parse_init_token

log = logging.getLogger("flagproxy.server")


def create_init_tokens(database: Database, settings: ServerSettings) -> int:
    """Store each INIT_*_API_TOKENS entry that is not stored yet; return how many were new."""
    created = 0
    with database.transaction() as tx:
        for token_type, entries in settings.init_tokens().items():
            for secret in entries:
                projects, environment = parse_init_token(secret, token_type)
                if environment != "*" and project_rows.environment(tx, environment) is None:
                    raise SettingsError(
                        f"INIT_{token_type.upper()}_API_TOKENS: no environment {environment!r}"
                    )
                if projects != ("*",) and project_rows.project(tx, projects[0]) is None:
                    raise SettingsError(f"INIT_{token_type.upper()}_API_TOKENS: no project {projects[0]!r}")
                token = ApiToken(
                    secret=secret,
                    token_name=f"init-{token_type}",
                    type=token_type,
                    environment=environment,
                    projects=projects,
                    created_at=now_iso(),
                )
                created += token_rows.insert(tx, token)
    return created


def open_and_prepare(settings: ServerSettings) -> Database:
    try:
        database = open_database(settings.database_url, settings.database_path)
    except DatabaseUnavailable as exc:
        raise SettingsError(f"{settings.database_named()}: {exc}") from None
    applied = migrate(database)
    if applied:
        log.info("applied schema migrations %s", applied)
    try:
        create_init_tokens(database, settings)
        create_default_admin(database, settings)
        with database.transaction() as tx:
            delta_log.initialize(tx)
    except BaseException:
        database.close()
        raise
    return database
