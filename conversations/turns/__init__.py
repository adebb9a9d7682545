"""A session's turn: its pending inbound messages → the agents → one answer (being split out of
`conversations.pipeline`)."""
