"""Persistence: one database interface for SQLite and PostgreSQL, migrations, and one store per domain.

Every SQL statement is written once, with `?` placeholders and portable types (TEXT, INTEGER, BIGINT,
JSON kept as TEXT, booleans as 0/1, timestamps as ISO-8601 text), so both backends run the same code.
"""
