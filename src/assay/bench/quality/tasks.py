"""Quality-benchmark tasks: lm-evaluation-harness task YAML (and decorated Python functions) made into ``Task``.

A user's existing task file should run unchanged against local data, so the common fields are read with the
harness's own semantics: ``doc_to_text`` / ``doc_to_target`` / ``doc_to_choice`` may be a Jinja template, the
name of a field of the doc, an int or a list; ``include`` merges another file under the including file's keys;
``dataset_kwargs.data_files`` names local files per split. Prompts are built the way the harness builds them — the
description, then few-shot examples ("text + target_delimiter + target + fewshot_delimiter") drawn by one
``random.Random(seed)`` per task, in doc order, then the doc's own text — so a model sees the same prompt here as
there. ``!function`` hooks run only when the load is trusted (``--trust-task-code``,
:mod:`assay.bench.quality.taskcode`); what is present but not honoured (unknown keys, an untrusted
``process_docs``) is listed in ``Task.unsupported``; where a task cannot be run correctly without it, loading stops
with a ``TaskError`` that says so.

Templates run in Jinja's sandbox, and values from the data are only ever passed to templates as variables, never
compiled as templates themselves.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import importlib
import inspect
import json
import os
import random
import re
import stat
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from assay.bench.quality.answers import FilterPipeline, FilterStep
from assay.bench.quality.lmeval import AGGREGATIONS as LM_AGGREGATIONS
from assay.bench.quality.lmeval import DEFAULT_AGGREGATION, PERPLEXITY_METRICS, ROLLING_METRICS
from assay.bench.quality.patterns import Pattern, PatternTimeout, bounded
from assay.bench.quality.taskcode import TRUST_FLAG, FunctionRef, TaskCode, process_docs
from assay.errors import InputError

__all__ = ["Task", "TaskError", "TaskRef", "FunctionRef", "load_tasks", "read_config", "task"]

OUTPUT_TYPES = ("multiple_choice", "generate_until", "loglikelihood", "loglikelihood_rolling")
# assay's judge metrics a generation task may name (scored with --judge on the 1-5 scale)
JUDGED_METRICS = ("similarity", "groundedness", "coherence", "fluency", "relevance")
SUPPORTED_METRICS = ("exact_match", "acc", "acc_norm", "acc_mutual_info", "pass_at_k") + PERPLEXITY_METRICS + JUDGED_METRICS
DEFAULT_METRICS = {"multiple_choice": ["acc", "acc_norm"], "generate_until": ["exact_match"],
                   "loglikelihood": ["acc"], "loglikelihood_rolling": list(ROLLING_METRICS)}
# the metrics each output type can give without the task's own code (as lm-evaluation-harness computes them)
METRICS_OF = {"multiple_choice": ("acc", "acc_norm", "acc_mutual_info"), "loglikelihood": ("acc", "perplexity"),
              "loglikelihood_rolling": ROLLING_METRICS}
# Keys read and honoured.
KNOWN_KEYS = {"task", "include", "dataset_path", "dataset_name", "dataset_kwargs", "test_split", "validation_split",
              "training_split", "fewshot_split", "num_fewshot", "description", "doc_to_text", "doc_to_target",
              "doc_to_choice", "target_delimiter", "fewshot_delimiter", "output_type", "generation_kwargs",
              "filter_list", "metric_list", "repeats", "fewshot_config", "process_docs", "process_results"}
# Keys that change nothing about the items, the prompts or the scores.
HARMLESS_KEYS = {"tag", "group", "task_alias", "group_alias", "metadata", "should_decontaminate",
                 "doc_to_decontamination_query", "unsafe_code", "dataset_kwargs.trust_remote_code"}
# What a task file may be: its size, how far its YAML aliases may expand, how deep it may nest.
MAX_TASK_FILE_BYTES = 1 << 20
MAX_ALIAS_EXPANSION = 100_000     # values that aliases may add to a file beyond those written in it
MAX_YAML_DEPTH = 100
# Folders (os.pathsep-separated) besides the task's own from which an include may be read.
INCLUDE_ENV = "ASSAY_TASK_INCLUDE"
# Fields a decorated Python task may set.
PYTHON_FIELDS = {"output_type", "doc_to_text", "doc_to_target", "doc_to_choice", "description", "num_fewshot",
                 "target_delimiter", "fewshot_delimiter", "generation_kwargs", "filter_list", "metric_list",
                 "repeats", "fewshot_docs", "fewshot_config"}


class TaskError(InputError):
    """A task that cannot be loaded: one line naming the file, the line where known, and the field."""


@dataclass(frozen=True)
class TaskRef:
    """A task file with fields set over the file's own (a group's entry ``{task: NAME, num_fewshot: 25}``)."""

    path: Path
    overrides: tuple = ()      # (key, value) pairs

    @property
    def fields(self) -> dict:
        return dict(self.overrides)


class _Loader(yaml.SafeLoader):
    """Safe YAML plus the harness's ``!function`` tag, nested at most :data:`MAX_YAML_DEPTH` deep."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(None, None, f"the YAML is nested more than {MAX_YAML_DEPTH} "
                                                  f"levels deep", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _function_tag(loader: yaml.SafeLoader, node: yaml.Node) -> FunctionRef:
    # where the tag is written: lm-eval imports its module from beside that YAML file
    return FunctionRef(str(loader.construct_scalar(node)), getattr(loader, "yaml_file", ""),
                       node.start_mark.line + 1)


_Loader.add_constructor("!function", _function_tag)


def _label(value: Any, limit: int = 60) -> str:
    """A name from a task file (a key, a metric, a filter) as it may be shown: printable, at most ``limit``
    characters."""
    text = "".join(ch if ch.isprintable() else "?" for ch in str(value))
    return text if len(text) <= limit else text[:limit - 3] + "..."


# --------------------------------------------------------------------------------------------- templates
_ENV = None
_TEMPLATES: dict[str, Any] = {}


def _env():
    global _ENV
    if _ENV is None:
        from jinja2 import StrictUndefined
        from jinja2.sandbox import SandboxedEnvironment

        _ENV = SandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False)
        _ENV.filters["regex_replace"] = _regex_replace
    return _ENV


def _regex_replace(text: str, find: str, repl: str = "") -> str:
    """The harness's ``regex_replace`` template filter, with a time bound (a task file's regex)."""
    try:
        p = bounded(find, label="regex_replace")
    except ValueError as exc:
        raise ValueError(f"regex_replace: {exc}") from None
    return p.sub(repl, text)


def _render(template: str, doc: dict) -> str:
    compiled = _TEMPLATES.get(template)
    if compiled is None:
        compiled = _TEMPLATES[template] = _env().from_string(template)
    return compiled.render(**doc)


