"""HTTP entry point: receives ledger events and dispatches notifications."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import BackgroundTasks, FastAPI, Header, HTTPException
from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from notifier.sender import EmailSender, SlackSender
from notifier.templates import render

log = logging.getLogger("notifier")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", env_prefix="NOTIFIER_")

    smtp_host: str = "localhost"
    smtp_port: int = 1025
    smtp_user: str = ""
    smtp_password: str = ""
    mail_from: str = "ledger-notifications@example.com"
    slack_webhook_url: str = ""
    inbound_token: str = ""


ROUTES: dict[str, tuple[str, ...]] = {
    "transfer.created": ("email",),
    "transfer.rejected": ("email", "slack"),
    "account.overdrawn": ("slack",),
}


class Event(BaseModel):
    type: str
    recipient: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)


settings = Settings()
app = FastAPI(title="notifier")
email = EmailSender(settings.smtp_host, settings.smtp_port, settings.smtp_user, settings.smtp_password)
slack = SlackSender(settings.slack_webhook_url)


@app.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@app.post("/events", status_code=202)
async def receive(event: Event, tasks: BackgroundTasks, x_token: str = Header(default="")) -> dict[str, str]:
    if settings.inbound_token and x_token != settings.inbound_token:
        raise HTTPException(status_code=401, detail="bad token")
    channels = ROUTES.get(event.type)
    if channels is None:
        log.info("ignoring unknown event type %s", event.type)
        return {"status": "ignored"}
    subject, body = render(event.type, event.data)
    if "email" in channels and event.recipient:
        tasks.add_task(email.send, settings.mail_from, event.recipient, subject, body)
    if "slack" in channels:
        tasks.add_task(slack.post, f"*{subject}*\n{body}")
    return {"status": "queued"}
