"""Has the official openai and anthropic SDKs call the scripted model server and parse its answers.

Usage: sdk_check.py BASE_URL   (the fixture's script: see model_fixture_speaks_the_sdks.rs)
Prints one JSON line of what each SDK read; any parse failure raises.
"""
import json
import sys

import anthropic
import openai

base = sys.argv[1]
tools_oa = [{"type": "function", "function": {"name": "hashes", "description": "h",
             "parameters": {"type": "object", "properties": {}}}}]
tools_an = [{"name": "hashes", "description": "h", "input_schema": {"type": "object", "properties": {}}}]
out = {}

oa = openai.OpenAI(base_url=base, api_key="test-key", max_retries=0)
r = oa.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], tools=tools_oa)
call = r.choices[0].message.tool_calls[0]
out["openai_tool"] = [call.id, call.function.name, json.loads(call.function.arguments)]
out["openai_finish"] = r.choices[0].finish_reason
out["openai_usage"] = [r.usage.prompt_tokens, r.usage.completion_tokens]
r = oa.chat.completions.create(model="m", messages=[
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": call.id, "type": "function",
        "function": {"name": "hashes", "arguments": call.function.arguments}}]},
    {"role": "tool", "tool_call_id": call.id, "content": "[ev_0001] ok"}], tools=tools_oa)
out["openai_text"] = r.choices[0].message.content
try:
    oa.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    out["openai_429"] = None
except openai.RateLimitError as e:
    out["openai_429"] = [e.status_code, e.response.headers.get("retry-after")]

an = anthropic.Anthropic(base_url=base.removesuffix("/v1"), api_key="test-key", max_retries=0)
m = an.messages.create(model="c", max_tokens=100, messages=[{"role": "user", "content": "hi"}], tools=tools_an)
block = [b for b in m.content if b.type == "tool_use"][0]
out["anthropic_tool"] = [block.id, block.name, block.input]
out["anthropic_stop"] = m.stop_reason
out["anthropic_usage"] = [m.usage.input_tokens, m.usage.output_tokens]
m = an.messages.create(model="c", max_tokens=100, tools=tools_an, messages=[
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": block.id, "name": "hashes", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block.id, "content": "[ev_0001] ok"}]}])
out["anthropic_text"] = m.content[0].text
try:
    an.messages.create(model="c", max_tokens=100, messages=[{"role": "user", "content": "hi"}])
    out["anthropic_500"] = None
except anthropic.InternalServerError as e:
    out["anthropic_500"] = e.status_code
print(json.dumps(out))
