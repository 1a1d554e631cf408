"""An invite link's expiry changed through `PUT /api/admin/invite-link/tokens/:token` (`expiresAt`, as Unleash
takes it), by its secret or its secret's SHA-256 (how the console names it), on SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from tests.server.harness import Api, assert_error, unique


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _invite(api: Api) -> dict:
    soon = _iso(datetime.now(UTC) + timedelta(days=1))
    answer = api.post("/api/admin/invite-link/tokens", {"name": unique("inv"), "expiresAt": soon})
    assert answer.status == 201, answer.body
    return answer.json()


def test_the_expiry_moves_later_and_earlier_and_the_link_follows(api: Api) -> None:
    invite = _invite(api)
    later = datetime.now(UTC).replace(microsecond=0) + timedelta(days=20)
    answer = api.put(f"/api/admin/invite-link/tokens/{invite['secret']}", {"expiresAt": _iso(later)})
    assert answer.status == 200 and answer.json()["expiresAt"] == _iso(later)
    assert api.get(f"/api/admin/invite-link/tokens/{invite['secret']}").json()["expiresAt"] == _iso(later)
    assert api.get(f"/invite/{invite['secret']}/validate", token=None).status == 200
    # The console names the link by its secret's digest; a time in the past ends the link.
    digest = hashlib.sha256(invite["secret"].encode()).hexdigest()
    past = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
    assert api.put(f"/api/admin/invite-link/tokens/{digest}", {"expiresAt": _iso(past)}).status == 200
    assert_error(api.get(f"/invite/{invite['secret']}/validate", token=None), 400, "ValidationError")
    updated = api.get("/api/admin/search/events?limit=10").json()["events"]
    assert [e["data"]["name"] for e in updated if e["type"] == "invite-link-updated"][:2] == [
        invite["name"]
    ] * 2


def test_an_expiry_is_at_most_a_month_ahead_and_must_be_a_time(api: Api) -> None:
    invite = _invite(api)
    path = f"/api/admin/invite-link/tokens/{invite['secret']}"
    answer = api.put(path, {"expiresAt": "2999-01-01T00:00:00Z"})
    assert answer.status == 200
    kept = datetime.fromisoformat(answer.json()["expiresAt"].replace("Z", "+00:00"))
    assert kept <= datetime.now(UTC) + timedelta(days=31, minutes=1)
    for bad in ("next week", "", [], {"at": 1}):
        assert_error(api.put(path, {"expiresAt": bad}), 400, "ValidationError", "expiresAt", context=bad)
    assert_error(
        api.put(f"/api/admin/invite-link/tokens/{unique('none')}", {"expiresAt": "2030-01-01T00:00:00Z"}),
        404,
        "NotFoundError",
    )
