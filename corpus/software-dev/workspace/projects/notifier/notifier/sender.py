"""Delivery channels. Each sender retries transient failures a few times."""

from __future__ import annotations

import asyncio
import logging
from email.message import EmailMessage

import aiosmtplib
import httpx

log = logging.getLogger("notifier.sender")

RETRIES = 3
BACKOFF_SECONDS = 0.5


class EmailSender:
    def __init__(self, host: str, port: int, user: str = "", password: str = "") -> None:
        self.host = host
        self.port = port
        self.user = user
        self.password = password

    async def send(self, sender: str, to: str, subject: str, body: str) -> None:
        msg = EmailMessage()
        msg["From"] = sender
        msg["To"] = to
        msg["Subject"] = subject
        msg.set_content(body)
        for attempt in range(1, RETRIES + 1):
            try:
                await aiosmtplib.send(
                    msg,
                    hostname=self.host,
                    port=self.port,
                    username=self.user or None,
                    password=self.password or None,
                    start_tls=self.port == 587,
                )
                return
            except (aiosmtplib.SMTPException, OSError) as exc:
                log.warning("smtp attempt %d/%d failed: %s", attempt, RETRIES, exc)
                await asyncio.sleep(BACKOFF_SECONDS * attempt)
        log.error("giving up on email to %s", to)


class SlackSender:
    def __init__(self, webhook_url: str, client: httpx.AsyncClient | None = None) -> None:
        self.webhook_url = webhook_url
        self.client = client or httpx.AsyncClient(timeout=5.0)

    async def post(self, text: str) -> bool:
        if not self.webhook_url:
            log.info("slack disabled, dropping message")
            return False
        for attempt in range(1, RETRIES + 1):
            try:
                res = await self.client.post(self.webhook_url, json={"text": text})
                if res.status_code == 200:
                    return True
                if res.status_code == 429:
                    await asyncio.sleep(float(res.headers.get("Retry-After", "1")))
                    continue
                log.warning("slack returned %d: %s", res.status_code, res.text[:200])
            except httpx.HTTPError as exc:
                log.warning("slack attempt %d/%d failed: %s", attempt, RETRIES, exc)
            await asyncio.sleep(BACKOFF_SECONDS * attempt)
        return False
