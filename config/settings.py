"""Settings, read from the environment (and from `.env` when present) with django-environ.

Only this package reads the environment; application code reads `django.conf.settings`.
Every variable is listed, with its default and meaning, in `.env.example` and docs/operations.md
(Configuration).
"""

import base64
import binascii
import hashlib
import json
import os
import re
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import django_stubs_ext
import environ
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured
from kombu import Exchange, Queue

# The Django classes that django-stubs declares generic (`admin.ModelAdmin[Session]`) become
# subscriptable at run time too.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
ENV_FILE = Path(env.str("ENV_FILE", default=str(BASE_DIR / ".env")))
if ENV_FILE.is_file():
    # Variables already in the process environment win over the file.
    environ.Env.read_env(ENV_FILE, overwrite=False)

DEBUG = env.bool("DEBUG", default=False)


def _required_in_production(name: str, dev_default: str) -> str:
    """A secret that must come from the environment unless DEBUG is on."""
    value = env.str(name, default="")
    if value:
        return value
    if DEBUG:
        return dev_default
    raise ImproperlyConfigured(
        f"{name} is not set. It is required when DEBUG=False; set it in the environment or .env."
    )


SECRET_KEY = _required_in_production("SECRET_KEY", "django-insecure-dev-only-key")
WHATSAPP_APP_SECRET = _required_in_production("WHATSAPP_APP_SECRET", "dev-app-secret")


def _fernet_keys(name: str, value: str) -> list[str]:
    """Comma-separated Fernet keys (32 url-safe base64 bytes each), checked at startup."""
    keys = [key.strip() for key in value.split(",") if key.strip()]
    for position, key in enumerate(keys, start=1):
        try:
            valid = len(base64.urlsafe_b64decode(key.encode())) == 32
        except (binascii.Error, ValueError):
            valid = False
        if not valid:
            raise ImproperlyConfigured(
                f"{name}: key {position} is not a Fernet key (32 url-safe base64-encoded bytes). "
                'Generate one with: python -c "from cryptography.fernet import Fernet; '
                'print(Fernet.generate_key().decode())"'
            )
    return keys


# Secrets stored in the database (instance access tokens) are encrypted with these: the first
# encrypts, all decrypt (rotation). In DEBUG only, a key is derived from SECRET_KEY.
_DEV_FIELD_KEY = base64.urlsafe_b64encode(
    hashlib.sha256(b"field-encryption:" + SECRET_KEY.encode()).digest()
).decode()
FIELD_ENCRYPTION_KEYS = _fernet_keys(
    "FIELD_ENCRYPTION_KEYS", _required_in_production("FIELD_ENCRYPTION_KEYS", _DEV_FIELD_KEY)
)

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "simple_history",
    "versioning",
    "knowledge_base",
    "prompts_admin",
    "conversations",
    "support",
    "simulator",
    "governance",
    "agents",
    "axes",
    "staff_auth",
    "csp",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files from the app itself (docs/operations.md, Production): no separate file server
    # needed.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "csp.middleware.CSPMiddleware",
    # Bidi controls in a page shown as [U+202E], not applied (config.middleware).
    "config.middleware.BidiControlsVisibleMiddleware",
    # No NUL in query parameters: PostgreSQL refuses it in text (docs/operations.md, Admin
    # robustness).
    "config.middleware.NulFreeQueryStringMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # An admin action's selected ids fit the model's primary key (config.middleware).
    "config.middleware.AdminActionSelectionMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "simple_history.middleware.HistoryRequestMiddleware",
    # Last, as django-axes requires: turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                # The waiting customers' count in the admin's header (Support, superusers).
                "support.admin.queue.waiting_customers",
            ],
        },
    },
]