# --------------------------------------------------------------------------------------------- the Task
@dataclass
class Task:
    """One benchmark task, ready to run: its docs, how each becomes a prompt and a gold answer, and its scoring."""

    name: str
    output_type: str
    docs: list[dict]
    fewshot_docs: list[dict]
    num_fewshot: int
    target_delimiter: str
    fewshot_delimiter: str
    description: str
    generation_kwargs: dict
    filters: list[FilterPipeline]
    metrics: list[dict]
    repeats: int
    source: str
    task_hash: str
    data_hash: str
    data_files: list[str]
    unsupported: list[str]
    seed: int = 1234
    fewshot_same_split: bool = False      # the few-shot split is the test split: draw one more, drop the doc
    fewshot_sampler: str = "default"      # "default" (random.sample) or "first_n"
    text_spec: Any = None
    target_spec: Any = None
    choice_spec: Any = None
    fewshot_text_spec: Any = None
    fewshot_target_spec: Any = None
    fewshot_choice_spec: Any = None
    origin: dict = field(default_factory=dict, repr=False)     # field -> (file, line) for error messages
    process_results: Any = None           # the task's own scoring (a trusted !function): (doc, results) -> dict
    code_files: dict = field(default_factory=dict)     # the task's code files imported: path -> sha256
    program_with_prompt: bool = True      # code: the program is prompt + answer + tests (else answer + tests)
    config: dict = field(default_factory=dict, repr=False)   # the task file's fields as written (includes merged)
    total_docs: int | None = None         # the test split's docs before --limit
    _contexts: list[str] | None = field(default=None, repr=False)
    _prefixes: list[str] | None = field(default=None, repr=False)

    # ---- errors
    def _error(self, fieldname: str, message: str) -> TaskError:
        src, line = self.origin.get(fieldname, (self.source, None))
        return TaskError(f"task {self.name}: {message}", source=src, line=line, field=fieldname)

    # ---- lm-eval's doc_to_* semantics
    def _apply(self, spec: Any, doc: dict, fieldname: str) -> Any:  # noqa: C901
        if spec is None:
            raise self._error(fieldname, f"{fieldname} is required for output_type {self.output_type}")
        if callable(spec) and not isinstance(spec, str):
            return spec(doc)
        if isinstance(spec, bool) or isinstance(spec, (int, list)):
            return spec
        if isinstance(spec, dict) and fieldname.endswith("doc_to_choice"):
            return list(spec.values())
        if not isinstance(spec, str):
            raise self._error(fieldname, f"expected a template, a field name, an int or a list, "
                                         f"got {type(spec).__name__}")
        if spec in doc:
            return doc[spec]
        try:
            out = _render(spec, doc)
        except PatternTimeout as exc:
            raise self._error(fieldname, f"template: {exc.detail}") from None
        except Exception as exc:   # jinja2's UndefinedError, TemplateSyntaxError, SecurityError, ...
            hint = ""
            if "process_docs" in self.origin:
                hint = f" (the task pre-processes its docs with a !function process_docs, run only with {TRUST_FLAG}; " \
                       "or write the processed docs to the data file)"
            raise self._error(fieldname, f"template failed on a doc with keys {sorted(doc)[:12]}: "
                                         f"{type(exc).__name__}: {exc}{hint}") from None
        if fieldname.endswith("doc_to_choice"):
            try:
                value = ast.literal_eval(out)
            except (SyntaxError, ValueError):
                raise self._error(fieldname, f"the template must render a list literal, got {out[:80]!r}") from None
            if not isinstance(value, (list, tuple)):
                raise self._error(fieldname, f"the template must render a list literal, got {out[:80]!r}")
            return list(value)
        if out.isdigit() and self.choice_spec is not None:
            return ast.literal_eval(out)
        if fieldname.endswith("doc_to_target") and len(out) >= 2 and out[0] == "[" and out[-1] == "]":
            try:
                return ast.literal_eval(out)
            except (SyntaxError, ValueError):
                return out
        return out

    def _text_raw(self, doc: dict, fewshot: bool = False) -> Any:
        spec = self.fewshot_text_spec if fewshot and self.fewshot_text_spec is not None else self.text_spec
        return self._apply(spec, doc, "doc_to_text")

    def _target_raw(self, doc: dict, fewshot: bool = False) -> Any:
        spec = self.fewshot_target_spec if fewshot and self.fewshot_target_spec is not None else self.target_spec
        return self._apply(spec, doc, "doc_to_target")

    def _choices(self, doc: dict, fewshot: bool = False) -> list[str]:
        spec = self.fewshot_choice_spec if fewshot and self.fewshot_choice_spec is not None else self.choice_spec
        value = self._apply(spec, doc, "doc_to_choice")
        if not isinstance(value, (list, tuple)):
            raise self._error("doc_to_choice", f"must give a list of choices, got {type(value).__name__}")
        return [str(c) for c in value]

    def doc_to_text(self, doc: dict) -> str:
        raw = self._text_raw(doc)
        return self._text_str(raw, doc, False)

    def _text_str(self, raw: Any, doc: dict, fewshot: bool) -> str:
        if isinstance(raw, str):
            return raw
        if isinstance(raw, int) and not isinstance(raw, bool):
            if self.choice_spec is not None:
                return self._choices(doc, fewshot)[raw]
            return str(raw)
        raise self._error("doc_to_text", f"gives a {type(raw).__name__}: doc_to_text must give the prompt's text, "
                                         f"or (several inputs per doc, as Winogrande's) the index of the right one "
                                         f"of the contexts doc_to_choice gives")

    def doc_to_target(self, doc: dict) -> str | int | list:
        return self._target_raw(doc)

    def doc_to_choice(self, doc: dict) -> list[str]:
        return self._choices(doc)

    def target_text(self, doc: dict) -> str:
        """The gold answer as text: the choice's text for an index, the first of several targets."""
        t = self.doc_to_target(doc)
        if isinstance(t, (list, tuple)):
            t = t[0] if t else ""
        if isinstance(t, int) and not isinstance(t, bool) and self.choice_spec is not None:
            choices = self.doc_to_choice(doc)
            return choices[t] if 0 <= t < len(choices) else str(t)
        return str(t)

    def targets(self, doc: dict) -> list[str]:
        """Every acceptable gold text (a list target gives several; scoring takes the best)."""
        t = self.doc_to_target(doc)
        items = list(t) if isinstance(t, (list, tuple)) else [t]
        choices = self.doc_to_choice(doc) if self.choice_spec is not None else None
        return [choices[x] if choices is not None and isinstance(x, int) and 0 <= x < len(choices) else str(x)
                for x in items]

    def gold_index(self, doc: dict) -> int | list[int]:
        """For multiple choice: the index of the gold choice (several for a list target); -1 where the target
        names no choice (scored wrong, as the harness does)."""
        choices = self.doc_to_choice(doc)
        if self.multiple_input(doc):     # the harness's gold for several inputs: doc_to_text's index
            g = self._text_raw(doc)
            return g if 0 <= g < len(choices) else -1

        def one(t: Any) -> int:
            if isinstance(t, int) and not isinstance(t, bool):
                return t if 0 <= t < len(choices) else -1
            t = str(t)
            return choices.index(t) if t in choices else -1

        t = self.doc_to_target(doc)
        if isinstance(t, (list, tuple)):
            return [one(x) for x in t]
        return one(t)

    def multiple_input(self, doc: dict) -> bool:
        """Whether ``doc`` has several inputs (lm-evaluation-harness's partial evaluation, Winogrande): a
        multiple_choice task whose ``doc_to_text`` gives an int, the index of the right one of the contexts that
        ``doc_to_choice`` gives; each context is scored with the same continuation (``doc_to_target``)."""
        if self.output_type != "multiple_choice" or self.choice_spec is None:
            return False
        raw = self._text_raw(doc)
        return isinstance(raw, int) and not isinstance(raw, bool)

    def choice_contexts(self, i: int) -> list[str]:
        """For a multiple-input doc: one full prompt per choice (the description and few-shot examples, then
        the choice's context), as the harness's ``multiple_input_context`` builds them."""
        if self._prefixes is None:
            self._contexts = self._build_contexts()
        assert self._prefixes is not None
        return [self._prefixes[i] + c for c in self.doc_to_choice(self.docs[i])]

    def continuations(self, doc: dict) -> list[str]:
        """What log-likelihood scoring measures after ``context``, as lm-evaluation-harness 0.4.x sends it:
        for multiple_choice, ``target_delimiter`` + each choice (for a multiple-input doc, ``target_delimiter`` +
        ``doc_to_target``, once, after each of :meth:`choice_contexts`); for loglikelihood, the target exactly
        as ``doc_to_target`` gives it, with no delimiter added (lambada's target carries its own leading
        space)."""
        if self.multiple_input(doc):
            return [self.target_delimiter + str(self.doc_to_target(doc))]
        if self.output_type == "multiple_choice":
            return [self.target_delimiter + c for c in self.doc_to_choice(doc)]
        return [self.target_text(doc)]

    def document(self, doc: dict) -> str:
        """For ``loglikelihood_rolling``: the whole text scored, ``doc_to_target`` alone (no prompt, no delimiter),
        as lm-evaluation-harness sends it; its words and bytes weigh the perplexities."""
        return self.target_text(doc)

    def program(self, i: int, completion: str) -> str:
        """For code tasks: the program the sandbox runs, as lm-evaluation-harness's ``code_eval`` builds it
        (prediction + newline + the target's tests). The prediction is the prompt and the completion for a
        HumanEval-style task (its ``build_predictions`` filter prepends the prompt, and assay's own code tasks work
        so), the completion alone for an MBPP-style one (a prose prompt, a ``pass_at_1`` metric function)."""
        head = self.context(i) + completion if self.program_with_prompt else completion
        return head + "\n" + self.target_text(self.docs[i])

    @property
    def program_assembly(self) -> str:
        return "prompt + answer + tests" if self.program_with_prompt else "answer + tests"

    @property
    def is_code(self) -> bool:
        return any(m.get("metric") == "pass_at_k" for m in self.metrics)

    # ---- prompts
    def _example(self, doc: dict) -> str:
        text = self._text_raw(doc, fewshot=True)
        target = self._target_raw(doc, fewshot=True)
        out = text if isinstance(text, str) else self._text_str(text, doc, True)
        if target != "":
            out += self.target_delimiter
            if isinstance(target, (list, tuple)):
                out += str(target[0]) if target else ""
            elif isinstance(target, str) or self.choice_spec is None:
                out += str(target)
            else:
                out += str(self._choices(doc, fewshot=True)[target])
            out += self.fewshot_delimiter
        return out

    def _description(self, doc: dict) -> str:
        d = self.description
        if not d:
            return ""
        if callable(d):
            return str(d(doc))
        try:
            return _render(d, doc)
        except PatternTimeout as exc:
            raise self._error("description", f"template: {exc.detail}") from None
        except Exception as exc:
            raise self._error("description", f"template failed: {type(exc).__name__}: {exc}") from None

    def _build_contexts(self) -> list[str]:
        rnd = random.Random(self.seed)
        k = self.num_fewshot
        n_draw = k + 1 if self.fewshot_same_split else k
        if k > 0 and n_draw > len(self.fewshot_docs):
            raise self._error("num_fewshot", f"{k} few-shot examples asked for, but the few-shot split has "
                                             f"{len(self.fewshot_docs)} docs")
        out = []
        self._prefixes = []
        for doc in self.docs:
            prompt = self._description(doc)
            if k > 0:
                drawn = (self.fewshot_docs[:n_draw] if self.fewshot_sampler == "first_n"
                         else rnd.sample(self.fewshot_docs, n_draw))
                chosen = [x for x in drawn if x != doc][:k]
                prompt += "".join(self._example(x) for x in chosen)
            self._prefixes.append(prompt)
            prompt += self.doc_to_text(doc)
            out.append(prompt)
        return out

    def context(self, i: int) -> str:
        """The full prompt for ``docs[i]``. All prompts are built together, in doc order, on first use, so the
        few-shot draws (and so every prompt) are the same whichever item is asked for first."""
        if self._contexts is None:
            self._contexts = self._build_contexts()
        return self._contexts[i]

    def contexts(self) -> list[str]:
        if self._contexts is None:
            self._contexts = self._build_contexts()
        return list(self._contexts)


