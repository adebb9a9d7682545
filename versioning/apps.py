from django.apps import AppConfig


class VersioningConfig(AppConfig):
    """No models: an app only so that its templates and stylesheet are found."""

    name = "versioning"
