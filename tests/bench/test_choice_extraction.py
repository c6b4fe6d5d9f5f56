"""Reading which choice a generated answer chose (multiple choice by generation, issue 28 item 4):
an echoed copy of the option list is not an answer, explicit statements win, and a text that names
several options without choosing one is no answer (unparsed), never A."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from assay.bench.quality.answers import CHOICE_INSTRUCTION, extract_choice
from assay.bench.quality.run import QualityConfig, choice_prompt, run_quality

CHOICES = ["Oxygen", "Carbon dioxide", "Nitrogen", "Helium"]
LISTING = "A. Oxygen\nB. Carbon dioxide\nC. Nitrogen\nD. Helium"
TASKS = Path(__file__).resolve().parents[2] / "examples" / "tasks"


@pytest.mark.parametrize("text", [
    LISTING,                                                        # the options repeated, nothing chosen
    "Question: Which gas do plants take in?\nAnswer:\n\n" + LISTING,  # the whole prompt echoed
    LISTING + "\n\n" + CHOICE_INSTRUCTION,                           # ... with the instruction
    "A) Oxygen B) Carbon dioxide C) Nitrogen D) Helium",           # the list on one line
    "(A) Oxygen\n(B) Carbon dioxide\n(C) Nitro",                    # cut short by max_tokens
    "A. Oxygen\nB. Carbon dioxide",                                  # a partial echo
    "A, B, C or D",                                                  # every letter, none chosen
    "It could be A or C.",                                           # two letters, no choice
    "(A) or (C), I am not sure",
    "Answer: A\nAnswer: C",                                          # two answers that disagree
    "The answer is a gas that plants need.",                         # "a" is a word, not option A
])
def test_text_that_chooses_nothing_is_no_answer(text: str) -> None:
    assert extract_choice(text, CHOICES) is None


@pytest.mark.parametrize("text,expected", [
    (LISTING + "\n\nAnswer: C", 2),                                  # echo, then an explicit answer
    (LISTING + "\nC", 2),                                            # echo, then a lone letter line
    (LISTING + "\n\nThe correct answer is (B).", 1),
    ("Question: Which gas?\n" + LISTING + "\n**B**", 1),
    (CHOICE_INSTRUCTION + "\nB", 1),                                 # the instruction echoed, then the letter
    ("**B. Carbon dioxide**", 1),                                    # markdown emphasis
    ("B. Carbon dioxide", 1),                                        # one option named with its letter
    ("C. Nitrogen, not A. Oxygen", 2),                               # two options, but not a listing
    ("Between A and C, the answer is C.", 2),
    ("Plants take in carbon dioxide.\n\nFinal answer: (B)", 1),
    ("I would say option D", 3),
    ("A", 0),
    ("Answer: A", 0),
    ("The answer is A. Oxygen", 0),
])
def test_an_explicit_answer_is_read_even_after_an_echo(text: str, expected: int) -> None:
    assert extract_choice(text, CHOICES) == expected


def test_the_prompt_ends_with_the_instruction_the_extractor_knows() -> None:
    prompt = choice_prompt("Question: Which gas?\nAnswer:", CHOICES)
    assert prompt.endswith(CHOICE_INSTRUCTION)
    assert LISTING in prompt


ECHO = '''
def echo(prompt: str) -> str:
    # a chat model that repeats the options it was shown instead of choosing one
    lines = [ln for ln in prompt.splitlines() if ln[:3] in ("A. ", "B. ", "C. ", "D. ")]
    return "\\n".join(lines[:4])
'''


def test_a_model_that_echoes_the_options_is_not_scored_as_choosing_a(tmp_path: Path, monkeypatch) -> None:
    name = f"qecho_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(ECHO)
    monkeypatch.syspath_prepend(str(tmp_path))
    r = asyncio.run(run_quality(QualityConfig(model=f"python:{name}:echo", tasks=str(TASKS / "science_mc.yaml")),
                                store=None))
    t = r.summary["tasks"]["science_mc"]
    # 3 of the 12 sample items have gold A: read as "A", the echo scored 25%
    assert t["metrics"]["acc"]["mean"] == 0.0
    assert t["unparsed"] == 12
    assert all(i["extracted"]["choice"] is None and i["unparsed"] for i in r.items)
