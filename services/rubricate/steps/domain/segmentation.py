"""Step segmentation of ReAct-style trajectories (Co-ReAct §3.1, ARCO).

A ReAct trajectory interleaves actions and observations (a_1, o_1, a_2, o_2, …); a *step* is
one action with its observation, and h_t = (a_1, o_1, …, a_{t-1}, o_{t-1}) is the prefix
before step t. Three markups are recognised:

- ``call_tool``: ``<call_tool name="…">…</call_tool>`` answered by ``<tool_output>…</tool_output>``
- ``tool_call``: ``<tool_call>…</tool_call>`` answered by ``<tool_response>…</tool_response>``
- ``messages``: OpenAI-style chat messages; an assistant message with ``tool_calls`` is the
  action, the ``tool`` messages after it are the observation.

Rules (documented in docs/steps.md):
- Spans are ``[start, end)`` character offsets. The step spans tile the segmented text with
  no gap: step t runs from the end of step t-1 (0 for the first) through the end of its
  observation, so the reasoning before a call belongs to that call's step.
- Calls separated only by whitespace are one action (parallel calls); observations separated
  only by whitespace are one observation.
- Text after the last observation becomes a ``final`` step (the answer) when it holds anything
  but whitespace; otherwise the last step runs to the end of the text. A text with no tool
  call at all is one ``final`` step.
- In a text, the markup whose call tag appears first is used; the other one's tags are left
  as text. An unclosed call or observation runs to the end of the text.
- Pre-split steps (`segment_steps`) are rendered as ``action\nobservation\n`` one after the
  other; spans index that rendering.
- A message list is segmented on a rendering (`render_messages`): leading system, developer
  and user messages are the prompt and are not rendered; spans index the rendering, and each step
  also has its ``[first, last + 1)`` message indices.
"""

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Span = tuple[int, int]
Markup = Literal["call_tool", "tool_call", "messages", "steps", "none"]
StepKind = Literal["tool", "final"]


@dataclass(frozen=True)
class _Tags:
    markup: Markup
    call_open: re.Pattern[str]
    call_close: str
    obs_open: re.Pattern[str]
    obs_close: str


_TAGS = (
    _Tags(
        "call_tool",
        re.compile(r"<call_tool\b[^>]*>"),
        "</call_tool>",
        re.compile(r"<tool_output\b[^>]*>"),
        "</tool_output>",
    ),
    _Tags(
        "tool_call",
        re.compile(r"<tool_call\b[^>]*>"),
        "</tool_call>",
        re.compile(r"<tool_response\b[^>]*>"),
        "</tool_response>",
    ),
)


@dataclass(frozen=True)
class Step:
    index: int
    kind: StepKind
    span: Span
    """The whole step: reasoning, action and observation."""
    action_span: Span
    """The tool call(s), or the final answer text."""
    observation_span: Span | None = None
    message_span: Span | None = None
    """For message input: ``[first, last + 1)`` indices into the message list."""


@dataclass(frozen=True)
class Segmentation:
    markup: Markup
    text: str
    """The segmented text: the trajectory itself, or the rendering of a message list."""
    steps: tuple[Step, ...]
    prompt_messages: int = 0
    """For message input: how many leading system/user messages were taken as the prompt."""

    def history(self, index: int) -> str:
        """h_t: everything before step `index`."""
        return self.text[: self.steps[index].span[0]]

    def action(self, index: int) -> str:
        """What the agent produced in step `index`: its reasoning and its action."""
        step = self.steps[index]
        return self.text[step.span[0] : step.action_span[1]]

    def observation(self, index: int) -> str | None:
        span = self.steps[index].observation_span
        return None if span is None else self.text[span[0] : span[1]]


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _element_end(text: str, start: int, opener: re.Pattern[str], closer: str) -> int:
    """End of the element opened at `start` (after its closing tag), or len(text)."""
    match = opener.match(text, start)
    assert match is not None
    close = text.find(closer, match.end())
    return len(text) if close < 0 else close + len(closer)


def _run(text: str, start: int, opener: re.Pattern[str], closer: str) -> int:
    """End of a run of elements (separated by whitespace only) starting with one at `start`."""
    end = _element_end(text, start, opener, closer)
    while True:
        nxt = _skip_ws(text, end)
        if nxt >= len(text) or not opener.match(text, nxt):
            return end
        end = _element_end(text, nxt, opener, closer)


def _detect(text: str) -> _Tags | None:
    found = [(m.start(), tags) for tags in _TAGS if (m := tags.call_open.search(text))]
    return min(found, key=lambda pair: pair[0])[1] if found else None


def segment_text(text: str) -> Segmentation:
    """Split a trajectory written with ``call_tool`` or ``tool_call`` markup into steps."""
    tags = _detect(text)
    n = len(text)
    steps: list[Step] = []
    step_start = 0
    pos = 0
    while tags is not None:
        call = tags.call_open.search(text, pos)
        if call is None:
            break
        action_end = _run(text, call.start(), tags.call_open, tags.call_close)
        next_call = tags.call_open.search(text, action_end)
        limit = next_call.start() if next_call else n
        obs = tags.obs_open.search(text, action_end, limit)
        observation: Span | None = None
        end = action_end
        if obs is not None:
            obs_end = _run(text, obs.start(), tags.obs_open, tags.obs_close)
            observation = (obs.start(), obs_end)
            end = obs_end
        steps.append(
            Step(
                index=len(steps),
                kind="tool",
                span=(step_start, end),
                action_span=(call.start(), action_end),
                observation_span=observation,
            )
        )
        step_start = pos = end
    steps = _close(text, steps, step_start)
    return Segmentation(
        markup=tags.markup if tags is not None else "none", text=text, steps=tuple(steps)
    )


