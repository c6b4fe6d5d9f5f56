"""Modules shared by tests in several folders, imported as ``from tests.helpers.<module> import ...``.

- ``fake_openai_server``: a scripted fake OpenAI-compatible endpoint, for fault injection;
- ``postgres_server``: a throwaway PostgreSQL server (a fresh cluster on a free port);
- ``old_stores``: how to make a store look as an older assay wrote it;
- ``perfdata``: perf benchmark results made by hand, and a PostgreSQL fixture for them;
- ``leaderboard_data``: a store for the leaderboard tests, written through the real APIs;
- ``uihelpers``: payloads, rows and the escaping check of the dashboard tests;
- ``simhelpers``: a scripted simulating model and a small target for the simulator tests.

Fixtures stay in the ``conftest.py`` files; these are plain modules (no test in them).
"""
