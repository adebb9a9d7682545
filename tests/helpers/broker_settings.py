"""The project's settings (``config.settings``) for a test's subprocesses, with every broker key
under the test's own prefix (`tests.helpers.broker.IsolatedBroker`), which the test passes in
``TEST_BROKER_KEY_PREFIX``. Nothing else differs from production."""

import os

from config.settings import *  # noqa: F403
from config.settings import CELERY_BROKER_TRANSPORT_OPTIONS

CELERY_BROKER_TRANSPORT_OPTIONS = {
    **CELERY_BROKER_TRANSPORT_OPTIONS,
    "global_keyprefix": os.environ["TEST_BROKER_KEY_PREFIX"],
}
