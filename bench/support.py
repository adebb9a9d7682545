"""Helpers shared by the benchmark scripts."""

import os
import sys


def production_settings_env() -> None:
    """The environment a bench needs to load the project's production settings in its own
    process (`config.settings`, no .env): throwaway secrets, quiet logs. Variables already set
    win."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("ENV_FILE", "/nonexistent/.env")
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key")
    os.environ.setdefault("WHATSAPP_APP_SECRET", "bench-only-app-secret")
    os.environ.setdefault("FIELD_ENCRYPTION_KEYS", "YmVuY2gtb25seS1maWVsZC1lbmNyeXB0aW9uLWtleSE=")
    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    os.environ.setdefault("LOG_LEVEL", "WARNING")


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
