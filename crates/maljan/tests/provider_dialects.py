"""Checks the agent's tool declarations, per provider dialect, with the providers' own SDK types
and the registries' schema validators (see provider_dialects.rs, which writes them).

Usage: provider_dialects.py DECLARATIONS.json
  DECLARATIONS.json: {"openai": [tool entries], "anthropic": [...], "gemini": [...]}
Prints one JSON line: per dialect, the tools checked, how many are strict (OpenAI) and every
problem found ("tool: what").
"""
import copy
import json
import sys

import jsonschema
import openai.types.chat as oa_chat
import anthropic.types as an_types
from openai.lib._pydantic import _ensure_strict_json_schema
from openapi_spec_validator import OpenAPIV30SpecValidator
from pydantic import TypeAdapter

declared = json.load(open(sys.argv[1]))
oa_tool = TypeAdapter(oa_chat.ChatCompletionFunctionToolParam)
an_tool = TypeAdapter(an_types.ToolParam)
meta = jsonschema.Draft202012Validator
out = {}


def sdk_type(adapter, entry, problems, name):
    try:
        adapter.validate_python(entry, strict=True)
    except Exception as e:  # pydantic.ValidationError: what the SDK's type refuses
        problems.append(f"{name}: the SDK type refuses it: {e}")


def meta_schema(schema, problems, name):
    for e in meta(meta.META_SCHEMA).iter_errors(schema):
        problems.append(f"{name}: not JSON Schema 2020-12: {e.message}")


# OpenAI: the SDK's ChatCompletionFunctionToolParam; every parameters schema valid JSON Schema;
# a strict one unchanged by the SDK's own strict-schema pass (what `pydantic_function_tool` and
# `to_strict_json_schema` send), i.e. already in the form strict mode requires.
problems, strict = [], 0
for entry in declared["openai"]:
    fn = entry["function"]
    name = fn["name"]
    sdk_type(oa_tool, entry, problems, name)
    meta_schema(fn["parameters"], problems, name)
    if fn.get("strict") is True:
        strict += 1
        params = copy.deepcopy(fn["parameters"])
        again = _ensure_strict_json_schema(params, path=(), root=params)
        if again != fn["parameters"]:
            problems.append(f"{name}: the SDK's strict pass changes it: {json.dumps(again)[:400]}")
out["openai"] = {"tools": len(declared["openai"]), "strict": strict, "problems": problems}

# Anthropic: the SDK's ToolParam; input_schema valid JSON Schema 2020-12.
problems = []
for entry in declared["anthropic"]:
    sdk_type(an_tool, entry, problems, entry["name"])
    meta_schema(entry["input_schema"], problems, entry["name"])
out["anthropic"] = {"tools": len(declared["anthropic"]), "problems": problems}

# Gemini through its OpenAI-compatible endpoint: the OpenAI SDK's type for the entry, and every
# parameters schema a valid OpenAPI 3.0 Schema Object (embedded in a minimal document, validated
# by openapi-spec-validator).
problems = []
schemas = {}
for entry in declared["gemini"]:
    fn = entry["function"]
    sdk_type(oa_tool, entry, problems, fn["name"])
    if "parameters" in fn:
        schemas[fn["name"]] = fn["parameters"]
doc = {"openapi": "3.0.3", "info": {"title": "maljan tools", "version": "0"}, "paths": {},
       "components": {"schemas": schemas}}
for e in OpenAPIV30SpecValidator(doc).iter_errors():
    where = "/".join(str(p) for p in e.path)
    problems.append(f"{where}: not an OpenAPI 3.0 schema: {e.message[:300]}")
out["gemini"] = {"tools": len(declared["gemini"]), "with_parameters": len(schemas),
                 "problems": problems}

print(json.dumps(out))
