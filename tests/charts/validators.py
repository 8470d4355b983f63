"""Validators built from the real schemas and models available offline: KubeRay's CRDs (made strict),
kubernetes-validate for core objects, and Ray 2.58's own config models."""

from __future__ import annotations

import ast
import copy
import functools
import typing
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from pydantic import BaseModel

from ..reference_data import kuberay_crd


def strict(schema: Any) -> Any:
    """Reject unknown fields: additionalProperties: false wherever the schema lists `properties` and
    does not preserve unknown fields (a CRD schema otherwise accepts any misspelt field)."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
            and "additionalProperties" not in out
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


@functools.cache
def crd_validator(kind: str) -> jsonschema.Draft7Validator:
    path = kuberay_crd(kind)
    crd = yaml.safe_load(path.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema = strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
    return jsonschema.Draft7Validator(schema)


def crd_errors(obj: dict[str, Any]) -> list[str]:
    validator = crd_validator(obj["kind"])
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)]


# --- Ray ---------------------------------------------------------------------------------------


def _ray_source(relative: str) -> Path:
    import ray

    return Path(ray.__file__).parent / relative


def class_fields(relative: str, class_name: str) -> set[str]:
    """Field names of a pydantic model in Ray's source, read with `ast`: PDServingArgs and
    LLMServingArgs cannot be imported without vLLM, but their fields are plain annotations."""
    tree = ast.parse(_ray_source(relative).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return {
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            }
    raise LookupError(f"{class_name} not in {relative}")


PD_ARGS = ("llm/_internal/serve/serving_patterns/prefill_decode/builder.py", "PDServingArgs")
LLM_ARGS = ("llm/_internal/serve/core/ingress/builder.py", "LLMServingArgs")
DEPRECATED_PD_ARGS = {"proxy_cls_config", "proxy_deployment_config"}


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found = []
    for arg in typing.get_args(annotation):
        found += _models_in(arg)
    return found


def unknown_keys(model: type[BaseModel], data: Any, path: str = "", skip: frozenset = frozenset()) -> list[str]:
    """Keys the model does not define, recursively: Ray's ServeDeploySchema ignores them silently."""
    if not isinstance(data, dict):
        return []
    fields = model.model_fields
    names = {name for name in fields} | {f.alias for f in fields.values() if f.alias}
    unknown = []
    for key, value in data.items():
        where = f"{path}.{key}" if path else key
        if key not in names:
            unknown.append(where)
            continue
        if key in skip:
            continue
        for sub in _models_in(fields[key].annotation):
            items = value if isinstance(value, list) else [value]
            for index, item in enumerate(items):
                unknown += unknown_keys(sub, item, f"{where}[{index}]" if isinstance(value, list) else where, skip)
    return unknown
