"""Amazon Bedrock's Converse API as a chat backend: ``bedrock:MODEL_ID``
(e.g. ``bedrock:anthropic.claude-3-5-haiku-20241022-v1:0``, an inference profile such as
``bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0``, or an ARN).

One ``POST {endpoint}/model/MODEL_ID/converse`` per call (the model id percent-encoded in the path),
signed with AWS Signature Version 4 by :mod:`assay.models.sigv4` (service ``bedrock``); no AWS SDK is
needed. The body: ``messages`` (user and assistant turns with ``text`` content blocks, consecutive
turns of one role merged), the system messages as ``system`` blocks, and ``inferenceConfig`` with
``maxTokens`` and ``temperature``. The answer's ``output.message.content`` text blocks are joined;
``usage.inputTokens`` / ``outputTokens`` and ``stopReason`` are read.

Non-streaming: ConverseStream's binary event-stream framing is not spoken; a judge's answer is read
whole. Converse returns no log-probabilities: ``logprobs`` asked for are not returned and
:meth:`BedrockModel.distribution` raises one line saying so; it has no JSON mode (the prompt asks).

Credentials from ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and, for temporary ones,
``AWS_SESSION_TOKEN`` (profiles and SSO are not read: ``aws configure export-credentials --format
env`` prints them as variables); region from ``region=``, ``AWS_REGION`` or ``AWS_DEFAULT_REGION``.
Endpoint: ``base_url``, ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME`` or ``AWS_ENDPOINT_URL``, else
``https://bedrock-runtime.REGION.amazonaws.com``. ``ThrottlingException`` (429, with any
``retry-after``) reaches the limiter as a rate limit; ``ServiceUnavailableException`` (503) and
``ModelTimeoutException`` (408) are retried.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

import orjson

from assay.errors import AssayError
from assay.models.base import Generation, Messages, ModelCallError, TokenUsage
from assay.models.http import Secret
from assay.models.provider_http import NativeModel, ProviderPost, finish_reason, merge_turns, split_system
from assay.models.sigv4 import Credentials, sign

SERVICE = "bedrock"
DEFAULT_CONCURRENCY = 8
# us.anthropic.claude-3-5-haiku-20241022-v1:0 -> claude-3-5-haiku (the price table's name)
_PROFILE = re.compile(r"^(?:us|eu|apac|jp|au|ca|us-gov|global)\.")
_VERSION = re.compile(r"(?:-\d{8})?(?:-v\d+(?::\d+)?)?$")


def converse_body(messages: Messages, *, max_tokens: int | None = None, temperature: float | None = 0.0,
                  extra_body: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON body of one Converse request."""
    system, rest = split_system(messages)
    body: dict[str, Any] = {"messages": [{"role": t["role"], "content": [{"text": t["content"]}]}
                                         for t in merge_turns(rest)]}
    if system:
        body["system"] = [{"text": system}]
    config: dict[str, Any] = {}
    if max_tokens is not None:
        config["maxTokens"] = int(max_tokens)
    if temperature is not None:
        config["temperature"] = float(temperature)
    if config:
        body["inferenceConfig"] = config
    body.update(extra_body or {})
    return body


def read_converse(name: str, data: Any, latency: float, model: str = "") -> Generation:
    """A Converse answer as a :class:`Generation`: the output message's text blocks joined."""
    msg = ((data.get("output") or {}).get("message") or {}) if isinstance(data, Mapping) else {}
    content = msg.get("content")
    if not isinstance(content, list):
        raise ModelCallError(f"{name}: the answer has no output message: {str(data)[:200]}",
                             kind="bad_response", retryable=True)
    text = "".join(str(b.get("text") or "") for b in content if isinstance(b, Mapping) and "text" in b)
    u = data.get("usage") or {}
    return Generation(text=text, usage=TokenUsage(int(u.get("inputTokens") or 0), int(u.get("outputTokens") or 0)),
                      latency_s=latency, model=model, raw=data, finish_reason=finish_reason(data.get("stopReason")))


