"""Settings for the test suite: dummy secrets, fast hashing, eager Celery unless a broker is set.

`DATABASE_URL` and `CELERY_BROKER_URL` still come from the environment, so `.ci/run` runs the same
suite on PostgreSQL and Redis.
"""

import os

os.environ.setdefault("SECRET_KEY", "test-secret-key-not-for-production")
os.environ.setdefault("WHATSAPP_APP_SECRET", "test-app-secret")
os.environ.setdefault("WHATSAPP_VERIFY_TOKEN", "test-verify-token")
os.environ.setdefault("OPENAI_API_KEY", "test-openai-key")
# A fixed test key (never used anywhere else); tests that rotate set their own.
os.environ.setdefault("FIELD_ENCRYPTION_KEYS", "dGVzdC1maWVsZC1lbmNyeXB0aW9uLWtleS0zMmJ5dGU=")
# Tests must not depend on a developer's local .env.
os.environ["ENV_FILE"] = "/nonexistent/.env"

from config.settings import *  # noqa: F403
from config.settings import CELERY_BROKER_URL

DEBUG = False
SECURE_SSL_REDIRECT = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# The test client renders pages without a `collectstatic` run; the hashed storage of production
# is tested on its own (tests/config/test_static_files.py) and in the subprocess tests.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
STATIC_ROOT = None  # nothing collected: WhiteNoise has no directory to serve (and warn about)
ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost"]
# Integration tests start a real worker when a broker is configured; everything else runs eagerly.
CELERY_TASK_ALWAYS_EAGER = True
CELERY_INTEGRATION_BROKER_URL = CELERY_BROKER_URL
LLM_TIMEOUT_SECONDS = 2.0
