"""The formatter's stable import path (`formatting`, docs/DESIGN.md §14). The channel itself is
the `whatsapp` package; the store's send side is `conversations.sending`."""
