"""The built-in, versioned attack templates and jailbreak injections, and their seeded rendering.

``templates/attacks_v<N>.json`` holds *scenario frames* (how a request is put: a question, a
rewrite, a search ...) and *category slots* (what harmful thing is asked for, per harm
category). A template is one frame of one scenario for one category; its id is
``<scenario>/<category>/<frame>`` and it carries the set's version. Placeholders ``{name}``
are filled from the slot lists (frame, scenario, then category slots); a filled value may
itself hold placeholders, which are filled in turn. Every choice comes from a
:class:`random.Random` seeded with a string, so a rendering depends only on the seed and the
template (not on ``PYTHONHASHSEED``, the platform or the order of other renderings).

``templates/jailbreaks_v<N>.json`` holds the direct-attack (UPIA) prefixes and the pieces of
the indirect attacks (XPIA): benign documents with a spot for an injected instruction, the
injections, and the benign tasks a user asks about the document.

The texts are assay's own, written as generic, mild red-team probes.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from assay.errors import AssayError

TEMPLATES_DIR = Path(__file__).with_name("templates")
DEFAULT_VERSION = "1"

SCENARIOS: tuple[str, ...] = (
    "adv_qa", "adv_conversation", "adv_summarization", "adv_search", "adv_rewrite",
    "adv_content_gen_ungrounded", "adv_content_gen_grounded", "adv_protected_material",
)
HARM_CATEGORIES: tuple[str, ...] = ("hate_unfairness", "sexual", "violence", "self_harm")

_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
_MAX_DEPTH = 4


def seeded(*parts: Any) -> random.Random:
    """A generator seeded from ``parts`` (str seeds are hashed with SHA-512: stable everywhere)."""
    return random.Random("|".join(str(p) for p in parts))


def fill(text: str, slots: dict[str, Sequence[str]], rng: random.Random,
         chosen: dict[str, str] | None = None, *, what: str = "template") -> str:
    """Replace each ``{name}`` with a value drawn from ``slots[name]`` (the same value for every
    use of a name within one rendering; values may hold placeholders of their own)."""
    chosen = {} if chosen is None else chosen

    def one(text: str, depth: int) -> str:
        def sub(m: re.Match[str]) -> str:
            name = m.group(1)
            if name not in chosen:
                options = slots.get(name)
                if not options:
                    raise AssayError(f"{what}: placeholder {{{name}}} has no values")
                chosen[name] = "\x00pending"
                value = one(str(rng.choice(list(options))), depth + 1)
                chosen[name] = value
            elif chosen[name] == "\x00pending":
                raise AssayError(f"{what}: placeholder {{{name}}} refers to itself")
            return chosen[name]

        if depth > _MAX_DEPTH:
            raise AssayError(f"{what}: placeholders nested more than {_MAX_DEPTH} deep")
        return _PLACEHOLDER.sub(sub, text)

    return one(text, 0)


@dataclass(frozen=True)
class RenderedAttack:
    """One filled template: the first user message, the document handed to the target (if
    the scenario has one), the attacker's goal, and the parameters that were chosen."""

    template_id: str
    template_version: str
    scenario: str
    category: str
    text: str
    document: str | None
    goal: str
    params: dict[str, str]
    follow_ups: tuple[str, ...]
    turns: int


@dataclass(frozen=True)
class AttackTemplate:
    id: str
    version: str
    scenario: str
    category: str
    frame: str
    text: str
    context: str | None
    goal: str
    slots: dict[str, tuple[str, ...]] = field(repr=False)
    follow_ups: tuple[str, ...] = field(repr=False)
    turns: int = 1

    def render(self, rng: random.Random) -> RenderedAttack:
        chosen: dict[str, str] = {}
        text = fill(self.text, self.slots, rng, chosen, what=self.id)
        document = fill(self.context, self.slots, rng, chosen, what=self.id) if self.context else None
        params = {k: v for k, v in chosen.items()}
        return RenderedAttack(self.id, self.version, self.scenario, self.category, text, document,
                              self.goal, params, self.follow_ups, self.turns)


