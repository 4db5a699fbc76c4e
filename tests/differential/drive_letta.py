"""Grades a batch of generated cases with the real letta-evals, one process per
batch (run by the differential test with letta-evals' own virtualenv).

Each input line: {"config": {kind, function, extractor, extractor_config?},
"sample": {...}, "trace": [[message, ...], ...], "agent_state": {...}|null}.
Each output line: {score, rationale, submission} or {error: "Type: text"} or
{invalid: ...} when Letta's own message models reject the generated trace.
"""

import asyncio
import json
import sys
from types import SimpleNamespace

from letta_client.types import ToolReturnMessage
from letta_client.types.agents import AssistantMessage, ToolCallMessage, UserMessage
from letta_evals.graders.tool import ToolGrader
from letta_evals.models import Sample

TYPES = {
    "assistant_message": AssistantMessage,
    "tool_call_message": ToolCallMessage,
    "user_message": UserMessage,
    "tool_return_message": ToolReturnMessage,
}


def state(s):
    if s is None:
        return None
    return SimpleNamespace(blocks=[SimpleNamespace(**b) for b in s.get("blocks", [])])


async def run(c):
    try:
        traj = [
            [TYPES[m["message_type"]].model_validate(m) for m in turn]
            for turn in c["trace"]
        ]
    except Exception as ex:  # Letta's models reject the input
        return {"invalid": f"{type(ex).__name__}: {ex}"}
    cfg = c["config"]
    try:
        sample = Sample(**c["sample"])
        g = ToolGrader(
            function=cfg["function"],
            extractor=cfg["extractor"],
            extractor_config=cfg.get("extractor_config"),
        )
        res, sub = await g.grade(sample, traj, agent_state=state(c.get("agent_state")))
    except Exception as ex:  # compared with trajgrade's error
        return {"error": f"{type(ex).__name__}: {ex}"}
    return {"score": res.score, "rationale": res.rationale, "submission": sub}


async def grade_all(cases):
    return [await run(c) for c in cases]


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = [json.loads(line) for line in f if line.strip()]
    answers = asyncio.run(grade_all(cases))
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write("".join(json.dumps(a) + "\n" for a in answers))


main()
