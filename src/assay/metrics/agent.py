"""LLM-judged agent metrics: the agent evaluators of azure-ai-evaluation, in assay's own prompts.

Each is a template ``metrics/prompts/agent_<name>.txt`` and one :class:`~assay.judges.Judge`
on the one judge path (:func:`~assay.metrics.judged.register_judge`,
:func:`~assay.judges.run_judge`): JSON answer, one re-ask, probability scoring on a smoke-test
judge, the usual properties. The agent's turn reaches the judge as a readable transcript
(:func:`assay.judges.prompt.message_text`: messages, ``name(arguments)`` tool calls, tool
results and errors, tool definitions with their parameter schemas), inside tagged blocks like
every other evaluated text: instructions inside a tool result are data, never obeyed.

Names, scales and output keys are those of azure-ai-evaluation's evaluators of the same names
(``<name>``, ``<name>_score``, ``<name>_result``, ``<name>_reason``, ``<name>_threshold``):

* ``tool_call_accuracy`` (1–5, threshold 3): the right tools, with correct arguments, given
  the tool definitions and the conversation. Needs ``tool_calls``.
* ``intent_resolution`` (1–5, threshold 3): did the agent identify what the user wanted and
  resolve it. Needs ``query`` and ``response``.
* ``task_adherence`` (0 or 1, threshold 0.5 — 1 passes): no material failure against the
  system message / instructions (``history``), the user's constraints and the tools offered.
  azure-ai-evaluation's current evaluator answers 0/1 (a material failure or not), not 1–5.
* ``response_completeness`` (1–5, threshold 3): how much of the ground truth the response
  conveys. Needs ``response`` and ``ground_truth``.

``auto`` plans them only for agent data: ``tool_call_accuracy`` when the row has tool calls,
the other three when it has the agent's ``steps`` or its tool calls (a plain question/answer
row is not judged as an agent). No embedded scorer was measured for them, so without a judge model they
are skipped with :data:`~assay.judges.scorers.NEEDS_JUDGE`.
"""

from __future__ import annotations

from assay.judges import Judge
from assay.metrics.judged import register_judge

__all__ = ["AGENT_JUDGES"]

AZURE = ("azure",)
AGENT_FIELDS = ("history", "steps", "tool_definitions")

AGENT_JUDGES: dict[str, Judge] = {}
AGENT_ROW = ("steps", "tool_calls")   # auto gives the agent judges to rows with either


def _declare(judge: Judge) -> Judge:
    AGENT_JUDGES[judge.name] = judge
    register_judge(judge)
    return judge


_declare(Judge("tool_call_accuracy", "agent_tool_call_accuracy", threshold=3, requires=("tool_calls",),
               optional=("query", "history", "tool_definitions"), auto=True, family=("azure", "databricks"),
               description="""Were the right tools called, with correct arguments, given the definitions? 1–5.

The judge sees the conversation, the user's request, the tool definitions and every call
the agent made (``name(arguments)``, with its result or error when the data has it)."""))

_declare(Judge("intent_resolution", "agent_intent_resolution", threshold=3, requires=("query", "response"),
               optional=AGENT_FIELDS, auto=True, family=AZURE, auto_requires=(AGENT_ROW,),
               description="""Did the agent identify what the user wanted and resolve it? 1–5 (agent rows).

The judge sees the conversation, the request, the tools offered, the agent's steps
(messages, tool calls, tool results) and its final answer."""))

_declare(Judge("task_adherence", "agent_task_adherence", scale="0-1", threshold=0.5, requires=("query", "response"),
               optional=AGENT_FIELDS, auto=True, family=AZURE, auto_requires=(AGENT_ROW,),
               description="""Did the agent keep to its instructions, the user's constraints and its tools? 0 or 1 (agent rows).

1 = no material failure, 0 = at least one (the reason names it), as azure-ai-evaluation's
evaluator answers. The instructions are the system message at the start of ``history``."""))

_declare(Judge("response_completeness", "agent_response_completeness", threshold=3,
               requires=("response", "ground_truth"), optional=("query",), auto=True, family=AZURE,
               auto_requires=(AGENT_ROW,),
               description="""How much of the expected answer does the response convey? 1–5 (agent rows in ``auto``).

Coverage only: extra information is neither rewarded nor penalised. ``auto`` plans it for
agent rows (with ``steps`` or ``tool_calls``); name it to run it on any row with a ground truth."""))
