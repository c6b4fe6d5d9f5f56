"""What the typed benchmark summaries of every kind share: a lenient model and the schema tag.

A benchmark summary (``summary.json``, a stored benchmark's ``details``) is written as a plain
dict by its runner and read back through a model of its kind (:mod:`assay.bench.perf.summary`,
:mod:`assay.bench.quality.summary`, :mod:`assay.bench.embed.summary`). Reading is lenient, as the
dict code before it was: a key a summary lacks (an older or hand-made one) takes the default the
readers assumed for it, a block stored as ``null`` reads as an empty block, and keys the model
does not name are kept. :meth:`SummaryModel.to_json` gives back exactly the keys that were read
(in the order the runners write them), so a summary read and written again is the same JSON.

The tag is ``"<family>/<version>"`` (``"assay.bench.perf/1"``), written once per kind: the kind's
summary module defines it (``SCHEMA``, the model's ``TAG``) and its ``stored.py`` uses it. A summary
without one reads as the current version; one of another family, or of a newer version than this
assay knows, is refused with an :class:`~assay.errors.AssayError` that names the tag.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from assay.errors import AssayError

Num = int | float                # kept as written: an int stays an int, a float a float
M = TypeVar("M", bound="Summary")
B = TypeVar("B", bound="SummaryModel")


class SummaryModel(BaseModel):
    """A block of a summary: unknown keys kept, a block field stored as ``null`` read as empty."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    # fields that hold a block (a nested model, a dict or a list) whose readers took ``None`` as empty
    BLOCKS: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="before")
    @classmethod
    def _null_blocks_are_empty(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and any(data.get(k, ()) is None for k in cls.BLOCKS):
            return {k: v for k, v in data.items() if not (k in cls.BLOCKS and v is None)}
        return data

    @classmethod
    def read(cls: type[B], data: Any) -> B:
        """A block as stored, or an empty one where there is none or it does not read (a list's
        headline, shown as far as it goes)."""
        try:
            return cls.model_validate(data if isinstance(data, Mapping) else {})
        except ValidationError:
            return cls()

    def is_empty(self) -> bool:
        """Whether the block held nothing (missing, ``null`` or ``{}`` where it was read)."""
        return not self.model_fields_set and not self.model_extra

    def raw(self, name: str) -> Any:
        """The block ``name`` as it was stored (its JSON), or ``None`` where it was missing or ``null``."""
        if name not in self.model_fields_set:
            return None
        return self.model_dump(mode="json", exclude_unset=True, include={name})[name]

    def to_json(self) -> dict[str, Any]:
        """The block as JSON: the keys it was read or built with, extras included."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


class Summary(SummaryModel):
    """A whole summary of one kind: its schema tag, its version and the lenient :meth:`load`."""

    TAG: ClassVar[str] = ""                  # "<family>/<version>": the tag this assay writes (the kind's SCHEMA)
    KIND: ClassVar[str] = "benchmark"

    @classmethod
    def tag(cls) -> str:
        """The schema tag this assay writes: ``"<family>/<version>"``."""
        return cls.TAG

    @classmethod
    def check_tag(cls, tag: Any) -> int:
        """The version of a stored tag (``None``: the current one); refuses another family or a newer version."""
        family, _, current = cls.TAG.rpartition("/")
        if tag is None:
            return int(current)
        got, _, version = str(tag).rpartition("/")
        if got != family or not version.isdigit() or int(version) < 1:
            raise AssayError(f"not a {cls.KIND} summary: its schema is {str(tag)[:80]!r}, expected {cls.TAG!r}")
        if int(version) > int(current):
            raise AssayError(f"this {cls.KIND} summary has schema {str(tag)!r}, newer than this assay reads "
                             f"({cls.TAG!r}); upgrade assay to open it")
        return int(version)

    @classmethod
    def load(cls: type[M], data: Any) -> M:
        """A summary as the runner wrote it or the store kept it, of this version or an earlier one
        (a model of this kind is returned as it is; ``None`` reads as an empty summary)."""
        if isinstance(data, cls):
            return data
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise AssayError(f"not a {cls.KIND} summary: expected a JSON object, got {type(data).__name__}")
        cls.check_tag(data.get("schema"))
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first.get("loc", ())) or "(top)"
            raise AssayError(f"this {cls.KIND} summary does not read: {where}: {first.get('msg')}") from None

    @classmethod
    def load_or_empty(cls: type[M], data: Any) -> M:
        """:meth:`load`, or an empty summary where ``data`` does not read (for lists and boards that
        show what they can of every stored result rather than stop at a damaged one)."""
        try:
            return cls.load(data)
        except AssayError:
            return cls()
