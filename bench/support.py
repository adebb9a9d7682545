"""Helpers shared by the benchmark scripts."""

import sys


def ensure_database(url: str, *, script: str) -> None:
    """CREATE DATABASE when the PostgreSQL database named in `url` does not exist yet."""
    import environ
    import psycopg
    from psycopg import sql

    config = environ.Env.db_url_config(url)
    if config["ENGINE"] != "django.db.backends.postgresql":
        sys.exit(f"{script} needs DATABASE_URL=postgres://...")
    with psycopg.connect(
        host=config["HOST"] or None,
        port=config["PORT"] or None,
        user=config["USER"] or None,
        password=config["PASSWORD"] or None,
        dbname="postgres",
        autocommit=True,
    ) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [config["NAME"]]
        ).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(config["NAME"])))
            print(f"created database {config['NAME']}")