def _close(text: str, steps: list[Step], rest_start: int) -> list[Step]:
    """Add the final step for trailing text, or stretch the last step to the end."""
    n = len(text)
    first = _skip_ws(text, rest_start)
    if first < n:
        last = n
        while last > first and text[last - 1].isspace():
            last -= 1
        steps.append(
            Step(index=len(steps), kind="final", span=(rest_start, n), action_span=(first, last))
        )
    elif steps and rest_start < n:
        tail = steps[-1]
        steps[-1] = Step(
            index=tail.index,
            kind=tail.kind,
            span=(tail.span[0], n),
            action_span=tail.action_span,
            observation_span=tail.observation_span,
            message_span=tail.message_span,
        )
    return steps


# --- message lists ------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str = ""
    """The arguments as sent (OpenAI sends a JSON string)."""
    id: str | None = None


@dataclass(frozen=True)
class ChatMessage:
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


@dataclass
class _Rendered:
    text: str = ""
    message_spans: list[Span] = field(default_factory=list)
    call_spans: list[Span | None] = field(default_factory=list)
    """Per rendered message: the span of its ``<tool_call>`` lines (assistant messages)."""


def _call_line(call: ToolCall) -> str:
    arguments: Any
    try:
        arguments = json.loads(call.arguments) if call.arguments else {}
    except json.JSONDecodeError:
        arguments = call.arguments
    body = json.dumps({"name": call.name, "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>{body}</tool_call>\n"


def render_messages(messages: Sequence[ChatMessage]) -> str:
    """The text a message-list trajectory is segmented on (prompt messages left out).

    assistant: its content, a newline, then one ``<tool_call>{"name", "arguments"}</tool_call>``
    line per call; tool: ``<tool_response>content</tool_response>``; a later user or system
    message: ``<user>content</user>`` (or ``<system>``). Every message ends with a newline.
    """
    return _render(messages[_prompt_length(messages) :]).text


def _prompt_length(messages: Sequence[ChatMessage]) -> int:
    n = 0
    while n < len(messages) and messages[n].role in ("system", "developer", "user"):
        n += 1
    return n


def _render(messages: Sequence[ChatMessage]) -> _Rendered:
    out = _Rendered()
    parts: list[str] = []
    pos = 0
    for message in messages:
        start = pos
        calls: Span | None = None
        if message.role == "assistant":
            chunk = message.content + "\n" if message.content else ""
            if message.tool_calls:
                lines = "".join(_call_line(c) for c in message.tool_calls)
                calls = (start + len(chunk), start + len(chunk) + len(lines) - 1)
                chunk += lines
        elif message.role == "tool":
            chunk = f"<tool_response>{message.content}</tool_response>\n"
        else:
            chunk = f"<{message.role}>{message.content}</{message.role}>\n"
        parts.append(chunk)
        pos += len(chunk)
        out.message_spans.append((start, pos))
        out.call_spans.append(calls)
    out.text = "".join(parts)
    return out


def segment_messages(messages: Sequence[ChatMessage]) -> Segmentation:
    """Split an OpenAI-style message list into steps (see the module rules)."""
    offset = _prompt_length(messages)
    body = messages[offset:]
    rendered = _render(body)
    text = rendered.text
    steps: list[Step] = []
    step_start = 0
    first_message = 0
    i = 0
    while i < len(body):
        calls = rendered.call_spans[i]
        if calls is None:
            i += 1
            continue
        j = i + 1
        while j < len(body) and body[j].role == "tool":
            j += 1
        observation: Span | None = None
        if j > i + 1:
            observation = (rendered.message_spans[i + 1][0], rendered.message_spans[j - 1][1] - 1)
        end = rendered.message_spans[j - 1][1]
        steps.append(
            Step(
                index=len(steps),
                kind="tool",
                span=(step_start, end),
                action_span=calls,
                observation_span=observation,
                message_span=(offset + first_message, offset + j),
            )
        )
        step_start, first_message, i = end, j, j
    if first_message < len(body):
        answers = [k for k in range(first_message, len(body)) if body[k].role == "assistant"]
        content = [k for k in answers if body[k].content.strip()]
        if content:
            k = content[-1]
            start, end = rendered.message_spans[k]
            steps.append(
                Step(
                    index=len(steps),
                    kind="final",
                    span=(step_start, len(text)),
                    action_span=(start, end - 1),
                    message_span=(offset + first_message, offset + len(body)),
                )
            )
        elif steps:
            tail = steps[-1]
            assert tail.message_span is not None
            steps[-1] = Step(
                index=tail.index,
                kind=tail.kind,
                span=(tail.span[0], len(text)),
                action_span=tail.action_span,
                observation_span=tail.observation_span,
                message_span=(tail.message_span[0], offset + len(body)),
            )
    return Segmentation(markup="messages", text=text, steps=tuple(steps), prompt_messages=offset)


def segment_steps(steps: Sequence[tuple[str, str | None]]) -> Segmentation:
    """Pre-split (action, observation) pairs, rendered one after the other."""
    parts: list[str] = []
    out: list[Step] = []
    pos = 0
    for action, observation in steps:
        start = pos
        parts.append(action + "\n")
        pos += len(action) + 1
        action_span = (start, start + len(action))
        observation_span: Span | None = None
        if observation is not None:
            parts.append(observation + "\n")
            observation_span = (pos, pos + len(observation))
            pos += len(observation) + 1
        out.append(
            Step(
                index=len(out),
                kind="tool",
                span=(start, pos),
                action_span=action_span,
                observation_span=observation_span,
            )
        )
    return Segmentation(markup="steps", text="".join(parts), steps=tuple(out))