DATABASE_URL = env.str("DATABASE_URL", default="") or f"sqlite:///{BASE_DIR / 'db.sqlite3'}"
DATABASES = {"default": environ.Env.db_url_config(DATABASE_URL)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"]["CONN_MAX_AGE"] = env.int("DB_CONN_MAX_AGE", default=60)
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    # Parameters bound by the server, so psycopg prepares a statement a connection has run
    # prepare_threshold times and PostgreSQL plans it once (docs/decisions/0044). Client-side
    # binding, Django's default, had PostgreSQL plan every statement of every delivery: the
    # webhook measured 0.45x the durable floor with it, 0.54x without (bench/README.md).
    # DB_PREPARED_STATEMENTS=False behind a PgBouncer in transaction mode older than 1.21
    # (or without max_prepared_statements), which cannot keep a session's prepared statements.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "server_side_binding": True,
            "prepare_threshold": 5 if env.bool("DB_PREPARED_STATEMENTS", default=True) else None,
        }
    )
elif DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Two writers at once (two staff clicks, the web and a worker): the second waits up to
    # `timeout` seconds for the first to commit instead of failing "database is locked". A
    # transaction begun DEFERRED that reads and then writes cannot wait (SQLite answers at once
    # rather than risk a deadlock), so each one takes the write lock when it begins (IMMEDIATE).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    )
# A Celery worker's connection pool (psycopg_pool through Django's "pool" option), switched on
# when the worker starts (conversations.db_connections.worker_connection_pool_enable): a worker
# runs up to CELERY_WORKER_CONCURRENCY turns at once in threads, each giving its connection back
# while it waits on the model, so a hundred turns in flight share a few connections. The web
# (sync gunicorn workers: one request at a time) and beat keep one persistent connection each,
# which also fails a request at once while PostgreSQL is down (a pool would wait for it).
# DB_POOL_MAX_SIZE=0: no pool, one persistent connection per worker thread.
DB_POOL_MIN_SIZE = env.int("DB_POOL_MIN_SIZE", default=1)
DB_POOL_MAX_SIZE = env.int("DB_POOL_MAX_SIZE", default=8)
DB_POOL_TIMEOUT = env.float("DB_POOL_TIMEOUT", default=30.0)
# How long a worker keeps the runtime settings, prompt overrides and KB catalog it read (an
# admin edit reaches the workers within it); 0: read on every turn (conversations/config_cache.py).
WORKER_CONFIG_CACHE_SECONDS = env.float("WORKER_CONFIG_CACHE_SECONDS", default=5.0)
DATABASE_WORKER_POOL: dict[str, Any] | None = (
    {
        "min_size": min(DB_POOL_MIN_SIZE, DB_POOL_MAX_SIZE),
        "max_size": DB_POOL_MAX_SIZE,
        "timeout": DB_POOL_TIMEOUT,
    }
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and DB_POOL_MAX_SIZE > 0
    else None
)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "pt-br"
LANGUAGES = [("pt-br", "Português (Brasil)"), ("en", "English")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "America/Sao_Paulo"
USE_I18N = True
FORMAT_MODULE_PATH = ["config.formats"]
USE_TZ = True

STATIC_URL = "static/"
# Where `collectstatic` writes and WhiteNoise serves from (outside the checkout in production).
STATIC_ROOT: Path | None = Path(env.str("STATIC_ROOT", default=str(BASE_DIR / "staticfiles")))
# Downloaded WhatsApp media (conversations.MessageMedia) go to the default storage: files under
# MEDIA_ROOT. Never served by URL: staff read them through the admin, behind its permissions.
MEDIA_ROOT = Path(env.str("MEDIA_ROOT", default=str(BASE_DIR / "media")))
# The largest file kept per media kind (bytes; WhatsApp's own limits by default): a larger one is
# not downloaded and its media ends too_large.
WHATSAPP_MEDIA_MAX_BYTES_IMAGE = env.int("WHATSAPP_MEDIA_MAX_BYTES_IMAGE", default=5 * 1024 * 1024)
WHATSAPP_MEDIA_MAX_BYTES_AUDIO = env.int("WHATSAPP_MEDIA_MAX_BYTES_AUDIO", default=16 * 1024 * 1024)
WHATSAPP_MEDIA_MAX_BYTES_VIDEO = env.int("WHATSAPP_MEDIA_MAX_BYTES_VIDEO", default=16 * 1024 * 1024)
WHATSAPP_MEDIA_MAX_BYTES_DOCUMENT = env.int(
    "WHATSAPP_MEDIA_MAX_BYTES_DOCUMENT", default=100 * 1024 * 1024
)
# The default storage can be any Django storage backend, e.g. django-storages' S3 one for object
# storage (installed separately, docs/media.md), with its options as a JSON object.
MEDIA_STORAGE_BACKEND = env.str(
    "MEDIA_STORAGE_BACKEND", default="django.core.files.storage.FileSystemStorage"
)
_media_storage_options = env.str("MEDIA_STORAGE_OPTIONS", default="{}")
try:
    MEDIA_STORAGE_OPTIONS = json.loads(_media_storage_options)
except ValueError as exc:
    raise ImproperlyConfigured(f"MEDIA_STORAGE_OPTIONS is not a JSON object: {exc}") from exc
if not isinstance(MEDIA_STORAGE_OPTIONS, dict):
    raise ImproperlyConfigured("MEDIA_STORAGE_OPTIONS is not a JSON object.")
STORAGES = {
    "default": {"BACKEND": MEDIA_STORAGE_BACKEND, "OPTIONS": MEDIA_STORAGE_OPTIONS},
    # Production serves hashed, compressed copies (far-future cache headers) that
    # `collectstatic` writes; a developer's runserver serves the apps' files as they are.
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

# --- Production hardening (python manage.py check --deploy is clean with DEBUG=False) ---
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=not DEBUG)
# Meta calls the webhook over HTTPS already; the health of a plain-HTTP load balancer probe
# must not be redirected.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SESSION_COOKIE_SECURE = not DEBUG
CSRF_COOKIE_SECURE = not DEBUG
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0 if DEBUG else 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SILENCED_SYSTEM_CHECKS = env.list("SILENCED_SYSTEM_CHECKS", default=[])
if not SECURE_HSTS_PRELOAD:
    # Preloading is a one-way commitment for the whole domain; it is the operator's call.
    SILENCED_SYSTEM_CHECKS.append("security.W021")

# --- Celery ---
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="")
# No broker configured: run tasks in-process, so `make run` needs no Redis.
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_TIMEZONE = TIME_ZONE
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=120)
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=150)
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Redis redelivers an unacknowledged task after the visibility timeout; it must exceed the hard
# time limit, or a task that is still running would be delivered to a second worker.
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, Any] = {"visibility_timeout": CELERY_TASK_TIME_LIMIT * 4}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
if CELERY_BROKER_URL.split("://", 1)[0] in ("redis", "rediss"):
    # kombu's Redis transport, with one redis-py client per channel (see the module).
    CELERY_BROKER_TRANSPORT = "config.redis_transport:Transport"
