"""The catalog and the knowledge base.

This app owns what the agents may know and offer: segments, intents, services with their
technical-parameter schemas, and the KB packages (an ID, a one-line description for the compact
catalog, the full content loaded on demand after code 99). Every model keeps full history, and
the catalog selectors give the pipeline a snapshot of what is active.
"""
