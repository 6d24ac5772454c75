"""The two roles of the REST API (docs/operations.md, "Roles"): the operator's token changes
state, the viewer's reads everything and is refused every change with 403 naming its role;
tokens come from the configuration, a file or the environment, are kept only as digests, and a
token with whitespace is refused with a message that says so. The real app, ledger and SQLite;
the switches faked."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import RESERVATION, FakeFabric, chain_config
from fastapi.testclient import TestClient

from terrapin.config import OPERATOR_TOKEN_ENV, VIEWER_TOKEN_ENV, Config, ConfigError
from terrapin.main import Controller

OPERATOR = "secret-token"  # chain_config's rest.token
VIEWER = "look-only"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def controller(**rest: Any) -> Controller:
    base = chain_config(4)
    config = base.model_copy(update={"rest": base.rest.model_copy(update=rest)})

    def factory(config: Config, topo: Any, on_packet: Any, desired: Any, replica: Any) -> FakeFabric:
        return FakeFabric(topo.switch_names)

    return Controller(config, fabric_factory=factory)


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(controller(viewer_token=VIEWER).app) as c:
        yield c


def test_the_viewer_reads_everything(client: TestClient) -> None:
    created = client.post("/reservations", json=RESERVATION, headers=bearer(OPERATOR))
    assert created.status_code == 201, created.json()
    rid = created.json()["id"]
    for path in (
        "/reservations",
        f"/reservations/{rid}",
        f"/reservations/{rid}/counters",
        "/status/switches",
        "/status/switches/s1",
        "/monitor",
        "/events",
        "/metrics",
        "/topology",
        "/health",
        "/",
    ):
        reply = client.get(path, headers=bearer(VIEWER))
        assert reply.status_code == 200, (path, reply.text)


# Every call that changes state, with a body where it needs one.
CHANGES: list[tuple[str, str, Any]] = [
    ("POST", "/reservations", RESERVATION),
    ("POST", "/reservations/batch", {"reservations": [RESERVATION]}),
    ("DELETE", "/reservations/{rid}", None),
    ("DELETE", "/status/switches/s1/maxima", None),
]


@pytest.mark.parametrize(("method", "path", "body"), CHANGES)
def test_the_viewer_changes_nothing_and_is_told_its_role(
    client: TestClient, caplog: pytest.LogCaptureFixture, method: str, path: str, body: Any
) -> None:
    created = client.post("/reservations", json={**RESERVATION, "src_port": 7000}, headers=bearer(OPERATOR))
    rid = created.json()["id"]
    before = client.get("/reservations").json()
    caplog.set_level(logging.WARNING, logger="terrapin.api")
    target = path.format(rid=rid)
    reply = client.request(method, target, json=body, headers=bearer(VIEWER))
    assert reply.status_code == 403, reply.text
    assert reply.json() == {
        "error": "forbidden",
        "role": "viewer",
        "message": f"the viewer role may read but not change anything: {method} {target} "
        "needs the operator's token",
    }
    assert client.get("/reservations").json() == before  # nothing changed
    refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(refused) == 1 and "the viewer role may not change anything" in refused[0], refused


def test_the_operator_changes_and_role_says_who_is_who(client: TestClient) -> None:
    assert client.get("/role").json() == {"role": None, "may_change": False}
    assert client.get("/role", headers=bearer(VIEWER)).json() == {"role": "viewer", "may_change": False}
    assert client.get("/role", headers=bearer(OPERATOR)).json() == {"role": "operator", "may_change": True}
    created = client.post("/reservations", json=RESERVATION, headers=bearer(OPERATOR))
    assert created.status_code == 201
    assert client.delete(f"/reservations/{created.json()['id']}", headers=bearer(OPERATOR)).status_code == 204


@pytest.mark.parametrize(
    ("header", "says"),
    [
        (None, "a valid bearer token is required"),
        ("Bearer nobody-s-token", "the bearer token is not valid"),
        ("Basic c2VjcmV0", "the Authorization header must be 'Bearer <token>'"),
        (f"Bearer  {OPERATOR}", "the bearer token has whitespace in or around it"),
        (f"Bearer {OPERATOR} x", "the bearer token has whitespace in or around it"),
        (f"Bearer {OPERATOR}\tx", "the bearer token has whitespace in or around it"),
    ],
)
def test_a_bad_token_is_refused_401_saying_what_is_wrong(
    client: TestClient, header: str | None, says: str
) -> None:
    headers = {} if header is None else {"Authorization": header}
    reply = client.post("/reservations", json=RESERVATION, headers=headers)
    assert reply.status_code == 401
    assert reply.headers["www-authenticate"] == "Bearer"
    assert reply.json()["error"].startswith(says), reply.json()
    assert client.get("/reservations").json() == []


def test_the_app_keeps_digests_not_tokens() -> None:
    ctl = controller(viewer_token=VIEWER)
    tokens = ctl.app.state.api.tokens
    # what the requests are checked against (the configuration itself is not kept by the API)
    kept = repr(ctl.app.state.api)
    assert OPERATOR not in kept and VIEWER not in kept
    assert [role for _digest, role in tokens.digests] == ["operator", "viewer"]
    assert tokens.role(OPERATOR) == "operator" and tokens.role(VIEWER) == "viewer"
    assert tokens.role(OPERATOR[:-1]) is None


def test_tokens_from_files_and_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    operator_file, viewer_file = tmp_path / "operator", tmp_path / "viewer"
    operator_file.write_text("from-a-file\n")  # `echo token > file`: the line's end is not the token's
    viewer_file.write_text("viewer-from-a-file")
    with TestClient(
        controller(token=None, token_file=str(operator_file), viewer_token_file=str(viewer_file)).app
    ) as c:
        assert c.get("/role", headers=bearer("from-a-file")).json()["role"] == "operator"
        assert c.get("/role", headers=bearer("viewer-from-a-file")).json()["role"] == "viewer"
    monkeypatch.setenv(OPERATOR_TOKEN_ENV, "from-the-environment")
    monkeypatch.setenv(VIEWER_TOKEN_ENV, "viewer-from-the-environment")
    ctl = controller(token=None)
    assert ctl.generated_token is None
    with TestClient(ctl.app) as c:
        assert c.get("/role", headers=bearer("from-the-environment")).json()["role"] == "operator"
        assert c.get("/role", headers=bearer("viewer-from-the-environment")).json()["role"] == "viewer"
    # the configuration's own setting comes first
    with TestClient(controller().app) as c:
        assert c.get("/role", headers=bearer(OPERATOR)).json()["role"] == "operator"


def test_the_single_token_setting_is_the_operators_and_none_makes_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(OPERATOR_TOKEN_ENV, raising=False)
    with TestClient(controller().app) as c:  # rest.token alone, as before the roles
        assert c.get("/role", headers=bearer(OPERATOR)).json()["role"] == "operator"
        assert c.get("/role", headers=bearer(VIEWER)).status_code == 401
    ctl = controller(token=None)
    assert ctl.generated_token is not None and len(ctl.generated_token) >= 24
    with TestClient(ctl.app) as c:
        assert c.get("/role", headers=bearer(ctl.generated_token)).json()["role"] == "operator"


@pytest.mark.parametrize(
    ("contents", "says"),
    [
        ("token \n", "the token ends in whitespace (' '); remove it"),
        ("token\n\n", "the token ends in whitespace ('\\n'); remove it"),
        ("token\t\n", "the token ends in whitespace ('\\t'); remove it"),
        (" token", "the token starts with whitespace; remove it"),
        ("to ken", "the token contains whitespace; a bearer token cannot"),
        ("\n", "the token is empty"),
    ],
)
def test_a_token_file_with_whitespace_is_refused_at_start(tmp_path: Path, contents: str, says: str) -> None:
    path = tmp_path / "viewer"
    path.write_text(contents)
    with pytest.raises(ConfigError) as refused:
        controller(viewer_token_file=str(path))
    assert str(refused.value) == f"rest.viewer_token_file {path}: {says}"


def test_other_token_sources_are_refused_with_their_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match=r"^rest.token: the token ends in whitespace"):
        controller(token="secret-token ")
    monkeypatch.setenv(VIEWER_TOKEN_ENV, "viewer\t")
    with pytest.raises(ConfigError, match=rf"^\${VIEWER_TOKEN_ENV}: the token ends in whitespace"):
        controller()
    monkeypatch.delenv(VIEWER_TOKEN_ENV)
    with pytest.raises(ConfigError, match=r"rest.token_file \S+/absent: cannot read it: No such file"):
        controller(token=None, token_file=str(tmp_path / "absent"))
    with pytest.raises(ConfigError, match="the viewer's token is the operator's"):
        controller(viewer_token=OPERATOR)


def test_the_openapi_document_names_403_on_every_change(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for method, path, _body in CHANGES:
        path = path.replace("{rid}", "{reservation_id}").replace("s1", "{name}")
        responses = paths[path][method.lower()]["responses"]
        assert "403" in responses, (method, path)
    assert "403" not in paths["/reservations"]["get"]["responses"]
