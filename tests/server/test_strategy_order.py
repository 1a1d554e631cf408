"""`POST .../strategies/set-sort-order` (Unleash's route, what the console's Move up/down sends) on SQLite
and PostgreSQL: the new order is the listing's and the client API's, bad items are a 400 naming them, a
strategy of another feature a 404, a Viewer a 403."""

from __future__ import annotations

from tests.server.harness import Api, assert_error, unique


def _setup(api: Api) -> tuple[str, str, list[str]]:
    name = unique("ordered")
    api.create_feature(name)
    ids = [
        api.add_strategy(name, {"name": "userWithId", "parameters": {"userIds": user}})["id"]
        for user in ("a", "b", "c")
    ]
    return name, f"/api/admin/projects/default/features/{name}/environments/development/strategies", ids


def test_the_order_set_is_the_order_listed_and_served(api: Api):
    name, path, ids = _setup(api)
    order = [{"id": ids[2], "sortOrder": 0}, {"id": ids[0], "sortOrder": 1}, {"id": ids[1], "sortOrder": 2}]
    answer = api.post(path + "/set-sort-order", order)
    assert answer.status == 200, answer.body
    assert [s["id"] for s in api.get(path).json()] == [ids[2], ids[0], ids[1]]
    api.switch(name, True)
    served = next(f for f in api.client_features()["features"] if f["name"] == name)
    assert [s["parameters"]["userIds"] for s in served["strategies"]] == ["c", "a", "b"]


def test_bad_items_unknown_strategies_and_viewers_are_refused(api: Api):
    _, path, ids = _setup(api)
    _, _, other_ids = _setup(api)
    bad = [{"id": ids[0], "sortOrder": 1}, {"id": ids[1], "sortOrder": "first"}]
    assert_error(api.post(path + "/set-sort-order", bad), 400, "ValidationError", "[1].sortOrder")
    assert_error(api.post(path + "/set-sort-order", {"id": ids[0]}), 400, "ValidationError", "body")
    foreign = [{"id": other_ids[0], "sortOrder": 5}]
    assert_error(api.post(path + "/set-sort-order", foreign), 404, "NotFoundError")
    _, viewer_token = api.user_with_token(3)
    refused = Api(api.port, viewer_token).post(path + "/set-sort-order", [{"id": ids[2], "sortOrder": -1}])
    assert_error(refused, 403, "NoAccessError")
    assert [s["id"] for s in api.get(path).json()] == ids  # nothing moved
