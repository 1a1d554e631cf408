"""SQL injection strings (quotes, comments, stacked statements, tautologies, both databases' dialects) and
other text a hostile caller sends, shared by the server fuzz and the SQL injection round trip."""

from __future__ import annotations

SQL_INJECTIONS = [
    "' OR '1'='1",
    "' OR 1=1 --",
    '" OR ""="',
    "'; DROP TABLE features; --",
    "'); DELETE FROM api_tokens; --",
    "1; UPDATE users SET root_role = 1 --",
    "' UNION SELECT secret_hash, NULL FROM api_tokens --",
    "admin'/*",
    "%' AND 1=0 UNION SELECT sqlite_version() --",
    "'||(SELECT pg_sleep(0))||'",
    "$$; DROP SCHEMA public CASCADE; $$",
    "\\'; SELECT 1; --",
    "x' AND name LIKE '%",
    "`name`",
    "\x00'",
    "';\n--",
]
# Words the server knows, so generated requests also get past validation into the code behind it.
KNOWN_WORDS = [
    "default",
    "production",
    "client",
    "admin",
    "frontend",
    "flexibleRollout",
    "userWithId",
    "IN",
    "STR_CONTAINS",
    "NUM_EQ",
    "variable",
    "string",
    "json",
    "release",
    "simple",
    "2099-01-01T00:00:00Z",
]
