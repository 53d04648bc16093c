"""Step segmentation of the three ReAct markups (Co-ReAct §3.1)."""

from hypothesis import given
from hypothesis import strategies as st

from rubricate.steps.domain.segmentation import (
    ChatMessage,
    Segmentation,
    ToolCall,
    render_messages,
    segment_messages,
    segment_steps,
    segment_text,
)


def _text(seg: Segmentation, span: tuple[int, int] | None) -> str | None:
    return None if span is None else seg.text[span[0] : span[1]]


def assert_tiles(seg: Segmentation) -> None:
    """Step spans are contiguous from 0 to the end; sub-spans lie inside their step."""
    pos = 0
    for step in seg.steps:
        assert step.span[0] == pos
        assert step.span[0] <= step.action_span[0] <= step.action_span[1] <= step.span[1]
        if step.observation_span is not None:
            assert step.action_span[1] <= step.observation_span[0]
            assert step.observation_span[1] <= step.span[1]
        pos = step.span[1]
    assert pos == len(seg.text)


def test_call_tool_markup_with_tool_output() -> None:
    text = (
        "<think>plan the search</think>\n"
        '<call_tool name="google_search">mars orbiter units</call_tool>'
        "<tool_output>result one</tool_output>\n"
        'Now browse. <call_tool name="browse">https://x</call_tool>\n'
        "<tool_output>page text</tool_output>\n"
        "<answer>Pound-force vs newton.</answer>\n"
    )
    seg = segment_text(text)
    assert seg.markup == "call_tool"
    assert [s.kind for s in seg.steps] == ["tool", "tool", "final"]
    first, _, final = seg.steps
    assert _text(seg, first.action_span) == (
        '<call_tool name="google_search">mars orbiter units</call_tool>'
    )
    assert _text(seg, first.observation_span) == "<tool_output>result one</tool_output>"
    assert seg.action(0).startswith("<think>plan the search</think>")
    assert seg.history(0) == ""
    assert seg.history(1) == text[: first.span[1]]
    assert seg.action(1) == '\nNow browse. <call_tool name="browse">https://x</call_tool>'
    assert seg.observation(1) == "<tool_output>page text</tool_output>"
    assert _text(seg, final.action_span) == "<answer>Pound-force vs newton.</answer>"
    assert final.observation_span is None
    assert_tiles(seg)


def test_tool_call_markup_groups_parallel_calls() -> None:
    text = (
        '<tool_call>{"name": "search", "arguments": {"q": "a"}}</tool_call>\n'
        '<tool_call>{"name": "search", "arguments": {"q": "b"}}</tool_call>\n'
        "<tool_response>ra</tool_response>\n<tool_response>rb</tool_response>\n"
        '<tool_call>{"name": "browse"}</tool_call><tool_response>page</tool_response>\n'
    )
    seg = segment_text(text)
    assert seg.markup == "tool_call"
    assert len(seg.steps) == 2 and all(s.kind == "tool" for s in seg.steps)
    action = _text(seg, seg.steps[0].action_span)
    assert action is not None and action.count("<tool_call>") == 2
    assert seg.observation(0) == (
        "<tool_response>ra</tool_response>\n<tool_response>rb</tool_response>"
    )
    # trailing whitespace only: no final step, the last step runs to the end
    assert seg.steps[-1].span[1] == len(text)
    assert_tiles(seg)


def test_openai_messages_with_tool_calls() -> None:
    messages = [
        ChatMessage("system", "You are a research agent."),
        ChatMessage("user", "Why was the orbiter lost?"),
        ChatMessage(
            "assistant",
            "I will search first.",
            tool_calls=(ToolCall(name="search", arguments='{"q": "orbiter"}', id="c1"),),
        ),
        ChatMessage("tool", "NASA report: unit mismatch", tool_call_id="c1"),
        ChatMessage(
            "assistant",
            "",
            tool_calls=(
                ToolCall(name="browse", arguments='{"url": "u1"}'),
                ToolCall(name="browse", arguments="not json"),
            ),
        ),
        ChatMessage("tool", "page one"),
        ChatMessage("tool", "page two"),
        ChatMessage("assistant", "The thrusters' impulse was in pound-force seconds."),
    ]
    seg = segment_messages(messages)
    assert seg.markup == "messages" and seg.prompt_messages == 2
    assert seg.text == render_messages(messages)
    assert "You are a research agent" not in seg.text
    assert [s.kind for s in seg.steps] == ["tool", "tool", "final"]
    assert [s.message_span for s in seg.steps] == [(2, 4), (4, 7), (7, 8)]
    assert seg.action(0).startswith("I will search first.\n<tool_call>")
    assert '"name": "search"' in seg.action(0) and '"q": "orbiter"' in seg.action(0)
    assert seg.observation(0) == "<tool_response>NASA report: unit mismatch</tool_response>"
    action = _text(seg, seg.steps[1].action_span)
    assert action is not None and action.count("<tool_call>") == 2 and "not json" in action
    observation = seg.observation(1)
    assert observation is not None and "page one" in observation and "page two" in observation
    assert _text(seg, seg.steps[2].action_span) == (
        "The thrusters' impulse was in pound-force seconds."
    )
    assert_tiles(seg)