def env_credentials() -> Credentials:
    """The credentials in ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``."""
    ak, sk = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    missing = [n for n, v in (("AWS_ACCESS_KEY_ID", ak), ("AWS_SECRET_ACCESS_KEY", sk)) if not v]
    if missing:
        raise AssayError(f"bedrock: {' and '.join(missing)} not set (export them, e.g. from "
                         "`aws configure export-credentials --format env`)")
    return Credentials(ak or "", sk or "", os.environ.get("AWS_SESSION_TOKEN") or None)


class BedrockModel(NativeModel):
    """A model behind Bedrock's Converse API (see the module doc)."""

    provider = "Bedrock Converse API"
    kind = "bedrock"
    capabilities = {"json_mode": None, "logprobs": False, "max_tokens_param": "inferenceConfig.maxTokens"}

    def __init__(self, model: str, *, region: str | None = None, credentials: Credentials | None = None,
                 base_url: str | None = None, timeout: float = 120.0, extra_body: Mapping[str, Any] | None = None):
        if not model:
            raise AssayError("bedrock: no model id named (e.g. bedrock:anthropic.claude-3-5-haiku-20241022-v1:0)")
        region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if not region:
            raise AssayError("bedrock: no region: set AWS_REGION (e.g. us-east-1), or pass region=")
        self.creds = credentials or env_credentials()
        base = (base_url or os.environ.get("AWS_ENDPOINT_URL_BEDROCK_RUNTIME") or os.environ.get("AWS_ENDPOINT_URL")
                or f"https://bedrock-runtime.{region}.amazonaws.com").rstrip("/")
        if not re.match(r"^https?://", base, re.I):
            raise AssayError(f"bedrock endpoint must start with http:// or https://, got {base!r}")
        self.model, self.region, self.base_url = model, region, base
        self.timeout = float(timeout)
        self.extra_body = dict(extra_body or {})
        self.default_concurrency = DEFAULT_CONCURRENCY
        self._secret = Secret(self.creds.secret_key)
        self._url = f"{base}/model/{urllib.parse.quote(model, safe='')}/converse"
        self._post = ProviderPost(self.name, base, timeout=self.timeout, scrub=self._scrub)

    def _scrub(self, text: str) -> str:
        text = self._secret.scrub(text)
        tok = self.creds.session_token
        return text.replace(tok, "***") if tok and text else text

    @property
    def price_model(self) -> str:
        mid = self.model.rsplit("/", 1)[-1]                 # an ARN's last part
        mid = _PROFILE.sub("", mid)
        mid = mid.split(".", 1)[1] if "." in mid else mid    # the vendor: anthropic., amazon., meta.
        return _VERSION.sub("", mid)

    def build_body(self, messages: Messages, *, max_tokens: int | None = None, temperature: float | None = 0.0,
                   **_: Any) -> dict[str, Any]:
        """The JSON body :meth:`generate` sends (``response_format`` and ``logprobs`` have no field)."""
        return converse_body(messages, max_tokens=max_tokens, temperature=temperature, extra_body=self.extra_body)

    def signed_headers(self, payload: bytes, now: float | str | None = None) -> dict[str, str]:
        """The headers of one Converse request carrying ``payload``, signed."""
        headers = {"host": self._post.http.host_header, "content-type": "application/json"}
        signed = sign("POST", self._url, headers, payload, self.creds, region=self.region, service=SERVICE, now=now)
        return {"Content-Type": "application/json", "Accept": "application/json", **signed}

    async def send(self, body: Mapping[str, Any]) -> tuple[Any, float]:
        """POST ``body`` to ``converse``, signed: ``(answer, seconds)``."""
        payload = orjson.dumps(body)
        target = urllib.parse.urlsplit(self._url).path
        return await self._post.post(target, self.signed_headers(payload), payload)

    def read(self, data: Any, latency: float) -> Generation:
        return read_converse(self.name, data, latency, self.model)
