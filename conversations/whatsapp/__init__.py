"""The channel's worker side: the Celery tasks that send and the background read receipts. The
channel itself (payload, signature, Graph client, formatting) is the `whatsapp` package."""