# LGPD retention (conversations.privacy.retention): a conversation closed this many days ago is
# anonymised; raw webhook bodies are emptied after theirs.
RETENTION_DAYS = env.int("RETENTION_DAYS", default=365)
WEBHOOK_BODY_RETENTION_DAYS = env.int("WEBHOOK_BODY_RETENTION_DAYS", default=30)
# Where beat keeps the last run of each periodic task: a state file, never in the checkout.
# Queues: a reply's send never waits behind other customers' turns, nor a turn behind a sweep.
# Routed by task name (the names are the tasks' public API: never renamed); anything not listed
# (alerts, CRM) goes to the default queue "celery"; prompt replays have their own. A worker
# started without -Q consumes every queue listed here; production runs one worker per queue
# group (docs/operations.md, Production).
CELERY_TASK_DEFAULT_QUEUE = "celery"
CELERY_TASK_QUEUES = [
    Queue(name, Exchange(name, type="direct"), routing_key=name)
    for name in ("turns", "sends", "summaries", "sweeps", "replays", CELERY_TASK_DEFAULT_QUEUE)
]
CELERY_TASK_ROUTES = {
    "conversations.process_session": {"queue": "turns"},
    "conversations.simulated_turn": {"queue": "turns"},
    "conversations.apply_webhook_delivery": {"queue": "turns"},
    "conversations.send_message": {"queue": "sends"},
    "conversations.download_message_media": {"queue": "sends"},
    "conversations.generate_handoff_summary": {"queue": "summaries"},
    "conversations.requeue_expired_leases": {"queue": "sweeps"},
    "conversations.requeue_unsent_messages": {"queue": "sweeps"},
    "conversations.requeue_received_deliveries": {"queue": "sweeps"},
    "conversations.retry_stale_leads": {"queue": "sweeps"},
    "conversations.apply_retention": {"queue": "sweeps"},
    "conversations.sync_message_templates": {"queue": "sweeps"},
    "governance.fail_abandoned_replays": {"queue": "sweeps"},
    "governance.check_rollout_pauses": {"queue": "sweeps"},
    "governance.replay_run": {"queue": "replays"},
    "governance.prompt_tests_run": {"queue": "replays"},
    "governance.persona_run": {"queue": "replays"},
}
# The worker's pool when `celery worker` is given no --pool / --concurrency: threads, because a
# turn spends its life waiting on the model (and sends on the Graph API), so one process overlaps
# many; prefork (one task per process at a time) only when asked. Threads get no hard time limit
# from Celery; the soft limit is raised in the task's thread by config.task_deadlines. A worker
# answers at most its threads over a turn's life (the model's latency and a few tenths of a
# second) per second: 200 threads keep up about 100 turns/s with a 2 s model, what one process's
# core can do (docs/operations.md, Capacity); 100 capped it at about 50.
CELERY_WORKER_POOL = env.str("CELERY_WORKER_POOL", default="threads")
CELERY_WORKER_CONCURRENCY = env.int(
    "CELERY_WORKER_CONCURRENCY",
    default=200 if CELERY_WORKER_POOL == "threads" else (os.cpu_count() or 1),
)
CELERY_BEAT_SCHEDULE_FILENAME = env.str(
    "CELERY_BEAT_SCHEDULE_FILENAME",
    default=str(Path(tempfile.gettempdir()) / "lab-attendance-celerybeat-schedule"),
)
CELERY_BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    # A turn whose worker died, whose publish failed or that raised leaves pending messages.
    "requeue-expired-leases": {
        "task": "conversations.requeue_expired_leases",
        "schedule": 60.0,
    },
    # A reply whose send was never published: send it (or fail it past the 24-hour window).
    "requeue-unsent-messages": {
        "task": "conversations.requeue_unsent_messages",
        "schedule": 60.0,
    },
    # A big webhook delivery stored for a task whose publish failed or whose worker died.
    "requeue-received-deliveries": {
        "task": "conversations.requeue_received_deliveries",
        "schedule": 60.0,
    },
    # A lead whose delivery chain was lost (worker died, publish lost): one last attempt.
    "retry-stale-leads": {
        "task": "conversations.retry_stale_leads",
        "schedule": 60.0,
    },
    # A prompt replay whose worker died mid-run, or that no worker started: end it FAILED (its
    # results kept); a queued one waiting for a free slot that no ending run published: start it.
    "fail-abandoned-replays": {
        "task": "governance.fail_abandoned_replays",
        "schedule": 60.0,
    },
    # A gradual release whose candidate hands off or breaks the contract more: pause it.
    "check-rollout-pauses": {
        "task": "governance.check_rollout_pauses",
        "schedule": env.float("ROLLOUT_PAUSE_CHECK_SECONDS", default=300.0),
    },
    # LGPD: anonymise conversations closed beyond RETENTION_DAYS; empty old webhook bodies.
    "apply-retention": {
        "task": "conversations.apply_retention",
        "schedule": 24 * 60 * 60.0,
    },
    # The approved WhatsApp message templates, read again from Meta (a template approved or
    # paused in WhatsApp Manager since); the admin's button does it at once.
    "sync-message-templates": {
        "task": "conversations.sync_message_templates",
        "schedule": 24 * 60 * 60.0,
    },
}

