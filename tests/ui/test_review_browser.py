"""The /review page in a real headless Chromium: a reviewer gives a name once and labels 20 rows
with the keyboard alone (p, f, n for a note, j / k to move); the store then holds 20 labels."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from assay.store import Store
from assay.store.review import ReviewLog
from tests.helpers.review_runs import make_run
from tests.helpers.uihelpers import serve_ui

CHROMIUM = "/usr/bin/chromium"

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                reason="Debian's chromium is not installed: run `make test` (scripts/install_test_services.sh installs it)")
sync_api = pytest.importorskip("playwright.sync_api",
                               reason="playwright is not installed: run `make test` (scripts/install_test_services.sh installs it)")


@pytest.fixture(scope="module")
def review_store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = str(tmp_path_factory.mktemp("review") / "r.db")
    st = Store(path)
    rid = make_run(st, n=40)
    idxs = ReviewLog(st).create("kb", rid, "groundedness", sample=20, seed=5)["idxs"]
    st.close()
    return {"path": path, "idxs": idxs}


@pytest.fixture(scope="module")
def server(review_store: dict[str, Any]) -> Iterator[str]:
    yield from serve_ui(review_store["path"])


def test_label_twenty_rows_with_the_keyboard(server: str, review_store: dict[str, Any]) -> None:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                              args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
        page = b.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server + "/review/kb")
        page.fill("#reviewer", "ann")                    # the name, asked once
        with page.expect_navigation():
            page.press("#reviewer", "Enter")
        assert "reviewer ann" in page.inner_text("#progress")
        idxs = review_store["idxs"]
        # j / k move without labelling
        with page.expect_navigation():
            page.keyboard.press("j")
        assert page.url.endswith("?pos=1")
        with page.expect_navigation():
            page.keyboard.press("k")
        assert page.url.endswith("?pos=0")
        for pos, idx in enumerate(idxs):
            assert f"what is item {idx}?" in page.inner_text("main")
            if pos == 3:                                  # n: a note, typed, then Escape back to the keys
                page.keyboard.press("n")
                page.keyboard.type("the context does not say so")
                page.keyboard.press("Escape")
            with page.expect_navigation():
                page.keyboard.press("p" if idx % 2 == 0 else "f")
        assert "20 of 20 labelled" in page.inner_text("#progress")
        assert errors == []
        b.close()
    st = Store(review_store["path"])
    try:
        labels = ReviewLog(st).labels("kb")
    finally:
        st.close()
    assert len(labels) == 20 and {lb["reviewer"] for lb in labels} == {"ann"}
    assert {lb["idx"]: lb["value"] for lb in labels} == {i: "pass" if i % 2 == 0 else "fail" for i in idxs}
    assert [lb["note"] for lb in labels if lb["idx"] == idxs[3]] == ["the context does not say so"]
