"""A task as steps: the model's proposal checked by rules, the rules' plan otherwise, and the
pure steering rules (amendments, where they act, what the card says)."""

from __future__ import annotations

import json

import pytest

from app.core.tasks.stack import TaskStack
from app.core.tasks.steering import NEXT_STEP, ON_RESUME, RESTART, added_step, amend_effect, amendment, card_line
from app.core.tasks.steps import MAX_STEPS, MIN_STEPS, Step, check_steps, plan_for, plan_text, read_steps, rule_steps

#: Twenty varied task inputs: lists of actions, single goals, with and without format words.
TASK_INPUTS = [
    "Plan and draft the team offsite agenda with numbered steps",
    "Book the venue, send the invitations and order the food",
    "Write a project proposal for the new billing system",
    "Research three laptops under 1000 euros and compare them",
    "Prepare the quarterly report for the board",
    "Draft a blog post about our migration to PostgreSQL",
    "Clean up the shared drive and archive old files",
    "Create a study plan for the statistics exam",
    "Organise the move to the new office",
    "Collect the receipts, sort them by month and file the expense claim",
    "Write a cover letter for the data analyst job",
    "Summarise the customer interviews and list the top complaints",
    "Set up a weekly newsletter for the club",
    "Plan a birthday party for forty guests",
    "Review the contract, note the risks and email the lawyer",
    "Design a workshop on time management",
    "Translate the user guide into French",
    "Build a budget for next year's marketing",
    "Prepare a talk on graph databases for the meetup",
    "Pack for a two-week trip to Norway",
]


def _valid(steps: list[Step], goal: str) -> None:
    assert MIN_STEPS <= len(steps) <= MAX_STEPS, goal
    assert all(len(s.acceptance.split()) >= 2 for s in steps), goal
    assert all(s.depends_on and max(s.depends_on) <= n for n, s in enumerate(steps[1:], start=1)), goal
    assert check_steps(steps, goal) == [], goal


@pytest.mark.parametrize("goal", TASK_INPUTS)
def test_the_rules_plan_every_task_input_into_checked_steps(goal: str) -> None:
    plan = plan_for(goal, "", None)
    assert plan.source == "rules" and plan.problems == []
    _valid(plan.steps, goal)
    assert plan_text(goal, plan).splitlines()[0].startswith(f"Plan for \u201c{goal}\u201d ({len(plan.steps)} steps")


def test_listed_actions_become_one_step_each_in_order() -> None:
    assert [s.name for s in rule_steps(TASK_INPUTS[9])] == [
        "Collect the receipts", "Sort them by month", "File the expense claim"]
    assert [s.name for s in rule_steps(TASK_INPUTS[0])] == ["Plan the team offsite agenda",
                                                          "Draft the team offsite agenda"]
    assert [s.depends_on for s in rule_steps(TASK_INPUTS[14])] == [[], [1], [2]]


def test_a_proposal_that_passes_the_check_is_the_plan() -> None:
    proposal = {"steps": [{"name": "Choose the venue", "acceptance": "a venue is named", "depends_on": []},
                          {"name": "Draft the agenda", "acceptance": "each day is timed", "depends_on": [1]}]}
    plan = plan_for("Plan the offsite", "", json.dumps(proposal))
    assert plan.source == "model" and [s.name for s in plan.steps] == ["Choose the venue", "Draft the agenda"]


@pytest.mark.parametrize(("proposal", "problem"), [
    ("not json at all", "not JSON"),
    ({"plan": []}, "no list of steps"),
    ({"steps": [{"name": "Do it", "acceptance": "done now", "depends_on": []}]}, "1 steps"),
    ({"steps": [{"name": "Choose the venue", "acceptance": "x", "depends_on": []},
                {"name": "Draft the agenda", "acceptance": "a timed agenda", "depends_on": [1]}]}, "no acceptance"),
    ({"steps": [{"name": "Choose the venue", "acceptance": "a venue", "depends_on": [2]},
                {"name": "Draft the agenda", "acceptance": "a timed agenda", "depends_on": [1]}]}, "earlier steps"),
    ({"steps": [{"name": "Choose the venue", "acceptance": "a venue", "depends_on": []},
                {"name": "Choose the venue", "acceptance": "a venue", "depends_on": [1]}]}, "another step"),
    ({"steps": [{"name": "Plan the offsite", "acceptance": "it is planned", "depends_on": []},
                {"name": "Draft the agenda", "acceptance": "a timed agenda", "depends_on": [1]}]}, "the task"),
    ({"steps": [{"name": 3, "acceptance": "a venue"}]}, "not a name"),
])
def test_a_proposal_that_fails_the_check_falls_back_to_the_rules(proposal: object, problem: str) -> None:
    plan = plan_for("Plan the offsite", "", proposal)
    assert plan.source == "rules" and any(problem in p for p in plan.problems), plan.problems
    _valid(plan.steps, "Plan the offsite")


def test_read_steps_tidies_the_words() -> None:
    steps, problems = read_steps({"steps": [{"name": " Choose   the venue ", "acceptance": "a\nvenue", "depends_on": []}]})
    assert problems == [] and steps[0].name == "Choose the venue" and steps[0].acceptance == "a venue"


def test_amendments_lose_their_cue_and_asks_for_more_add_a_step() -> None:
    assert amendment("While you're at it, also add a budget section.") == "add a budget section"
    assert amendment("Meanwhile: use metric units") == "use metric units"
    step = added_step("add a budget section")
    assert step is not None and step.name == "Add a budget section" and "budget section" in step.acceptance
    assert added_step("use metric units") is None


def test_where_an_amendment_acts_and_what_the_card_says() -> None:
    stack = TaskStack()
    root = stack.create("Plan the offsite")
    stack.start(root.task_id)
    first = stack.create("Choose the venue", parent_task_id=root.task_id, acceptance="a venue", step=1)
    second = stack.create("Draft the agenda", parent_task_id=root.task_id, acceptance="timed", step=2,
                          depends_on=[first.task_id])
    steps = [first, second]
    assert amend_effect(stack, stack.get(root.task_id), live={steps[0].task_id}) == NEXT_STEP
    stack.run(first.task_id, "turn-1")
    stack.run(second.task_id, "turn-2")
    assert amend_effect(stack, stack.get(root.task_id), live={steps[1].task_id}) == RESTART
    assert amend_effect(stack, stack.get(root.task_id), live=set()) == ON_RESUME
    stack.pause(root.task_id)
    stack.amend(root.task_id, "use metric units")
    stack.note(root.task_id, "amended: use metric units (takes effect when the task runs again)")
    line = card_line(stack.get(root.task_id), stack.steps(root.task_id))
    assert line.startswith("paused") and "amended: use metric units" in line and "0/2 steps done" in line