# --- LLM (OpenAI Responses API or any compatible server) ---
OPENAI_API_KEY = env.str("OPENAI_API_KEY", default="")
OPENAI_BASE_URL = env.str("OPENAI_BASE_URL", default="") or None
OPENAI_MODEL_TRIAGE = env.str("OPENAI_MODEL_TRIAGE", default="gpt-4o-mini")
OPENAI_MODEL_QUALIFICATION = env.str("OPENAI_MODEL_QUALIFICATION", default="gpt-4o-mini")
OPENAI_MODEL_COLLECTION = env.str("OPENAI_MODEL_COLLECTION", default="gpt-4o-mini")
OPENAI_MODEL_SUMMARY = env.str("OPENAI_MODEL_SUMMARY", default="gpt-4o-mini")
# The model that plays a simulated customer (simulator.personas), never a customer-facing one.
OPENAI_MODEL_PERSONA = env.str("OPENAI_MODEL_PERSONA", default="gpt-4o-mini")
# What the bot reads of a customer's media (conversations.media_reading): voice notes
# transcribed (on whenever a model key is set), images described by a vision model (off).
TRANSCRIBE_AUDIO = env.bool("TRANSCRIBE_AUDIO", default=bool(OPENAI_API_KEY))
OPENAI_MODEL_TRANSCRIPTION = env.str("OPENAI_MODEL_TRANSCRIPTION", default="gpt-4o-mini-transcribe")
DESCRIBE_IMAGES = env.bool("DESCRIBE_IMAGES", default=False)
OPENAI_MODEL_VISION = env.str("OPENAI_MODEL_VISION", default="gpt-4o-mini")
LLM_TIMEOUT_SECONDS = env.float("LLM_TIMEOUT_SECONDS", default=30.0)
LLM_RETRY_MAX = env.int("LLM_RETRY_MAX", default=1)
# The provider's circuit breaker (agents/circuit.py): this many provider failures in a row within
# the window open it; open, turns hand off at once for the cool-down, then one probe call.
LLM_CIRCUIT_FAILURES = env.int("LLM_CIRCUIT_FAILURES", default=5)
LLM_CIRCUIT_WINDOW_SECONDS = env.float("LLM_CIRCUIT_WINDOW_SECONDS", default=60.0)
LLM_CIRCUIT_COOLDOWN_SECONDS = env.float("LLM_CIRCUIT_COOLDOWN_SECONDS", default=30.0)
MAX_HISTORY_MESSAGES = env.int("MAX_HISTORY_MESSAGES", default=50)
MAX_CONTEXT_ENRICHMENTS_PER_MESSAGE = env.int("MAX_CONTEXT_ENRICHMENTS_PER_MESSAGE", default=2)
MAX_AGENT_HOPS_PER_MESSAGE = env.int("MAX_AGENT_HOPS_PER_MESSAGE", default=3)
SESSION_IDLE_HOURS = env.int("SESSION_IDLE_HOURS", default=24)
# A session's turn enqueued this recently and not started yet spares later messages a publish.
TURN_QUEUED_TTL_SECONDS = env.int("TURN_QUEUED_TTL_SECONDS", default=60)
AGENT_NAME = env.str("AGENT_NAME", default="Lia")
# Minutes a customer may wait for a human before the queue shows them late (near at 75 %).
SUPPORT_SLA_MINUTES = env.int("SUPPORT_SLA_MINUTES", default=15)
# Messages one staff member may send from the admin's simulator per minute (each a paid model
# turn); one turn in flight at a time either way.
SIMULATOR_MAX_TURNS_PER_MINUTE = env.int("SIMULATOR_MAX_TURNS_PER_MINUTE", default=10)