# --------------------------------------------------------------------------------------------- YAML reading
def _read_bytes(path: Path) -> bytes:
    """The bytes of the task file ``path``: a regular file (never a device or a pipe, which could be endless or
    block) of at most :data:`MAX_TASK_FILE_BYTES`."""
    src = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))   # a pipe opens without waiting
    except FileNotFoundError:
        raise TaskError("task file not found", source=src) from None
    except OSError as exc:
        raise TaskError(f"cannot read the task file: {exc.strerror or exc}", source=src) from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise TaskError("not a regular file (a task file is a YAML file)", source=src)
        data = fh.read(MAX_TASK_FILE_BYTES + 1)
    if len(data) > MAX_TASK_FILE_BYTES:
        raise TaskError(f"larger than {MAX_TASK_FILE_BYTES} bytes, too large for a task file", source=src)
    return data


def _node_children(node: yaml.Node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_aliases(root: yaml.Node, src: str) -> None:
    """Refuse a document whose aliases make it refer to itself, or expand it (as anything that walks the loaded
    values sees it: hashing, printing) by more than :data:`MAX_ALIAS_EXPANSION` values: a "billion laughs" of
    nine lines is a billion strings. One walk over the distinct nodes, without recursion."""
    size: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, closing = stack.pop()
        key = id(node)
        if closing:
            open_.discard(key)
            size[key] = min(1 + sum(size[id(c)] for c in _node_children(node)), 1 << 62)
            continue
        if key in size:
            continue
        if key in open_:
            raise TaskError("a YAML alias refers to itself (the value it names contains the alias)", source=src,
                            line=node.start_mark.line + 1)
        open_.add(key)
        stack.append((node, True))
        for child in _node_children(node):
            if id(child) in open_:
                raise TaskError("a YAML alias refers to itself (the value it names contains the alias)",
                                source=src, line=child.start_mark.line + 1)
            if id(child) not in size:
                stack.append((child, False))
    if size[id(root)] - len(size) > MAX_ALIAS_EXPANSION:
        raise TaskError(f"the YAML's aliases expand it by more than {MAX_ALIAS_EXPANSION:,} values (a 'billion "
                        f"laughs'); write the values out", source=src)


def _read_yaml(path: Path) -> tuple[dict, dict]:
    """The mapping in ``path`` and, for each top-level key, (file, line)."""
    raw = _read_bytes(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(f"cannot read the task file: {exc}", source=str(path)) from None
    try:
        loader = _Loader(text)
        loader.yaml_file = str(path)
        try:
            node = loader.get_single_node()
            if node is not None:
                _check_aliases(node, str(path))
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        msg = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        raise TaskError(f"invalid YAML: {msg}", source=str(path), line=line) from None
    except yaml.YAMLError as exc:
        raise TaskError(f"invalid YAML: {' '.join(str(exc).split())}", source=str(path)) from None
    if not isinstance(data, dict):
        raise TaskError("a task file must hold a mapping of fields", source=str(path), line=1)
    origin = {}
    for key_node, _ in node.value:
        if isinstance(key_node, yaml.ScalarNode):
            origin[str(key_node.value)] = (str(path), key_node.start_mark.line + 1)
    return data, origin


def _include_roots(path: Path, include_dirs: Sequence[str | Path] = ()) -> tuple[Path, ...]:
    """Where the includes of the task file ``path`` may be read from: its own folder, the folders named by
    ``include_dirs`` and by ``$ASSAY_TASK_INCLUDE``; every one resolved (symbolic links followed)."""
    named = [*include_dirs, *(p for p in os.environ.get(INCLUDE_ENV, "").split(os.pathsep) if p.strip())]
    return tuple(dict.fromkeys(Path(os.path.realpath(p)) for p in (path.parent, *map(Path, named))))


def _include_target(path: Path, inc: str, line: int | None, roots: tuple[Path, ...]) -> Path:
    """The file that ``include: inc`` in ``path`` names, once it is known to be a regular file of a sensible size
    inside one of ``roots`` (after following every symbolic link)."""
    shown = inc if len(inc) <= 120 else inc[:117] + "..."

    def refuse(message: str) -> TaskError:
        return TaskError(f"include {shown!r}: {message}", source=str(path), line=line, field="include")

    target = Path(os.path.realpath(path.parent / Path(inc).expanduser()))
    if not any(target == r or target.is_relative_to(r) for r in roots):
        raise refuse(f"outside the task's folder {roots[0]}; to allow it, name its folder (load_tasks's "
                     f"include_dirs, or ${INCLUDE_ENV})")
    try:
        st = target.stat()
    except FileNotFoundError:
        raise refuse(f"not found (looked in {path.parent})") from None
    except OSError as exc:
        raise refuse(f"cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise refuse("not a regular file")
    if st.st_size > MAX_TASK_FILE_BYTES:
        raise refuse(f"larger than {MAX_TASK_FILE_BYTES} bytes, too large for a task file")
    return target


def _resolve(path: Path, seen: tuple = (), roots: tuple[Path, ...] | None = None) -> tuple[dict, dict]:
    """The task's mapping with ``include`` resolved: the included file's keys, overridden by this file's. An
    include is read only from ``roots`` (default: the task file's folder; see :func:`_include_roots`)."""
    key = path.resolve()
    if key in seen:
        raise TaskError("include loop: " + " -> ".join(str(p) for p in (*seen, key)), source=str(path),
                        field="include")
    if roots is None:
        roots = _include_roots(path)
    data, origin = _read_yaml(path)
    inc = data.pop("include", None)
    if inc is None:
        return data, origin
    line = origin.get("include", (None, None))[1]
    names = inc if isinstance(inc, list) else [inc]
    if not names or not all(isinstance(n, str) for n in names):
        raise TaskError("include must be a file name or a list of them", source=str(path), line=line,
                        field="include")
    base: dict = {}
    base_origin: dict = {}
    for name in names:      # as the harness merges them: a later include over an earlier one, this file over all
        got, got_origin = _resolve(_include_target(path, name, line, roots), (*seen, key), roots)
        got.pop("task_list", None)
        base.update(got)
        base_origin.update(got_origin)
    base.update(data)
    base_origin.update(origin)
    return base, base_origin


def read_config(path: Path, include_dirs: Sequence[str | Path] = ()) -> dict:
    """A task (or group) file's mapping with its ``include`` resolved, read with the same bounds as a task file;
    ``!function`` tags are left as :class:`FunctionRef` (nothing is imported)."""
    return _resolve(path, roots=_include_roots(path, include_dirs))[0]


def _canonical(value: Any) -> Any:
    if isinstance(value, FunctionRef):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if callable(value):
        try:
            return inspect.getsource(value)
        except (OSError, TypeError):
            return getattr(value, "__qualname__", repr(value))
    return value


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(_canonical(obj), sort_keys=True, default=str,
                                     ensure_ascii=False).encode()).hexdigest()


# --------------------------------------------------------------------------------------------- data
def _read_data_file(path: Path, split: str, fieldname: str) -> list[dict]:  # noqa: C901
    name = path.name.lower()
    src = str(path)
    try:
        regular = stat.S_ISREG(path.stat().st_mode)
    except OSError:
        regular = True          # not found or unreadable: said below, as it was
    if not regular:             # a device or a pipe could be endless, or block
        raise TaskError("not a regular file", source=src, field=fieldname)
    try:
        if name.endswith((".jsonl", ".jsonl.gz", ".ndjson")):
            opener = gzip.open if name.endswith(".gz") else open
            docs = []
            with opener(path, "rt", encoding="utf-8") as fh:
                for n, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    try:
                        docs.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise TaskError(f"not valid JSON: {exc.msg}", source=src, line=n) from None
        elif name.endswith((".json", ".json.gz")):
            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rt", encoding="utf-8") as fh:
                try:
                    data = json.load(fh)
                except json.JSONDecodeError as exc:
                    raise TaskError(f"not valid JSON: {exc.msg}", source=src, line=exc.lineno) from None
            if isinstance(data, dict):
                if isinstance(data.get(split), list):
                    data = data[split]
                else:
                    raise TaskError(f"a JSON object must map the split {split!r} to a list of docs "
                                    f"(keys: {sorted(data)[:8]})", source=src)
            docs = data
        elif name.endswith((".csv", ".tsv")):
            import pandas as pd

            frame = pd.read_csv(path, sep="\t" if name.endswith(".tsv") else ",")
            docs = json.loads(frame.to_json(orient="records", force_ascii=False))
        elif name.endswith(".parquet"):
            import pyarrow.parquet as pq

            docs = pq.read_table(path).to_pylist()
        else:
            raise TaskError("unknown data format (use .jsonl, .json, .csv or .parquet)", source=src,
                            field=fieldname)
    except TaskError:
        raise
    except FileNotFoundError:
        raise TaskError("data file not found", source=src, field=fieldname) from None
    except Exception as exc:   # pandas / pyarrow parse errors, unreadable files
        raise TaskError(f"cannot read the data: {type(exc).__name__}: {exc}", source=src) from None
    if not isinstance(docs, list):
        raise TaskError("expected a list of docs", source=src)
    for i, d in enumerate(docs):
        if not isinstance(d, dict):
            raise TaskError(f"doc {i + 1} is a {type(d).__name__}, not an object", source=src,
                            line=i + 1 if name.endswith((".jsonl", ".ndjson")) else None)
    return docs


class _Data:
    """The docs of a YAML task's splits: from ``dataset_kwargs.data_files`` or the hub through ``datasets``."""

    def __init__(self, path: Path, cfg: dict, origin: dict, name: str):
        self.path, self.cfg, self.origin, self.name = path, cfg, origin, name
        self.files: list[str] = []
        self.file_hash = hashlib.sha256()
        self._cache: dict[str, list[dict]] = {}
        kwargs = cfg.get("dataset_kwargs") or {}
        if not isinstance(kwargs, dict):
            raise self.error("dataset_kwargs", "must be a mapping")
        self.data_files = kwargs.get("data_files")
        self.hub_kwargs = {k: v for k, v in kwargs.items() if k not in ("data_files", "trust_remote_code")}
        self._hub = None
        self.wanted: list[str] = []     # every split the task will read, for the offline message
        self.hooks: list[str] = []      # the task's !function fields, for the offline message

    def error(self, fieldname: str, message: str) -> TaskError:
        key = fieldname.split(".")[0]
        src, line = self.origin.get(key, (str(self.path), None))
        return TaskError(message, source=src, line=line, field=fieldname)

    def _paths(self, spec: Any) -> list[Path]:
        specs = [spec] if isinstance(spec, str) else spec
        if not isinstance(specs, list) or not all(isinstance(s, str) for s in specs):
            raise self.error("dataset_kwargs.data_files", "must be a file, a list of files, or split: file(s)")
        out = []
        for s in specs:
            p = Path(s).expanduser()
            if any(ch in s for ch in "*?["):
                base = p.parent if p.is_absolute() else self.path.parent / p.parent
                found = sorted(base.glob(p.name))
                if not found:
                    raise self.error("dataset_kwargs.data_files", f"no file matches {s} (in {base})")
                out.extend(found)
                continue
            if not p.is_absolute():
                near = self.path.parent / p
                p = near if near.exists() or not (Path.cwd() / p).exists() else Path.cwd() / p
            if not p.exists():
                raise self.error("dataset_kwargs.data_files", f"data file {s} not found (looked in "
                                                              f"{self.path.parent})")
            out.append(p)
        return out

    def has_split(self, split: str) -> bool:
        if self.data_files is not None:
            return not isinstance(self.data_files, dict) or split in self.data_files
        return True

    def split(self, split: str) -> list[dict]:
        """The docs of ``split`` (read once; later calls give the same list)."""
        if split not in self._cache:
            self._cache[split] = self._read_split(split)
        return self._cache[split]

    def _read_split(self, split: str) -> list[dict]:
        if self.data_files is not None:
            spec = self.data_files
            if isinstance(spec, dict):
                if split not in spec:
                    raise self.error("dataset_kwargs.data_files", f"task {self.name}: no file for the split "
                                     f"{split!r} (add '{split}: FILE' under data_files; it has "
                                     f"{', '.join(map(str, spec))})")
                spec = spec[split]
            docs = []
            for p in self._paths(spec):
                docs.extend(_read_data_file(p, split, "dataset_kwargs.data_files"))
                self.files.append(str(p))
                self.file_hash.update(p.read_bytes())
            return docs
        return self._hub_split(split)

    def _offline_steps(self, dataset: str, split: str, why: str) -> str:
        """The hub dataset, why it cannot be read, and every step that runs the task offline: save each split
        the task reads as JSON lines beside the YAML, name them in ``data_files``, and (when the task has
        ``!function`` hooks, which then run on those files as on the hub's data) the trust flag."""
        sub = self.cfg.get("dataset_name")
        stem = dataset.replace("/", "_") + (f"_{sub}" if sub else "")
        splits = list(dict.fromkeys([split, *self.wanted]))
        files = ", ".join(f"{sp}: {stem}_{sp}.jsonl" for sp in splits)
        args = ", ".join([repr(dataset), *([repr(sub)] if sub else []),
                          *(f"{k}={v!r}" for k, v in self.hub_kwargs.items())])
        save = (f"python -c \"import datasets; d = datasets.load_dataset({args}); "
                f"[d[s].to_json(f'{self.path.parent}/{stem}_{{s}}.jsonl') for s in {splits!r}]\"")
        steps = [f"(1) with network and pip install datasets: {save}",
                 f"(2) add to the YAML: dataset_kwargs: {{data_files: {{{files}}}}}"]
        if self.hooks:
            steps.append(f"(3) run with {TRUST_FLAG}: its {', '.join(self.hooks)} "
                         f"{'is' if len(self.hooks) == 1 else 'are'} task code, applied to the files as to the "
                         f"hub's data")
        label = dataset + (f" ({sub})" if sub else "")
        return f"{label} and {why}; to run it offline, {'; '.join(steps)}"

    def _hub_split(self, split: str) -> list[dict]:
        dataset = self.cfg.get("dataset_path")
        if not dataset:
            raise self.error("dataset_path", f"task {self.name}: no data: set dataset_path, or add "
                             f"dataset_kwargs: {{data_files: {{{split}: PATH}}}}")
        offline = os.environ.get("HF_DATASETS_OFFLINE", "").strip().lower() not in ("", "0", "false", "no")
        import importlib.util

        have = importlib.util.find_spec("datasets") is not None
        if offline or not have:
            why = "HF_DATASETS_OFFLINE is set" if offline else \
                "the 'datasets' package is not installed (with network: pip install 'assay[datasets]')"
            src, line = self.origin.get("dataset_path", (str(self.path), None))
            # name the task file the user gave, even when dataset_path comes from an included file
            raise TaskError(f"task {self.name} reads the hub dataset {self._offline_steps(str(dataset), split, why)}",
                            source=str(self.path), line=line if Path(src).resolve() == self.path.resolve() else None,
                            field="dataset_path")
        if self._hub is None:
            import datasets

            try:
                self._hub = datasets.load_dataset(dataset, self.cfg.get("dataset_name"), **self.hub_kwargs)
            except Exception as exc:
                raise self.error("dataset_path", f"task {self.name}: loading {dataset} from the hub failed: "
                                 f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}") from None
        if split not in self._hub:
            raise self.error("test_split", f"task {self.name}: the hub dataset {dataset} has no split {split!r} "
                             f"(it has {', '.join(self._hub)})")
        docs = [dict(d) for d in self._hub[split]]
        self.files.append(f"hf:{dataset}" + (f"/{self.cfg.get('dataset_name')}" if self.cfg.get("dataset_name")
                                               else "") + f":{split}")
        self.file_hash.update(json.dumps(docs, sort_keys=True, default=str).encode())
        return docs


# --------------------------------------------------------------------------------------------- building
def _pattern(value: Any, err: Callable, fieldname: str, label: str) -> Pattern:
    """A regex of the task file, compiled, that names where it came from when it runs out of time."""
    where = err(fieldname, "")
    try:
        return bounded(value, source=where.source, line=where.line, field=fieldname, label=label)
    except ValueError as exc:
        raise err(fieldname, f"{label}: {exc}") from None


AGGREGATIONS = ("mean", "median", *LM_AGGREGATIONS)


def _aggregation(entry: dict, m: str, err: Callable) -> None:
    """A metric's ``aggregation``, set on ``entry``: the harness's default for the metric (``mean``, or the
    perplexity family's own), ``median``, ``perplexity``, ``weighted_perplexity``, ``bits_per_byte``, or the
    task's own function."""
    agg = entry.setdefault("aggregation", DEFAULT_AGGREGATION.get(m, "mean"))
    if callable(agg):
        return
    if agg not in AGGREGATIONS:
        raise err("metric_list", f"metric {_label(m)}: aggregation {_label(agg)!r} is not supported "
                                 f"({', '.join(AGGREGATIONS)}, or a !function with {TRUST_FLAG})")


def _metric_entries(cfg: dict, output_type: str, err: Callable, unsupported: list[str]) -> list[dict]:  # noqa: C901
    raw = cfg.get("metric_list")
    hooked = callable(cfg.get("process_results"))
    if raw is None:
        raw = list(DEFAULT_METRICS[output_type])
    if not isinstance(raw, list):
        raise err("metric_list", "must be a list of {metric: NAME, ...}")
    out = []
    for entry in raw:
        if isinstance(entry, str):
            entry = {"metric": entry}
        if not isinstance(entry, dict) or "metric" not in entry:
            raise err("metric_list", "each entry needs a 'metric'")
        m = entry["metric"]
        entry = dict(entry)
        if isinstance(m, FunctionRef):
            if m.function_name in ("pass_at_k", "pass_at_1"):
                entry["fn_name"] = m.function_name      # lm-eval names pass_at_1's value "pass_at_1"
                m = "pass_at_k"
            else:
                unsupported.append(f"metric {_label(m)} (custom metric code is not run)")
                continue
        if callable(m):    # the task's own metric (trusted code): fn(references=[...], predictions=[...])
            if output_type != "generate_until" or hooked:
                raise err("metric_list", f"metric {_label(getattr(m, '__name__', m))}: a metric function scores "
                                         f"generate_until answers (use process_results otherwise)")
            name = str(getattr(m, "__name__", "metric"))
            _aggregation(entry, name, err)
            out.append({**entry, "metric": name, "fn": m})
            continue
        m = str(m)
        if hooked:         # process_results gives the values; the list names them and their aggregation
            _aggregation(entry, m, err)
            out.append({**entry, "metric": m, "hook": True})
            continue
        if m in ("pass@k", "pass_at_k") or re.fullmatch(r"pass@\d+", m):
            if m.startswith("pass@") and m != "pass@k" and "k" not in entry:
                entry["k"] = [int(m[5:])]
            m = "pass_at_k"
        if m == "pass_at_k":
            k = entry.get("k", [1])
            k = [k] if isinstance(k, int) else k
            if not isinstance(k, list) or not k or not all(isinstance(x, int) and x >= 1 for x in k):
                raise err("metric_list", "pass_at_k's k must be a positive int or a list of them")
            entry["k"] = list(k)
        if m not in SUPPORTED_METRICS:
            unsupported.append(f"metric {_label(m)} (not computed; supported: {', '.join(SUPPORTED_METRICS)})")
            continue
        if (m in (*PERPLEXITY_METRICS, "acc_mutual_info") or output_type == "loglikelihood_rolling") \
                and m not in METRICS_OF.get(output_type, ()):
            unsupported.append(f"metric {_label(m)} (not given by output_type {output_type})")
            continue
        entry["metric"] = m
        if m in PERPLEXITY_METRICS:
            _aggregation(entry, m, err)
        if "regexes_to_ignore" in entry:
            rxs = entry["regexes_to_ignore"]
            rxs = [rxs] if isinstance(rxs, str) else rxs
            if not isinstance(rxs, list):
                raise err("metric_list", "regexes_to_ignore must be a regex or a list of them")
            entry["regexes_to_ignore"] = [_pattern(rx, err, "metric_list", f"metric {m}: regexes_to_ignore")
                                          for rx in rxs]
        out.append(entry)
    if not out:
        raise err("metric_list", f"none of the task's metrics can be computed (supported: "
                                 f"{', '.join(SUPPORTED_METRICS)})")
    return out


def _filters(cfg: dict, is_code: bool, err: Callable, unsupported: list[str]) -> list[FilterPipeline]:
    raw = cfg.get("filter_list")
    if raw is None:
        return [FilterPipeline("none", [FilterStep("take_first")])]
    if not isinstance(raw, list):
        raise err("filter_list", "must be a list of {name: ..., filter: [...]}")
    out = []
    for entry in raw:
        steps = entry.get("filter") if isinstance(entry, dict) else None
        name = str(entry.get("name", "none")) if isinstance(entry, dict) else "?"
        if isinstance(steps, list) and any(isinstance(st, dict) and callable(st.get("filter_fn")) for st in steps):
            # the task's own filter function (trusted code): a step of the pipeline like the others
            try:
                out.append(FilterPipeline.from_config(entry))
            except ValueError as exc:
                raise err("filter_list", str(exc)) from None
            continue
        custom = [s for s in (steps or []) if isinstance(s, dict) and
                  (s.get("function") == "custom" or any(isinstance(v, FunctionRef) for v in s.values()))]
        if custom:
            refs = [str(v) for s in custom for v in s.values() if isinstance(v, FunctionRef)]
            if is_code and all(r.endswith("build_predictions") for r in refs):
                unsupported.append(f"filter {_label(name)}: {_label(', '.join(refs), 120)} (assay runs prompt + "
                                   f"completion + tests itself)")
                rest = [x for x in steps if x not in custom]
                out.append(FilterPipeline.from_config({"name": name, "filter": rest}))
                continue
            unsupported.append(f"filter {_label(name)}: {_label(', '.join(refs) or 'custom', 120)} (custom filter "
                               f"code is not run; the pipeline is skipped)")
            continue
        if isinstance(steps, list):     # each regex_pattern: time-bounded, naming this file and filter
            entry = {**entry, "filter": [
                {**st, "regex_pattern": _pattern(st["regex_pattern"], err, "filter_list", f"filter {_label(name)}")}
                if isinstance(st, dict) and st.get("function") == "regex" and "regex_pattern" in st else st
                for st in steps]}
        try:
            out.append(FilterPipeline.from_config(entry))
        except ValueError as exc:
            raise err("filter_list", str(exc)) from None
    if not out:
        raise err("filter_list", "no filter pipeline is left that assay can run")
    return out


def _generation_kwargs(cfg: dict, output_type: str, fewshot_delimiter: str, err: Callable) -> dict:
    raw = cfg.get("generation_kwargs")
    if raw is None:
        gk: dict = {"until": [fewshot_delimiter], "do_sample": False, "temperature": 0.0}
    elif not isinstance(raw, dict):
        raise err("generation_kwargs", "must be a mapping")
    else:
        gk = dict(raw)
    until = gk.get("until", [])
    if isinstance(until, str):
        until = [until]
    if not isinstance(until, list) or not all(isinstance(u, str) for u in until):
        raise err("generation_kwargs", "until must be a string or a list of strings")
    gk["until"] = until
    try:
        gk["max_gen_toks"] = int(gk.get("max_gen_toks", 256))
        gk["temperature"] = float(gk.get("temperature", 0.0))
    except (TypeError, ValueError):
        raise err("generation_kwargs", "max_gen_toks must be an int and temperature a number") from None
    gk["do_sample"] = bool(gk.get("do_sample", False))
    return gk


def _common(cfg: dict, *, err: Callable, unsupported: list[str], shots: int | None) -> dict:  # noqa: C901
    """The fields shared by YAML and Python tasks, validated."""
    output_type = cfg.get("output_type", "generate_until")
    if output_type not in OUTPUT_TYPES:
        raise err("output_type", f"{output_type!r} is not supported (use one of {', '.join(OUTPUT_TYPES)})")
    td = cfg.get("target_delimiter", " ")
    fd = cfg.get("fewshot_delimiter", "\n\n")
    if not isinstance(td, str):
        raise err("target_delimiter", "must be a string")
    if not isinstance(fd, str):
        raise err("fewshot_delimiter", "must be a string")
    nf = cfg.get("num_fewshot") or 0
    if shots is not None:
        nf = shots
    if not isinstance(nf, int) or isinstance(nf, bool) or nf < 0:
        raise err("num_fewshot", "must be a whole number >= 0")
    repeats = cfg.get("repeats", 1)
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise err("repeats", "must be a whole number >= 1")
    description = cfg.get("description") or ""
    if not isinstance(description, str) and not callable(description):
        raise err("description", "must be a string")
    metrics = _metric_entries(cfg, output_type, err, unsupported)
    is_code = any(m["metric"] == "pass_at_k" for m in metrics)
    if is_code and output_type != "generate_until":
        raise err("output_type", "pass_at_k needs output_type generate_until")
    fc = cfg.get("fewshot_config") or {}
    if not isinstance(fc, dict):
        raise err("fewshot_config", "must be a mapping")
    sampler = fc.get("sampler", "default")
    if sampler not in ("default", "first_n"):
        raise err("fewshot_config", f"sampler {sampler!r} is not supported (default, first_n)")
    for key in fc:
        if key not in ("sampler", "samples", "doc_to_text", "doc_to_target", "doc_to_choice"):
            unsupported.append(f"fewshot_config.{_label(key)}")
    for key in ("doc_to_text", "doc_to_target", "doc_to_choice"):
        if isinstance(cfg.get(key), FunctionRef) or isinstance(fc.get(key), FunctionRef):
            ref = cfg.get(key) if isinstance(cfg.get(key), FunctionRef) else fc.get(key)
            raise err(key, f"{ref} is Python code in {ref.module_file.name} beside the task file; assay runs a "
                           f"task's code only with {TRUST_FLAG}")
    if output_type == "multiple_choice" and cfg.get("doc_to_choice") is None:
        raise err("doc_to_choice", "multiple_choice needs doc_to_choice")
    for key in ("doc_to_text", "doc_to_target"):
        if cfg.get(key) is None and not (key == "doc_to_text" and output_type == "loglikelihood_rolling"):
            raise err(key, f"{key} is required")
    if output_type == "loglikelihood_rolling" and nf > 0:
        raise err("num_fewshot", "a loglikelihood_rolling task scores whole documents: num_fewshot must be 0 "
                                 "(as in lm-evaluation-harness)")
    return dict(
        output_type=output_type, target_delimiter=td, fewshot_delimiter=fd, num_fewshot=nf, repeats=repeats,
        description=description, metrics=metrics,
        filters=_filters(cfg, is_code, err, unsupported),
        generation_kwargs=_generation_kwargs(cfg, output_type, fd, err),
        fewshot_sampler=sampler,
        text_spec=cfg.get("doc_to_text", "" if output_type == "loglikelihood_rolling" else None), target_spec=cfg.get("doc_to_target"), choice_spec=cfg.get("doc_to_choice"),
        fewshot_text_spec=fc.get("doc_to_text"), fewshot_target_spec=fc.get("doc_to_target"),
        fewshot_choice_spec=fc.get("doc_to_choice"),
    )


def _check(t: Task) -> Task:
    """Render the first doc (and the first few-shot doc) so a broken template fails at load time."""
    for doc in t.docs[:1]:
        t.doc_to_text(doc)
        t.doc_to_target(doc)
        if t.choice_spec is not None:
            t.doc_to_choice(doc)
        if t.multiple_input(doc) and t.gold_index(doc) == -1:
            raise t._error("doc_to_text", f"the first doc's doc_to_text gives {t._text_raw(doc)}, which indexes "
                                          f"none of its {len(t.doc_to_choice(doc))} contexts (doc_to_choice)")
        if t.output_type == "multiple_choice":
            g = t.gold_index(doc)
            if (g == -1 if isinstance(g, int) else -1 in g):
                raise t._error("doc_to_target", f"the first doc's target {t.doc_to_target(doc)!r} is none of "
                                                f"its choices {t.doc_to_choice(doc)}")
    if t.num_fewshot > 0:
        need = t.num_fewshot + 1 if t.fewshot_same_split else t.num_fewshot
        if need > len(t.fewshot_docs):
            raise t._error("num_fewshot", f"{t.num_fewshot} few-shot examples asked for, but the few-shot split has "
                                          f"{len(t.fewshot_docs)} docs")
        for doc in t.fewshot_docs[:1]:
            t._example(doc)
    return t


HOOK_WHAT = {"process_results": "the task's own scoring", "doc_to_text": "the task's prompt",
             "doc_to_target": "the task's target", "doc_to_choice": "the task's choices",
             "fewshot_config.samples": "the task's few-shot examples"}


def _resolve_code(cfg: dict, code: TaskCode, unsupported: list[str]) -> dict:  # noqa: C901
    """``cfg`` with its ``!function`` hooks replaced by the functions they name (imported only when ``code`` is
    trusted; otherwise the first hook that changes prompts or scores is refused, naming the file and the flag).
    ``process_docs`` untrusted is listed instead (the docs are then used as they are in the data file), and
    HumanEval's ``build_predictions`` filter and ``pass_at_k`` metric are left to assay's own code runner."""
    cfg = dict(cfg)
    if isinstance(cfg.get("process_results"), FunctionRef):
        cfg["process_results"] = code.resolve(cfg["process_results"], "process_results", HOOK_WHAT["process_results"])
    fc = cfg.get("fewshot_config")
    fc = dict(fc) if isinstance(fc, dict) else fc
    for key in ("doc_to_text", "doc_to_target", "doc_to_choice"):
        if isinstance(cfg.get(key), FunctionRef):
            cfg[key] = code.resolve(cfg[key], key, HOOK_WHAT[key])
        if isinstance(fc, dict) and isinstance(fc.get(key), FunctionRef):
            fc[key] = code.resolve(fc[key], f"fewshot_config.{key}", HOOK_WHAT[key])
    if isinstance(fc, dict) and isinstance(fc.get("samples"), FunctionRef):
        fc["samples"] = code.resolve(fc["samples"], "fewshot_config.samples", HOOK_WHAT["fewshot_config.samples"])
    if fc is not None:
        cfg["fewshot_config"] = fc
    if isinstance(cfg.get("filter_list"), list):
        cfg["filter_list"] = [_resolve_filter(e, code) for e in cfg["filter_list"]]
    if isinstance(cfg.get("metric_list"), list):
        cfg["metric_list"] = [_resolve_metric(e, code) for e in cfg["metric_list"]]
    ref = cfg.get("process_docs")
    if isinstance(ref, FunctionRef):
        if code.trusted:
            cfg["process_docs"] = code.resolve(ref, "process_docs")
        else:
            unsupported.append(f"process_docs ({_label(ref)}; not run without {TRUST_FLAG}, so the docs are used "
                               f"as they are in the file)")
    elif "process_docs" in cfg:
        unsupported.append("process_docs (not a !function; docs are used as they are in the file)")
    return cfg


def _resolve_filter(entry: Any, code: TaskCode) -> Any:
    if not isinstance(entry, dict) or not isinstance(entry.get("filter"), list):
        return entry
    steps = []
    for st in entry["filter"]:
        ref = st.get("filter_fn") if isinstance(st, dict) else None
        if isinstance(ref, FunctionRef) and not ref.name.endswith("build_predictions"):
            st = {**st, "filter_fn": code.resolve(ref, "filter_list", f"the filter {_label(entry.get('name'))}")}
        steps.append(st)
    return {**entry, "filter": steps}


def _resolve_metric(entry: Any, code: TaskCode) -> Any:
    if not isinstance(entry, dict):
        return entry
    entry = dict(entry)
    m = entry.get("metric")
    if isinstance(m, FunctionRef) and m.function_name not in ("pass_at_k", "pass_at_1"):
        entry["metric"] = code.resolve(m, "metric_list", "a metric")
    if isinstance(entry.get("aggregation"), FunctionRef):
        entry["aggregation"] = code.resolve(entry["aggregation"], "metric_list", "an aggregation")
    return entry


def _load_yaml_task(path: Path, *, limit: int | None, shots: int | None, seed: int,  # noqa: C901
                    include_dirs: Sequence[str | Path] = (), trust_code: bool = False,
                    overrides: dict | None = None) -> Task:
    written, origin = _resolve(path, roots=_include_roots(path, include_dirs))
    if overrides:       # a group's entry that sets fields of its task (num_fewshot: 25), as the harness applies them
        written = {**written, **overrides}
    src = str(path)

    def err(fieldname: str, message: str) -> TaskError:
        f, line = origin.get(fieldname.split(".")[0], (src, None))
        return TaskError(message, source=f, line=line, field=fieldname)

    name = written.get("task")
    if not isinstance(name, str) or not name:
        raise err("task", "a task file needs 'task: NAME' (a group file, 'group: NAME' with a list of tasks, is "
                          "run by its name: --task-dir FOLDER --tasks NAME)")

    def code_error(message: str, ref: FunctionRef, fieldname: str) -> TaskError:
        f, line = origin.get(fieldname.split(".")[0], (src, None))
        return TaskError(message, source=ref.yaml_file or f, line=ref.line or line, field=fieldname)

    code = TaskCode(trust_code, _label(name), code_error)
    hook_notes: list[str] = []
    cfg = _resolve_code(written, code, hook_notes)
    # what is not honoured is listed by name (a key, a !function's name), never with the value it holds
    unsupported: list[str] = []
    for key, value in cfg.items():
        if key in KNOWN_KEYS or key in HARMLESS_KEYS:
            continue
        unsupported.append(f"{_label(key)} ({_label(value)})" if isinstance(value, FunctionRef)
                           else f"{_label(key)} (ignored)")
    for key in (cfg.get("dataset_kwargs") or {}) if isinstance(cfg.get("dataset_kwargs"), dict) else ():
        if key not in ("data_files", "trust_remote_code"):
            if cfg["dataset_kwargs"].get("data_files") is not None:
                unsupported.append(f"dataset_kwargs.{_label(key)} (ignored for local files)")
    if "process_results" in cfg and not callable(cfg["process_results"]):
        raise err("process_results", f"task {_label(name)}: process_results must be a !function (run with "
                                     f"{TRUST_FLAG})")
    unsupported.extend(hook_notes)
    common = _common(cfg, err=err, unsupported=unsupported, shots=shots)
    proc = cfg.get("process_docs") if callable(cfg.get("process_docs")) else None

    def processed(docs: list[dict], split: str) -> list[dict]:
        if proc is None:
            return docs
        try:
            return process_docs(proc, docs, f"process_docs ({written['process_docs']}) on the split {split!r}")
        except InputError as exc:
            raise err("process_docs", f"task {name}: {exc}") from None

    data = _Data(path, cfg, origin, name)
    data.hooks = [_label(k) for k, v in written.items() if isinstance(v, FunctionRef)]
    test_split = cfg.get("test_split") or cfg.get("validation_split")
    if not test_split:
        raise err("test_split", f"task {name} names no test_split (or validation_split) to evaluate")
    fs_split = cfg.get("fewshot_split") or cfg.get("training_split") or cfg.get("validation_split") or test_split
    if common["num_fewshot"] > 0 and not isinstance((cfg.get("fewshot_config") or {}).get("samples"), list):
        data.wanted = [str(test_split), str(fs_split)]
    docs = processed(list(data.split(str(test_split))), str(test_split))
    all_docs = docs
    if limit is not None:
        docs = docs[:max(limit, 0)]
    fewshot_docs: list[dict] = []
    same = False
    fc = cfg.get("fewshot_config") or {}
    if common["num_fewshot"] > 0:
        if isinstance(fc.get("samples"), list):
            fewshot_docs = list(fc["samples"])
        elif callable(fc.get("samples")):
            fewshot_docs = _call_samples(fc["samples"], written["fewshot_config"]["samples"], err)
        else:
            # the harness draws one extra only when fewshot_split is literally the test split
            same = cfg.get("fewshot_split") == test_split
            if str(fs_split) == str(test_split):
                fewshot_docs = all_docs
            else:
                if not data.has_split(str(fs_split)):
                    raise err("dataset_kwargs.data_files", f"task {name} asks for {common['num_fewshot']} few-shot "
                                                           f"examples from the split {fs_split!r}: add "
                                                           f"'{fs_split}: FILE' under dataset_kwargs.data_files")
                fewshot_docs = processed(data.split(str(fs_split)), str(fs_split))
    # code: the program is prompt + answer + tests only where the task puts the prompt in front (lm-eval's
    # build_predictions filter) or uses assay's own pass_at_k; lm-eval's code_eval metric alone runs answer + tests
    # the task's code is part of its definition: the hash of every code file imported goes into the task hash
    task_hash = _sha({"task": written, "code": code.files}) if code.files else _sha(written)
    t = Task(name=name, docs=docs, fewshot_docs=fewshot_docs, source=src, task_hash=task_hash,
             process_results=cfg.get("process_results"), code_files=dict(code.files),
             program_with_prompt=_program_with_prompt(written), config=_canonical(written),
             total_docs=len(all_docs),
             data_hash=data.file_hash.hexdigest(), data_files=list(dict.fromkeys(data.files)),
             unsupported=unsupported, seed=seed, fewshot_same_split=same, origin=origin, **common)
    return _check(t)


def _program_with_prompt(cfg: dict) -> bool:
    """Whether a code task's program starts with its prompt (see :meth:`Task.program`): yes with HumanEval's
    ``build_predictions`` filter, no with lm-eval's ``code_eval`` metric function and no such filter (MBPP), yes
    for assay's own ``pass_at_k`` metric."""
    def refs(value: Any) -> list[FunctionRef]:
        if isinstance(value, FunctionRef):
            return [value]
        if isinstance(value, dict):
            return [r for v in value.values() for r in refs(v)]
        if isinstance(value, list):
            return [r for v in value for r in refs(v)]
        return []

    if any(r.function_name.startswith("build_predictions") for r in refs(cfg.get("filter_list"))):
        return True
    return not any(r.function_name in ("pass_at_k", "pass_at_1") for r in refs(cfg.get("metric_list")))


def _call_samples(fn: Callable, ref: Any, err: Callable) -> list[dict]:
    """``fewshot_config.samples`` from the task's own function: called with no argument, a list of docs."""
    try:
        got = list(fn())
    except Exception as exc:
        raise err("fewshot_config", f"{ref} failed: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}") \
            from None
    if not all(isinstance(d, dict) for d in got):
        raise err("fewshot_config", f"{ref} must return a list of docs (dicts)")
    return got


# --------------------------------------------------------------------------------------------- Python tasks
def task(name: str | Callable | None = None, **fields: Any):
    """Decorator: a function returning the docs (a list of dicts) becomes a task, loaded with
    ``load_tasks("python:module:function")``. Fields are the YAML's; ``doc_to_text``, ``doc_to_target``,
    ``doc_to_choice`` and ``description`` may also be callables taking a doc. ``fewshot_docs`` may be a list or a
    callable returning one; without it, few-shot examples come from the docs themselves (never the doc itself)."""
    bad = sorted(set(fields) - PYTHON_FIELDS)
    if bad:
        raise TaskError(f"@task: unknown field(s) {', '.join(bad)} (allowed: {', '.join(sorted(PYTHON_FIELDS))})",
                        field=bad[0])

    def wrap(fn: Callable) -> Callable:
        fn.__assay_task__ = {"name": (name if isinstance(name, str) else None) or fn.__name__, **fields}
        return fn

    if callable(name):
        return wrap(name)
    return wrap


def _load_python_task(spec: str, *, limit: int | None, shots: int | None, seed: int) -> Task:
    parts = spec.split(":")
    if len(parts) != 3 or not parts[1] or not parts[2]:
        raise TaskError("a Python task is written python:module:function", source=spec)
    _, module_name, fn_name = parts
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise TaskError(f"cannot import {module_name}: {type(exc).__name__}: {exc}", source=spec) from None
    fn = getattr(module, fn_name, None)
    if fn is None:
        raise TaskError(f"{module_name} has no {fn_name}", source=spec)
    fields = getattr(fn, "__assay_task__", None)
    if fields is None:
        raise TaskError(f"{fn_name} is not decorated with @assay.bench.quality.tasks.task", source=spec)
    fields = dict(fields)
    name = fields.pop("name")

    def err(fieldname: str, message: str) -> TaskError:
        return TaskError(f"task {name}: {message}", source=spec, field=fieldname)

    try:
        docs = fn()
    except Exception as exc:
        raise TaskError(f"{fn_name}() failed: {type(exc).__name__}: {exc}", source=spec) from None
    if not isinstance(docs, list) or not all(isinstance(d, dict) for d in docs):
        raise TaskError(f"{fn_name}() must return a list of dicts", source=spec)
    unsupported: list[str] = []
    common = _common(fields, err=err, unsupported=unsupported, shots=shots)
    fs = fields.get("fewshot_docs")
    if callable(fs):
        fs = fs()
    same = fs is None
    fewshot_docs = list(docs) if fs is None else list(fs)
    if limit is not None:
        docs = docs[:max(limit, 0)]
    try:
        source_text = inspect.getsource(fn)
    except (OSError, TypeError):
        source_text = fn.__qualname__
    t = Task(name=name, docs=docs, fewshot_docs=fewshot_docs if common["num_fewshot"] > 0 else [], source=spec,
             task_hash=_sha({"fn": source_text, "fields": fields}),
             data_hash=_sha({"docs": docs, "fewshot": fewshot_docs if common["num_fewshot"] > 0 else []}),
             data_files=[], unsupported=unsupported, seed=seed, fewshot_same_split=same, **common)
    return _check(t)


# --------------------------------------------------------------------------------------------- entry point
def _is_task_file(path: Path, include_dirs: Sequence[str | Path] = ()) -> bool:
    try:
        data, _ = _read_yaml(path)
        return isinstance(data.get("task"), str) or ("include" in data and isinstance(
            _resolve(path, roots=_include_roots(path, include_dirs))[0].get("task"), str))
    except TaskError:
        return True     # let the real load report it


def _expand(spec: Any) -> list[str | Path | TaskRef]:
    if isinstance(spec, (Path, TaskRef)):
        return [spec]
    if isinstance(spec, str):
        if spec.startswith("python:"):
            return [s.strip() for s in spec.split(",") if s.strip()]
        return [s.strip() for s in spec.split(",") if s.strip()]
    if isinstance(spec, Sequence):
        out: list = []
        for s in spec:
            out.extend(_expand(s))
        return out
    raise TaskError(f"cannot read a task list from a {type(spec).__name__}")


def load_tasks(spec: str | Path | Sequence, *, limit: int | None = None, shots: int | None = None,
               seed: int = 1234, include_dirs: Sequence[str | Path] = (), trust_code: bool = False) -> list[Task]:
    """Load tasks from a YAML file, a folder (every ``*.yaml``/``*.yml`` in it that defines a task), a
    ``python:module:function``, a comma-separated list of these, or a sequence of them. ``limit`` keeps the first
    docs of each; ``shots`` overrides ``num_fewshot``; ``seed`` seeds the few-shot draws (the harness's 1234).
    A task file's ``include`` is read only from the task file's own folder (and the folders below it), the folders
    in ``include_dirs`` and those in ``$ASSAY_TASK_INCLUDE`` (separated by ``os.pathsep``). ``trust_code``
    (``--trust-task-code``): import and run the tasks' ``!function`` hooks (:mod:`assay.bench.quality.taskcode`);
    without it a hook that changes prompts or scores stops the load, and nothing is imported."""
    out: list[Task] = []
    for item in _expand(spec):
        if isinstance(item, TaskRef):
            out.append(_load_yaml_task(item.path, limit=limit, shots=shots, seed=seed, include_dirs=include_dirs,
                                       trust_code=trust_code, overrides=item.fields))
            continue
        if isinstance(item, str) and item.startswith("python:"):
            out.append(_load_python_task(item, limit=limit, shots=shots, seed=seed))
            continue
        path = Path(item).expanduser()
        if path.is_dir():
            files = sorted([*path.glob("*.yaml"), *path.glob("*.yml")])
            found = [f for f in files if _is_task_file(f, include_dirs)]
            if not found:
                raise TaskError("no task YAML in this folder", source=str(path))
            out.extend(_load_yaml_task(f, limit=limit, shots=shots, seed=seed, include_dirs=include_dirs,
                                       trust_code=trust_code) for f in found)
        elif path.exists():
            out.append(_load_yaml_task(path, limit=limit, shots=shots, seed=seed, include_dirs=include_dirs,
                                       trust_code=trust_code))
        else:
            raise TaskError("task file not found", source=str(path))
    if not out:
        raise TaskError("no tasks given")
    return out
