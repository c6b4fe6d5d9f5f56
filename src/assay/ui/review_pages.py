"""The dashboard's review pages: people label a queue's rows one at a time, from the keyboard.

Routes (:func:`add_review_routes`, included by :mod:`assay.ui.server`):

* ``GET /review``: the review queues (``assay review create`` makes them), with their labels so far;
* ``GET /review/{name}?pos=N``: row ``N`` of the queue: the query, response and contexts, the
  scorer's verdict, score and reason (and which scorer gave it), the labels already given, and the
  label form. The reviewer's name is asked once (kept in a cookie, ``assay_reviewer``);
* ``POST /review/{name}/reviewer``: sets that name;
* ``POST /review/{name}/label``: stores the reviewer's label of a row (``pass`` / ``fail`` or
  1-5, and a note) and answers with a redirect to the next row;
* ``GET /api/review/{name}``: the queue, its labels and the agreement figures as JSON.

The pages work with plain forms; ``/static/review.js`` (the only script the dashboard serves,
allowed by these pages' Content-Security-Policy alone) adds the keys: ``p`` pass, ``f`` fail,
``1``-``5``, ``n`` the note, ``j`` / ``k`` the next / previous row. The token rules of the rest of
the dashboard apply; every POST also carries the form's CSRF token (a secret of this server
process) and is refused when the browser says it came from another site.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from assay.errors import AssayError

REVIEWER_COOKIE = "assay_reviewer"
SCRIPT = Path(__file__).parent / "static" / "review.js"
MAX_FORM = 64 * 1024         # bytes of a label form (a note included)
MAX_NOTE = 4000


def review_csp(base: str) -> str:
    """The dashboard's policy with this page's own script allowed (no inline script, no other origin)."""
    return base.replace("default-src 'none';", "default-src 'none'; script-src 'self';")


def _form(raw: bytes) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True).items()}


class ReviewPages:
    """What the review routes do, over one store; ``csrf``: this server's form secret."""

    def __init__(self, store: Any, page: Callable[..., Any], csp: str, not_found: type[Exception]):
        from assay.store.review import ReviewLog

        self.log = ReviewLog(store)
        self.page = page
        self.policy = review_csp(csp)
        self.not_found = not_found
        self.csrf = secrets.token_urlsafe(24)

    def queue(self, name: str) -> dict[str, Any]:
        try:
            return self.log.queue(name)
        except AssayError as exc:
            raise self.not_found(str(exc)) from None

    async def form(self, request: Any) -> dict[str, str]:
        """The POSTed form, once its origin and CSRF token are checked."""
        if request.headers.get("sec-fetch-site") == "cross-site":
            raise AssayError("a label must be given from the dashboard itself (this request came from another site)")
        raw = await request.body()
        if len(raw) > MAX_FORM:
            raise AssayError(f"the label form is too large (over {MAX_FORM} bytes)")
        form = _form(raw)
        if not hmac.compare_digest(form.get("csrf", ""), self.csrf):
            raise AssayError("the form is stale or not from this dashboard: reload the page and label again")
        return form

    def row_page(self, name: str, pos: int, reviewer: str) -> Any:
        q = self.queue(name)
        items = self.log.items(name)
        if not items:
            raise self.not_found(f"review queue {name} has no rows")
        pos = min(max(pos, 0), len(items) - 1)
        item = items[pos]
        mine = next((lb for lb in item["labels"] if lb["reviewer"] == reviewer), None)
        done = sum(1 for it in items if any(lb["reviewer"] == reviewer for lb in it["labels"]))
        resp = self.page("review.html.j2", title=f"review · {name}", q=q, item=item, pos=pos, total=len(items),
                         reviewer=reviewer, mine=mine, done=done, csrf=self.csrf, qname=quote(name, safe=""))
        resp.headers["Content-Security-Policy"] = self.policy
        return resp

    def label(self, name: str, form: dict[str, str], reviewer: str) -> str:
        """Store the form's label; the address of the next row."""
        q = self.queue(name)
        if not reviewer:
            raise AssayError("give your name first: each label says who gave it")
        try:
            pos, idx = int(form.get("pos", "")), int(form.get("idx", ""))
        except ValueError:
            raise AssayError("the label form has no row") from None
        note = form.get("note", "").strip()[:MAX_NOTE] or None
        self.log.label(name, idx, reviewer, form.get("value", ""), note=note)
        return f"/review/{quote(name, safe='')}?pos={min(pos + 1, len(q['idxs']) - 1)}"


def add_review_routes(app: Any, store: Any, *, page: Callable[..., Any], csp: str,
                      not_found: type[Exception]) -> None:
    """The review routes on ``app`` (a FastAPI app) over ``store``."""
    rp = ReviewPages(store, page, csp, not_found)

    @app.get("/static/review.js")
    def review_js() -> Response:
        return Response(SCRIPT.read_text(encoding="utf-8"), media_type="text/javascript",
                        headers={"Cache-Control": "max-age=3600"})

    @app.get("/review", response_class=HTMLResponse)
    def review_list() -> Any:
        return page("review_list.html.j2", title="review", queues=rp.log.queues())

    @app.get("/review/{name}", response_class=HTMLResponse)
    def review_page(name: str, request: Request, pos: int = 0) -> Any:
        return rp.row_page(name, pos, request.cookies.get(REVIEWER_COOKIE) or "")

    @app.post("/review/{name}/reviewer")
    async def set_reviewer(name: str, request: Request) -> Any:
        rp.queue(name)
        form = await rp.form(request)
        who = form.get("reviewer", "").strip()[:100]
        if not who:
            raise AssayError("give your name: each label says who gave it")
        pos = int(form["pos"]) if form.get("pos", "").isdigit() else 0
        resp = RedirectResponse(f"/review/{quote(name, safe='')}?pos={pos}", status_code=303)
        resp.set_cookie(REVIEWER_COOKIE, who, httponly=True, samesite="strict")
        return resp

    @app.post("/review/{name}/label")
    async def add_label(name: str, request: Request) -> Any:
        form = await rp.form(request)
        return RedirectResponse(rp.label(name, form, request.cookies.get(REVIEWER_COOKIE) or ""), status_code=303)

    @app.get("/api/review/{name}")
    def api_review(name: str) -> dict[str, Any]:
        q = rp.queue(name)
        return {"queue": q, "labels": rp.log.labels(name), "agreement": rp.log.agreement(name)}