# --- Prompt governance (docs/architecture.md, Prompt governance) ---
# A replay stops (status "stopped by a cap", results kept) at this many calls or this spend.
REPLAY_MAX_CALLS = env.int("REPLAY_MAX_CALLS", default=200)
REPLAY_MAX_COST_USD = env.float("REPLAY_MAX_COST_USD", default=2.0)
# Model calls in flight for all replays together, and replays running at once, across the
# installation (governance/slots.py); a further run waits queued until one ends.
REPLAY_CONCURRENCY = env.int("REPLAY_CONCURRENCY", default=4)
REPLAY_MAX_RUNNING = env.int("REPLAY_MAX_RUNNING", default=2)
# Activating an override asks for a confirmation with a reason when its latest replay changed
# more than this share (%) of handoffs, of codes, or had more contract errors; or has no replay.
ACTIVATION_GATE_MAX_HANDOFF_CHANGE_PCT = env.float(
    "ACTIVATION_GATE_MAX_HANDOFF_CHANGE_PCT", default=10.0
)
ACTIVATION_GATE_MAX_CODE_CHANGE_PCT = env.float("ACTIVATION_GATE_MAX_CODE_CHANGE_PCT", default=25.0)
ACTIVATION_GATE_MAX_CONTRACT_ERROR_PCT = env.float(
    "ACTIVATION_GATE_MAX_CONTRACT_ERROR_PCT", default=5.0
)
# A gradual release's candidate is paused when its handoff or contract-error rate exceeds the
# current version's by more than this many points, with at least this many conversations a side
# (agents.rollout.candidate_worse, governance/rollout_pause.py).
ROLLOUT_PAUSE_MARGIN = env.float("ROLLOUT_PAUSE_MARGIN", default=5.0)
ROLLOUT_PAUSE_MIN_CONVERSATIONS = env.int("ROLLOUT_PAUSE_MIN_CONVERSATIONS", default=30)
# A release is published only after another user with the approval permission approved it
# (prompts_admin.releases).
PROMPT_APPROVAL_REQUIRED = env.bool("PROMPT_APPROVAL_REQUIRED", default=False)

