"""Human review in the store: queues of rows sampled from a run, and the labels reviewers give.

:meth:`ReviewLog.create` makes a named queue of a run's rows for one metric output, picked with a
fixed seed from one of three sources:

* ``random``: any row the output scored;
* ``disagreements``: rows where the output and another one (``against``: a rule, a second scorer)
  both gave a verdict and the verdicts differ;
* ``flaky``: rows whose repeats disagreed (``--repeats``; the score's ``verdict`` property is
  ``flaky``, :mod:`assay.results.repeats`).

A queue has a label scale: ``pass_fail`` (labels ``pass`` / ``fail``) or ``1-5``.
:meth:`ReviewLog.label` keeps one label per (queue, row, reviewer), with a note and when it was
given; a reviewer labelling a row again replaces the former label. :meth:`ReviewLog.items` gives
the queue's rows as a reviewer sees them (the row's text, the scorer's verdict and reason, the
labels so far) and :meth:`ReviewLog.units` the labels as a table of rows by raters for
:mod:`assay.results.agreement`, the judge (the run's scorer) optionally as one more rater.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
from sqlalchemy import delete, func, insert, select

from assay.errors import AssayError
from assay.records import CANONICAL_FIELDS
from assay.results import input_field
from assay.results.agreement import agreement
from assay.results.repeats import FLAKY
from assay.scores import Score
from assay.store import schema as S
from assay.store.store import Store

SOURCES = ("random", "disagreements", "flaky")
SCALES = ("pass_fail", "1-5")
JUDGE = "judge"     # the rater name of the run's own scorer in :meth:`ReviewLog.units`


def parse_label(value: Any, scale: str, where: str) -> str:
    """A label as stored: ``pass`` / ``fail`` on the pass/fail scale, ``"1"``..``"5"`` on 1-5."""
    text = str(value).strip().lower()
    if scale == "pass_fail":
        text = {"p": "pass", "f": "fail", "true": "pass", "false": "fail"}.get(text, text)
        if text in ("pass", "fail"):
            return text
        raise AssayError(f"{where}: label {value!r} is not pass or fail")
    if text in {"1", "2", "3", "4", "5"}:
        return text
    raise AssayError(f"{where}: label {value!r} is not a whole number from 1 to 5")


def label_value(text: str) -> str | int:
    """A stored label as a rating: ``pass`` / ``fail``, or the number 1-5."""
    return int(text) if text.isdigit() else text


def judge_label(score: Score | None, scale: str) -> str | int | None:
    """What the run's scorer said of a row on the queue's scale (None: no verdict)."""
    if score is None or score.status != "completed":
        return None
    if scale == "pass_fail":
        return None if score.passed is None else ("pass" if score.passed else "fail")
    if isinstance(score.score, (int, float)) and 1 <= score.score <= 5:
        return int(round(score.score))
    return None


def consensus(labels: list[str], scale: str) -> int | None:
    """The reviewers' verdict of a row as a judge-check label: 1 (good) or 0 (bad), None when
    they are split evenly. On the 1-5 scale a row is good at 4 or 5, bad at 1 or 2, and a 3 (or
    a tie) gives no label."""
    if scale == "1-5":
        labels = ["pass" if int(x) >= 4 else "fail" for x in labels if int(x) != 3]
    counts = Counter(labels)
    if not counts or counts["pass"] == counts["fail"]:
        return None
    return 1 if counts["pass"] > counts["fail"] else 0


@dataclass(frozen=True)
class ReviewRows:
    """A queue's labelled rows as ``judge check --data review:NAME`` reads them: each row's record
    fields, its ``id`` and its ``label`` (the reviewers' consensus); ``fingerprint`` changes
    whenever a label does."""

    name: str
    metric: str
    rows: list[dict[str, Any]]
    fingerprint: str

    def __str__(self) -> str:
        return f"review:{self.name}"


class ReviewLog:
    """Review queues and labels in a :class:`~assay.store.Store`."""

    def __init__(self, store: Store):
        self.store = store
        self.engine = store.engine

    # -- queues ----------------------------------------------------------------------------
    def create(self, name: str, run_ref: str, metric: str, *, sample: int = 50, source: str = "random",
               against: str | None = None, seed: int = 0, scale: str = "pass_fail") -> dict[str, Any]:
        """Make queue ``name`` of up to ``sample`` rows of run ``run_ref`` for ``metric``
        (``metric`` or ``metric.output``), picked from ``source`` with ``seed``."""
        name = str(name or "").strip()
        if not name:
            raise AssayError("the review queue needs a name")
        if len(name) > 200:
            raise AssayError(f"review queue name {name[:40]!r}...: at most 200 characters")
        if source not in SOURCES:
            raise AssayError(f"review queue {name}: --from {source!r} is not one of {', '.join(SOURCES)}")
        if scale not in SCALES:
            raise AssayError(f"review queue {name}: scale {scale!r} is not one of {', '.join(SCALES)}")
        if source == "disagreements" and not against:
            raise AssayError(f"review queue {name}: --from disagreements needs --against, the output to compare with")
        if sample < 1:
            raise AssayError(f"review queue {name}: --sample must be at least 1")
        if self._get(name) is not None:
            raise AssayError(f"review queue {name!r} already exists in the store at {self.store.display_url}")
        run = self.store.get_run(run_ref)
        m, o = self._output(run, metric)
        other = self._output(run, against) if against else None
        eligible = list(self._eligible(run["id"], (m, o), other, source))
        if not eligible:
            raise AssayError(f"review queue {name}: run {run['id'][:12]} has no {source} rows for {m}.{o}")
        rng = np.random.default_rng(seed)
        picked = sorted(int(i) for i in rng.choice(eligible, size=min(sample, len(eligible)), replace=False))
        row = {"name": name, "run_id": run["id"], "metric": m, "output": o, "source": source,
               "against": ".".join(other) if other else None, "seed": int(seed), "scale": scale,
               "idxs": orjson.dumps(picked).decode(), "created_at": time.time()}
        with self.engine.begin() as conn:
            conn.execute(insert(S.review_queues).values(**row))
        return self.queue(name)

    @staticmethod
    def _output(run: dict[str, Any], ref: str) -> tuple[str, str]:
        """``metric`` or ``metric.output`` of the run, checked against its layout."""
        layout = (run.get("config") or {}).get("layout") or []
        pairs = [(str(x[0]), str(out)) for x in layout if isinstance(x, (list, tuple)) and len(x) >= 2
                 for out in (x[1] if isinstance(x[1], (list, tuple)) else [x[1]])]
        m, _, o = str(ref).partition(".")
        found = [p for p in pairs if p[0] == m and (not o or p[1] == o)]
        if not found and pairs:
            names = ", ".join(sorted({f"{a}.{b}" for a, b in pairs}))
            raise AssayError(f"run {run['id'][:12]} has no metric output {ref!r}: it has {names}")
        if not found:
            return m, o or m
        return next((p for p in found if p[1] == m), found[0]) if not o else found[0]

    def _eligible(self, run_id: str, out: tuple[str, str], other: tuple[str, str] | None,
                  source: str) -> Iterator[int]:
        for r in self.store.iter_scored(run_id):
            s = r.scores.get(out[0], {}).get(out[1])
            if s is None or s.status != "completed":
                continue
            if source == "flaky" and (s.properties or {}).get("verdict") != FLAKY:
                continue
            if source == "disagreements":
                t = r.scores.get(other[0], {}).get(other[1]) if other else None
                if s.passed is None or t is None or t.passed is None or t.passed == s.passed:
                    continue
            yield r.idx

    def _get(self, name: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(S.review_queues).where(S.review_queues.c.name == name)).mappings().first()
        if row is None:
            return None
        q = dict(row)
        q["idxs"] = orjson.loads(q["idxs"])
        return q

    def queue(self, name: str) -> dict[str, Any]:
        """Queue ``name`` (its run, metric, output, source, scale and row positions)."""
        q = self._get(name)
        if q is None:
            raise AssayError(f"no review queue {name!r} in the store at {self.store.display_url} "
                             "(see `assay review list`)")
        return q

    def queues(self) -> list[dict[str, Any]]:
        """Every queue, newest first, with how many labels it has."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(S.review_queues).order_by(S.review_queues.c.created_at.desc())).mappings().all()
            lt = S.review_labels
            counts = dict(conn.execute(select(lt.c.queue, func.count()).group_by(lt.c.queue)).all())
        out = []
        for r in rows:
            q = dict(r)
            q["idxs"] = orjson.loads(q["idxs"])
            q["labels"] = counts.get(q["name"], 0)
            out.append(q)
        return out

    def delete(self, name: str) -> None:
        self.queue(name)
        with self.engine.begin() as conn:
            conn.execute(delete(S.review_labels).where(S.review_labels.c.queue == name))
            conn.execute(delete(S.review_queues).where(S.review_queues.c.name == name))

    # -- labels ----------------------------------------------------------------------------
    def label(self, name: str, idx: int, reviewer: str, value: Any, note: str | None = None,
              at: float | None = None) -> dict[str, Any]:
        """Reviewer ``reviewer``'s label of row ``idx`` of queue ``name`` (replacing their former one)."""
        q = self.queue(name)
        reviewer = str(reviewer or "").strip()
        if not reviewer:
            raise AssayError(f"review queue {name}: a label needs the reviewer's name")
        if int(idx) not in q["idxs"]:
            raise AssayError(f"review queue {name}: row {idx} is not in the queue")
        text = parse_label(value, q["scale"], f"review queue {name}, row {idx}")
        row_id = None
        for r in self.store.iter_scored(q["run_id"], start=int(idx), stop=int(idx) + 1):
            row_id = r.row_id
        row = {"queue": name, "idx": int(idx), "reviewer": reviewer[:100], "row_id": row_id, "value": text,
               "note": (note or None), "at": time.time() if at is None else float(at)}
        lt = S.review_labels
        with self.engine.begin() as conn:
            conn.execute(delete(lt).where(lt.c.queue == name, lt.c.idx == int(idx), lt.c.reviewer == row["reviewer"]))
            conn.execute(insert(lt).values(**row))
        return row

    def labels(self, name: str) -> list[dict[str, Any]]:
        """Every label of queue ``name``, by row then reviewer."""
        self.queue(name)
        lt = S.review_labels
        with self.engine.connect() as conn:
            rows = conn.execute(select(lt).where(lt.c.queue == name).order_by(lt.c.idx, lt.c.reviewer)).mappings().all()
        return [dict(r) for r in rows]

    def reviewers(self, name: str) -> list[str]:
        return sorted({lb["reviewer"] for lb in self.labels(name)})

    # -- reading ---------------------------------------------------------------------------
    def scores(self, q: dict[str, Any]) -> dict[int, tuple[Any, Score | None]]:
        """Row position -> (the stored row, the queue's output's score) for the queue's rows."""
        want = set(q["idxs"])
        out: dict[int, tuple[Any, Score | None]] = {}
        if not want:
            return out
        for r in self.store.iter_scored(q["run_id"], start=min(want), stop=max(want) + 1):
            if r.idx in want:
                out[r.idx] = (r, r.scores.get(q["metric"], {}).get(q["output"]))
        return out

    def items(self, name: str) -> list[dict[str, Any]]:
        """The queue's rows as a reviewer sees them: the row's inputs, the scorer's verdict and
        reason (and which scorer gave it), and the labels given so far."""
        q = self.queue(name)
        run = self.store.get_run(q["run_id"])
        by_row: dict[int, list[dict[str, Any]]] = {}
        for lb in self.labels(name):
            by_row.setdefault(lb["idx"], []).append(lb)
        got = self.scores(q)
        out = []
        for pos, idx in enumerate(q["idxs"]):
            row, s = got.get(idx, (None, None))
            props = (s.properties if s else None) or {}
            out.append({
                "position": pos, "idx": idx, "row_id": row.row_id if row else None,
                "inputs": row.inputs if row else {},
                "judge": {"scorer": props.get("scorer") or run.get("judge") or q["metric"],
                          "label": judge_label(s, q["scale"]), "score": s.score if s else None,
                          "passed": s.passed if s else None, "reason": s.reason if s else None,
                          "verdict": props.get("verdict")},
                "labels": by_row.get(idx, []),
            })
        return out

    def labelled_rows(self, name: str) -> ReviewRows:
        """The queue's rows that reviewers labelled, each with the reviewers' consensus as
        ``label`` (rows where they are split are left out), for ``judge check``."""
        q = self.queue(name)
        by_row: dict[int, list[str]] = {}
        for lb in self.labels(name):
            by_row.setdefault(lb["idx"], []).append(lb["value"])
        got = self.scores(q)
        rows = []
        for idx in q["idxs"]:
            label = consensus(by_row.get(idx, []), q["scale"])
            if label is None or idx not in got:
                continue
            stored = got[idx][0]
            row = {f: v for f in CANONICAL_FIELDS if (v := input_field(stored.inputs, f)) is not None}
            row.update(id=stored.row_id or str(idx), label=label)
            rows.append(row)
        if not rows:
            raise AssayError(f"review queue {name}: no row has a label the reviewers agree on yet "
                             "(label rows on the dashboard's /review page)")
        digest = hashlib.sha256(orjson.dumps(rows, option=orjson.OPT_SORT_KEYS, default=str)).hexdigest()
        return ReviewRows(name, q["metric"], rows, digest)

    def units(self, name: str, *, with_judge: bool = False) -> tuple[list[str], list[list[Any]], list[int]]:
        """The labels as a table for :mod:`assay.results.agreement`: (raters, one list of labels
        per labelled row in rater order with None where a rater gave none, the rows' positions).
        ``with_judge`` adds the run's scorer as the rater :data:`JUDGE` (first)."""
        q = self.queue(name)
        labels = self.labels(name)
        reviewers = sorted({lb["reviewer"] for lb in labels})
        table: dict[int, dict[str, Any]] = {}
        for lb in labels:
            table.setdefault(lb["idx"], {})[lb["reviewer"]] = label_value(lb["value"])
        raters = ([JUDGE] if with_judge else []) + reviewers
        if with_judge:
            for idx, (_, s) in self.scores(q).items():
                if idx in table:
                    table[idx][JUDGE] = judge_label(s, q["scale"])
        idxs = sorted(table)
        return raters, [[table[i].get(r) for r in raters] for i in idxs], idxs

    def agreement(self, name: str, *, seed: int = 0) -> dict[str, Any]:
        """The agreement figures of queue ``name`` (:mod:`assay.results.agreement`, each with its 95%
        bootstrap interval): between the reviewers (Cohen's kappa when there are two, Fleiss' kappa,
        Krippendorff's alpha, ordinal too on the 1-5 scale), the judge as one more rater with them,
        and the judge against each reviewer (Cohen's kappa)."""
        q = self.queue(name)
        raters, units, _ = self.units(name, with_judge=True)
        reviewers = raters[1:]
        people = [u[1:] for u in units]
        stats = ["fleiss_kappa", "alpha_nominal"] + (["alpha_ordinal"] if q["scale"] == "1-5" else [])
        between: dict[str, Any] = {}
        if len(reviewers) == 2:
            between["cohen_kappa"] = agreement(people, "cohen_kappa", seed=seed).as_dict()
        if len(reviewers) >= 2:
            between.update({s: agreement(people, s, seed=seed).as_dict() for s in stats})
        return {"queue": name, "run_id": q["run_id"], "metric": f"{q['metric']}.{q['output']}", "scale": q["scale"],
                "reviewers": reviewers, "judge": JUDGE,
                "labelled_rows": sum(1 for u in people if any(x is not None for x in u)),
                "between_reviewers": between,
                "judge_with_reviewers": {s: agreement(units, s, seed=seed).as_dict() for s in stats},
                "judge_vs_each": {r: agreement([[u[0], u[i + 1]] for u in units], "cohen_kappa", seed=seed).as_dict()
                                  for i, r in enumerate(reviewers)}}
