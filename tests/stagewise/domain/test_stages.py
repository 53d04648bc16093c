from rubricate.stagewise.domain.stages import parse_stages

PLAN = "<think>scope it</think><structured_plan><rubric>r</rubric></structured_plan>"
RESEARCH = '\n<call_tool name="search">q</call_tool><tool_output>o</tool_output>'
RESEARCH2 = "\n<think>digest</think><state_evaluation>enough</state_evaluation>"
REVIEW = "\n<think>audit</think><review><rubric_review>ok</rubric_review></review>"
ANSWER = "\n<answer>The answer.</answer>"


def test_full_trajectory_spans_cover_each_stage() -> None:
    text = PLAN + RESEARCH + RESEARCH2 + REVIEW + ANSWER
    spans = parse_stages(text)
    assert spans.missing == []
    assert spans.text(text, "plan") == PLAN
    plan, research, review, answer = (
        spans.spans[s] for s in ("plan", "research", "review", "answer")
    )
    assert plan == (0, len(PLAN))
    assert research is not None and review is not None and answer is not None
    assert research[0] == plan[1]
    # review starts at the last <think> before <review>, after the research loop
    assert text[review[0] :].startswith("<think>audit</think><review>")
    assert research[1] == review[0]
    assert text[review[0] : review[1]].endswith("</review>")
    assert answer == (text.index("<answer>"), len(text))


def test_missing_review_is_reported_not_guessed() -> None:
    text = PLAN + RESEARCH + ANSWER
    spans = parse_stages(text)
    assert spans.missing == ["review"]
    assert spans.spans["research"] == (len(PLAN), text.index("<answer>"))


def test_missing_plan_research_starts_at_first_tool_call() -> None:
    text = "preamble " + RESEARCH + ANSWER
    spans = parse_stages(text)
    assert spans.missing == ["plan", "review"]
    research = spans.spans["research"]
    assert research is not None and text[research[0] :].startswith("<call_tool")


def test_no_tool_use_means_no_research_stage() -> None:
    text = PLAN + "\nsome free text\n" + ANSWER
    assert parse_stages(text).missing == ["research", "review"]


def test_unclosed_review_is_missing_and_answer_runs_to_end() -> None:
    text = PLAN + RESEARCH + "<review>never closed" + ANSWER + " trailing"
    spans = parse_stages(text)
    assert "review" in spans.missing
    assert spans.spans["answer"] == (text.index("<answer>"), len(text))


def test_plain_text_has_every_stage_missing() -> None:
    assert parse_stages("just an answer").missing == ["plan", "research", "review", "answer"]


def test_answer_tag_inside_plan_is_not_the_answer() -> None:
    text = "<structured_plan>write the <answer> later</structured_plan>" + RESEARCH
    spans = parse_stages(text)
    assert spans.spans["answer"] is None
