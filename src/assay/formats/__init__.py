"""The input layer: every format an evaluation set comes in, read as :class:`~assay.records.Record`.

>>> from assay.formats import open_dataset
>>> ds = open_dataset("eval.jsonl", mapping={"query": "${data.question}"}, on_bad_row="skip")
>>> for record in ds: ...

Readers (:mod:`.readers`): JSONL, JSON, CSV, Parquet, a directory of those, a pandas
DataFrame, a list of dicts. Row shapes (:mod:`.azure`, :mod:`.databricks`,
:mod:`.mlflow_trace`) are recognised per row from its keys.
"""

from assay.formats.dataset import Dataset, open_dataset
from assay.formats.mlflow_trace import trace_to_record
from assay.formats.readers import EXTENSIONS

__all__ = ["Dataset", "open_dataset", "trace_to_record", "EXTENSIONS"]
