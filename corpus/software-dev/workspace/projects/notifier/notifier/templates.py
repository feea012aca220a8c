"""Message templates, one per event type. Kept in code so they are reviewed with it."""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, StrictUndefined

_env = Environment(undefined=StrictUndefined, autoescape=False, trim_blocks=True)

TEMPLATES: dict[str, tuple[str, str]] = {
    "transfer_created": (
        "Transfer of {{ amount }} sent",
        "Hello,\n\n{{ amount }} was transferred from account {{ from_account }} "
        "to account {{ to_account }} on {{ at }}.\n\nReference: {{ transfer_id }}\n",
    ),
    "transfer_rejected": (
        "Transfer of {{ amount }} rejected",
        "A transfer of {{ amount }} from account {{ from_account }} was rejected: "
        "{{ reason }}.\n\nNo money has moved.\n",
    ),
    "account_overdrawn": (
        "Account {{ account }} is overdrawn",
        "Account {{ account }} is at {{ balance }} (limit {{ limit }}).",
    ),
}


def format_cents(cents: int, currency: str = "EUR") -> str:
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{cents // 100}.{cents % 100:02d} {currency}"


def render(event_type: str, data: dict[str, Any]) -> tuple[str, str]:
    name = event_type.replace(".", "_")
    subject_src, body_src = TEMPLATES[name]
    ctx = dict(data)
    for key in ("amount", "balance", "limit"):
        if isinstance(ctx.get(key), int):
            ctx[key] = format_cents(ctx[key], ctx.get("currency", "EUR"))
    subject = _env.from_string(subject_src).render(**ctx)
    body = _env.from_string(body_src).render(**ctx)
    return subject, body
