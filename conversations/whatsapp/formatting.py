"""The formatter's stable import path for other tools (docs/DESIGN.md, §14 Stable interfaces); the
code is `whatsapp.formatting`."""

from whatsapp.formatting import format_ai_message_for_whatsapp

__all__ = ["format_ai_message_for_whatsapp"]