def test_messages_ending_on_a_tool_result_have_no_final_step() -> None:
    messages = [
        ChatMessage("user", "q"),
        ChatMessage("assistant", "", tool_calls=(ToolCall(name="search"),)),
        ChatMessage("tool", "r"),
    ]
    seg = segment_messages(messages)
    assert [s.kind for s in seg.steps] == ["tool"]
    assert seg.steps[0].message_span == (1, 3)
    assert_tiles(seg)


def test_text_without_tool_calls_is_one_final_step() -> None:
    seg = segment_text("  Just an answer.  ")
    assert seg.markup == "none"
    assert len(seg.steps) == 1 and seg.steps[0].kind == "final"
    assert seg.steps[0].span == (0, 19)
    assert _text(seg, seg.steps[0].action_span) == "Just an answer."
    assert segment_text("   ").steps == ()


def test_unclosed_call_runs_to_the_end() -> None:
    text = "<call_tool name='s'>q1</call_tool><tool_output>o</tool_output><call_tool>cut off"
    seg = segment_text(text)
    assert len(seg.steps) == 2
    assert seg.steps[1].action_span == (text.index("<call_tool>"), len(text))
    assert seg.steps[1].observation_span is None
    assert_tiles(seg)


def test_tags_inside_an_observation_do_not_start_a_step() -> None:
    text = (
        "<call_tool>q</call_tool><tool_output>the page says <call_tool>x</call_tool>"
        "</tool_output><answer>A</answer>"
    )
    seg = segment_text(text)
    assert [s.kind for s in seg.steps] == ["tool", "final"]
    assert seg.observation(0) == (
        "<tool_output>the page says <call_tool>x</call_tool></tool_output>"
    )


def test_the_markup_seen_first_wins() -> None:
    text = "<tool_call>a</tool_call><tool_response>r</tool_response><call_tool>b</call_tool>"
    seg = segment_text(text)
    assert seg.markup == "tool_call"
    assert len(seg.steps) == 2 and seg.steps[1].kind == "final"


def test_pre_split_steps() -> None:
    seg = segment_steps([("search q", "results"), ("answer A", None)])
    assert seg.markup == "steps"
    assert seg.text == "search q\nresults\nanswer A\n"
    assert seg.action(0) == "search q" and seg.observation(0) == "results"
    assert seg.history(1) == "search q\nresults\n"
    assert seg.observation(1) is None
    assert_tiles(seg)


_PIECES = st.sampled_from(
    [
        "text ",
        "\n",
        "<think>hmm</think>",
        "<call_tool name='s'>q</call_tool>",
        "<tool_output>o</tool_output>",
        "<call_tool>",
        "</tool_output>",
        "<answer>a</answer>",
        "  ",
    ]
)


@given(st.lists(_PIECES, max_size=12))
def test_spans_tile_any_call_tool_text(pieces: list[str]) -> None:
    seg = segment_text("".join(pieces))
    if seg.text.strip():
        assert seg.steps
        assert_tiles(seg)
    else:
        assert seg.steps == ()


def test_developer_messages_belong_to_the_prompt() -> None:
    messages = [
        ChatMessage("developer", "Use tools."),
        ChatMessage("user", "q"),
        ChatMessage("assistant", "done"),
    ]
    seg = segment_messages(messages)
    assert seg.prompt_messages == 2 and seg.text == "done\n"
    assert [s.kind for s in seg.steps] == ["final"] and seg.steps[0].message_span == (2, 3)
