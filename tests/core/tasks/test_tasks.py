"""Tasks as a stack (app.core.tasks.stack): the operations and their rules, the stack-aware context
within budget (the prompt's tasks section, app.core.context.sections.tasks), and which frame a build
works in."""

from __future__ import annotations

import pytest

from app.core.context.compiler import ContextCompiler
from app.core.context.sections.tasks import stack_items, task_items
from app.core.ports import WordTokenCounter
from app.core.tasks.stack import (
    WAITING_NOTE,
    LiveTask,
    TaskError,
    TaskInputs,
    TaskStack,
    count_steps,
    decide,
    decision_view,
    stack_view,
    summarize_result,
)
from app.core.types import BlockType, Priority, TaskStatus

CHILD_OUTPUT = ("The venue is booked at Quinta do Lago for 12 people. The deposit of 400 euros is paid. "
                "SECRET-DETAIL the caterer wants the menu by Friday and parking is behind the barn.")


def _offsite() -> tuple[TaskStack, dict[str, str]]:
    """root "Plan the offsite" → venue (complete), agenda (active) → slides (current, pending)."""
    s = TaskStack()
    root = s.create("Plan the team offsite", acceptance="a plan everyone agreed to")
    venue = s.create("Book the venue", parent_task_id=root.task_id)
    agenda = s.create("Draft the agenda", parent_task_id=root.task_id, acceptance="one page")
    s.start(venue.task_id)
    s.complete(venue.task_id, summarize_result(CHILD_OUTPUT), ["ev-venue"])
    s.start(agenda.task_id)
    slides = s.create("Make the slides", parent_task_id=agenda.task_id, acceptance="ten slides at most")
    food = s.create("Order food", parent_task_id=agenda.task_id)
    s.start(food.task_id)
    s.fail(food.task_id, "stopped by the user")
    return s, {"root": root.task_id, "venue": venue.task_id, "agenda": agenda.task_id,
               "slides": slides.task_id, "food": food.task_id}


def test_lifecycle_and_rules() -> None:
    s, ids = _offsite()
    assert [t.task_id for t in s.children(ids["root"])] == [ids["venue"], ids["agenda"]]  # creation order
    assert [t.name for t in s.path(ids["slides"])] == ["Plan the team offsite", "Draft the agenda", "Make the slides"]
    venue = s.get(ids["venue"])
    assert venue.status == TaskStatus.COMPLETE and venue.progress == 1.0
    assert venue.result_summary == "The venue is booked at Quinta do Lago for 12 people. The deposit of 400 euros is paid."
    assert s.get(ids["food"]).status == TaskStatus.FAILED
    assert s.current_frame(ids["root"]).task_id == ids["slides"]
    assert s.check() == []
    with pytest.raises(TaskError):
        s.create("Too late", parent_task_id=ids["venue"])  # a popped frame takes no subtasks
    with pytest.raises(TaskError):
        s.start(ids["venue"])  # complete is final
    # The agenda's own work ends while "slides" is open: it waits, then pops with the last subtask.
    changed = s.complete(ids["agenda"], "Agenda drafted.", ["ev-agenda"])
    assert [t.status for t in changed] == [TaskStatus.BLOCKED]
    assert WAITING_NOTE in s.get(ids["agenda"]).notes
    s.start(ids["slides"])
    changed = s.complete(ids["slides"], "Slides done.", ["ev-slides"])
    assert [(t.task_id, t.status) for t in changed] == [(ids["slides"], TaskStatus.COMPLETE),
                                                        (ids["agenda"], TaskStatus.COMPLETE)]
    assert WAITING_NOTE not in s.get(ids["agenda"]).notes
    assert s.get(ids["agenda"]).result_summary == "Agenda drafted."
    assert s.check() == []


def test_fail_cascades_to_open_subtasks() -> None:
    s = TaskStack()
    root = s.create("Root")
    child = s.create("Child", parent_task_id=root.task_id)
    grandchild = s.create("Grandchild", parent_task_id=child.task_id)
    changed = s.fail(root.task_id, "stopped")
    assert [t.task_id for t in changed] == [grandchild.task_id, child.task_id, root.task_id]
    assert all(t.status == TaskStatus.FAILED for t in s.tasks())
    assert s.get(child.task_id).error == "parent task failed: stopped"
    assert s.fail(root.task_id, "again") == []
    assert s.check() == []


def test_check_reports_broken_stacks() -> None:
    s = TaskStack()
    root = s.create("Root")
    a = s.create("A", parent_task_id=root.task_id)
    b = s.create("B", parent_task_id=root.task_id)
    s.start(a.task_id)
    s.start(b.task_id)
    s.put(root.model_copy(update={"status": TaskStatus.COMPLETE}))
    s.put(s.create("Orphan").model_copy(update={"parent_task_id": "missing"}))
    problems = " | ".join(s.check())
    assert "complete with open subtasks" in problems
    assert "2 active subtasks" in problems
    assert "parent missing does not exist" in problems


