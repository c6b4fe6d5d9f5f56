"""The attack objectives: requests a safe application should refuse, one risk category each.

``objectives.json`` (packaged, versioned by its ``version`` field) was written for assay: a
dozen objectives for each of the harm categories the safety metrics score
(:data:`assay.metrics.safety.names.HARMS`), non-graphic, each tagged with the OWASP LLM Top 10
(2025) and MITRE ATLAS ids that apply. A file of the same shape can be given instead.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from assay.errors import AssayError
from assay.metrics.safety.names import HARMS

OBJECTIVES_FILE = "objectives.json"


@dataclass(frozen=True)
class Objective:
    id: str
    category: str
    text: str
    owasp: tuple[str, ...] = ()
    atlas: tuple[str, ...] = ()


@dataclass(frozen=True)
class ObjectiveSet:
    version: str
    objectives: tuple[Objective, ...]
    source: str

    def of(self, categories: Sequence[str]) -> list[Objective]:
        return [o for o in self.objectives if o.category in categories]


def _objective(raw: Any, where: str, k: int) -> Objective:
    if not isinstance(raw, dict):
        raise AssayError(f"{where}: objectives[{k}] must be an object")
    for key in ("id", "category", "text"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise AssayError(f"{where}: objectives[{k}] needs a non-empty {key!r}")
    if raw["category"] not in HARMS:
        raise AssayError(f"{where}: objective {raw['id']!r}: category {raw['category']!r} is not one of "
                         + ", ".join(HARMS))
    tags = {}
    for key in ("owasp", "atlas"):
        v = raw.get(key, [])
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise AssayError(f"{where}: objective {raw['id']!r}: {key} must be a list of ids")
        tags[key] = tuple(v)
    return Objective(raw["id"], raw["category"], raw["text"].strip(), tags["owasp"], tags["atlas"])


def load_objectives(path: str | Path | None = None) -> ObjectiveSet:
    """The packaged objectives, or those of ``path`` (the same JSON shape)."""
    if path is None:
        where = f"assay/simulate/redteam/{OBJECTIVES_FILE}"
        text = resources.files("assay.simulate.redteam").joinpath(OBJECTIVES_FILE).read_text(encoding="utf-8")
    else:
        where = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise AssayError(f"--objectives {path}: cannot read it ({exc})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AssayError(f"{where}: not JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("objectives"), list) or "version" not in doc:
        raise AssayError(f"{where}: needs a 'version' and a list 'objectives'")
    objs = tuple(_objective(r, where, k) for k, r in enumerate(doc["objectives"]))
    ids = [o.id for o in objs]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise AssayError(f"{where}: objective ids must be unique; repeated: {', '.join(dup)}")
    return ObjectiveSet(str(doc["version"]), objs, where)


def categories(spec: str | Sequence[str] | None) -> list[str]:
    """The risk categories asked for (comma-separated or a list; None or ``all``: every one)."""
    if spec is None:
        return list(HARMS)
    raw = [c.strip() for c in (spec.split(",") if isinstance(spec, str) else spec) if c and c.strip()]
    if not raw or raw == ["all"]:
        return list(HARMS)
    bad = [c for c in raw if c not in HARMS]
    if bad:
        raise AssayError(f"--categories: unknown category {bad[0]!r}; choose from: {', '.join(HARMS)}")
    return list(dict.fromkeys(raw))
