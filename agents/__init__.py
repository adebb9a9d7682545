"""Talking to the model.

This app owns everything between a session's context and the model's validated answer: the
`{JSON}Mensagem` contract parser, the code table, action mapping, field validators, the three
agents' prompt builders and their fixed runtime guards, the invoker, the LLM client, the format
repair and the operational summary. Most of it is a pure core without Django imports; it never
imports `conversations` (collaborators are passed in).
"""