def test_stack_view_has_root_path_sibling_results_and_current_detail() -> None:
    s, ids = _offsite()
    items = stack_items(stack_view(s.tasks(), ids["slides"]))
    lines = {it.item_id: it for it in items}
    root = lines[f"task:{ids['root']}:root"]
    assert root.text == "Root goal: Plan the team offsite" and root.priority == Priority.MUST
    assert root.evidence_ids == (ids["root"],)
    path = lines[f"task:{ids['agenda']}:path"]
    assert "Draft the agenda (active)" in path.text and path.priority == Priority.HIGH
    current = lines[f"task:{ids['slides']}:current"]
    assert "Current task: Make the slides (pending)" in current.text and current.priority == Priority.MUST
    assert lines[f"task:{ids['slides']}:acceptance"].text.strip() == "Done when: ten slides at most"
    # siblings of the current frame: the failed one with its reason; the venue is not a sibling
    assert lines[f"task:{ids['food']}:failed"].text == "Failed: Order food (stopped by the user)"
    assert f"task:{ids['venue']}:result" not in lines
    assert all(it.evidence_ids for it in items)  # every line bound to evidence
    # Working on the agenda: its popped sibling contributes only its result, bound to its evidence.
    items = stack_items(stack_view(s.tasks(), ids["agenda"]))
    venue = next(it for it in items if it.item_id == f"task:{ids['venue']}:result")
    assert venue.priority == Priority.MEDIUM and venue.evidence_ids == ("ev-venue",)
    assert venue.text.startswith("Done: Book the venue → The venue is booked")
    assert not any("SECRET-DETAIL" in it.text for it in items)


def test_stack_view_fits_the_budget_keeping_the_path_first() -> None:
    s = TaskStack()
    root = s.create("Write the annual report for the garden club")
    parent = root
    for depth in range(4):
        parent = s.create(f"Section {depth}: gather the numbers for chapter {depth}", parent_task_id=parent.task_id)
    current = s.create("Check the totals of the last table", parent_task_id=parent.task_id,
                       acceptance="totals match the ledger")
    for n in range(12):  # many popped siblings with long results
        sib = s.create(f"Sibling {n}", parent_task_id=parent.task_id)
        s.complete(sib.task_id, " ".join(["result"] * 30) + f" number {n}.", [f"ev{n}"])
    counter = WordTokenCounter()
    items = stack_items(stack_view(s.tasks(), current.task_id))
    compiled = ContextCompiler(counter).compile(items, budget=120, quotas={"plan": 60, "state": 40})
    text = compiled.text()
    assert compiled.tokens <= 120
    assert "Root goal: Write the annual report for the garden club" in text
    assert "Current task: Check the totals of the last table" in text and "totals match the ledger" in text
    assert all(f"Section {d}:" in text for d in range(4))  # the whole path (high) before results (medium)
    dropped = {d.item_id for d in compiled.dropped}
    assert dropped and all(":result" in d for d in dropped)


def test_summaries_and_steps() -> None:
    assert summarize_result("Sure. " + CHILD_OUTPUT).startswith("Sure. The venue is booked")
    long = summarize_result("word " * 200)
    assert len(long) <= 240 and long.endswith("…")
    assert count_steps("1. Buy seeds\n2. Dig\n\n3) Water") == 3
    assert count_steps("first line\nsecond line") == 2


def test_decide_picks_the_frame_from_mode_and_branch() -> None:
    s = TaskStack()
    parent = s.create("Plan the offsite", turn_id="turn-p")
    done = s.create("Book the venue", parent_task_id=parent.task_id, turn_id="turn-v")
    s.complete(done.task_id, "Booked.", ["ev"])
    inputs = TaskInputs(tasks=s.tasks(), new_task_id="new")
    # a task continuing the open parent's branch is its subtask
    d = decide(inputs, mode="task", chain_turns=["turn-x", "turn-p"], goal="Draft the agenda", acceptance=["one page"], target=None)
    assert (d.path, d.current, d.parent, d.acceptance) == ("task", "new", parent.task_id, "one page")
    # continuing a popped subtask's branch: a sibling (child of its open parent)
    d = decide(inputs, mode="task", chain_turns=["turn-v"], goal="Order food", acceptance=[], target=None)
    assert d.parent == parent.task_id
    # explicit parent wins; a root elsewhere
    assert decide(inputs.model_copy(update={"parent_task_id": done.task_id}), mode="task", chain_turns=[],
                  goal="x", acceptance=[], target=None).parent is None  # popped: no subtasks
    assert decide(inputs, mode="task", chain_turns=[], goal="x", acceptance=[], target=None).parent is None
    # the new frame's context: root goal and the popped sibling's result
    items = task_items(decision_view(inputs, decide(inputs, mode="task", chain_turns=["turn-p"],
                                                    goal="Draft the agenda", acceptance=[], target=None)))
    texts = [it.text for it in items]
    assert "Root goal: Plan the offsite" in texts and "Done: Book the venue → Booked." in texts
    assert any("Current task: Draft the agenda (pending)" in t for t in texts)
    # interruption: the running task (with a live stream) is the target
    live = TaskInputs(tasks=s.tasks(), live=[LiveTask(task_id=parent.task_id, partial="1. Pick a date", tokens=4,
                                                      max_tokens=64, steps=1, evidence_id="snap")])
    d = decide(live, mode="interrupt", chain_turns=[], goal="", acceptance=[], target=None)
    assert (d.path, d.targets) == ("interrupt", [parent.task_id])
    items = task_items(decision_view(live, d))
    status = items[0]
    assert status.text == "Running task: Plan the offsite (pending, 1 steps, 4/64 tokens)"
    assert status.priority == Priority.MUST and status.segment == BlockType.STATE
    partial = next(it for it in items if "Output so far" in it.text)
    assert partial.evidence_ids == ("snap",)
    # without a running stream an interruption is answered as a question in the branch
    d = decide(TaskInputs(tasks=s.tasks()), mode="interrupt", chain_turns=["turn-p"], goal="", acceptance=[], target=None)
    assert (d.path, d.current) == ("qa", parent.task_id)
