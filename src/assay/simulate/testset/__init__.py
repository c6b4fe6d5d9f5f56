"""Test sets from a team's own documents (``assay simulate testset``).

- :mod:`.readers` — Markdown, text, HTML and PDF files as headed blocks;
- :mod:`.chunking` — chunks under one heading path, with stable ids;
- :mod:`.prompts` — the writing and checking prompts, and the strict reading of their JSON;
- :mod:`.similarity` — embeddings for partners, neighbours and near-duplicates;
- :mod:`.generation` — plan, write, check, keep;
- :mod:`.estimate` — calls, tokens, cost and time before any call;
- :mod:`.run` — :func:`generate_testset`, the whole run.
"""

from assay.simulate.testset.run import estimate, generate_testset, generate_testset_async

__all__ = ["estimate", "generate_testset", "generate_testset_async"]
