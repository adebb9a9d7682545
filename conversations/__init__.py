"""The channel and the conversation.

This app owns WhatsApp instances, customer sessions and their state, the message log (inbound,
outbound and system events), webhook deliveries, delivery statuses, LLM call records, handoff
summaries and leads; the WhatsApp webhook and sender; and the use cases that run one turn of a
conversation through the agents (`turns`) and the Celery tasks that drive them.
"""
