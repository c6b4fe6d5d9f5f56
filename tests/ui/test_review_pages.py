"""The /review pages through FastAPI's TestClient: the queue list, a row, the reviewer's name, a
label stored by POST; the CSRF token, another site's POST and the token rules refused."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from assay.store import Store
from assay.store.review import ReviewLog
from assay.ui.server import create_app
from tests.helpers.review_runs import make_run


@pytest.fixture
def setup(tmp_path) -> dict[str, Any]:
    st = Store(str(tmp_path / "r.db"))
    rid = make_run(st, n=10)
    ReviewLog(st).create("q <b>", rid, "groundedness", sample=5, seed=3)
    yield {"store": st, "rid": rid}
    st.close()


def csrf_of(html: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', html).group(1)


def test_list_row_name_and_label(setup):
    st = setup["store"]
    c = TestClient(create_app(st), base_url="http://127.0.0.1")
    page = c.get("/review")
    assert page.status_code == 200 and "q &lt;b&gt;" in page.text and "q <b>" not in page.text
    first = c.get("/review/q%20%3Cb%3E")
    assert first.status_code == 200 and 'id="reviewer-form"' in first.text
    assert "script-src 'self'" in first.headers["content-security-policy"]
    assert "script-src" not in c.get("/").headers["content-security-policy"]    # the rest stays script-free
    token = csrf_of(first.text)
    r = c.post("/review/q%20%3Cb%3E/reviewer", data={"csrf": token, "reviewer": "ann", "pos": "0"},
               follow_redirects=False)
    assert r.status_code == 303 and "assay_reviewer" in r.headers["set-cookie"]
    row = c.get("/review/q%20%3Cb%3E?pos=0")
    idx = ReviewLog(st).queue("q <b>")["idxs"][0]
    assert 'id="label-form"' in row.text and f"what is item {idx}?" in row.text and f"judge reason {idx}" in row.text
    assert 'data-key="p"' in row.text and '<dd class="mono">judge</dd>' in row.text     # which scorer said it
    r = c.post("/review/q%20%3Cb%3E/label", data={"csrf": token, "pos": "0", "idx": str(idx), "value": "fail",
                                                  "note": "wrong item"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].endswith("?pos=1")
    (lb,) = ReviewLog(st).labels("q <b>")
    assert (lb["idx"], lb["reviewer"], lb["value"], lb["note"]) == (idx, "ann", "fail", "wrong item")
    api = c.get("/api/review/q%20%3Cb%3E").json()
    assert api["labels"][0]["value"] == "fail" and api["agreement"]["reviewers"] == ["ann"]
    assert c.get("/static/review.js").headers["content-type"].startswith("text/javascript")


def test_posts_without_the_form_token_or_from_another_site_are_refused(setup):
    st = setup["store"]
    c = TestClient(create_app(st), base_url="http://127.0.0.1")
    token = csrf_of(c.get("/review/q%20%3Cb%3E").text)
    c.cookies.set("assay_reviewer", "mallory")
    idx = ReviewLog(st).queue("q <b>")["idxs"][0]
    form = {"pos": "0", "idx": str(idx), "value": "pass"}
    assert c.post("/review/q%20%3Cb%3E/label", data=form).status_code == 400                    # no token
    assert c.post("/review/q%20%3Cb%3E/label", data={**form, "csrf": "guess"}).status_code == 400
    r = c.post("/review/q%20%3Cb%3E/label", data={**form, "csrf": token}, headers={"sec-fetch-site": "cross-site"})
    assert r.status_code == 400 and "another site" in r.text
    # another dashboard process has another secret
    other = TestClient(create_app(st), base_url="http://127.0.0.1")
    other.cookies.set("assay_reviewer", "mallory")
    assert other.post("/review/q%20%3Cb%3E/label", data={**form, "csrf": token}).status_code == 400
    assert ReviewLog(st).labels("q <b>") == []
    r = c.post("/review/q%20%3Cb%3E/label", data={**form, "value": "maybe", "csrf": token})
    assert r.status_code == 400 and "not pass or fail" in r.text
    assert c.get("/review/nope").status_code == 404


def test_a_token_is_needed_off_loopback(setup):
    st = setup["store"]
    c = TestClient(create_app(st, token="s3cret-token-value"), base_url="http://192.0.2.10:8765")
    assert c.post("/review/q%20%3Cb%3E/label", data={"value": "pass"}).status_code == 401
    assert c.get("/review").status_code == 401
    ok = c.get("/review/q%20%3Cb%3E", headers={"authorization": "Bearer s3cret-token-value"})
    assert ok.status_code == 200
