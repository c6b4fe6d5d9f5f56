"""Run inside the PyRIT venv by benchmarks/bench_redteam_peers.py: PyRIT's single-turn
``PromptSendingAttack`` against an OpenAI-compatible endpoint (``OpenAIChatTarget``), once per
objective and converter (none, ``Base64Converter``, ``ROT13Converter``, ``AtbashConverter``),
scored by PyRIT's ``SubStringScorer`` on the target's compliance marker.

    python pyrit_attack.py SPEC.json OUT.json

SPEC: {"url", "model", "marker", "objectives": [...], "converters": ["baseline", "base64", ...]}.
OUT: per converter {"attempts", "successes", "asr", "errors"}.
"""

from __future__ import annotations

import asyncio
import json
import sys


def converter(name: str) -> list:
    from pyrit.converter import AtbashConverter, Base64Converter, ROT13Converter

    made = {"baseline": None, "base64": Base64Converter, "rot13": ROT13Converter, "atbash": AtbashConverter}[name]
    return [] if made is None else [made()]


async def run(spec: dict) -> dict:
    from pyrit.executor.attack import AttackConverterConfig, AttackScoringConfig, PromptSendingAttack
    from pyrit.models import AttackOutcome
    from pyrit.prompt_normalizer import ConverterConfiguration
    from pyrit.prompt_target import OpenAIChatTarget
    from pyrit.score import SubStringScorer
    from pyrit.setup import IN_MEMORY, initialize_pyrit_async

    await initialize_pyrit_async(memory_db_type=IN_MEMORY, silent=True)
    target = OpenAIChatTarget(endpoint=spec["url"], model_name=spec["model"], api_key="not-needed")
    scorer = SubStringScorer(substring=spec["marker"], categories=["jailbreak"])
    out = {}
    for name in spec["converters"]:
        attack = PromptSendingAttack(
            objective_target=target,
            attack_converter_config=AttackConverterConfig(
                request_converters=ConverterConfiguration.from_converters(converters=converter(name))),
            attack_scoring_config=AttackScoringConfig(objective_scorer=scorer))
        ok = errors = 0
        for objective in spec["objectives"]:
            try:
                result = await attack.execute_async(objective=objective)
            except Exception as exc:  # noqa: BLE001 - counted and shown, the run goes on
                errors += 1
                print(f"{name}: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
            ok += result.outcome == AttackOutcome.SUCCESS
        n = len(spec["objectives"]) - errors
        out[name] = {"attempts": n, "successes": ok, "asr": ok / n if n else None, "errors": errors}
    return out


def main() -> None:
    spec = json.loads(open(sys.argv[1]).read())
    result = asyncio.run(run(spec))
    with open(sys.argv[2], "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