# --- WhatsApp Cloud API ---
WHATSAPP_VERIFY_TOKEN = env.str("WHATSAPP_VERIFY_TOKEN", default="")
WHATSAPP_ACCESS_TOKEN = env.str("WHATSAPP_ACCESS_TOKEN", default="")
WHATSAPP_API_BASE_URL = env.str("WHATSAPP_API_BASE_URL", default="https://graph.facebook.com/v23.0")
WEBHOOK_MAX_BODY_BYTES = env.int("WEBHOOK_MAX_BODY_BYTES", default=5 * 1024 * 1024)
# Django refuses bodies above this before the view runs; keep it above the webhook's own limit
# so the view can answer 413 itself.
DATA_UPLOAD_MAX_MEMORY_SIZE = WEBHOOK_MAX_BODY_BYTES + 1024 * 1024
# A delivery with more events or bytes than this is stored at once and applied by a task.
WEBHOOK_INLINE_MAX_EVENTS = env.int("WEBHOOK_INLINE_MAX_EVENTS", default=50)
WEBHOOK_INLINE_MAX_BYTES = env.int("WEBHOOK_INLINE_MAX_BYTES", default=256 * 1024)

# --- Alerts on handoff and leads to the CRM (docs/operations.md, Alerts and the CRM) ---
# Public base URL of this deployment: the alerts and the CRM payload link to the admin with it.
SITE_URL = env.str("SITE_URL", default="http://127.0.0.1:8000" if DEBUG else "").rstrip("/")
# Mail: a django-environ URL (smtp+tls://user:password@host:587, consolemail://, ...); unset is
# the console backend, which only a developer wants.
EMAIL_URL = env.str("EMAIL_URL", default="")
vars().update(
    {
        key: value
        for key, value in environ.Env.email_url_config(EMAIL_URL or "consolemail://").items()
        if value is not None
    }
)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="atendimento@localhost")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
HANDOFF_NOTIFY_EMAILS = env.list("HANDOFF_NOTIFY_EMAILS", default=[])
HANDOFF_WEBHOOK_URL = env.str("HANDOFF_WEBHOOK_URL", default="")
HANDOFF_WEBHOOK_SECRET = env.str("HANDOFF_WEBHOOK_SECRET", default="")
CRM_WEBHOOK_URL = env.str("CRM_WEBHOOK_URL", default="")
CRM_WEBHOOK_SECRET = env.str("CRM_WEBHOOK_SECRET", default="")
# Seconds one signed POST (alert, CRM) may take in all, connecting to the answer's last byte
# read; a task retries a POST over it with backoff (support/signed_post.py).
SIGNED_POST_TIMEOUT_SECONDS = env.float("SIGNED_POST_TIMEOUT_SECONDS", default=10.0)
SIGNED_POST_TIMEOUT_MAX = 60.0


