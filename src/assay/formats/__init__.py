"""The input layer: every format an evaluation set comes in, read as :class:`~assay.records.Record`.

>>> from assay.formats import open_dataset
>>> ds = open_dataset("eval.jsonl", mapping={"query": "${data.question}"}, on_bad_row="skip")
>>> for record in ds: ...

Readers (:mod:`.readers`): JSONL, JSON, CSV, Parquet, a directory of those, a stream
(standard input, a FIFO: read once, through a temporary copy), a pandas DataFrame, a list
of dicts; text in UTF-8, UTF-16 or UTF-32 (:mod:`.encoding`). The normaliser (:mod:`.normalize`) recognises each row's
shape from its keys: an Azure AI Evaluation conversation (:mod:`.azure`), an MLflow
trace v2/v3 JSON (:mod:`.mlflow_trace`) or an agent row (:mod:`.agent`: message lists,
Responses API items), each a shape adapter; any other row is read
column by column, in the canonical names, the Azure AI Evaluation data format's names
or the Databricks Agent Evaluation input schema's (:mod:`.databricks`). Flat rows that are
turns of a conversation given one turn a line (``conversation_id`` and ``turn``) are grouped into
their conversations (:mod:`.turn_rows`). Field converters and field errors are in :mod:`.fields`.
"""

from assay.formats.dataset import Dataset, open_dataset
from assay.formats.mlflow_trace import trace_to_record
from assay.formats.readers import EXTENSIONS

__all__ = ["Dataset", "open_dataset", "trace_to_record", "EXTENSIONS"]
