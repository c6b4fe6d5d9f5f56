"""Gemini on Vertex AI as a chat backend: ``vertex:MODEL`` (e.g. ``vertex:gemini-2.5-flash``).

The same ``generateContent`` body and answer as :mod:`assay.models.gemini`, posted to
``{base}/v1/projects/PROJECT/locations/LOCATION/publishers/google/models/MODEL:generateContent``
with an OAuth bearer token; no Google SDK is needed.

``project``: ``project=`` or ``GOOGLE_CLOUD_PROJECT``; ``location``: ``location=`` or
``GOOGLE_CLOUD_LOCATION``, else ``us-central1``. Base URL: ``base_url`` or ``VERTEX_BASE_URL``, else
``https://LOCATION-aiplatform.googleapis.com`` (``https://aiplatform.googleapis.com`` for the
``global`` location). Token: ``access_token=``, else ``VERTEX_ACCESS_TOKEN``, else
``GOOGLE_OAUTH_ACCESS_TOKEN``, else the output of ``gcloud auth print-access-token`` (asked on the
first call, and once more when the server answers 401: such tokens last an hour).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Mapping
from typing import Any

from assay.errors import AssayError
from assay.models.base import ModelCallError
from assay.models.gemini import GeminiModel
from assay.models.http import Secret

DEFAULT_LOCATION = "us-central1"
TOKEN_ENVS = ("VERTEX_ACCESS_TOKEN", "GOOGLE_OAUTH_ACCESS_TOKEN")


def gcloud_token() -> str:
    """An access token from ``gcloud auth print-access-token``; :class:`AssayError` when gcloud is
    missing or fails."""
    exe = shutil.which("gcloud")
    if exe is None:
        raise AssayError("vertex: no access token: set VERTEX_ACCESS_TOKEN, or install gcloud and "
                         "run `gcloud auth login`")
    try:
        p = subprocess.run([exe, "auth", "print-access-token"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AssayError(f"vertex: `gcloud auth print-access-token` failed: {exc}") from None
    token = p.stdout.strip()
    if p.returncode != 0 or not token:
        why = (p.stderr.strip().splitlines() or ["no token printed"])[-1]
        raise AssayError(f"vertex: `gcloud auth print-access-token` failed: {why}")
    return token


class VertexModel(GeminiModel):
    """A Gemini model on Vertex AI (see the module doc)."""

    provider = "Vertex AI"
    kind = "vertex"

    def __init__(self, model: str, *, project: str | None = None, location: str | None = None,
                 access_token: str | None = None, base_url: str | None = None, timeout: float = 120.0,
                 stream: bool = False, extra_body: Mapping[str, Any] | None = None,
                 headers: Mapping[str, str] | None = None):
        if not model:
            raise AssayError("vertex: no model named (e.g. vertex:gemini-2.5-flash)")
        project = project or os.environ.get("GOOGLE_CLOUD_PROJECT")
        if not project:
            raise AssayError("vertex: GOOGLE_CLOUD_PROJECT is not set: export it, or pass project=")
        loc = location or os.environ.get("GOOGLE_CLOUD_LOCATION") or DEFAULT_LOCATION
        host = "https://aiplatform.googleapis.com" if loc == "global" else f"https://{loc}-aiplatform.googleapis.com"
        base = (base_url or os.environ.get("VERTEX_BASE_URL") or host).rstrip("/")
        token = access_token or next((os.environ[e] for e in TOKEN_ENVS if os.environ.get(e)), None)
        self._from_gcloud = token is None
        self._key = Secret(token)
        self.project, self.location = project, loc
        self._token_lock: asyncio.Lock | None = None
        url = f"{base}/v1/projects/{project}/locations/{loc}/publishers/google/models/{model}"
        self._setup(model, base, url, dict(headers or {}), timeout, stream, extra_body)

    @property
    def cache_identity(self) -> str:
        return f"vertex|{self.base_url}|{self.project}|{self.location}|{self.model}"

    async def _headers_now(self) -> Mapping[str, str]:
        if self._key.value is None:
            await self._refresh_token()
        return {**self._headers, "Authorization": f"Bearer {self._key.value}"}

    async def _refresh_token(self) -> None:
        if self._token_lock is None:
            self._token_lock = asyncio.Lock()
        async with self._token_lock:
            token = await asyncio.to_thread(gcloud_token)
            self._key.value = token

    async def send(self, body: Mapping[str, Any], *, stream: bool | None = None) -> tuple[Any, float]:
        try:
            return await super().send(body, stream=stream)
        except ModelCallError as exc:
            if exc.status != 401 or not self._from_gcloud:
                raise
            await self._refresh_token()   # an hour-old token: ask gcloud for a fresh one, once
            return await super().send(body, stream=stream)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_token_lock": None}
