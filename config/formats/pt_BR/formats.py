"""Brazilian Portuguese, one way to write a date and a moment on every page: ``01/12/2026`` and
``01/12/2026 14:32`` (Django's own pt_BR writes ``1 de Dezembro de 2026 às 14:32`` in the admin's
lists and ``01/12/2026 14:32`` elsewhere). Everything not set here is Django's pt_BR."""

DATE_FORMAT = "d/m/Y"
SHORT_DATE_FORMAT = "d/m/Y"
DATETIME_FORMAT = "d/m/Y H:i"
SHORT_DATETIME_FORMAT = "d/m/Y H:i"
TIME_FORMAT = "H:i"
