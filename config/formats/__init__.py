"""The project's date formats per language (``FORMAT_MODULE_PATH``): one spelling of a date and
of a moment for staff, wherever they read it."""
