"""Prompt governance (docs/architecture.md, Prompt governance): replay recorded model calls against
a draft override, the activation gate, and outcome metrics per prompt version.

This app sits above `conversations` (it reads the recorded `LLMCall`s and runs the turn's
parse, repair and action mapping) and registers its replay lookups with `prompts_admin`, which
may not import it (docs/architecture.md, Layers).
"""
