"""The models are the document's: generated from openapi/openapi.json, one
field per property, and they read and write the document's examples."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, Tuple

import pytest

import arbiterhq
from arbiterhq import _models

SDK = Path(__file__).resolve().parents[1]
DOCUMENT = SDK.parents[1] / "openapi" / "openapi.json"
DOC: Dict[str, Any] = json.loads(DOCUMENT.read_text())
SCHEMAS: Dict[str, Any] = DOC["components"]["schemas"]


def test_the_committed_models_are_what_the_document_generates(tmp_path: Path) -> None:
    out = tmp_path / "_models.py"
    subprocess.run([sys.executable, str(SDK / "scripts" / "generate_models.py"), str(DOCUMENT), str(out)], check=True)
    assert out.read_text() == (SDK / "src" / "arbiterhq" / "_models.py").read_text(), \
        "src/arbiterhq/_models.py differs from openapi/openapi.json; run 'make sdk-wire' and commit"


def _checked_models() -> Iterator[Tuple[str, Any]]:
    for name in ("Task", "Attempt", "Policy", "CalibrationReport", "AgreementReport", "Display", "ReviewRequirement",
                 "TaskEscalation", "EscalationRung", "WebhookTaskEvent", "CalibrationDrift", "ReviewerAgreement"):
        yield name, getattr(arbiterhq, name)


@pytest.mark.parametrize("name, cls", list(_checked_models()))
def test_every_property_of_the_document_is_a_field(name: str, cls: Any) -> None:
    fields = {f.name for f in dataclasses.fields(cls)} - {"extra"}
    assert fields == set(SCHEMAS[name]["properties"]), name
    required = {f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING and f.name != "extra"}
    assert required == set(SCHEMAS[name].get("required", [])), name


def test_the_request_params_take_every_property_of_their_bodies() -> None:
    for schema, params in (("TaskCreate", arbiterhq.TaskCreateParams), ("TaskBatchItem", arbiterhq.TaskBatchItemParams),
                           ("PolicyPut", arbiterhq.PolicyUpdateParams)):
        keys = set(params.__required_keys__) | set(params.__optional_keys__)
        assert keys == set(SCHEMAS[schema]["properties"]), schema
        assert set(params.__required_keys__) == set(SCHEMAS[schema].get("required", [])), schema
    options = set(arbiterhq.TaskCreateOptions.__optional_keys__)
    assert options == set(SCHEMAS["TaskCreate"]["properties"]) - {"prompt", "allowed_verdicts", "context"}


def _without_absent(value: Any, schema: Dict[str, Any]) -> Any:
    """The example as to_dict writes it: optional properties that are null
    left out (None is how a model says absent)."""
    if "$ref" in schema:
        schema = SCHEMAS[schema["$ref"].rsplit("/", 1)[-1]]
    if isinstance(value, dict) and "properties" in schema:
        required = set(schema.get("required", []))
        return {k: _without_absent(v, schema["properties"].get(k, {})) for k, v in value.items()
                if v is not None or k in required}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_without_absent(v, schema["items"]) for v in value]
    return value


def _media_examples(media: Dict[str, Any]) -> Iterator[Any]:
    if "example" in media:
        yield media["example"]
    for e in media.get("examples", {}).values():
        if "$ref" in e:
            e = DOC["components"]["examples"][e["$ref"].rsplit("/", 1)[-1]]
        if "value" in e:
            yield e["value"]


def _examples() -> Iterator[Tuple[str, Any]]:
    models = dict(_checked_models())
    lists = {"TaskList": ("tasks", "Task"), "PolicyList": ("policies", "Policy")}
    for name, cls in models.items():
        if "example" in SCHEMAS[name]:
            yield name, (cls, SCHEMAS[name]["example"], SCHEMAS[name])
    for path, item in DOC["paths"].items():
        for method, op in item.items():
            media = op.get("responses", {}).get("200", {}).get("content", {}).get("application/json") if isinstance(op, dict) else None
            if not media or "$ref" not in media.get("schema", {}):
                continue
            name = media["schema"]["$ref"].rsplit("/", 1)[-1]
            for i, example in enumerate(_media_examples(media)):
                at = f"{method.upper()} {path} #{i}"
                if name in models:
                    yield at, (models[name], example, SCHEMAS[name])
                elif name in lists:
                    member, of = lists[name]
                    for j, one in enumerate(example[member]):
                        yield f"{at}.{member}[{j}]", (models[of], one, SCHEMAS[of])
    for event, cls in (("ping", arbiterhq.PingEvent), ("calibration.drifted", arbiterhq.CalibrationDriftedEvent),
                       ("task.vote_recorded", arbiterhq.VoteRecordedEvent)):
        schema = DOC["webhooks"][event]["post"]["requestBody"]["content"]["application/json"]["schema"]
        if "example" in schema:
            yield event, (cls, schema["example"], schema)


@pytest.mark.parametrize("name, case", list(_examples()))
def test_the_documents_examples_read_and_write_back(name: str, case: Any) -> None:
    cls, example, schema = case
    obj = cls.from_dict(example)
    assert obj.extra == {}, f"{name}: the model dropped {sorted(obj.extra)} into extra"
    assert obj.to_dict() == _without_absent(example, schema)


def test_the_models_module_exports_what_it_generates() -> None:
    for name in _models.__all__:
        assert getattr(arbiterhq, name) is getattr(_models, name), name
