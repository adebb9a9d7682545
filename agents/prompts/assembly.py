"""The final system prompt: rendered prompt text → metadata → guards (guards always last).

The text is the active override or the built-in template, already rendered with the agent's
variables by `agents/templating.py` (this package does not import Django). Pure module.
"""

from agents.guards import with_runtime_guards
from agents.prompts.inputs import PromptInputs
from agents.prompts.metadata import build_metadata


def assemble_system_prompt(rendered_text: str, inputs: PromptInputs) -> str:
    body = f"{rendered_text.strip()}\n\n{build_metadata(inputs)}"
    return with_runtime_guards(body, inputs)
