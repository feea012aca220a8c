import httpx
import pytest
import respx

from notifier.sender import SlackSender
from notifier.templates import format_cents, render

HOOK = "https://hooks.slack.test/services/T000/B000/XXXX"


@respx.mock
async def test_slack_post_ok() -> None:
    route = respx.post(HOOK).mock(return_value=httpx.Response(200, text="ok"))
    sender = SlackSender(HOOK)
    assert await sender.post("hello") is True
    assert route.called
    assert route.calls.last.request.content == b'{"text":"hello"}'


@respx.mock
async def test_slack_retries_on_500(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("notifier.sender.BACKOFF_SECONDS", 0)
    route = respx.post(HOOK).mock(side_effect=[httpx.Response(500), httpx.Response(200)])
    assert await SlackSender(HOOK).post("retry me") is True
    assert route.call_count == 2


async def test_slack_disabled_without_url() -> None:
    assert await SlackSender("").post("dropped") is False


@pytest.mark.parametrize(
    ("cents", "expected"),
    [(0, "0.00 EUR"), (1999, "19.99 EUR"), (-250, "-2.50 EUR"), (100000, "1000.00 EUR")],
)
def test_format_cents(cents: int, expected: str) -> None:
    assert format_cents(cents) == expected


def test_render_transfer_rejected() -> None:
    subject, body = render(
        "transfer.rejected",
        {"amount": 1250, "from_account": "acc-1", "reason": "insufficient funds"},
    )
    assert subject == "Transfer of 12.50 EUR rejected"
    assert "insufficient funds" in body