def _check_outbound_webhooks() -> None:
    """Refuse, at startup, a signed webhook that could not be signed or linked, and e-mail
    alerts that would only reach the console. In DEBUG a URL without its secret is allowed
    (its POSTs go unsigned, for trying a receiver locally)."""
    for url_name, secret_name in (
        ("HANDOFF_WEBHOOK_URL", "HANDOFF_WEBHOOK_SECRET"),
        ("CRM_WEBHOOK_URL", "CRM_WEBHOOK_SECRET"),
    ):
        url = globals()[url_name]
        if url and not re.match(r"^https?://[^/\s]+", url):
            raise ImproperlyConfigured(f"{url_name} must be an http:// or https:// URL.")
        if url and not globals()[secret_name] and not DEBUG:
            raise ImproperlyConfigured(
                f"{url_name} is set but {secret_name} is not: the POSTs are signed with it. "
                "It is required when DEBUG=False; set it in the environment or .env."
            )
    if not 0 < SIGNED_POST_TIMEOUT_SECONDS <= SIGNED_POST_TIMEOUT_MAX:
        # The delivery tasks' time limits grow with it and must stay below the broker's
        # visibility timeout (a task still running would be delivered again).
        raise ImproperlyConfigured(
            f"SIGNED_POST_TIMEOUT_SECONDS must be more than 0 and at most "
            f"{SIGNED_POST_TIMEOUT_MAX:g} seconds (it is {SIGNED_POST_TIMEOUT_SECONDS:g})."
        )
    alerts = bool(HANDOFF_NOTIFY_EMAILS or HANDOFF_WEBHOOK_URL or CRM_WEBHOOK_URL)
    if alerts and not SITE_URL:
        raise ImproperlyConfigured(
            "SITE_URL is not set: the alerts and the CRM payload link to the admin with it "
            "(e.g. https://atendimento.example.com.br). It is required when DEBUG=False."
        )
    if HANDOFF_NOTIFY_EMAILS and not EMAIL_URL and not DEBUG:
        raise ImproperlyConfigured(
            "HANDOFF_NOTIFY_EMAILS is set but EMAIL_URL is not: the alerts would only reach the "
            "console. Set EMAIL_URL (e.g. smtp+tls://user:password@host:587)."
        )


_check_outbound_webhooks()

# --- Logging: one line per event, `event key=value ...`, secrets redacted ---
LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
# "text": `time level logger event key=value ...`; "json": one JSON object per line.
# /metrics answers only `Authorization: Bearer <METRICS_TOKEN>`; unset, the endpoint is a 404.
# prometheus-client itself reads PROMETHEUS_MULTIPROC_DIR (docs/operations.md, Production, Metrics).
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
LOG_FORMAT = env.str("LOG_FORMAT", default="text")
if LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT={LOG_FORMAT!r}: use 'text' or 'json'.")
# The project's own top-level packages, apps and libraries alike.
PROJECT_PACKAGES = (
    "agents",
    "compat",
    "config",
    "conversations",
    "governance",
    "knowledge_base",
    "prompts_admin",
    "simulator",
    "staff_auth",
    "support",
    "versioning",
    "whatsapp",
)
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "event": {
            "()": "config.logging.JsonEventFormatter"
            if LOG_FORMAT == "json"
            else "config.logging.EventFormatter"
        }
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "event"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        "django": {"handlers": ["console"], "level": "INFO", "propagate": False},
        # The project's packages, each at LOG_LEVEL (a package left out logs only WARNING).
        **{
            package: {"handlers": ["console"], "level": LOG_LEVEL, "propagate": False}
            for package in PROJECT_PACKAGES
        },
        "axes": {"handlers": ["console"], "level": "ERROR", "propagate": False},
        "celery": {"handlers": ["console"], "level": "INFO", "propagate": False},
        # A line as each task is received and another as it succeeds: four per answered
        # message, which the app's own events already tell (turn_finished,
        # whatsapp_message_sent, whatsapp_send_retry), and a tenth of a worker's CPU per turn
        # (bench/worker_cpu.py). Failures are still logged (ERROR); LOG_LEVEL=DEBUG shows them.
        **{
            name: {
                "handlers": ["console"],
                "level": "DEBUG" if LOG_LEVEL == "DEBUG" else "WARNING",
                "propagate": False,
            }
            for name in ("celery.worker.strategy", "celery.app.trace")
        },
        # httpx logs every request's full URL at INFO; a receiver's URL may carry a token.
        "httpx": {"handlers": ["console"], "level": "WARNING", "propagate": False},
    },
}