@dataclass(frozen=True)
class AttackSet:
    name: str
    version: str
    templates: tuple[AttackTemplate, ...]

    def select(self, scenarios: Iterable[str] | str, categories: Iterable[str] | None = None
               ) -> list[AttackTemplate]:
        """Templates for the scenarios and categories, in the file's order. Unknown names raise."""
        scen = [scenarios] if isinstance(scenarios, str) else list(scenarios)
        cats = list(HARM_CATEGORIES) if categories is None else list(categories)
        check_names(scen, SCENARIOS, "scenario")
        check_names(cats, HARM_CATEGORIES, "category")
        return [t for t in self.templates if t.scenario in scen and t.category in cats]


def check_names(given: Sequence[str], known: Sequence[str], what: str) -> None:
    if not given:
        raise AssayError(f"no {what} given; choose from {', '.join(known)}")
    for g in given:
        if g not in known:
            raise AssayError(f"unknown {what} {g!r}; choose from {', '.join(known)}")


def _read(path: Path, what: str) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AssayError(f"no {what} file at {path}") from None
    except (OSError, ValueError) as exc:
        raise AssayError(f"{path}: cannot read the {what}: {exc}") from None


def _path(kind: str, version: str | Path | None) -> Path:
    v = DEFAULT_VERSION if version is None else version
    if isinstance(v, Path) or str(v).endswith(".json"):
        return Path(v)
    return TEMPLATES_DIR / f"{kind}_v{str(v).lstrip('v')}.json"


@lru_cache(maxsize=8)
def _load_attacks(path: Path) -> AttackSet:
    data = _read(path, "attack templates")
    try:
        version = str(data["version"])
        cats, scens = data["categories"], data["scenarios"]
        templates = []
        for sname, scen in scens.items():
            for cname, cat in cats.items():
                slots: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in cat.get("slots", {}).items()}
                slots.update({k: tuple(v) for k, v in scen.get("slots", {}).items()})
                for frame in scen["frames"]:
                    fslots = dict(slots)
                    fslots.update({k: tuple(v) for k, v in frame.get("slots", {}).items()})
                    templates.append(AttackTemplate(
                        id=f"{sname}/{cname}/{frame['id']}", version=version, scenario=sname, category=cname,
                        frame=frame["id"], text=frame["text"], context=scen.get("context"), goal=cat["goal"],
                        slots=fslots, follow_ups=tuple(cat.get("follow_ups", ())), turns=int(scen.get("turns", 1))))
    except (KeyError, TypeError, AttributeError) as exc:
        raise AssayError(f"{path}: malformed attack template set ({type(exc).__name__}: {exc})") from None
    return AttackSet(name=str(data.get("name", path.stem)), version=version, templates=tuple(templates))


def load_attack_set(version: str | Path | None = None) -> AttackSet:
    """The attack templates: a built-in version (``"1"``) or a JSON file of the same layout."""
    return _load_attacks(_path("attacks", version))


@dataclass(frozen=True)
class Piece:
    id: str
    text: str
    title: str | None = None


@dataclass(frozen=True)
class JailbreakSet:
    name: str
    version: str
    prefixes: tuple[Piece, ...]
    xpia_tasks: tuple[Piece, ...]
    xpia_injections: tuple[Piece, ...]
    xpia_documents: tuple[Piece, ...]


@lru_cache(maxsize=8)
def _load_jailbreaks(path: Path) -> JailbreakSet:
    data = _read(path, "jailbreak set")
    try:
        x = data["xpia"]

        def pieces(items: list[dict[str, Any]]) -> tuple[Piece, ...]:
            return tuple(Piece(str(i["id"]), str(i["text"]), i.get("title")) for i in items)

        return JailbreakSet(name=str(data.get("name", path.stem)), version=str(data["version"]),
                            prefixes=pieces(data["prefixes"]), xpia_tasks=pieces(x["tasks"]),
                            xpia_injections=pieces(x["injections"]), xpia_documents=pieces(x["documents"]))
    except (KeyError, TypeError) as exc:
        raise AssayError(f"{path}: malformed jailbreak set ({type(exc).__name__}: {exc})") from None


def load_jailbreak_set(version: str | Path | None = None) -> JailbreakSet:
    """The jailbreak injections: a built-in version (``"1"``) or a JSON file of the same layout."""
    return _load_jailbreaks(_path("jailbreaks", version))