# --- Staff sign-in: lockout of password guessing (django-axes), session length, admin URL ---
# The admin's prefix, e.g. `gestao-7f3k/`: relative, ending in a slash.
# The first superuser `manage.py bootstrap` creates while none exists (`make run`'s
# bootstrap_dev generates a password when ADMIN_PASSWORD is empty).
ADMIN_USERNAME = env.str("ADMIN_USERNAME", default="admin")
ADMIN_EMAIL = env.str("ADMIN_EMAIL", default="")
ADMIN_PASSWORD = env.str("ADMIN_PASSWORD", default="")
DEFAULT_ADMIN_URL = "admin/"
ADMIN_URL = env.str("ADMIN_URL", default=DEFAULT_ADMIN_URL)
# Plain path segments only: `path()` would read `<...>` as a converter.
if not re.fullmatch(r"([A-Za-z0-9._~-]+/)+", ADMIN_URL):
    raise ImproperlyConfigured(
        f"ADMIN_URL={ADMIN_URL!r}: use a relative path of letters, digits, '.', '_', '~', '-' "
        "that ends with a slash, such as 'admin/'."
    )
SESSION_COOKIE_AGE = env.int("SESSION_COOKIE_AGE", default=12 * 60 * 60)
# Axes first: it refuses a locked-out username+address before the password is even checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Attempts live in the database, so every gunicorn worker counts the same failures.
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("AXES_COOLOFF_MINUTES", default=15))
# By username AND address: a guesser locks out one account from one address, never the
# colleagues behind the same office NAT.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "staff_auth.attempts.client_ip_address"
AXES_USERNAME_CALLABLE = "staff_auth.attempts.attempt_username"
AXES_LOCKOUT_CALLABLE = "staff_auth.lockout.lockout_response"
# staff_auth logs the login events as structured lines; axes' own free-text lines stay quiet.
AXES_VERBOSE = False
# Successful logins are log events; no table keeps staff addresses beyond a lockout.
AXES_DISABLE_ACCESS_LOG = True
# Behind the reverse proxy: count attempts against the address the proxy wrote last in
# X-Forwarded-For, not against the proxy's 127.0.0.1 (staff_auth/attempts.py).
USE_X_FORWARDED_FOR = env.bool("USE_X_FORWARDED_FOR", default=False)

# --- Content-Security-Policy (django-csp) on every response, the admin's above all ---
# The admin loads scripts, styles and images from its own static files (and a conversation's
# images, audio and video from the permission-checked media view) only: no inline script or
# style (the project's templates link static CSS; Django's admin has no inline script), no
# 'unsafe-inline', no 'unsafe-eval'. A STATIC_URL on another origin would need that origin here.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [NONE],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF],
        # The conversation's audio and video players read the media view (same origin).
        "media-src": [SELF],
        "font-src": [SELF],
        "connect-src": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
        "base-uri": [NONE],
    }
}

if DEBUG:
    # The local first run: no HTTPS in front of runserver.
    SECURE_SSL_REDIRECT = False
